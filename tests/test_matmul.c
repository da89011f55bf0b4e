#define _POSIX_C_SOURCE 200809L
/* fp32 matmuls (mm, bmm, linear, addmm, transposed forms) against OpenBLAS cblas_dgemm in
 * double precision, on every kernel variant, eager and in a built graph; and bad input. */
#include "harness.h"
#include "ops/matmul/matmul_plan.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double *to_double(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double tol_abs(int64_t k) { return 1e-4 * fmax(1.0, sqrt((double)k) / 8.0); }
#define RTOL 1e-3

/* out[b] = op(a[b]) op(b[b]) for batch entries (stride 0 broadcasts), reference in fp64. */
static void ref_matmul(const float *a, const float *b, double *out, int64_t batch, int64_t m, int64_t n, int64_t k,
                       int ta, int tb, int64_t a_bs, int64_t b_bs) {
    for (int64_t i = 0; i < batch; i++) {
        double *da = to_double(a + i * a_bs, (size_t)(m * k));
        double *db = to_double(b + i * b_bs, (size_t)(k * n));
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                    (int)k, 1.0, da, ta ? (int)m : (int)k, db, tb ? (int)k : (int)n, 0.0, out + i * m * n, (int)n);
        free(da);
        free(db);
    }
}

/* One matmul case: shapes from (batch_a, batch_b, m, n, k, transposes); rank 3 when batch > 0. */
static void case_matmul(const char *label, int64_t ba, int64_t bb, int64_t m, int64_t n, int64_t k, int ta, int tb) {
    int64_t sa[3] = {ba, ta ? k : m, ta ? m : k}, sb[3] = {bb, tb ? n : k, tb ? k : n};
    int64_t na = (ba ? ba : 1) * m * k, nb = (bb ? bb : 1) * k * n;
    float *ha = th_random((size_t)na, -1, 1), *hb = th_random((size_t)nb, -1, 1);
    wgml_tensor *a = th_tensor_f32(ba ? 3 : 2, ba ? sa : sa + 1, ha);
    wgml_tensor *b = th_tensor_f32(bb ? 3 : 2, bb ? sb : sb + 1, hb);
    int64_t batch = ba > bb ? ba : bb;
    if (batch == 0) batch = 1;
    wgml_tensor *o = wgml_matmul(T.g, a, b, ta, tb);
    float *got = th_read_f32(o);
    double *ref = malloc(sizeof(double) * (size_t)(batch * m * n));
    ref_matmul(ha, hb, ref, batch, m, n, k, ta, tb, ba > 1 ? m * k : 0, bb > 1 ? k * n : 0);
    char name[160];
    snprintf(name, sizeof name, "%s %lldx%lldx%lld b%lld/%lld t%d%d", label, (long long)m, (long long)n, (long long)k,
             (long long)ba, (long long)bb, ta, tb);
    th_close(name, got, ref, (size_t)(batch * m * n), tol_abs(k), RTOL);
    free(ha); free(hb); free(got); free(ref);
    wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(o);
}

/* The tiled variants (matmul.wgsl, matmul_db.wgsl), -1 (auto) included; the skinny and
 * outer-product ones have their own shapes (test_skinny_variants). */
static bool is_tiled(int v) {
    const char *n = wgml_matmul_variant_name(v);
    return v < 0 || !strncmp(n, "tile", 4) || !strncmp(n, "db", 2);
}

static void test_shapes_all_variants(void) {
    static const int64_t shapes[][3] = {
        {64, 64, 64},   /* square */
        {129, 37, 65},  /* partial tiles in M, N and K */
        {7, 5, 3},      /* smaller than a tile */
        {33, 17, 1},    /* K = 1 */
        {300, 6, 20},   /* tall and skinny */
        {5, 260, 12},   /* short and wide */
        {132, 136, 36}, /* vec4 path on both operands, partial tiles */
    };
    for (int v = -1; v < wgml_matmul_variant_count(); v++) {
        if (!is_tiled(v)) continue; /* the skinny ones: test_skinny_variants */
        wgml_matmul_force_variant(T.ctx, v);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int t = 0; t < 4; t++)
                case_matmul(wgml_matmul_variant_name(v), 0, 0, shapes[i][0], shapes[i][1], shapes[i][2], t & 1, t >> 1);
    }
    wgml_matmul_force_variant(T.ctx, -1);
    case_matmul("long K", 0, 0, 16, 20, 4096, 0, 0);
    case_matmul("long K", 0, 0, 12, 8, 4096, 1, 1);
    case_matmul("batched", 3, 3, 33, 17, 29, 0, 0);
    case_matmul("batched", 4, 4, 20, 24, 16, 1, 0);
    case_matmul("batch broadcast a", 1, 5, 9, 11, 13, 0, 1);
    case_matmul("batch broadcast b", 5, 0, 9, 11, 13, 0, 0);
}

static void test_linear(void);
static void test_addmm(void);
static void test_linear_dw(void);

/* Split-K ($WGML_MATMUL_SPLITK): every variant and transpose with K not a multiple of the
 * slice, K = 1 (empty slices write zero partials), slice counts 2, 3 and 7; batch and
 * broadcast batch; then the epilogues (bias, addmm's C, linear_dw's accumulation) through the
 * reduction, and the variant override by name. */
