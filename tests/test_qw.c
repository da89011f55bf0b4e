#define _POSIX_C_SOURCE 200809L
/* 4-bit / 8-bit weights: host formats, forward (GEMV and GEMM), input gradient, and bad input.
 * References in fp64 (OpenBLAS dgemm on weights dequantised on the host with the spec's rule).
 * Requant, the embedding, the GPU dequantisation and the closed training loop: test_qw_requant.c.
 *
 * Extra modes:
 *   test_qw --gguf-check DIR  reads DIR/<case>.meta ("type n k") and DIR/<case>.blocks (raw
 *                             GGUF blocks) for each case listed in DIR/cases.txt, writes the
 *                             host dequantisation to DIR/<case>.deq, and runs the forward on
 *                             the GPU from the imported blocks with x = DIR/<case>.x (f32
 *                             [m, k]) into DIR/<case>.out, the GPU dequantisation into
 *                             DIR/<case>.gdeq, and when present the input gradient of
 *                             DIR/<case>.d (f32 [m, n]) into DIR/<case>.dx and the embedding
 *                             of DIR/<case>.ids (i32 [t]) into DIR/<case>.emb (used by
 *                             tests/py/test_gguf_quant.py and test_gguf_kquant.py);
 * Parts (th_run_parts; CTest runs each as test_qw_<part>): linear, linear-tiles and
 * linear-tiles-forced (the GEMM's tile choices), errors (the host formats and bad input), shapes
 * and shapes-wide and shapes-deep (Llama-3.2-1B's), gemv, gemv-wide, gemv-rows8 (the forced GEMV
 * shapes), kquant-linear (the GGUF 5-bit and K kinds). */
#include "harness.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qw_host.h"

/* Forward and (optionally) input gradient of one weight against fp64. */
static void case_linear(int kind, int64_t m, int64_t n, int64_t k, int group, bool bias, bool dx) {
    double t0 = now();
    hw h = make_weight(T.g, kind, n, k, group, bias);
    if (!h.w) {
        free_weight(&h);
        return;
    }
    char name[160];
    float *hx = th_random((size_t)(m * k), -1, 1);
    /* even M > 4: x as [2, M/2, K] (leading dims flatten to M) */
    bool r3 = m > 4 && m % 2 == 0;
    int64_t xs[3] = {2, m / 2, k}, xs2[2] = {m, k};
    wgml_tensor *x = r3 ? th_tensor_f32(3, xs, hx) : th_tensor_f32(2, xs2, hx);
    double t1 = now();
    wgml_tensor *o = wgml_qlinear(T.g, x, h.w);
    th_check(o && wgml_tensor_rank(o) == (r3 ? 3 : 2) && wgml_tensor_dim(o, -1) == n, "linear output shape");
    float *got = th_read_f32(o);
    double t_gpu = now() - t1;
    double *ref = ref_forward(hx, &h, m, n, k);
    snprintf(name, sizeof name, "%s linear M=%lld%s N=%lld K=%lld G=%d%s", KIND_NAMES[kind], (long long)m,
             r3 ? " (rank 3)" : "", (long long)n, (long long)k, group, bias ? " bias" : "");
    if (got) th_close(name, got, ref, (size_t)(m * n), tol_abs(k), RTOL);
    free(got);
    free(ref);
    if (dx) {
        float *hd = th_random((size_t)(m * n), -1, 1);
        int64_t ds[3] = {2, m / 2, n}, ds2[2] = {m, n};
        wgml_tensor *d = r3 ? th_tensor_f32(3, ds, hd) : th_tensor_f32(2, ds2, hd);
        wgml_tensor *gx = wgml_qlinear_dx(T.g, d, h.w);
        th_check(gx && wgml_tensor_rank(gx) == (r3 ? 3 : 2) && wgml_tensor_dim(gx, -1) == k, "linear_dx shape");
        float *gg = th_read_f32(gx);
        double *rd = ref_dx(hd, &h, m, n, k);
        snprintf(name, sizeof name, "%s linear_dx M=%lld N=%lld K=%lld G=%d", KIND_NAMES[kind], (long long)m,
                 (long long)n, (long long)k, group);
        if (gg) th_close(name, gg, rd, (size_t)(m * k), tol_abs(n), RTOL);
        free(gg);
        free(rd);
        free(hd);
        wgml_tensor_free(d);
        wgml_tensor_free(gx);
    }
    printf("  %-60s %.2f s (forward on the GPU %.2f s)\n", name, now() - t0, t_gpu);
    free(hx);
    wgml_tensor_free(x);
    wgml_tensor_free(o);
    free_weight(&h);
}

