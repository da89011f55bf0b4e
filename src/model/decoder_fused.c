/* The decoder's inference graphs with fused kernels: the same forward as decoder_block.c's plain
 * builder (a KV cache, one sequence), recorded with the fused ops of the op families (norm_add_rms,
 * ew_glu, rope_kv_step, attn_decode_step, the grouped and fused 4-bit GEMVs, the concatenated and
 * split prefill GEMMs), which cut a decode step's dispatches (docs/PERFORMANCE.md, decode). The
 * transformers parity tests run through these graphs; test_generate checks them against the plain
 * builder ($WGML_LLAMA_UNFUSED=1). */
#define _POSIX_C_SOURCE 200809L
#include "model/decoder_internal.h"

#include "ops/attention/attn_decode.h"
#include "ops/attention/sdpa_rows.h"
#include "ops/elementwise/elementwise_fused.h"
#include "ops/norm/norm_fused.h"
#include "ops/qweight/qw_concat.h"
#include "ops/qweight/qw_gemv_fused.h"
#include "ops/qweight/qw_parts.h"
#include "ops/qweight/qw_share.h"
#include "ops/rope/rope_fused.h"

#include <string.h>

/* The weight that targets[0..n) of layer l were loaded as together (load_group): q, k, v or
 * gate, up in that order; NULL when they are another set or were loaded apart. */
static const wgml_qweight *group_weight(const wgml_model *m, int64_t l, const int *targets, int n) {
    const layer *L = &m->layers[l];
    if (n == 3 && targets[0] == T_Q && targets[1] == T_K && targets[2] == T_V) return L->qkv;
    if (n == 2 && targets[0] == T_GATE && targets[1] == T_UP) return L->gate_up;
    return NULL;
}

/* y[i] = decoder_target_linear(.., targets[i], x) for i < n (n <= WGML_QLINEAR_MULTI_MAX): the
 * products with 4-bit weights (no latent) go through one wgml_qlinear_multi (at decode, one
 * GEMV dispatch per weight kind instead of one per weight; larger S falls back to one GEMM each
 * inside it), or, when all n are 4-bit and were loaded as one weight, through one GEMM over it
 * where qw_concat_applies (a prefill); then each adapter is added; the others one by one.
 * Returns false when any output is missing (the error is on the context). */
static bool linear_group(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, const int *targets, int n,
                         wgml_tensor *x, wgml_tensor **y) {
    wgml_qweight q[WGML_QLINEAR_MULTI_MAX];
    const wgml_qweight *qp[WGML_QLINEAR_MULTI_MAX];
    wgml_tensor *qo[WGML_QLINEAR_MULTI_MAX];
    int idx[WGML_QLINEAR_MULTI_MAX], nq = 0;
    for (int i = 0; i < n; i++) {
        const lweight *w = decoder_target_weight(m, l, targets[i]);
        int64_t e = l * DECODER_N_TARGETS + targets[i];
        y[i] = NULL;
        if (x && w->q && !(o->latent && o->latent[e])) {
            if (qw_weight_share(g, w->q, &q[nq])) return false;
            qp[nq] = &q[nq];
            idx[nq++] = i;
        } else {
            y[i] = decoder_target_linear(m, g, o, l, targets[i], x);
        }
    }
    /* all of them 4-bit and loaded as one weight: one GEMM at prefill sizes (qw_concat.h) */
    const wgml_qweight *cat = nq == n ? group_weight(m, l, targets, n) : NULL;
    int64_t ns[WGML_QLINEAR_MULTI_MAX];
    for (int j = 0; cat && j < n; j++) ns[j] = qp[j]->n;
    if (cat && qw_concat_applies(g, x, cat, n, ns)) {
        wgml_qweight cq;
        if (!qw_weight_share(g, cat, &cq) && !qw_linear_concat(g, "model", x, &cq, n, ns, qo))
            for (int j = 0; j < n; j++) y[j] = qo[j];
    } else if (nq == 1) {
        y[idx[0]] = wgml_qlinear(g, x, qp[0]);
    } else if (nq > 1 && !wgml_qlinear_multi(g, x, qp, nq, qo))
        for (int j = 0; j < nq; j++) y[idx[j]] = qo[j];
    for (int j = 0; j < nq; j++)
        if (y[idx[j]]) y[idx[j]] = decoder_add_lora(g, o, l * DECODER_N_TARGETS + targets[idx[j]], x, y[idx[j]]);
    for (int i = 0; i < n; i++)
        if (!y[i]) return false;
    return true;
}