static void test_splitk(void) {
    static const int64_t shapes[][3] = {{129, 37, 65}, {33, 17, 1}, {132, 136, 36}};
    setenv("WGML_MATMUL_SPLITK", "3", 1);
    for (int v = 0; v < wgml_matmul_variant_count(); v++) {
        if (!is_tiled(v)) continue;
        wgml_matmul_force_variant(T.ctx, v);
        char label[96];
        snprintf(label, sizeof label, "split3 %s", wgml_matmul_variant_name(v));
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int t = 0; t < 4; t++) case_matmul(label, 0, 0, shapes[i][0], shapes[i][1], shapes[i][2], t & 1, t >> 1);
    }
    wgml_matmul_force_variant(T.ctx, -1);
    static const char *const counts[] = {"2", "7"};
    for (int c = 0; c < 2; c++) {
        setenv("WGML_MATMUL_SPLITK", counts[c], 1);
        char label[64];
        snprintf(label, sizeof label, "split%s", counts[c]);
        case_matmul(label, 0, 0, 70, 50, 333, 1, 0);
        case_matmul(label, 3, 3, 33, 17, 29, 0, 0);
        case_matmul(label, 4, 4, 20, 24, 100, 1, 1);
        case_matmul(label, 1, 5, 9, 11, 13, 0, 1);
        case_matmul(label, 5, 0, 9, 11, 13, 0, 0);
    }
    setenv("WGML_MATMUL_SPLITK", "4", 1);
    setenv("WGML_MATMUL_VARIANT", "db128x64_k16_r8x4", 1);
    case_matmul("split4 by $WGML_MATMUL_VARIANT", 0, 0, 40, 30, 50, 0, 1);
    unsetenv("WGML_MATMUL_VARIANT");
    test_linear();
    test_addmm();
    test_linear_dw();
    unsetenv("WGML_MATMUL_SPLITK");
}

/* Split-K in a built graph: linear (bias) -> mm, and linear_dw accumulating into a persistent
 * gradient, run twice with new inputs (the gradient holds the sum of both runs). */
static void test_splitk_graph(void) {
    setenv("WGML_MATMUL_SPLITK", "3", 1);
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t m = 24, k = 70, h = 20, n = 12;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){m, k});
    wgml_tensor *w1 = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){h, k});
    wgml_tensor *bias = wgml_tensor_new(g, WGML_F32, 1, (int64_t[]){h});
    wgml_tensor *w2 = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){h, n});
    wgml_tensor *dy = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){m, h});
    wgml_tensor *dw = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){h, k});
    wgml_tensor *out = wgml_mm(g, wgml_linear(g, x, w1, bias), w2);
    th_check(out && !wgml_linear_dw(g, dy, x, dw, 1) && !wgml_graph_keep(g, out) && !wgml_graph_compile(g),
             "split-K graph builds: %s", wgml_last_error(T.ctx));
    unsetenv("WGML_MATMUL_SPLITK");
    float *hw1 = th_random((size_t)(h * k), -1, 1), *hb = th_random((size_t)h, -1, 1);
    float *hw2 = th_random((size_t)(h * n), -1, 1);
    wgml_tensor_write(w1, hw1, wgml_tensor_nbytes(w1));
    wgml_tensor_write(bias, hb, wgml_tensor_nbytes(bias));
    wgml_tensor_write(w2, hw2, wgml_tensor_nbytes(w2));
    float *zero = calloc((size_t)(h * k), sizeof(float));
    wgml_tensor_write(dw, zero, wgml_tensor_nbytes(dw));
    double *dw_ref = calloc((size_t)(h * k), sizeof(double));
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(m * k), -1, 1), *hdy = th_random((size_t)(m * h), -1, 1);
        wgml_tensor_write(x, hx, wgml_tensor_nbytes(x));
        wgml_tensor_write(dy, hdy, wgml_tensor_nbytes(dy));
        th_check(!wgml_graph_run(g), "split-K graph run: %s", wgml_last_error(T.ctx));
        double *r1 = malloc(sizeof(double) * (size_t)(m * h)), *ro = malloc(sizeof(double) * (size_t)(m * n));
        double *d = malloc(sizeof(double) * (size_t)(h * k));
        ref_matmul(hx, hw1, r1, 1, m, h, k, 0, 1, 0, 0);
        for (int64_t i = 0; i < m * h; i++) r1[i] += hb[i % h];
        double *dw2 = to_double(hw2, (size_t)(h * n));
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)h, 1, r1, (int)h, dw2, (int)n, 0, ro,
                    (int)n);
        ref_matmul(hdy, hx, d, 1, h, k, m, 1, 0, 0, 0);
        for (int64_t i = 0; i < h * k; i++) dw_ref[i] += d[i];
        float *got = malloc(wgml_tensor_nbytes(out));
        th_check(!wgml_tensor_read(out, got, wgml_tensor_nbytes(out)), "read split-K graph output");
        th_close(run ? "split-K graph run 2" : "split-K graph run 1", got, ro, (size_t)(m * n), 4 * tol_abs(k), RTOL);
        float *gdw = th_read_f32(dw);
        th_close(run ? "split-K graph linear_dw accumulated twice" : "split-K graph linear_dw", gdw, dw_ref,
                 (size_t)(h * k), 2 * tol_abs(m), RTOL);
        free(got); free(gdw); free(hx); free(hdy); free(r1); free(ro); free(d); free(dw2);
    }
    free(hw1); free(hb); free(hw2); free(zero); free(dw_ref);
    wgml_graph_free(g);
}

static void test_huge_grid(void) {
    /* 70,000 batch entries of 2x2x3: one workgroup each, more than 65,535 in one dimension */
    wgml_matmul_force_variant(T.ctx, 2);
    case_matmul("grid > 65535 workgroups", 70000, 70000, 2, 2, 3, 0, 0);
    setenv("WGML_MATMUL_SPLITK", "2", 1);
    case_matmul("split2, grid > 65535 workgroups", 40000, 40000, 2, 2, 9, 0, 1);
    unsetenv("WGML_MATMUL_SPLITK");
    wgml_matmul_force_variant(T.ctx, -1);
}

static int variant_index(const char *name) {
    for (int v = 0; v < wgml_matmul_variant_count(); v++)
        if (!strcmp(wgml_matmul_variant_name(v), name)) return v;
    th_check(0, "variant %s exists", name);
    return -1;
}

static const char *const SKINNY_VARIANTS[] = {"skinny_r4_kt16", "skinny_r2_kt16", "skinny_r1_kt32", "skinny_r4_kt4",
                                              "outer_r4", "outer_r8"};
