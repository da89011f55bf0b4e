/* The decoder's block as plain ops: the model's math, readable as the reference. It is the
 * training forward (every op here carries its autograd rule) and the inference graphs of a model
 * loaded under $WGML_LLAMA_UNFUSED=1; decoder_fused.c builds the same forward for the inference
 * graphs with fused kernels and is checked against this one. Per block: an RMSNorm of the
 * residual stream, q/k/v, (q/k norms,) RoPE, causal attention (through the KV cache when there
 * is one; a windowed layer sees its window), the o projection (post-norm,) added back; an RMSNorm,
 * the gated FFN (silu or tanh-GELU), the down projection (post-norm,) added back. Targets may
 * carry an adapter (LoRA) or train straight-through (a latent). */
#define _POSIX_C_SOURCE 200809L
#include "model/decoder_internal.h"

#include "ops/attention/sdpa_rows.h"
#include "ops/elementwise/elementwise_fused.h"
#include "ops/lora/lora.h"
#include "ops/qweight/qw_share.h"
#include "ops/qweight/qw_ste.h"
#include "ops/rope/rope_fused.h"

#include <stdio.h>
#include <string.h>

wgml_ctx *decoder_ctx(const wgml_model *m) { return m ? m->ctx : NULL; }
const model_arch *decoder_arch(const wgml_model *m) { return &m->arch; }

wgml_tensor *decoder_share(wgml_graph *g, wgml_tensor *t) { return t ? wgml_tensor_share(g, t) : NULL; }

wgml_status decoder_fail_status(wgml_ctx *ctx) { return wgml_last_status(ctx) ? wgml_last_status(ctx) : WGML_ERR_ARG; }

const vweight *decoder_head(const wgml_model *m) { return m->output.n ? &m->output : &m->tok_embd; }

/* out[..., n] = x[..., k] · Wᵀ */
static wgml_tensor *linear(wgml_graph *g, wgml_tensor *x, const lweight *w) {
    if (w->q) {
        wgml_qweight q;
        return qw_weight_share(g, w->q, &q) ? NULL : wgml_qlinear(g, x, &q);
    }
    return wgml_linear(g, x, decoder_share(g, w->f), decoder_share(g, w->bias));
}

/* The token embeddings [B*S, D], times the architecture's multiplier (Gemma 3: sqrt(d)). A
 * table in several row parts (4-bit/8-bit only) is the sum of the parts' lookups, each giving
 * zero rows for the ids outside it. */
wgml_tensor *decoder_embed(const wgml_model *m, wgml_graph *g, wgml_tensor *ids) {
    const vweight *v = &m->tok_embd;
    wgml_tensor *x = NULL;
    for (int p = 0; p < v->n; p++) {
        const lweight *w = &v->part[p];
        wgml_tensor *e;
        if (w->q) {
            wgml_qweight t = *w->q, q;
            t.bias = NULL; /* a lookup adds none */
            e = qw_weight_share(g, &t, &q) ? NULL
                : v->n == 1             ? wgml_qembedding(g, &q, ids)
                                        : wgml_qembedding_rows(g, &q, ids, v->row0[p]);
        } else if (v->n == 1) {
            e = wgml_embedding(g, decoder_share(g, w->f), ids);
        } else {
            wgml_set_error(m->ctx, WGML_ERR_UNSUPPORTED, "model: an f32 token embedding in %d parts is not supported",
                           v->n);
            return NULL;
        }
        x = !e ? NULL : p == 0 ? e : x ? wgml_add(g, x, e, 1.0f) : NULL;
        if (!x) return NULL;
    }
    return x && m->arch.embed_mult != 1.0f ? wgml_mul_scalar(g, x, m->arch.embed_mult) : x;
}

/* The logits x · Wᵀ of the head (the parts' products side by side). */
wgml_tensor *decoder_head_logits(const wgml_model *m, wgml_graph *g, wgml_tensor *x) {
    const vweight *v = decoder_head(m);
    if (v->n == 1) return linear(g, x, &v->part[0]);
    wgml_tensor *y[VPARTS_MAX];
    for (int p = 0; p < v->n; p++)
        if (!(y[p] = linear(g, x, &v->part[p]))) return NULL;
    return wgml_cat(g, y, v->n, x->rank - 1);
}

/* Adapter lo as graph g reads it (*sl): its A and B shared into g when o says they live in
 * another graph. false when a share fails. */
