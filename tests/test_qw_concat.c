#define _POSIX_C_SOURCE 200809L
/* The prefill's forms of the 4-bit product, against fp64 products of the host dequantisation:
 * - weights of one input stored as one (ops/qweight/qw_concat.h, qw_share.h's qw_weight_rows): the
 *   concatenated product qw_linear_concat, whose output is the parts side by side (the GEMM's
 *   segmented store), each part checked; both GEMM kernels (qw_mm, qw_mm_db), split-K on and
 *   off, 2 and 3 parts, a bias, the GGUF kinds; the rows of a weight as a weight of its own
 *   (views) through the GEMV and the GEMM; a built graph run twice with a consumer of the
 *   parts;
 * - the product left in its split-K slices (ops/qweight/qw_parts.h): the slices' sum, split and not;
 * - the cases they do not take, bad input. */
#include "harness.h"

#include "ops/qweight/qw_concat.h"
#include "ops/qweight/qw_parts.h"
#include "ops/qweight/qw_share.h"
#include "qw_host.h"

static uint64_t dispatches_so_far(void) {
    uint64_t ns, d;
    wgml_record_stats(T.ctx, &ns, &d);
    return d;
}

/* One qw_linear_concat in the eager graph: a weight of `kind` with rows ns[0..n) concatenated,
 * x [m, k] random; each part against fp64, then each part's rows as a weight of their own
 * (qw_weight_rows) through wgml_qlinear at m rows and at one row. variant/splits: forced
 * through the environment (NULL / 0: automatic); with splits 1 the call must be one GEMM. */
static void case_concat(int kind, const int64_t *ns, int n, int64_t m, int64_t k, bool bias, const char *variant,
                        int splits) {
    double t0 = now();
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += ns[i];
    if (variant) th_setenv("WGML_QW_MM_VARIANT", variant, 1);
    char sb[16];
    snprintf(sb, sizeof sb, "%d", splits);
    if (splits) th_setenv("WGML_QW_MM_SPLITK", sb, 1);
    char name[200];
    int len = snprintf(name, sizeof name, "%s%s M=%lld K=%lld %s S=%s parts", KIND_NAMES[kind], bias ? "+b" : "",
                       (long long)m, (long long)k, variant ? variant : "auto", splits ? sb : "auto");
    for (int i = 0; i < n; i++) len += snprintf(name + len, sizeof name - (size_t)len, " %lld", (long long)ns[i]);
    hw h = make_weight(T.g, kind, total, k, 32, bias);
    float *hx = th_random((size_t)(m * k), -1, 1);
    int64_t xs[2] = {m, k};
    wgml_tensor *x = th_tensor_f32(2, xs, hx), *outs[3] = {NULL, NULL, NULL};
    th_check(qw_concat_applies(T.g, x, h.w, n, ns), "%s: applies", name);
    wgml_sync(T.ctx);
    uint64_t d0 = dispatches_so_far();
    wgml_status s = qw_linear_concat(T.g, "test", x, h.w, n, ns, outs);
    wgml_sync(T.ctx);
    th_check(s == WGML_OK, "%s: %s", name, wgml_last_error(T.ctx));
    /* the output's NaN fill (the harness's context) and the one GEMM */
    if (splits == 1) th_check(dispatches_so_far() - d0 == 2, "%s: one GEMM", name);
    th_unsetenv("WGML_QW_MM_VARIANT");
    th_unsetenv("WGML_QW_MM_SPLITK");
    for (int64_t i = 0, r0 = 0; i < n && s == WGML_OK; r0 += ns[i++]) {
        char pn[260];
        snprintf(pn, sizeof pn, "%s: part %lld", name, (long long)i);
        th_check(outs[i] && wgml_tensor_rank(outs[i]) == 2 && wgml_tensor_dim(outs[i], 0) == m &&
                     wgml_tensor_dim(outs[i], 1) == ns[i],
                 "%s shape", pn);
        float *got = th_read_f32(outs[i]);
        double *ref = ref_rows(hx, &h, r0, m, ns[i], k);
        if (got) th_close(pn, got, ref, (size_t)(m * ns[i]), tol_abs(k), RTOL);
        free(got);
        /* the same rows as a weight of their own: the GEMM at m rows, the GEMV at one */
        th_check(qw_weight_rows_fit(T.ctx, h.w, r0, ns[i]), "%s: rows fit", pn);
        wgml_qweight *pw = qw_weight_rows(h.w, r0, ns[i]);
        th_check(pw && pw->n == ns[i] && (pw->bias != NULL) == bias, "%s: rows weight: %s", pn, wgml_last_error(T.ctx));
        if (pw) {
            int64_t one[2] = {1, k};
            wgml_tensor *y = wgml_qlinear(T.g, x, pw), *xr = th_tensor_f32(2, one, hx); /* x's row 0 */
            wgml_tensor *y1 = wgml_qlinear(T.g, xr, pw);
            got = th_read_f32(y);
            snprintf(pn, sizeof pn, "%s: part %lld as its own weight", name, (long long)i);
            if (got) th_close(pn, got, ref, (size_t)(m * ns[i]), tol_abs(k), RTOL);
            free(got);
            got = th_read_f32(y1);
            snprintf(pn, sizeof pn, "%s: part %lld as its own weight, one row (GEMV)", name, (long long)i);
            if (got) th_close(pn, got, ref, (size_t)ns[i], tol_abs(k), RTOL);
            free(got);
            wgml_tensor_free(y);
            wgml_tensor_free(y1);
            wgml_tensor_free(xr);
            wgml_qweight_free(pw);
        }
        free(ref);
        wgml_tensor_free(outs[i]);
    }
    printf("  %-110s %.2f s\n", name, now() - t0);
    wgml_tensor_free(x);
    free(hx);
    free_weight(&h);
}

