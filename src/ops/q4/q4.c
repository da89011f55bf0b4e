/* Frozen 4-bit / 8-bit weights on the GPU: upload, forward (GEMV and tiled GEMM), input
 * gradient, straight-through requant and the quantised embedding lookup.
 *
 * GPU layout (one for every 4-bit operator; requant writes exactly what the forward reads):
 *   Kp = K rounded up to the group size G (a multiple of 32), G a positive multiple of 32, or
 *   16 for the 8-bit kinds (GGUF Q6_K), so a block of 32 consecutive codes lies in one vec4<u32>
 *   (4 bits) or two (8 bits) and in one group (G >= 32) or two halves of one vec4 each (G = 16).
 *   codes  u32 [N, Kp/8]  4-bit: word j of row n holds k = 8j+i in bits 4i..4i+3; padding
 *                         codes (k >= K) are 8 (symmetric) or 0 (with minimum).
 *          u32 [N, Kp/4]  8-bit: word j holds k = 4j+i in bits 8i..8i+7 (Q8: an int8, Q8_MIN:
 *                         unsigned); the 5- and 6-bit GGUF codes are held widened.
 *   ab     f32 [N, Kp/G]     symmetric q4 (scale) and Q8 (a): one f32 per (row, group);
 *          f32 [N, Kp/G, 2]  with minimum (MIN, Q8_MIN): the (a, b) pair.
 *   The kernels see every kind as w = c·a + b per group: (a, b) = (s, -8s), (a, b) or (a, 0);
 *   dequantisation of single elements uses the exact forms (c-8)·s, c·a + b and c·a, the
 *   host's (q4_format.c), so the GPU's dequantisation equals the host's bit for bit.
 *   Rows are contiguous in K so that the GEMV reads each row as a stream of vec4<u32>
 *   (32 codes = 16 bytes per load) plus one scale per group.
 */
#include "ops/q4/q4_internal.h"
#include "ops/q4/q4_grad.h"
#include "ops/q4/q4_concat.h"
#include "ops/q4/q4_gemv_fused.h"
#include "ops/q4/q4_parts.h"
#include "ops/matmul/matmul_into.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ upload */

/* Codes per u32 word: 8 (4-bit kinds), 4 (8-bit kinds) or 1 (QF32: the word is the value). */
static int kind_cpw(wgml_qkind kind) {
    return kind == WGML_QF32 ? 1 : kind == WGML_Q8 || kind == WGML_Q8_MIN ? 4 : 8;
}
static bool kind_has_min(wgml_qkind kind) { return kind == WGML_Q4_MIN || kind == WGML_Q8_MIN; }

static wgml_q4_weight *weight_new(wgml_graph *g, const char *op, wgml_qkind kind, int bits, int64_t n, int64_t k,
                                  int group, const uint32_t *words, const float *ab, const float *bias) {
    wgml_ctx *ctx = graph_ctx(g);
    wgml_q4_weight *w = calloc(1, sizeof *w);
    if (!w) {
        wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    w->n = n;
    w->k = k;
    w->group = group;
    w->kp = (k + group - 1) / group * group;
    w->kind = kind;
    w->bits = bits;
    w->has_min = kind_has_min(kind);
    int64_t cs[2] = {n, w->kp / kind_cpw(kind)};
    int64_t as[3] = {n, w->kp / group, 2};
    w->codes = wgml_tensor_new(g, WGML_U32, 2, cs);
    w->ab = wgml_tensor_new(g, WGML_F32, w->has_min ? 3 : 2, as);
    if (bias) w->bias = wgml_tensor_new(g, WGML_F32, 1, &n);
    if (!w->codes || !w->ab || (bias && !w->bias) || wgml_tensor_write(w->codes, words, wgml_tensor_nbytes(w->codes)) ||
        wgml_tensor_write(w->ab, ab, wgml_tensor_nbytes(w->ab)) ||
        (bias && wgml_tensor_write(w->bias, bias, wgml_tensor_nbytes(w->bias)))) {
        wgml_q4_free(w);
        return NULL;
    }
    return w;
}

void wgml_q4_free(wgml_q4_weight *w) {
    if (!w) return;
    wgml_tensor_free(w->codes);
    wgml_tensor_free(w->ab);
    wgml_tensor_free(w->bias);
    free(w);
}

wgml_q4_weight *wgml_q4_upload_q4gsw(wgml_graph *g, const uint8_t *codes, const float *scales, const float *bias,
                                     int64_t n, int64_t k, int group) {
    if (!g) return NULL;
    const char *op = "q4_upload_q4gsw";
    if (q4_check_q4gsw(graph_ctx(g), op, codes, scales, n, k, group)) return NULL;
    int64_t kp = (k + group - 1) / group * group;
    uint32_t *words = malloc(sizeof(uint32_t) * (size_t)(n * kp / 8));
    float *ab = malloc(sizeof(float) * (size_t)(n * kp / group));
    wgml_q4_weight *w = NULL;
    if (!words || !ab) wgml_set_error(graph_ctx(g), WGML_ERR_OOM, "%s: out of host memory", op);
    else {
        q4_pack_q4gsw(codes, scales, n, k, group, words, ab);
        w = weight_new(g, op, WGML_Q4_SYM, 4, n, k, group, words, ab, bias);
    }
    free(words);
    free(ab);
    return w;
}

wgml_q4_weight *wgml_q4_upload_gguf(wgml_graph *g, int type, const void *data, size_t bytes, int64_t n, int64_t k) {
    if (!g) return NULL;
    const char *op = "q4_upload_gguf";
    if (q4_check_gguf(graph_ctx(g), op, type, data, bytes, n, k, true)) return NULL;
    if (n > (1 << 24) || k > (1 << 26)) {
        wgml_set_error(graph_ctx(g), WGML_ERR_LIMIT, "%s: shape [%lld, %lld] is too large", op, (long long)n,
                       (long long)k);
        return NULL;
    }
    wgml_qkind kind;
    int group, bits;
    q4_gguf_gpu(type, &kind, &group, &bits);
    int64_t kp = (k + group - 1) / group * group; /* = k but for the plain types (QF32) */
    uint32_t *words = malloc(sizeof(uint32_t) * (size_t)(n * kp / kind_cpw(kind)));
    float *ab = malloc(sizeof(float) * (size_t)(n * kp / group * (kind_has_min(kind) ? 2 : 1)));
    wgml_q4_weight *w = NULL;
    if (!words || !ab) wgml_set_error(graph_ctx(g), WGML_ERR_OOM, "%s: out of host memory", op);
    else {
        q4_pack_gguf(type, data, n, k, words, ab);
        w = weight_new(g, op, kind, bits, n, k, group, words, ab, NULL);
    }
    free(words);
    free(ab);
    return w;
}

wgml_q4_weight *wgml_q4_quantize(wgml_graph *g, const float *wf, int64_t n, int64_t k, int group) {
    if (!g) return NULL;
    const char *op = "q4_quantize";
    wgml_ctx *ctx = graph_ctx(g);
    if (!wf) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: w is NULL", op);
        return NULL;
    }
    if (q4_check_q4gsw(ctx, op, wf, wf, n, k, group)) return NULL;
    int64_t kb = (k + 1) / 2, pn = (n + 3) / 4 * 4, ng = (k + group - 1) / group;
    uint8_t *codes = malloc((size_t)(n * kb));
    float *scales = malloc(sizeof(float) * (size_t)(ng * pn));
    wgml_q4_weight *w = NULL;
    if (!codes || !scales) wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    else if (wgml_q4gsw_quantize(wf, n, k, group, codes, scales))
        wgml_set_error(ctx, wgml_last_status(NULL), "%s", wgml_last_error(NULL));
    else
        w = wgml_q4_upload_q4gsw(g, codes, scales, NULL, n, k, group);
    free(codes);
    free(scales);
    return w;
}

/* ------------------------------------------------------------------ kernels */

/* WGSL lines shared by every q4 kernel: the kind, codes per u32 word (CPW) and field width
 * (FW), the group size G, 32-code blocks per group (BPG, 1 when G = 16) and groups per block
 * (GPB: 2 when G = 16, else 1), the (a, b) type and readers: ab_of(v) gives (a, b) of
 * w = c·a + b from a stored ABT value, group_ab(i) (with ab_reader) the pair at index
 * i = n·(Kp/G) + group of the binding AB; code_f(word, i) the i-th code of a word; deq(c, ab)
 * the exact value; quant(l, ab) the stored field of the code requant gives latent l (the
 * code range from the weight's bits) and PADC the field of a padding code. */
