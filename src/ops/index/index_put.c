/* index_put: PyTorch's x.index_put(indices, values, accumulate) for index tensors on the leading
 * dims of x (index_put.wgsl does the put; the flat row of each entry is computed here with the
 * integer elementwise ops), and its gather twin, x[indices] (wgml_index_tensor: index_select of
 * the flat rows).
 *
 * The k index tensors (i32, k <= rank of x) broadcast together to a shape B; entry p of B puts
 * values[p, ...] (values broadcast to B + x.shape[k:]) into x[idx0[p], ..., idx(k-1)[p], ...].
 * A negative index counts from the end. In the eager graph every index is checked against its
 * dim (an error names it); in a built graph an index outside [-size, size) is not checked: it is
 * taken modulo its dim's size (nothing is read or written outside a tensor). No gradient. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct put_params {
    uint32_t n, inner, entries, acc;
} put_params;

/* Eager graph only: the first index outside [-size, size) is an error naming it. */
static wgml_status check_range(wgml_graph *g, const char *op, int k, wgml_tensor *idx, int64_t size) {
    if (!graph_is_eager(g)) return WGML_OK;
    wgml_ctx *ctx = graph_ctx(g);
    int32_t *h = malloc((size_t)idx->nbytes + 4);
    if (!h) return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    wgml_status s = wgml_tensor_read(idx, h, (size_t)idx->nbytes);
    for (int64_t i = 0; !s && i < idx->numel; i++)
        if (h[i] < -size || h[i] >= size)
            s = wgml_set_error(ctx, WGML_ERR_ARG, "%s: indices[%d][%lld] = %d is out of range [%lld, %lld)", op, k,
                               (long long)i, (int)h[i], (long long)-size, (long long)size);
    free(h);
    return s;
}

/* Frees the intermediates (eager: the recorded dispatches hold their ranges; built graph: a
 * no-op) and returns out. */
static wgml_tensor *done(wgml_tensor **tmp, int n, wgml_tensor *out) {
    for (int i = 0; i < n; i++) wgml_tensor_free(tmp[i]);
    return out;
}

/* The flat row over x's first k dims of each entry: Σ wrap(idx_d) · stride_d, wrap(i) =
 * i − ⌊i / size⌋·size (i + size for a negative index in range, i modulo size for any), the
 * integer ops broadcasting the index tensors together. Intermediates go to tmp[*nt...] (the
 * result among them); NULL with an error set. */
static wgml_tensor *flat_rows(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *const *indices, int k,
                              wgml_tensor **tmp, int *nt) {
    wgml_ctx *ctx = graph_ctx(g);
    if (!indices || k < 1 || k > x->rank) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %d index tensors for x %s (1 to its rank)", op, k, tshape(x));
        return NULL;
    }
    int64_t rows = 1;
    for (int d = 0; d < k; d++) rows *= x->shape[d];
    if (x->numel >= ((int64_t)1 << 31) || rows >= ((int64_t)1 << 31)) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s has more than 2^31 elements", op, tshape(x));
        return NULL;
    }
    wgml_tensor *flat = NULL;
    int64_t stride = rows;
    for (int d = 0; d < k; d++) {
        char arg[32];
        snprintf(arg, sizeof arg, "indices[%d]", d);
        wgml_tensor *t = indices[d];
        if (check_tensor(ctx, op, arg, t) || check_graph(ctx, g, op, arg, t) || check_dtype(ctx, op, arg, t, WGML_I32) ||
            check_range(g, op, d, t, x->shape[d]))
            return NULL;
        stride /= x->shape[d];
        float size = (float)x->shape[d];
        wgml_tensor *q = tmp[(*nt)++] = wgml_binary_scalar(g, WGML_BIN_DIV_FLOOR, t, size, 1.0f);
        wgml_tensor *w = tmp[(*nt)++] = q ? wgml_binary_scalar(g, WGML_BIN_MUL, q, -size, 1.0f) : NULL;
        w = tmp[(*nt)++] = w ? wgml_add(g, t, w, 1.0f) : NULL;
        if (w && stride != 1) w = tmp[(*nt)++] = wgml_binary_scalar(g, WGML_BIN_MUL, w, (float)stride, 1.0f);
        flat = !w ? NULL : flat ? (tmp[(*nt)++] = wgml_add(g, flat, w, 1.0f)) : w;
        if (!flat) return NULL;
    }
    return flat;
}