static void test_linear(void) {
    /* odd and partial tiles, several groups along K, every G and every kind, M on both paths */
    static const struct {
        int kind;
        int64_t m, n, k;
        int group;
        bool bias;
    } cases[] = {
        {0, 1, 37, 96, 32, false},   {0, 3, 37, 96, 32, true},    {0, 5, 37, 96, 32, true},
        {0, 70, 37, 96, 32, false},  {0, 1, 129, 200, 64, true},  {0, 67, 129, 200, 64, false},
        {0, 2, 65, 384, 128, false}, {0, 33, 65, 384, 128, true}, {0, 9, 40, 77, 32, false},
        {0, 1, 40, 77, 32, false},   {0, 4, 13, 33, 32, true},    {1, 1, 37, 96, 32, false},
        {1, 4, 50, 160, 32, false},  {1, 70, 37, 96, 32, false},  {2, 1, 37, 96, 32, false},
        {2, 2, 50, 160, 32, false},  {2, 70, 37, 96, 32, false},  {2, 130, 66, 64, 32, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        case_linear(cases[i].kind, cases[i].m, cases[i].n, cases[i].k, cases[i].group, cases[i].bias, true);
}

/* Every tile (128 x 128, 64 x 64, 128 x 64: matmul variants 0, 2, 4) forced on small shapes,
 * the variants first..last of those three. */
static void linear_tiles_forced(int first, int last) {
    static const int forced[] = {0, 2, 4};
    for (int f = first; f <= last; f++) {
        int v = forced[f];
        wgml_matmul_force_variant(T.ctx, v);
        printf("  tile variant forced: %s\n", wgml_matmul_variant_name(v));
        case_linear(0, 70, 37, 96, 32, true, true);
        case_linear(0, 9, 40, 77, 64, false, true);
        case_linear(1, 70, 37, 96, 32, false, true);
        case_linear(2, 130, 66, 64, 32, false, true);
    }
    wgml_matmul_force_variant(T.ctx, -1);
}

/* The 128 x 64 tile (chosen when it gives >= 256 workgroups) automatically, then the forced
 * tiles: two parts (linear-tiles, linear-tiles-forced) of about 40 s each on Dawn's SwiftShader. */
static void test_linear_tiles(void) {
    case_linear(0, 300, 260, 96, 32, true, true);
    case_linear(2, 260, 300, 64, 32, false, true);
    case_linear(0, 2100, 520, 64, 32, false, true);
    linear_tiles_forced(0, 0);
}

static void test_linear_tiles_forced(void) { linear_tiles_forced(1, 2); }

/* GEMV shapes (threads per row, rows per thread, workgroup, blocks in flight) forced through
 * $WGML_QW_GEMV, the benchmark sweep's knob: each must give the same results. Shapes
 * first..last of the list (each shape is its own set of pipeline compiles, long on llvmpipe,
 * so CTest runs them as test_qw_gemv (0..3), test_qw_gemv_wide (4), test_qw_gemv_rows8 (5..7)).
 * "auto" is the adapter's own choice (on lavapipe, the CPU shape); 6 is the GPUs' shape for K < 2048,
 * 7 one of their shapes for few rows at large K (a row's sums over several subgroups). */
static void test_gemv_shapes(int first, int last) {
    static const char *gemv[] = {"auto",       "8,1,64,1",  "16,2,256,2", "64,1,128,3",
                                 "32,4,256,4", "32,8,64,1", "64,1,256,2", "128,8,128,1"};
    th_setenv("WGML_QW_GEMV_MAX_M", "4", 1); /* a GPU's rows (a CPU adapter's GEMV takes one) */
    for (int f = first; f <= last; f++) {
        if (f) th_setenv("WGML_QW_GEMV", gemv[f], 1);
        printf("  GEMV shape forced: %s\n", gemv[f]);
        case_linear(0, 1, 37, 96, 32, true, false);
        case_linear(0, 4, 129, 200, 64, false, false);
        case_linear(1, 3, 50, 1056, 32, true, false);
        case_linear(2, 2, 66, 96, 32, false, false);
        case_linear(7, 3, 21, 512, 16, false, false); /* Q6_K: G = 16 halves of a block */
    }
    th_unsetenv("WGML_QW_GEMV");
    th_unsetenv("WGML_QW_GEMV_MAX_M");
}

/* The Llama-3.2-1B projections at M = 1 (GEMV) and M = 112 (GEMM): shapes first..last of the
 * list (parts shapes: the 2048-long ones and the other kinds; shapes-wide: N = 8192;
 * shapes-deep: K = 8192). */
static void llama_shapes(int first, int last) {
    static const int64_t shapes[][2] = {{2048, 2048}, {2048, 512}, {2048, 8192}, {8192, 2048}}; /* K -> N */
    for (int i = first; i <= last; i++) {
        case_linear(0, 1, shapes[i][1], shapes[i][0], 32, false, false);
        case_linear(0, 112, shapes[i][1], shapes[i][0], i == 1 ? 64 : 128, false, i == 1);
    }
}

static void test_llama_shapes(void) {
    llama_shapes(0, 1);
    case_linear(1, 1, 2048, 2048, 32, false, false);
    case_linear(2, 1, 512, 2048, 32, false, false);
}

static void test_llama_shapes_wide(void) { llama_shapes(2, 2); }
static void test_llama_shapes_deep(void) { llama_shapes(3, 3); }

/* ------------------------------------------------------------------ host formats */

static void test_host_formats(void) {
    /* fp16 edge values through Q8_0 blocks: d = 1 (0x3C00), smallest subnormal (0x0001),
     * largest normal (0x7BFF), -2 (0xC000); codes 1, -1, 127, -128 */
    static const uint16_t ds[4] = {0x3C00, 0x0001, 0x7BFF, 0xC000};
    static const float dv[4] = {1.0f, 0x1p-24f, 65504.0f, -2.0f};
    uint8_t blk[4 * 34];
    memset(blk, 0, sizeof blk);
    for (int b = 0; b < 4; b++) {
        blk[b * 34] = (uint8_t)ds[b];
        blk[b * 34 + 1] = (uint8_t)(ds[b] >> 8);
        blk[b * 34 + 2] = 1;
        blk[b * 34 + 3] = 0xFF;
        blk[b * 34 + 4] = 127;
        blk[b * 34 + 5] = 0x80;
    }
    float out[4 * 32];
    th_check(wgml_gguf_dequantize(WGML_GGML_Q8_0, blk, sizeof blk, 4, 32, out) == WGML_OK, "Q8_0 dequantize");
    bool ok = true;
    for (int b = 0; b < 4; b++)
        ok = ok && out[b * 32] == dv[b] && out[b * 32 + 1] == -dv[b] && out[b * 32 + 2] == 127 * dv[b] &&
             out[b * 32 + 3] == -128 * dv[b] && out[b * 32 + 4] == 0;
    th_check(ok, "fp16 d conversion exact (normal, subnormal, max, negative)");
    /* Q4_0 nibble order: low nibbles are elements 0..15, high nibbles 16..31 */
    uint8_t q40[18] = {0x00, 0x3C};
    for (int j = 0; j < 16; j++) q40[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    th_check(wgml_gguf_dequantize(WGML_GGML_Q4_0, q40, 18, 1, 32, out) == WGML_OK, "Q4_0 dequantize");
    ok = true;
    for (int j = 0; j < 16; j++) ok = ok && out[j] == (float)(j - 8) && out[j + 16] == (float)(7 - j);
    th_check(ok, "Q4_0 nibble order");
    /* flat q4gsw nibble order: low nibble is the even k */
    uint8_t codes[2] = {0x9A, 0x0F};
    float sc[4] = {0.5f, 0, 0, 0};
    th_check(wgml_q4gsw_dequantize(codes, sc, 1, 3, 32, out) == WGML_OK, "q4gsw dequantize");
    th_check(out[0] == 1.0f && out[1] == 0.5f && out[2] == 3.5f, "q4gsw nibble order (%g %g %g)", out[0], out[1], out[2]);
    /* quantize: max |w| maps to ±7, codes round half to even at the scale */
    float w[8] = {0.7f, -0.7f, 0.05f, 0.15f, 0.0f, 0.35f, -0.26f, 0.1f};
    uint8_t qc[4];
    float qs[4];
    th_check(wgml_q4gsw_quantize(w, 1, 8, 32, qc, qs) == WGML_OK, "quantize");
    float back[8];
    wgml_q4gsw_dequantize(qc, qs, 1, 8, 32, back);
    th_check(qs[0] == 0.7f / 7.0f && back[0] == 7 * qs[0] && back[1] == -7 * qs[0], "quantize scale max|w|/7 (%g)", qs[0]);
    ok = true;
    for (int i = 0; i < 8; i++) ok = ok && fabsf(back[i] - w[i]) <= qs[0] / 2 * 1.0001f;
    th_check(ok, "quantize error <= scale/2");
    float zeros[40] = {0};
    uint8_t zc[20];
    float zs[8];
    th_check(wgml_q4gsw_quantize(zeros, 1, 40, 32, zc, zs) == WGML_OK && zs[0] == 0 && zc[0] == 0x88 && zc[19] == 0x88,
             "an all-zero group gets scale 0 and codes 8");
    th_check(wgml_ggml_row_bytes(WGML_GGML_Q4_0, 64) == 36 && wgml_ggml_row_bytes(WGML_GGML_Q4_1, 64) == 40 &&
                 wgml_ggml_row_bytes(WGML_GGML_Q8_0, 64) == 68 && wgml_ggml_row_bytes(WGML_GGML_Q8_0, 48) == 0,
             "row bytes");
}

/* ------------------------------------------------------------------ the GGUF 5-bit and K kinds */

/* test_qw --part kquant-linear (CTest's test_qw_kquant_linear): the kinds of GGUF Q5_0, Q5_1,
 * Q4_K, Q5_K and Q6_K (make_weight kinds 3..7), Q2_K, Q3_K, IQ4_NL and IQ4_XS (9..12), and F16,
 * through the forward and the input
 * gradient (their requant, dequantisation and embedding: test_qw_requant --part kquant).
 * (Their host dequantisation is checked against PyPI gguf by tests/py/test_gguf_kquant.py,
 * which also runs them from gguf-made blocks; every GEMM tile variant on them: test_qw_mm.) */
static void test_kquant_linear(void) {
    double t0 = now();
    /* the GGUF 5-bit and K kinds (codes widened to 8 bits; Q4_K on the 4-bit MIN kind): GEMV
     * (M = 1, 3), the tiled GEMM (odd M, the automatic tile and split-K plan) and dx, several
     * blocks and super-blocks of 256 along K */
    for (int kind = 3; kind <= 7; kind++) {
        int gk = kind == 7 ? 16 : 32;
        case_linear(kind, 1, 37, 512, gk, false, false);
        case_linear(kind, 3, 50, 768, gk, false, false);
        case_linear(kind, 37, 45, 512, gk, false, true);
    }
    for (int kind = 9; kind <= 12; kind++) { /* Q2_K, Q3_K (G = 16), IQ4_NL, IQ4_XS */
        int gk = kind <= 10 ? 16 : 32;
        case_linear(kind, 1, 37, 512, gk, false, false);
        case_linear(kind, 37, 45, 512, gk, false, true);
    }
    case_linear(3, 5, 29, 96, 32, false, true); /* Q5_0: K = 3 blocks of 32 */
    case_linear(8, 1, 21, 77, 32, false, false); /* F16 as f32 (QF32): K padded to 96 */
    case_linear(8, 2, 37, 256, 32, false, false);
    case_linear(8, 19, 37, 77, 32, false, true);
    case_linear(7, 70, 66, 4096, 16, false, true); /* Q6_K: few tiles, long K: the automatic split-K */
    /* a forced split-K on G = 16 (every tile variant on these kinds: test_qw_mm) */
    th_setenv("WGML_QW_MM_SPLITK", "3", 1);
    case_linear(7, 41, 37, 512, 16, false, true);
    case_linear(5, 41, 37, 512, 32, false, true);
    th_unsetenv("WGML_QW_MM_SPLITK");
    printf("linear / linear_dx: %.2f s\n", now() - t0);
}

/* ------------------------------------------------------------------ bad input */

static void test_errors(void) {
    uint8_t codes[64] = {0};
    float scales[64] = {0};
    float w[256] = {0};
    wgml_qweight *q = wgml_qweight_upload_q4gsw(T.g, codes, scales, NULL, 4, 48, 48);
    th_expect_error("G not a multiple of 32", q == NULL, WGML_ERR_ARG, "qweight_upload_q4gsw", "G = 48", NULL);
    q = wgml_qweight_upload_q4gsw(T.g, NULL, scales, NULL, 4, 32, 32);
    th_expect_error("NULL codes", q == NULL, WGML_ERR_ARG, "codes is NULL", NULL);
    q = wgml_qweight_upload_q4gsw(T.g, codes, scales, NULL, 0, 32, 32);
    th_expect_error("zero N", q == NULL, WGML_ERR_SHAPE, "[0, 32]", NULL);
    q = wgml_qweight_quantize(T.g, w, 2, 64, 16);
    th_expect_error("quantize G=16", q == NULL, WGML_ERR_ARG, "G = 16", NULL);
    uint8_t blocks[2 * 34] = {0};
    q = wgml_qweight_upload_gguf(T.g, WGML_GGML_Q8_0, blocks, sizeof blocks, 1, 48);
    th_expect_error("GGUF K not whole blocks", q == NULL, WGML_ERR_SHAPE, "Q8_0", "K = 48", NULL);
    q = wgml_qweight_upload_gguf(T.g, WGML_GGML_Q8_0, blocks, 60, 2, 32);
    th_expect_error("GGUF size mismatch", q == NULL, WGML_ERR_SHAPE, "60 bytes", "68", NULL);
    q = wgml_qweight_upload_gguf(T.g, 12, blocks, sizeof blocks, 1, 256);
    th_expect_error("GGUF K-type size mismatch", q == NULL, WGML_ERR_SHAPE, "Q4_K", "68 bytes", "144", NULL);
    static const int on_gpu[] = {WGML_GGML_F32,  WGML_GGML_F16,  WGML_GGML_Q4_0,   WGML_GGML_Q4_1,
                                 WGML_GGML_Q5_0, WGML_GGML_Q5_1, WGML_GGML_Q8_0,   WGML_GGML_Q2_K,
                                 WGML_GGML_Q3_K, WGML_GGML_Q4_K, WGML_GGML_Q5_K,   WGML_GGML_Q6_K,
                                 WGML_GGML_BF16, WGML_GGML_IQ4_NL, WGML_GGML_IQ4_XS};
    int listed = 0;
    for (int t = -1; t < 64; t++) listed += wgml_qweight_gguf_on_gpu(t);
    for (size_t i = 0; i < sizeof on_gpu / sizeof on_gpu[0]; i++) listed -= wgml_qweight_gguf_on_gpu(on_gpu[i]) ? 1 : 100;
    th_check(listed == 0, "wgml_qweight_gguf_on_gpu: exactly the 15 GPU types");
    q = wgml_qweight_upload_gguf(T.g, 16, blocks, sizeof blocks, 1, 256);
    th_expect_error("GGUF unknown type", q == NULL, WGML_ERR_UNSUPPORTED, "IQ2_XXS", "(16)", NULL);
    q = wgml_qweight_upload_gguf(T.g, WGML_GGML_F16, blocks, 60, 1, 30);
    th_check(q && q->kind == WGML_QF32 && q->bits == 32 && q->group == 32 && q->kp == 32 && q->k == 30,
             "GGUF F16 uploads as f32 values, K padded to 32 (%s)", wgml_last_error(T.ctx));
    if (q) {
        int64_t s30[2] = {1, 30};
        wgml_tensor *l30 = wgml_full(T.g, WGML_F32, 2, s30, 0.0);
        th_expect_error("requant of f32 values", wgml_qweight_requant(T.g, l30, q) == WGML_ERR_UNSUPPORTED,
                        WGML_ERR_UNSUPPORTED, "qweight_requant", "[1, 30]", "f32", NULL);
        wgml_tensor_free(l30);
    }
    wgml_qweight_free(q);
    q = wgml_qweight_upload_gguf(T.g, WGML_GGML_BF16, blocks, 61, 1, 30);
    th_expect_error("GGUF BF16 size mismatch", q == NULL, WGML_ERR_SHAPE, "BF16", "61 bytes", NULL);
    wgml_status s = wgml_gguf_dequantize(19, blocks, sizeof blocks, 1, 256, w);
    th_check(s == WGML_ERR_UNSUPPORTED && strstr(wgml_last_error(NULL), "IQ1_S (19)"),
             "host dequantize of an unsupported type names it: %s", wgml_last_error(NULL));
    /* the 5-bit, K and IQ4 block types: a byte count that is not exactly the blocks, and a row that
     * is not whole blocks, are refused naming the type, n and k; whole blocks upload as the
     * kind, G and code width of the GPU layout */
    static const struct { int type; const char *name; int be, bb; wgml_qkind kind; int group, bits; } host_only[] = {
        {WGML_GGML_Q5_0, "Q5_0", 32, 22, WGML_Q8, 32, 5},       {WGML_GGML_Q5_1, "Q5_1", 32, 24, WGML_Q8_MIN, 32, 5},
        {WGML_GGML_Q4_K, "Q4_K", 256, 144, WGML_Q4_MIN, 32, 4}, {WGML_GGML_Q5_K, "Q5_K", 256, 176, WGML_Q8_MIN, 32, 5},
        {WGML_GGML_Q6_K, "Q6_K", 256, 210, WGML_Q8, 16, 6},     {WGML_GGML_Q2_K, "Q2_K", 256, 84, WGML_Q8_MIN, 16, 2},
        {WGML_GGML_Q3_K, "Q3_K", 256, 110, WGML_Q8, 16, 3},     {WGML_GGML_IQ4_NL, "IQ4_NL", 32, 18, WGML_Q8, 32, 8},
        {WGML_GGML_IQ4_XS, "IQ4_XS", 256, 136, WGML_Q8, 32, 8},
    };
    static uint8_t hb[2 * 210 + 1];
    static float hout[2 * 256];
    for (size_t i = 0; i < sizeof host_only / sizeof host_only[0]; i++) {
        int t = host_only[i].type, be = host_only[i].be, bb = host_only[i].bb;
        uint64_t e = 0, b = 0;
        th_check(wgml_ggml_type_size((uint32_t)t, &e, &b) && e == (uint64_t)be && b == (uint64_t)bb &&
                     !strcmp(wgml_ggml_type_name((uint32_t)t), host_only[i].name),
                 "%s block size", host_only[i].name);
        char want[32];
        snprintf(want, sizeof want, "%d bytes given", 2 * bb + 1);
        s = wgml_gguf_dequantize(t, hb, (size_t)(2 * bb + 1), 2, be, hout);
        th_check(s == WGML_ERR_SHAPE && strstr(wgml_last_error(NULL), want) &&
                     strstr(wgml_last_error(NULL), host_only[i].name) && strstr(wgml_last_error(NULL), "[2, "),
                 "%s wrong byte count: %s", host_only[i].name, wgml_last_error(NULL));
        s = wgml_gguf_dequantize(t, hb, (size_t)bb, 1, be + 16, hout);
        snprintf(want, sizeof want, "K = %d", be + 16);
        th_check(s == WGML_ERR_SHAPE && strstr(wgml_last_error(NULL), want) &&
                     strstr(wgml_last_error(NULL), host_only[i].name) && strstr(wgml_last_error(NULL), "[1, "),
                 "%s K not whole blocks: %s", host_only[i].name, wgml_last_error(NULL));
        th_check(wgml_gguf_dequantize(t, hb, (size_t)(2 * bb), 2, be, hout) == WGML_OK, "%s two rows: %s",
                 host_only[i].name, wgml_last_error(NULL));
        q = wgml_qweight_upload_gguf(T.g, t, hb, (size_t)(2 * bb), 2, be);
        th_check(q && q->kind == host_only[i].kind && q->group == host_only[i].group && q->bits == host_only[i].bits &&
                     q->n == 2 && q->k == be,
                 "%s upload: kind, G, bits (%s)", host_only[i].name, wgml_last_error(T.ctx));
        wgml_qweight_free(q);
        q = wgml_qweight_upload_gguf(T.g, t, hb, (size_t)(2 * bb + 1), 2, be);
        th_expect_error(host_only[i].name, q == NULL, WGML_ERR_SHAPE, "qweight_upload_gguf", host_only[i].name, "bytes given",
                        NULL);
    }
    s = wgml_q4gsw_dequantize(codes, scales, 2, 64, 64, NULL);
    th_check(s == WGML_ERR_ARG && strstr(wgml_last_error(NULL), "out is NULL"), "host dequantize NULL out: %s",
             wgml_last_error(NULL));

    hw h = make_weight(T.g, 0, 8, 64, 32, false);
    hw h8 = make_weight(T.g, 2, 8, 64, 32, false);
    int64_t s1[2] = {3, 63}, s2[2] = {3, 64}, s3[2] = {3, 8}, s4[2] = {8, 65};
    wgml_tensor *xb = wgml_full(T.g, WGML_F32, 2, s1, 1.0);
    wgml_tensor *xg = wgml_full(T.g, WGML_F32, 2, s2, 1.0);
    wgml_tensor *xi = wgml_full(T.g, WGML_I32, 2, s2, 1.0);
    wgml_tensor *dg = wgml_full(T.g, WGML_F32, 2, s3, 1.0);
    wgml_tensor *lb = wgml_full(T.g, WGML_F32, 2, s4, 1.0);
    th_expect_error("linear K mismatch", wgml_qlinear(T.g, xb, h.w) == NULL, WGML_ERR_SHAPE, "qlinear", "[3, 63]",
                    "K = 64", NULL);
    th_expect_error("linear NULL x", wgml_qlinear(T.g, NULL, h.w) == NULL, WGML_ERR_ARG, "qlinear", NULL);
    th_expect_error("linear NULL w", wgml_qlinear(T.g, xg, NULL) == NULL, WGML_ERR_ARG, "qlinear", "w is NULL", NULL);
    th_expect_error("linear i32 x", wgml_qlinear(T.g, xi, h.w) == NULL, WGML_ERR_DTYPE, "qlinear", NULL);
    th_expect_error("linear_dx N mismatch", wgml_qlinear_dx(T.g, xg, h.w) == NULL, WGML_ERR_SHAPE, "qlinear_dx",
                    "N = 8", NULL);
    th_check(wgml_qlinear_dx(T.g, dg, h.w) != NULL, "linear_dx good shape");
    th_expect_error("requant latent shape", wgml_qweight_requant(T.g, lb, h.w) == WGML_ERR_SHAPE, WGML_ERR_SHAPE,
                    "qweight_requant", "[8, 65]", "[8, 64]", NULL);
    th_expect_error("requant NULL latent", wgml_qweight_requant(T.g, NULL, h.w) != WGML_OK, WGML_ERR_ARG, "qweight_requant", NULL);
    int64_t s5[2] = {8, 65};
    wgml_tensor *l8 = wgml_full(T.g, WGML_F32, 2, s5, 0.0);
    th_expect_error("requant Q8 latent shape", wgml_qweight_requant(T.g, l8, h8.w) == WGML_ERR_SHAPE, WGML_ERR_SHAPE,
                    "qweight_requant", "[8, 65]", NULL);
    th_expect_error("embedding f32 ids", wgml_qembedding(T.g, h.w, xg) == NULL, WGML_ERR_DTYPE, "qembedding", NULL);
    th_expect_error("embedding NULL table", wgml_qembedding(T.g, NULL, xi) == NULL, WGML_ERR_ARG, "qembedding",
                    "table is NULL", NULL);
    th_expect_error("dequantize NULL weight", wgml_qweight_dequantize(T.g, NULL) == NULL, WGML_ERR_ARG, "qweight_dequantize",
                    "w is NULL", NULL);
    /* a weight of another graph */
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    wgml_tensor *x2 = wgml_tensor_new(g2, WGML_F32, 2, s2);
    th_expect_error("weight of another graph", wgml_qlinear(g2, x2, h.w) == NULL, WGML_ERR_ARG, "different graphs",
                    NULL);
    wgml_graph_free(g2);
    wgml_tensor_free(xb); wgml_tensor_free(xg); wgml_tensor_free(xi); wgml_tensor_free(dg); wgml_tensor_free(lb);
    wgml_tensor_free(l8);
    free_weight(&h);
    free_weight(&h8);
    wgml_sync(T.ctx);
}

/* ------------------------------------------------------------------ --gguf-check */

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (size) *size = (size_t)n;
    return p;
}

static bool write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(p, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    return ok;
}

static int gguf_check(const char *dir) {
    char path[1024], cname[128];
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    FILE *list = fopen(path, "r");
    if (!list) {
        printf("FAIL: no %s\n", path);
        return 1;
    }
    while (fscanf(list, "%127s", cname) == 1) {
        int type;
        long long n, k, m;
        snprintf(path, sizeof path, "%s/%s.meta", dir, cname);
        FILE *mf = fopen(path, "r");
        bool ok = mf && fscanf(mf, "%d %lld %lld %lld", &type, &n, &k, &m) == 4;
        if (mf) fclose(mf);
        if (!th_check(ok, "%s: meta", cname)) continue;
        size_t bytes = 0, xbytes = 0;
        snprintf(path, sizeof path, "%s/%s.blocks", dir, cname);
        uint8_t *blocks = read_file(path, &bytes);
        snprintf(path, sizeof path, "%s/%s.x", dir, cname);
        float *x = read_file(path, &xbytes);
        if (!th_check(blocks && x && xbytes == sizeof(float) * (size_t)((m ? m : 1) * k), "%s: inputs", cname)) {
            free(blocks);
            free(x);
            continue;
        }
        float *deq = malloc(sizeof(float) * (size_t)(n * k));
        th_check(wgml_gguf_dequantize(type, blocks, bytes, n, k, deq) == WGML_OK, "%s: dequantize: %s", cname,
                 wgml_last_error(NULL));
        snprintf(path, sizeof path, "%s/%s.deq", dir, cname);
        th_check(write_file(path, deq, sizeof(float) * (size_t)(n * k)), "%s: write deq", cname);
        if (m == 0) { /* a plain type: host dequantisation only */
            free(deq);
            free(blocks);
            free(x);
            continue;
        }
        wgml_qweight *w = wgml_qweight_upload_gguf(T.g, type, blocks, bytes, n, k);
        th_check(w != NULL, "%s: upload: %s", cname, wgml_last_error(T.ctx));
        int64_t xs[2] = {m, k};
        wgml_tensor *xt = th_tensor_f32(2, xs, x);
        wgml_tensor *o = w ? wgml_qlinear(T.g, xt, w) : NULL;
        float *got = o ? th_read_f32(o) : NULL;
        snprintf(path, sizeof path, "%s/%s.out", dir, cname);
        th_check(got && write_file(path, got, sizeof(float) * (size_t)(m * n)), "%s: forward: %s", cname,
                 wgml_last_error(T.ctx));
        free(got);
        wgml_tensor_free(xt);
        wgml_tensor_free(o);
        /* the whole weight dequantised on the GPU */
        o = w ? wgml_qweight_dequantize(T.g, w) : NULL;
        got = o ? th_read_f32(o) : NULL;
        snprintf(path, sizeof path, "%s/%s.gdeq", dir, cname);
        th_check(got && write_file(path, got, sizeof(float) * (size_t)(n * k)), "%s: GPU dequantize: %s", cname,
                 wgml_last_error(T.ctx));
        free(got);
        wgml_tensor_free(o);
        /* the input gradient when the case has d_out (f32 [m, n]) */
        size_t dbytes = 0;
        snprintf(path, sizeof path, "%s/%s.d", dir, cname);
        float *d = read_file(path, &dbytes);
        if (d && w && th_check(dbytes == sizeof(float) * (size_t)(m * n), "%s: d size", cname)) {
            int64_t ds[2] = {m, n};
            wgml_tensor *dt = th_tensor_f32(2, ds, d);
            o = wgml_qlinear_dx(T.g, dt, w);
            got = o ? th_read_f32(o) : NULL;
            snprintf(path, sizeof path, "%s/%s.dx", dir, cname);
            th_check(got && write_file(path, got, sizeof(float) * (size_t)(m * k)), "%s: dx: %s", cname,
                     wgml_last_error(T.ctx));
            free(got);
            wgml_tensor_free(o);
            wgml_tensor_free(dt);
        }
        free(d);
        /* the embedding lookup when the case has ids (i32 [t]) */
        size_t ibytes = 0;
        snprintf(path, sizeof path, "%s/%s.ids", dir, cname);
        int32_t *ids = read_file(path, &ibytes);
        if (ids && w && th_check(ibytes >= 4 && ibytes % 4 == 0, "%s: ids size", cname)) {
            int64_t t = (int64_t)(ibytes / 4);
            wgml_tensor *it = th_tensor_i32(1, &t, ids);
            o = wgml_qembedding(T.g, w, it);
            got = o ? th_read_f32(o) : NULL;
            snprintf(path, sizeof path, "%s/%s.emb", dir, cname);
            th_check(got && write_file(path, got, sizeof(float) * (size_t)(t * k)), "%s: embedding: %s", cname,
                     wgml_last_error(T.ctx));
            free(got);
            wgml_tensor_free(o);
            wgml_tensor_free(it);
        }
        free(ids);
        wgml_qweight_free(w);
        free(deq);
        free(blocks);
        free(x);
    }
    fclose(list);
    return th_done();
}

static void gemv_auto_to_3(void) { test_gemv_shapes(0, 3); }
static void gemv_4(void) { test_gemv_shapes(4, 4); }
static void gemv_5(void) { test_gemv_shapes(5, 7); }
/* the host formats, bad input */
static void test_host_errors(void) {
    test_host_formats();
    test_errors();
}

int main(int argc, char **argv) {
    th_init_args("test_qw", argc, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gguf-check") && i + 1 < argc) return gguf_check(argv[i + 1]);
    }
    static const th_part parts[] = {
        {"linear", test_linear},          {"linear-tiles", test_linear_tiles},
        {"linear-tiles-forced", test_linear_tiles_forced}, {"errors", test_host_errors},
        {"shapes", test_llama_shapes},    {"shapes-wide", test_llama_shapes_wide},
        {"shapes-deep", test_llama_shapes_deep},
        {"gemv", gemv_auto_to_3},          {"gemv-wide", gemv_4},           {"gemv-rows8", gemv_5},
        {"kquant-linear", test_kquant_linear},
    };
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
