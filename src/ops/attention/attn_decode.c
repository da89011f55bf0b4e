/* One decode step's attention in one dispatch (attn_decode.wgsl) and the merge of its key
 * chunks (attn_combine.wgsl): see attn_decode.h. */
#include "ops/attention/attn_decode.h"
#include "ops/attention/kv_cache.h"
#include "ops/attention/sdpa_rows.h"

#include "gpu/gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DECODE_WG 256
/* Most chunks: attn_combine reads every chunk of a row for each output element. */
#define DECODE_MAX_CHUNKS 128
/* Workgroups (kv heads x chunks) the keys per thread grow down to: each workgroup repeats the
 * step's fixed work (q's rotation, the barriers), so fewer and longer chunks pay while the grid
 * still fills the GPU. H100, Llama-3.1-8B Q4_K_M (8 kv heads) decode at 4,096 positions: 64
 * keys a workgroup (520 workgroups) 177.7 tok/s, 128 (264) 187.9, 256 (136) 185.9, 512 (72)
 * 182.2 (bench/NOTES.md, 2026-12-06). */
#define DECODE_SPREAD 256

static int64_t decode_chunks(int64_t smax, int64_t kpt) { return (smax + 64 * kpt - 1) / (64 * kpt); }

/* attn_decode.wgsl's workgroup memory: qs, ss, red, ov, sml, csw, len_wg and pos_wg */
static uint64_t decode_wg_bytes(int64_t G, int64_t D, int64_t ch) {
    return 4ull * (uint64_t)(G * D + G * ch + (G + 1) * DECODE_WG + D) + 16ull * (uint64_t)(G * DECODE_WG) +
           8ull * (uint64_t)(G * (DECODE_WG / (D / 4))) + 8;
}

/* The kernel's keys per thread, chunk length and count; false when the shapes do not fit it.
 * Keys per thread: the fewest that keep the chunks at most DECODE_MAX_CHUNKS, doubled while the
 * workgroups stay at least DECODE_SPREAD and the workgroup memory fits ($WGML_DECODE_KPT=N
 * forces N, at least that fewest: sweeps). */
static bool decode_plan(wgml_ctx *ctx, int64_t Hq, int64_t Hk, int64_t D, int64_t smax, int64_t *kpt, int64_t *ch,
                        int64_t *n_chunk) {
    int64_t d4 = D / 4;
    if (Hk <= 0 || Hq % Hk || D <= 0 || D % 4 || d4 > DECODE_WG || (d4 & (d4 - 1)) || smax <= 0 || Hq / Hk > 16 ||
        smax * Hk * D > 0xFFFFFFFFll)
        return false;
    int64_t G = Hq / Hk, least = 1; /* 64 keys a pass */
    uint64_t storage = gpu_get_caps(ctx)->max_workgroup_storage;
    while (least < 64 && decode_chunks(smax, least) > DECODE_MAX_CHUNKS) least *= 2;
    *kpt = least;
    while (*kpt < 64 && Hk * decode_chunks(smax, 2 * *kpt) >= DECODE_SPREAD &&
           decode_wg_bytes(G, D, 64 * (2 * *kpt)) <= storage) /* the chunk at twice the keys */
        *kpt *= 2;
    const char *e = getenv("WGML_DECODE_KPT");
    long forced = e && *e ? strtol(e, NULL, 10) : 0;
    if (forced >= least && forced <= 64) *kpt = forced;
    *ch = 64 * *kpt;
    *n_chunk = decode_chunks(smax, *kpt);
    return *n_chunk <= DECODE_MAX_CHUNKS && decode_wg_bytes(G, D, *ch) <= storage;
}

bool attn_decode_fits(wgml_ctx *ctx, int64_t Hq, int64_t Hk, int64_t D, int64_t smax) {
    int64_t kpt, ch, n;
    return ctx && decode_plan(ctx, Hq, Hk, D, smax, &kpt, &ch, &n);
}

