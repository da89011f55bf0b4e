/* The skinny and outer-product variants' cases, shared by test_matmul_skinny and
 * test_matmul_skinny_kt (matmul_skinny.wgsl) and test_matmul_outer (matmul_outer.wgsl), split so
 * that each runs in about two minutes. */
#ifndef WGML_TEST_MATMUL_SKINNY_CASES_H
#define WGML_TEST_MATMUL_SKINNY_CASES_H

#include "matmul_cases.h"

static const char *const SKINNY_VARIANTS[] __attribute__((unused)) = {"skinny_r4_kt16", "skinny_r2_kt16", "skinny_r1_kt32", "skinny_r4_kt4",
                                              "outer_r4", "outer_r8"};
#define N_SKINNY (int)(sizeof SKINNY_VARIANTS / sizeof SKINNY_VARIANTS[0])

/* The skinny and outer-product variants in every orientation: vec4 paths (K, P, Q multiples
 * of 4), scalar paths (odd sizes), the short side as M (the skinny kernel swaps operands), a
 * short side over 32 (two q-blocks, the second partial), short K for the outer kernel, partial
 * row blocks everywhere; batched and broadcast batches; unsplit and split 3. Variants
 * SKINNY_VARIANTS[first..last]; passes: SKINNY_UNSPLIT, SKINNY_SPLIT or both (each case is a
 * pipeline of its own, so the two passes are parts of their own where they are long). */
enum { SKINNY_UNSPLIT = 1, SKINNY_SPLIT = 2, SKINNY_BOTH = 3 };
static inline void test_skinny_variants(int first, int last, int passes) {
    static const int64_t shapes[][3] = {
        {1000, 16, 200}, /* LoRA's x·Aᵀ scaled down: vec4 on both operands */
        {301, 13, 71},   /* odd: scalar paths, partial blocks */
        {16, 300, 136},  /* short side M: swapped */
        {70, 40, 9},     /* short side 40: q-blocks of 32 and 8 */
        {150, 260, 16},  /* short K (u·Bᵀ) */
        {97, 131, 7},    /* short odd K */
    };
    double t0 = now();
    for (int i = first; i <= last; i++) {
        /* the automatic choices (the first skinny and the first outer variant) on every shape,
         * the others (the same kernels with other R / KT / TM) on two */
        bool main_v = i == 0 || i == 4;
        wgml_matmul_force_variant(T.ctx, variant_index(SKINNY_VARIANTS[i]));
        for (int sp = 0; sp < 2; sp++) {
            if (!(passes & (1 << sp))) continue;
            if (sp) th_setenv("WGML_MATMUL_SPLITK", "3", 1);
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
            th_unsetenv("WGML_MATMUL_SPLITK");
        }
        th_unsetenv("WGML_MATMUL_SPLITK");
    }
    wgml_matmul_force_variant(T.ctx, -1);
    printf("  %s .. %s x orientations%s: %.1f s\n", SKINNY_VARIANTS[first], SKINNY_VARIANTS[last],
           passes == SKINNY_BOTH ? " x split" : passes == SKINNY_SPLIT ? ", split 3" : ", unsplit", now() - t0);
}

/* The epilogues through the skinny kernels, unswapped and swapped, unsplit and split 3:
 * linear's bias, addmm's C in four broadcasts, linear_dw's accumulation. */
static inline void case_epilogues(const char *label) {
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

/* The epilogues through variant SKINNY_VARIANTS[i] (skinny_r4_kt16: 0, outer_r4: 4), unsplit
 * and split 3. */
static inline void test_skinny_epilogues(int i) {
    wgml_matmul_force_variant(T.ctx, variant_index(SKINNY_VARIANTS[i]));
    for (int sp = 0; sp < 2; sp++) {
        if (sp) th_setenv("WGML_MATMUL_SPLITK", "3", 1);
        char label[64];
        snprintf(label, sizeof label, "%s%s", sp ? "split3 " : "", SKINNY_VARIANTS[i]);
        case_epilogues(label);
        th_unsetenv("WGML_MATMUL_SPLITK");
    }
    wgml_matmul_force_variant(T.ctx, -1);
}

/* 70,000 batch entries: one skinny block (or outer tile) each, more than 65,535 workgroups;
 * i: 0 the skinny kernel (and its split path), 1 the outer kernel (whose split path is the
 * skinny one's: one reduction) */
static inline void test_skinny_huge_grid(int i) {
    static const char *const names[] = {"skinny_r4_kt16", "outer_r4"};
    wgml_matmul_force_variant(T.ctx, variant_index(names[i]));
    char label[64];
    snprintf(label, sizeof label, "%s grid > 65535 workgroups", names[i]);
    case_matmul(label, 70000, 70000, 2, 3, 5, i, 1 - i);
    if (i == 0) {
        th_setenv("WGML_MATMUL_SPLITK", "2", 1);
        snprintf(label, sizeof label, "split2 %s grid > 65535 workgroups", names[i]);
        case_matmul(label, 40000, 40000, 3, 2, 9, 1, i);
        th_unsetenv("WGML_MATMUL_SPLITK");
    }
    wgml_matmul_force_variant(T.ctx, -1);
}

#endif
