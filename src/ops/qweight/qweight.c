/* Frozen 4-bit / 8-bit weights on the GPU: upload, the code kinds' WGSL, the forward's and
 * input gradient's entry points (the kernels: qw_gemv.c for a few rows, qw_mm.c for more),
 * straight-through requant and the quantised embedding lookup.
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
 *   host's (qw_format.c), so the GPU's dequantisation equals the host's bit for bit.
 *   Rows are contiguous in K so that the GEMV reads each row as a stream of vec4<u32>
 *   (32 codes = 16 bytes per load) plus one scale per group.
 */
#include "ops/qweight/qw_internal.h"
#include "ops/qweight/qw_grad.h"
#include "ops/qweight/qw_concat.h"
#include "ops/qweight/qw_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ upload */

/* Codes per u32 word: 8 (4-bit kinds), 4 (8-bit kinds) or 1 (QF32: the word is the value). */
int qw_kind_cpw(wgml_qkind kind) {
    return kind == WGML_QF32 ? 1 : kind == WGML_Q8 || kind == WGML_Q8_MIN ? 4 : 8;
}
static bool kind_has_min(wgml_qkind kind) { return kind == WGML_Q4_MIN || kind == WGML_Q8_MIN; }

/* ab: f32 pairs (WGML_AB_F32) or the K forms' u32 words, as include/wgml-quant.h lays them out. */
static wgml_qweight *weight_new(wgml_graph *g, const char *op, wgml_qkind kind, int bits, int64_t n, int64_t k,
                                int group, const uint32_t *words, wgml_abform form, const void *ab,
                                const float *bias) {
    wgml_ctx *ctx = graph_ctx(g);
    wgml_qweight *w = calloc(1, sizeof *w);
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
    w->ab_form = form;
    int64_t cs[2] = {n, w->kp / qw_kind_cpw(kind)};
    int64_t as[3] = {n, w->kp / group, 2}, ks[3] = {n, w->kp / 256, qw_ab_form_words(form)};
    w->codes = wgml_tensor_new(g, WGML_U32, 2, cs);
    w->ab = form == WGML_AB_F32 ? wgml_tensor_new(g, WGML_F32, w->has_min ? 3 : 2, as)
                                : wgml_tensor_new(g, WGML_U32, 3, ks);
    if (bias) w->bias = wgml_tensor_new(g, WGML_F32, 1, &n);
    if (!w->codes || !w->ab || (bias && !w->bias) || wgml_tensor_write(w->codes, words, wgml_tensor_nbytes(w->codes)) ||
        wgml_tensor_write(w->ab, ab, wgml_tensor_nbytes(w->ab)) ||
        (bias && wgml_tensor_write(w->bias, bias, wgml_tensor_nbytes(w->bias)))) {
        wgml_qweight_free(w);
        return NULL;
    }
    return w;
}

void wgml_qweight_free(wgml_qweight *w) {
    if (!w) return;
    wgml_tensor_free(w->codes);
    wgml_tensor_free(w->ab);
    wgml_tensor_free(w->bias);
    free(w);
}

wgml_qweight *wgml_qweight_upload_q4gsw(wgml_graph *g, const uint8_t *codes, const float *scales, const float *bias,
                                        int64_t n, int64_t k, int group) {
    if (!g) return NULL;
    const char *op = "qweight_upload_q4gsw";
    if (qw_check_q4gsw(graph_ctx(g), op, codes, scales, n, k, group)) return NULL;
    int64_t kp = (k + group - 1) / group * group;
    uint32_t *words = malloc(sizeof(uint32_t) * (size_t)(n * kp / 8));
    float *ab = malloc(sizeof(float) * (size_t)(n * kp / group));
    wgml_qweight *w = NULL;
    if (!words || !ab) wgml_set_error(graph_ctx(g), WGML_ERR_OOM, "%s: out of host memory", op);
    else {
        qw_pack_q4gsw(codes, scales, n, k, group, words, ab);
        w = weight_new(g, op, WGML_Q4_SYM, 4, n, k, group, words, WGML_AB_F32, ab, bias);
    }
    free(words);
    free(ab);
    return w;
}