static void kind_prelude_ex(char *buf, size_t cap, const wgml_q4_weight *w, bool ab_reader) {
    bool f32 = w->kind == WGML_QF32;
    int hi = f32 ? 0 : w->kind == WGML_Q4_SYM ? 7 : w->kind == WGML_Q8 ? (1 << (w->bits - 1)) - 1 : (1 << w->bits) - 1;
    int lo = f32 ? 0 : w->kind == WGML_Q4_SYM ? -8 : w->kind == WGML_Q8 ? -(1 << (w->bits - 1)) : 0;
    const char *ab_t = w->has_min ? "vec2<f32>" : "f32";
    const char *gab = w->kind == WGML_Q4_SYM ? "return vec2<f32>(v, -8.0 * v);"
                      : w->has_min           ? "return v;"
                                             : "return vec2<f32>(v, 0.0);";
    const char *code = f32                      ? "return bitcast<f32>(word);"
                       : w->kind == WGML_Q8     ? "return f32(bitcast<i32>(word << (24u - 8u * i)) >> 24u);"
                       : w->kind == WGML_Q8_MIN ? "return f32((word >> (8u * i)) & 255u);"
                                                : "return f32((word >> (4u * i)) & 15u);";
    const char *deq = f32                    ? "return c;"
                      : w->kind == WGML_Q4_SYM ? "return (c - 8.0) * ab.x;"
                      : w->has_min           ? "return c * ab.x + ab.y;"
                                             : "return c * ab.x;";
    /* requant (q4.md): round half to even (WGSL round), clamp to the code range; a zero a gives
     * the code of zero weight (SYM: 8; with a minimum: 0, every code is then the weight b) */
    const char *quant = f32 ? "return 0u; /* no requant (q4_requant refuses) */"
                        : w->kind == WGML_Q4_SYM ? "if (ab.x == 0.0) { return 8u; }\n"
                                                 "  return u32(i32(clamp(round(l / ab.x), QLO, QHI)) + 8);"
                        : w->has_min ? "if (ab.x == 0.0) { return 0u; }\n"
                                       "  return u32(clamp(round((l - ab.y) / ab.x), QLO, QHI));"
                                     : "if (ab.x == 0.0) { return 0u; }\n"
                                       "  return bitcast<u32>(i32(clamp(round(l / ab.x), QLO, QHI))) & 255u;";
    snprintf(buf, cap,
             "const KIND: u32 = %du; const CPW: u32 = %du; const FW: u32 = %du; const G: u32 = %du;\n"
             "const BPG: u32 = %du; const GPB: u32 = %du; const QLO: f32 = %d.0; const QHI: f32 = %d.0;\n"
             "const PADC: u32 = %du;\n"
             "alias ABT = %s;\n"
             "fn ab_of(v: ABT) -> vec2<f32> { %s }\n"
             "%s"
             "fn code_f(word: u32, i: u32) -> f32 { %s }\n"
             "fn deq(c: f32, ab: vec2<f32>) -> f32 { %s }\n"
             "fn quant(l: f32, ab: vec2<f32>) -> u32 {\n  %s\n}\n",
             (int)w->kind, kind_cpw(w->kind), 32 / kind_cpw(w->kind), w->group, w->group >= 32 ? w->group / 32 : 1,
             w->group >= 32 ? 1 : 32 / w->group, lo, hi, w->kind == WGML_Q4_SYM ? 8 : 0, ab_t, gab,
             ab_reader ? "fn group_ab(i: u32) -> vec2<f32> { return ab_of(AB[i]); }\n" : "", code, deq, quant);
}

static void kind_prelude(char *buf, size_t cap, const wgml_q4_weight *w) { kind_prelude_ex(buf, cap, w, true); }

/* kind_prelude at buf; returns its length. */
static int kind_prelude_len(char *buf, size_t cap, const wgml_q4_weight *w) {
    kind_prelude(buf, cap, w);
    return (int)strlen(buf);
}

static int64_t words_per_row(const wgml_q4_weight *w) { return w->kp / kind_cpw(w->kind); }

bool q4_weight_valid(wgml_ctx *ctx, const char *op, const char *arg, const wgml_q4_weight *w) {
    if (!w) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s is NULL", op, arg);
        return false;
    }
    if (check_tensor(ctx, op, arg, w->codes) || check_tensor(ctx, op, arg, w->ab)) return false;
    bool eight = kind_cpw(w->kind) == 4;
    bool kind_ok = w->kind >= WGML_Q4_SYM && w->kind <= WGML_QF32 && w->has_min == kind_has_min(w->kind) &&
                   (w->kind == WGML_QF32 ? w->bits == 32 : eight ? w->bits >= 2 && w->bits <= 8 : w->bits == 4);
    if (!kind_ok || w->group <= 0 || (w->group % 32 && !(eight && w->group == 16)) || w->n <= 0 || w->k <= 0 ||
        w->kp % w->group || w->kp % 32 || w->kp < w->k || wgml_tensor_numel(w->codes) != w->n * words_per_row(w) ||
        wgml_tensor_numel(w->ab) != w->n * (w->kp / w->group) * (w->has_min ? 2 : 1)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s is not a valid 4-bit/8-bit weight", op, arg);
        return false;
    }
    return true;
}

/* The activations and the weight must be on one graph. */
static bool same_graph(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t, const wgml_q4_weight *w) {
    if (t->graph != w->codes->graph) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s %s and the weight belong to different graphs", op, arg, tshape(t));
        return false;
    }
    return true;
}

/* Tile variants of the q4 GEMM: q4_mm (single-buffered: one step of A and dequantised W in
 * workgroup memory) and q4_mm_db (double-buffered; the next step's A and code words held in
 * registers during the FMAs). TM and TC are multiples of 4; BR divides 32 (a step stays in one
 * group). Names follow the matmul family's. */
typedef struct q4_variant {
    const char *name;
    const char *shader;
    uint32_t bm, bc, br, tm, tc;
} q4_variant;

/* Variant indices: the order is public ($WGML_Q4_MM_VARIANT by index, the benches), so new
 * variants go at the end. */
typedef enum q4_variant_id {
    Q4V_TILE64,
    Q4V_TILE128X64,
    Q4V_TILE128,
    Q4V_DB128_K8,
    Q4V_DB128_K16,
    Q4V_DB128X64,
    Q4V_DB128X64_K8,
    Q4V_DB64,
    Q4V_CPU,
    Q4_N_VARIANTS
} q4_variant_id;

static const q4_variant Q4_VARIANTS[Q4_N_VARIANTS] = {
    [Q4V_TILE64] = {.name = "tile64x64_k32_r4x4", .shader = "q4_mm", .bm = 64, .bc = 64, .br = 32, .tm = 4, .tc = 4},
    [Q4V_TILE128X64] = {.name = "tile128x64_k16_r8x4", .shader = "q4_mm", .bm = 128, .bc = 64, .br = 16, .tm = 8,
                        .tc = 4},
    [Q4V_TILE128] = {.name = "tile128x128_k16_r8x8", .shader = "q4_mm", .bm = 128, .bc = 128, .br = 16, .tm = 8,
                     .tc = 8},
    [Q4V_DB128_K8] = {.name = "db128x128_k8_r8x8", .shader = "q4_mm_db", .bm = 128, .bc = 128, .br = 8, .tm = 8,
                      .tc = 8},
    [Q4V_DB128_K16] = {.name = "db128x128_k16_r8x8", .shader = "q4_mm_db", .bm = 128, .bc = 128, .br = 16, .tm = 8,
                   .tc = 8},
    [Q4V_DB128X64] = {.name = "db128x64_k16_r8x4", .shader = "q4_mm_db", .bm = 128, .bc = 64, .br = 16, .tm = 8,
                      .tc = 4},
    [Q4V_DB128X64_K8] = {.name = "db128x64_k8_r8x4", .shader = "q4_mm_db", .bm = 128, .bc = 64, .br = 8, .tm = 8,
                         .tc = 4},
    [Q4V_DB64] = {.name = "db64x64_k16_r4x4", .shader = "q4_mm_db", .bm = 64, .bc = 64, .br = 16, .tm = 4, .tc = 4},
    /* CPU adapters (q4_mm_cpu.wgsl): 64 threads, no workgroup memory; forward 4 rows x 8 columns
     * per thread (a 4 x 512 tile), input gradient 8 rows x one code word's columns (variant_tile) */
    [Q4V_CPU] = {.name = "cpu_k32_r4x8", .shader = "q4_mm_cpu", .bm = 4, .bc = 512, .br = 32, .tm = 4, .tc = 4},
};
#define Q4_MAX_SPLITS 64
#define Q4_SPLIT_TARGET_WGS 1056

int q4_mm_variant_count(void) { return Q4_N_VARIANTS; }
const char *q4_mm_variant_name(int v) { return v >= 0 && v < Q4_N_VARIANTS ? Q4_VARIANTS[v].name : "auto"; }

static int q4_variant_by_name(const char *e) {
    for (int v = 0; v < Q4_N_VARIANTS; v++)
        if (!strcmp(e, Q4_VARIANTS[v].name)) return v;
    return -1;
}

/* The tile of variant x in orientation trans with cpw codes per word: (BM, BC) of O and (TM, TC)
 * for the prelude. The CPU kernel's thread owns 4 rows and Q4_CPU_RN columns forward, and 8
 * rows and one code word's columns (cpw) of the input gradient. On lavapipe the storage loads
 * per FMA and the registers (spills) set its speed; SmolLM2's 32-token training step, forward /
 * input-gradient GEMMs: 16 x 8 and 8 x cpw 1.41 / 0.46 s, 8 x 8 1.06 / 0.44, 4 x 8 0.44 / 0.34,
 * 4 x 4 and 4 x cpw 0.64 / 0.58 (bench/NOTES.md, 2026-12-03). */
#define Q4_CPU_RN 8u
static void variant_tile(const q4_variant *x, int trans, int cpw, uint32_t t[4]) {
    bool cpu = !strcmp(x->shader, "q4_mm_cpu");
    t[0] = cpu && trans ? 8u : x->bm;
    t[1] = cpu ? 64u * (trans ? (uint32_t)cpw : Q4_CPU_RN) : x->bc;
    t[2] = cpu ? t[0] : x->tm;
    t[3] = x->tc;
}

