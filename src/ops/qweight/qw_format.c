/* Host side of the 4-bit weights (plain C, no GPU): the import formats (ExecuTorch flat q4gsw,
 * GGUF Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_NL / IQ4_XS /
 * F32 / F16 / BF16), the exact
 * dequantisation used as a reference,
 * symmetric quantisation of fp32 weights, and the packing into the GPU layout described in
 * include/wgml.h and qw_internal.h. */
#include "ops/qweight/qw_internal.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* ---- fp16 / bf16 ---- */

float qw_half_to_float(uint16_t h) {
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

/* Types the host decodes (every type wgml_ggml_type_size knows). */
static bool gguf_supported(int type) { return type >= 0 && wgml_ggml_type_size((uint32_t)type, NULL, NULL); }

int wgml_qweight_gguf_on_gpu(int type) { return qw_gguf_gpu(type, NULL, NULL, NULL) ? 1 : 0; }

bool qw_gguf_has_min(int type) {
    return type == WGML_GGML_Q4_1 || type == WGML_GGML_Q5_1 || type == WGML_GGML_Q2_K || type == WGML_GGML_Q4_K ||
           type == WGML_GGML_Q5_K;
}

/* How the GPU holds each block type: 4-bit codes (Q4_0 symmetric; Q4_1 and Q4_K with a
 * minimum), or codes widened to 8 bits (signed for the symmetric Q5_0, Q8_0, Q3_K and Q6_K and
 * for IQ4_NL / IQ4_XS, whose codes are their table's values; unsigned with a minimum for Q5_1,
 * Q5_K and Q2_K), G = 32 (Q2_K, Q3_K and Q6_K: 16, their scale groups); the plain F32, F16 and
 * BF16 tensors as f32 values (QF32). `bits` is the code range requant keeps (IQ4's table spans
 * the int8 range, so a requantised IQ4 weight holds Q8_0's codes, not the table's). */
bool qw_gguf_gpu(int type, wgml_qkind *kind, int *group, int *bits) {
    static const struct { int type; wgml_qkind kind; int group, bits; } map[] = {
        {WGML_GGML_Q4_0, WGML_Q4_SYM, 32, 4}, {WGML_GGML_Q4_1, WGML_Q4_MIN, 32, 4}, {WGML_GGML_Q5_0, WGML_Q8, 32, 5},
        {WGML_GGML_Q5_1, WGML_Q8_MIN, 32, 5}, {WGML_GGML_Q8_0, WGML_Q8, 32, 8},     {WGML_GGML_Q4_K, WGML_Q4_MIN, 32, 4},
        {WGML_GGML_Q5_K, WGML_Q8_MIN, 32, 5}, {WGML_GGML_Q6_K, WGML_Q8, 16, 6},     {WGML_GGML_Q2_K, WGML_Q8_MIN, 16, 2},
        {WGML_GGML_Q3_K, WGML_Q8, 16, 3},     {WGML_GGML_IQ4_NL, WGML_Q8, 32, 8},   {WGML_GGML_IQ4_XS, WGML_Q8, 32, 8},
        {WGML_GGML_F32, WGML_QF32, 32, 32},   {WGML_GGML_F16, WGML_QF32, 32, 32},   {WGML_GGML_BF16, WGML_QF32, 32, 32},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].type == type) {
            if (kind) *kind = map[i].kind;
            if (group) *group = map[i].group;
            if (bits) *bits = map[i].bits;
            return true;
        }
    return false;
}

/* Shared checks of a GGUF weight: supported type (named when not; with gpu_only, only the block
 * types the GPU runs), k a whole number of blocks, size. */
