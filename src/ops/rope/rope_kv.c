/* The fused attention inputs of the rope family (rope_kv.wgsl): RoPE of q and k, q into the
 * heads-first layout and both KV-cache writes in one dispatch, where rope, rope, the permutes and
 * kv_append, kv_append take four to seven. Inference graphs only: it records no autograd rule,
 * and the caches are written in place. */
#include "ops/rope/rope_fused.h"

#include "ops/attention/kv_cache.h"

wgml_tensor *rope_kv_step(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                          wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache, wgml_rope_style style) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "rope_kv_step";
    if (check_operand(ctx, g, op, "q", q, WGML_F32, 4, 4) || check_operand(ctx, g, op, "k", k, WGML_F32, 4, 4) ||
        check_operand(ctx, g, op, "v", v, WGML_F32, 4, 4) || check_operand(ctx, g, op, "pos", pos, WGML_I32, 1, 1) ||
        check_operand(ctx, g, op, "tab", tab, WGML_F32, 2, 2) ||
        check_kv_cache(ctx, g, op, "k_cache", k_cache) || check_kv_cache(ctx, g, op, "v_cache", v_cache))
        return NULL;
    int64_t S = q->shape[1], H = q->shape[2], Hk = k->shape[2], hd = q->shape[3];
    bool ok = q->shape[0] == 1 && hd % 2 == 0 && pos->shape[0] == S;
    for (int i = 0; i < 4 && ok; i++) ok = k->shape[i] == v->shape[i];
    ok = ok && kv_cache_alike(k_cache, v_cache) && k->shape[0] == 1 && k->shape[1] == S && k->shape[3] == hd &&
         k_cache->shape[0] == 1 && k_cache->shape[1] == Hk && kv_cache_dim(k_cache) == hd && tab->shape[0] == hd / 2 &&
         tab->shape[1] == 4;
    if (!ok) {
        wgml_set_error(ctx, WGML_ERR_SHAPE,
                       "%s: q %s, k %s, v %s must be [1, S, heads, hd] (hd even, k and v alike), pos %s [S], tab %s "
                       "[hd/2, 4], caches %s %s and %s %s [1, Hk, smax, hd] (f16 form: u32 [1, Hk, smax, hd / 2], both alike)",
                       op, tshape(q), tshape(k), tshape(v), tshape(pos), tshape(tab), wgml_dtype_name(k_cache->dtype),
                       tshape(k_cache), wgml_dtype_name(v_cache->dtype), tshape(v_cache));
        return NULL;
    }
    uint64_t pairs = (uint64_t)S * (uint64_t)(H + 2 * Hk) * (uint64_t)(hd / 2);
    if ((uint64_t)q->numel > 0xFFFFFFFFull || pairs > 0xFFFFFFFFull || (uint64_t)k_cache->numel > 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: q %s or cache %s is too large", op, tshape(q), tshape(k_cache));
        return NULL;
    }
    int64_t qs[4] = {1, H, S, hd};
    wgml_tensor *out = graph_output(g, op, WGML_F32, 4, qs);
    if (!out) return NULL;
    struct { uint32_t nq, nk, half, smax, style, S, pad[2]; } p = {
        .nq = (uint32_t)(H * hd / 2), .nk = (uint32_t)(Hk * hd / 2), .half = (uint32_t)(hd / 2),
        .smax = (uint32_t)k_cache->shape[2], .style = style == WGML_ROPE_INTERLEAVED ? 1u : 0u, .S = (uint32_t)S};
    /* the caches through accessors over units of two elements (kv_cache.h) */
    char prelude[1024];
    bool f16 = kv_cache_f16(k_cache);
    int n = kv_cache_wgsl(prelude, sizeof prelude, 0, "k_cache", f16, true, 2);
    if (n < 0 || kv_cache_wgsl(prelude, sizeof prelude, n, "v_cache", f16, true, 2) < 0) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: the kernel's prelude does not fit", op);
        wgml_tensor_free(out);
        return NULL;
    }
    wgml_tensor *ro[5] = {q, k, v, pos, tab}, *rw[3] = {out, k_cache, v_cache};
    if (graph_dispatch(g, op, "rope_kv", prelude, ro, 5, rw, 3, &p, sizeof p, (pairs + 63) / 64)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}
