/* Pooling: wgml_pool, max (with the argmax offsets) or average over an N-D window of the last
 * 1-3 dims, with stride, padding, dilation or PyTorch's adaptive windows (pool.wgsl: one thread
 * per output element, one dispatch). The caller gives the output extents (they depend on
 * ceil_mode and the like, which are the caller's rules); every window must start before the
 * padded input's end, so no window is all padding. */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

/* Must match the Params struct of pool.wgsl. */
typedef struct pool_params {
    int32_t in[4], out[4], k[4], st[4], pd[4], dl[4];
    uint32_t n, mode;
    int32_t divisor;
    uint32_t has_idx;
} pool_params;

#define POOL_ARG_MAX ((int64_t)1 << 20)   /* the largest kernel, stride, padding or dilation */
#define POOL_WINDOW_MAX ((int64_t)1 << 16) /* the most elements a window (one thread's loop) spans */
#define POOL_LIMIT ((int64_t)1 << 31)

static wgml_status bad(wgml_ctx *ctx, const wgml_tensor *x, const char *what, int d, long long v) {
    return wgml_set_error(ctx, WGML_ERR_ARG, "pool: x %s: %s of window dim %d is %lld", tshape(x), what, d, v);
}

wgml_tensor *wgml_pool(wgml_graph *g, wgml_tensor *x, const wgml_pool_desc *desc, wgml_tensor **indices) {
    if (indices) *indices = NULL;
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, "pool", "x", x) || check_graph(ctx, g, "pool", "x", x) || check_dtype(ctx, "pool", "x", x, WGML_F32))
        return NULL;
    if (!desc) {
        wgml_set_error(ctx, WGML_ERR_ARG, "pool: desc is NULL");
        return NULL;
    }
    int nd = desc->nd;
    if (nd < 1 || nd > 3 || x->rank < nd) {
        wgml_set_error(ctx, WGML_ERR_ARG, "pool: x %s: %d window dims (1 to 3, at most x's rank)", tshape(x), nd);
        return NULL;
    }
    if (indices && !desc->max) {
        wgml_set_error(ctx, WGML_ERR_ARG, "pool: indices are given by max pooling only");
        return NULL;
    }
    pool_params p = {.mode = (desc->max ? 1u : 0u) | (desc->adaptive ? 2u : 0u) | (desc->count_include_pad ? 4u : 0u),
                     .has_idx = indices != NULL};
    int64_t window = 1, oshape[WGML_MAX_RANK], planes = 1;
    for (int d = 0; d < 4; d++) p.in[d] = p.out[d] = p.k[d] = p.st[d] = p.dl[d] = 1, p.pd[d] = 0;
    for (int i = 0; i < x->rank - nd; i++) oshape[i] = x->shape[i], planes *= x->shape[i];
    for (int d = 0; d < nd; d++) {
        int dd = 3 - nd + d; /* the kernel's x is [planes, in.x, in.y, in.z]: window dims fill the last slots */
        int64_t in = x->shape[x->rank - nd + d], out = desc->out[d];
        if (out < 1 || out > POOL_ARG_MAX) return bad(ctx, x, "output extent", d, out), NULL;
        int64_t span;
        if (desc->adaptive) {
            span = (in + out - 1) / out + 1; /* the largest adaptive window */
        } else {
            int64_t k = desc->kernel[d], st = desc->stride[d], pd = desc->padding[d], dl = desc->dilation[d];
            if (k < 1 || k > POOL_ARG_MAX) return bad(ctx, x, "kernel", d, k), NULL;
            if (st < 1 || st > POOL_ARG_MAX) return bad(ctx, x, "stride", d, st), NULL;
            if (dl < 1 || dl > POOL_ARG_MAX) return bad(ctx, x, "dilation", d, dl), NULL;
            if (pd < 0 || pd > POOL_ARG_MAX) return bad(ctx, x, "padding", d, pd), NULL;
            if (!desc->max && dl != 1) return bad(ctx, x, "dilation (average pooling takes 1)", d, dl), NULL;
            if ((out - 1) * st >= in + pd) return bad(ctx, x, "output extent (the last window starts past the padded input)", d, out), NULL;
            if (2 * pd > dl * (k - 1) + 1) return bad(ctx, x, "padding (over half the dilated window)", d, pd), NULL;
            if ((out - 1) * st + (k - 1) * dl + 1 >= POOL_LIMIT) return bad(ctx, x, "output extent (coordinates past 2^31)", d, out), NULL;
            span = k;
            p.k[dd] = (int32_t)k, p.st[dd] = (int32_t)st, p.pd[dd] = (int32_t)pd, p.dl[dd] = (int32_t)dl;
        }
        window *= span;
        if (window > POOL_WINDOW_MAX) {
            wgml_set_error(ctx, WGML_ERR_LIMIT, "pool: x %s: windows of more than %lld elements", tshape(x), (long long)POOL_WINDOW_MAX);
            return NULL;
        }
        p.in[dd] = (int32_t)in, p.out[dd] = (int32_t)out;
        oshape[x->rank - nd + d] = out;
    }
    int64_t n = planes * p.out[0] * p.out[1] * p.out[2];
    if (n >= POOL_LIMIT || x->numel >= POOL_LIMIT) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "pool: x %s: more than 2^31 elements in or out", tshape(x));
        return NULL;
    }
    if (desc->divisor < 0 || desc->divisor > POOL_LIMIT - 1) {
        wgml_set_error(ctx, WGML_ERR_ARG, "pool: divisor %lld", (long long)desc->divisor);
        return NULL;
    }
    p.n = (uint32_t)n, p.divisor = (int32_t)desc->divisor;
    wgml_tensor *out = graph_output(g, "pool", WGML_F32, x->rank, oshape);
    wgml_tensor *ix = out && indices ? graph_output(g, "pool", WGML_I32, x->rank, oshape) : NULL;
    if (!out || (indices && !ix)) {
        wgml_tensor_free(out);
        return NULL;
    }
    wgml_tensor *ro[1] = {x}, *rw[2] = {out, ix ? ix : GRAPH_UNUSED};
    if (graph_dispatch(g, "pool", "pool", NULL, ro, 1, rw, 2, &p, sizeof p, (uint64_t)(n + 255) / 256)) {
        wgml_tensor_free(out);
        wgml_tensor_free(ix);
        return NULL;
    }
    if (indices) *indices = ix;
    return out;
}