#define N_SKINNY (int)(sizeof SKINNY_VARIANTS / sizeof SKINNY_VARIANTS[0])

/* The skinny and outer-product variants in every orientation: vec4 paths (K, P, Q multiples
 * of 4), scalar paths (odd sizes), the short side as M (the skinny kernel swaps operands), a
 * short side over 32 (two q-blocks, the second partial), short K for the outer kernel, partial
 * row blocks everywhere; batched and broadcast batches; unsplit and split 3. */
static void test_skinny_variants(void) {
    static const int64_t shapes[][3] = {
        {1000, 16, 200}, /* LoRA's x·Aᵀ scaled down: vec4 on both operands */
        {301, 13, 71},   /* odd: scalar paths, partial blocks */
        {16, 300, 136},  /* short side M: swapped */
        {70, 40, 9},     /* short side 40: q-blocks of 32 and 8 */
        {150, 260, 16},  /* short K (u·Bᵀ) */
        {97, 131, 7},    /* short odd K */
    };
    double t0 = now_s();
    for (int i = 0; i < N_SKINNY; i++) {
        /* the automatic choices (the first skinny and the first outer variant) on every shape,
         * the others (the same kernels with other R / KT / TM) on two */
        bool main_v = i == 0 || i == 4;
        wgml_matmul_force_variant(T.ctx, variant_index(SKINNY_VARIANTS[i]));
        for (int sp = 0; sp < 2; sp++) {
            if (sp) setenv("WGML_MATMUL_SPLITK", "3", 1);
            char label[64];
            snprintf(label, sizeof label, "%s%s", sp ? "split3 " : "", SKINNY_VARIANTS[i]);
            for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
                if (!main_v && j != 1 && j != (i < 4 ? 2u : 5u)) continue;
                if (sp && j % 2 == 0 && j != 2) continue;
                for (int t = 0; t < 4; t++)
                    case_matmul(label, 0, 0, shapes[j][0], shapes[j][1], shapes[j][2], t & 1, t >> 1);
            }
            if (!main_v && sp) continue;
            case_matmul(label, 3, 3, 40, 8, 52, 1, 0);
            case_matmul(label, 1, 4, 9, 50, 33, 0, 1); /* a broadcast, swapped */
            if (!main_v) continue;
            case_matmul(label, 4, 0, 60, 12, 17, 1, 1); /* b broadcast */
            case_matmul(label, 2, 2, 36, 44, 8, 0, 0);
            unsetenv("WGML_MATMUL_SPLITK");
        }
        unsetenv("WGML_MATMUL_SPLITK");
    }
    wgml_matmul_force_variant(T.ctx, -1);
    printf("  skinny variants x orientations x split: %.1f s\n", now_s() - t0);
}

/* The epilogues through the skinny kernels, unswapped and swapped, unsplit and split 3:
 * linear's bias, addmm's C in four broadcasts, linear_dw's accumulation. */
static void case_epilogues(const char *label) {
    for (int sw = 0; sw < 2; sw++) {
        int64_t m = sw ? 9 : 70, n = sw ? 70 : 9, k = 30;
        float *ha = th_random((size_t)(m * k), -1, 1), *hb = th_random((size_t)(k * n), -1, 1);
        float *hc = th_random((size_t)(m * n), -1, 1);
        wgml_tensor *a = th_tensor_f32(2, (int64_t[]){m, k}, ha), *b = th_tensor_f32(2, (int64_t[]){k, n}, hb);
        double *ab = malloc(sizeof(double) * (size_t)(m * n)), *ref = malloc(sizeof(double) * (size_t)(m * n + n * k));
        ref_matmul(ha, hb, ab, 1, m, n, k, 0, 0, 0, 0);
        int64_t cshapes[4][2] = {{m, n}, {n, 0}, {1, n}, {m, 1}};
        int cranks[4] = {2, 1, 2, 2};
        for (int c = 0; c < 4; c++) {
            wgml_tensor *ct = th_tensor_f32(cranks[c], cshapes[c], hc);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    ref[i * n + j] = 0.5 * (c == 0 ? hc[i * n + j] : c == 3 ? hc[i] : hc[j]) - 2.0 * ab[i * n + j];
            char name[128];
            snprintf(name, sizeof name, "%s addmm %lldx%lldx%lld c%d", label, (long long)m, (long long)n, (long long)k, c);
            float *got = th_read_f32(wgml_addmm(T.g, ct, a, b, 0.5f, -2.0f));
            th_close(name, got, ref, (size_t)(m * n), tol_abs(k), RTOL);
            free(got);
            wgml_tensor_free(ct);
        }
        /* linear: x [m, k], w [n, k] (b's data reread as [n, k]), bias [n] */
        wgml_tensor *w = th_tensor_f32(2, (int64_t[]){n, k}, hb), *bias = th_tensor_f32(1, (int64_t[]){n}, hc);
        ref_matmul(ha, hb, ref, 1, m, n, k, 0, 1, 0, 0);
        for (int64_t i = 0; i < m * n; i++) ref[i] += hc[i % n];
        char name[128];
        snprintf(name, sizeof name, "%s linear+bias %lldx%lldx%lld", label, (long long)m, (long long)n, (long long)k);
        float *got = th_read_f32(wgml_linear(T.g, a, w, bias));
        th_close(name, got, ref, (size_t)(m * n), tol_abs(k), RTOL);
        free(got);
        /* linear_dw: dw[n, k] = dᵀ x with d = the C data as [m, n], x = a; then accumulated */
        wgml_tensor *d = th_tensor_f32(2, (int64_t[]){m, n}, hc), *dw = th_tensor_f32(2, (int64_t[]){n, k}, hb);
        ref_matmul(hc, ha, ref, 1, n, k, m, 1, 0, 0, 0);
        for (int64_t i = 0; i < n * k; i++) ref[i] += hb[i];
        th_check(!wgml_linear_dw(T.g, d, a, dw, 1), "linear_dw: %s", wgml_last_error(T.ctx));
        snprintf(name, sizeof name, "%s linear_dw acc %lldx%lldx%lld", label, (long long)n, (long long)k, (long long)m);
        got = th_read_f32(dw);
        th_close(name, got, ref, (size_t)(n * k), tol_abs(m), RTOL);
        free(got);
        free(ha); free(hb); free(hc); free(ab); free(ref);
        wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(w); wgml_tensor_free(bias);
        wgml_tensor_free(d); wgml_tensor_free(dw);
    }
}