/* The formats in which a norm's output is written quantised to int8 for the products that read
 * it (qw_xq.h). */
typedef struct xq_req {
    qw_xq_fmt f[QW_XQ_MAX];
    int n;
} xq_req;

/* Those of the products of layer l's targets[0..n) (or with l = n_layer of the head) with the
 * norm of x's rows: the decode step's GEMVs, the prefill's GEMMs; none with adapters or latents
 * in o (their products read the normed input itself). */
static xq_req xq_for(const wgml_model *m, wgml_graph *g, const fwd_opts *o, const wgml_tensor *x, int64_t l,
                     const int *targets, int n) {
    const wgml_qweight *ws[WGML_QLINEAR_MULTI_MAX + VPARTS_MAX];
    xq_req r = {.n = 0};
    int nw = 0;
    if (l < m->cfg.n_layer)
        for (int i = 0; i < n && i < WGML_QLINEAR_MULTI_MAX; i++) ws[nw++] = decoder_target_weight(m, l, targets[i])->q;
    else
        for (int p = 0; p < decoder_head(m)->n; p++) ws[nw++] = decoder_head(m)->part[p].q;
    if (x && !o->lora && !o->latent) r.n = qw_xq_formats(g, ws, nw, wgml_tensor_numel(x) / m->cfg.n_embd, r.f);
    return r;
}

/* h = rms_norm(x + y') * w with *sum = x + y', y' = y, or with a post-norm weight wy,
 * rms_norm(y) * wy: one dispatch (norm_add_rms, norm_add_rms_post), which also writes h
 * quantised in xr's formats for the products that read it. */
static wgml_tensor *add_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *wy, wgml_tensor *w, float eps,
                             const xq_req *xr, wgml_tensor **sum) {
    *sum = NULL;
    if (!x || !y || !w) return NULL;
    return norm_add_rms_parts(g, x, y, 1, wy, w, eps, xr->f, xr->n, sum);
}

/* h = add_norm(x, decoder_target_linear(.., t, a), wy, w, xr), *sum the new stream. A 4-bit product
 * without adapter or latent at a prefill's rows is left in its split-K slices (qw_parts.h) and
 * the add and norm sum them as they read them: the reduction's dispatch goes. */
static wgml_tensor *proj_add_norm(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, int t,
                                  wgml_tensor *a, wgml_tensor *x, wgml_tensor *wy, wgml_tensor *w, float eps,
                                  const xq_req *xr, wgml_tensor **sum) {
    const lweight *lw = decoder_target_weight(m, l, t);
    int64_t e = l * DECODER_N_TARGETS + t;
    *sum = NULL;
    if (a && x && w && lw->q && !(o->latent && o->latent[e]) && !(o->lora && o->lora[e]) &&
        qw_parts_applies(g, a, lw->q)) {
        wgml_qweight q;
        int ny = 0;
        wgml_tensor *p = qw_weight_share(g, lw->q, &q) ? NULL : qw_linear_parts(g, "model", a, &q, &ny);
        return p ? norm_add_rms_parts(g, x, p, ny, wy, w, eps, xr->f, xr->n, sum) : NULL;
    }
    return add_norm(g, x, a ? decoder_target_linear(m, g, o, l, t, a) : NULL, wy, w, eps, xr, sum);
}

/* act(gate) * up in one dispatch (ew_glu), act as the architecture says (silu or tanh-GELU). */
static wgml_tensor *glu(const wgml_model *m, wgml_graph *g, wgml_tensor *gate, wgml_tensor *up) {
    if (!gate || !up) return NULL;
    return ew_glu(g, gate, up, m->arch.act == ARCH_GELU_TANH_GLU ? EW_GLU_GELU_TANH : EW_GLU_SILU);
}

/* Attention of layer l through the KV cache with the fused inputs (tab: the layer's RoPE table):
 * at one row, where attention's decode kernel is preferred, the q/k norms, RoPE, both cache
 * writes and attention in one dispatch (with chunks: *chunks = its key chunks, and when more
 * than 1 their partials [H, chunks, hd + 2] come back unmerged for the o projection); else the
 * q/k norms, then RoPE of q and k, q heads-first and both cache writes in one dispatch
 * (rope_kv_step), and attention over the cached rows. Returns [S, H*hd]. */
