/* Fuzz target: the GGUF block import (wgml_gguf_dequantize), host side. The input's first
 * 12 bytes choose the type (one byte, taken modulo 40: every known type, the 32-element
 * blocks Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL and the 256-element super-blocks Q2_K/Q3_K/Q4_K/Q5_K/
 * Q6_K/IQ4_XS among them, and unknown types too), and n
 * and k (signed 40-bit little-endian values, so negative, zero and huge sizes appear); the
 * rest is the data, with a byte count that may or may not match n rows of k elements. The
 * output buffer holds at most the elements the data can describe (at most 4 per byte in every
 * known type; the densest, Q2_K, has 256 in 84 bytes), so a
 * size check that lets a wrong count through writes past it and the sanitizer stops. Accepted
 * inputs of a type the GPU runs are also packed into the GPU layout (qw_pack_gguf) in buffers
 * of exactly the layout's size. */
#include "wgml.h"
#include "ops/qweight/qw_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int64_t s40(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) v |= (uint64_t)p[i] << (8 * i);
    if (v & (1ull << 39)) v |= ~((1ull << 40) - 1); /* sign-extend */
    return (int64_t)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 12) return 0;
    int type = data[0] % 40;
    /* byte 1 picks a scale for the sizes: small sizes are the interesting ones for the
     * arithmetic, shifted ones probe overflow of n·k and of the byte count */
    int shift = data[1] & 63;
    int64_t n = s40(data + 2), k = s40(data + 7);
    if (data[1] & 64) {
        n = (int64_t)((uint64_t)n << (shift & 31));
        k = (int64_t)((uint64_t)k << (shift >> 1));
    }
    const uint8_t *blk = data + 12;
    size_t bytes = size - 12;
    if (data[1] & 128) bytes = bytes ? bytes - 1 : 0; /* an off-by-one byte count */
    size_t cap = bytes * 4 + 1;
    float *out = malloc(cap * sizeof(float));
    if (!out) return 0;
    /* copy the data so that reading past `bytes` is caught too */
    uint8_t *copy = malloc(bytes ? bytes : 1);
    if (!copy) { free(out); return 0; }
    if (bytes) memcpy(copy, blk, bytes);
    wgml_status s = wgml_gguf_dequantize(type, copy, bytes, n, k, out);
    if (s == WGML_OK) {
        /* accepted: the data must be exactly n rows of k elements */
        size_t rb = wgml_ggml_row_bytes((uint32_t)type, k);
        if (n <= 0 || k <= 0 || rb == 0 || bytes / rb != (size_t)n || bytes % rb) abort();
        if ((uint64_t)n * (uint64_t)k > cap) abort();
        /* a type the GPU runs: its packing into the GPU layout (wgml_qweight_upload_gguf's host
         * half) writes exactly the layout's words and (a, b) pairs, read from the same bytes */
        wgml_qkind kind;
        int group;
        if (qw_gguf_gpu(type, &kind, &group, NULL)) {
            int64_t kp = (k + group - 1) / group * group;
            int cpw = kind == WGML_QF32 ? 1 : kind == WGML_Q8 || kind == WGML_Q8_MIN ? 4 : 8;
            int pair = kind == WGML_Q4_MIN || kind == WGML_Q8_MIN;
            uint32_t *words = malloc(sizeof(uint32_t) * (size_t)(n * kp / cpw));
            float *ab = malloc(sizeof(float) * (size_t)(n * kp / group * (pair ? 2 : 1)));
            if (words && ab) qw_pack_gguf(type, copy, n, k, words, ab);
            free(words);
            free(ab);
        }
    } else if (!wgml_last_error(NULL)[0]) {
        abort(); /* a refusal must say why */
    }
    free(copy);
    free(out);
    return 0;
}