static void test_skinny_epilogues(void) {
    for (int i = 0; i < N_SKINNY; i += 4) { /* skinny_r4_kt16 and outer_r4 */
        wgml_matmul_force_variant(T.ctx, variant_index(SKINNY_VARIANTS[i]));
        for (int sp = 0; sp < 2; sp++) {
            if (sp) setenv("WGML_MATMUL_SPLITK", "3", 1);
            char label[64];
            snprintf(label, sizeof label, "%s%s", sp ? "split3 " : "", SKINNY_VARIANTS[i]);
            case_epilogues(label);
            unsetenv("WGML_MATMUL_SPLITK");
        }
    }
    wgml_matmul_force_variant(T.ctx, -1);
}

/* The automatic choice: from 2^22 multiply-adds on, the outer kernel for K <= 32 and the
 * skinny one for a short side with K >= 2048 (LoRA's shapes scaled to this machine), the
 * tiled ones otherwise; the skinny split only where blocks are few. */
static void expect_plan(int64_t m, int64_t n, int64_t k, const char *want, int split_min, int split_max) {
    int v = -1, s = 0;
    matmul_plan(T.ctx, 1, m, n, k, &v, &s);
    th_check(!strcmp(wgml_matmul_variant_name(v), want) && s >= split_min && s <= split_max,
             "auto %lldx%lldx%lld: %s split %d (want %s, split %d..%d)", (long long)m, (long long)n, (long long)k,
             wgml_matmul_variant_name(v), s, want, split_min, split_max);
}

/* A LoRA adapter's four products at 2^22-2^23 multiply-adds in a built graph, with the
 * automatic choice: h = x·Aᵀ (32 x 32 tile), y = h·Bᵀ (outer), dB += dyᵀ·h (skinny, long K,
 * split), dA += dhᵀ·x (skinny, short side M: swapped, split); run twice with new inputs. */
static void test_skinny_graph(void) {
    double t0 = now_s();
    const int64_t M = 2048, K = 128, R = 16, N = 256;
    expect_plan(M, R, K, "tile32x32_k16_r4x4", 1, 2); /* short side, K < 2048: the tiled kernel */
    expect_plan(M, N, R, "outer_r8", 1, 1);
    expect_plan(N, R, M, "skinny_r2_kt16", 2, 64);
    expect_plan(R, K, M, "skinny_r2_kt16", 2, 64);
    expect_plan(M, 24, K, "tile32x32_k16_r4x4", 1, 2);
    expect_plan(1024, R, K, "tile32x32_k16_r4x4", 1, 1); /* 2^21: the tiled kernels */
    expect_plan(4096, 1536, 16, "outer_r8", 1, 1);      /* LoRA's H200 shapes */
    expect_plan(4096, 16, 576, "tile32x32_k16_r4x4", 2, 16);
    expect_plan(1536, 16, 4096, "skinny_r2_kt16", 2, 64);
    expect_plan(16, 576, 4096, "skinny_r2_kt16", 2, 64);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){M, K});
    wgml_tensor *A = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){R, K});
    wgml_tensor *B = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){N, R});
    wgml_tensor *dy = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){M, N});
    wgml_tensor *dh = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){M, R});
    wgml_tensor *dA = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){R, K});
    wgml_tensor *dB = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){N, R});
    wgml_tensor *h = wgml_linear(g, x, A, NULL);
    wgml_tensor *y = wgml_linear(g, h, B, NULL);
    th_check(y && !wgml_linear_dw(g, dy, h, dB, 1) && !wgml_linear_dw(g, dh, x, dA, 1) && !wgml_graph_keep(g, h) &&
                 !wgml_graph_keep(g, y) && !wgml_graph_compile(g),
             "skinny graph builds: %s", wgml_last_error(T.ctx));
    float *hA = th_random((size_t)(R * K), -1, 1), *hB = th_random((size_t)(N * R), -1, 1);
    wgml_tensor_write(A, hA, wgml_tensor_nbytes(A));
    wgml_tensor_write(B, hB, wgml_tensor_nbytes(B));
    float *zero = calloc((size_t)(N * K), sizeof(float));
    wgml_tensor_write(dA, zero, wgml_tensor_nbytes(dA));
    wgml_tensor_write(dB, zero, wgml_tensor_nbytes(dB));
    double *rdA = calloc((size_t)(R * K), sizeof(double)), *rdB = calloc((size_t)(N * R), sizeof(double));
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(M * K), -1, 1), *hdy = th_random((size_t)(M * N), -1, 1);
        float *hdh = th_random((size_t)(M * R), -1, 1);
        wgml_tensor_write(x, hx, wgml_tensor_nbytes(x));
        wgml_tensor_write(dy, hdy, wgml_tensor_nbytes(dy));
        wgml_tensor_write(dh, hdh, wgml_tensor_nbytes(dh));
        th_check(!wgml_graph_run(g), "skinny graph run: %s", wgml_last_error(T.ctx));
        double *rh = malloc(sizeof(double) * (size_t)(M * R)), *ry = malloc(sizeof(double) * (size_t)(M * N));
        double *t = malloc(sizeof(double) * (size_t)(N * K));
        ref_matmul(hx, hA, rh, 1, M, R, K, 0, 1, 0, 0);
        float *gh = th_read_f32(h); /* y and dB from wgml's h (its own check is above) */
        ref_matmul(gh, hB, ry, 1, M, N, R, 0, 1, 0, 0);
        ref_matmul(hdy, gh, t, 1, N, R, M, 1, 0, 0, 0);
        for (int64_t i = 0; i < N * R; i++) rdB[i] += t[i];
        ref_matmul(hdh, hx, t, 1, R, K, M, 1, 0, 0, 0);
        for (int64_t i = 0; i < R * K; i++) rdA[i] += t[i];
        th_close(run ? "skinny graph h = x·Aᵀ run 2" : "skinny graph h = x·Aᵀ", gh, rh, (size_t)(M * R), tol_abs(K), RTOL);
        float *gy = th_read_f32(y), *gA = th_read_f32(dA), *gB = th_read_f32(dB);
        th_close(run ? "skinny graph y = h·Bᵀ run 2" : "skinny graph y = h·Bᵀ", gy, ry, (size_t)(M * N), tol_abs(R), RTOL);
        th_close(run ? "skinny graph dB accumulated twice" : "skinny graph dB", gB, rdB, (size_t)(N * R), 2 * tol_abs(M),
                 RTOL);
        th_close(run ? "skinny graph dA accumulated twice" : "skinny graph dA", gA, rdA, (size_t)(R * K), 2 * tol_abs(M),
                 RTOL);
        free(hx); free(hdy); free(hdh); free(rh); free(ry); free(t); free(gh); free(gy); free(gA); free(gB);
    }
    free(hA); free(hB); free(zero); free(rdA); free(rdB);
    wgml_graph_free(g);
    printf("  skinny graph: %.1f s\n", now_s() - t0);
}