static wgml_tensor *attention(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l,
                              wgml_tensor *const *qkv, wgml_tensor *tab, int64_t *chunks) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *ar = &m->arch;
    const layer *L = &m->layers[l];
    int64_t S = o->S, hd = c->head_dim, H = c->n_head, Hk = c->n_head_kv;
    int64_t s4q[4] = {1, S, H, hd}, s4k[4] = {1, S, Hk, hd}, s2[2] = {S, H * hd};
    int window = arch_layer_windowed(ar, l) ? ar->window : 0;
    float scale = ar->attn_scale;
    wgml_tensor *q = wgml_reshape(g, qkv[0], 4, s4q);
    wgml_tensor *k = wgml_reshape(g, qkv[1], 4, s4k);
    wgml_tensor *v = wgml_reshape(g, qkv[2], 4, s4k);
    wgml_tensor *kc = decoder_share(g, L->k_cache), *vc = decoder_share(g, L->v_cache), *a;
    if (!kc || !vc) return NULL;
    if (S == 1 && attn_decode_preferred(m->ctx, H, Hk, hd, kc->shape[2], ar->qk_norm)) {
        wgml_tensor *qn = ar->qk_norm ? decoder_share(g, L->q_norm) : NULL;
        wgml_tensor *kn = ar->qk_norm ? decoder_share(g, L->k_norm) : NULL;
        if (ar->qk_norm && (!qn || !kn)) return NULL;
        if (chunks) { /* the chunks' partials when the step splits: the o projection merges them */
            a = attn_decode_step_parts(g, q, k, v, o->positions, o->len, tab, kc, vc, ar->rope_style, window, scale, qn,
                                       kn, c->rms_eps, chunks);
            if (a && *chunks > 1) return a;
        } else {
            a = attn_decode_step(g, q, k, v, o->positions, o->len, tab, kc, vc, ar->rope_style, window, scale, qn, kn,
                                 c->rms_eps);
        }
        return a ? wgml_reshape(g, a, 2, s2) : NULL;
    }
    if (ar->qk_norm) {
        q = decoder_head_norm(g, q, decoder_share(g, L->q_norm), c->rms_eps);
        k = decoder_head_norm(g, k, decoder_share(g, L->k_norm), c->rms_eps);
    }
    if (!(q = rope_kv_step(g, q, k, v, o->positions, tab, kc, vc, ar->rope_style))) return NULL;
    a = sdpa_cached_rows(g, q, kc, vc, o->len, window, scale); /* [1, S, H, hd] */
    return wgml_reshape(g, a, 2, s2);
}

/* Whether the decode step folds norms, residual adds and the gated activation into the 4-bit
 * GEMVs (qw_gemv_fused): one row through the KV cache, the fused ops on, no adapters or latents
 * (their products need the normed input itself), every projection 4-bit/8-bit. */
static bool gemv_fusion(const wgml_model *m, const fwd_opts *o) {
    if (o->B * o->S != 1 || o->lora || o->latent) return false;
    for (int64_t l = 0; l < m->cfg.n_layer; l++)
        for (int t = 0; t < DECODER_N_TARGETS; t++)
            if (!decoder_target_weight(m, l, t)->q) return false;
    return true;
}

/* Whether every layer's o projection GEMV can merge the decode step's attention chunks in its
 * prologue (qw_gemv_merge_fits with the step's chunk count). */
static bool merge_fits(const wgml_model *m) {
    const wgml_llama_config *c = &m->cfg;
    int64_t chunks = attn_decode_chunks(m->ctx, c->n_head, c->n_head_kv, c->head_dim, c->n_ctx);
    qw_gemv_fuse f = {.epi = QW_EPI_RESIDUAL, .merge_heads = c->n_head, .merge_chunks = chunks, .merge_dim = c->head_dim};
    for (int64_t l = 0; l < c->n_layer && chunks > 1; l++)
        if (!qw_gemv_merge_fits(m->ctx, decoder_target_weight(m, l, T_O)->q, &f)) return false;
    return chunks > 1;
}

