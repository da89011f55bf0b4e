/* Backward of softmax and log_softmax along any dim (wgml_softmax_backward,
 * wgml_log_softmax_backward). Contiguous rows longer than a few elements: one workgroup per row
 * (reduce_softmax_bwd_rows.wgsl); strided or very short rows: one thread per row
 * (reduce_softmax_bwd_cols.wgsl). */
#include "graph/graph.h"
#include "ops/reduce/wg_reduce.h"

#include <stdio.h>
#include <string.h>

static wgml_tensor *softmax_bwd_impl(wgml_graph *g, const char *op, bool log_form, wgml_tensor *y, wgml_tensor *dy,
                                     int dim) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_grad_pair(ctx, g, op, "y", y, dy)) return NULL;
    if (y->rank == 0) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: y must have rank 1 to %d, got shape %s", op, WGML_MAX_RANK, tshape(y));
        return NULL;
    }
    if (dy->rank != y->rank || memcmp(dy->shape, y->shape, sizeof(int64_t) * (size_t)y->rank) != 0) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: dy %s must have y's shape %s", op, tshape(dy), tshape(y));
        return NULL;
    }
    if ((uint64_t)y->numel >= 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: y %s has too many elements for 32-bit indexing", op, tshape(y));
        return NULL;
    }
    int d = dim < 0 ? dim + y->rank : dim;
    if (d < 0 || d >= y->rank) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: dim %d is out of range for y %s", op, dim, tshape(y));
        return NULL;
    }
    int64_t outer = 1, n = y->shape[d], inner = 1;
    for (int i = 0; i < d; i++) outer *= y->shape[i];
    for (int i = d + 1; i < y->rank; i++) inner *= y->shape[i];
    wgml_tensor *out = graph_output(g, op, WGML_F32, y->rank, y->shape);
    if (!out) return NULL;
    struct { uint32_t n_rows, n, inner, pad; } p = {(uint32_t)(outer * inner), (uint32_t)n, (uint32_t)inner, 0};
    wgml_tensor *ro[2] = {y, dy};
    char prelude[128];
    wgml_status s;
    if (inner > 1 || n <= 16) {
        snprintf(prelude, sizeof prelude, "const LOG: bool = %s;\n", log_form ? "true" : "false");
        s = graph_dispatch(g, op, "reduce_softmax_bwd_cols", prelude, ro, 2, &out, 1, &p, sizeof p,
                           ((uint64_t)(outer * inner) + 255) / 256);
    } else {
        uint32_t wg = row_workgroup((uint64_t)n);
        snprintf(prelude, sizeof prelude, "const LOG: bool = %s; const WG: u32 = %uu;\n", log_form ? "true" : "false", wg);
        s = graph_dispatch(g, op, "reduce_softmax_bwd_rows", prelude, ro, 2, &out, 1, &p, sizeof p, (uint64_t)outer);
    }
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

wgml_tensor *wgml_softmax_backward(wgml_graph *g, wgml_tensor *y, wgml_tensor *dy, int dim) {
    return softmax_bwd_impl(g, "softmax_backward", false, y, dy, dim);
}
wgml_tensor *wgml_log_softmax_backward(wgml_graph *g, wgml_tensor *y, wgml_tensor *dy, int dim) {
    return softmax_bwd_impl(g, "log_softmax_backward", true, y, dy, dim);
}