static bool q4_variant_fits(wgml_ctx *ctx, int v) {
    const q4_variant *x = &Q4_VARIANTS[v];
    if (!strcmp(x->shader, "q4_mm_cpu")) return true; /* 64 threads, no workgroup memory */
    const gpu_caps *caps = gpu_get_caps(ctx);
    uint32_t bytes = x->br * (x->bm + x->bc) * 4u * (strcmp(x->shader, "q4_mm_db") ? 1u : 2u);
    uint32_t threads = (x->bm / x->tm) * (x->bc / x->tc);
    return !caps || (bytes <= caps->max_workgroup_storage && threads <= caps->max_invocations);
}

/* The variant: $WGML_Q4_MM_VARIANT (a name or index) first; else a matmul variant forced on
 * the context (wgml_matmul_force_variant): the q4 variant of the same name, else the 128 x 128
 * tile for matmul's tile128x128_k8_r8x8 (which has no q4 form) and 64 x 64 for the others;
 * else automatic (below). A forced variant that does not fit the device falls back to the
 * automatic choice. */
static int q4_choose_variant(wgml_ctx *ctx, bool cpu, int64_t m, int64_t c, bool segmented) {
    int forced = -1;
    const char *e = getenv("WGML_Q4_MM_VARIANT");
    if (e && *e && strcmp(e, "auto")) {
        forced = q4_variant_by_name(e);
        char *end;
        long v = strtol(e, &end, 10);
        if (forced < 0 && *end == 0 && v >= 0 && v < Q4_N_VARIANTS) forced = (int)v;
    }
    int mv = graph_ctx_matmul_variant(ctx);
    if (forced < 0 && mv >= 0 && mv < wgml_matmul_variant_count()) {
        forced = q4_variant_by_name(wgml_matmul_variant_name(mv));
        if (forced < 0) forced = strcmp(wgml_matmul_variant_name(mv), "tile128x128_k8_r8x8") ? Q4V_TILE64 : Q4V_TILE128;
    }
    if (forced >= 0 && q4_variant_fits(ctx, forced)) return forced;
    /* automatic: on a CPU adapter the CPU kernel (no barriers: 6-15x the tiled kernels' speed on
     * lavapipe, bench/NOTES.md); on a GPU the single-buffered 128 x 64 tile where it gives at least 256 tiles (the best,
     * or within 3% of it, on every training shape measured on an H200, 4-bit and 8-bit codes:
     * bench/NOTES.md), else 64 x 64 (more tiles to fill the GPU; split-K covers long
     * reductions). A segmented output (q4_linear_concat) always 64 x 64: with the segments'
     * index in its store the 128 x 64 tile ran 7-14x slower on the H200. */
    if (cpu) return Q4V_CPU;
    int64_t tiles_128x64 = ((m + 127) / 128) * ((c + 63) / 64);
    return tiles_128x64 >= 256 && !segmented ? Q4V_TILE128X64 : Q4V_TILE64;
}

/* Split-K: $WGML_Q4_MM_SPLITK forces a count (1: never split); else split when the tiles fill
 * fewer than four waves of a 132-SM GPU (< 528) and R >= 1024, or fewer than one (< 132) and
 * R >= 512, into enough slices for about eight waves (1056 workgroups), each slice at least 256
 * deep (128 under R = 1024), at most 16, and only for products of at least 2^24 multiply-adds
 * (H200 sweep: 288 tiles with R = 1536 or 8192 gain 15-35% at S = 4; R = 576 with 288 tiles
 * loses; 96 tiles with R = 576 gain 25%). The partial buffer [S, M, C] stays within 32-bit
 * indexing. */
static int q4_choose_splits(bool cpu, int64_t tiles, int64_t m, int64_t r, int64_t c) {
    int s = 1;
    const char *e = getenv("WGML_Q4_MM_SPLITK");
    long f = e && *e ? strtol(e, NULL, 10) : 0;
    if (f >= 1) s = f > Q4_MAX_SPLITS ? Q4_MAX_SPLITS : (int)f;
    else if (cpu) {
        /* a CPU has a few cores: split only a long reduction over fewer than 32 tiles (the LM
         * head's input gradient: R = the vocabulary, C = the width), into about 32 workgroups
         * of at least 256 steps, at most 16 slices */
        if (tiles < 32 && r >= 1024) {
            int64_t x = (32 + tiles - 1) / tiles;
            if (x > r / 256) x = r / 256;
            s = x > 16 ? 16 : (int)x;
        }
    } else if (m * r * c >= (1ll << 24) && ((tiles < 528 && r >= 1024) || (tiles < 132 && r >= 512))) {
        int64_t x = (Q4_SPLIT_TARGET_WGS + tiles - 1) / tiles, by_depth = r >= 1024 ? r / 256 : r / 128;
        if (x > by_depth) x = by_depth;
        if (x > 16) x = 16;
        s = x < 2 ? 1 : (int)x;
    }
    while (s > 1 && (int64_t)s * m * c > 0x7FFFFFFFll) s /= 2;
    return s;
}

void q4_mm_plan_for(wgml_ctx *ctx, bool cpu, int64_t m, int64_t r, int64_t c, bool segmented, int *variant,
                    int *splits) {
    int vi = q4_choose_variant(ctx, cpu, m, c, segmented);
    const q4_variant *v = &Q4_VARIANTS[vi];
    int64_t tiles = ((m + v->bm - 1) / v->bm) * ((c + v->bc - 1) / v->bc);
    int s = q4_choose_splits(cpu, tiles, m, r, c);
    /* each slice a whole number of BR steps and not empty */
    int64_t steps = (r + v->br - 1) / v->br;
    if (s > steps) s = (int)steps;
    *variant = vi;
    *splits = s < 1 ? 1 : s;
}

void q4_mm_plan(wgml_ctx *ctx, int64_t m, int64_t r, int64_t c, bool segmented, int *variant, int *splits) {
    q4_mm_plan_for(ctx, gpu_get_caps(ctx)->is_cpu, m, r, c, segmented, variant, splits);
}

/* Where record_mm_ex puts the product: a new tensor of the given shape, or into (into += the
 * product with acc); seg (forward only, or NULL): the column boundaries seg[0] <= seg[1] <= C of
 * the output's three segments, each stored whole (q4_mm_head.wgsl's o_index); parts (or NULL):
 * a split product's slices are returned unsummed, as [S, shape...], and *parts = S (1: the
 * product itself, unsplit). */
typedef struct mm_dest {
    wgml_tensor *into;
    bool acc;
    const int64_t *seg;
    int *parts;
} mm_dest;

/* out[M, C] through the tiled kernel: forward (trans = 0: C = N, reduction over K) or input
 * gradient (trans = 1: C = K, reduction over N); split-K into a partial buffer [S, M, C]
 * summed in order by the matmul family's reduction (which adds out with acc; elementwise, so
 * a segmented output is summed alike). */