static void test_products(void) {
    static const int64_t qkv[3] = {64, 32, 32}, gu[2] = {96, 96}, odd[3] = {128, 64, 192};
    /* qw_mm (64 x 64 tile) and qw_mm_db, unsplit and split in 3 */
    case_concat(1, qkv, 3, 70, 256, false, "tile64x64_k32_r4x4", 1);
    case_concat(1, qkv, 3, 70, 256, false, "tile64x64_k32_r4x4", 3);
    case_concat(1, qkv, 3, 70, 256, false, "db64x64_k16_r4x4", 1);
    case_concat(1, qkv, 3, 132, 256, false, "db128x64_k16_r8x4", 2);
    /* two parts (gate and up), the automatic choice */
    case_concat(1, gu, 2, 64, 192, false, NULL, 0);
    /* a bias (added by split 0 only), the 8-bit and 6-bit (G 16) GGUF kinds */
    case_concat(0, odd, 3, 9, 128, true, NULL, 1);
    case_concat(0, odd, 3, 9, 128, true, NULL, 4);
    case_concat(2, qkv, 3, 34, 64, false, NULL, 0);
    case_concat(7, gu, 2, 20, 256, false, NULL, 0);
}

/* A built graph: the parts consumed by another op (their product, as a gated activation does
 * with gate and up), run twice with new x. */
static void test_built_graph(void) {
    double t0 = now();
    wgml_graph *g = wgml_graph_new(T.ctx);
    const int64_t k = 128, m = 40, ns[2] = {64, 64};
    hw h = make_weight(g, 1, 128, k, 32, false);
    int64_t xs[2] = {m, k};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *o[2] = {NULL, NULL}, *y = NULL;
    bool ok = x && qw_linear_concat(g, "test", x, h.w, 2, ns, o) == WGML_OK && (y = wgml_mul(g, o[0], o[1])) &&
              wgml_graph_keep(g, y) == WGML_OK && wgml_graph_compile(g) == WGML_OK;
    th_check(ok, "built graph: %s", wgml_last_error(T.ctx));
    for (int run = 0; ok && run < 2; run++) {
        float *hx = th_random((size_t)(m * k), -1, 1);
        th_check(wgml_tensor_write(x, hx, sizeof(float) * (size_t)(m * k)) == WGML_OK, "write x");
        th_check(wgml_graph_run(g) == WGML_OK, "run %d: %s", run, wgml_last_error(T.ctx));
        float *got = th_read_f32(y);
        double *a = ref_rows(hx, &h, 0, m, 64, k), *b = ref_rows(hx, &h, 64, m, 64, k);
        for (int64_t i = 0; i < m * 64; i++) a[i] *= b[i];
        char name[64];
        snprintf(name, sizeof name, "built graph run %d: part 0 * part 1", run);
        if (got) th_close(name, got, a, (size_t)(m * 64), 4 * tol_abs(k), RTOL);
        free(got);
        free(a);
        free(b);
        free(hx);
    }
    free_weight(&h);
    wgml_graph_free(g);
    printf("  built graph: %.2f s\n", now() - t0);
}

