/* Backward of the unary elementwise ops and clamp (wgml_unary_backward, wgml_clamp_backward):
 * one kernel, ew_unary_bwd.wgsl, specialised per op by the prelude; vec4 when the element
 * count is a multiple of 4, 4 vectors per thread. */
#include "graph/graph.h"
#include "ops/elementwise/elementwise_grad.h"
#include "ops/elementwise/ew_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define UB_PT 4

static wgml_tensor *unary_bwd(wgml_graph *g, const char *op, int code, wgml_tensor *x, wgml_tensor *dy, float lo,
                              float hi) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_grad_pair(ctx, g, op, "x", x, dy)) return NULL;
    if (dy->rank != x->rank || memcmp(dy->shape, x->shape, sizeof(int64_t) * (size_t)x->rank) != 0) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: dy %s must have x's shape %s", op, tshape(dy), tshape(x));
        return NULL;
    }
    bool v4 = x->numel % 4 == 0;
    uint64_t nv = (uint64_t)x->numel / (v4 ? 4 : 1);
    if (nv >= 0xFFFFFFFFull - 256ull * UB_PT) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s has too many elements for 32-bit indexing", op, tshape(x));
        return NULL;
    }
    wgml_tensor *out = graph_output(g, op, WGML_F32, x->rank, x->shape);
    if (!out) return NULL;
    char prelude[1024];
    snprintf(prelude, sizeof prelude, "const OP: u32 = %du; const PT: u32 = %du; alias V = %s; alias VB = %s;\n%s", code,
             UB_PT, v4 ? "vec4<f32>" : "f32", v4 ? "vec4<bool>" : "bool", EW_WGSL_UNARY);
    struct { uint32_t nv, pad; float lo, hi; } p = {(uint32_t)nv, 0, lo, hi};
    wgml_tensor *ro[2] = {x, dy};
    if (graph_dispatch(g, op, "ew_unary_bwd", prelude, ro, 2, &out, 1, &p, sizeof p,
                       (nv + 256 * UB_PT - 1) / (256 * UB_PT))) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

wgml_tensor *wgml_unary_backward(wgml_graph *g, wgml_unary_op op, wgml_tensor *x, wgml_tensor *dy) {
    if (!g) return NULL;
    if ((unsigned)op >= (unsigned)EW_N_UNARY) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "unary_backward: unknown op %d", (int)op);
        return NULL;
    }
    return unary_bwd(g, "unary_backward", (int)op, x, dy, 0.0f, 0.0f);
}

wgml_tensor *wgml_clamp_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *dy, float lo, float hi) {
    if (!g) return NULL;
    if (isnan(lo) || isnan(hi)) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "clamp_backward: bounds must not be NaN (lo %g, hi %g)", (double)lo,
                       (double)hi);
        return NULL;
    }
    return unary_bwd(g, "clamp_backward", EW_UN_CLAMP, x, dy, lo, hi);
}