/* Whether every layer's q/k/v and gate/up GEMVs can take their RMSNorm in the prologue for less
 * than the norm's own dispatch costs (qw_gemv_norm_fits). Where not (the large projections of a
 * billion-parameter model), the GEMVs hand the norms over (handoffs_fit), or, where that does
 * not fit either, the step forms each norm in one dispatch with the residual add before it, as
 * with post-norms. */
static bool norms_fit(const wgml_model *m) {
    static const int qkv_t[3] = {T_Q, T_K, T_V}, gu_t[2] = {T_GATE, T_UP};
    wgml_tensor *nw = m->layers[0].attn_norm; /* only its presence is read */
    for (int64_t l = 0; l < m->cfg.n_layer; l++) {
        const wgml_qweight *qkv[3], *gu[2];
        for (int i = 0; i < 3; i++) qkv[i] = decoder_target_weight(m, l, qkv_t[i])->q;
        for (int i = 0; i < 2; i++) gu[i] = decoder_target_weight(m, l, gu_t[i])->q;
        qw_gemv_fuse fs = {.norm_w = nw, .epi = QW_EPI_STORE}, fg = {.norm_w = nw, .epi = QW_EPI_SWIGLU};
        if (!qw_gemv_norm_fits(m->ctx, qkv, 3, &fs) || !qw_gemv_norm_fits(m->ctx, gu, 2, &fg)) return false;
    }
    return true;
}

/* Whether every layer's GEMVs can hand the norms over (qw_gemv_handoff_fits): o and down store
 * the sum times the next norm's weight and its partial sums of squares, q/k/v and gate/up take
 * them (f's tensors stand in for their presence; merge_o: o merges attention's chunks). */
static bool handoffs_fit(const wgml_model *m, bool merge_o) {
    static const int qkv_t[3] = {T_Q, T_K, T_V};
    const wgml_llama_config *c = &m->cfg;
    wgml_tensor *nw = m->layers[0].attn_norm; /* only its presence is read */
    int64_t chunks = merge_o ? attn_decode_chunks(m->ctx, c->n_head, c->n_head_kv, c->head_dim, c->n_ctx) : 0;
    for (int64_t l = 0; l < c->n_layer; l++) {
        const wgml_qweight *qkv[3], *gu[2] = {decoder_target_weight(m, l, T_GATE)->q, decoder_target_weight(m, l, T_UP)->q};
        const wgml_qweight *o = decoder_target_weight(m, l, T_O)->q, *d = decoder_target_weight(m, l, T_DOWN)->q;
        for (int i = 0; i < 3; i++) qkv[i] = decoder_target_weight(m, l, qkv_t[i])->q;
        qw_gemv_fuse fo = {.epi = QW_EPI_RESIDUAL, .next_norm = nw}, fd = fo, fq = {.ssq = nw}, fg = {.ssq = nw, .epi = QW_EPI_SWIGLU};
        if (chunks > 1) fo.merge_heads = c->n_head, fo.merge_chunks = chunks, fo.merge_dim = c->head_dim;
        if (!qw_gemv_handoff_fits(m->ctx, &o, 1, &fo) || !qw_gemv_handoff_fits(m->ctx, gu, 2, &fg) ||
            !qw_gemv_handoff_fits(m->ctx, &d, 1, &fd) || !qw_gemv_handoff_fits(m->ctx, qkv, 3, &fq))
            return false;
    }
    return true;
}

/* out = the targets of layer l on x through one qw_gemv_fused call with fusion f (its eps and
 * merge set here: chunks > 1: x is attention's chunk partials, merged in the prologue); out
 * holds three entries where f hands a norm over. NULL with the error on the context. */
static bool gemv_fused_targets(const wgml_model *m, wgml_graph *g, int64_t l, const int *targets, int n, wgml_tensor *x,
                               qw_gemv_fuse f, int64_t chunks, wgml_tensor **out) {
    wgml_qweight q[WGML_QLINEAR_MULTI_MAX];
    const wgml_qweight *qp[WGML_QLINEAR_MULTI_MAX];
    if (!x || (f.epi == QW_EPI_RESIDUAL && !f.residual)) return false;
    for (int i = 0; i < n; i++) {
        if (qw_weight_share(g, decoder_target_weight(m, l, targets[i])->q, &q[i])) return false;
        qp[i] = &q[i];
    }
    f.eps = m->cfg.rms_eps;
    if (chunks > 1) f.merge_heads = m->cfg.n_head, f.merge_chunks = chunks, f.merge_dim = m->cfg.head_dim;
    return qw_gemv_fused(g, "model", x, qp, n, &f, out) == WGML_OK;
}

