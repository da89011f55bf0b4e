/* Backward of scaled dot-product attention (wgml_sdpa_backward), as matmuls around one row
 * kernel. The query heads of one kv head are consecutive in memory, so q, out and dout are
 * viewed as [G = B·Hkv, R = (Hq/Hkv)·Sq, D] and k, v as [G, Skv, D] (views, no copies):
 *   S = q·kᵀ, dP = dout·vᵀ                      (wgml_matmul, [G, R, Skv])
 *   P, dS = scale·P ⊙ (dP − rowsum(dout ⊙ out))  (attn_bwd_soft.wgsl, in place over S and dP:
 *                                                 mask, softmax, one row per workgroup)
 *   dq = dS·k, dk = dSᵀ·q, dv = Pᵀ·dout          (wgml_matmul with transpose flags)
 * dk and dv sum over the group's heads and rows inside the matmul's fixed-order K loop, so the
 * GQA reduction is deterministic. Scratch: two [B, Hq, Sq, Skv] tensors, or where those pass the
 * device's binding limit (128 MiB on lavapipe: 8 sequences of 1,024 tokens at 9 heads need 302
 * MB), the same steps over slices (plan_slices: whole groups, else one group's query heads), one
 * slice's scratch at a time: views of the operands, dq's rows and the groups' dk and dv
 * concatenated, a group's dk and dv summed over its head slices in order (the one case where
 * the GQA sum is split; still fixed-order). The causal mask is applied to P and dS, and the
 * matmuls skip its masked half by tiles (matmul_banded: the
 * scores' tiles past the band are never computed, dq's K stops at the band, dk's and dv's K
 * skips the queries before it); the skipped terms are the zeros of P and dS. */
#include "graph/graph.h"
#include "ops/matmul/matmul_into.h"
#include "ops/reduce/wg_reduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool same_shape(const wgml_tensor *a, const wgml_tensor *b) {
    return memcmp(a->shape, b->shape, sizeof(int64_t) * 4) == 0;
}

/* The operands' checks, in the order the errors are reported: five f32 rank-4 tensors of this
 * graph, k and v alike, out and dout shaped as q, q's heads a multiple of k's, Sq <= Skv when
 * causal, a finite scale, and q and k within 32-bit indexing. */
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
    if ((uint64_t)q->numel >= 0xFFFFFFFFull || (uint64_t)k->numel >= 0xFFFFFFFFull)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: q %s, k %s: too large for 32-bit indexing", op, tshape(q),
                              tshape(k));
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

/* One slice of kv-head groups: q, out, dout as [n, R, D] and k, v as [n, Skv, D] (views) into
 * gq3 [n, R, D], gk3 and gv3 [n, Skv, D]; the [n, R, Skv] scratch is freed on return. */
static wgml_status backward_slice(wgml_graph *g, const char *op, wgml_tensor *qv, wgml_tensor *kv, wgml_tensor *vv,
                                  wgml_tensor *ov, wgml_tensor *dov, int64_t Sq, int causal, float sc, int64_t window,
                                  wgml_tensor **gq3, wgml_tensor **gk3, wgml_tensor **gv3) {
    wgml_ctx *ctx = graph_ctx(g);
    int64_t n = qv->shape[0], R = qv->shape[1], D = qv->shape[2], Skv = kv->shape[1];
    /* query r of a row block is r mod Sq; key j is visible when j <= i + Skv - Sq */
    matmul_band scores = {causal ? 1 : 0, Sq, Skv - Sq}, dq_band = {causal ? 2 : 0, Sq, Skv - Sq};
    matmul_band dkv_band = {causal ? 3 : 0, Sq, Skv - Sq};
    wgml_tensor *pm = NULL, *ds = NULL;
    wgml_status s = WGML_OK;
    /* scores and dout·vᵀ, [n, R, Skv]; the row kernel turns them into P and dS in place */
    if (!(pm = matmul_banded(g, op, qv, kv, 0, 1, &scores))) s = wgml_last_status(ctx);
    if (!s && !(ds = matmul_banded(g, op, dov, vv, 0, 1, &scores))) s = wgml_last_status(ctx);
    if (!s) s = soft_rows(g, op, ov, dov, pm, ds, n * R, Sq, Skv, D, causal, sc, window);
    /* dq = dS·k, dk = dSᵀ·q (sums the heads of a group and their rows), dv = Pᵀ·dout */
    if (!s && !(*gq3 = matmul_banded(g, op, ds, kv, 0, 0, &dq_band))) s = wgml_last_status(ctx);
    if (!s && !(*gk3 = matmul_banded(g, op, ds, qv, 1, 0, &dkv_band))) s = wgml_last_status(ctx);
    if (!s && !(*gv3 = matmul_banded(g, op, pm, dov, 1, 0, &dkv_band))) s = wgml_last_status(ctx);
    wgml_tensor_free(pm);
    wgml_tensor_free(ds);
    return s;
}

static int64_t gcd64(int64_t a, int64_t b) { return b ? gcd64(b, a % b) : a; }