static wgml_tensor *record_mm_ex(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_q4_weight *w, int trans,
                                 int64_t m, int rank, const int64_t *shape, const mm_dest *d) {
    int64_t r = trans ? w->n : w->k, c = trans ? w->k : w->n;
    bool bias = !trans && w->bias, acc = d && d->acc;
    const int64_t *seg = d ? d->seg : NULL;
    wgml_tensor *into = d ? d->into : NULL;
    int va = r % 4 == 0 ? 4 : 1;
    int vi, splits;
    q4_mm_plan(graph_ctx(g), m, r, c, seg != NULL, &vi, &splits);
    const q4_variant *v = &Q4_VARIANTS[vi];
    uint32_t tile[4]; /* BM BC TM TC */
    variant_tile(v, trans, kind_cpw(w->kind), tile);
    int64_t r_chunk = (r + splits - 1) / splits;
    r_chunk = splits == 1 ? r : (r_chunk + v->br - 1) / v->br * v->br;
    char prelude[2048];
    int len = snprintf(prelude, sizeof prelude,
                       "const TRANS: bool = %s; const VA: u32 = %du; const SEG: bool = %s;\n"
                       "const BM: u32 = %uu; const BC: u32 = %uu; const BR: u32 = %uu; const TM: u32 = %uu; "
                       "const TC: u32 = %uu;\n"
                       "const RN: u32 = %uu;\nalias AV = %s;\nfn a_at(v: AV, c: u32) -> f32 { return %s; }\n",
                       trans ? "true" : "false", va, seg ? "true" : "false", tile[0], tile[1], v->br, tile[2], tile[3], Q4_CPU_RN,
                       va == 4 ? "vec4<f32>" : "f32", va == 4 ? "v[c]" : "v");
    kind_prelude(prelude + len, sizeof prelude - (size_t)len, w);
    int64_t tiles_m = (m + tile[0] - 1) / tile[0], tiles_c = (c + tile[1] - 1) / tile[1];
    struct {
        uint32_t m, r, c, wpr, ng, tiles_c, tiles_m, kp, r_chunk, splits, flags, seg1, seg2, pad[3];
    } params = {.m = (uint32_t)m, .r = (uint32_t)r, .c = (uint32_t)c, .wpr = (uint32_t)words_per_row(w),
                .ng = (uint32_t)(w->kp / w->group), .tiles_c = (uint32_t)tiles_c, .tiles_m = (uint32_t)tiles_m,
                .kp = (uint32_t)w->kp, .r_chunk = (uint32_t)r_chunk, .splits = (uint32_t)splits,
                .flags = (bias ? 1u : 0u) | (acc ? 2u : 0u), .seg1 = (uint32_t)(seg ? seg[0] : c),
                .seg2 = (uint32_t)(seg ? seg[1] : c)};
    bool keep_parts = d && d->parts && splits > 1;
    if (d && d->parts) *d->parts = splits;
    wgml_tensor *out = keep_parts ? NULL : into ? into : graph_output(g, op, WGML_F32, rank, shape);
    if (!out && !keep_parts) return NULL;
    wgml_tensor *part = NULL;
    if (splits > 1) {
        int64_t pn = (int64_t)splits * m * c, ps[WGML_MAX_RANK + 1] = {splits};
        for (int i = 0; i < rank && keep_parts; i++) ps[i + 1] = shape[i];
        if (!(part = keep_parts ? graph_output(g, op, WGML_F32, rank + 1, ps) : graph_output(g, op, WGML_F32, 1, &pn))) {
            if (!into) wgml_tensor_free(out);
            return NULL;
        }
    }
    wgml_tensor *ro[4] = {a, w->codes, w->ab, bias ? w->bias : GRAPH_UNUSED};
    wgml_status s = graph_dispatch(g, op, v->shader, prelude, ro, 4, part ? &part : &out, 1, &params, sizeof params,
                                   (uint64_t)(tiles_m * tiles_c) * (uint64_t)splits);
    if (keep_parts) {
        if (!s) return part;
        wgml_tensor_free(part);
        return NULL;
    }
    /* the bias is in slice 0's partial; the reduction adds out itself with acc */
    if (!s && part) s = matmul_splitk_record(g, op, part, splits, m * c, m * c, c, NULL, 0, 0, 0, 1.0f, 1.0f, acc, out);
    wgml_tensor_free(part); /* eager: the recorded dispatches hold its range; built graph: no-op */
    if (s) {
        if (!into) wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

static wgml_tensor *record_mm(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_q4_weight *w, int trans,
                              int64_t m, int rank, const int64_t *shape) {
    return record_mm_ex(g, op, a, w, trans, m, rank, shape, NULL);
}

wgml_status q4_mm_into(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_q4_weight *w, int trans, int64_t m,
                       wgml_tensor *into, bool accumulate) {
    mm_dest d = {.into = into, .acc = accumulate};
    return record_mm_ex(g, op, a, w, trans, m, into->rank, into->shape, &d) ? WGML_OK : wgml_last_status(graph_ctx(g));
}

/* The most rows of x the GEMV takes (more go to the tiled GEMM): 4 on a GPU; 8 on a CPU adapter,
 * where the GEMM's smallest tile (64 x 64) does 8-13x the useful work at 5-8 rows and pays for
 * every barrier: SmolLM2's 5-token prefill on lavapipe took 2.0 s of GPU time in q4_mm (97%),
 * 0.23 s with the GEMV (bench/NOTES.md, 2026-12-03). */
int q4_gemv_max_m(wgml_ctx *ctx) { return gpu_get_caps(ctx)->is_cpu ? 8 : 4; }

/* The GEMV shape on a GPU. K >= 2048 (64 blocks): 32 threads per row, 8 rows per thread (each x
 * load serves 8 rows) in 64-thread workgroups, the fastest on the large projections; shorter K:
 * 64 threads per row with two blocks in flight, for the small, launch-bound shapes. One block
 * in flight otherwise (more was slower). H200 sweeps in bench/NOTES.md. With few rows (N),
 * fewer rows per thread, until there are at least $WGML_Q4_GEMV_MIN_WG (264: two per SM of a
 * 132-SM GPU) workgroups or one row per thread: Gemma-3-270M's down projection (2048 -> 640)
 * got 40 workgroups at 8 rows per thread. */
static void gemv_shape_gpu(int64_t nblk, int64_t n, int *tpr, int *rpt, int *wg, int *bpi) {
    *wg = 256;
    *bpi = 1;
    if (nblk >= 64) {
        *tpr = 32, *rpt = 8, *wg = 64;
        const char *mw = getenv("WGML_Q4_GEMV_MIN_WG");
        long min_wg = mw && *mw ? strtol(mw, NULL, 10) : 264;
        int64_t rg = *wg / *tpr; /* row groups per workgroup */
        while (*rpt > 1 && (n + rg * *rpt - 1) / (rg * *rpt) < min_wg) *rpt /= 2;
    } else {
        *tpr = 64, *rpt = 1, *bpi = 2;
    }
}

/* GEMV shape: threads per row along K (TPR), rows per thread (RPT, the reuse of each x load),
 * threads per workgroup (WG), blocks per iteration (BPI, loads in flight per thread). A CPU
 * adapter (lavapipe, SwiftShader) runs a workgroup's lanes a few at a time and pays for every
 * barrier, so there: 4 threads per row (within one subgroup: no workgroup memory, no barrier),
 * 4 rows per thread, 64-thread workgroups, at every K; on SmolLM2's projections 3.7-7.6x faster
 * than the GPU shapes on lavapipe and 10-16x on SwiftShader (bench/NOTES.md, 2026-12-03).
 * $WGML_Q4_GEMV="TPR,RPT,WG[,BPI]" overrides it (benchmark sweeps). */
static void gemv_shape(bool cpu, int64_t nblk, int64_t n, int *tpr, int *rpt, int *wg, int *bpi) {
    if (cpu) *tpr = 4, *rpt = 4, *wg = 64, *bpi = 1;
    else gemv_shape_gpu(nblk, n, tpr, rpt, wg, bpi);
    const char *env = getenv("WGML_Q4_GEMV");
    int a, b, c, d = 1;
    int got = env ? sscanf(env, "%d,%d,%d,%d", &a, &b, &c, &d) : 0;
    if (got >= 3 && a >= 1 && a <= 256 && (a & (a - 1)) == 0 && b >= 1 && b <= 16 && c >= a && c <= 256 && c % a == 0 &&
        d >= 1 && d <= 8) {
        *tpr = a;
        *rpt = b;
        *wg = c;
        *bpi = d;
    }
}

/* Whether the GEMV's final reduction uses subgroup operations, and the subgroup size known to
 * hold at least (*known, 0 when unknown). Only with the device's subgroups feature. Automatic:
 * when the device reports a minimum subgroup size >= TPR (then each row's TPR partial sums lie
 * in one subgroup and no workgroup memory is needed). $WGML_Q4_GEMV_SUBGROUP=0 never, =1
 * whenever the feature is there (a subgroup size below TPR then adds one workgroup-memory step),
 * =S (a power of two >= 2) as 1 and takes S as the known minimum size (tests: only correct when
 * the device's subgroups really have at least S lanes). */
static bool gemv_subgroup(wgml_ctx *ctx, int tpr, uint32_t *known) {
    const gpu_caps *c = gpu_get_caps(ctx);
    *known = c->subgroup_min;
    if (!c->subgroups) return false;
    const char *env = getenv("WGML_Q4_GEMV_SUBGROUP");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v <= 0) return false;
        if (v >= 2 && v <= 128 && (v & (v - 1)) == 0) *known = (uint32_t)v;
        return true;
    }
    return *known >= (uint32_t)tpr;
}

/* Bindings of one GEMV dispatch over ws[0..nw): x, codes, ab (and bias) per weight, outputs,
 * and the fusion's norm weight and residual. */
static int gemv_storage_bindings(const wgml_q4_weight *const *ws, int nw, const q4_gemv_fuse *f) {
    int n = 1 + nw;
    for (int i = 0; i < nw; i++) n += ws[i]->bias ? 3 : 2;
    if (f && f->norm_w) n++;
    if (f && f->residual) n++;
    if (f && (f->epi == Q4_EPI_SWIGLU || f->epi == Q4_EPI_GEGLU)) n--; /* one output */
    return n;
}

/* The GEMV's launch shape (gemv_shape) and its final reduction (gemv_subgroup). */
typedef struct gemv_cfg {
    int tpr, rpt, wg, bpi;
    bool sg;           /* subgroup reduction */
    uint32_t sg_known; /* the subgroup size known to hold at least (0: unknown) */
    bool direct;       /* the sums are final in the subgroup: no workgroup memory */
    const q4_gemv_fuse *f; /* the prologue and epilogue (NULL: none) */
} gemv_cfg;

/* Output rows one thread stores: RPT, or RPT / 2 when its accumulators pair gate and up rows. */
static bool fuse_pair(const q4_gemv_fuse *f) { return f && (f->epi == Q4_EPI_SWIGLU || f->epi == Q4_EPI_GEGLU); }
static bool fuse_merge(const q4_gemv_fuse *f) { return f && f->merge_chunks > 0; }
/* x staged in workgroup memory: normed, or merged from attention's chunks */
static bool fuse_stage(const q4_gemv_fuse *f) { return f && (f->norm_w || fuse_merge(f)); }
static int64_t merge_table_len(const q4_gemv_fuse *f) { return fuse_merge(f) ? f->merge_heads * f->merge_chunks : 1; }

/* Bytes of workgroup memory the GEMV kernel declares (red, xsh, nred, mwt). */
static uint64_t gemv_wg_bytes(const gemv_cfg *c, int64_t m, int64_t kp) {
    uint64_t red = c->direct ? 1 : (uint64_t)c->wg * (uint64_t)c->rpt * (uint64_t)m;
    uint64_t xsh = fuse_stage(c->f) ? (uint64_t)m * (uint64_t)(kp / 4) * 4 : 4;
    uint64_t nred = c->f && c->f->norm_w ? (uint64_t)c->wg : 1;
    return 4 * (red + xsh + nred + (uint64_t)merge_table_len(c->f) + 2);
}