bool attn_decode_preferred(wgml_ctx *ctx, int64_t Hq, int64_t Hk, int64_t D, int64_t smax, bool qk_norm) {
    /* storage bindings: q, k, v, pos, len, tab, both caches and the output, and the norms */
    uint32_t storage = 9 + (qk_norm ? 2 : 0);
    return attn_decode_fits(ctx, Hq, Hk, D, smax) && storage <= gpu_get_caps(ctx)->max_storage_per_stage;
}

int64_t attn_decode_chunks(wgml_ctx *ctx, int64_t Hq, int64_t Hk, int64_t D, int64_t smax) {
    int64_t kpt, ch, n;
    return ctx && decode_plan(ctx, Hq, Hk, D, smax, &kpt, &ch, &n) ? n : 0;
}

/* The tensors of one decode step (decode_step's operands). */
typedef struct decode_io {
    wgml_tensor *q, *k, *v, *pos, *len, *tab, *k_cache, *v_cache, *q_norm, *k_norm;
} decode_io;

/* decode_step's checks: each operand's dtype and rank, the norms both or neither, the shapes
 * against one another, and scale, window and eps; false after setting the error. */
static bool decode_check(wgml_ctx *ctx, wgml_graph *g, const char *op, const decode_io *t, int64_t window, float scale,
                         float eps) {
    if (check_operand(ctx, g, op, "q", t->q, WGML_F32, 4, 4) || check_operand(ctx, g, op, "k", t->k, WGML_F32, 4, 4) ||
        check_operand(ctx, g, op, "v", t->v, WGML_F32, 4, 4) || check_operand(ctx, g, op, "pos", t->pos, WGML_I32, 1, 1) ||
        check_operand(ctx, g, op, "len", t->len, WGML_I32, 1, 1) || check_operand(ctx, g, op, "tab", t->tab, WGML_F32, 2, 2) ||
        check_kv_cache(ctx, g, op, "k_cache", t->k_cache) || check_kv_cache(ctx, g, op, "v_cache", t->v_cache))
        return false;
    if (!t->q_norm != !t->k_norm) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: q_norm and k_norm come together (one is NULL)", op);
        return false;
    }
    if (t->q_norm && (check_operand(ctx, g, op, "q_norm", t->q_norm, WGML_F32, 1, 1) ||
                      check_operand(ctx, g, op, "k_norm", t->k_norm, WGML_F32, 1, 1)))
        return false;
    const wgml_tensor *q = t->q, *k = t->k, *v = t->v, *k_cache = t->k_cache, *v_cache = t->v_cache;
    int64_t Hq = q->shape[2], Hk = k->shape[2], D = q->shape[3];
    bool ok = q->shape[0] == 1 && q->shape[1] == 1 && t->pos->numel == 1 && t->len->numel == 1 && Hk > 0 && Hq % Hk == 0;
    for (int i = 0; i < 4 && ok; i++) ok = k->shape[i] == v->shape[i];
    ok = ok && kv_cache_alike(k_cache, v_cache) && k->shape[0] == 1 && k->shape[1] == 1 && k->shape[3] == D &&
         k_cache->shape[0] == 1 && k_cache->shape[1] == Hk && kv_cache_dim(k_cache) == D &&
         t->tab->shape[0] == D / 2 && t->tab->shape[1] == 4 &&
         (!t->q_norm || (t->q_norm->shape[0] == D && t->k_norm->shape[0] == D));
    if (!ok) {
        wgml_set_error(ctx, WGML_ERR_SHAPE,
                       "%s: q %s, k %s, v %s must be [1, 1, heads, D] (k and v alike, q's heads a multiple of k's), "
                       "pos %s and len %s [1], tab %s [D/2, 4], caches %s %s and %s %s [1, Hk, smax, D] (f16 form: u32 "
                       "[1, Hk, smax, D / 2], both alike), norms [D]",
                       op, tshape(q), tshape(k), tshape(v), tshape(t->pos), tshape(t->len), tshape(t->tab),
                       wgml_dtype_name(k_cache->dtype), tshape(k_cache), wgml_dtype_name(v_cache->dtype), tshape(v_cache));
        return false;
    }
    if (!isfinite(scale) || window < 0 || !(eps >= 0.0f)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: scale %g must be finite, window %lld >= 0 and eps %g >= 0", op,
                       (double)scale, (long long)window, (double)eps);
        return false;
    }
    return true;
}