/* Layer l's o, gate/up and down GEMVs with the norms handed over (handoffs_fit): the residual
 * stream *x goes on, and *xg, *sq become the next q/k/v's input (x times the next norm's
 * weight, x's partial sums of squares); after the last layer only *x. False on an error. */
static bool ffn_handoff(const wgml_model *m, wgml_graph *g, int64_t l, wgml_tensor *a, int64_t chunks,
                        qw_epilogue glu_epi, wgml_tensor **x, wgml_tensor **xg, wgml_tensor **sq) {
    static const int gu_t[2] = {T_GATE, T_UP}, o_t[1] = {T_O}, down_t[1] = {T_DOWN};
    const layer *L = &m->layers[l];
    wgml_tensor *out[3] = {NULL, NULL, NULL}, *act = NULL;
    qw_gemv_fuse fo = {.epi = QW_EPI_RESIDUAL, .residual = *x, .next_norm = decoder_share(g, L->ffn_norm)};
    if (!fo.next_norm || !gemv_fused_targets(m, g, l, o_t, 1, a, fo, chunks, out)) return false;
    qw_gemv_fuse fg = {.ssq = out[2], .epi = glu_epi}, fd = {.epi = QW_EPI_RESIDUAL, .residual = out[0]};
    if (!gemv_fused_targets(m, g, l, gu_t, 2, out[1], fg, 0, &act)) return false;
    if (l + 1 < m->cfg.n_layer && !(fd.next_norm = decoder_share(g, m->layers[l + 1].attn_norm))) return false;
    if (!gemv_fused_targets(m, g, l, down_t, 1, act, fd, 0, out)) return false;
    *x = out[0], *xg = out[1], *sq = out[2];
    return true;
}

/* decoder_forward_plain's forward with the fused kernels: each residual add computes the next
 * norm with it in one dispatch; the projections that read one input are grouped (one GEMV per
 * weight kind at decode, one GEMM over the concatenated weight at prefill); at decode the GEMVs
 * take the norms (in their prologue, or handed over by the GEMV before), residual adds and gated
 * activation, and attention is one kernel whose key chunks the o projection merges. */