static void test_skinny_huge_grid(void) {
    /* 70,000 batch entries: one skinny block (or outer tile) each, more than 65,535 */
    static const char *const names[] = {"skinny_r4_kt16", "outer_r4"};
    for (int i = 0; i < 2; i++) {
        wgml_matmul_force_variant(T.ctx, variant_index(names[i]));
        char label[64];
        snprintf(label, sizeof label, "%s grid > 65535 workgroups", names[i]);
        case_matmul(label, 70000, 70000, 2, 3, 5, i, 1 - i);
        if (i) continue; /* the outer kernel's split path is the skinny one's (one reduction) */
        setenv("WGML_MATMUL_SPLITK", "2", 1);
        snprintf(label, sizeof label, "split2 %s grid > 65535 workgroups", names[i]);
        case_matmul(label, 40000, 40000, 3, 2, 9, 1, i);
        unsetenv("WGML_MATMUL_SPLITK");
    }
    wgml_matmul_force_variant(T.ctx, -1);
}

static void test_mm_bmm(void) {
    int64_t m = 23, n = 31, k = 19, B = 3;
    float *ha = th_random((size_t)(B * m * k), -2, 2), *hb = th_random((size_t)(B * k * n), -2, 2);
    int64_t sa[3] = {B, m, k}, sb[3] = {B, k, n};
    wgml_tensor *a2 = th_tensor_f32(2, sa + 1, ha), *b2 = th_tensor_f32(2, sb + 1, hb);
    wgml_tensor *a3 = th_tensor_f32(3, sa, ha), *b3 = th_tensor_f32(3, sb, hb);
    double *ref = malloc(sizeof(double) * (size_t)(B * m * n));
    ref_matmul(ha, hb, ref, B, m, n, k, 0, 0, m * k, k * n);
    float *o = th_read_f32(wgml_mm(T.g, a2, b2));
    th_close("mm 23x31x19", o, ref, (size_t)(m * n), tol_abs(k), RTOL);
    free(o);
    wgml_tensor *ob = wgml_bmm(T.g, a3, b3);
    th_check(ob && wgml_tensor_rank(ob) == 3 && wgml_tensor_dim(ob, 0) == B && wgml_tensor_dim(ob, 2) == n,
             "bmm output shape");
    o = th_read_f32(ob);
    th_close("bmm 3x23x31x19", o, ref, (size_t)(B * m * n), tol_abs(k), RTOL);
    free(o); free(ha); free(hb); free(ref);
}

static void test_linear(void) {
    int64_t xs[3] = {2, 3, 37}, ws[2] = {19, 37}, bs[1] = {19};
    int64_t m = 6, k = 37, n = 19;
    float *hx = th_random((size_t)(m * k), -1, 1), *hw = th_random((size_t)(n * k), -1, 1), *hb = th_random((size_t)n, -1, 1);
    wgml_tensor *x = th_tensor_f32(3, xs, hx), *w = th_tensor_f32(2, ws, hw), *b = th_tensor_f32(1, bs, hb);
    double *ref = malloc(sizeof(double) * (size_t)(m * n));
    ref_matmul(hx, hw, ref, 1, m, n, k, 0, 1, 0, 0);
    wgml_tensor *o = wgml_linear(T.g, x, w, NULL);
    th_check(o && wgml_tensor_rank(o) == 3 && wgml_tensor_dim(o, 0) == 2 && wgml_tensor_dim(o, 1) == 3 &&
                 wgml_tensor_dim(o, 2) == n,
             "linear keeps leading dims: [2, 3, 19]");
    float *got = th_read_f32(o);
    th_close("linear no bias [2,3,37]x[19,37]", got, ref, (size_t)(m * n), tol_abs(k), RTOL);
    free(got);
    for (int64_t i = 0; i < m * n; i++) ref[i] += hb[i % n];
    got = th_read_f32(wgml_linear(T.g, x, w, b));
    th_close("linear with bias", got, ref, (size_t)(m * n), tol_abs(k), RTOL);
    free(got); free(hx); free(hw); free(hb); free(ref);
}

