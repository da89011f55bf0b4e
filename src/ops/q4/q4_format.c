/* Host side of the 4-bit weights (plain C, no GPU): the import formats (ExecuTorch flat q4gsw,
 * GGUF Q4_0 / Q4_1 / Q8_0 / F32 / F16 / BF16), the exact dequantisation used as a reference,
 * symmetric quantisation of fp32 weights, and the packing into the GPU layout described in
 * include/wgml.h and q4_internal.h. */
#include "ops/q4/q4_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- fp16 / bf16 ---- */

float q4_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
    if (e == 0) {
        /* zero or subnormal: man · 2^-24 is exact in fp32 */
        float f = (float)man * 0x1p-24f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (e == 31) {
        bits = sign | 0x7F800000u | (man << 13);
    } else {
        bits = sign | ((e + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* ---- GGUF ---- */

static bool gguf_supported(int type) {
    return type == WGML_GGML_F32 || type == WGML_GGML_F16 || type == WGML_GGML_BF16 || type == WGML_GGML_Q4_0 ||
           type == WGML_GGML_Q4_1 || type == WGML_GGML_Q8_0;
}

/* Shared checks of a GGUF weight: supported type (named when not), k fits the blocks, size. */
wgml_status q4_check_gguf(wgml_ctx *ctx, const char *op, int type, const void *data, size_t bytes, int64_t n,
                          int64_t k, bool blocks_only) {
    if (!data) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: data is NULL", op);
    if (n <= 0 || k <= 0)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: shape [%lld, %lld] must be positive", op, (long long)n,
                              (long long)k);
    bool block = type == WGML_GGML_Q4_0 || type == WGML_GGML_Q4_1 || type == WGML_GGML_Q8_0;
    if (!gguf_supported(type) || (blocks_only && !block))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED, "%s: GGUF type %s (%d) is not supported%s", op,
                              wgml_ggml_type_name(type), type,
                              blocks_only ? " (4/8-bit blocks: Q4_0, Q4_1, Q8_0)" : "");
    if (block && k % 32)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s rows of K = %lld are not whole 32-element blocks", op,
                              wgml_ggml_type_name(type), (long long)k);
    /* the byte count and n·k must not wrap (found by fuzzing: a huge k made the row bytes
     * wrap to 0, so 0 bytes passed for an enormous tensor) */
    size_t row = wgml_ggml_row_bytes(type, k);
    if (row == 0 || (uint64_t)n > SIZE_MAX / row || (uint64_t)n > (uint64_t)INT64_MAX / (uint64_t)k)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %s [%lld, %lld] is too large to address", op,
                              wgml_ggml_type_name(type), (long long)n, (long long)k);
    size_t want = row * (size_t)n;
    if (bytes != want)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %zu bytes given; %s [%lld, %lld] (ne = [%lld, %lld]) needs %zu",
                              op, bytes, wgml_ggml_type_name(type), (long long)n, (long long)k, (long long)k,
                              (long long)n, want);
    return WGML_OK;
}

wgml_status wgml_gguf_dequantize(int type, const void *data, size_t bytes, int64_t n, int64_t k, float *out) {
    wgml_status s = q4_check_gguf(NULL, "gguf_dequantize", type, data, bytes, n, k, false);
    if (s) return s;
    if (!out) return wgml_set_error(NULL, WGML_ERR_ARG, "gguf_dequantize: out is NULL");
    const uint8_t *p = data;
    int64_t total = n * k;
    switch (type) {
    case WGML_GGML_F32: memcpy(out, data, (size_t)total * 4); return WGML_OK;
    case WGML_GGML_F16:
        for (int64_t i = 0; i < total; i++) out[i] = q4_half_to_float(rd16(p + 2 * i));
        return WGML_OK;
    case WGML_GGML_BF16:
        for (int64_t i = 0; i < total; i++) out[i] = bf16_to_float(rd16(p + 2 * i));
        return WGML_OK;
    default: break;
    }
    int64_t blocks = total / 32;
    for (int64_t b = 0; b < blocks; b++) {
        float *o = out + b * 32;
        if (type == WGML_GGML_Q4_0) {
            const uint8_t *q = p + b * 18;
            float d = q4_half_to_float(rd16(q));
            for (int j = 0; j < 16; j++) {
                o[j] = d * (float)((int)(q[2 + j] & 0xF) - 8);
                o[j + 16] = d * (float)((int)(q[2 + j] >> 4) - 8);
            }
        } else if (type == WGML_GGML_Q4_1) {
            const uint8_t *q = p + b * 20;
            float d = q4_half_to_float(rd16(q)), m = q4_half_to_float(rd16(q + 2));
            for (int j = 0; j < 16; j++) {
                float lo = d * (float)(q[4 + j] & 0xF), hi = d * (float)(q[4 + j] >> 4);
                o[j] = lo + m;
                o[j + 16] = hi + m;
            }
        } else { /* Q8_0 */
            const uint8_t *q = p + b * 34;
            float d = q4_half_to_float(rd16(q));
            for (int j = 0; j < 32; j++) o[j] = (float)(int8_t)q[2 + j] * d;
        }
    }
    return WGML_OK;
}

/* ---- ExecuTorch flat q4gsw ---- */

static int64_t pad4(int64_t n) { return (n + 3) / 4 * 4; }

