#define _POSIX_C_SOURCE 200809L
/* The skinny matmul kernel (matmul_skinny.wgsl) in its automatic variant skinny_r4_kt16
 * against OpenBLAS cblas_dgemm in double precision: every orientation, unsplit and split-K,
 * the epilogues, the automatic choice in a LoRA-shaped built graph, a grid over 65,535
 * workgroups. The other skinny variants: test_matmul_skinny_kt; the outer-product ones:
 * test_matmul_outer. */
#include "matmul_skinny_cases.h"

/* The automatic choice: from 2^22 multiply-adds on, the outer kernel for K <= 32 and the
 * skinny one for a short side with K >= 2048, or a side <= 16 with K >= 128 whose operand is
 * read a k at a time (LoRA's dy·B; shapes scaled to this machine), the tiled ones otherwise;
 * the skinny split only where blocks are few, each slice of a K-contiguous long operand at
 * least 6 steps deep. */
static void expect_plan(int64_t m, int64_t n, int64_t k, int ta, int tb, const char *want, int split_min,
                        int split_max) {
    int v = -1, s = 0;
    matmul_plan(T.ctx, 1, m, n, k, ta, tb, &v, &s);
    th_check(!strcmp(wgml_matmul_variant_name(v), want) && s >= split_min && s <= split_max,
             "auto %lldx%lldx%lld (%c%c): %s split %d (want %s, split %d..%d)", (long long)m, (long long)n,
             (long long)k, ta ? 'T' : 'N', tb ? 'T' : 'N', wgml_matmul_variant_name(v), s, want, split_min, split_max);
}

/* A LoRA adapter's four products at 2^22-2^23 multiply-adds in a built graph, with the
 * automatic choice: h = x·Aᵀ (32 x 32 tile), y = h·Bᵀ (outer), dB += dyᵀ·h (skinny, long K,
 * split), dA += dhᵀ·x (skinny, short side M: swapped, split); run twice with new inputs. */
static void test_skinny_graph(void) {
    double t0 = now();
    const int64_t M = 2048, K = 128, R = 16, N = 256;
    expect_plan(M, R, K, 0, 1, "tile32x32_k16_r4x4", 1, 2); /* x·Aᵀ, K < 2048: the tiled kernel */
    expect_plan(M, R, K, 0, 0, "skinny_r2_kt16", 1, 1);     /* dy·B: skinny, 2 steps, unsplit */
    expect_plan(M, N, R, 0, 1, "outer_r8", 1, 1);
    expect_plan(N, R, M, 1, 0, "skinny_r2_kt16", 2, 64);
    expect_plan(R, K, M, 1, 0, "skinny_r2_kt16", 2, 64);
    expect_plan(M, 24, K, 0, 0, "tile32x32_k16_r4x4", 1, 2);  /* a side of 24, K < 2048: the tiled kernel */
    expect_plan(1024, R, K, 0, 0, "tile32x32_k16_r4x4", 1, 1); /* 2^21: the tiled kernels */
    expect_plan(4096, 1536, 16, 0, 1, "outer_r8", 1, 1);      /* LoRA's H100 shapes */
    expect_plan(4096, 16, 576, 0, 1, "tile32x32_k16_r4x4", 2, 16);
    expect_plan(4096, 16, 576, 0, 0, "skinny_r2_kt16", 1, 1);
    expect_plan(4096, 16, 1536, 0, 0, "skinny_r2_kt16", 4, 4);
    expect_plan(1536, 16, 4096, 1, 0, "skinny_r2_kt16", 2, 64);
    expect_plan(16, 576, 4096, 1, 0, "skinny_r2_kt16", 2, 64);
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
    printf("  skinny graph: %.1f s\n", now() - t0);
}

static void part_variants(void) { test_skinny_variants(0, 0, SKINNY_UNSPLIT); }
static void part_split(void) { test_skinny_variants(0, 0, SKINNY_SPLIT); }

static void part_epilogues(void) {
    test_skinny_epilogues(0);
    test_skinny_graph();
}

static void part_huge(void) { test_skinny_huge_grid(0); }

/* Parts: the variant unsplit, split 3; its epilogues and a built graph; more than 65,535
 * workgroups. */
int main(int argc, char **argv) {
    th_init_args("test_matmul_skinny", argc, argv);
    static const th_part parts[] = {
        {"variants", part_variants}, {"split", part_split}, {"epilogues", part_epilogues}, {"huge", part_huge}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
