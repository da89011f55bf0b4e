/* Indexing: gather, index_select, embedding (int32 indices, data of any dtype).
 *
 * Index range: an index must lie in [-size, size); a negative one counts from the end, as in
 * PyTorch. In the eager graph the handler reads the index tensor back (a sync with the GPU
 * and a copy of numel*4 bytes; index tensors are small) and reports the first index out of
 * range as an error naming it. In a built graph the indices change from run to run, so the
 * kernels clamp instead: a negative index is wrapped by +size and the result clamped into
 * [0, size - 1] (so 50000 reads row size-1 and -50000 reads row 0). No index ever reads
 * outside its tensor. */
#include "graph/graph.h"
#include "ops/index/index_grad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Must match the Params struct of index_take.wgsl. */
typedef struct take_params {
    uint32_t shape[8], xstr[8];
    uint32_t n, rank, dim, size;
} take_params;

typedef struct rows_params {
    uint32_t n, inner, nsel, size;
} rows_params;

#define TAKE_PER 4 /* elements per thread (4-byte data) in index_take.wgsl */
#define ROWS_PER 4 /* units per thread in index_rows.wgsl */
#define U32_LIMIT ((int64_t)1 << 31)

static wgml_status check_data(wgml_graph *g, const char *op, const char *arg, wgml_tensor *t) {
    wgml_ctx *ctx = graph_ctx(g);
    wgml_status s = check_tensor(ctx, op, arg, t);
    if (s) return s;
    if ((s = check_graph(ctx, g, op, arg, t))) return s;
    if (t->numel >= U32_LIMIT)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %s %s has %lld elements; at most 2^31 are supported", op, arg,
                              tshape(t), (long long)t->numel);
    return WGML_OK;
}

static wgml_status check_index(wgml_graph *g, const char *op, const char *arg, wgml_tensor *t) {
    wgml_status s = check_data(g, op, arg, t);
    return s ? s : check_dtype(graph_ctx(g), op, arg, t, WGML_I32);
}

/* Eager graph only: reads the indices back and rejects the first one outside [-size, size),
 * naming its position (flat for rank <= 1, else as coordinates). */
static wgml_status check_range_host(wgml_graph *g, const char *op, const char *arg, wgml_tensor *idx, int64_t size) {
    if (!graph_is_eager(g)) return WGML_OK; /* built graph: the kernels clamp */
    wgml_ctx *ctx = graph_ctx(g);
    int32_t *h = malloc((size_t)idx->nbytes);
    if (!h) return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    wgml_status s = wgml_tensor_read(idx, h, (size_t)idx->nbytes);
    for (int64_t i = 0; !s && i < idx->numel; i++) {
        if (h[i] >= -size && h[i] < size) continue;
        char pos[SHAPE_STR_LEN];
        if (idx->rank <= 1) {
            snprintf(pos, sizeof pos, "[%lld]", (long long)i);
        } else {
            int64_t c[WGML_MAX_RANK], r = i;
            for (int d = idx->rank - 1; d >= 0; d--) {
                c[d] = r % idx->shape[d];
                r /= idx->shape[d];
            }
            shape_str(pos, sizeof pos, idx->rank, c);
        }
        s = wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s%s = %d is out of range [%lld, %lld)", op, arg, pos, (int)h[i],
                           (long long)-size, (long long)size);
    }
    free(h);
    return s;
}

static wgml_tensor *finish(wgml_tensor *out, wgml_status s) {
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

/* out (contiguous, any shape of rank `rank` given by `shape`) from x through the general
 * kernel. mode 0: gather (idx has the output's shape); mode 1: select (idx[c[dim]]). */
static wgml_status take(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *idx, wgml_tensor *out, int rank,
                        const int64_t *shape, const int64_t *xstr, int dim, int64_t size, int mode) {
    take_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < rank; i++) {
        p.shape[i] = (uint32_t)shape[i];
        p.xstr[i] = (uint32_t)xstr[i];
    }
    p.n = (uint32_t)out->numel;
    p.rank = (uint32_t)rank;
    p.dim = (uint32_t)dim;
    p.size = (uint32_t)size;
    bool is_bool = x->dtype == WGML_BOOL;
    char prelude[96];
    snprintf(prelude, sizeof prelude, "const BOOL: bool = %s;\nconst MODE: u32 = %du;\n", is_bool ? "true" : "false",
             mode);
    uint64_t per = is_bool ? 4 : TAKE_PER, threads = ((uint64_t)out->numel + per - 1) / per;
    wgml_tensor *ro[2] = {x, idx};
    return graph_dispatch(g, op, "index_take", prelude, ro, 2, &out, 1, &p, sizeof p, (threads + 255) / 256);
}

