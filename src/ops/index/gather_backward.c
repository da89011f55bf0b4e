/* Backward of gather (wgml_gather_backward): a scatter-add into zeros of x's shape without
 * atomics, the kernel of gather's autograd rule (grad_index_scatter, index_scatter.wgsl: one
 * thread per element of dx scans the index.shape[dim] entries of its line, so the cost is
 * numel(x) · index.shape[dim] and the result is deterministic). */
#include "ops/index/index_grad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wgml_tensor *wgml_gather_backward(wgml_graph *g, wgml_tensor *x, int dim, wgml_tensor *index, wgml_tensor *dy) {
    if (!g) return NULL;
    const char *op = "gather_backward";
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "x", x) || check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK) ||
        check_tensor(ctx, op, "index", index) || check_dtype(ctx, op, "index", index, WGML_I32) ||
        check_tensor(ctx, op, "dy", dy) || check_dtype(ctx, op, "dy", dy, WGML_F32))
        return NULL;
    if (check_graph(ctx, g, op, "x", x)) return NULL;
    if (check_same_graph(ctx, op, x, index) || check_same_graph(ctx, op, x, dy)) return NULL;
    if (dim < -x->rank || dim >= x->rank) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: dim %d is out of range for x %s (rank %d)", op, dim, tshape(x), x->rank);
        return NULL;
    }
    int d = dim < 0 ? dim + x->rank : dim;
    if (index->rank != x->rank) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: index %s must have the rank of x %s", op, tshape(index), tshape(x));
        return NULL;
    }
    for (int i = 0; i < x->rank; i++)
        if (i != d && index->shape[i] > x->shape[i]) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: index %s is larger than x %s in dim %d (gather dim %d)", op,
                           tshape(index), tshape(x), i, d);
            return NULL;
        }
    if (dy->rank != index->rank || memcmp(dy->shape, index->shape, sizeof(int64_t) * (size_t)index->rank) != 0) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: dy %s must have index's shape %s", op, tshape(dy), tshape(index));
        return NULL;
    }
    if ((uint64_t)x->numel >= 0xFFFFFFFFull || (uint64_t)index->numel >= 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s or index %s is too large for 32-bit indexing", op, tshape(x),
                       tshape(index));
        return NULL;
    }
    int64_t size = x->shape[d];
    if (graph_is_eager(g)) { /* indices out of [-size, size) are an error (built graph: clamped) */
        int32_t *h = malloc((size_t)index->nbytes);
        if (!h) {
            wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
            return NULL;
        }
        wgml_status s = wgml_tensor_read(index, h, (size_t)index->nbytes);
        for (int64_t i = 0; !s && i < index->numel; i++)
            if (h[i] < -size || h[i] >= size)
                s = wgml_set_error(ctx, WGML_ERR_ARG, "%s: index element %lld = %d is out of range [%lld, %lld)", op,
                                   (long long)i, (int)h[i], (long long)-size, (long long)size);
        free(h);
        if (s) return NULL;
    }
    return grad_index_scatter(g, op, dy, index, d, x->rank, x->shape, false);
}
