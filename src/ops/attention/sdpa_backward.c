/* Backward of scaled dot-product attention (wgml_sdpa_backward), as matmuls around one row
 * kernel. The query heads of one kv head are consecutive in memory, so q, out and dout are
 * viewed as [G = B·Hkv, R = (Hq/Hkv)·Sq, D] and k, v as [G, Skv, D] (views, no copies):
 *   S = q·kᵀ, dP = dout·vᵀ                      (wgml_matmul, [G, R, Skv])
 *   P, dS = scale·P ⊙ (dP − rowsum(dout ⊙ out))  (attn_bwd_soft.wgsl, in place over S and dP:
 *                                                 mask, softmax, one row per workgroup)
 *   dq = dS·k, dk = dSᵀ·q, dv = Pᵀ·dout          (wgml_matmul with transpose flags)
 * dk and dv sum over the group's heads and rows inside the matmul's fixed-order K loop, so the
 * GQA reduction is deterministic. Scratch: two [B, Hq, Sq, Skv] tensors. The causal mask is
 * applied to P and dS, and the matmuls skip its masked half by tiles (matmul_banded: the
 * scores' tiles past the band are never computed, dq's K stops at the band, dk's and dv's K
 * skips the queries before it); the skipped terms are the zeros of P and dS. */
#include "graph/graph.h"
#include "ops/matmul/matmul_into.h"
#include "ops/reduce/wg_reduce.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool same_shape(const wgml_tensor *a, const wgml_tensor *b) {
    return memcmp(a->shape, b->shape, sizeof(int64_t) * 4) == 0;
}

/* The operands' checks, in the order the errors are reported: five f32 rank-4 tensors of this
 * graph, k and v alike, out and dout shaped as q, q's heads a multiple of k's, Sq <= Skv when
 * causal, a finite scale, and a [B, Hq, Sq, Skv] scratch within 32-bit indexing. */
static wgml_status sdpa_backward_check(wgml_ctx *ctx, wgml_graph *g, const char *op, wgml_tensor *q, wgml_tensor *k,
                                       wgml_tensor *v, wgml_tensor *out, wgml_tensor *dout, int causal, float scale) {
    wgml_status s;
    if ((s = check_operand(ctx, g, op, "q", q, WGML_F32, 4, 4)) || (s = check_operand(ctx, g, op, "k", k, WGML_F32, 4, 4)) ||
        (s = check_operand(ctx, g, op, "v", v, WGML_F32, 4, 4)) ||
        (s = check_operand(ctx, g, op, "out", out, WGML_F32, 4, 4)) || (s = check_operand(ctx, g, op, "dout", dout, WGML_F32, 4, 4)))
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
    int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2], Skv = k->shape[2];
    if ((uint64_t)(B * Hq * Sq * Skv) >= 0xFFFFFFFFull || (uint64_t)q->numel >= 0xFFFFFFFFull ||
        (uint64_t)k->numel >= 0xFFFFFFFFull)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: q %s, k %s: the [B, Hq, Sq, Skv] scratch is too large", op,
                              tshape(q), tshape(k));
    return WGML_OK;
}

/* attn_bwd_soft over the n_rows rows of scores pm and dout·vᵀ ds, in place: P = softmax of the
 * masked, scaled scores into pm, dS = scale·P ⊙ (dP − rowsum(dout ⊙ out)) into ds. One row per
 * workgroup, WG threads (32..256, about Skv / 8). */
static wgml_status soft_rows(wgml_graph *g, const char *op, wgml_tensor *ov, wgml_tensor *dov, wgml_tensor *pm,
                             wgml_tensor *ds, int64_t n_rows, int64_t Sq, int64_t Skv, int64_t D, int causal,
                             float sc, int64_t window) {
    uint32_t wg = row_workgroup((uint64_t)Skv);
    char prelude[64];
    snprintf(prelude, sizeof prelude, "const WG: u32 = %uu;\n", wg);
    struct { uint32_t n_rows, sq, skv, d, causal; float scale; uint32_t window; } p = {
        (uint32_t)n_rows, (uint32_t)Sq, (uint32_t)Skv, (uint32_t)D, causal ? 1u : 0u, sc,
        (uint32_t)(window < Skv ? window : 0)};
    wgml_tensor *ro[2] = {ov, dov}, *rw[2] = {pm, ds};
    return graph_dispatch(g, op, "attn_bwd_soft", prelude, ro, 2, rw, 2, &p, sizeof p, (uint64_t)n_rows);
}