/* qw_linear_parts with the split-K count forced (0: automatic): S slices [S, m, n] whose sum is
 * the product (slice 0 holds the bias), or the product itself when S = 1. */
static void case_parts(int kind, int64_t m, int64_t n, int64_t k, bool bias, int splits) {
    char sb[16], name[128];
    snprintf(sb, sizeof sb, "%d", splits);
    if (splits) th_setenv("WGML_QW_MM_SPLITK", sb, 1);
    snprintf(name, sizeof name, "parts %s%s M=%lld N=%lld K=%lld S=%s", KIND_NAMES[kind], bias ? "+b" : "", (long long)m,
             (long long)n, (long long)k, splits ? sb : "auto");
    hw h = make_weight(T.g, kind, n, k, 32, bias);
    float *hx = th_random((size_t)(m * k), -1, 1);
    int64_t xs[2] = {m, k};
    wgml_tensor *x = th_tensor_f32(2, xs, hx);
    int ny = 0;
    th_check(qw_parts_applies(T.g, x, h.w), "%s: applies", name);
    wgml_tensor *p = qw_linear_parts(T.g, "test", x, h.w, &ny);
    th_unsetenv("WGML_QW_MM_SPLITK");
    th_check(p && ny >= 1 && (!splits || ny == splits), "%s: %d slices: %s", name, ny, wgml_last_error(T.ctx));
    if (p) {
        bool shape_ok = ny > 1 ? wgml_tensor_rank(p) == 3 && wgml_tensor_dim(p, 0) == ny && wgml_tensor_dim(p, 1) == m &&
                                     wgml_tensor_dim(p, 2) == n
                               : wgml_tensor_rank(p) == 2 && wgml_tensor_dim(p, 0) == m && wgml_tensor_dim(p, 1) == n;
        th_check(shape_ok, "%s: shape", name);
        float *got = th_read_f32(p);
        if (got) {
            for (int64_t i = 0; i < m * n; i++)
                for (int sl = 1; sl < ny; sl++) got[i] += got[sl * m * n + i];
            double *ref = ref_rows(hx, &h, 0, m, n, k);
            th_close(name, got, ref, (size_t)(m * n), tol_abs(k), RTOL);
            free(ref);
        }
        free(got);
    }
    wgml_tensor_free(p);
    wgml_tensor_free(x);
    free(hx);
    free_weight(&h);
}

static void test_parts(void) {
    case_parts(1, 40, 96, 512, false, 4);
    case_parts(0, 9, 70, 256, true, 3); /* the bias in slice 0 only */
    case_parts(7, 12, 64, 256, false, 2);
    case_parts(1, 40, 96, 128, false, 1); /* unsplit: the product itself */
    case_parts(1, 33, 64, 192, false, 0);
}