wgml_qweight *wgml_qweight_upload_gguf(wgml_graph *g, int type, const void *data, size_t bytes, int64_t n, int64_t k) {
    if (!g) return NULL;
    const char *op = "qweight_upload_gguf";
    if (qw_check_gguf(graph_ctx(g), op, type, data, bytes, n, k, true)) return NULL;
    if (n > (1 << 24) || k > (1 << 26)) {
        wgml_set_error(graph_ctx(g), WGML_ERR_LIMIT, "%s: shape [%lld, %lld] is too large", op, (long long)n,
                       (long long)k);
        return NULL;
    }
    wgml_qkind kind;
    int group, bits;
    qw_gguf_gpu(type, &kind, &group, &bits);
    int64_t kp = (k + group - 1) / group * group; /* = k but for the plain types (QF32) */
    wgml_abform form = qw_gguf_ab_form(type);
    uint32_t *words = malloc(sizeof(uint32_t) * (size_t)(n * kp / qw_kind_cpw(kind)));
    void *ab = malloc(4 * (size_t)(n * qw_ab_row_words(form, kp, group, kind_has_min(kind)))); /* f32 or u32 */
    wgml_qweight *w = NULL;
    if (!words || !ab) wgml_set_error(graph_ctx(g), WGML_ERR_OOM, "%s: out of host memory", op);
    else {
        qw_pack_gguf(type, data, n, k, words, form == WGML_AB_F32 ? ab : NULL);
        if (form != WGML_AB_F32) qw_pack_kab(type, data, n, k, ab);
        w = weight_new(g, op, kind, bits, n, k, group, words, form, ab, NULL);
    }
    free(words);
    free(ab);
    return w;
}

wgml_qweight *wgml_qweight_quantize(wgml_graph *g, const float *wf, int64_t n, int64_t k, int group) {
    if (!g) return NULL;
    const char *op = "qweight_quantize";
    wgml_ctx *ctx = graph_ctx(g);
    if (!wf) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: w is NULL", op);
        return NULL;
    }
    if (qw_check_q4gsw(ctx, op, wf, wf, n, k, group)) return NULL;
    int64_t kb = (k + 1) / 2, pn = (n + 3) / 4 * 4, ng = (k + group - 1) / group;
    uint8_t *codes = malloc((size_t)(n * kb));
    float *scales = malloc(sizeof(float) * (size_t)(ng * pn));
    wgml_qweight *w = NULL;
    if (!codes || !scales) wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    else if (wgml_q4gsw_quantize(wf, n, k, group, codes, scales))
        wgml_set_error(ctx, wgml_last_status(NULL), "%s", wgml_last_error(NULL));
    else
        w = wgml_qweight_upload_q4gsw(g, codes, scales, NULL, n, k, group);
    free(codes);
    free(scales);
    return w;
}

/* ------------------------------------------------------------------ kernels */

/* WGSL lines shared by every qweight kernel: the kind, codes per u32 word (CPW) and field width
 * (FW), the group size G, 32-code blocks per group (BPG, 1 when G = 16) and groups per block
 * (GPB: 2 when G = 16, else 1), the stored type ABT and what reads it (ab_of(v): (a, b) of
 * w = c·a + b from a stored f32 value; for the K forms qw_kab.wgsl's helpers), group_ab(i)
 * (with ab_reader, qw_ab_reader) the pair of group i = n·(Kp/G) + group of the binding AB;
 * code_f(word, i) the i-th code of a word; deq(c, ab)
 * the exact value; quant(l, ab) the stored field of the code requant gives latent l (the
 * code range from the weight's bits) and PADC the field of a padding code. */
