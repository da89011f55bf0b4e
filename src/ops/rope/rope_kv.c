/* The fused decode step of the rope family (rope_kv.wgsl): RoPE of q and k and both KV-cache
 * writes in one dispatch, where rope, rope, kv_append, kv_append take four. Inference graphs
 * only: it records no autograd rule, and the caches are written in place. */
#include "ops/rope/rope_fused.h"

wgml_tensor *rope_kv_step(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                          wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache, wgml_rope_style style) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "rope_kv_step";
    if (check_operand(ctx, g, op, "q", q, WGML_F32, 4, 4) || check_operand(ctx, g, op, "k", k, WGML_F32, 4, 4) ||
        check_operand(ctx, g, op, "v", v, WGML_F32, 4, 4) || check_operand(ctx, g, op, "pos", pos, WGML_I32, 1, 1) ||
        check_operand(ctx, g, op, "tab", tab, WGML_F32, 2, 2) ||
        check_operand(ctx, g, op, "k_cache", k_cache, WGML_F32, 4, 4) ||
        check_operand(ctx, g, op, "v_cache", v_cache, WGML_F32, 4, 4))
        return NULL;
    int64_t H = q->shape[2], Hk = k->shape[2], hd = q->shape[3];
    bool ok = q->shape[0] == 1 && q->shape[1] == 1 && hd % 2 == 0 && pos->shape[0] == 1;
    for (int i = 0; i < 4 && ok; i++) ok = k->shape[i] == v->shape[i] && k_cache->shape[i] == v_cache->shape[i];
    ok = ok && k->shape[0] == 1 && k->shape[1] == 1 && k->shape[3] == hd && k_cache->shape[0] == 1 &&
         k_cache->shape[1] == Hk && k_cache->shape[3] == hd && tab->shape[0] == hd / 2 && tab->shape[1] == 4;
    if (!ok) {
        wgml_set_error(ctx, WGML_ERR_SHAPE,
                       "%s: q %s, k %s, v %s must be [1, 1, heads, hd] (hd even, k and v alike), pos %s [1], tab %s "
                       "[hd/2, 4], caches %s %s [1, Hk, smax, hd]",
                       op, tshape(q), tshape(k), tshape(v), tshape(pos), tshape(tab), tshape(k_cache), tshape(v_cache));
        return NULL;
    }
    int64_t qs[4] = {1, H, 1, hd};
    wgml_tensor *out = graph_output(g, op, WGML_F32, 4, qs);
    if (!out) return NULL;
    struct { uint32_t nq, nk, half, smax, style, pad[3]; } p = {
        .nq = (uint32_t)(H * hd / 2), .nk = (uint32_t)(Hk * hd / 2), .half = (uint32_t)(hd / 2),
        .smax = (uint32_t)k_cache->shape[2], .style = style == WGML_ROPE_INTERLEAVED ? 1u : 0u};
    wgml_tensor *ro[5] = {q, k, v, pos, tab}, *rw[3] = {out, k_cache, v_cache};
    if (graph_dispatch(g, op, "rope_kv", NULL, ro, 5, rw, 3, &p, sizeof p, ((uint64_t)p.nq + 2ull * p.nk + 63) / 64)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}