wgml_status q4_check_q4gsw(wgml_ctx *ctx, const char *op, const void *codes, const void *scales, int64_t n, int64_t k,
                           int group) {
    if (!codes) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: codes is NULL", op);
    if (!scales) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: scales is NULL", op);
    if (n <= 0 || k <= 0)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: shape [%lld, %lld] must be positive", op, (long long)n,
                              (long long)k);
    if (group <= 0 || group % 32)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: group size G = %d must be a positive multiple of 32 (K = %lld)",
                              op, group, (long long)k);
    if (n > (1 << 24) || k > (1 << 26))
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: shape [%lld, %lld] is too large", op, (long long)n,
                              (long long)k);
    return WGML_OK;
}

wgml_status wgml_q4gsw_dequantize(const uint8_t *codes, const float *scales, int64_t n, int64_t k, int group,
                                  float *out) {
    wgml_status s = q4_check_q4gsw(NULL, "q4gsw_dequantize", codes, scales, n, k, group);
    if (s) return s;
    if (!out) return wgml_set_error(NULL, WGML_ERR_ARG, "q4gsw_dequantize: out is NULL");
    int64_t kb = (k + 1) / 2, pn = pad4(n);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            int code = (codes[r * kb + c / 2] >> (4 * (c & 1))) & 0xF;
            out[r * k + c] = (float)(code - 8) * scales[(c / group) * pn + r];
        }
    return WGML_OK;
}

wgml_status wgml_q4gsw_quantize(const float *w, int64_t n, int64_t k, int group, uint8_t *codes, float *scales) {
    wgml_status s = q4_check_q4gsw(NULL, "q4gsw_quantize", codes, scales, n, k, group);
    if (s) return s;
    if (!w) return wgml_set_error(NULL, WGML_ERR_ARG, "q4gsw_quantize: w is NULL");
    int64_t kb = (k + 1) / 2, pn = pad4(n), ng = (k + group - 1) / group;
    memset(codes, 0, (size_t)(n * kb));
    memset(scales, 0, sizeof(float) * (size_t)(ng * pn));
    for (int64_t r = 0; r < n; r++)
        for (int64_t g = 0; g < ng; g++) {
            int64_t k0 = g * group, k1 = k0 + group < k ? k0 + group : k;
            float amax = 0;
            for (int64_t c = k0; c < k1; c++) amax = fmaxf(amax, fabsf(w[r * k + c]));
            float scale = amax / 7.0f;
            scales[g * pn + r] = scale;
            for (int64_t c = k0; c < k1; c++) {
                int code = 8;
                if (scale != 0) {
                    float q = nearbyintf(w[r * k + c] / scale);
                    code = (int)fminf(fmaxf(q, -8.0f), 7.0f) + 8;
                }
                codes[r * kb + c / 2] |= (uint8_t)(code << (4 * (c & 1)));
            }
        }
    return WGML_OK;
}

/* ---- packing into the GPU layout ---- */

/* Fills a host image of the GPU layout from flat q4gsw (symmetric). */
void q4_pack_q4gsw(const uint8_t *codes, const float *scales, int64_t n, int64_t k, int group, uint32_t *words,
                   float *ab) {
    int64_t kp = (k + group - 1) / group * group, wpr = kp / 8, ng = kp / group, kb = (k + 1) / 2, pn = pad4(n);
    for (int64_t r = 0; r < n; r++) {
        for (int64_t j = 0; j < wpr; j++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) {
                int64_t c = j * 8 + i;
                uint32_t code = c < k ? (uint32_t)(codes[r * kb + c / 2] >> (4 * (c & 1))) & 0xFu : 8u;
                w |= code << (4 * i);
            }
            words[r * wpr + j] = w;
        }
        for (int64_t g = 0; g < ng; g++) ab[r * ng + g] = scales[g * pn + r];
    }
}

/* Fills a host image of the GPU layout from GGUF blocks (G = 32). */
void q4_pack_gguf(int type, const uint8_t *p, int64_t n, int64_t k, uint32_t *words, float *ab) {
    int64_t nb = k / 32;
    for (int64_t r = 0; r < n; r++)
        for (int64_t b = 0; b < nb; b++) {
            int64_t blk = r * nb + b;
            if (type == WGML_GGML_Q8_0) {
                const uint8_t *q = p + blk * 34;
                ab[blk] = q4_half_to_float(rd16(q));
                for (int j = 0; j < 8; j++)
                    words[blk * 8 + j] = (uint32_t)q[2 + 4 * j] | (uint32_t)q[3 + 4 * j] << 8 |
                                         (uint32_t)q[4 + 4 * j] << 16 | (uint32_t)q[5 + 4 * j] << 24;
                continue;
            }
            const uint8_t *qs;
            if (type == WGML_GGML_Q4_0) {
                qs = p + blk * 18 + 2;
                ab[blk] = q4_half_to_float(rd16(p + blk * 18));
            } else {
                qs = p + blk * 20 + 4;
                ab[2 * blk] = q4_half_to_float(rd16(p + blk * 20));
                ab[2 * blk + 1] = q4_half_to_float(rd16(p + blk * 20 + 2));
            }
            /* element e of the block: e < 16 in the low nibble of qs[e], else the high nibble of
             * qs[e - 16] */
            for (int j = 0; j < 4; j++) {
                uint32_t w = 0;
                for (int i = 0; i < 8; i++) {
                    int e = j * 8 + i;
                    uint32_t code = e < 16 ? qs[e] & 0xFu : (uint32_t)qs[e - 16] >> 4;
                    w |= code << (4 * i);
                }
                words[blk * 4 + j] = w;
            }
        }
}