void qw_kind_prelude_ex(char *buf, size_t cap, const wgml_qweight *w, bool ab_reader) {
    bool f32 = w->kind == WGML_QF32;
    int hi = f32 ? 0 : w->kind == WGML_Q4_SYM ? 7 : w->kind == WGML_Q8 ? (1 << (w->bits - 1)) - 1 : (1 << w->bits) - 1;
    int lo = f32 ? 0 : w->kind == WGML_Q4_SYM ? -8 : w->kind == WGML_Q8 ? -(1 << (w->bits - 1)) : 0;
    const char *ab_t = w->ab_form != WGML_AB_F32 ? "u32" : w->has_min ? "vec2<f32>" : "f32";
    const char *gab = w->kind == WGML_Q4_SYM ? "return vec2<f32>(v, -8.0 * v);"
                      : w->has_min           ? "return v;"
                                             : "return vec2<f32>(v, 0.0);";
    /* the code as f32 through qw_cvt.wgsl (exact; it says why not f32(u)) */
    const char *code = f32                      ? "return bitcast<f32>(word);"
                       : w->kind == WGML_Q8     ? "return cvt_i8(word >> (8u * i));"
                       : w->kind == WGML_Q8_MIN ? "return cvt_u2f1((word >> (8u * i)) & 255u);"
                                                : "return cvt_u2f1((word >> (4u * i)) & 15u);";
    const char *deq = f32                    ? "return c;"
                      : w->kind == WGML_Q4_SYM ? "return (c - 8.0) * ab.x;"
                      : w->has_min           ? "return c * ab.x + ab.y;"
                                             : "return c * ab.x;";
    /* requant (q4.md): round half to even (WGSL round), clamp to the code range; a zero a gives
     * the code of zero weight (SYM: 8; with a minimum: 0, every code is then the weight b) */
    const char *quant = f32 ? "return 0u; /* no requant (qweight_requant refuses) */"
                        : w->kind == WGML_Q4_SYM ? "if (ab.x == 0.0) { return 8u; }\n"
                                                 "  return u32(i32(clamp(round(l / ab.x), QLO, QHI)) + 8);"
                        : w->has_min ? "if (ab.x == 0.0) { return 0u; }\n"
                                       "  return u32(clamp(round((l - ab.y) / ab.x), QLO, QHI));"
                                     : "if (ab.x == 0.0) { return 0u; }\n"
                                       "  return bitcast<u32>(i32(clamp(round(l / ab.x), QLO, QHI))) & 255u;";
    /* what reads a stored ABT value: ab_of for the f32 pairs, qw_kab.wgsl's helpers for the K forms */
    char ab_fns[96];
    if (w->ab_form == WGML_AB_F32) snprintf(ab_fns, sizeof ab_fns, "fn ab_of(v: ABT) -> vec2<f32> { %s }\n", gab);
    else snprintf(ab_fns, sizeof ab_fns, "//!include qw_kab\n");
    int len = snprintf(buf, cap,
                       "const KIND: u32 = %du; const CPW: u32 = %du; const FW: u32 = %du; const G: u32 = %du;\n"
                       "const BPG: u32 = %du; const GPB: u32 = %du; const QLO: f32 = %d.0; const QHI: f32 = %d.0;\n"
                       "const PADC: u32 = %du;\n"
                       "alias ABT = %s;\n"
                       "%s"
                       "//!include qw_cvt\n"
                       "fn code_f(word: u32, i: u32) -> f32 { %s }\n"
                       "fn deq(c: f32, ab: vec2<f32>) -> f32 { %s }\n"
                       "fn quant(l: f32, ab: vec2<f32>) -> u32 {\n  %s\n}\n",
                       (int)w->kind, qw_kind_cpw(w->kind), 32 / qw_kind_cpw(w->kind), w->group,
                       w->group >= 32 ? w->group / 32 : 1, w->group >= 32 ? 1 : 32 / w->group, lo, hi,
                       w->kind == WGML_Q4_SYM ? 8 : 0, ab_t, ab_fns, code, deq, quant);
    if (ab_reader && len >= 0 && (size_t)len < cap) qw_ab_reader(buf + len, cap - (size_t)len, w, "group_ab", "AB");
}

int qw_ab_reader(char *buf, size_t cap, const wgml_qweight *w, const char *fn, const char *binding) {
    const char *head = "fn %s(i: u32) -> vec2<f32> { ";
    int len = snprintf(buf, cap, head, fn);
    if (len < 0 || (size_t)len >= cap) return len;
    buf += len, cap -= (size_t)len;
    switch (w->ab_form) {
    case WGML_AB_K_MIN: /* 8 groups of 32 a super-block, entries of 6 words */
        return len + snprintf(buf, cap, "let e = (i >> 3u) * 6u; return kab_min_pair(%s[e], %s[e + 1u], %s[e + 2u + ((i >> 1u) & 3u)], i); }\n",
                              binding, binding, binding);
    case WGML_AB_K6: /* 16 groups of 16 a super-block, entries of 6 words */
        return len + snprintf(buf, cap, "let e = (i >> 4u) * 6u; return kab6_pair(%s[e], %s[e + 1u + ((i >> 2u) & 3u)], i); }\n",
                              binding, binding);
    default: return len + snprintf(buf, cap, "return ab_of(%s[i]); }\n", binding);
    }
}

void qw_kind_prelude(char *buf, size_t cap, const wgml_qweight *w) { qw_kind_prelude_ex(buf, cap, w, true); }

