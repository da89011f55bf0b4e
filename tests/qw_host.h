/* Host-side helpers shared by the qweight tests (test_qw.c, test_qw_mm.c): random weights of every
 * kind kept with their host dequantisation, and fp64 references (OpenBLAS dgemm). */
#ifndef WGML_TEST_QW_HOST_H
#define WGML_TEST_QW_HOST_H
#include "harness.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

/* q4.md: tolerance grows with K; K = 8192 allows abs 1e-3 / rel 1e-2 */
static inline double tol_abs(int64_t k) { return fmax(1e-4, 1e-3 * sqrt((double)k / 8192.0)); }
#define RTOL 1e-2

/* ------------------------------------------------------------------ host weights */

/* A weight kept on both sides: the GPU struct and the host dequantisation W[n, k]. */
typedef struct hw {
    wgml_qweight *w;
    float *deq;  /* [n, k] */
    float *bias; /* [n] or NULL */
    /* flat q4gsw image for the symmetric kind */
    uint8_t *codes;
    float *scales;
    /* GGUF blocks for the other kinds */
    uint8_t *blocks;
    size_t nblocks_bytes;
} hw;

static inline uint16_t rand_half(int emin, int emax) {
    int e = emin + (int)th_uniform(0, emax - emin + 1);
    if (e > emax) e = emax;
    uint16_t man = (uint16_t)th_uniform(0, 1024) & 0x3FF;
    uint16_t sign = th_uniform(0, 1) < 0.5 ? 0x8000 : 0;
    return (uint16_t)(sign | (e << 10) | man);
}

static inline int64_t pad4(int64_t n) { return (n + 3) / 4 * 4; }

/* The GGUF block types of make_weight's kinds 3..7 and 9..12: block elements and bytes, the offsets of
 * the fp16 fields and the exponent range of their random values (scales that keep the weights
 * near 1; tests/py/test_gguf_kquant.py covers extreme and subnormal scales against gguf). */
static const struct {
    int type, be, bb, nh, off[2], emin, emax;
} GG_RANDOM[] = {
    {WGML_GGML_Q5_0, 32, 22, 1, {0, 0}, 9, 11},     {WGML_GGML_Q5_1, 32, 24, 2, {0, 2}, 9, 11},
    {WGML_GGML_Q4_K, 256, 144, 2, {0, 2}, 5, 7},    {WGML_GGML_Q5_K, 256, 176, 2, {0, 2}, 5, 7},
    {WGML_GGML_Q6_K, 256, 210, 1, {208, 0}, 4, 6},  {WGML_GGML_Q2_K, 256, 84, 2, {80, 82}, 5, 7},
    {WGML_GGML_Q3_K, 256, 110, 1, {108, 0}, 4, 6},  {WGML_GGML_IQ4_NL, 32, 18, 1, {0, 0}, 6, 8},
    {WGML_GGML_IQ4_XS, 256, 136, 1, {0, 0}, 2, 4},
};

/* GG_RANDOM's entry of a block kind (3..7, 9..12), else -1. */
static inline int gg_index(int kind) {
    int i = kind >= 9 ? kind - 4 : kind >= 3 && kind <= 7 ? kind - 3 : -1;
    return i < (int)(sizeof GG_RANDOM / sizeof GG_RANDOM[0]) ? i : -1;
}

/* The GGUF type of make_weight's kinds 1..12. */
static inline int kind_type(int kind) {
    if (gg_index(kind) >= 0) return GG_RANDOM[gg_index(kind)].type;
    return kind == 1 ? WGML_GGML_Q4_1 : kind == 8 ? WGML_GGML_F16 : WGML_GGML_Q8_0;
}

/* kind 0: symmetric q4gsw quantised from random fp32 (group G, optional bias);
 * kind 1: random Q4_1 blocks; kind 2: random Q8_0 blocks (G = 32); kinds 3..7: random Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K blocks and kinds 9..12 random Q2_K, Q3_K, IQ4_NL, IQ4_XS blocks (random
 * bytes, fp16 fields from GG_RANDOM's ranges; k a whole number of blocks); kind 8: a random
 * F16 tensor (held as f32 on the GPU, any k). */