/* The q4_gemv prelude for x and the nw weights ws (M = m rows): constants, x's reader, the
 * kind's dequantisation, the subgroup helpers, the bindings (X, then per weight C, AB and BIAS,
 * then the outputs, then the uniform) and the readers over them. ro[0..*n_ro_out) receives the
 * read-only tensors in binding order. Returns the length the prelude needed (>= cap: too long). */
static size_t gemv_prelude(char *prelude, size_t cap, const gemv_cfg *c, wgml_tensor *x,
                           const wgml_q4_weight *const *ws, int nw, int64_t m, wgml_tensor **ro, int *n_ro_out) {
    size_t len = 0;
#define EMIT(...) (len += (size_t)snprintf(prelude + len, len < cap ? cap - len : 0, __VA_ARGS__))
    const wgml_q4_weight *w = ws[0];
    const q4_gemv_fuse *f = c->f;
    bool stage = fuse_stage(f), pair = fuse_pair(f), resid = f && f->epi == Q4_EPI_RESIDUAL, merge = fuse_merge(f);
    bool norm = f && f->norm_w;
    int xv = w->k % 4 == 0 && !merge ? 4 : 1;
    int n_out = pair ? 1 : nw;
    int64_t kp4 = w->kp / 4;
    /* no `enable subgroups;`: naga (wgpu-native 29) rejects the directive ("not yet
     * supported") and takes the subgroup builtins and functions without it, given the device's
     * subgroups feature */
    EMIT("alias XT = %s;\n"
         "const WG: u32 = %du; const TPR: u32 = %du; const RPT: u32 = %du; const MR: u32 = %du;\n"
         "const BPI: u32 = %du; const NW: u32 = %du; const SUBGROUP: bool = %s; const SG: u32 = %uu;\n"
         "const DIRECT: bool = %s; const RED_LEN: u32 = %du;\n"
         "const XSTAGE: bool = %s; const NORM: bool = %s; const KP4: u32 = %lldu; const XSH_LEN: u32 = %lldu;\n"
         "const NRED_LEN: u32 = %du; const EPI: u32 = %du; const PAIR: bool = %s; const RP: u32 = %du;\n"
         "alias V = f32;\n"
         "fn x4(mm: u32, k: u32) -> vec4<f32> { %s }\n",
         xv == 4 ? "vec4<f32>" : "f32", c->wg, c->tpr, c->rpt, (int)m, c->bpi, nw, c->sg ? "true" : "false",
         c->sg ? c->sg_known : 0u, c->direct ? "true" : "false", c->direct ? 1 : c->wg * c->rpt * (int)m,
         stage ? "true" : "false", norm ? "true" : "false", (long long)kp4, stage ? (long long)(m * kp4) : 1LL,
         norm ? c->wg : 1, f ? (int)f->epi : 0, pair ? "true" : "false", pair ? c->rpt / 2 : c->rpt,
         stage ? "return xsh[mm * KP4 + k / 4u];" : "return x_load(mm, k / 4u);");
    /* x_load: x's vec4 i (zero past K); merged from the chunks' partials X [MH, MC, MD + 2] with
     * MERGE (x_merged in the kernel); xf: X's element i as f32 */
    EMIT("const MERGE: bool = %s; const MH: u32 = %lldu; const MC: u32 = %lldu; const MD: u32 = %lldu;\n"
         "fn xf(i: u32) -> f32 { return %s; }\n"
         "fn x_load(mm: u32, i: u32) -> vec4<f32> {\n%s}\n",
         merge ? "true" : "false", merge ? (long long)f->merge_heads : 1LL, merge ? (long long)f->merge_chunks : 1LL,
         merge ? (long long)f->merge_dim : 1LL, xv == 4 ? "X[i / 4u][i % 4u]" : "X[i]",
         merge     ? "  return x_merged(i);\n"
         : xv == 4 ? "  if (i * 4u < p.K) { return X[mm * (p.K / 4u) + i]; }\n  return vec4<f32>(0.0);\n"
                   : "  var v = vec4<f32>(0.0);\n"
                     "  for (var j = 0u; j < 4u; j++) { if (i * 4u + j < p.K) { v[j] = X[mm * p.K + i * 4u + j]; } }\n"
                     "  return v;\n");
    if (len < cap) kind_prelude_ex(prelude + len, cap - len, w, false);
    len += strlen(prelude + len);
    if (c->sg)
        EMIT("struct SgIn { @builtin(subgroup_size) size: u32 }\n"
             "fn sg_size(s: SgIn) -> u32 { return s.size; }\n"
             "fn sg_sum(v: f32, seg: u32, sgs: u32) -> f32 {\n"
             "  if (seg == sgs) { return subgroupAdd(v); }\n"
             "  var s = v;\n"
             "  for (var h = 1u; h < seg; h = h * 2u) { s += subgroupShuffleXor(s, h); }\n"
             "  return s;\n}\n");
    else
        EMIT("struct SgIn { @builtin(local_invocation_id) unused: vec3<u32> }\n"
             "fn sg_size(s: SgIn) -> u32 { return 1u; }\n"
             "fn sg_sum(v: f32, seg: u32, sgs: u32) -> f32 { return v; }\n");
    /* bindings: X, per weight C, AB (, BIAS), then the outputs, then the uniform */
    int n_ro = 0, b = 0;
    ro[n_ro++] = x;
    EMIT("@group(0) @binding(%d) var<storage, read> X: array<XT>;\n", b++);
    if (norm) {
        ro[n_ro++] = f->norm_w;
        EMIT("@group(0) @binding(%d) var<storage, read> NRM: array<f32>;\n"
             "fn nw4(i: u32) -> vec4<f32> {\n  var v = vec4<f32>(0.0);\n"
             "  for (var j = 0u; j < 4u; j++) { if (i * 4u + j < p.K) { v[j] = NRM[i * 4u + j]; } }\n"
             "  return v;\n}\n",
             b++);
    } else {
        EMIT("fn nw4(i: u32) -> vec4<f32> { return vec4<f32>(1.0); }\n");
    }
    for (int i = 0; i < nw; i++) {
        EMIT("@group(0) @binding(%d) var<storage, read> C%d: array<vec4<u32>>;\n", b++, i);
        EMIT("@group(0) @binding(%d) var<storage, read> AB%d: array<ABT>;\n", b++, i);
        ro[n_ro++] = ws[i]->codes;
        ro[n_ro++] = ws[i]->ab;
        if (ws[i]->bias) {
            EMIT("@group(0) @binding(%d) var<storage, read> BIAS%d: array<f32>;\n", b++, i);
            ro[n_ro++] = ws[i]->bias;
        }
    }
    if (resid) {
        ro[n_ro++] = f->residual;
        EMIT("@group(0) @binding(%d) var<storage, read> R: array<f32>;\nfn resid(i: u32) -> f32 { return R[i]; }\n",
             b++);
    } else {
        EMIT("fn resid(i: u32) -> f32 { return 0.0; }\n");
    }
    for (int i = 0; i < n_out; i++) EMIT("@group(0) @binding(%d) var<storage, read_write> O%d: array<f32>;\n", b++, i);
    EMIT("@group(0) @binding(%d) var<uniform> p: Params;\n", b++);
    /* readers: w is uniform across a workgroup, so these branches are too */
    EMIT("fn c_at(w: u32, i: u32) -> vec4<u32> { ");
    for (int i = nw - 1; i > 0; i--) EMIT("if (w == %du) { return C%d[i]; } ", i, i);
    EMIT("return C0[i]; }\nfn ab_at(w: u32, i: u32) -> vec2<f32> { ");
    for (int i = nw - 1; i > 0; i--) EMIT("if (w == %du) { return ab_of(AB%d[i]); } ", i, i);
    EMIT("return ab_of(AB0[i]); }\nfn bias_at(w: u32, n: u32) -> f32 { ");
    for (int i = 0; i < nw; i++)
        if (ws[i]->bias) EMIT("if (w == %du) { return BIAS%d[n]; } ", i, i);
    EMIT("return 0.0; }\nfn store(w: u32, i: u32, v: f32) { ");
    for (int i = n_out - 1; i > 0; i--) EMIT("if (w == %du) { O%d[i] = v; return; } ", i, i);
    EMIT("O0[i] = v; }\n");
#undef EMIT
    *n_ro_out = n_ro;
    return len;
}

/* The GEMV's launch shape and reduction for nw weights with K = ws[0]->k and fusion f; false
 * when the fused kernel's workgroup memory would not fit the device. */
static bool gemv_config(wgml_ctx *ctx, const wgml_q4_weight *w, int64_t m, const q4_gemv_fuse *f, gemv_cfg *c) {
    memset(c, 0, sizeof *c);
    gemv_shape(gpu_get_caps(ctx)->is_cpu, w->kp / 32, w->n, &c->tpr, &c->rpt, &c->wg, &c->bpi);
    if (fuse_pair(f) && c->rpt % 2) c->rpt *= 2; /* a thread holds a gate row and its up row */
    c->sg = gemv_subgroup(ctx, c->tpr, &c->sg_known);
    c->direct = c->sg && c->sg_known >= (uint32_t)c->tpr;
    c->f = f;
    return gemv_wg_bytes(c, m, w->kp) <= gpu_get_caps(ctx)->max_workgroup_storage;
}

/* outs[i] = x · W_iᵀ (+ bias_i) for the nw (1..3) weights ws of one kind, group size and K, in
 * one dispatch of the q4_gemv kernel (M <= q4_gemv_max_m rows of x) configured by c (its fusion:
 * c->f, whose gated epilogue gives one output); out_shape is x's shape whose last dim is
 * replaced by each weight's N. */
