/* Backward of scaled dot-product attention (wgml_sdpa_backward): two kernels.
 * attn_bwd_q.wgsl: one workgroup per query row recomputes the probabilities P from q and k,
 * writes P and dS = P ⊙ (dout·vᵀ − rowsum(dout ⊙ out)) into [B, Hq, Sq, Skv] scratch, and dq.
 * attn_bwd_kv.wgsl: one workgroup per key row sums dk and dv over the query heads of its kv head
 * and their rows, in a fixed order (deterministic; no atomics). */
#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SDPA_BWD_WG 64

static wgml_status check4(wgml_ctx *ctx, wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t) {
    wgml_status s;
    if ((s = check_tensor(ctx, op, arg, t)) || (s = check_dtype(ctx, op, arg, t, WGML_F32)) ||
        (s = check_rank(ctx, op, arg, t, 4, 4)))
        return s;
    if (t->graph != g) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s belongs to another graph", op, arg);
    return WGML_OK;
}

static bool same_shape(const wgml_tensor *a, const wgml_tensor *b) {
    return memcmp(a->shape, b->shape, sizeof(int64_t) * 4) == 0;
}

wgml_status wgml_sdpa_backward(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *out,
                               wgml_tensor *dout, int causal, float scale, wgml_tensor **dq, wgml_tensor **dk,
                               wgml_tensor **dv) {
    if (dq) *dq = NULL;
    if (dk) *dk = NULL;
    if (dv) *dv = NULL;
    if (!g) return WGML_ERR_ARG;
    const char *op = "sdpa_backward";
    wgml_ctx *ctx = graph_ctx(g);
    if (!dq || !dk || !dv) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: dq, dk and dv must not be NULL", op);
    wgml_status s;
    if ((s = check4(ctx, g, op, "q", q)) || (s = check4(ctx, g, op, "k", k)) || (s = check4(ctx, g, op, "v", v)) ||
        (s = check4(ctx, g, op, "out", out)) || (s = check4(ctx, g, op, "dout", dout)))
        return s;
    if (!same_shape(k, v))
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: k %s and v %s must have the same shape", op, tshape(k), tshape(v));
    if (!same_shape(q, out) || !same_shape(q, dout))
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: out %s and dout %s must have q's shape %s", op, tshape(out),
                              tshape(dout), tshape(q));
    if (q->shape[0] != k->shape[0])
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: q %s and k %s: batch sizes differ", op, tshape(q), tshape(k));
    if (q->shape[3] != k->shape[3])
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: q %s and k %s: head dimensions D differ", op, tshape(q),
                              tshape(k));
    if (q->shape[1] % k->shape[1] != 0)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: q %s has %lld heads, not a multiple of the %lld kv heads of k %s",
                              op, tshape(q), (long long)q->shape[1], (long long)k->shape[1], tshape(k));
    if (causal && q->shape[2] > k->shape[2])
        return wgml_set_error(ctx, WGML_ERR_SHAPE,
                              "%s: causal attention needs Sq <= Skv (the mask is aligned to the end): q %s, k %s", op,
                              tshape(q), tshape(k));
    if (!isfinite(scale)) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: scale must be finite, got %g", op, (double)scale);
    int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2], D = q->shape[3], Hkv = k->shape[1], Skv = k->shape[2];
    int64_t pshape[4] = {B, Hq, Sq, Skv};
    if ((uint64_t)(B * Hq * Sq * Skv) >= 0xFFFFFFFFull || (uint64_t)q->numel >= 0xFFFFFFFFull ||
        (uint64_t)k->numel >= 0xFFFFFFFFull)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: q %s, k %s: the [B, Hq, Sq, Skv] scratch is too large", op,
                              tshape(q), tshape(k));
    float sc = scale > 0 ? scale : (float)(1.0 / sqrt((double)D));
    wgml_tensor *pm = graph_output(g, op, WGML_F32, 4, pshape);
    wgml_tensor *ds = pm ? graph_output(g, op, WGML_F32, 4, pshape) : NULL;
    wgml_tensor *gq = ds ? graph_output(g, op, WGML_F32, 4, q->shape) : NULL;
    wgml_tensor *gk = gq ? graph_output(g, op, WGML_F32, 4, k->shape) : NULL;
    wgml_tensor *gv = gk ? graph_output(g, op, WGML_F32, 4, k->shape) : NULL;
    s = gv ? WGML_OK : wgml_last_status(ctx);
    struct {
        uint32_t n_rows, hq, hkv, sq, skv, d, causal, rep;
        float scale;
    } p = {(uint32_t)(B * Hq * Sq), (uint32_t)Hq, (uint32_t)Hkv, (uint32_t)Sq, (uint32_t)Skv, (uint32_t)D,
           causal ? 1u : 0u, (uint32_t)(Hq / Hkv), sc};
    char prelude[64];
    snprintf(prelude, sizeof prelude, "const WG: u32 = %uu;\n", SDPA_BWD_WG);
    if (!s) {
        wgml_tensor *ro[5] = {q, k, v, out, dout}, *rw[3] = {pm, ds, gq};
        s = graph_dispatch(g, op, "attn_bwd_q", prelude, ro, 5, rw, 3, &p, sizeof p, (uint64_t)(B * Hq * Sq));
    }
    if (!s) {
        p.n_rows = (uint32_t)(B * Hkv * Skv);
        wgml_tensor *ro[4] = {q, dout, pm, ds}, *rw[2] = {gk, gv};
        s = graph_dispatch(g, op, "attn_bwd_kv", prelude, ro, 4, rw, 2, &p, sizeof p, (uint64_t)(B * Hkv * Skv));
    }
    wgml_tensor_free(pm);
    wgml_tensor_free(ds);
    if (s) {
        wgml_tensor_free(gq);
        wgml_tensor_free(gk);
        wgml_tensor_free(gv);
        return s;
    }
    *dq = gq;
    *dk = gk;
    *dv = gv;
    return WGML_OK;
}
