/* Tensor data types of the GGUF (ggml) format: names, block sizes, row sizes. Shared by the
 * GGUF reader (src/model) and the quantised weight import (src/ops/qweight). */
#include "wgml-quant.h"

int wgml_ggml_type_size(uint32_t type, uint64_t *block_elems, uint64_t *block_bytes) {
    uint64_t be = 0, bb = 0;
    switch (type) {
    case WGML_GGML_F32: be = 1; bb = 4; break;
    case WGML_GGML_F16: be = 1; bb = 2; break;
    case WGML_GGML_BF16: be = 1; bb = 2; break;
    case WGML_GGML_Q4_0: be = 32; bb = 2 + 16; break;     /* f16 scale, 32 4-bit values */
    case WGML_GGML_Q4_1: be = 32; bb = 2 + 2 + 16; break; /* f16 scale and min, 32 4-bit values */
    case WGML_GGML_Q5_0: be = 32; bb = 2 + 4 + 16; break; /* f16 scale, 32 high bits, 32 low nibbles */
    case WGML_GGML_Q5_1: be = 32; bb = 2 + 2 + 4 + 16; break; /* f16 scale and min, high bits, nibbles */
    case WGML_GGML_Q8_0: be = 32; bb = 2 + 32; break;     /* f16 scale, 32 int8 values */
    /* super-blocks of 256: f16 d and dmin, 8 packed 6-bit scale/min pairs (12 bytes), then
     * (Q5_K) 32 bytes of high bits, then 128 bytes of low nibbles */
    case WGML_GGML_Q4_K: be = 256; bb = 2 + 2 + 12 + 128; break;
    case WGML_GGML_Q5_K: be = 256; bb = 2 + 2 + 12 + 32 + 128; break;
    /* 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8 scales, f16 d */
    case WGML_GGML_Q6_K: be = 256; bb = 128 + 64 + 16 + 2; break;
    /* 16 bytes of 4-bit scale / min pairs, 64 bytes of 2-bit codes, f16 d and dmin */
    case WGML_GGML_Q2_K: be = 256; bb = 16 + 64 + 2 + 2; break;
    /* 32 bytes of high bits, 64 bytes of 2-bit low parts, 12 bytes of packed 6-bit scales, f16 d */
    case WGML_GGML_Q3_K: be = 256; bb = 32 + 64 + 12 + 2; break;
    /* f16 d, 16 bytes of 4-bit indices into the non-linear table */
    case WGML_GGML_IQ4_NL: be = 32; bb = 2 + 16; break;
    /* f16 d, the 6-bit sub-block scales' high bits (a u16) and low nibbles (4 bytes), 128 bytes of indices */
    case WGML_GGML_IQ4_XS: be = 256; bb = 2 + 2 + 4 + 128; break;
    default: break;
    }
    if (block_elems) *block_elems = be;
    if (block_bytes) *block_bytes = bb;
    return be != 0;
}

const char *wgml_ggml_type_name(uint32_t type) {
    static const char *names[] = {"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0",
                                  "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS",
                                  "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                  "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16"};
    if (type < sizeof names / sizeof names[0]) return names[type];
    return "unknown";
}

size_t wgml_ggml_row_bytes(uint32_t type, int64_t k) {
    uint64_t be, bb;
    if (k <= 0 || !wgml_ggml_type_size(type, &be, &bb) || (uint64_t)k % be) return 0;
    if ((uint64_t)k / be > SIZE_MAX / bb) return 0; /* would wrap */
    return (size_t)((uint64_t)k / be * bb);
}
