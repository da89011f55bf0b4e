/* Fused forms of the elementwise family: one dispatch where the plain ops take two or more.
 * ew_glu records its own rule (one backward dispatch, ew_glu_bwd.wgsl); shapes its kernel does
 * not take go through the plain ops, which are differentiable too. */
#include "ops/elementwise/elementwise_fused.h"
#include "ops/elementwise/ew_ops.h"

#include <stdio.h>
#include <string.h>

typedef struct glu_attrs {
    ew_glu_act act;
} glu_attrs;

static const char *glu_name(ew_glu_act act) { return act == EW_GLU_SILU ? "swiglu" : "geglu"; }

/* The rule of out = act(gate)·up, in one pass over gate, up and dy (ew_glu_bwd.wgsl):
 * d_gate = act'(gate)·(dy·up), d_up = act(gate)·dy. act' is the unary op's own derivative
 * (ew_unary_df.wgsl: silu's or gelu_tanh's, as wgml_unary_backward takes it). Both are
 * written; one not wanted is dropped. */
static wgml_status glu_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const glu_attrs *at = (const glu_attrs *)op->attrs;
    wgml_tensor *gate = op->in[0], *up = op->in[1];
    if (dy->numel != gate->numel)
        return wgml_set_error(graph_ctx(g), WGML_ERR_SHAPE, "glu_backward: dy %s must have gate's shape %s", tshape(dy),
                              tshape(gate));
    wgml_tensor *out[2] = {graph_output(g, "glu_backward", WGML_F32, gate->rank, gate->shape),
                           graph_output(g, "glu_backward", WGML_F32, gate->rank, gate->shape)};
    char prelude[2048];
    snprintf(prelude, sizeof prelude, "const OP: u32 = %du; alias V = vec4<f32>; alias VB = vec4<bool>;\n%s",
             at->act == EW_GLU_SILU ? (int)WGML_UN_SILU : (int)WGML_UN_GELU_TANH, EW_WGSL_UNARY);
    struct { uint32_t n4, pad; float lo, hi; } p = {(uint32_t)(gate->numel / 4), 0, 0.0f, 0.0f};
    wgml_tensor *ro[3] = {gate, up, dy};
    bool ok = out[0] && out[1] &&
              !graph_dispatch(g, "glu_backward", "ew_glu_bwd", prelude, ro, 3, out, 2, &p, sizeof p,
                              ((uint64_t)p.n4 + 63) / 64);
    for (int i = 0; i < 2; i++) {
        if (ok && graph_op_wants(op, i)) dx[i] = out[i];
        else wgml_tensor_free(out[i]);
    }
    return grad_result(g, op, dx);
}

wgml_tensor *ew_glu(wgml_graph *g, wgml_tensor *gate, wgml_tensor *up, ew_glu_act act) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = glu_name(act);
    if (check_operand(ctx, g, op, "gate", gate, WGML_F32, 1, WGML_MAX_RANK) ||
        check_operand(ctx, g, op, "up", up, WGML_F32, 1, WGML_MAX_RANK))
        return NULL;
    wgml_tensor *in[2] = {gate, up};
    bool fits = gate->numel % 4 == 0 && gate->rank == up->rank && gate->numel / 4 < 0xFFFFFFFFll &&
                !memcmp(gate->shape, up->shape, sizeof(int64_t) * (size_t)gate->rank);
    if (!fits) return wgml_mul(g, act == EW_GLU_SILU ? wgml_silu(g, gate) : wgml_gelu(g, gate, 1), up);
    wgml_tensor *out = graph_output(g, op, WGML_F32, gate->rank, gate->shape);
    if (!out) return NULL;
    uint32_t n4 = (uint32_t)(gate->numel / 4);
    const char *prelude = act == EW_GLU_SILU ? "const ACT: u32 = 0u;\n" : "const ACT: u32 = 1u;\n";
    if (graph_dispatch(g, op, "ew_glu", prelude, in, 2, &out, 1, &n4, sizeof n4, ((uint64_t)n4 + 63) / 64)) {
        wgml_tensor_free(out);
        return NULL;
    }
    if (!graph_grad_enabled(g, in, 2)) return out;
    graph_op rec = {.name = op, .backward = glu_backward, .n_in = 2, .in = {gate, up}, .out = out};
    glu_attrs at = {act};
    memcpy(rec.attrs, &at, sizeof at);
    return graph_record_op(g, &rec);
}