/* The fewest consecutive items of `floats` f32 each whose span is a multiple of align bytes. */
static int64_t align_unit(int64_t floats, int64_t align) { return align / gcd64(floats * 4 % align, align); }

/* How the backward is cut: ng kv-head groups a slice, and nh of a group's rep query heads a
 * slice (nh = rep: whole groups; nh < rep only with ng = 1). */
typedef struct bwd_slicing {
    int64_t ng, nh;
} bwd_slicing;

/* The slicing that keeps each scratch tensor ([ng, nh·Sq, Skv] f32) within the device's storage
 * binding and buffer limits ($WGML_SDPA_BWD_SCRATCH=BYTES lowers the limit: tests and sweeps):
 * all G groups when they fit; else as many whole groups as fit, rounded so that every slice's
 * views start at the storage offset alignment; else one group at a time in slices of its query
 * heads. False with the error set when not even that fits or aligns. */
static bool plan_slices(wgml_ctx *ctx, const char *op, int64_t G, int64_t rep, int64_t Sq, int64_t Skv, int64_t D,
                        bwd_slicing *sl) {
    const gpu_caps *caps = gpu_get_caps(ctx);
    uint64_t limit = caps && caps->max_storage_binding ? caps->max_storage_binding : 0xFFFFFFFCull;
    if (limit > 0xFFFFFFFCull) limit = 0xFFFFFFFCull; /* a slice's elements stay in 32-bit indexing */
    if (caps && caps->max_buffer_size && caps->max_buffer_size < limit) limit = caps->max_buffer_size;
    const char *e = getenv("WGML_SDPA_BWD_SCRATCH");
    unsigned long long forced = e && *e ? strtoull(e, NULL, 10) : 0;
    if (forced && forced < limit) limit = forced;
    int64_t align = caps && caps->storage_align ? caps->storage_align : 256;
    uint64_t per_head = (uint64_t)(Sq * Skv) * sizeof(float), per_group = per_head * (uint64_t)rep;
    int64_t n = (int64_t)(limit / per_group), nh = (int64_t)(limit / per_head);
    /* whole groups: views at multiples of R·D floats of q and Skv·D of k */
    int64_t uq = align_unit(rep * Sq * D, align), uk = align_unit(Skv * D, align);
    int64_t unit = uq / gcd64(uq, uk) * uk, uh = align_unit(Sq * D, align);
    if (n >= G) *sl = (bwd_slicing){G, rep};
    else if (n >= unit) *sl = (bwd_slicing){n / unit * unit, rep};
    else if (uk == 1 && nh >= uh) *sl = (bwd_slicing){1, nh / uh * uh}; /* heads of one group */
    else if (nh < 1) {
        wgml_set_error(ctx, WGML_ERR_LIMIT,
                       "%s: the backward's scratch for one query head of %lld queries by %lld key%s needs %llu bytes, "
                       "over the device's %llu-byte limit",
                       op, (long long)Sq, (long long)Skv, Skv == 1 ? "" : "s", (unsigned long long)per_head,
                       (unsigned long long)limit);
        return false;
    } else {
        wgml_set_error(ctx, WGML_ERR_LIMIT,
                       "%s: the backward's scratch for one kv head (%lld query rows by %lld key%s, %llu bytes) is over "
                       "the device's %llu-byte limit, and slices of it would start off the %lld-byte storage alignment",
                       op, (long long)(rep * Sq), (long long)Skv, Skv == 1 ? "" : "s", (unsigned long long)per_group,
                       (unsigned long long)limit, (long long)align);
        return false;
    }
    return true;
}

/* One slice's views (m groups from g0, nh query heads from h0) and its products: dq's rows as
 * [m·nh·Sq, D] into *gq2, dk and dv as [m, Skv, D]. */
static wgml_status slice_at(wgml_graph *g, const char *op, wgml_tensor *const in[5], int64_t Sq, int64_t g0,
                            int64_t m, int64_t h0, int64_t nh, int causal, float sc, int64_t window,
                            wgml_tensor **gq2, wgml_tensor **gk, wgml_tensor **gv) {
    wgml_ctx *ctx = graph_ctx(g);
    int64_t R = in[0]->shape[1], D = in[0]->shape[2], Skv = in[1]->shape[1];
    int64_t qs[3] = {m, nh * Sq, D}, ks[3] = {m, Skv, D}, rows[2] = {m * nh * Sq, D};
    uint64_t qo = (uint64_t)((g0 * R + h0 * Sq) * D) * sizeof(float), ko = (uint64_t)(g0 * Skv * D) * sizeof(float);
    wgml_tensor *v[5] = {graph_view(g, in[0], op, qo, 3, qs), graph_view(g, in[1], op, ko, 3, ks),
                         graph_view(g, in[2], op, ko, 3, ks), graph_view(g, in[3], op, qo, 3, qs),
                         graph_view(g, in[4], op, qo, 3, qs)};
    wgml_tensor *gq = NULL;
    wgml_status s = v[0] && v[1] && v[2] && v[3] && v[4] ? WGML_OK : wgml_last_status(ctx);
    if (!s) s = backward_slice(g, op, v[0], v[1], v[2], v[3], v[4], Sq, causal, sc, window, &gq, gk, gv);
    if (!s && !(*gq2 = wgml_reshape(g, gq, 2, rows))) s = wgml_last_status(ctx);
    wgml_tensor_free(gq);
    for (int j = 0; j < 5; j++) wgml_tensor_free(v[j]);
    return s;
}