static bool lora_in_graph(wgml_graph *g, const fwd_opts *o, const wgml_lora *lo, wgml_lora *sl) {
    *sl = *lo;
    if (!o->lora_shared) return true;
    sl->a = decoder_share(g, lo->a);
    sl->b = sl->a ? decoder_share(g, lo->b) : NULL;
    return sl->b != NULL;
}

wgml_tensor *decoder_add_lora(wgml_graph *g, const fwd_opts *o, int64_t e, wgml_tensor *x, wgml_tensor *y) {
    const wgml_lora *lo = o->lora ? o->lora[e] : NULL;
    if (!lo || !y) return y;
    wgml_lora sl;
    return lora_in_graph(g, o, lo, &sl) ? wgml_lora_apply(g, x, y, &sl) : NULL;
}

/* Target t of layer l applied to x without its adapter: the weight (4-bit with a latent:
 * straight-through). */
static wgml_tensor *target_base(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, int t,
                                wgml_tensor *x) {
    const lweight *w = decoder_target_weight(m, l, t);
    wgml_tensor *latent = o->latent ? o->latent[l * DECODER_N_TARGETS + t] : NULL;
    if (latent && w->q) {
        wgml_qweight q;
        return qw_weight_share(g, w->q, &q) ? NULL : qw_ste_linear(g, x, &q, latent);
    }
    return linear(g, x, w);
}

/* Target t of layer l applied to x: the weight, plus the target's adapter when o has one (a
 * 4-bit weight's through wgml_lora_qlinear, which may fold it into the weight's product). */
wgml_tensor *decoder_target_linear(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, int t,
                                   wgml_tensor *x) {
    int64_t e = l * DECODER_N_TARGETS + t;
    const lweight *w = decoder_target_weight(m, l, t);
    const wgml_lora *lo = o->lora ? o->lora[e] : NULL;
    if (!lo || !w->q || (o->latent && o->latent[e])) return decoder_add_lora(g, o, e, x, target_base(m, g, o, l, t, x));
    wgml_qweight q;
    wgml_lora sl;
    if (qw_weight_share(g, w->q, &q) || !lora_in_graph(g, o, lo, &sl)) return NULL;
    return wgml_lora_qlinear(g, x, &q, &sl);
}

/* Targets t0 .. t0 + n - 1 of layer l, which share their input x (q/k/v, gate/up), into y[]. With
 * the group's stacked A (o->lora_cat at entry t0) the adapted ones go through one shared
 * down-projection: with their up-projections folded into their 4-bit bases' products when every
 * adapted target is a plain 4-bit weight (lora_qlinear_shared), else after the bases
 * (lora_apply_shared); without it each target alone. */
static void targets_linear(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, int t0, int n,
                           wgml_tensor *x, wgml_tensor **y) {
    int64_t e0 = l * DECODER_N_TARGETS + t0;
    wgml_tensor *acat = o->lora_cat && x ? o->lora_cat[e0] : NULL;
    if (!acat) {
        for (int i = 0; i < n; i++) y[i] = x ? decoder_target_linear(m, g, o, l, t0 + i, x) : NULL;
        return;
    }
    wgml_lora sl[LORA_GROUP_MAX];
    const wgml_lora *ls[LORA_GROUP_MAX];
    wgml_tensor *base[LORA_GROUP_MAX], *out[LORA_GROUP_MAX];
    wgml_qweight qs[LORA_GROUP_MAX];
    const wgml_qweight *qp[LORA_GROUP_MAX];
    int idx[LORA_GROUP_MAX], k = 0;
    bool ok = !o->lora_shared || (acat = decoder_share(g, acat)), folded = true;
    for (int i = 0; i < n; i++) { /* folded when every adapted target is a plain 4-bit weight */
        const lweight *w = decoder_target_weight(m, l, t0 + i);
        folded = folded && (!o->lora[e0 + i] || (w->q && !(o->latent && o->latent[e0 + i])));
    }
    for (int i = 0; i < n && ok; i++) {
        const wgml_lora *lo = o->lora[e0 + i];
        if (!lo || !folded) ok = (y[i] = target_base(m, g, o, l, t0 + i, x)) != NULL;
        if (!lo || !ok) continue;
        sl[k] = *lo;
        if (o->lora_shared) ok = (sl[k].b = decoder_share(g, lo->b)) != NULL;
        if (ok && folded) ok = !qw_weight_share(g, decoder_target_weight(m, l, t0 + i)->q, &qs[k]);
        qp[k] = &qs[k];
        ls[k] = &sl[k];
        base[k] = folded ? NULL : y[i];
        idx[k++] = i;
    }
    if (ok && !(folded ? lora_qlinear_shared(g, x, acat, k, qp, ls, out) : lora_apply_shared(g, x, acat, k, base, ls, out)))
        for (int j = 0; j < k; j++) y[idx[j]] = out[j];
    else
        for (int i = 0; i < n; i++) y[i] = NULL;
}