static void test_addmm(void) {
    int64_t m = 17, n = 12, k = 9;
    float *ha = th_random((size_t)(m * k), -1, 1), *hb = th_random((size_t)(k * n), -1, 1);
    float *hc = th_random((size_t)(m * n), -1, 1);
    int64_t sa[2] = {m, k}, sb[2] = {k, n};
    wgml_tensor *a = th_tensor_f32(2, sa, ha), *b = th_tensor_f32(2, sb, hb);
    double *ab = malloc(sizeof(double) * (size_t)(m * n)), *ref = malloc(sizeof(double) * (size_t)(m * n));
    ref_matmul(ha, hb, ab, 1, m, n, k, 0, 0, 0, 0);
    const float beta = 0.5f, alpha = -2.0f;
    /* c as [M, N], [N], [1, N], [M, 1] */
    int64_t cshapes[4][2] = {{m, n}, {n, 0}, {1, n}, {m, 1}};
    int cranks[4] = {2, 1, 2, 2};
    const char *names[4] = {"addmm c [M,N]", "addmm c [N]", "addmm c [1,N]", "addmm c [M,1]"};
    for (int c = 0; c < 4; c++) {
        wgml_tensor *ct = th_tensor_f32(cranks[c], cshapes[c], hc);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double cv = c == 0 ? hc[i * n + j] : c == 3 ? hc[i] : hc[j];
                ref[i * n + j] = beta * cv + alpha * ab[i * n + j];
            }
        float *got = th_read_f32(wgml_addmm(T.g, ct, a, b, beta, alpha));
        th_close(names[c], got, ref, (size_t)(m * n), tol_abs(k), RTOL);
        free(got);
    }
    free(ha); free(hb); free(hc); free(ab); free(ref);
}

static void test_linear_dw(void) {
    int64_t m = 37, n = 21, k = 18;
    int64_t ds[3] = {37, 1, 21}, xs[2] = {37, 18}, ws[2] = {21, 18};
    float *hd = th_random((size_t)(m * n), -1, 1), *hx = th_random((size_t)(m * k), -1, 1);
    float *hw = th_random((size_t)(n * k), -1, 1);
    wgml_tensor *d = th_tensor_f32(3, ds, hd), *x = th_tensor_f32(2, xs, hx), *w = th_tensor_f32(2, ws, hw);
    double *ref = malloc(sizeof(double) * (size_t)(n * k));
    ref_matmul(hd, hx, ref, 1, n, k, m, 1, 0, 0, 0);
    th_check(!wgml_linear_dw(T.g, d, x, w, 0), "linear_dw overwrite: %s", wgml_last_error(T.ctx));
    float *got = th_read_f32(w);
    th_close("linear_dw overwrite", got, ref, (size_t)(n * k), tol_abs(m), RTOL);
    free(got);
    for (int64_t i = 0; i < n * k; i++) ref[i] *= 2;
    th_check(!wgml_linear_dw(T.g, d, x, w, 1), "linear_dw accumulate: %s", wgml_last_error(T.ctx));
    got = th_read_f32(w);
    th_close("linear_dw accumulate (twice the gradient)", got, ref, (size_t)(n * k), tol_abs(m), RTOL);
    th_expect_error("linear_dw shape", wgml_linear_dw(T.g, x, d, w, 0) != 0, WGML_ERR_SHAPE, "linear_dw", NULL);
    free(got); free(hd); free(hx); free(hw); free(ref);
}

/* A built graph: x -> linear -> mm -> linear, intermediates in the arena, run twice with new
 * inputs; the arena is smaller than the sum of the intermediates. */
/* arena_cap > 0: intermediates limited to arenas of that many bytes ($WGML_ARENA_BYTES), so
 * the plan spreads them over several arenas. */
