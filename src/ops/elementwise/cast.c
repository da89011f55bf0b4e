/* wgml_cast: dtype conversion of a computed tensor (f32, i32, bool), one kernel (ew_cast.wgsl)
 * whose prelude names the two dtypes. It is its own small op rather than a mode of the
 * broadcasting kernels: it has one operand, no broadcast, and reads and writes words of
 * whatever dtype. Not differentiable (the conversions to and from integers have no gradient). */
#include "graph/graph.h"

#include <stdio.h>

static bool castable(wgml_dtype d) { return d == WGML_F32 || d == WGML_I32 || d == WGML_BOOL; }

wgml_tensor *wgml_cast(wgml_graph *g, wgml_tensor *x, wgml_dtype dtype) {
    if (!g) return NULL;
    const char *op = "cast";
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "x", x) || check_graph(ctx, g, op, "x", x)) return NULL;
    if (!castable(x->dtype) || !castable(dtype)) {
        wgml_set_error(ctx, WGML_ERR_DTYPE, "cast: %s -> %s: only f32, i32 and bool convert",
                       wgml_dtype_name(x->dtype), wgml_dtype_name(dtype));
        return NULL;
    }
    int64_t n = x->numel;
    if (n >= ((int64_t)1 << 31)) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "cast: %lld elements is more than the kernel indexes", (long long)n);
        return NULL;
    }
    wgml_tensor *out = graph_output(g, op, dtype, x->rank, x->shape);
    if (!out) return NULL;
    char pre[64];
    snprintf(pre, sizeof pre, "const IN: u32 = %du;\nconst OUT: u32 = %du;\n", (int)x->dtype, (int)dtype);
    uint32_t nw = (uint32_t)((n + 3) / 4), u[4] = {(uint32_t)n, nw, 0, 0};
    if (graph_dispatch(g, op, "ew_cast", pre, &x, 1, &out, 1, u, sizeof u, (nw + 255) / 256)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}