/* wgml_sdpa_backward and wgml_sdpa_backward_window (window 0: none). */
static wgml_status sdpa_backward_impl(wgml_graph *g, const char *op, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v,
                                      wgml_tensor *out, wgml_tensor *dout, int causal, float scale, int64_t window,
                                      wgml_tensor **dq, wgml_tensor **dk, wgml_tensor **dv) {
    if (dq) *dq = NULL;
    if (dk) *dk = NULL;
    if (dv) *dv = NULL;
    if (!g) return WGML_ERR_ARG;
    wgml_ctx *ctx = graph_ctx(g);
    if (window < 0 || window > 0x7FFFFFFF)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: window %lld must be in 1..2^31-1", op, (long long)window);
    if (!dq || !dk || !dv) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: dq, dk and dv must not be NULL", op);
    wgml_status s;
    if ((s = sdpa_backward_check(ctx, g, op, q, k, v, out, dout, causal, scale))) return s;
    int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2], D = q->shape[3], Hkv = k->shape[1], Skv = k->shape[2];
    float sc = scale > 0 ? scale : (float)(1.0 / sqrt((double)D));
    /* q's heads of one kv head are consecutive: q, out, dout as [G = B·Hkv, R = rep·Sq, D] */
    int64_t G = B * Hkv, R = (Hq / Hkv) * Sq;
    int64_t qv_shape[3] = {G, R, D}, kv_shape[3] = {G, Skv, D};
    wgml_tensor *qv = wgml_reshape(g, q, 3, qv_shape), *kv = wgml_reshape(g, k, 3, kv_shape);
    wgml_tensor *vv = wgml_reshape(g, v, 3, kv_shape), *ov = wgml_reshape(g, out, 3, qv_shape);
    wgml_tensor *dov = wgml_reshape(g, dout, 3, qv_shape);
    wgml_tensor *pm = NULL, *ds = NULL, *gq = NULL, *gk = NULL, *gv = NULL;
    s = qv && kv && vv && ov && dov ? WGML_OK : wgml_last_status(ctx);
    /* scores and dout·vᵀ, [G, R, Skv]; the row kernel turns them into P and dS in place */
    /* query r of a row block is r mod Sq; key j is visible when j <= i + Skv - Sq */
    matmul_band scores = {causal ? 1 : 0, Sq, Skv - Sq}, dq_band = {causal ? 2 : 0, Sq, Skv - Sq};
    matmul_band dkv_band = {causal ? 3 : 0, Sq, Skv - Sq};
    if (!s && !(pm = matmul_banded(g, op, qv, kv, 0, 1, &scores))) s = wgml_last_status(ctx);
    if (!s && !(ds = matmul_banded(g, op, dov, vv, 0, 1, &scores))) s = wgml_last_status(ctx);
    if (!s) s = soft_rows(g, op, ov, dov, pm, ds, G * R, Sq, Skv, D, causal, sc, window);
    /* dq = dS·k, dk = dSᵀ·q (sums the heads of a group and their rows), dv = Pᵀ·dout */
    wgml_tensor *gq3 = NULL, *gk3 = NULL, *gv3 = NULL;
    if (!s && !(gq3 = matmul_banded(g, op, ds, kv, 0, 0, &dq_band))) s = wgml_last_status(ctx);
    if (!s && !(gk3 = matmul_banded(g, op, ds, qv, 1, 0, &dkv_band))) s = wgml_last_status(ctx);
    if (!s && !(gv3 = matmul_banded(g, op, pm, dov, 1, 0, &dkv_band))) s = wgml_last_status(ctx);
    if (!s && !(gq = wgml_reshape(g, gq3, 4, q->shape))) s = wgml_last_status(ctx);
    if (!s && !(gk = wgml_reshape(g, gk3, 4, k->shape))) s = wgml_last_status(ctx);
    if (!s && !(gv = wgml_reshape(g, gv3, 4, k->shape))) s = wgml_last_status(ctx);
    wgml_tensor *tmp[] = {qv, kv, vv, ov, dov, pm, ds, gq3, gk3, gv3};
    for (size_t t = 0; t < sizeof tmp / sizeof *tmp; t++) wgml_tensor_free(tmp[t]);
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

wgml_status wgml_sdpa_backward(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *out,
                               wgml_tensor *dout, int causal, float scale, wgml_tensor **dq, wgml_tensor **dk,
                               wgml_tensor **dv) {
    return sdpa_backward_impl(g, "sdpa_backward", q, k, v, out, dout, causal, scale, 0, dq, dk, dv);
}

/* The band skips only what causality masks; the keys before a window are computed by the
 * scores' products and zeroed in P and dS by the row kernel (exact, not skipped). */
wgml_status wgml_sdpa_backward_window(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *out,
                                      wgml_tensor *dout, int64_t window, float scale, wgml_tensor **dq,
                                      wgml_tensor **dk, wgml_tensor **dv) {
    if (g && window < 1) {
        if (dq) *dq = NULL;
        if (dk) *dk = NULL;
        if (dv) *dv = NULL;
        return wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "sdpa_backward_window: window %lld must be in 1..2^31-1",
                              (long long)window);
    }
    return sdpa_backward_impl(g, "sdpa_backward_window", q, k, v, out, dout, 1, scale, window, dq, dk, dv);
}
