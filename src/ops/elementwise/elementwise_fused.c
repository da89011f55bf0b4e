/* Fused forms of the elementwise family for inference graphs: one dispatch where the plain
 * ops take two. They record no autograd rule, so with an input that needs a gradient they
 * record the plain ops instead. */
#include "ops/elementwise/elementwise_fused.h"

#include <string.h>

wgml_tensor *ew_glu(wgml_graph *g, wgml_tensor *gate, wgml_tensor *up, ew_glu_act act) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = act == EW_GLU_SILU ? "swiglu" : "geglu";
    if (check_operand(ctx, g, op, "gate", gate, WGML_F32, 1, WGML_MAX_RANK) ||
        check_operand(ctx, g, op, "up", up, WGML_F32, 1, WGML_MAX_RANK))
        return NULL;
    wgml_tensor *in[2] = {gate, up};
    bool fits = gate->numel % 4 == 0 && gate->rank == up->rank && gate->numel / 4 < 0xFFFFFFFFll &&
                !memcmp(gate->shape, up->shape, sizeof(int64_t) * (size_t)gate->rank);
    if (!fits || graph_grad_enabled(g, in, 2))
        return wgml_mul(g, act == EW_GLU_SILU ? wgml_silu(g, gate) : wgml_gelu(g, gate, 1), up);
    wgml_tensor *out = graph_output(g, op, WGML_F32, gate->rank, gate->shape);
    if (!out) return NULL;
    uint32_t n4 = (uint32_t)(gate->numel / 4);
    const char *prelude = act == EW_GLU_SILU ? "const ACT: u32 = 0u;\n" : "const ACT: u32 = 1u;\n";
    if (graph_dispatch(g, op, "ew_glu", prelude, in, 2, &out, 1, &n4, sizeof n4, ((uint64_t)n4 + 63) / 64)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}