static wgml_status record_gemv_cfg(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *const *ws,
                                   int nw, int64_t m, const gemv_cfg *c, wgml_tensor **outs) {
    wgml_ctx *ctx = graph_ctx(g);
    const wgml_q4_weight *w = ws[0];
    bool pair = fuse_pair(c->f);
    int n_out = pair ? 1 : nw;
    int64_t nblk = w->kp / 32;
    int64_t rows = (int64_t)(c->wg / c->tpr) * (pair ? c->rpt / 2 : c->rpt);
    char prelude[8192];
    wgml_tensor *ro[GRAPH_MAX_BINDINGS];
    int n_ro = 0;
    if (gemv_prelude(prelude, sizeof prelude, c, x, ws, nw, m, ro, &n_ro) >= sizeof prelude)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: the GEMV kernel's prelude is too long", op);
    struct {
        uint32_t nrow[4], rg_end[4];
        uint32_t m, k, vpr, ng, nblk, row_groups;
        float eps;
        uint32_t pad1;
    } params;
    memset(&params, 0, sizeof params);
    int64_t total = 0;
    for (int i = 0; i < n_out; i++) { /* a pair is one range of workgroups over the common N */
        total += (ws[i]->n + rows - 1) / rows;
        params.nrow[i] = (uint32_t)ws[i]->n;
        params.rg_end[i] = (uint32_t)total;
    }
    params.m = (uint32_t)m;
    params.k = (uint32_t)w->k;
    params.vpr = (uint32_t)(words_per_row(w) / 4);
    params.ng = (uint32_t)(w->kp / w->group);
    params.nblk = (uint32_t)nblk;
    params.row_groups = (uint32_t)total;
    params.eps = c->f ? c->f->eps : 0.0f;
    /* the outputs: x's shape with N last; [1, N] when x is attention's chunks to merge */
    int64_t shape[WGML_MAX_RANK] = {1};
    int rank = fuse_merge(c->f) ? 2 : x->rank;
    if (!fuse_merge(c->f)) memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    for (int i = 0; i < n_out; i++) {
        shape[rank - 1] = ws[i]->n;
        outs[i] = graph_output(g, op, WGML_F32, rank, shape);
    }
    wgml_status s = WGML_OK;
    for (int i = 0; i < n_out && !s; i++)
        if (!outs[i]) s = wgml_last_status(ctx) ? wgml_last_status(ctx) : WGML_ERR_OOM;
    if (!s)
        s = graph_dispatch(g, op, "q4_gemv", prelude, ro, n_ro, outs, n_out, &params, sizeof params, (uint64_t)total);
    if (s)
        for (int i = 0; i < n_out; i++) {
            wgml_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}

/* record_gemv_cfg without fusion, in the automatic configuration. */
static wgml_status record_gemv(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *const *ws, int nw,
                               int64_t m, wgml_tensor **outs) {
    gemv_cfg c;
    gemv_config(graph_ctx(g), ws[0], m, NULL, &c); /* without a prologue it always fits */
    return record_gemv_cfg(g, op, x, ws, nw, m, &c, outs);
}

/* The checks of x shared by q4_linear and q4_linear_multi. */
static bool x_ok(wgml_graph *g, wgml_ctx *ctx, const char *op, wgml_tensor *x) {
    return check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) == WGML_OK;
}

wgml_tensor *q4_linear_product(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *w) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "x", x) || !q4_weight_valid(ctx, op, "w", w) || check_dtype(ctx, op, "x", x, WGML_F32) ||
        check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK) || !same_graph(ctx, op, "x", x, w) || !x_ok(g, ctx, op, x))
        return NULL;
    if (x->shape[x->rank - 1] != w->k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: x %s must end in K = %lld for the weight [%lld, %lld]", op, tshape(x),
                       (long long)w->k, (long long)w->n, (long long)w->k);
        return NULL;
    }
    int64_t m = x->numel / w->k, shape[WGML_MAX_RANK];
    if (m <= q4_gemv_max_m(ctx)) {
        wgml_tensor *out = NULL;
        record_gemv(g, op, x, &w, 1, m, &out);
        return out;
    }
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[x->rank - 1] = w->n;
    return record_mm(g, op, x, w, 0, m, x->rank, shape);
}

wgml_tensor *wgml_q4_linear(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *w) {
    wgml_tensor *out = q4_linear_product(g, "q4_linear", x, w);
    return out ? q4_linear_grad_record(g, out, x, w) : NULL;
}

/* Storage buffers one GEMV dispatch may bind: the graph's limit (one binding is the uniform)
 * or the device's, the smaller. */
static int gemv_binding_limit(wgml_ctx *ctx) {
    int limit = GRAPH_MAX_BINDINGS - 1;
    const gpu_caps *caps = gpu_get_caps(ctx);
    return (uint32_t)limit > caps->max_storage_per_stage ? (int)caps->max_storage_per_stage : limit;
}

/* outs[i] = the GEMV of x with ws[i] (fusion f: NULL, a norm prologue, or Q4_EPI_RESIDUAL with
 * n = 1; not the pairs), the weights grouped into as few dispatches as one kind, one group size
 * and the binding limit allow. */
static wgml_status gemv_groups(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *const *ws, int n,
                               int64_t m, const q4_gemv_fuse *f, wgml_tensor **outs) {
    wgml_ctx *ctx = graph_ctx(g);
    int limit = gemv_binding_limit(ctx);
    bool done[WGML_Q4_MULTI_MAX] = {false};
    wgml_status s = WGML_OK;
    for (int i = 0; i < n && !s; i++) {
        if (done[i]) continue;
        const wgml_q4_weight *grp[WGML_Q4_MULTI_MAX];
        int idx[WGML_Q4_MULTI_MAX], ng = 0;
        grp[ng] = ws[i], idx[ng++] = i;
        for (int j = i + 1; j < n; j++) {
            if (done[j] || ws[j]->kind != ws[i]->kind || ws[j]->group != ws[i]->group) continue;
            grp[ng] = ws[j];
            if (gemv_storage_bindings(grp, ng + 1, f) > limit) continue;
            idx[ng++] = j;
        }
        if (gemv_storage_bindings(grp, ng, f) > limit) /* even one weight alone does not fit */
            return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: the device allows %u storage buffers per kernel", op,
                                  gpu_get_caps(ctx)->max_storage_per_stage);
        wgml_tensor *o[WGML_Q4_MULTI_MAX];
        gemv_cfg c;
        if (!gemv_config(ctx, grp[0], m, f, &c))
            return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s does not fit the GEMV's workgroup memory", op,
                                  tshape(x));
        s = record_gemv_cfg(g, op, x, grp, ng, m, &c, o);
        for (int j = 0; j < ng && !s; j++) {
            done[idx[j]] = true;
            outs[idx[j]] = o[j];
        }
    }
    return s;
}

/* The checks shared by q4_linear_multi and q4_gemv_fused: n weights (1..WGML_Q4_MULTI_MAX),
 * each valid, of x's graph, with x's K. */
static wgml_status multi_args(wgml_graph *g, wgml_ctx *ctx, const char *op, wgml_tensor *x,
                              const wgml_q4_weight *const *weights, int n) {
    if (n < 1 || n > WGML_Q4_MULTI_MAX)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %d weights; 1 to %d can share x", op, n, WGML_Q4_MULTI_MAX);
    if (!weights) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: weights is NULL", op);
    if (!x_ok(g, ctx, op, x)) return wgml_last_status(ctx);
    int64_t k = x->shape[x->rank - 1];
    for (int i = 0; i < n; i++) {
        char arg[32];
        snprintf(arg, sizeof arg, "weights[%d]", i);
        const wgml_q4_weight *w = weights[i];
        if (!q4_weight_valid(ctx, op, arg, w)) return wgml_last_status(ctx);
        if (w->codes->graph != g || w->ab->graph != g || (w->bias && w->bias->graph != g))
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s [%lld, %lld] and x %s belong to different graphs", op, arg,
                                  (long long)w->n, (long long)w->k, tshape(x));
        if (w->k != k)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s [%lld, %lld] has K = %lld; x %s ends in K = %lld", op, arg,
                                  (long long)w->n, (long long)w->k, (long long)w->k, tshape(x), (long long)k);
    }
    return WGML_OK;
}