/* out[o, j, :] = x[o, idx[j], :] with x viewed as [outer, size, inner] (elements). */
static wgml_status select_rows(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *idx, wgml_tensor *out,
                               int64_t outer, int64_t size, int64_t inner, int64_t nsel) {
    if (x->dtype == WGML_BOOL) {
        /* bool: the general kernel (one thread per output word) on the 3-D view */
        int64_t shape[3] = {outer, nsel, inner}, xstr[3] = {size * inner, inner, 1};
        return take(g, op, x, idx, out, 3, shape, xstr, 1, size, 1);
    }
    int64_t w = inner % 4 == 0 ? 4 : 1;
    rows_params p = {(uint32_t)(out->numel / w), (uint32_t)(inner / w), (uint32_t)nsel, (uint32_t)size};
    const char *prelude = w == 4 ? "alias UNIT = vec4<u32>;\n" : "alias UNIT = u32;\n";
    wgml_tensor *ro[2] = {x, idx};
    uint64_t groups = ((uint64_t)p.n + 256 * ROWS_PER - 1) / (256 * ROWS_PER);
    return graph_dispatch(g, op, "index_rows", prelude, ro, 2, &out, 1, &p, sizeof p, groups);
}

static wgml_status norm_dim(wgml_ctx *ctx, const char *op, const wgml_tensor *x, int dim, int *out) {
    if (dim < -x->rank || dim >= x->rank)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: dim %d is out of range for x %s (rank %d)", op, dim, tshape(x),
                              x->rank);
    *out = dim < 0 ? dim + x->rank : dim;
    return WGML_OK;
}

/* ---------------------------------------------------------------- gather */

wgml_tensor *wgml_gather(wgml_graph *g, wgml_tensor *x, int dim, wgml_tensor *index) {
    const char *op = "gather";
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_data(g, op, "x", x) || check_index(g, op, "index", index) || check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK))
        return NULL;
    int d = 0;
    if (norm_dim(ctx, op, x, dim, &d)) return NULL;
    if (index->rank != x->rank) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "gather: index %s must have the rank of x %s", tshape(index), tshape(x));
        return NULL;
    }
    for (int i = 0; i < x->rank; i++)
        if (i != d && index->shape[i] > x->shape[i]) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "gather: index %s is larger than x %s in dim %d (gather dim %d)",
                           tshape(index), tshape(x), i, d);
            return NULL;
        }
    if (check_range_host(g, op, "index", index, x->shape[d])) return NULL;
    wgml_tensor *out = graph_output(g, op, x->dtype, index->rank, index->shape);
    if (!out) return NULL;
    int64_t xstr[WGML_MAX_RANK];
    shape_strides(x->rank, x->shape, xstr);
    return gather_grad_record(g, finish(out, take(g, op, x, index, out, index->rank, index->shape, xstr, d, x->shape[d], 0)),
                              x, d, index);
}

/* ---------------------------------------------------------------- index_select */

wgml_tensor *wgml_index_select(wgml_graph *g, wgml_tensor *x, int dim, wgml_tensor *index) {
    const char *op = "index_select";
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_data(g, op, "x", x) || check_index(g, op, "index", index) ||
        check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK) || check_rank(ctx, op, "index", index, 0, 1))
        return NULL;
    int d = 0;
    if (norm_dim(ctx, op, x, dim, &d)) return NULL;
    if (check_range_host(g, op, "index", index, x->shape[d])) return NULL;
    int64_t shape[WGML_MAX_RANK], xstr[WGML_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[d] = index->numel;
    wgml_tensor *out = graph_output(g, op, x->dtype, x->rank, shape);
    if (!out) return NULL;
    if (out->numel >= U32_LIMIT) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "index_select: output %s has more than 2^31 elements", tshape(out));
        return finish(out, WGML_ERR_LIMIT);
    }
    shape_strides(x->rank, x->shape, xstr);
    int64_t inner = xstr[d], size = x->shape[d], outer = x->numel / (size * inner);
    return index_select_grad_record(g, finish(out, select_rows(g, op, x, index, out, outer, size, inner, index->numel)), x,
                                    d, index);
}

/* ---------------------------------------------------------------- embedding */

wgml_tensor *wgml_embedding(wgml_graph *g, wgml_tensor *weight, wgml_tensor *idx) {
    const char *op = "embedding";
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_data(g, op, "weight", weight) || check_index(g, op, "idx", idx) ||
        check_rank(ctx, op, "weight", weight, 2, 2) || check_rank(ctx, op, "idx", idx, 0, WGML_MAX_RANK - 1))
        return NULL;
    int64_t v = weight->shape[0], dm = weight->shape[1];
    if (check_range_host(g, op, "idx", idx, v)) return NULL;
    int64_t shape[WGML_MAX_RANK];
    memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->rank);
    shape[idx->rank] = dm;
    wgml_tensor *out = graph_output(g, op, weight->dtype, idx->rank + 1, shape);
    if (!out) return NULL;
    if (out->numel >= U32_LIMIT) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "embedding: output %s has more than 2^31 elements", tshape(out));
        return finish(out, WGML_ERR_LIMIT);
    }
    return embedding_grad_record(g, finish(out, select_rows(g, op, weight, idx, out, 1, v, dm, idx->numel)), weight, idx);
}
