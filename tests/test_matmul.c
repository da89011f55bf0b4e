#define _POSIX_C_SOURCE 200809L
/* fp32 matmuls (mm, bmm, linear, addmm, transposed forms) against OpenBLAS cblas_dgemm in
 * double precision with the automatic variant choice: the ops and orientations, batches, eager
 * and in a built graph, views, the epilogues through split-K, a grid over 65,535 workgroups, and
 * bad input. Every variant on every shape: test_matmul_tile, test_matmul_db and
 * test_matmul_splitk; the skinny and outer-product variants: test_matmul_skinny. */
#include "matmul_cases.h"

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
    if (arena_cap) th_setenv("WGML_ARENA_BYTES", arena_cap, 1);
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
        th_unsetenv("WGML_ARENA_BYTES");
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
    /* the detail: each dispatch's grid, and the products' sizes leading their parameters (every
     * product of this chain has m rows) */
    for (size_t i = 0; i < nd; i++) {
        uint32_t w[3];
        const char *shader = NULL;
        wgml_graph_dispatch_name(g, i, &shader);
        uint64_t wgs = wgml_graph_dispatch_detail(g, i, w, 3);
        th_check(wgs >= 1, "dispatch %zu: %llu workgroups", i, (unsigned long long)wgs);
        if (shader && !strncmp(shader, "matmul", 6) && strcmp(shader, "matmul_splitk"))
            th_check(w[0] == (uint32_t)m, "dispatch %zu (%s): M %u in its parameters, want %lld", i, shader, w[0], (long long)m);
    }
    uint32_t past[2] = {7, 7};
    th_check(wgml_graph_dispatch_detail(g, nd, past, 2) == 0 && past[0] == 0 && past[1] == 0,
             "no detail past the last dispatch");
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

/* The automatic choice on long K, batches and broadcast batches, every orientation. */
static void test_auto_shapes(void) {
    wgml_matmul_force_variant(T.ctx, -1);
    case_matmul("long K", 0, 0, 16, 20, 4096, 0, 0);
    case_matmul("long K", 0, 0, 12, 8, 4096, 1, 1);
    case_matmul("batched", 3, 3, 33, 17, 29, 0, 0);
    case_matmul("batched", 4, 4, 20, 24, 16, 1, 0);
    case_matmul("batch broadcast a", 1, 5, 9, 11, 13, 0, 1);
    case_matmul("batch broadcast b", 5, 0, 9, 11, 13, 0, 0);
}

/* The epilogues (bias, addmm's C, linear_dw's accumulation) through the split-K reduction. */
static void test_splitk_epilogues(void) {
    th_setenv("WGML_MATMUL_SPLITK", "3", 1);
    test_linear();
    test_addmm();
    test_linear_dw();
    th_unsetenv("WGML_MATMUL_SPLITK");
}

/* Split-K in a built graph: linear (bias) -> mm, and linear_dw accumulating into a persistent
 * gradient, run twice with new inputs (the gradient holds the sum of both runs). */
static void test_splitk_graph(void) {
    th_setenv("WGML_MATMUL_SPLITK", "3", 1);
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
    th_unsetenv("WGML_MATMUL_SPLITK");
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
    th_setenv("WGML_MATMUL_SPLITK", "2", 1);
    case_matmul("split2, grid > 65535 workgroups", 40000, 40000, 2, 2, 9, 0, 1);
    th_unsetenv("WGML_MATMUL_SPLITK");
    wgml_matmul_force_variant(T.ctx, -1);
}

/* The automatic variant choice follows the rules docs/ARCHITECTURE.md states (the H200 sweeps'
 * winners): a plan is only a name and a split count, so this needs no GPU time. A table edit that
 * moves an index (the choice is made by index) shows here, not only as a slower benchmark. */
static void test_auto_plan(void) {
    static const struct {
        int64_t batch, m, n, k;
        bool tb; /* B stored [N, K] */
        const char *want;
        int splits; /* 0: any */
    } cases[] = {
        {1, 4096, 4096, 4096, false, "db128x128_k8_r8x8", 1},   /* 1,024 tiles of 128x128, K >= 256: unsplit */
        {1, 8192, 8192, 8192, false, "db128x128_k8_r8x8", 1},
        {1, 2048, 2048, 2048, false, "db128x128_k8_r8x8", 1},   /* 256 tiles */
        {1, 4096, 576, 576, false, "tile128x64_k16_r8x4", 0},   /* 160 tiles of 128x128: under 256 */
        {1, 576, 576, 4096, false, "tile128x64_k16_r8x4", 0},   /* K >= 1024 */
        {1, 4096, 192, 576, false, "tile64x64_k16_r4x4", 0},
        {1, 4096, 1024, 16, false, "outer_r8", 0},              /* K <= 32 from 2^22 multiply-adds */
        {1, 16, 1536, 4096, false, "skinny_r2_kt16", 0},        /* an output side <= 32, K >= 2048 */
        {1, 4096, 16, 576, false, "skinny_r2_kt16", 1},  /* dy·B: a side <= 16, K >= 128, 9 steps: unsplit */
        {1, 4096, 16, 1536, false, "skinny_r2_kt16", 4}, /* 24 steps of 4·16: 4 slices of 6 */
        {1, 4096, 16, 576, true, "tile32x32_k16_r4x4", 0}, /* x·Aᵀ (B read along K): the tiled kernel */
        {1, 4096, 32, 576, false, "tile32x32_k16_r4x4", 0}, /* a side of 17-32 with a moderate K */
        {1, 64, 16, 64, false, "tile32x32_k16_r4x4", 0},        /* small and skinny */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int v = -1, s = 0;
        wgml_matmul_plan(T.ctx, cases[i].batch, cases[i].m, cases[i].n, cases[i].k, false, cases[i].tb, &v, &s);
        const char *got = v >= 0 ? wgml_matmul_variant_name(v) : NULL;
        th_check(got && !strcmp(got, cases[i].want) && (!cases[i].splits || s == cases[i].splits),
                 "auto plan %lldx%lldx%lld: %s split %d (want %s%s)", (long long)cases[i].m, (long long)cases[i].n,
                 (long long)cases[i].k, got ? got : "(none)", s, cases[i].want, cases[i].splits ? " and its split" : "");
    }
}

int main(int argc, char **argv) {
    th_init_args("test_matmul", argc, argv);
    test_auto_plan();
    test_auto_shapes();
    test_mm_bmm();
    test_linear();
    test_addmm();
    test_linear_dw();
    test_graph(NULL);
    test_graph("6000");
    test_views();
    test_splitk_epilogues();
    test_splitk_graph();
    test_huge_grid();
    test_bad_input();
    return th_done();
}
