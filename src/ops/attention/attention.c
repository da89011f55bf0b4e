/* Attention: scaled dot-product attention with grouped-query heads (wgml_sdpa; the sliding-window
 * causal form wgml_sdpa_window), the KV cache append (wgml_kv_append) and attention over a
 * cache's filled prefix (wgml_sdpa_cached, wgml_sdpa_cached_window).
 * Kernels: attn_sdpa.wgsl (flash-attention style, online softmax), attn_kv_append.wgsl. */
#include "graph/graph.h"
#include "ops/attention/attention_grad.h"
#include "ops/attention/kv_cache.h"
#include "ops/attention/sdpa_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static wgml_status check_scalar_i32(wgml_ctx *ctx, wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t) {
    wgml_status s;
    if ((s = check_tensor(ctx, op, arg, t)) || (s = check_dtype(ctx, op, arg, t, WGML_I32))) return s;
    if (t->numel != 1)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s must hold one element", op, arg, tshape(t));
    return check_graph(ctx, g, op, arg, t);
}

/* q [B, Hq, Sq, D] against k, v [B, Hkv, Skv, D]: same B and D, k and v the same shape,
 * Hq a multiple of Hkv. cache: k and v are caches, either form (kv_cache.h; the f16 form with D a
 * multiple of 4, read as vec4s), both alike. */
static wgml_status check_qkv(wgml_ctx *ctx, wgml_graph *g, const char *op, const wgml_tensor *q, const char *kn,
                             const wgml_tensor *k, const char *vn, const wgml_tensor *v, bool cache) {
    wgml_status s;
    if ((s = check_operand(ctx, g, op, "q", q, WGML_F32, 4, 4)) ||
        (s = cache ? check_kv_cache(ctx, g, op, kn, k) : check_operand(ctx, g, op, kn, k, WGML_F32, 4, 4)) ||
        (s = cache ? check_kv_cache(ctx, g, op, vn, v) : check_operand(ctx, g, op, vn, v, WGML_F32, 4, 4)))
        return s;
    if (k->dtype != v->dtype)
        return wgml_set_error(ctx, WGML_ERR_DTYPE, "%s: %s %s %s and %s %s %s must be the same form", op, kn,
                              wgml_dtype_name(k->dtype), tshape(k), vn, wgml_dtype_name(v->dtype), tshape(v));
    if (memcmp(k->shape, v->shape, sizeof(int64_t) * 4) != 0)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s and %s %s must have the same shape", op, kn, tshape(k), vn,
                              tshape(v));
    if (q->shape[0] != k->shape[0])
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: q %s and %s %s: batch sizes differ", op, tshape(q), kn, tshape(k));
    if (q->shape[3] != kv_cache_dim(k))
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: q %s and %s %s: head dimensions D differ%s", op, tshape(q), kn,
                              tshape(k), kv_cache_f16(k) ? " (an f16 cache holds D / 2 words a row)" : "");
    if (kv_cache_f16(k) && q->shape[3] % 4)
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED, "%s: %s %s: an f16 cache needs D (%lld) a multiple of 4", op,
                              kn, tshape(k), (long long)q->shape[3]);
    if (q->shape[1] % k->shape[1] != 0)
        return wgml_set_error(ctx, WGML_ERR_SHAPE,
                              "%s: q %s has %lld heads, not a multiple of the %lld kv heads of %s %s", op, tshape(q),
                              (long long)q->shape[1], (long long)k->shape[1], kn, tshape(k));
    return WGML_OK;
}

/* Split the keys of attention with few row blocks until about this many workgroups run. */
#define SDPA_SPLIT_TARGET 64
#define SDPA_SPLIT_TARGET_ROWS 512
#define SDPA_SPLIT_MAX_ROWS 8

/* Thread grid and register tile of the attention kernel: WX x WY threads, TM rows x TN keys
 * per thread, so BQ = WY*TM query rows and BK = WX*TN keys per block; the scores are summed over
 * dims DC at a time (DC = D unless the tile fits the workgroup memory only with chunks). */
typedef struct sdpa_tile {
    uint32_t wx, wy, tm, tn, dc;
} sdpa_tile;

/* Candidates, best first, for few rows (decode: one kv head's query heads), a handful, and
 * many (prefill). The first whose workgroup memory fits the device is used, with the widest score
 * chunk that fits (tile_chunk; the lists leave dc 0). */