static inline hw make_weight(wgml_graph *g, int kind, int64_t n, int64_t k, int group, bool bias) {
    hw h;
    memset(&h, 0, sizeof h);
    h.deq = malloc(sizeof(float) * (size_t)(n * k));
    if (bias && kind == 0) h.bias = th_random((size_t)n, -1, 1); /* GGUF kinds carry no bias */
    if (kind == 0) {
        float *wf = th_random((size_t)(n * k), -1, 1);
        int64_t ng = (k + group - 1) / group;
        h.codes = malloc((size_t)(n * ((k + 1) / 2)));
        h.scales = malloc(sizeof(float) * (size_t)(ng * pad4(n)));
        th_check(wgml_q4gsw_quantize(wf, n, k, group, h.codes, h.scales) == WGML_OK, "quantize %s", wgml_last_error(NULL));
        th_check(wgml_q4gsw_dequantize(h.codes, h.scales, n, k, group, h.deq) == WGML_OK, "dequantize");
        h.w = wgml_qweight_upload_q4gsw(g, h.codes, h.scales, h.bias, n, k, group);
        free(wf);
    } else if (kind == 8) {
        h.nblocks_bytes = (size_t)(n * k) * 2;
        h.blocks = malloc(h.nblocks_bytes);
        for (int64_t i = 0; i < n * k; i++) {
            uint16_t v = i % 97 == 3 ? rand_half(0, 0) : rand_half(12, 16); /* a few subnormals (or zeros) */
            h.blocks[2 * i] = (uint8_t)v;
            h.blocks[2 * i + 1] = (uint8_t)(v >> 8);
        }
        th_check(wgml_gguf_dequantize(WGML_GGML_F16, h.blocks, h.nblocks_bytes, n, k, h.deq) == WGML_OK,
                 "gguf dequantize %s", wgml_last_error(NULL));
        h.w = wgml_qweight_upload_gguf(g, WGML_GGML_F16, h.blocks, h.nblocks_bytes, n, k);
    } else if (gg_index(kind) >= 0) {
        int gi = gg_index(kind), type = kind_type(kind), be = GG_RANDOM[gi].be, bb = GG_RANDOM[gi].bb;
        int64_t nb = n * k / be;
        h.nblocks_bytes = (size_t)(nb * bb);
        h.blocks = malloc(h.nblocks_bytes);
        for (size_t j = 0; j < h.nblocks_bytes; j++) h.blocks[j] = (uint8_t)th_uniform(0, 256);
        for (int64_t b = 0; b < nb; b++)
            for (int f = 0; f < GG_RANDOM[gi].nh; f++) {
                uint8_t *p = h.blocks + b * bb + GG_RANDOM[gi].off[f];
                uint16_t d = rand_half(GG_RANDOM[gi].emin, GG_RANDOM[gi].emax);
                if (f == 0) d &= 0x7FFF; /* a positive d (a min of either sign) */
                p[0] = (uint8_t)d;
                p[1] = (uint8_t)(d >> 8);
            }
        th_check(wgml_gguf_dequantize(type, h.blocks, h.nblocks_bytes, n, k, h.deq) == WGML_OK, "gguf dequantize %s",
                 wgml_last_error(NULL));
        h.w = wgml_qweight_upload_gguf(g, type, h.blocks, h.nblocks_bytes, n, k);
    } else {
        int type = kind_type(kind);
        size_t bs = kind == 1 ? 20 : 34;
        int64_t nb = n * k / 32;
        h.nblocks_bytes = (size_t)nb * bs;
        h.blocks = malloc(h.nblocks_bytes);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *p = h.blocks + b * (int64_t)bs;
            uint16_t d = kind == 1 ? (uint16_t)(rand_half(9, 12) & 0x7FFF) : (uint16_t)(rand_half(7, 8) & 0x7FFF);
            p[0] = (uint8_t)d;
            p[1] = (uint8_t)(d >> 8);
            size_t q0 = 2;
            if (kind == 1) {
                uint16_t m = (uint16_t)(rand_half(11, 13) | 0x8000);
                p[2] = (uint8_t)m;
                p[3] = (uint8_t)(m >> 8);
                q0 = 4;
            }
            for (size_t j = q0; j < bs; j++) p[j] = (uint8_t)th_uniform(0, 256);
        }
        th_check(wgml_gguf_dequantize(type, h.blocks, h.nblocks_bytes, n, k, h.deq) == WGML_OK, "gguf dequantize %s",
                 wgml_last_error(NULL));
        h.w = wgml_qweight_upload_gguf(g, type, h.blocks, h.nblocks_bytes, n, k);
    }
    th_check(h.w != NULL, "upload kind %d [%lld, %lld]: %s", kind, (long long)n, (long long)k, wgml_last_error(T.ctx));
    return h;
}

static inline void free_weight(hw *h) {
    wgml_qweight_free(h->w);
    free(h->deq);
    free(h->bias);
    free(h->codes);
    free(h->scales);
    free(h->blocks);
}

static inline double *to_double(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* ref[m, n] = x[m, :] · W[n, :] + bias */
static inline double *ref_forward(const float *x, const hw *h, int64_t m, int64_t n, int64_t k) {
    double *dx = to_double(x, (size_t)(m * k)), *dw = to_double(h->deq, (size_t)(n * k));
    double *ref = malloc(sizeof(double) * (size_t)(m * n));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0, dx, (int)k, dw, (int)k, 0.0, ref,
                (int)n);
    if (h->bias)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) ref[i * n + j] += h->bias[j];
    free(dx);
    free(dw);
    return ref;
}

/* ref[m, k] = d_out[m, :] · W */
static inline double *ref_dx(const float *d_out, const hw *h, int64_t m, int64_t n, int64_t k) {
    double *dd = to_double(d_out, (size_t)(m * n)), *dw = to_double(h->deq, (size_t)(n * k));
    double *ref = malloc(sizeof(double) * (size_t)(m * k));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)k, (int)n, 1.0, dd, (int)n, dw, (int)k, 0.0, ref,
                (int)k);
    free(dd);
    free(dw);
    return ref;
}

/* ref[i, j] = Σ_c x[i, c] W[r0 + j, c] + bias[r0 + j] over rows [r0, r0 + n) of h, in double */
static inline double *ref_rows(const float *x, const hw *h, int64_t r0, int64_t m, int64_t n, int64_t k) {
    double *ref = malloc(sizeof(double) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = h->bias ? h->bias[r0 + j] : 0.0;
            for (int64_t c = 0; c < k; c++) s += (double)x[i * k + c] * h->deq[(r0 + j) * k + c];
            ref[i * n + j] = s;
        }
    return ref;
}

static const char *KIND_NAMES[] = {"q4sym", "q4min", "q8",   "q5_0",   "q5_1",  "q4_k",  "q5_k",
                                    "q6_k",  "f16",   "q2_k", "q3_k", "iq4_nl", "iq4_xs"};

#endif
