/* median along one dim with its index (median.wgsl: one workgroup per row, the lower median by
 * counting each candidate's sorted position; ties resolved by a stable order). No gradient. */
#include "graph/graph.h"

#include <string.h>

wgml_tensor *wgml_median(wgml_graph *g, wgml_tensor *x, int dim, int keepdim, wgml_tensor **indices) {
    const char *op = "median";
    if (indices) *indices = NULL;
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "x", x) || check_graph(ctx, g, op, "x", x) || check_dtype(ctx, op, "x", x, WGML_F32))
        return NULL;
    if (x->rank == 0 || dim < -x->rank || dim >= x->rank) {
        wgml_set_error(ctx, WGML_ERR_ARG, "median: dim %d is out of range for x %s (rank 1 or more)", dim, tshape(x));
        return NULL;
    }
    int d = dim < 0 ? dim + x->rank : dim;
    if (x->numel >= ((int64_t)1 << 31)) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "median: x %s has more than 2^31 elements", tshape(x));
        return NULL;
    }
    int64_t len = x->shape[d], inner = 1, shape[WGML_MAX_RANK];
    for (int i = d + 1; i < x->rank; i++) inner *= x->shape[i];
    int rank = 0;
    for (int i = 0; i < x->rank; i++)
        if (i != d) shape[rank++] = x->shape[i];
        else if (keepdim) shape[rank++] = 1;
    wgml_tensor *outs[2] = {graph_output(g, op, WGML_F32, rank, shape), graph_output(g, op, WGML_I32, rank, shape)};
    if (!outs[0] || !outs[1]) {
        wgml_tensor_free(outs[0]);
        wgml_tensor_free(outs[1]);
        return NULL;
    }
    struct { uint32_t rows, len, inner, pad; } p = {(uint32_t)(x->numel / len), (uint32_t)len, (uint32_t)inner, 0};
    if (graph_dispatch(g, op, "median", "", &x, 1, outs, 2, &p, sizeof p, p.rows)) {
        wgml_tensor_free(outs[0]);
        wgml_tensor_free(outs[1]);
        return NULL;
    }
    if (indices) *indices = outs[1];
    else wgml_tensor_free(outs[1]);
    return outs[0];
}