/* RMSNorm of each head of x [B, S, H, hd] with w [hd] (the q/k norms), same shape. */
wgml_tensor *decoder_head_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, float eps) {
    if (!x || !w) return NULL;
    int64_t rows[2] = {x->shape[0] * x->shape[1] * x->shape[2], x->shape[3]};
    wgml_tensor *y = wgml_rms_norm(g, wgml_reshape(g, x, 2, rows), w, eps);
    return y ? wgml_reshape(g, y, 4, x->shape) : NULL;
}

/* [1, S, H, hd] -> [1, H, S, hd] (a reshape when S = 1). */
static wgml_tensor *heads_first(wgml_graph *g, wgml_tensor *x, int64_t S, int64_t H, int64_t hd) {
    if (S == 1) {
        int64_t shape[4] = {1, H, 1, hd};
        return wgml_reshape(g, x, 4, shape);
    }
    static const int perm[4] = {0, 2, 1, 3};
    return wgml_permute(g, x, perm);
}

/* Attention of layer l over q, k, v f32 [B*S, heads*hd] (the projections): the q/k norms when
 * the architecture has them, RoPE (the layer's base and the family's pairing), then without a
 * KV cache causal attention within each sequence; with one, k and v appended to the cache at
 * pos and q attending to it up to len. A windowed layer sees only the last window positions.
 * Returns [B*S, H*hd]. */
static wgml_tensor *attention(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l,
                              wgml_tensor *const *qkv) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *ar = &m->arch;
    const layer *L = &m->layers[l];
    int64_t B = o->B, S = o->S, hd = c->head_dim, H = c->n_head, Hk = c->n_head_kv;
    int64_t s4q[4] = {B, S, H, hd}, s4k[4] = {B, S, Hk, hd}, s2[2] = {B * S, H * hd};
    static const int perm[4] = {0, 2, 1, 3}; /* [B, S, H, hd] <-> [B, H, S, hd] */
    int windowed = arch_layer_windowed(ar, l);
    float scale = ar->attn_scale;
    wgml_tensor *tab = decoder_share(g, m->rope_tab[windowed ? 1 : 0]);
    wgml_tensor *q = wgml_reshape(g, qkv[0], 4, s4q);
    wgml_tensor *k = wgml_reshape(g, qkv[1], 4, s4k);
    wgml_tensor *v = wgml_reshape(g, qkv[2], 4, s4k), *a;
    if (ar->qk_norm) {
        q = decoder_head_norm(g, q, decoder_share(g, L->q_norm), c->rms_eps);
        k = decoder_head_norm(g, k, decoder_share(g, L->k_norm), c->rms_eps);
    }
    q = rope_tab(g, q, o->positions, tab, ar->rope_style, WGML_ROPE_BSHD, 0);
    k = rope_tab(g, k, o->positions, tab, ar->rope_style, WGML_ROPE_BSHD, 0);
    if (!o->len) {
        q = wgml_permute(g, q, perm);
        k = wgml_permute(g, k, perm);
        v = wgml_permute(g, v, perm);
        a = windowed ? wgml_sdpa_window(g, q, k, v, ar->window, scale) : wgml_sdpa(g, q, k, v, 1, scale);
        a = wgml_permute(g, a, perm);
        return wgml_reshape(g, a, 2, s2);
    }
    wgml_tensor *kc = decoder_share(g, L->k_cache), *vc = decoder_share(g, L->v_cache);
    q = heads_first(g, q, S, H, hd);
    k = heads_first(g, k, S, Hk, hd);
    v = heads_first(g, v, S, Hk, hd);
    if (!q || !k || !v || !kc || !vc || wgml_kv_append(g, kc, k, o->pos) || wgml_kv_append(g, vc, v, o->pos))
        return NULL;
    a = sdpa_cached_rows(g, q, kc, vc, o->len, windowed ? ar->window : 0, scale); /* [1, S, H, hd] */
    return wgml_reshape(g, a, 2, s2);
}