static const sdpa_tile TILES_FEW[] = {{16, 4, 1, 4, 0}, {16, 4, 1, 2, 0}, {16, 4, 1, 1, 0}, {8, 4, 1, 1, 0}};
/* On a CPU adapter (lavapipe, SwiftShader) few rows take 1 x 2 tiles: lavapipe's LLVM took 25 s
 * to compile the 16x4 threads' 1 x 4 tile at D 64 (8.3 s at 128-bit vectors; the MID and MANY
 * tiles 1.8-3.9 s), the 1 x 2 tile 1.4 s, and SmolLM2's decode ran at the same speed with
 * either (bench/NOTES.md, 2026-12-04). */
static const sdpa_tile TILES_FEW_CPU[] = {{16, 4, 1, 2, 0}, {16, 4, 1, 1, 0}, {8, 4, 1, 1, 0}};
static const sdpa_tile TILES_MID[] = {{8, 8, 2, 4, 0}, {8, 8, 2, 2, 0}, {8, 8, 1, 1, 0}};
/* MANY, from the H200 sweep at the training shape (B 8, Hq 9, Hkv 3, S 512, D 64, causal;
 * bench/NOTES.md): 4x32 threads with 2x8 tiles (BQ 64, BK 32, 42 KiB) 0.249 ms, 8x16 with 4x2
 * (BQ 64, BK 16, 30 KiB, fits 32 KiB devices) 0.311 ms, the former 8x8 with 4x4 0.517 ms. */
static const sdpa_tile TILES_MANY[] = {{4, 32, 2, 8, 0}, {8, 16, 4, 2, 0}, {8, 8, 4, 4, 0}, {8, 8, 4, 2, 0}, {8, 8, 2, 2, 0}, {8, 8, 1, 1, 0}};
/* WIDE (D > 64), where the score chunk DC lets wider tiles fit, from the H200 sweeps at 512-token
 * prefills (bench/NOTES.md): D 128 (Hq 32, Hkv 8) 8x32 threads with 2x4 tiles (DC 32) 0.264 ms
 * against 0.425 for the MANY order; D 256 (Gemma 3: Hq 4, Hkv 1; the 8x32 tile does not fit 48
 * KiB) 16x16 with 2x2 (DC 32) 0.085 ms with 8 key chunks, against 0.172 for the best unsplit tile
 * (32x8 with 2x1, 0.124 split). */
static const sdpa_tile TILES_WIDE[] = {{8, 32, 2, 4, 0}, {16, 16, 2, 2, 0}, {32, 8, 2, 1, 0}, {8, 8, 2, 2, 0}, {8, 8, 1, 1, 0}};

static uint64_t tile_bytes(const sdpa_tile *t, int64_t D, uint32_t dc) {
    uint64_t bq = t->wy * t->tm, bk = t->wx * t->tn;
    return 4ull * (bq * dc + bk * dc + bk * (uint64_t)D + bk * bq + bq * t->wx) + 16;
}

/* The widest score chunk with which tile t fits limit bytes at head dimension D: D itself, else
 * the largest of 64, 32, 16 that divides D (a multiple of the vec4 reads); 0 when none fits. */
static uint32_t tile_chunk(const sdpa_tile *t, int64_t D, uint64_t limit) {
    if (tile_bytes(t, D, (uint32_t)D) <= limit) return (uint32_t)D;
    for (uint32_t dc = 64; D % 4 == 0 && dc >= 16; dc /= 2)
        if (dc < D && D % dc == 0 && tile_bytes(t, D, dc) <= limit) return dc;
    return 0;
}

/* $WGML_SDPA_TILE="WX,WY,TM,TN[,DC]" overrides the choice (benchmark sweeps): 0 when unset, 1
 * with *t set, -1 when it is not a tile (WX and WY powers of two, WX·WY <= 256, TM and TN 1..8,
 * DC a chunk as tile_chunk takes, the widest that fits when left out) that fits the workgroup
 * memory. */