/* kind_prelude at buf; returns its length. */
static int qw_kind_prelude_len(char *buf, size_t cap, const wgml_qweight *w) {
    qw_kind_prelude(buf, cap, w);
    return (int)strlen(buf);
}

int64_t qw_words_per_row(const wgml_qweight *w) { return w->kp / qw_kind_cpw(w->kind); }

bool qw_weight_valid(wgml_ctx *ctx, const char *op, const char *arg, const wgml_qweight *w) {
    if (!w) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s is NULL", op, arg);
        return false;
    }
    if (check_tensor(ctx, op, arg, w->codes) || check_tensor(ctx, op, arg, w->ab)) return false;
    bool eight = qw_kind_cpw(w->kind) == 4;
    bool kind_ok = w->kind >= WGML_Q4_SYM && w->kind <= WGML_QF32 && w->has_min == kind_has_min(w->kind) &&
                   (w->kind == WGML_QF32 ? w->bits == 32 : eight ? w->bits >= 2 && w->bits <= 8 : w->bits == 4);
    /* the K forms: Q4_K / Q5_K (4-bit or 8-bit codes with a minimum, G = 32), Q6_K (Q8, G = 16) */
    bool form_ok = w->ab_form == WGML_AB_F32 ? w->ab->dtype == WGML_F32
                   : w->ab_form == WGML_AB_K_MIN || w->ab_form == WGML_AB_K6
                       ? w->ab->dtype == WGML_U32 && w->kp % 256 == 0 &&
                             w->has_min == (w->ab_form == WGML_AB_K_MIN) && w->group == (w->has_min ? 32 : 16)
                       : false;
    form_ok = form_ok && w->group > 0 &&
              wgml_tensor_numel(w->ab) == w->n * qw_ab_row_words(w->ab_form, w->kp, w->group, w->has_min);
    if (!kind_ok || !form_ok || w->group <= 0 || (w->group % 32 && !(eight && w->group == 16)) || w->n <= 0 ||
        w->k <= 0 || w->kp % w->group || w->kp % 32 || w->kp < w->k ||
        wgml_tensor_numel(w->codes) != w->n * qw_words_per_row(w)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s is not a valid 4-bit/8-bit weight", op, arg);
        return false;
    }
    return true;
}

/* The activations and the weight must be on one graph. */
static bool same_graph(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t, const wgml_qweight *w) {
    if (t->graph != w->codes->graph) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s %s and the weight belong to different graphs", op, arg, tshape(t));
        return false;
    }
    return true;
}

wgml_tensor *qw_linear_product(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w) {
    return qw_linear_product_ex(g, op, x, w, NULL);
}

wgml_tensor *qw_linear_product_ex(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w,
                                  const qw_lora_term *lora) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "x", x) || !qw_weight_valid(ctx, op, "w", w) || check_dtype(ctx, op, "x", x, WGML_F32) ||
        check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK) || !same_graph(ctx, op, "x", x, w) ||
        check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK))
        return NULL;
    if (x->shape[x->rank - 1] != w->k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: x %s must end in K = %lld for the weight [%lld, %lld]", op, tshape(x),
                       (long long)w->k, (long long)w->n, (long long)w->k);
        return NULL;
    }
    int64_t m = x->numel / w->k, shape[WGML_MAX_RANK];
    if (m <= qw_gemv_max_m(ctx)) {
        wgml_tensor *out = NULL;
        qw_record_gemv(g, op, x, &w, 1, m, &out);
        if (out && lora && qw_lora_add(g, op, lora, 0, m, w->n, out)) {
            wgml_tensor_free(out);
            return NULL;
        }
        return out;
    }
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[x->rank - 1] = w->n;
    qw_mm_dest d = {.lora = lora};
    return qw_record_mm(g, op, x, w, 0, m, x->rank, shape, &d);
}

wgml_tensor *wgml_qlinear(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w) {
    wgml_tensor *out = qw_linear_product(g, "qlinear", x, w);
    return out ? qw_linear_grad_record(g, out, x, w) : NULL;
}

/* What the prefill's forms of the GEMM (qw_linear_concat, qw_linear_parts) both ask of x and w:
 * x f32 [..., K] of g with K = w's and more rows than the GEMV takes, no gradient wanted through
 * x, and their A/B switch $`env` not 0. */