/* *acc += x in a fixed order (the first x becomes *acc); x is consumed. */
static wgml_status add_into(wgml_graph *g, wgml_tensor **acc, wgml_tensor *x) {
    if (!*acc) {
        *acc = x;
        return WGML_OK;
    }
    wgml_tensor *sum = wgml_add(g, *acc, x, 1.0f);
    wgml_tensor_free(*acc);
    wgml_tensor_free(x);
    *acc = sum;
    return sum ? WGML_OK : wgml_last_status(graph_ctx(g));
}

/* The backward over the G kv-head groups (in = q, k, v, out, dout as [G, R, D] and [G, Skv,
 * D]) cut as plan_slices says: one slice when the scratch fits; else each slice's views and
 * products, dq's rows and the groups' dk and dv concatenated in order, a group's dk and dv
 * summed over its head slices. */
static wgml_status backward_sliced(wgml_graph *g, const char *op, wgml_tensor *const in[5], int64_t Sq, int causal,
                                   float sc, int64_t window, wgml_tensor **gq3, wgml_tensor **gk3,
                                   wgml_tensor **gv3) {
    wgml_ctx *ctx = graph_ctx(g);
    int64_t G = in[0]->shape[0], R = in[0]->shape[1], D = in[0]->shape[2], rep = R / Sq;
    bwd_slicing sl;
    if (!plan_slices(ctx, op, G, rep, Sq, in[1]->shape[1], D, &sl)) return WGML_ERR_LIMIT;
    if (sl.ng >= G && sl.nh == rep)
        return backward_slice(g, op, in[0], in[1], in[2], in[3], in[4], Sq, causal, sc, window, gq3, gk3, gv3);
    int n_g = (int)((G + sl.ng - 1) / sl.ng), n_h = (int)((rep + sl.nh - 1) / sl.nh);
    wgml_tensor **parts = calloc((size_t)(n_g * n_h + 2 * n_g), sizeof *parts), *gq2 = NULL;
    if (!parts) return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    wgml_tensor **pk = parts + n_g * n_h, **pv = pk + n_g;
    wgml_status s = WGML_OK;
    for (int i = 0; i < n_g && !s; i++) {
        int64_t g0 = i * sl.ng, m = G - g0 < sl.ng ? G - g0 : sl.ng;
        for (int j = 0; j < n_h && !s; j++) {
            int64_t h0 = j * sl.nh, nh = rep - h0 < sl.nh ? rep - h0 : sl.nh;
            wgml_tensor *gk = NULL, *gv = NULL;
            s = slice_at(g, op, in, Sq, g0, m, h0, nh, causal, sc, window, &parts[i * n_h + j], &gk, &gv);
            if (!s) s = add_into(g, &pk[i], gk);
            else wgml_tensor_free(gk);
            if (!s) s = add_into(g, &pv[i], gv);
            else wgml_tensor_free(gv);
        }
    }
    int64_t qs[3] = {G, R, D};
    if (!s && !(gq2 = wgml_cat(g, parts, n_g * n_h, 0))) s = wgml_last_status(ctx);
    if (!s && !(*gq3 = wgml_reshape(g, gq2, 3, qs))) s = wgml_last_status(ctx);
    if (!s && !(*gk3 = wgml_cat(g, pk, n_g, 0))) s = wgml_last_status(ctx);
    if (!s && !(*gv3 = wgml_cat(g, pv, n_g, 0))) s = wgml_last_status(ctx);
    wgml_tensor_free(gq2);
    for (int i = 0; i < n_g * n_h + 2 * n_g; i++) wgml_tensor_free(parts[i]);
    free(parts);
    return s;
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
    wgml_tensor *gq = NULL, *gk = NULL, *gv = NULL, *gq3 = NULL, *gk3 = NULL, *gv3 = NULL;
    s = qv && kv && vv && ov && dov ? WGML_OK : wgml_last_status(ctx);
    wgml_tensor *in[5] = {qv, kv, vv, ov, dov};
    if (!s) s = backward_sliced(g, op, in, Sq, causal, sc, window, &gq3, &gk3, &gv3);
    if (!s && !(gq = wgml_reshape(g, gq3, 4, q->shape))) s = wgml_last_status(ctx);
    if (!s && !(gk = wgml_reshape(g, gk3, 4, k->shape))) s = wgml_last_status(ctx);
    if (!s && !(gv = wgml_reshape(g, gv3, 4, k->shape))) s = wgml_last_status(ctx);
    wgml_tensor *tmp[] = {qv, kv, vv, ov, dov, gq3, gk3, gv3};
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