static int env_tile(int64_t D, uint64_t limit, sdpa_tile *t) {
    const char *env = getenv("WGML_SDPA_TILE");
    unsigned wx, wy, tm, tn, dc = 0;
    if (!env || !*env) return 0;
    int got = sscanf(env, "%u,%u,%u,%u,%u", &wx, &wy, &tm, &tn, &dc);
    if (got < 4 || !wx || !wy || (wx & (wx - 1)) || (wy & (wy - 1)) || wx * wy > 256 || tm < 1 || tm > 8 || tn < 1 ||
        tn > 8)
        return -1;
    *t = (sdpa_tile){wx, wy, tm, tn, 0};
    if (got < 5) dc = tile_chunk(t, D, limit);
    else if (!(dc == D || (dc >= 16 && dc < D && D % dc == 0 && dc % 4 == 0))) return -1;
    t->dc = dc;
    return dc && tile_bytes(t, D, dc) <= limit ? 1 : -1;
}

#define PICK(a) (list = (a), n = sizeof(a) / sizeof *(a))
static bool choose_tile(int64_t rows, int64_t D, uint64_t limit, bool cpu, sdpa_tile *out) {
    const sdpa_tile *list;
    size_t n;
    if (rows <= 4 && cpu) PICK(TILES_FEW_CPU);
    else if (rows <= 4) PICK(TILES_FEW);
    else if (rows <= 16) PICK(TILES_MID);
    else if (D > 64) PICK(TILES_WIDE);
    else PICK(TILES_MANY);
    for (size_t i = 0; i < n; i++) {
        uint32_t dc = tile_chunk(&list[i], D, limit);
        if (dc) {
            *out = list[i];
            out->dc = dc;
            return true;
        }
    }
    return false;
}

/* The tile for rows query rows per kv head at head dimension D into *tile: $WGML_SDPA_TILE when
 * set, otherwise the first candidate that fits the device's workgroup memory. False with the
 * error set when neither gives one. */
static bool sdpa_pick_tile(wgml_ctx *ctx, const char *op, int64_t rows, int64_t D, sdpa_tile *tile) {
    wgml_device_info info;
    wgml_device_get_info(ctx, &info);
    uint64_t limit = info.max_workgroup_storage ? info.max_workgroup_storage : 16384;
    int env = env_tile(D, limit, tile);
    if (env < 0) {
        wgml_set_error(ctx, WGML_ERR_ARG,
                       "%s: $WGML_SDPA_TILE=%s is not WX,WY,TM,TN[,DC] (WX, WY powers of two, WX*WY <= 256, TM, TN "
                       "1..8, DC = D or 16..64 dividing D) fitting %llu bytes of workgroup memory at D = %lld",
                       op, getenv("WGML_SDPA_TILE"), (unsigned long long)limit, (long long)D);
        return false;
    }
    if (env > 0 || choose_tile(rows, D, limit, gpu_get_caps(ctx)->is_cpu, tile)) return true;
    wgml_set_error(ctx, WGML_ERR_UNSUPPORTED, "%s: head dimension %lld is too large for %llu bytes of workgroup memory",
                   op, (long long)D, (unsigned long long)limit);
    return false;
}

/* Few row blocks: split the Skv keys into n_split chunks; attn_combine merges them. Decode-sized
 * blocks (rows <= 16 a kv head) aim at about SDPA_SPLIT_TARGET workgroups; larger ones (one
 * sequence's prefill) at SDPA_SPLIT_TARGET_ROWS, at most SDPA_SPLIT_MAX_ROWS chunks (H200 sweep at
 * 512-token prefills: SmolLM2's 72 row blocks of 64, 0.087 ms unsplit, 0.056 in 2-8 chunks;
 * Gemma 3's 64 blocks of 32 at D 256, 0.195 unsplit, 0.091 in 4, 0.085 in 8; a training batch's
 * 576 blocks stay whole). The chunk is a multiple of the key block bk, or 0 when the length comes
 * from a buffer (dynamic): the kernel then cuts the filled keys evenly, so a cache longer than
 * its contents splits the keys there are. $WGML_SDPA_SPLIT=N forces N chunks (benchmark sweeps;
 * 1: none). One chunk of all Skv keys otherwise. */