static bool prefill_gemm_takes(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, const char *env) {
    if (!g || !x || !w || x->rank < 1 || x->dtype != WGML_F32 || x->graph != g) return false;
    const char *e = getenv(env);
    if (e && !strcmp(e, "0")) return false;
    int64_t k = x->shape[x->rank - 1];
    return k == w->k && k > 0 && x->numel / k > qw_gemv_max_m(graph_ctx(g)) && !graph_grad_enabled(g, &x, 1);
}

bool qw_concat_applies(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, int n, const int64_t *ns) {
    if (!ns || n < 2 || n > 3 || !prefill_gemm_takes(g, x, w, "WGML_QW_CONCAT")) return false;
    int64_t m = x->numel / w->k, cs = 0;
    if (m * w->n > 0x7FFFFFFFll) return false;
    uint64_t align = gpu_get_caps(graph_ctx(g))->storage_align;
    for (int i = 0; i < n; i++) {
        if (ns[i] <= 0 || ((uint64_t)(m * cs) * sizeof(float)) % align) return false;
        cs += ns[i];
    }
    return cs == w->n;
}

wgml_status qw_linear_concat(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w, int n,
                             const int64_t *ns, wgml_tensor **outs) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: graph is NULL", op);
    wgml_ctx *ctx = graph_ctx(g);
    if (!outs || !ns) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: outs or ns is NULL", op);
    for (int i = 0; i < n && i < 3; i++) outs[i] = NULL;
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) || !qw_weight_valid(ctx, op, "w", w) ||
        !same_graph(ctx, op, "x", x, w))
        return wgml_last_status(ctx);
    if (!qw_concat_applies(g, x, w, n, ns))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: x %s with the weight [%lld, %lld] in %d parts: the concatenated product needs 2 or 3 "
                              "parts adding up to its rows, x ending in K with more than %d rows, no gradient and "
                              "aligned parts",
                              op, tshape(x), (long long)w->n, (long long)w->k, n, qw_gemv_max_m(ctx));
    int64_t m = x->numel / w->k, flat = m * w->n, seg[2] = {ns[0], n > 2 ? ns[0] + ns[1] : w->n};
    qw_mm_dest d = {.seg = seg};
    wgml_tensor *all = qw_record_mm(g, op, x, w, 0, m, 1, &flat, &d);
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

bool qw_parts_applies(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w) {
    return x && x->rank < WGML_MAX_RANK && prefill_gemm_takes(g, x, w, "WGML_QW_PARTS");
}

wgml_tensor *qw_linear_parts(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w, int *splits) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (!splits) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: splits is NULL", op);
        return NULL;
    }
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) || !qw_weight_valid(ctx, op, "w", w) ||
        !same_graph(ctx, op, "x", x, w))
        return NULL;
    if (!qw_parts_applies(g, x, w)) {
        wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                       "%s: x %s with the weight [%lld, %lld]: the product left in slices needs x ending in K, of rank "
                       "below %d, with more than %d rows and no gradient",
                       op, tshape(x), (long long)w->n, (long long)w->k, WGML_MAX_RANK, qw_gemv_max_m(ctx));
        return NULL;
    }
    int64_t shape[WGML_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[x->rank - 1] = w->n;
    qw_mm_dest d = {.parts = splits};
    return qw_record_mm(g, op, x, w, 0, x->numel / w->k, x->rank, shape, &d);
}
wgml_tensor *wgml_qlinear_dx(wgml_graph *g, wgml_tensor *d_out, const wgml_qweight *w) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "qlinear_dx";
    if (check_tensor(ctx, op, "d_out", d_out) || !qw_weight_valid(ctx, op, "w", w) ||
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
    return qw_record_mm(g, op, d_out, w, 1, m, d_out->rank, shape, NULL);
}

