#define _POSIX_C_SOURCE 200809L
/* The skinny and outer-product matmul variants (matmul_skinny.wgsl, matmul_outer.wgsl) against
 * OpenBLAS cblas_dgemm in double precision: every orientation, unsplit and split-K, their
 * epilogues, the automatic choice in a LoRA-shaped built graph, a grid over 65,535 workgroups. */
#include "matmul_cases.h"

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

int main(int argc, char **argv) {
    th_init_args("test_matmul_skinny", argc, argv);
    test_skinny_variants();
    test_skinny_epilogues();
    test_skinny_graph();
    test_skinny_huge_grid();
    return th_done();
}