static void sdpa_key_split(uint64_t groups, int64_t rows, int64_t Skv, uint32_t bk, bool dynamic, int64_t *n_split,
                           int64_t *chunk) {
    const char *e = getenv("WGML_SDPA_SPLIT");
    long forced = e && *e ? strtol(e, NULL, 10) : 0;
    int64_t most = (Skv + bk - 1) / bk;
    int64_t target = rows <= 16 ? SDPA_SPLIT_TARGET : SDPA_SPLIT_TARGET_ROWS;
    *n_split = 1;
    *chunk = Skv;
    if (forced >= 1) *n_split = forced < most ? forced : most;
    else if ((int64_t)groups < target / 2 && Skv > bk) {
        int64_t want = (target + (int64_t)groups - 1) / (int64_t)groups;
        if (rows > 16 && want > SDPA_SPLIT_MAX_ROWS) want = SDPA_SPLIT_MAX_ROWS;
        *n_split = want < most ? want : most;
    }
    if (*n_split < 2) {
        *n_split = 1;
        return;
    }
    if (dynamic) {
        *chunk = 0;
        return;
    }
    *chunk = ((Skv + *n_split - 1) / *n_split + bk - 1) / bk * bk;
    *n_split = (Skv + *chunk - 1) / *chunk;
}

/* The attn_sdpa prelude: the tile's constants, q's read width (vec4 when D allows) and k and v's
 * bindings in their form (kv_cache.h; plain k and v are the f32 form), read in the same width. */
static bool sdpa_prelude(char *prelude, size_t size, const sdpa_tile *tile, int64_t D, bool f16) {
    uint32_t td = (uint32_t)((D + tile->wx - 1) / tile->wx);
    int n = snprintf(prelude, size,
                     "const WX: u32 = %uu; const WY: u32 = %uu; const TM: u32 = %uu; const TN: u32 = %uu;\n"
                     "const D: u32 = %lldu; const DC: u32 = %uu; const TD: u32 = %uu;\n%s",
                     tile->wx, tile->wy, tile->tm, tile->tn, (long long)D, tile->dc, td,
                     D % 4 == 0 ? "const KW: u32 = 4u; alias VT = vec4<f32>; fn vt_at(x: VT, c: u32) -> f32 { return x[c]; }\n"
                                : "const KW: u32 = 1u; alias VT = f32; fn vt_at(x: VT, c: u32) -> f32 { return x; }\n");
    n = n < 0 || (size_t)n >= size ? -1 : kv_cache_wgsl(prelude, size, n, "k", f16, false, D % 4 == 0 ? 4 : 1);
    return n >= 0 && kv_cache_wgsl(prelude, size, n, "v", f16, false, D % 4 == 0 ? 4 : 1) >= 0;
}

/* Records the attention kernel; len may be NULL (all Skv keys). window > 0 (causal only): a
 * query sees only the last `window` keys up to its own position. row_layout: the output as [B,
 * Sq, Hq, D] (written so by the kernel or by the merge of split keys), else as q. */