/* What it does not take, and bad input: each a clear error and no output. */
static void test_refused(void) {
    hw h = make_weight(T.g, 1, 128, 64, 32, false);
    const int64_t ns[3] = {64, 32, 32}, bad_sum[2] = {64, 32}, odd[2] = {37, 91};
    int64_t xs[2] = {3, 64}, xl[2] = {9, 64};
    wgml_tensor *x3 = wgml_full(T.g, WGML_F32, 2, xs, 1.0), *x9 = wgml_full(T.g, WGML_F32, 2, xl, 1.0);
    wgml_tensor *o[3] = {(wgml_tensor *)1, (wgml_tensor *)1, (wgml_tensor *)1};
    th_check(!qw_concat_applies(T.g, x3, h.w, 3, ns), "3 rows (the GEMV's) are not taken");
    wgml_status s = qw_linear_concat(T.g, "cat", x3, h.w, 3, ns, o);
    th_expect_error("3 rows", s == WGML_ERR_UNSUPPORTED, WGML_ERR_UNSUPPORTED, "cat", "[3, 64]", "[128, 64]", "3 parts",
                    NULL);
    th_check(!o[0] && !o[1] && !o[2], "outputs are NULL after an error");
    th_check(!qw_concat_applies(T.g, x9, h.w, 2, bad_sum), "parts that do not add up to the rows");
    s = qw_linear_concat(T.g, "cat", x9, h.w, 2, bad_sum, o);
    th_expect_error("parts short of the rows", s == WGML_ERR_UNSUPPORTED, WGML_ERR_UNSUPPORTED, "cat", "2 parts", NULL);
    /* part 1 starts at 9 * 37 floats: not a storage-aligned offset */
    th_check(!qw_concat_applies(T.g, x9, h.w, 2, odd), "a part at an unaligned offset is not taken");
    th_check(!qw_concat_applies(T.g, x9, h.w, 1, ns) && !qw_concat_applies(T.g, x9, h.w, 4, ns),
             "1 or 4 parts are not taken");
    s = qw_linear_concat(T.g, "cat", NULL, h.w, 3, ns, o);
    th_expect_error("NULL x", s == WGML_ERR_ARG, WGML_ERR_ARG, "cat", "x is NULL", NULL);
    s = qw_linear_concat(T.g, "cat", x9, NULL, 3, ns, o);
    th_expect_error("NULL weight", s == WGML_ERR_ARG, WGML_ERR_ARG, "cat", "w is NULL", NULL);
    /* rows outside the weight, rows at an unaligned offset */
    th_check(!qw_weight_rows(h.w, 100, 64), "rows past the weight");
    th_expect_error("rows past the weight", true, WGML_ERR_ARG, "qw_weight_rows", "[100, 164)", "[128, 64]", NULL);
    th_check(!qw_weight_rows_fit(T.ctx, h.w, 1, 8) && !qw_weight_rows(h.w, 1, 8), "rows at an unaligned offset");
    th_check(!qw_gguf_rows_fit(T.ctx, WGML_GGML_Q4_1, 64, 1) && qw_gguf_rows_fit(T.ctx, WGML_GGML_Q4_1, 64, 64) &&
                 !qw_gguf_rows_fit(T.ctx, 99, 64, 0),
             "qw_gguf_rows_fit: row 1 is unaligned, row 64 aligned, an unknown type never fits");
    /* the product left in slices: not at the GEMV's rows, a NULL count */
    int ny = 0;
    th_check(!qw_parts_applies(T.g, x3, h.w), "parts: 3 rows are not taken");
    th_expect_error("parts: 3 rows", !qw_linear_parts(T.g, "slices", x3, h.w, &ny), WGML_ERR_UNSUPPORTED, "slices",
                    "[3, 64]", "[128, 64]", NULL);
    th_expect_error("parts: NULL count", !qw_linear_parts(T.g, "slices", x9, h.w, NULL), WGML_ERR_ARG, "slices",
                    "splits is NULL", NULL);
    wgml_tensor_free(x3);
    wgml_tensor_free(x9);
    free_weight(&h);
    wgml_sync(T.ctx);
}

int main(int argc, char **argv) {
    /* before the device: its driver's threads read the environment as they start, and
     * setenv beside them is a race (lavapipe crashed in getenv under ASan) */
    th_setenv("WGML_QW_GEMV_MAX_M", "4", 0); /* the GEMV's rows on a GPU (a CPU adapter's takes one) */
    th_unsetenv("WGML_QW_CONCAT"); /* the A/B switches */
    th_unsetenv("WGML_QW_PARTS");
    th_init_args("test_qw_concat", argc, argv);
    double t0 = now();
    test_refused();
    printf("refused: %.2f s\n", now() - t0);
    t0 = now();
    test_products();
    printf("products: %.2f s\n", now() - t0);
    t0 = now();
    test_parts();
    printf("parts: %.2f s\n", now() - t0);
    t0 = now();
    test_built_graph();
    printf("built graph: %.2f s\n", now() - t0);
    return th_done();
}