static void test_graph(const char *arena_cap) {
    if (arena_cap) setenv("WGML_ARENA_BYTES", arena_cap, 1);
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t m = 40, k = 24, h = 36, n = 20;
    int64_t xs[2] = {m, k}, w1s[2] = {h, k}, w2s[2] = {h, h}, w3s[2] = {n, h};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w1 = wgml_tensor_new(g, WGML_F32, 2, w1s);
    wgml_tensor *w2 = wgml_tensor_new(g, WGML_F32, 2, w2s), *w3 = wgml_tensor_new(g, WGML_F32, 2, w3s);
    wgml_tensor *h1 = wgml_linear(g, x, w1, NULL);
    wgml_tensor *h2 = wgml_mm(g, h1, w2);
    wgml_tensor *h3 = wgml_mm(g, h2, w2);
    wgml_tensor *out = wgml_linear(g, h3, w3, NULL);
    th_check(out && !wgml_graph_keep(g, out) && !wgml_graph_compile(g), "graph builds and compiles: %s",
             wgml_last_error(T.ctx));
    if (arena_cap) {
        unsetenv("WGML_ARENA_BYTES");
        /* one [40, 36] tensor (5,888 bytes aligned) per arena: h1 and h2 are live together */
        th_check(wgml_graph_arena_count(g) == 2, "arenas of %s bytes: %d arenas (want 2)", arena_cap,
                 wgml_graph_arena_count(g));
    } else {
        th_check(wgml_graph_arena_count(g) == 1, "one arena: %d", wgml_graph_arena_count(g));
    }
    uint64_t sum = wgml_tensor_nbytes(h1) + wgml_tensor_nbytes(h2) + wgml_tensor_nbytes(h3) + wgml_tensor_nbytes(out);
    /* h1 and h3, h2 and out are never live together: two slots suffice */
    th_check(wgml_graph_arena_bytes(g) < sum && wgml_graph_arena_bytes(g) >= wgml_tensor_nbytes(h1) + wgml_tensor_nbytes(h2),
             "arena reuses memory (%llu bytes for 4 intermediates of %llu)",
             (unsigned long long)wgml_graph_arena_bytes(g), (unsigned long long)sum);
    float *hw1 = th_random((size_t)(h * k), -1, 1), *hw2 = th_random((size_t)(h * h), -1, 1);
    float *hw3 = th_random((size_t)(n * h), -1, 1);
    wgml_tensor_write(w1, hw1, wgml_tensor_nbytes(w1));
    wgml_tensor_write(w2, hw2, wgml_tensor_nbytes(w2));
    wgml_tensor_write(w3, hw3, wgml_tensor_nbytes(w3));
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(m * k), -1, 1);
        wgml_tensor_write(x, hx, wgml_tensor_nbytes(x));
        uint64_t before = wgml_submit_count(T.ctx);
        th_check(!wgml_graph_run(g), "graph run: %s", wgml_last_error(T.ctx));
        th_check(wgml_submit_count(T.ctx) == before + 1, "a run is one submit");
        double *r1 = malloc(sizeof(double) * (size_t)(m * h)), *r2 = malloc(sizeof(double) * (size_t)(m * h));
        double *r3 = malloc(sizeof(double) * (size_t)(m * h)), *ro = malloc(sizeof(double) * (size_t)(m * n));
        double *dw2 = to_double(hw2, (size_t)(h * h)), *dw3 = to_double(hw3, (size_t)(n * h));
        ref_matmul(hx, hw1, r1, 1, m, h, k, 0, 1, 0, 0);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)h, (int)h, 1, r1, (int)h, dw2, (int)h, 0, r2, (int)h);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)h, (int)h, 1, r2, (int)h, dw2, (int)h, 0, r3, (int)h);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)h, 1, r3, (int)h, dw3, (int)h, 0, ro, (int)n);
        float *got = malloc(wgml_tensor_nbytes(out));
        th_check(!wgml_tensor_read(out, got, wgml_tensor_nbytes(out)), "read graph output");
        th_close(run ? "graph run 2" : "graph run 1", got, ro, (size_t)(m * n), 4 * tol_abs(h), RTOL);
        free(got); free(hx); free(r1); free(r2); free(r3); free(ro); free(dw2); free(dw3);
    }
    /* profiling: one time per dispatch, each positive, named by its op; the profiled run
     * computes the same result; recording cost is counted per dispatch */
    size_t nd = wgml_graph_dispatch_count(g);
    double *per = malloc(sizeof(double) * nd);
    for (size_t i = 0; i < nd; i++) per[i] = -1;
    uint64_t rec_ns0, rec_n0, rec_ns1, rec_n1;
    wgml_record_stats(T.ctx, &rec_ns0, &rec_n0);
    th_check(!wgml_graph_run(g), "graph run: %s", wgml_last_error(T.ctx));
    wgml_record_stats(T.ctx, &rec_ns1, &rec_n1);
    th_check(rec_n1 == rec_n0 + nd && rec_ns1 > rec_ns0, "record stats: %llu dispatches, %llu ns more",
             (unsigned long long)(rec_n1 - rec_n0), (unsigned long long)(rec_ns1 - rec_ns0));
    wgml_status ps = wgml_graph_profile(g, per);
    if (ps == WGML_ERR_UNSUPPORTED) {
        th_check(strstr(wgml_last_error(T.ctx), "timestamp") != NULL, "profile refused: %s", wgml_last_error(T.ctx));
    } else {
        th_check(ps == WGML_OK, "graph profile: %s", wgml_last_error(T.ctx));
        for (size_t i = 0; i < nd; i++) {
            const char *shader = NULL, *op = wgml_graph_dispatch_name(g, i, &shader);
            th_check(per[i] >= 0 && op && shader, "dispatch %zu: %s/%s %.3g s", i, op ? op : "?", shader ? shader : "?", per[i]);
        }
    }
    th_check(wgml_graph_dispatch_name(g, nd, NULL) == NULL, "no name past the last dispatch");
    th_expect_error("profile without an output array", wgml_graph_profile(g, NULL) != 0, WGML_ERR_ARG, "wgml_graph_profile", NULL);
    free(per);
    float *buf = malloc(wgml_tensor_nbytes(h1));
    th_expect_error("reading an intermediate that was not kept", wgml_tensor_read(h1, buf, wgml_tensor_nbytes(h1)) != 0,
                    WGML_ERR_STATE, "wgml_graph_keep", NULL);
    free(buf);
    th_expect_error("adding to a compiled graph", wgml_mm(g, h1, w2) == NULL, WGML_ERR_STATE, "compiled", NULL);
    free(hw1); free(hw2); free(hw3);
    wgml_graph_free(g);
}

/* Views: a reshape of an intermediate in a built graph keeps its memory alive; a view of a
 * persistent buffer is read and written in place. */