static wgml_tensor *sdpa_record(wgml_graph *g, const char *op, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v,
                                wgml_tensor *len, int causal, float scale, int64_t window, bool row_layout) {
    wgml_ctx *ctx = graph_ctx(g);
    int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2], D = q->shape[3];
    int64_t Hkv = k->shape[1], Skv = k->shape[2], G = Hq / Hkv;
    if (!isfinite(scale)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: scale must be finite, got %g", op, (double)scale);
        return NULL;
    }
    double sc = scale > 0 ? (double)scale : 1.0 / sqrt((double)D);
    int64_t rows = G * Sq;
    sdpa_tile tile;
    if (!sdpa_pick_tile(ctx, op, rows, D, &tile)) return NULL;
    uint32_t bq = tile.wy * tile.tm;
    int64_t n_blocks = (rows + bq - 1) / bq;
    uint64_t groups = (uint64_t)(B * Hkv * n_blocks);
    /* the kernel indexes k and v by element (two a word in the f16 form) */
    if (rows > 0xFFFFFFFFll || (uint64_t)q->numel > 0xFFFFFFFFull ||
        (uint64_t)k->numel * (kv_cache_f16(k) ? 2 : 1) > 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: q %s or k %s is too large", op, tshape(q), tshape(k));
        return NULL;
    }
    int64_t n_split, chunk;
    sdpa_key_split(groups, rows, Skv, tile.wx * tile.tn, len != NULL, &n_split, &chunk);
    bool split = n_split > 1;
    char prelude[2048];
    if (!sdpa_prelude(prelude, sizeof prelude, &tile, D, kv_cache_f16(k))) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: the kernel's prelude does not fit", op);
        return NULL;
    }
    struct {
        uint32_t B, Hkv, G, Sq, Skv, n_blocks;
        float scale_log2;
        uint32_t n_split, chunk, causal, window, rows_out, has_len, pad[3];
    } params = {(uint32_t)B, (uint32_t)Hkv, (uint32_t)G, (uint32_t)Sq, (uint32_t)Skv, (uint32_t)n_blocks,
                (float)(sc * 1.4426950408889634074), (uint32_t)n_split, (uint32_t)chunk, causal ? 1u : 0u,
                (uint32_t)(window < Skv ? window : 0), row_layout ? 1u : 0u, len ? 1u : 0u, {0}};
    int64_t rows_shape[4] = {B, Sq, Hq, D};
    wgml_tensor *out = graph_output(g, op, WGML_F32, 4, row_layout ? rows_shape : q->shape);
    if (!out) return NULL;
    wgml_tensor *part = NULL;
    if (split) {
        int64_t pn = q->numel / D * n_split * (D + 2);
        if (pn > 0xFFFFFFFFll || !(part = graph_output(g, op, WGML_F32, 1, &pn))) {
            if (pn > 0xFFFFFFFFll) wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: q %s is too large", op, tshape(q));
            wgml_tensor_free(out);
            return NULL;
        }
    }
    wgml_tensor *ro[4] = {q, len ? len : GRAPH_UNUSED, k, v}; /* the kernel's order, then the prelude's */
    wgml_status s = graph_dispatch(g, op, "attn_sdpa", prelude, ro, 4, split ? &part : &out, 1, &params,
                                   sizeof params, groups * (uint64_t)n_split);
    if (!s && split) {
        s = attn_combine(g, op, part, out, q->numel, D, n_split, row_layout, Hkv, G, Sq);
    }
    wgml_tensor_free(part); /* eager: the recorded dispatches hold its range; built graph: no-op */
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

/* The window argument of the windowed forms: at least 1 and within 32 bits. */
static wgml_status check_window(wgml_ctx *ctx, const char *op, int64_t window) {
    if (window < 1 || window > 0x7FFFFFFF)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: window %lld must be in 1..2^31-1", op, (long long)window);
    return WGML_OK;
}

/* wgml_sdpa and wgml_sdpa_window: window 0 means none. */
static wgml_tensor *sdpa_impl(wgml_graph *g, const char *op, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v,
                              int causal, float scale, int64_t window) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_qkv(ctx, g, op, q, "k", k, "v", v, false)) return NULL;
    if (causal && q->shape[2] > k->shape[2]) {
        wgml_set_error(ctx, WGML_ERR_SHAPE,
                       "%s: causal attention needs Sq <= Skv (the mask is aligned to the end): q %s, k %s", op,
                       tshape(q), tshape(k));
        return NULL;
    }
    return sdpa_grad_record(g, sdpa_record(g, op, q, k, v, NULL, causal, scale, window, false), q, k, v, causal,
                            scale, window);
}

wgml_tensor *wgml_sdpa(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, int causal, float scale) {
    return g ? sdpa_impl(g, "sdpa", q, k, v, causal, scale, 0) : NULL;
}

wgml_tensor *wgml_sdpa_window(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, int64_t window,
                              float scale) {
    if (!g || check_window(graph_ctx(g), "sdpa_window", window)) return NULL;
    return sdpa_impl(g, "sdpa_window", q, k, v, 1, scale, window);
}

static wgml_tensor *sdpa_cached_impl(wgml_graph *g, const char *op, wgml_tensor *q, wgml_tensor *k_cache,
                                     wgml_tensor *v_cache, wgml_tensor *len, int causal, float scale, int64_t window,
                                     bool rows) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_qkv(ctx, g, op, q, "k_cache", k_cache, "v_cache", v_cache, true) || check_scalar_i32(ctx, g, op, "len", len))
        return NULL;
    return sdpa_record(g, op, q, k_cache, v_cache, len, causal, scale, window, rows);
}

wgml_tensor *wgml_sdpa_cached(wgml_graph *g, wgml_tensor *q, wgml_tensor *k_cache, wgml_tensor *v_cache,
                              wgml_tensor *len, int causal, float scale) {
    return g ? sdpa_cached_impl(g, "sdpa_cached", q, k_cache, v_cache, len, causal, scale, 0, false) : NULL;
}