/* The decode kernel's prelude: its constants and bindings; with qkn the norms' weights are read
 * after tab, else the weights read as 1; the caches in their form f16 or f32 (kv_cache.h). */
static bool decode_prelude(char *prelude, size_t size, int64_t D, int64_t G, int64_t kpt, int64_t ch, int64_t n_chunk,
                           bool qkn, bool f16) {
    int pl = snprintf(prelude, size,
                      "const WG: u32 = %du; const D: u32 = %lldu; const D4: u32 = %lldu; const HALF: u32 = %lldu;\n"
                      "const G: u32 = %lldu; const KPT: u32 = %lldu; const CH: u32 = %lldu; const LPK: u32 = %du;\n"
                      "const NS: u32 = %lldu; const FINAL: bool = %s; const QKN: bool = %s;\n"
                      "//!bindings read(q: array<f32>, k: array<f32>, v: array<f32>, pos: array<i32>, len: array<i32>)\n"
                      "//!bindings read(tab: array<vec4<f32>>)\n",
                      DECODE_WG, (long long)D, (long long)(D / 4), (long long)(D / 2), (long long)G, (long long)kpt,
                      (long long)ch, DECODE_WG / 64, (long long)(DECODE_WG / (D / 4)), n_chunk == 1 ? "true" : "false",
                      qkn ? "true" : "false");
    if (qkn) {
        pl += snprintf(prelude + pl, size - (size_t)pl,
                       "//!bindings read(qn: array<f32>, kn: array<f32>)\n"
                       "fn qn_at(e: u32) -> f32 { return qn[e]; }\nfn kn_at(e: u32) -> f32 { return kn[e]; }\n");
    } else {
        pl += snprintf(prelude + pl, size - (size_t)pl,
                       "fn qn_at(e: u32) -> f32 { return 1.0; }\nfn kn_at(e: u32) -> f32 { return 1.0; }\n");
    }
    pl = pl < 0 || (size_t)pl >= size ? -1 : kv_cache_wgsl(prelude, size, pl, "k_cache", f16, true, 4);
    pl = pl < 0 ? pl : kv_cache_wgsl(prelude, size, pl, "v_cache", f16, true, 4);
    if (pl < 0) return false;
    int n = snprintf(prelude + pl, size - (size_t)pl, "//!bindings write(part: array<f32>) uniform(p: Params)\n");
    return n >= 0 && (size_t)n < size - (size_t)pl;
}

/* attn_decode_step, and with parts the partials of a split step left unmerged (*parts the
 * chunk count; 1: the output itself). */