wgml_tensor *wgml_index_put(wgml_graph *g, wgml_tensor *x, wgml_tensor *const *indices, int k, wgml_tensor *values,
                            int accumulate) {
    const char *op = "index_put";
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "x", x) || check_graph(ctx, g, op, "x", x) || check_tensor(ctx, op, "values", values) ||
        check_graph(ctx, g, op, "values", values))
        return NULL;
    if (x->dtype != WGML_F32 && x->dtype != WGML_I32) {
        wgml_set_error(ctx, WGML_ERR_DTYPE, "index_put: x must be f32 or i32, got %s", wgml_dtype_name(x->dtype));
        return NULL;
    }
    if (check_dtype(ctx, op, "values", values, x->dtype)) return NULL;
    int64_t rows = 1;
    for (int d = 0; d < k; d++) rows *= x->shape[d];
    wgml_tensor *tmp[4 * WGML_MAX_RANK + 2];
    int nt = 0;
    wgml_tensor *flat = flat_rows(g, op, x, indices, k, tmp, &nt);
    if (!flat) return done(tmp, nt, NULL);
    /* values broadcast to B + x.shape[k:], viewed as [P, inner] */
    int64_t shape[WGML_MAX_RANK], inner = x->numel / rows, entries = flat->numel;
    int rank = flat->rank + x->rank - k;
    if (rank > WGML_MAX_RANK) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "index_put: the indices' shape %s and x %s give rank over 8", tshape(flat),
                       tshape(x));
        return done(tmp, nt, NULL);
    }
    memcpy(shape, flat->shape, sizeof(int64_t) * (size_t)flat->rank);
    memcpy(shape + flat->rank, x->shape + k, sizeof(int64_t) * (size_t)(x->rank - k));
    int64_t bshape[WGML_MAX_RANK];
    int brank;
    if (broadcast_shapes(rank, shape, values->rank, values->shape, &brank, bshape) || brank != rank ||
        memcmp(bshape, shape, sizeof(int64_t) * (size_t)rank)) {
        char want[SHAPE_STR_LEN];
        shape_str(want, sizeof want, rank, shape);
        wgml_set_error(ctx, WGML_ERR_SHAPE, "index_put: values %s do not broadcast to %s (the indices' shape, then x's "
                       "dims past the indexed ones)", tshape(values), want);
        return done(tmp, nt, NULL);
    }
    wgml_tensor *v = values;
    if (values->numel != entries * inner && !(v = tmp[nt++] = wgml_expand_copy(g, values, rank, shape)))
        return done(tmp, nt, NULL);
    wgml_tensor *out = graph_output(g, op, x->dtype, x->rank, x->shape);
    if (!out) return done(tmp, nt, NULL);
    put_params p = {(uint32_t)x->numel, (uint32_t)inner, (uint32_t)entries, accumulate ? 1u : 0u};
    wgml_tensor *ro[3] = {x, flat, v};
    const char *prelude = x->dtype == WGML_I32 ? "alias E = i32;\n" : "alias E = f32;\n";
    if (graph_dispatch(g, op, "index_put", prelude, ro, 3, &out, 1, &p, sizeof p, ((uint64_t)x->numel + 255) / 256)) {
        wgml_tensor_free(out);
        return done(tmp, nt, NULL);
    }
    return done(tmp, nt, out);
}

wgml_tensor *wgml_index_tensor(wgml_graph *g, wgml_tensor *x, wgml_tensor *const *indices, int k) {
    const char *op = "index_tensor";
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "x", x) || check_graph(ctx, g, op, "x", x)) return NULL;
    wgml_tensor *tmp[4 * WGML_MAX_RANK + 4];
    int nt = 0;
    wgml_tensor *flat = flat_rows(g, op, x, indices, k, tmp, &nt);
    if (!flat) return done(tmp, nt, NULL);
    int64_t rows = 1, shape[WGML_MAX_RANK];
    for (int d = 0; d < k; d++) rows *= x->shape[d];
    int rank = flat->rank + x->rank - k;
    if (rank > WGML_MAX_RANK) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: the indices' shape %s and x %s give rank over 8", op, tshape(flat),
                       tshape(x));
        return done(tmp, nt, NULL);
    }
    /* x as [rows, x.shape[k:]...], its rows selected by the flat index, then B + x.shape[k:] */
    int64_t xs[WGML_MAX_RANK], n = flat->numel;
    xs[0] = rows;
    memcpy(xs + 1, x->shape + k, sizeof(int64_t) * (size_t)(x->rank - k));
    memcpy(shape, flat->shape, sizeof(int64_t) * (size_t)flat->rank);
    memcpy(shape + flat->rank, x->shape + k, sizeof(int64_t) * (size_t)(x->rank - k));
    wgml_tensor *xv = tmp[nt++] = wgml_reshape(g, x, x->rank - k + 1, xs);
    wgml_tensor *fi = tmp[nt++] = xv ? wgml_reshape(g, flat, 1, &n) : NULL;
    wgml_tensor *sel = tmp[nt++] = fi ? wgml_index_select(g, xv, 0, fi) : NULL;
    return done(tmp, nt, sel ? wgml_reshape(g, sel, rank, shape) : NULL);
}
