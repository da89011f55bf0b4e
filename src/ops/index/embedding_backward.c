/* Backward of embedding (wgml_embedding_backward): dW[v, :] = Σ dy[p, :] over the positions p
 * with idx[p] == v, in increasing p, without float atomics. Five passes:
 *   index_ebwd_count  per-row counts (integer atomics: exact)           O(N)
 *   index_ebwd_scan   bucket offsets (one workgroup)                     O(V)
 *   index_ebwd_fill   positions into their buckets (any order)           O(N)
 *   index_ebwd_sort   each bucket ordered by position (rank counting)    O(Σ_v count_v²)
 *   index_ebwd_sum    one thread per element of dW sums its bucket       O(V·D + N·D)
 * The result is the same bits on every run. The sort pass is quadratic in a bucket's size
 * only: 4096 positions all on one row cost 16.8M comparisons. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wgml_tensor *wgml_embedding_backward(wgml_graph *g, wgml_tensor *idx, wgml_tensor *dy, int64_t num_embeddings) {
    if (!g) return NULL;
    const char *op = "embedding_backward";
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "idx", idx) || check_dtype(ctx, op, "idx", idx, WGML_I32) ||
        check_tensor(ctx, op, "dy", dy) || check_dtype(ctx, op, "dy", dy, WGML_F32))
        return NULL;
    if (check_graph(ctx, g, op, "idx", idx)) return NULL;
    if (check_same_graph(ctx, op, idx, dy)) return NULL;
    if (num_embeddings < 1 || num_embeddings >= (int64_t)1 << 31) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: num_embeddings %lld must be in [1, 2^31)", op, (long long)num_embeddings);
        return NULL;
    }
    bool ok = dy->rank == idx->rank + 1;
    for (int i = 0; ok && i < idx->rank; i++) ok = dy->shape[i] == idx->shape[i];
    if (!ok) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: dy %s must be idx's shape %s followed by the embedding size", op,
                       tshape(dy), tshape(idx));
        return NULL;
    }
    int64_t V = num_embeddings, D = dy->shape[dy->rank - 1], N = idx->numel;
    if ((uint64_t)dy->numel >= 0xFFFFFFFFull || (uint64_t)(V * D) >= 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: dy %s or the table [%lld, %lld] is too large for 32-bit indexing", op,
                       tshape(dy), (long long)V, (long long)D);
        return NULL;
    }
    /* eager graph: ids out of [-V, V) are an error naming the first one (built graph: clamped) */
    if (graph_is_eager(g)) {
        int32_t *h = malloc((size_t)idx->nbytes);
        if (!h) {
            wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
            return NULL;
        }
        wgml_status s = wgml_tensor_read(idx, h, (size_t)idx->nbytes);
        for (int64_t i = 0; !s && i < N; i++)
            if (h[i] < -V || h[i] >= V)
                s = wgml_set_error(ctx, WGML_ERR_ARG, "%s: idx element %lld = %d is out of range [%lld, %lld)", op,
                                   (long long)i, (int)h[i], (long long)-V, (long long)V);
        free(h);
        if (s) return NULL;
    }
    int64_t wshape[2] = {V, D}, v1 = V + 1;
    wgml_tensor *dw = graph_output(g, op, WGML_F32, 2, wshape);
    wgml_tensor *cnt = dw ? graph_output(g, op, WGML_U32, 1, &V) : NULL;
    wgml_tensor *off = cnt ? graph_output(g, op, WGML_U32, 1, &v1) : NULL;
    wgml_tensor *list = off ? graph_output(g, op, WGML_U32, 1, &N) : NULL;
    wgml_tensor *sorted = list ? graph_output(g, op, WGML_U32, 1, &N) : NULL;
    wgml_status s = sorted ? WGML_OK : wgml_last_status(ctx);
    struct { uint32_t n, v, d, pad; } p = {(uint32_t)N, (uint32_t)V, (uint32_t)D, 0};
    uint64_t wg_n = ((uint64_t)N + 255) / 256;
    if (!s) s = graph_fill_bits(g, cnt, 0);
    if (!s) s = graph_dispatch(g, op, "index_ebwd_count", "", &idx, 1, &cnt, 1, &p, sizeof p, wg_n);
    if (!s) s = graph_dispatch(g, op, "index_ebwd_scan", "", &cnt, 1, &off, 1, &p, sizeof p, 1);
    if (!s) {
        wgml_tensor *ro[2] = {idx, off}, *rw[2] = {cnt, list};
        s = graph_dispatch(g, op, "index_ebwd_fill", "", ro, 2, rw, 2, &p, sizeof p, wg_n);
    }
    if (!s) {
        wgml_tensor *ro[3] = {idx, off, list};
        s = graph_dispatch(g, op, "index_ebwd_sort", "", ro, 3, &sorted, 1, &p, sizeof p, wg_n);
    }
    if (!s) { /* vec4 sums when D % 4 == 0: p.d counts vectors per row */
        bool v4 = D % 4 == 0;
        p.d = (uint32_t)(v4 ? D / 4 : D);
        wgml_tensor *ro[3] = {dy, off, sorted};
        s = graph_dispatch(g, op, "index_ebwd_sum", v4 ? "alias V = vec4<f32>;\n" : "alias V = f32;\n", ro, 3, &dw, 1,
                           &p, sizeof p, ((uint64_t)V * p.d + 255) / 256);
    }
    wgml_tensor_free(cnt);
    wgml_tensor_free(off);
    wgml_tensor_free(list);
    wgml_tensor_free(sorted);
    if (s) {
        wgml_tensor_free(dw);
        return NULL;
    }
    return dw;
}