static wgml_tensor *decode_step(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                                wgml_tensor *len, wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache,
                                wgml_rope_style style, int64_t window, float scale, wgml_tensor *q_norm,
                                wgml_tensor *k_norm, float eps, int64_t *parts) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "attn_decode_step";
    decode_io io = {.q = q, .k = k, .v = v, .pos = pos, .len = len, .tab = tab, .k_cache = k_cache, .v_cache = v_cache,
                    .q_norm = q_norm, .k_norm = k_norm};
    if (!decode_check(ctx, g, op, &io, window, scale, eps)) return NULL;
    int64_t Hq = q->shape[2], Hk = k->shape[2], D = q->shape[3], smax = k_cache->shape[2];
    int64_t G = Hq / Hk, kpt, ch, n_chunk;
    if (!decode_plan(ctx, Hq, Hk, D, smax, &kpt, &ch, &n_chunk)) {
        wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                       "%s: q %s with caches %s: D %% 4, %lld query heads per kv head or the workgroup memory do not "
                       "fit the decode kernel",
                       op, tshape(q), tshape(k_cache), (long long)G);
        return NULL;
    }
    double sc = scale > 0 ? (double)scale : 1.0 / sqrt((double)D);
    bool qkn = q_norm != NULL;
    char prelude[2048];
    if (!decode_prelude(prelude, sizeof prelude, D, G, kpt, ch, n_chunk, qkn, kv_cache_f16(k_cache))) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: the kernel's prelude does not fit", op);
        return NULL;
    }
    struct {
        uint32_t Hk, smax, n_chunk, window, style;
        float scale2, eps;
        uint32_t pad;
    } p = {.eps = eps,
           .Hk = (uint32_t)Hk,
           .smax = (uint32_t)smax,
           .n_chunk = (uint32_t)n_chunk,
           .window = (uint32_t)(window < smax ? window : 0),
           .style = style == WGML_ROPE_INTERLEAVED ? 1u : 0u,
           .scale2 = (float)(sc * 1.4426950408889634074)};
    /* one chunk: the kernel writes the output itself; else the chunks' partials and their merge
     * (with parts: the partials alone, [Hq, n_chunk, D + 2]) */
    int64_t ps[3] = {Hq, n_chunk, D + 2}, os[4] = {1, Hq, 1, D};
    if (parts) *parts = n_chunk;
    wgml_tensor *out = parts && n_chunk > 1 ? NULL : graph_output(g, op, WGML_F32, 4, os);
    wgml_tensor *part = n_chunk > 1 && (out || parts) ? graph_output(g, op, WGML_F32, 3, ps) : NULL;
    if (parts && n_chunk > 1) {
        wgml_tensor *ro[8] = {q, k, v, pos, len, tab, q_norm, k_norm}, *rw[3] = {k_cache, v_cache, part};
        if (part && !graph_dispatch(g, op, "attn_decode", prelude, ro, qkn ? 8 : 6, rw, 3, &p, sizeof p,
                                    (uint64_t)(Hk * n_chunk)))
            return part;
        wgml_tensor_free(part);
        return NULL;
    }
    wgml_tensor *ro[8] = {q, k, v, pos, len, tab, q_norm, k_norm}, *rw[3] = {k_cache, v_cache, n_chunk > 1 ? part : out};
    wgml_status s = out && (n_chunk == 1 || part) ? graph_dispatch(g, op, "attn_decode", prelude, ro, qkn ? 8 : 6, rw, 3, &p,
                                                                    sizeof p, (uint64_t)(Hk * n_chunk))
                                                  : wgml_last_status(ctx);
    if (!s && n_chunk > 1) {
        s = attn_combine(g, op, part, out, Hq * D, D, n_chunk, false, 1, 1, 1);
    }
    wgml_tensor_free(part); /* eager: the recorded dispatches hold its range; built graph: no-op */
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

wgml_tensor *attn_decode_step(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                              wgml_tensor *len, wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache,
                              wgml_rope_style style, int64_t window, float scale, wgml_tensor *q_norm,
                              wgml_tensor *k_norm, float eps) {
    return decode_step(g, q, k, v, pos, len, tab, k_cache, v_cache, style, window, scale, q_norm, k_norm, eps, NULL);
}

wgml_tensor *attn_decode_step_parts(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                                    wgml_tensor *len, wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache,
                                    wgml_rope_style style, int64_t window, float scale, wgml_tensor *q_norm,
                                    wgml_tensor *k_norm, float eps, int64_t *chunks) {
    if (!chunks) {
        if (g) wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "attn_decode_step: chunks is NULL");
        return NULL;
    }
    return decode_step(g, q, k, v, pos, len, tab, k_cache, v_cache, style, window, scale, q_norm, k_norm, eps, chunks);
}