wgml_status wgml_q4_linear_multi(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *const *weights, int n,
                                 wgml_tensor **outs) {
    const char *op = "q4_linear_multi";
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: graph is NULL", op);
    wgml_ctx *ctx = graph_ctx(g);
    if (!outs) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: outs is NULL", op);
    for (int i = 0; i < n && i < WGML_Q4_MULTI_MAX; i++) outs[i] = NULL;
    if (multi_args(g, ctx, op, x, weights, n)) return wgml_last_status(ctx);
    int64_t k = x->shape[x->rank - 1];
    int64_t m = x->numel / k;
    wgml_status s = WGML_OK;
    if (m > q4_gemv_max_m(ctx) || graph_grad_enabled(g, &x, 1)) {
        /* the tiled GEMM (one dispatch each), or the autograd record of each product */
        for (int i = 0; i < n && !s; i++)
            if (!(outs[i] = wgml_q4_linear(g, x, weights[i]))) s = wgml_last_status(ctx);
    } else {
        s = gemv_groups(g, op, x, weights, n, m, NULL, outs);
    }
    if (s)
        for (int i = 0; i < n; i++) {
            wgml_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}

/* What the prefill's forms of the GEMM (q4_linear_concat, q4_linear_parts) both ask of x and w:
 * x f32 [..., K] of g with K = w's and more rows than the GEMV takes, no gradient wanted through
 * x, and their A/B switch $`env` not 0. */
static bool prefill_gemm_takes(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *w, const char *env) {
    if (!g || !x || !w || x->rank < 1 || x->dtype != WGML_F32 || x->graph != g) return false;
    const char *e = getenv(env);
    if (e && !strcmp(e, "0")) return false;
    int64_t k = x->shape[x->rank - 1];
    return k == w->k && k > 0 && x->numel / k > q4_gemv_max_m(graph_ctx(g)) && !graph_grad_enabled(g, &x, 1);
}

bool q4_concat_applies(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *w, int n, const int64_t *ns) {
    if (!ns || n < 2 || n > 3 || !prefill_gemm_takes(g, x, w, "WGML_Q4_CONCAT")) return false;
    int64_t m = x->numel / w->k, cs = 0;
    if (m * w->n > 0x7FFFFFFFll) return false;
    uint64_t align = gpu_get_caps(graph_ctx(g))->storage_align;
    for (int i = 0; i < n; i++) {
        if (ns[i] <= 0 || ((uint64_t)(m * cs) * sizeof(float)) % align) return false;
        cs += ns[i];
    }
    return cs == w->n;
}

wgml_status q4_linear_concat(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *w, int n,
                             const int64_t *ns, wgml_tensor **outs) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: graph is NULL", op);
    wgml_ctx *ctx = graph_ctx(g);
    if (!outs || !ns) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: outs or ns is NULL", op);
    for (int i = 0; i < n && i < 3; i++) outs[i] = NULL;
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) || !q4_weight_valid(ctx, op, "w", w) ||
        !same_graph(ctx, op, "x", x, w))
        return wgml_last_status(ctx);
    if (!q4_concat_applies(g, x, w, n, ns))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: x %s with the weight [%lld, %lld] in %d parts: the concatenated product needs 2 or 3 "
                              "parts adding up to its rows, x ending in K with more than %d rows, no gradient and "
                              "aligned parts",
                              op, tshape(x), (long long)w->n, (long long)w->k, n, q4_gemv_max_m(ctx));
    int64_t m = x->numel / w->k, flat = m * w->n, seg[2] = {ns[0], n > 2 ? ns[0] + ns[1] : w->n};
    mm_dest d = {.seg = seg};
    wgml_tensor *all = record_mm_ex(g, op, x, w, 0, m, 1, &flat, &d);
    if (!all) return wgml_last_status(ctx);
    int64_t shape[WGML_MAX_RANK], cs = 0;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    wgml_status s = WGML_OK;
    for (int i = 0; i < n && !s; i++) {
        shape[x->rank - 1] = ns[i];
        if (!(outs[i] = graph_view(g, all, op, (uint64_t)(m * cs) * sizeof(float), x->rank, shape)))
            s = wgml_last_status(ctx);
        cs += ns[i];
    }
    wgml_tensor_free(all); /* eager: freed with its last view; built graph: no-op */
    if (s)
        for (int i = 0; i < n; i++) {
            wgml_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}

bool q4_parts_applies(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *w) {
    return x && x->rank < WGML_MAX_RANK && prefill_gemm_takes(g, x, w, "WGML_Q4_PARTS");
}

wgml_tensor *q4_linear_parts(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *w, int *splits) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (!splits) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: splits is NULL", op);
        return NULL;
    }
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) || !q4_weight_valid(ctx, op, "w", w) ||
        !same_graph(ctx, op, "x", x, w))
        return NULL;
    if (!q4_parts_applies(g, x, w)) {
        wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                       "%s: x %s with the weight [%lld, %lld]: the product left in slices needs x ending in K, of rank "
                       "below %d, with more than %d rows and no gradient",
                       op, tshape(x), (long long)w->n, (long long)w->k, WGML_MAX_RANK, q4_gemv_max_m(ctx));
        return NULL;
    }
    int64_t shape[WGML_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[x->rank - 1] = w->n;
    mm_dest d = {.parts = splits};
    return record_mm_ex(g, op, x, w, 0, x->numel / w->k, x->rank, shape, &d);
}

static bool shape_is(const wgml_tensor *t, int rank, const int64_t *shape) {
    return t->rank == rank && memcmp(t->shape, shape, sizeof(int64_t) * (size_t)rank) == 0;
}

/* The checks of q4_gemv_fused's merge prologue: x the partials [heads, chunks, dim + 2] (dim a
 * multiple of 4) of one row of K = heads * dim, and n weights of that K. */
static wgml_status merge_args(wgml_graph *g, wgml_ctx *ctx, const char *op, wgml_tensor *x,
                              const wgml_q4_weight *const *ws, int n, const q4_gemv_fuse *f) {
    if (n < 1 || n > WGML_Q4_MULTI_MAX)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %d weights; 1 to %d can share x", op, n, WGML_Q4_MULTI_MAX);
    if (!ws) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: weights is NULL", op);
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 3, 3)) return wgml_last_status(ctx);
    int64_t want[3] = {f->merge_heads, f->merge_chunks, f->merge_dim + 2};
    if (f->merge_heads <= 0 || f->merge_dim <= 0 || f->merge_dim % 4 || !shape_is(x, 3, want))
        return wgml_set_error(ctx, WGML_ERR_SHAPE,
                              "%s: x %s must be the chunks' partials [heads %lld, chunks %lld, dim %lld + 2] (dim a "
                              "multiple of 4)",
                              op, tshape(x), (long long)f->merge_heads, (long long)f->merge_chunks,
                              (long long)f->merge_dim);
    for (int i = 0; i < n; i++) {
        char arg[32];
        snprintf(arg, sizeof arg, "weights[%d]", i);
        if (!q4_weight_valid(ctx, op, arg, ws[i])) return wgml_last_status(ctx);
        if (ws[i]->codes->graph != g || ws[i]->k != f->merge_heads * f->merge_dim)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s [%lld, %lld] must be of x's graph with K = %lld", op, arg,
                                  (long long)ws[i]->n, (long long)ws[i]->k, (long long)(f->merge_heads * f->merge_dim));
    }
    return WGML_OK;
}

bool q4_gemv_merge_fits(wgml_ctx *ctx, const wgml_q4_weight *w, const q4_gemv_fuse *f) {
    gemv_cfg c;
    const char *e = getenv("WGML_Q4_GEMV_MERGE"); /* 0: off, for A/B runs */
    if (e && !strcmp(e, "0")) return false;
    return ctx && w && fuse_merge(f) && !f->norm_w && !fuse_pair(f) && f->merge_dim % 4 == 0 &&
           w->k == f->merge_heads * f->merge_dim && gemv_config(ctx, w, 1, f, &c);
}


/* The same result from the public ops, where the fused kernel does not apply. */
static wgml_status gemv_fused_plain(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *const *ws, int n,
                                    const q4_gemv_fuse *f, wgml_tensor **outs) {
    wgml_ctx *ctx = graph_ctx(g);
    wgml_tensor *h = f->norm_w ? wgml_rms_norm(g, x, f->norm_w, f->eps) : x, *y[WGML_Q4_MULTI_MAX];
    if (!h) return wgml_last_status(ctx);
    wgml_status s = wgml_q4_linear_multi(g, h, ws, n, y);
    if (s) return s;
    switch (f->epi) {
    case Q4_EPI_RESIDUAL: outs[0] = wgml_add(g, f->residual, y[0], 1.0f); break;
    case Q4_EPI_SWIGLU: outs[0] = wgml_mul(g, wgml_silu(g, y[0]), y[1]); break;
    case Q4_EPI_GEGLU: outs[0] = wgml_mul(g, wgml_gelu(g, y[0], 1), y[1]); break;
    default:
        for (int i = 0; i < n; i++) outs[i] = y[i];
        return WGML_OK;
    }
    return outs[0] ? WGML_OK : wgml_last_status(ctx);
}