static void test_views(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t m = 12, k = 8, n = 6;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){m, k});
    wgml_tensor *w = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){n, k});
    wgml_tensor *h = wgml_linear(g, x, w, NULL);                          /* [12, 6] */
    wgml_tensor *h3 = wgml_reshape(g, h, 3, (int64_t[]){2, 6, 6});       /* view of an intermediate */
    wgml_tensor *w3 = wgml_reshape(g, w, 3, (int64_t[]){1, 6, 8});
    wgml_tensor *o = wgml_matmul(g, h3, w3, 0, 0);                         /* [2, 6, 8] */
    th_check(o && !wgml_graph_keep(g, o) && !wgml_graph_compile(g), "views in a built graph: %s", wgml_last_error(T.ctx));
    float *hx = th_random((size_t)(m * k), -1, 1), *hw = th_random((size_t)(n * k), -1, 1);
    wgml_tensor_write(x, hx, wgml_tensor_nbytes(x));
    wgml_tensor_write(w, hw, wgml_tensor_nbytes(w));
    th_check(!wgml_graph_run(g), "run: %s", wgml_last_error(T.ctx));
    double *r1 = malloc(sizeof(double) * (size_t)(m * n)), *ref = malloc(sizeof(double) * (size_t)(m * k));
    ref_matmul(hx, hw, r1, 1, m, n, k, 0, 1, 0, 0);
    float *r1f = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m * n; i++) r1f[i] = (float)r1[i];
    ref_matmul(r1f, hw, ref, 2, 6, 8, 6, 0, 0, 36, 0);
    float *got = malloc(wgml_tensor_nbytes(o));
    th_check(!wgml_tensor_read(o, got, wgml_tensor_nbytes(o)), "read: %s", wgml_last_error(T.ctx));
    th_close("reshape views in a graph", got, ref, (size_t)(m * k), 1e-4, 1e-3);
    free(got); free(r1); free(r1f); free(ref); free(hx); free(hw);
    wgml_graph_free(g);
    /* eager: a flat buffer holding two tensors; views written and read in place */
    int64_t total = 512;
    wgml_tensor *flat = wgml_tensor_new(T.g, WGML_F32, 1, &total);
    wgml_fill(T.g, flat, 0.0);
    wgml_tensor *v0 = wgml_tensor_view(flat, 0, 2, (int64_t[]){4, 8});
    wgml_tensor *v1 = wgml_tensor_view(flat, 256, 2, (int64_t[]){8, 4});
    float a[32];
    for (int i = 0; i < 32; i++) a[i] = (float)i;
    wgml_tensor_write(v1, a, sizeof a);
    float *prod = th_read_f32(wgml_mm(T.g, v0, v1));
    double zero[16] = {0};
    th_close("views of one buffer (zeros times data)", prod, zero, 16, 0, 0);
    float *back = th_read_f32(flat);
    double want[512] = {0};
    for (int i = 0; i < 32; i++) want[256 + i] = i;
    th_close("a view's write lands at its offset", back, want, 512, 0, 0);
    free(prod); free(back);
    th_expect_error("unaligned view", wgml_tensor_view(flat, 3, 1, (int64_t[]){4}) == NULL, WGML_ERR_ARG, "alignment", NULL);
    th_expect_error("view past the end", wgml_tensor_view(flat, 256, 1, (int64_t[]){300}) == NULL, WGML_ERR_SHAPE, "do not fit", NULL);
    th_expect_error("reshape numel", wgml_reshape(T.g, flat, 2, (int64_t[]){5, 100}) == NULL, WGML_ERR_SHAPE, "512", NULL);
    wgml_tensor_free(flat); /* its views keep the memory until they go */
    float *still = th_read_f32(v1);
    double want1[32];
    for (int i = 0; i < 32; i++) want1[i] = i;
    th_close("a view outlives its freed base", still, want1, 32, 0, 0);
    free(still);
    wgml_tensor_free(v0);
    wgml_tensor_free(v1);
}

static void test_bad_input(void) {
    int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s0[2] = {2, 0}, s333[3] = {3, 3, 3}, s233[3] = {2, 3, 3};
    float z[64] = {0};
    wgml_tensor *a = th_tensor_f32(2, s23, z), *b = th_tensor_f32(2, s45, z);
    th_expect_error("mm inner mismatch", wgml_mm(T.g, a, b) == NULL, WGML_ERR_SHAPE, "mm", "[2, 3]", "[4, 5]", NULL);
    th_expect_error("mm NULL b", wgml_mm(T.g, a, NULL) == NULL, WGML_ERR_ARG, "mm", "b is NULL", NULL);
    th_expect_error("zero-size dim", wgml_tensor_new(T.g, WGML_F32, 2, s0) == NULL, WGML_ERR_SHAPE, "zero", "[2, 0]", NULL);
    int32_t zi[16] = {0};
    wgml_tensor *ai = th_tensor_i32(2, s23, zi);
    wgml_tensor *c = th_tensor_f32(2, (int64_t[]){3, 4}, z);
    th_expect_error("mm wrong dtype", wgml_mm(T.g, ai, c) == NULL, WGML_ERR_DTYPE, "mm", "a must be f32", "i32", NULL);
    wgml_tensor *a3 = th_tensor_f32(3, s333, z), *b3 = th_tensor_f32(3, s233, z);
    th_expect_error("bmm batch mismatch", wgml_bmm(T.g, a3, b3) == NULL, WGML_ERR_SHAPE, "bmm", "[3, 3, 3]", NULL);
    th_expect_error("mm rank", wgml_mm(T.g, a3, c) == NULL, WGML_ERR_SHAPE, "mm", "rank 2", NULL);
    wgml_tensor *w = th_tensor_f32(2, (int64_t[]){4, 3}, z), *bias = th_tensor_f32(1, (int64_t[]){5}, z);
    th_expect_error("linear bias shape", wgml_linear(T.g, a, w, bias) == NULL, WGML_ERR_SHAPE, "linear", "bias [5]", NULL);
    th_expect_error("linear w shape", wgml_linear(T.g, a, b, NULL) == NULL, WGML_ERR_SHAPE, "linear", "[4, 5]", NULL);
    wgml_tensor *cc = th_tensor_f32(2, (int64_t[]){3, 3}, z);
    th_expect_error("addmm c broadcast", wgml_addmm(T.g, cc, a, c, 1, 1) == NULL, WGML_ERR_SHAPE, "addmm", "[3, 3]", NULL);
    th_expect_error("write size", wgml_tensor_write(a, z, 4) != 0, WGML_ERR_ARG, "24 bytes", NULL);
    th_expect_error("rank 9", wgml_tensor_new(T.g, WGML_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}) == NULL,
                    WGML_ERR_SHAPE, "rank 9", NULL);
    /* the context still works after all of that */
    float *got = th_read_f32(wgml_mm(T.g, a, c));
    double ref[8] = {0};
    th_close("mm after errors", got, ref, 8, 1e-6, 1e-6);
    free(got);
}

int main(int argc, char **argv) {
    th_init_args("test_matmul", argc, argv);
    test_shapes_all_variants();
    test_mm_bmm();
    test_linear();
    test_addmm();
    test_linear_dw();
    test_graph(NULL);
    test_graph("6000");
    test_views();
    test_splitk();
    test_splitk_graph();
    test_huge_grid();
    test_skinny_variants();
    test_skinny_epilogues();
    test_skinny_graph();
    test_skinny_huge_grid();
    test_bad_input();
    return th_done();
}