wgml_tensor *decoder_forward_fused(const wgml_model *m, wgml_graph *g, const fwd_opts *o) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *ar = &m->arch;
    float eps = c->rms_eps;
    if (!o->len || o->B != 1 || o->latent) return decoder_forward_plain(m, g, o); /* not an inference graph */
    /* the RoPE tables (one per base) of the fused attention inputs through the KV cache */
    wgml_tensor *tab[2] = {decoder_share(g, m->rope_tab[0]), decoder_share(g, m->rope_tab[1])};
    if (!tab[0] || (ar->window && !tab[1])) return NULL;
    /* decode with GEMV fusion: without post-norms, where the norms fit the GEMVs' prologue
     * (pre_only), every norm and residual add is inside a GEMV (x is the only stream; per block:
     * q/k/v with the norm, attention, o with the residual, gate/up with the norm and the
     * activation, down with the residual); else only the gated activation moves into the
     * gate/up GEMV */
    bool gf = gemv_fusion(m, o), pre_only = gf && !ar->post_norms && norms_fit(m);
    /* decode: the o projections' GEMVs merge attention's key chunks in their prologue */
    bool merge_o = gf && merge_fits(m);
    /* decode where the norms do not fit the prologue: the GEMVs hand them over (ffn_handoff) */
    bool hand = gf && !ar->post_norms && !pre_only && handoffs_fit(m, merge_o);
    wgml_tensor *xg = NULL, *sq = NULL; /* the handoff to the next q/k/v (none before layer 0) */
    qw_epilogue glu_epi = ar->act == ARCH_GELU_TANH_GLU ? QW_EPI_GEGLU : QW_EPI_SWIGLU;
    wgml_tensor *x = decoder_embed(m, g, o->ids); /* the residual stream [B*S, D] */
    /* the next sub-block's input (pre_only: never formed) */
    wgml_tensor *h = pre_only ? x : wgml_rms_norm(g, x, decoder_share(g, m->layers[0].attn_norm), eps);
    static const int qkv_t[3] = {T_Q, T_K, T_V}, gu_t[2] = {T_GATE, T_UP}, o_t[1] = {T_O}, down_t[1] = {T_DOWN};
    for (int64_t l = 0; l < c->n_layer; l++) {
        const layer *L = &m->layers[l];
        wgml_tensor *qkv[3], *gu[2];
        if (pre_only) {
            qw_gemv_fuse f = {.norm_w = decoder_share(g, L->attn_norm)};
            if (!f.norm_w || !gemv_fused_targets(m, g, l, qkv_t, 3, x, f, 0, qkv)) return NULL;
        } else if (sq) {
            if (!gemv_fused_targets(m, g, l, qkv_t, 3, xg, (qw_gemv_fuse){.ssq = sq}, 0, qkv)) return NULL;
        } else if (!h || !linear_group(m, g, o, l, qkv_t, 3, h, qkv)) {
            return NULL; /* q, k, v from one h */
        }
        /* decode: attention's key chunks left for the o projection's GEMV to merge, where it can */
        int64_t chunks = 0;
        wgml_tensor *a = attention(m, g, o, l, qkv, tab[arch_layer_windowed(ar, l)], merge_o ? &chunks : NULL);
        if (!a) return NULL;
        if (o->row && l + 1 == c->n_layer) {
            /* a prefill's last layer: only the wanted row goes on past attention (whose cache
             * writes every row needed), so its o projection and FFN run at one row */
            a = wgml_index_select(g, a, 0, o->row);
            if (!a || !(x = wgml_index_select(g, x, 0, o->row))) return NULL;
        }
        if (pre_only) {
            wgml_tensor *act = NULL;
            qw_gemv_fuse fo = {.epi = QW_EPI_RESIDUAL, .residual = x}, fg = {.norm_w = decoder_share(g, L->ffn_norm), .epi = glu_epi};
            if (!fg.norm_w || !gemv_fused_targets(m, g, l, o_t, 1, a, fo, chunks, &x) ||
                !gemv_fused_targets(m, g, l, gu_t, 2, x, fg, 0, &act))
                return NULL;
            qw_gemv_fuse fd = {.epi = QW_EPI_RESIDUAL, .residual = x};
            if (!gemv_fused_targets(m, g, l, down_t, 1, act, fd, 0, &x)) return NULL;
            continue;
        }
        if (hand) {
            if (!ffn_handoff(m, g, l, a, chunks, glu_epi, &x, &xg, &sq)) return NULL;
            continue;
        }
        wgml_tensor *wy = ar->post_norms ? decoder_share(g, L->post_attn_norm) : NULL, *y = NULL;
        /* the norms also write their output quantised for the products after them (qw_xq.h) */
        xq_req xq_gu = xq_for(m, g, o, x, l, gu_t, 2), xq_qkv = xq_for(m, g, o, x, l + 1, qkv_t, 3);
        if (chunks > 1) {
            if (!gemv_fused_targets(m, g, l, o_t, 1, a, (qw_gemv_fuse){.epi = QW_EPI_STORE}, chunks, &y)) return NULL;
            h = add_norm(g, x, y, wy, decoder_share(g, L->ffn_norm), eps, &xq_gu, &x);
        } else {
            h = proj_add_norm(m, g, o, l, T_O, a, x, wy, decoder_share(g, L->ffn_norm), eps, &xq_gu, &x);
        }
        wgml_tensor *act = NULL;
        if (gf) {
            if (!gemv_fused_targets(m, g, l, gu_t, 2, h, (qw_gemv_fuse){.epi = glu_epi}, 0, &act)) return NULL;
        } else {
            if (!h || !linear_group(m, g, o, l, gu_t, 2, h, gu)) return NULL; /* gate and up from one h */
            act = glu(m, g, gu[0], gu[1]);
        }
        wgml_tensor *fpost = ar->post_norms ? decoder_share(g, L->post_ffn_norm) : NULL;
        wgml_tensor *next = decoder_share(g, l + 1 < c->n_layer ? m->layers[l + 1].attn_norm : m->output_norm);
        h = proj_add_norm(m, g, o, l, T_DOWN, act, x, fpost, next, eps, &xq_qkv, &x);
        if (!x || !h) return NULL;
    }
    if (pre_only || hand) h = wgml_rms_norm(g, x, decoder_share(g, m->output_norm), eps);
    return h;
}