wgml_tensor *wgml_sdpa_cached_window(wgml_graph *g, wgml_tensor *q, wgml_tensor *k_cache, wgml_tensor *v_cache,
                                     wgml_tensor *len, int64_t window, float scale) {
    if (!g || check_window(graph_ctx(g), "sdpa_cached_window", window)) return NULL;
    return sdpa_cached_impl(g, "sdpa_cached_window", q, k_cache, v_cache, len, 1, scale, window, false);
}

wgml_tensor *sdpa_cached_rows(wgml_graph *g, wgml_tensor *q, wgml_tensor *k_cache, wgml_tensor *v_cache,
                              wgml_tensor *len, int64_t window, float scale) {
    if (!g) return NULL;
    if (window) {
        if (check_window(graph_ctx(g), "sdpa_cached_window", window)) return NULL;
        return sdpa_cached_impl(g, "sdpa_cached_window", q, k_cache, v_cache, len, 1, scale, window, true);
    }
    return sdpa_cached_impl(g, "sdpa_cached", q, k_cache, v_cache, len, 1, scale, 0, true);
}

wgml_status wgml_kv_append(wgml_graph *g, wgml_tensor *cache, wgml_tensor *new_rows, wgml_tensor *pos) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "kv_append: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "kv_append";
    wgml_status s;
    if ((s = check_kv_cache(ctx, g, op, "cache", cache)) ||
        (s = check_operand(ctx, g, op, "new_rows", new_rows, WGML_F32, 4, 4)) ||
        (s = check_scalar_i32(ctx, g, op, "pos", pos)))
        return s;
    if (cache == new_rows)
        return wgml_set_error(ctx, WGML_ERR_ARG, "kv_append: cache and new_rows are the same tensor");
    int64_t D = kv_cache_dim(cache);
    if (cache->shape[0] != new_rows->shape[0] || cache->shape[1] != new_rows->shape[1] || D != new_rows->shape[3])
        return wgml_set_error(ctx, WGML_ERR_SHAPE,
                              "kv_append: new_rows %s must be [%lld, %lld, Snew, %lld] for cache %s ([B, Hkv, Smax, D]%s)",
                              tshape(new_rows), (long long)cache->shape[0], (long long)cache->shape[1], (long long)D,
                              tshape(cache), kv_cache_f16(cache) ? "; f16 form: D / 2 words a row" : "");
    if ((uint64_t)cache->numel > 0xFFFFFFFFull || (uint64_t)new_rows->numel > 0xFFFFFFFFull)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "kv_append: cache %s or new_rows %s is too large", tshape(cache),
                              tshape(new_rows));
    /* one thread a unit: an element, or a word of two in the f16 form */
    int w = kv_cache_f16(cache) ? 2 : 1;
    char prelude[512];
    int n = snprintf(prelude, sizeof prelude, "const W: u32 = %du;\n", w);
    if (kv_cache_wgsl(prelude, sizeof prelude, n, "cache", w == 2, true, w) < 0)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "kv_append: the kernel's prelude does not fit");
    uint64_t units = (uint64_t)new_rows->numel / (uint64_t)w;
    struct {
        uint32_t n, D, Snew, Smax;
    } params = {(uint32_t)units, (uint32_t)(D / w), (uint32_t)new_rows->shape[2], (uint32_t)cache->shape[2]};
    wgml_tensor *ro[2] = {new_rows, pos};
    return graph_dispatch(g, op, "attn_kv_append", prelude, ro, 2, &cache, 1, &params, sizeof params, (units + 255) / 256);
}

wgml_status attn_combine(wgml_graph *g, const char *op, wgml_tensor *part, wgml_tensor *out, int64_t n, int64_t D,
                         int64_t n_split, bool row_layout, int64_t Hkv, int64_t G, int64_t Sq) {
    uint32_t cp[8] = {(uint32_t)n,   (uint32_t)D, (uint32_t)n_split, row_layout ? 1u : 0u,
                      (uint32_t)Hkv, (uint32_t)G, (uint32_t)Sq,      0};
    /* 32 output elements a workgroup (attn_combine.wgsl's EW) */
    return graph_dispatch(g, op, "attn_combine", NULL, &part, 1, &out, 1, cp, sizeof cp, ((uint64_t)n + 31) / 32);
}