/* x + y, where y is first RMSNormed with the post-norm weight wy when the family has one. */
static wgml_tensor *add_back(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *wy, float eps) {
    if (y && wy) y = wgml_rms_norm(g, y, wy, eps);
    return x && y ? wgml_add(g, x, y, 1.0f) : NULL;
}

wgml_tensor *decoder_forward_plain(const wgml_model *m, wgml_graph *g, const fwd_opts *o) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *ar = &m->arch;
    float eps = c->rms_eps;
    bool gelu = ar->act == ARCH_GELU_TANH_GLU;
    wgml_tensor *x = decoder_embed(m, g, o->ids); /* the residual stream [B*S, D] */
    for (int64_t l = 0; l < c->n_layer && x; l++) {
        const layer *L = &m->layers[l];
        wgml_tensor *h = wgml_rms_norm(g, x, decoder_share(g, L->attn_norm), eps), *qkv[3], *gu[2];
        targets_linear(m, g, o, l, T_Q, 3, h, qkv);
        wgml_tensor *a = qkv[0] && qkv[1] && qkv[2] ? attention(m, g, o, l, qkv) : NULL;
        wgml_tensor *y = a ? decoder_target_linear(m, g, o, l, T_O, a) : NULL;
        x = add_back(g, x, y, ar->post_norms ? decoder_share(g, L->post_attn_norm) : NULL, eps);
        h = x ? wgml_rms_norm(g, x, decoder_share(g, L->ffn_norm), eps) : NULL;
        targets_linear(m, g, o, l, T_GATE, 2, h, gu);
        wgml_tensor *gate = gu[0], *up = gu[1];
        wgml_tensor *act = up ? ew_glu(g, gate, up, gelu ? EW_GLU_GELU_TANH : EW_GLU_SILU) : NULL;
        wgml_tensor *f = act ? decoder_target_linear(m, g, o, l, T_DOWN, act) : NULL;
        x = add_back(g, x, f, ar->post_norms ? decoder_share(g, L->post_ffn_norm) : NULL, eps);
    }
    /* prefill: only the wanted row goes through the final norm */
    if (x && o->row) x = wgml_index_select(g, x, 0, o->row);
    return x ? wgml_rms_norm(g, x, decoder_share(g, m->output_norm), eps) : NULL;
}

wgml_tensor *decoder_forward_train_hidden(wgml_model *m, wgml_graph *g, wgml_tensor *ids, wgml_tensor *positions,
                                          int64_t B, int64_t S, const decoder_adapters *ad) {
    fwd_opts o = {.B = B, .S = S, .ids = ids, .positions = positions, .lora = ad->lora, .lora_cat = ad->lora_cat,
                  .latent = ad->latent};
    return decoder_forward_plain(m, g, &o); /* [B*S, D] */
}

/* Vocabulary columns per chunk of the fused head: the scratch is [T, 8192] f32 (128 MiB at
 * T = 4096, against 768 MiB for the whole logits and as much again for dlogits). */
#define LMHEAD_CHUNK 8192

wgml_tensor *decoder_lmhead_ce(wgml_model *m, wgml_graph *g, wgml_tensor *h, wgml_tensor *labels,
                             const wgml_ce_options *opt) {
    if (!h) return NULL;
    const vweight *v = decoder_head(m);
    /* a head in row parts (over the binding limit): the plain logits [R, V] and cross-entropy,
     * whose [R, V] must then fit one binding (small R; the fused op reads W in one binding) */
    if (v->n > 1) return wgml_cross_entropy_ex(g, decoder_head_logits(m, g, h), labels, opt, NULL);
    const lweight *w = &v->part[0];
    if (w->q) {
        wgml_qweight q;
        return qw_weight_share(g, w->q, &q) ? NULL : wgml_lmhead_ce_qweight(g, h, &q, labels, LMHEAD_CHUNK, opt, NULL);
    }
    wgml_tensor *f = decoder_share(g, w->f);
    return f ? wgml_lmhead_ce(g, h, f, labels, LMHEAD_CHUNK, opt, NULL) : NULL;
}