wgml_status qw_check_gguf(wgml_ctx *ctx, const char *op, int type, const void *data, size_t bytes, int64_t n,
                          int64_t k, bool gpu_only) {
    if (!data) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: data is NULL", op);
    if (n <= 0 || k <= 0)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: shape [%lld, %lld] must be positive", op, (long long)n,
                              (long long)k);
    const char *name = wgml_ggml_type_name(type < 0 ? UINT32_MAX : (uint32_t)type);
    if (!gguf_supported(type))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED, "%s: GGUF type %s (%d) is not supported", op, name, type);
    if (gpu_only && !qw_gguf_gpu(type, NULL, NULL, NULL))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: GGUF type %s (%d) is not a type the GPU runs (F32, F16, BF16, Q4_0, Q4_1, "
                              "Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS; wgml_gguf_dequantize "
                              "reads it on the host)",
                              op, name, type);
    uint64_t be = 1;
    wgml_ggml_type_size((uint32_t)type, &be, NULL);
    if ((uint64_t)k % be)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s [%lld, %lld]: rows of K = %lld are not whole %llu-element blocks",
                              op, name, (long long)n, (long long)k, (long long)k, (unsigned long long)be);
    /* the byte count and n·k must not wrap (found by fuzzing: a huge k made the row bytes
     * wrap to 0, so 0 bytes passed for an enormous tensor) */
    size_t row = wgml_ggml_row_bytes((uint32_t)type, k);
    if (row == 0 || (uint64_t)n > SIZE_MAX / row || (uint64_t)n > (uint64_t)INT64_MAX / (uint64_t)k)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %s [%lld, %lld] is too large to address", op, name,
                              (long long)n, (long long)k);
    size_t want = row * (size_t)n;
    if (bytes != want)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %zu bytes given; %s [%lld, %lld] (ne = [%lld, %lld]) needs %zu",
                              op, bytes, name, (long long)n, (long long)k, (long long)k, (long long)n, want);
    return WGML_OK;
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Each block type is, per group of G elements (G = 16 or 32), an affine map of an integer
 * code: value e = a[e / G]·code[e], plus b[e / G] for the types with a minimum. unpack_block
 * turns one block into its codes and pairs; the host dequantisation (below) and the packing
 * into the GPU layout (qw_pack_gguf) both read that one form, so the GPU's (a, b) are the
 * host's bit for bit. The pairs are computed in fp32 as the file format does (the K types:
 * d·scale first, then dmin·min, negated into b; a subtraction v − dm equals v + (−dm)
 * exactly), and a value is the product then the sum, two roundings (the build is ISO C, so
 * no multiply-add contraction), which is what makes the result equal the gguf package's bit
 * for bit. Symmetric types give centred signed codes (Q4_0: c − 8, Q5_0: c − 16, Q6_K:
 * q − 32). */
typedef struct qw_unpacked {
    int code[256];
    float a[16], b[16];
} qw_unpacked;

/* Q4_0 / Q4_1: f16 d (, f16 m), 16 bytes: low nibbles are elements 0..15, high 16..31. */
static void unpack_q4(const uint8_t *q, qw_unpacked *u, bool has_min) {
    u->a[0] = qw_half_to_float(rd16(q));
    u->b[0] = has_min ? qw_half_to_float(rd16(q + 2)) : 0.0f;
    const uint8_t *qs = q + (has_min ? 4 : 2);
    int centre = has_min ? 0 : 8;
    for (int j = 0; j < 16; j++) {
        u->code[j] = (qs[j] & 0xF) - centre;
        u->code[j + 16] = (qs[j] >> 4) - centre;
    }
}

/* Q5_0 / Q5_1: value j's fifth bit is bit j of the 32-bit little-endian word after the f16
 * fields; its low four bits are the nibbles as in Q4_0 / Q4_1. Q5_0 codes are centred on 16. */
static void unpack_q5(const uint8_t *q, qw_unpacked *u, bool has_min) {
    u->a[0] = qw_half_to_float(rd16(q));
    u->b[0] = has_min ? qw_half_to_float(rd16(q + 2)) : 0.0f;
    const uint8_t *hb = q + (has_min ? 4 : 2), *qs = hb + 4;
    uint32_t h = rd32(hb);
    int centre = has_min ? 0 : 16;
    for (int j = 0; j < 16; j++) {
        u->code[j] = (int)((qs[j] & 0xF) | ((h >> j) & 1u) << 4) - centre;
        u->code[j + 16] = (int)((qs[j] >> 4) | ((h >> (j + 16)) & 1u) << 4) - centre;
    }
}

