/* The shared part of the matmul tests (test_matmul, test_matmul_tile, test_matmul_db,
 * test_matmul_splitk, test_matmul_skinny, test_matmul_skinny_kt, test_matmul_outer; split so
 * that each runs in about two minutes):
 * the fp64 reference (OpenBLAS cblas_dgemm in double precision), one checked matmul case and
 * the variant lookups. Static inline so that each test uses what it needs. */
#ifndef WGML_TEST_MATMUL_CASES_H
#define WGML_TEST_MATMUL_CASES_H

#include "harness.h"
#include "ops/matmul/matmul_plan.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

static inline double *to_double(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static inline double tol_abs(int64_t k) { return 1e-4 * fmax(1.0, sqrt((double)k) / 8.0); }
#define RTOL 1e-3

/* out[b] = op(a[b]) op(b[b]) for batch entries (stride 0 broadcasts), reference in fp64. */
static inline void ref_matmul(const float *a, const float *b, double *out, int64_t batch, int64_t m, int64_t n, int64_t k,
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
static inline void case_matmul(const char *label, int64_t ba, int64_t bb, int64_t m, int64_t n, int64_t k, int ta, int tb) {
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
 * outer-product ones have their own shapes (matmul_skinny_cases.h). */
static inline bool is_tiled(int v) {
    const char *n = wgml_matmul_variant_name(v);
    return v < 0 || !strncmp(n, "tile", 4) || !strncmp(n, "db", 2);
}

static inline int variant_index(const char *name) {
    for (int v = 0; v < wgml_matmul_variant_count(); v++)
        if (!strcmp(wgml_matmul_variant_name(v), name)) return v;
    th_check(0, "variant %s exists", name);
    return -1;
}

/* Every shape of the variant set, in the orientations of orients (bit ta + 2 tb: 0xF all four),
 * on the tiled variants whose names start with prefix ("tile": matmul.wgsl, "db":
 * matmul_db.wgsl), the first..last of them in index order, and on the automatic choice (-1)
 * first when with_auto. Each orientation and vec4 path is a pipeline of its own (about 6 s
 * each for a 128 x 128 tile on Dawn's SwiftShader), hence the halves by orientation. */
static inline void case_variant_shapes(const char *prefix, bool with_auto, int first, int last, unsigned orients) {
    static const int64_t shapes[][3] = {
        {64, 64, 64},   /* square */
        {129, 37, 65},  /* partial tiles in M, N and K */
        {7, 5, 3},      /* smaller than a tile */
        {33, 17, 1},    /* K = 1 */
        {300, 6, 20},   /* tall and skinny */
        {5, 260, 12},   /* short and wide */
        {132, 136, 36}, /* vec4 path on both operands, partial tiles */
    };
    int seen = 0;
    for (int v = with_auto ? -1 : 0; v < wgml_matmul_variant_count(); v++) {
        if (v >= 0 && strncmp(wgml_matmul_variant_name(v), prefix, strlen(prefix))) continue;
        if (v >= 0 && (seen++ < first || seen - 1 > last)) continue;
        wgml_matmul_force_variant(T.ctx, v);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int t = 0; t < 4; t++)
                if (orients >> t & 1u)
                    case_matmul(wgml_matmul_variant_name(v), 0, 0, shapes[i][0], shapes[i][1], shapes[i][2], t & 1, t >> 1);
    }
    th_check(seen > last, "%s variants %d..%d: only %d exist", prefix, first, last, seen); /* last -1: auto only */
    wgml_matmul_force_variant(T.ctx, -1);
}

#endif