wgml_status wgml_qweight_requant(wgml_graph *g, wgml_tensor *latent, const wgml_qweight *w) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "qweight_requant: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "qweight_requant";
    wgml_status s;
    if ((s = check_tensor(ctx, op, "latent", latent))) return s;
    if (!qw_weight_valid(ctx, op, "w", w)) return wgml_last_status(ctx);
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
    int len = qw_kind_prelude_len(prelude, sizeof prelude, w);
    bool v4 = w->k % qw_kind_cpw(w->kind) == 0; /* a word's latents are whole vec4s */
    snprintf(prelude + len, sizeof prelude - (size_t)len,
             "alias LT = %s;\nfn latw(b: u32, k0: u32) -> array<f32, CPW> {\n  var v: array<f32, CPW>;\n%s  return v;\n}\n",
             v4 ? "vec4<f32>" : "f32",
             v4 ? "  if (k0 >= p.K) { return v; } /* a padding word */\n"
                  "  for (var q = 0u; q < CPW / 4u; q++) {\n"
                  "    let a = L[(b + k0) / 4u + q];\n"
                  "    for (var j = 0u; j < 4u; j++) { v[4u * q + j] = a[j]; }\n  }\n"
                : "  for (var i = 0u; i < CPW; i++) { if (k0 + i < p.K) { v[i] = L[b + k0 + i]; } }\n");
    uint64_t total = (uint64_t)(w->n * qw_words_per_row(w));
    struct {
        uint32_t n, k, wpr, ng, total;
    } params = {(uint32_t)w->n, (uint32_t)w->k, (uint32_t)qw_words_per_row(w), (uint32_t)(w->kp / w->group),
                (uint32_t)total};
    wgml_tensor *ro[2] = {latent, w->ab};
    return graph_dispatch(g, op, "qw_requant", prelude, ro, 2, (wgml_tensor *const *)&w->codes, 1, &params,
                          sizeof params, (total + 255) / 256);
}

/* Rows of the table gathered by ids (ids NULL: every row, in order). row0 >= 0: the table is
 * rows row0.. of a larger one (zero rows for ids outside it). */
static wgml_tensor *record_rows(wgml_graph *g, const char *op, const wgml_qweight *table, wgml_tensor *ids,
                                int64_t row0) {
    int64_t shape[WGML_MAX_RANK], t = ids ? ids->numel : table->n;
    int rank = ids ? ids->rank + 1 : 2;
    if (ids) memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->rank);
    else shape[0] = table->n;
    shape[rank - 1] = table->k;
    char prelude[2048];
    int len = snprintf(prelude, sizeof prelude, "const IDENT: bool = %s;\nconst PART: bool = %s;\n",
                       ids ? "false" : "true", row0 >= 0 ? "true" : "false");
    qw_kind_prelude(prelude + len, sizeof prelude - (size_t)len, table);
    struct {
        uint32_t t, v, d, wpr, ng, row0;
    } params = {(uint32_t)t, (uint32_t)table->n, (uint32_t)table->k, (uint32_t)qw_words_per_row(table),
                (uint32_t)(table->kp / table->group), (uint32_t)(row0 > 0 ? row0 : 0)};
    wgml_tensor *out = graph_output(g, op, WGML_F32, rank, shape);
    if (!out) return NULL;
    wgml_tensor *ro[3] = {ids ? ids : GRAPH_UNUSED, table->codes, table->ab};
    if (graph_dispatch(g, op, "qw_embed", prelude, ro, 3, &out, 1, &params, sizeof params, (uint64_t)t)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

static wgml_tensor *embedding_impl(wgml_graph *g, const char *op, const wgml_qweight *table, wgml_tensor *ids,
                                   int64_t row0) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "ids", ids) || !qw_weight_valid(ctx, op, "table", table) ||
        check_dtype(ctx, op, "ids", ids, WGML_I32) || check_rank(ctx, op, "ids", ids, 1, WGML_MAX_RANK - 1) ||
        !same_graph(ctx, op, "ids", ids, table))
        return NULL;
    if (check_graph(ctx, g, op, "ids", ids)) return NULL;
    return record_rows(g, op, table, ids, row0);
}

wgml_tensor *wgml_qembedding(wgml_graph *g, const wgml_qweight *table, wgml_tensor *ids) {
    return g ? embedding_impl(g, "qembedding", table, ids, -1) : NULL;
}

wgml_tensor *wgml_qembedding_rows(wgml_graph *g, const wgml_qweight *table, wgml_tensor *ids, int64_t row0) {
    if (!g) return NULL;
    if (row0 < 0 || row0 + (table ? table->n : 0) > 0x7FFFFFFF) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "qembedding_rows: row0 %lld must be in 0..2^31-1 - the table's rows",
                       (long long)row0);
        return NULL;
    }
    return embedding_impl(g, "qembedding_rows", table, ids, row0);
}

wgml_tensor *wgml_qweight_dequantize(wgml_graph *g, const wgml_qweight *w) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "qweight_dequantize";
    if (!qw_weight_valid(ctx, op, "w", w)) return NULL;
    if (check_graph(ctx, g, op, "the weight", w->codes)) return NULL;
    return record_rows(g, op, w, NULL, -1);
}