static void unpack_q8_0(const uint8_t *q, qw_unpacked *u) { /* f16 d, 32 int8 */
    u->a[0] = qw_half_to_float(rd16(q));
    u->b[0] = 0.0f;
    for (int j = 0; j < 32; j++) u->code[j] = (int8_t)q[2 + j];
}

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes s:
 * sub-blocks 0..3 hold theirs in the low 6 bits of s[j] (scale) and s[j + 4] (min);
 * sub-blocks 4..7 take their low 4 bits from the nibbles of s[j + 4] (scale low, min high)
 * and their top 2 bits from the spare top bits of s[j - 4] (scale) and s[j] (min). */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q4_K (five false) and Q5_K: f16 d, f16 dmin, 12 scale bytes, [Q5_K: 32 bytes qh], 128
 * bytes qs. The 256 values are 4 chunks of 64; chunk c reads qs[32c .. 32c+31], its low
 * nibbles are sub-block 2c and its high nibbles sub-block 2c+1; in Q5_K value l of those
 * sub-blocks takes bit 2c (resp. 2c+1) of qh[l] as its fifth bit. Sub-block j (32 values):
 * a = d·scale, b = −(dmin·min). */
static void unpack_q45_k(const uint8_t *q, qw_unpacked *u, bool five) {
    float d = qw_half_to_float(rd16(q)), dmin = qw_half_to_float(rd16(q + 2));
    const uint8_t *sc = q + 4, *qh = five ? q + 16 : NULL, *qs = q + (five ? 48 : 16);
    for (int j = 0; j < 8; j++) {
        int s, m, c = j / 2, half = j % 2;
        k_scale_min(sc, j, &s, &m);
        u->a[j] = d * (float)s;
        u->b[j] = -(dmin * (float)m);
        for (int l = 0; l < 32; l++) {
            int code = half ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
            if (qh) code |= ((qh[l] >> j) & 1) << 4;
            u->code[32 * j + l] = code;
        }
    }
}

/* Q6_K: 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d. Two halves of 128 values; half h
 * uses ql[64h ..], qh[32h ..] and scales[8h ..]. In a half, value l + 32r (r = 0..3, l =
 * 0..31) takes the low (r < 2) or high (r >= 2) nibble of ql[l + 32(r % 2)] as its
 * low four bits and bits 2r, 2r+1 of qh[l] as its top two; codes are centred on 32. Its
 * scale is scales[8h + 2r + l / 16], the scale of its group of 16 (element / 16): a = d·scale. */
static void unpack_q6_k(const uint8_t *q, qw_unpacked *u) {
    float d = qw_half_to_float(rd16(q + 208));
    const int8_t *sc = (const int8_t *)(q + 192);
    for (int g = 0; g < 16; g++) {
        u->a[g] = d * (float)sc[g];
        u->b[g] = 0.0f;
    }
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = q + 64 * h, *qh = q + 128 + 32 * h;
        for (int r = 0; r < 4; r++)
            for (int l = 0; l < 32; l++) {
                uint8_t b = ql[l + 32 * (r % 2)];
                u->code[128 * h + 32 * r + l] = (int)((r < 2 ? b & 0xF : b >> 4) | ((qh[l] >> (2 * r)) & 3) << 4) - 32;
            }
    }
}

/* The 2-bit field of value e (0..255) in Q2_K's and Q3_K's 64 bytes qs: e = 128h + 32s + l
 * (h = 0..1, s = 0..3, l = 0..31) is bits 2s, 2s + 1 of qs[32h + l]. */
static int k_two_bits(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3; }

/* Q2_K: 16 bytes of group scales (the scale in the low nibble, the min in the high), 64 bytes
 * qs, f16 d, f16 dmin. Value e is its 2-bit field (k_two_bits); its group is e / 16: a =
 * d·scale, b = −(dmin·min). */
static void unpack_q2_k(const uint8_t *q, qw_unpacked *u) {
    float d = qw_half_to_float(rd16(q + 80)), dmin = qw_half_to_float(rd16(q + 82));
    for (int g = 0; g < 16; g++) {
        u->a[g] = d * (float)(q[g] & 0xF);
        u->b[g] = -(dmin * (float)(q[g] >> 4));
    }
    for (int e = 0; e < 256; e++) u->code[e] = k_two_bits(q + 16, e);
}

/* Q3_K's 6-bit scale of group i (0..15) from its 12 bytes s, centred: the low four bits are
 * nibble i / 8 of s[i % 8], the top two bits pair i / 4 of s[8 + i % 4]. */