wgml_status q4_gemv_fused(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *const *ws, int n,
                          const q4_gemv_fuse *f, wgml_tensor **outs) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: graph is NULL", op);
    wgml_ctx *ctx = graph_ctx(g);
    if (!outs || !f) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s is NULL", op, outs ? "the fusion" : "outs");
    bool pair = fuse_pair(f), merge = fuse_merge(f);
    int n_out = pair || f->epi == Q4_EPI_RESIDUAL ? 1 : n; /* the entries of outs */
    for (int i = 0; i < n_out && i < WGML_Q4_MULTI_MAX; i++) outs[i] = NULL;
    if (merge ? merge_args(g, ctx, op, x, ws, n, f) : multi_args(g, ctx, op, x, ws, n)) return wgml_last_status(ctx);
    /* x's logical shape: [1, K] when it is attention's chunks to merge */
    int64_t lshape[WGML_MAX_RANK] = {1, merge ? f->merge_heads * f->merge_dim : 0};
    int lrank = merge ? 2 : x->rank;
    if (!merge) memcpy(lshape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    int64_t k = lshape[lrank - 1], m = merge ? 1 : x->numel / k;
    if ((int)f->epi < Q4_EPI_STORE || f->epi > Q4_EPI_GEGLU)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: unknown epilogue %d", op, (int)f->epi);
    if (merge && (f->norm_w || pair))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: the chunks' merge is a prologue of its own: no norm, no gated pair",
                              op);
    if (f->norm_w) {
        int64_t want[1] = {k};
        if (check_operand(ctx, g, op, "norm_w", f->norm_w, WGML_F32, 1, 1)) return wgml_last_status(ctx);
        if (!shape_is(f->norm_w, 1, want))
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: norm_w %s must be [%lld] for x %s", op, tshape(f->norm_w),
                                  (long long)k, tshape(x));
    }
    if (pair && (n != 2 || ws[0]->n != ws[1]->n))
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: a gated epilogue takes two weights of one N (gate, up); got %d%s",
                              op, n, n == 2 ? " of different N" : "");
    if (f->epi == Q4_EPI_RESIDUAL) {
        if (n != 1) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: a residual epilogue takes one weight, got %d", op, n);
        int64_t want[WGML_MAX_RANK];
        memcpy(want, lshape, sizeof(int64_t) * (size_t)lrank);
        want[lrank - 1] = ws[0]->n;
        if (check_operand(ctx, g, op, "residual", f->residual, WGML_F32, lrank, lrank)) return wgml_last_status(ctx);
        if (!shape_is(f->residual, lrank, want))
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: residual %s must have the output's shape (x %s, N = %lld)", op,
                                  tshape(f->residual), tshape(x), (long long)ws[0]->n);
    }
    wgml_tensor *in[3] = {x, f->norm_w, f->residual};
    bool fused = m <= q4_gemv_max_m(ctx) && !graph_grad_enabled(g, in, 3);
    for (int i = 0; i < n && fused; i++) {
        gemv_cfg c;
        fused = gemv_config(ctx, ws[i], m, f, &c);
    }
    if (merge && !fused)
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: the chunks' merge (x %s) needs the fused GEMV: no gradient, workgroup memory for "
                              "K = %lld and the %lld x %lld weight table",
                              op, tshape(x), (long long)k, (long long)f->merge_heads, (long long)f->merge_chunks);
    if (pair && fused) {
        if (ws[0]->kind == ws[1]->kind && ws[0]->group == ws[1]->group &&
            gemv_storage_bindings(ws, 2, f) <= gemv_binding_limit(ctx)) {
            gemv_cfg c;
            gemv_config(ctx, ws[0], m, f, &c);
            return record_gemv_cfg(g, op, x, ws, 2, m, &c, outs);
        }
        fused = false;
    }
    wgml_status s = fused ? gemv_groups(g, op, x, ws, n, m, f, outs) : gemv_fused_plain(g, x, ws, n, f, outs);
    if (s)
        for (int i = 0; i < n_out; i++) {
            wgml_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}

wgml_tensor *wgml_q4_linear_dx(wgml_graph *g, wgml_tensor *d_out, const wgml_q4_weight *w) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "q4_linear_dx";
    if (check_tensor(ctx, op, "d_out", d_out) || !q4_weight_valid(ctx, op, "w", w) ||
        check_dtype(ctx, op, "d_out", d_out, WGML_F32) || check_rank(ctx, op, "d_out", d_out, 1, WGML_MAX_RANK) ||
        !same_graph(ctx, op, "d_out", d_out, w))
        return NULL;
    if (check_graph(ctx, g, op, "d_out", d_out)) return NULL;
    if (d_out->shape[d_out->rank - 1] != w->n) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: d_out %s must end in N = %lld for the weight [%lld, %lld]", op,
                       tshape(d_out), (long long)w->n, (long long)w->n, (long long)w->k);
        return NULL;
    }
    int64_t m = d_out->numel / w->n, shape[WGML_MAX_RANK];
    memcpy(shape, d_out->shape, sizeof(int64_t) * (size_t)d_out->rank);
    shape[d_out->rank - 1] = w->k;
    return record_mm(g, op, d_out, w, 1, m, d_out->rank, shape);
}

wgml_status wgml_q4_requant(wgml_graph *g, wgml_tensor *latent, const wgml_q4_weight *w) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "q4_requant: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "q4_requant";
    wgml_status s;
    if ((s = check_tensor(ctx, op, "latent", latent))) return s;
    if (!q4_weight_valid(ctx, op, "w", w)) return wgml_last_status(ctx);
    if ((s = check_dtype(ctx, op, "latent", latent, WGML_F32)) || (s = check_rank(ctx, op, "latent", latent, 2, 2)))
        return s;
    if (!same_graph(ctx, op, "latent", latent, w)) return wgml_last_status(ctx);
    if ((s = check_graph(ctx, g, op, "latent", latent))) return s;
    if (w->kind == WGML_QF32)
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: w [%lld, %lld] holds plain f32 values (F32/F16/BF16), not codes at frozen scales; "
                              "train it as an f32 tensor",
                              op, (long long)w->n, (long long)w->k);
    if (latent->shape[0] != w->n || latent->shape[1] != w->k)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: latent %s must be [%lld, %lld] like the weight", op,
                              tshape(latent), (long long)w->n, (long long)w->k);
    char prelude[2048];
    int len = kind_prelude_len(prelude, sizeof prelude, w);
    bool v4 = w->k % kind_cpw(w->kind) == 0; /* a word's latents are whole vec4s */
    snprintf(prelude + len, sizeof prelude - (size_t)len,
             "alias LT = %s;\nfn latw(b: u32, k0: u32) -> array<f32, CPW> {\n  var v: array<f32, CPW>;\n%s  return v;\n}\n",
             v4 ? "vec4<f32>" : "f32",
             v4 ? "  if (k0 >= p.K) { return v; } /* a padding word */\n"
                  "  for (var q = 0u; q < CPW / 4u; q++) {\n"
                  "    let a = L[(b + k0) / 4u + q];\n"
                  "    for (var j = 0u; j < 4u; j++) { v[4u * q + j] = a[j]; }\n  }\n"
                : "  for (var i = 0u; i < CPW; i++) { if (k0 + i < p.K) { v[i] = L[b + k0 + i]; } }\n");
    uint64_t total = (uint64_t)(w->n * words_per_row(w));
    struct {
        uint32_t n, k, wpr, ng, total;
    } params = {(uint32_t)w->n, (uint32_t)w->k, (uint32_t)words_per_row(w), (uint32_t)(w->kp / w->group),
                (uint32_t)total};
    wgml_tensor *ro[2] = {latent, w->ab};
    return graph_dispatch(g, op, "q4_requant", prelude, ro, 2, (wgml_tensor *const *)&w->codes, 1, &params,
                          sizeof params, (total + 255) / 256);
}

/* Rows of the table gathered by ids (ids NULL: every row, in order). row0 >= 0: the table is
 * rows row0.. of a larger one (zero rows for ids outside it). */
static wgml_tensor *record_rows(wgml_graph *g, const char *op, const wgml_q4_weight *table, wgml_tensor *ids,
                                int64_t row0) {
    int64_t shape[WGML_MAX_RANK], t = ids ? ids->numel : table->n;
    int rank = ids ? ids->rank + 1 : 2;
    if (ids) memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->rank);
    else shape[0] = table->n;
    shape[rank - 1] = table->k;
    char prelude[2048];
    int len = snprintf(prelude, sizeof prelude, "const IDENT: bool = %s;\nconst PART: bool = %s;\n",
                       ids ? "false" : "true", row0 >= 0 ? "true" : "false");
    kind_prelude(prelude + len, sizeof prelude - (size_t)len, table);
    struct {
        uint32_t t, v, d, wpr, ng, row0;
    } params = {(uint32_t)t, (uint32_t)table->n, (uint32_t)table->k, (uint32_t)words_per_row(table),
                (uint32_t)(table->kp / table->group), (uint32_t)(row0 > 0 ? row0 : 0)};
    wgml_tensor *out = graph_output(g, op, WGML_F32, rank, shape);
    if (!out) return NULL;
    wgml_tensor *ro[3] = {ids ? ids : GRAPH_UNUSED, table->codes, table->ab};
    if (graph_dispatch(g, op, "q4_embed", prelude, ro, 3, &out, 1, &params, sizeof params, (uint64_t)t)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

static wgml_tensor *embedding_impl(wgml_graph *g, const char *op, const wgml_q4_weight *table, wgml_tensor *ids,
                                   int64_t row0) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "ids", ids) || !q4_weight_valid(ctx, op, "table", table) ||
        check_dtype(ctx, op, "ids", ids, WGML_I32) || check_rank(ctx, op, "ids", ids, 1, WGML_MAX_RANK - 1) ||
        !same_graph(ctx, op, "ids", ids, table))
        return NULL;
    if (check_graph(ctx, g, op, "ids", ids)) return NULL;
    return record_rows(g, op, table, ids, row0);
}

wgml_tensor *wgml_q4_embedding(wgml_graph *g, const wgml_q4_weight *table, wgml_tensor *ids) {
    return g ? embedding_impl(g, "q4_embedding", table, ids, -1) : NULL;
}

wgml_tensor *wgml_q4_embedding_rows(wgml_graph *g, const wgml_q4_weight *table, wgml_tensor *ids, int64_t row0) {
    if (!g) return NULL;
    if (row0 < 0 || row0 + (table ? table->n : 0) > 0x7FFFFFFF) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "q4_embedding_rows: row0 %lld must be in 0..2^31-1 - the table's rows",
                       (long long)row0);
        return NULL;
    }
    return embedding_impl(g, "q4_embedding_rows", table, ids, row0);
}

wgml_tensor *wgml_q4_dequantize(wgml_graph *g, const wgml_q4_weight *w) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "q4_dequantize";
    if (!q4_weight_valid(ctx, op, "w", w)) return NULL;
    if (check_graph(ctx, g, op, "the weight", w->codes)) return NULL;
    return record_rows(g, op, w, NULL, -1);
}