static int q3_k_scale(const uint8_t *s, int i) {
    return (((s[i % 8] >> (4 * (i / 8))) & 0xF) | ((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4) - 32;
}

/* Q3_K: 32 bytes hmask, 64 bytes qs, 12 bytes of scales, f16 d. Value e takes its 2-bit field
 * of qs (k_two_bits) as its low part and bit e / 32 of hmask[e % 32] as its third, which is
 * set for the codes 0..3 and clear for −4..−1 (code = low − 4 when clear); group e / 16: a =
 * d·scale. */
static void unpack_q3_k(const uint8_t *q, qw_unpacked *u) {
    float d = qw_half_to_float(rd16(q + 108));
    for (int g = 0; g < 16; g++) {
        u->a[g] = d * (float)q3_k_scale(q + 96, g);
        u->b[g] = 0.0f;
    }
    for (int e = 0; e < 256; e++) {
        int low = k_two_bits(q + 32, e);
        u->code[e] = ((q[e % 32] >> (e / 32)) & 1) ? low : low - 4;
    }
}

/* IQ4_NL and IQ4_XS index this table of the format (its codes on the GPU, signed 8-bit). */
static const int8_t IQ4_TABLE[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* 16 bytes of indices: the low nibbles are values 0..15, the high nibbles 16..31. */
static void iq4_codes(const uint8_t *qs, int *code) {
    for (int j = 0; j < 16; j++) {
        code[j] = IQ4_TABLE[qs[j] & 0xF];
        code[j + 16] = IQ4_TABLE[qs[j] >> 4];
    }
}

/* IQ4_NL: f16 d, 16 bytes of indices; a = d. */
static void unpack_iq4_nl(const uint8_t *q, qw_unpacked *u) {
    u->a[0] = qw_half_to_float(rd16(q));
    u->b[0] = 0.0f;
    iq4_codes(q + 2, u->code);
}

/* IQ4_XS: f16 d, a u16 of the 8 sub-blocks' scale high bits (bits 2i, 2i + 1), 4 bytes of their
 * low nibbles (sub-block i: nibble i % 2 of byte i / 2), then 16 bytes of indices a sub-block
 * of 32; a = d·(scale − 32). */
static void unpack_iq4_xs(const uint8_t *q, qw_unpacked *u) {
    float d = qw_half_to_float(rd16(q));
    uint16_t hi = rd16(q + 2);
    for (int i = 0; i < 8; i++) {
        int ls = ((q[4 + i / 2] >> (4 * (i % 2))) & 0xF) | ((hi >> (2 * i)) & 3) << 4;
        u->a[i] = d * (float)(ls - 32);
        u->b[i] = 0.0f;
        iq4_codes(q + 8 + 16 * i, u->code + 32 * i);
    }
}

static void unpack_block(int type, const uint8_t *q, qw_unpacked *u) {
    switch (type) {
    case WGML_GGML_Q4_0: unpack_q4(q, u, false); break;
    case WGML_GGML_Q4_1: unpack_q4(q, u, true); break;
    case WGML_GGML_Q5_0: unpack_q5(q, u, false); break;
    case WGML_GGML_Q5_1: unpack_q5(q, u, true); break;
    case WGML_GGML_Q8_0: unpack_q8_0(q, u); break;
    case WGML_GGML_Q4_K: unpack_q45_k(q, u, false); break;
    case WGML_GGML_Q5_K: unpack_q45_k(q, u, true); break;
    case WGML_GGML_Q6_K: unpack_q6_k(q, u); break;
    case WGML_GGML_Q2_K: unpack_q2_k(q, u); break;
    case WGML_GGML_Q3_K: unpack_q3_k(q, u); break;
    case WGML_GGML_IQ4_NL: unpack_iq4_nl(q, u); break;
    case WGML_GGML_IQ4_XS: unpack_iq4_xs(q, u); break;
    default: break; /* not reached: qw_check_gguf admits only the types above */
    }
}

wgml_status wgml_gguf_dequantize(int type, const void *data, size_t bytes, int64_t n, int64_t k, float *out) {
    wgml_status s = qw_check_gguf(NULL, "gguf_dequantize", type, data, bytes, n, k, false);
    if (s) return s;
    if (!out) return wgml_set_error(NULL, WGML_ERR_ARG, "gguf_dequantize: out is NULL");
    const uint8_t *p = data;
    int64_t total = n * k;
    switch (type) {
    case WGML_GGML_F32: memcpy(out, data, (size_t)total * 4); return WGML_OK;
    case WGML_GGML_F16:
        for (int64_t i = 0; i < total; i++) out[i] = qw_half_to_float(rd16(p + 2 * i));
        return WGML_OK;
    case WGML_GGML_BF16:
        for (int64_t i = 0; i < total; i++) out[i] = bf16_to_float(rd16(p + 2 * i));
        return WGML_OK;
    default: break;
    }
    uint64_t be, bb;
    wgml_ggml_type_size((uint32_t)type, &be, &bb);
    int64_t blocks = total / (int64_t)be;
    int group = 32;
    qw_gguf_gpu(type, NULL, &group, NULL); /* the scale groups: 16 for Q2_K, Q3_K and Q6_K */
    bool has_b = qw_gguf_has_min(type);
    qw_unpacked u;
    for (int64_t b = 0; b < blocks; b++) {
        unpack_block(type, p + (size_t)b * bb, &u);
        float *o = out + b * (int64_t)be;
        for (int e = 0; e < (int)be; e++) {
            float v = u.a[e / group] * (float)u.code[e];
            o[e] = has_b ? v + u.b[e / group] : v;
        }
    }
    return WGML_OK;
}

/* ---- ExecuTorch flat q4gsw ---- */

static int64_t pad4(int64_t n) { return (n + 3) / 4 * 4; }

wgml_status qw_check_q4gsw(wgml_ctx *ctx, const char *op, const void *codes, const void *scales, int64_t n, int64_t k,
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
    wgml_status s = qw_check_q4gsw(NULL, "q4gsw_dequantize", codes, scales, n, k, group);
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
    wgml_status s = qw_check_q4gsw(NULL, "q4gsw_quantize", codes, scales, n, k, group);
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
void qw_pack_q4gsw(const uint8_t *codes, const float *scales, int64_t n, int64_t k, int group, uint32_t *words,
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

/* Fills a host image of the GPU layout from GGUF blocks (kind, G and code bits from
 * qw_gguf_gpu; k is whole blocks, so Kp = K, except for the plain types, QF32: Kp = K rounded
 * up to 32): 4-bit fields hold the code (+ 8 for the symmetric kind), 8-bit fields the code's
 * low byte (two's complement when signed). */
void qw_pack_gguf(int type, const uint8_t *p, int64_t n, int64_t k, uint32_t *words, float *ab) {
    wgml_qkind kind;
    int group, bits;
    qw_gguf_gpu(type, &kind, &group, &bits);
    if (kind == WGML_QF32) { /* the values widened to f32 (exact), rows padded to Kp with 0.0 */
        int64_t kp = (k + 31) / 32 * 32, ng = kp / 32;
        size_t es = type == WGML_GGML_F32 ? 4 : 2;
        memset(words, 0, sizeof(uint32_t) * (size_t)(n * kp));
        for (int64_t r = 0; r < n; r++) {
            for (int64_t c = 0; c < k; c++) {
                const uint8_t *e = p + (size_t)(r * k + c) * es;
                float v = type == WGML_GGML_F32 ? 0.0f : type == WGML_GGML_F16 ? qw_half_to_float(rd16(e)) : bf16_to_float(rd16(e));
                if (type == WGML_GGML_F32) memcpy(&v, e, 4);
                memcpy(&words[r * kp + c], &v, 4);
            }
            for (int64_t g = 0; g < ng; g++) ab[r * ng + g] = 1.0f;
        }
        return;
    }
    uint64_t be, bb;
    wgml_ggml_type_size((uint32_t)type, &be, &bb);
    bool four = kind == WGML_Q4_SYM || kind == WGML_Q4_MIN, pair = kind == WGML_Q4_MIN || kind == WGML_Q8_MIN;
    int cpw = four ? 8 : 4, centre = kind == WGML_Q4_SYM ? 8 : 0;
    int64_t blocks = n * k / (int64_t)be, gpb = (int64_t)be / group;
    qw_unpacked u;
    /* a block's be elements (32 or 256) fill be / cpw whole words: every word is written once */
    for (int64_t b = 0; b < blocks; b++) {
        unpack_block(type, p + (size_t)b * bb, &u);
        int64_t e0 = b * (int64_t)be, g0 = b * gpb;
        uint32_t *wb = words + e0 / cpw;
        for (int e = 0; e < (int)be; e += cpw) {
            uint32_t w = 0;
            if (four)
                for (int i = 0; i < 8; i++) w |= ((uint32_t)(u.code[e + i] + centre) & 0xFu) << (4 * i);
            else
                for (int i = 0; i < 4; i++) w |= ((uint32_t)u.code[e + i] & 0xFFu) << (8 * i);
            wb[e / cpw] = w;
        }
        for (int64_t g = 0; ab && g < gpb; g++) {
            if (pair) {
                ab[2 * (g0 + g)] = u.a[g];
                ab[2 * (g0 + g) + 1] = u.b[g];
            } else {
                ab[g0 + g] = u.a[g];
            }
        }
    }
}

wgml_abform qw_gguf_ab_form(int type) {
    const char *e = getenv("WGML_QW_KSCALES");
    if (e && !strcmp(e, "0")) return WGML_AB_F32;
    return type == WGML_GGML_Q4_K || type == WGML_GGML_Q5_K   ? WGML_AB_K_MIN
           : type == WGML_GGML_Q6_K || type == WGML_GGML_Q3_K ? WGML_AB_K6
                                                              : WGML_AB_F32;
}

/* 6 words a super-block in both K forms: 24 bytes a row of 256, so that a row split at a multiple
 * of 32 rows starts at a 256-byte-aligned offset (qw_weight_rows), as the f32 pairs' do at 4. */
int qw_ab_form_words(wgml_abform form) { return form == WGML_AB_F32 ? 0 : 6; }

int64_t qw_ab_row_words(wgml_abform form, int64_t kp, int group, bool has_min) {
    return form == WGML_AB_F32 ? kp / group * (has_min ? 2 : 1) : kp / 256 * qw_ab_form_words(form);
}

/* The K types' super-block scales as include/wgml-quant.h lays them out: Q4_K / Q5_K the f32
 * values of d and dmin (exact) and each group's 6-bit scale and min unpacked into a half word;
 * Q6_K the f32 value of d and its 16 int8 scales; Q3_K the same with its 6-bit scales
 * unpacked and centred (−32..31, as int8). */
void qw_pack_kab(int type, const uint8_t *p, int64_t n, int64_t k, uint32_t *kab) {
    uint64_t be, bb;
    wgml_ggml_type_size((uint32_t)type, &be, &bb);
    int64_t blocks = n * k / (int64_t)be;
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *q = p + (size_t)b * bb;
        if (type == WGML_GGML_Q6_K || type == WGML_GGML_Q3_K) { /* d, then the 16 int8 scales */
            bool six = type == WGML_GGML_Q6_K;
            float d = qw_half_to_float(rd16(q + (six ? 208 : 108)));
            memcpy(&kab[6 * b], &d, 4);
            for (int i = 0; i < 4; i++) kab[6 * b + 1 + i] = 0;
            for (int j = 0; j < 16; j++) {
                int sc = six ? (int8_t)q[192 + j] : q3_k_scale(q + 96, j);
                kab[6 * b + 1 + j / 4] |= (uint32_t)(uint8_t)sc << (8 * (j % 4));
            }
            kab[6 * b + 5] = 0;
        } else {
            uint32_t *e = kab + 6 * b;
            float d = qw_half_to_float(rd16(q)), dmin = qw_half_to_float(rd16(q + 2));
            memcpy(&e[0], &d, 4);
            memcpy(&e[1], &dmin, 4);
            for (int j = 0; j < 8; j++) {
                int sc, mn;
                k_scale_min(q + 4, j, &sc, &mn);
                if (j % 2 == 0) e[2 + j / 2] = 0;
                e[2 + j / 2] |= (uint32_t)(sc | mn << 8) << (16 * (j % 2));
            }
        }
    }
}
