#define _POSIX_C_SOURCE 200809L
/* The qweight GEMV with its fused prologue and epilogue (qw_gemv_fused, ops/qweight/qw_gemv_fused.h):
 * the RMSNorm of x before the products, the residual add after one, the gated activations
 * (silu, tanh-GELU) over a gate/up pair. Every output against an fp64 reference computed here
 * from the host dequantisation (norm, products and activation in double); the number of
 * dispatches (one per kind group when fused); the paths that fall back to the public ops (more
 * than 4 rows, x too long for workgroup memory, gate and up of different kinds) against the
 * same reference; both final reductions (tree and subgroups where the device has them); a
 * built graph run twice; bad arguments; the prologue that merges attention's key chunks
 * (partials with empty chunks at either end) against the merge and product in fp64. */
#include "harness.h"

#include "ops/qweight/qw_gemv_fused.h"
#include "qw_host.h"

typedef struct wspec {
    int kind; /* qw_host.h's make_weight kinds: 0 q4gsw, 1 Q4_1, 2 Q8_0, 3 Q5_0, 4 Q5_1, 5 Q4_K, 6 Q5_K, 7 Q6_K */
    int64_t n;
    bool bias;
} wspec;

static uint64_t dispatches_so_far(void) {
    uint64_t ns, d;
    wgml_record_stats(T.ctx, &ns, &d);
    return d;
}

static double silu_d(double v) { return v / (1.0 + exp(-v)); }
static double gelu_tanh_d(double v) { return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

/* h = s normed (when nw) in double: s * (mean(s^2) + eps)^-1/2 * nw, row by row (else a copy) */
static double *ref_norm(const double *s, const float *nw, float eps, int64_t m, int64_t k) {
    double *h = malloc(sizeof(double) * (size_t)(m * k));
    for (int64_t i = 0; i < m; i++) {
        double ss = 0;
        for (int64_t c = 0; c < k; c++) ss += s[i * k + c] * s[i * k + c];
        double r = nw ? 1.0 / sqrt(ss / (double)k + (double)eps) : 1.0;
        for (int64_t c = 0; c < k; c++) h[i * k + c] = s[i * k + c] * r * (nw ? (double)nw[c] : 1.0);
    }
    return h;
}

/* ref_norm of the float rows x */
static double *ref_h(const float *x, const float *nw, float eps, int64_t m, int64_t k) {
    double *xd = malloc(sizeof(double) * (size_t)(m * k));
    for (int64_t i = 0; i < m * k; i++) xd[i] = x[i];
    double *h = ref_norm(xd, nw, eps, m, k);
    free(xd);
    return h;
}

/* name[len..] += " KIND N=n[+b]" for each of the nw weights; returns the new length */
static int name_weights(char *name, size_t cap, int len, const wspec *ws, int nw) {
    for (int i = 0; i < nw && len >= 0 && (size_t)len < cap; i++)
        len += snprintf(name + len, cap - (size_t)len, " %s N=%lld%s", KIND_NAMES[ws[i].kind], (long long)ws[i].n,
                        ws[i].bias ? "+b" : "");
    return len;
}

/* y[i, j] = Σ_c h[i, c] W[j, c] + bias[j] */
static double *ref_prod(const double *h, const hw *w, int64_t m, int64_t n, int64_t k) {
    double *y = malloc(sizeof(double) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = w->bias ? w->bias[j] : 0.0;
            for (int64_t c = 0; c < k; c++) s += h[i * k + c] * w->deq[j * k + c];
            y[i * n + j] = s;
        }
    return y;
}

/* One qw_gemv_fused call in the eager graph: x [m, k] (as [2, m/2, k] for even m > 2), weights
 * ws[0..nw), the norm when norm, epilogue epi; each output against fp64; want_dispatches: how
 * many the call must record beyond the harness's NaN fills of its outputs (-1: not checked). */
static void case_fused(const char *what, const wspec *ws, int nw, int64_t m, int64_t k, bool norm, qw_epilogue epi,
                       int want_dispatches) {
    double t0 = now();
    hw h[WGML_QLINEAR_MULTI_MAX];
    const wgml_qweight *wp[WGML_QLINEAR_MULTI_MAX];
    for (int i = 0; i < nw; i++) {
        h[i] = make_weight(T.g, ws[i].kind, ws[i].n, k, 32, ws[i].bias);
        wp[i] = h[i].w;
    }
    bool r3 = m > 2 && m % 2 == 0;
    int64_t xs3[3] = {2, m / 2, k}, xs2[2] = {m, k};
    int rank = r3 ? 3 : 2;
    const int64_t *xs = r3 ? xs3 : xs2;
    float *hx = th_random((size_t)(m * k), -2, 2);
    float *hn = norm ? th_random((size_t)k, 0.5, 1.5) : NULL;
    int64_t n0 = ws[0].n;
    float *hr = epi == QW_EPI_RESIDUAL ? th_random((size_t)(m * n0), -3, 3) : NULL;
    wgml_tensor *x = th_tensor_f32(rank, xs, hx);
    int64_t ks[1] = {k}, rs[3];
    memcpy(rs, xs, sizeof(int64_t) * (size_t)rank);
    rs[rank - 1] = n0;
    qw_gemv_fuse f = {.norm_w = norm ? th_tensor_f32(1, ks, hn) : NULL,
                      .eps = 1e-5f,
                      .epi = epi,
                      .residual = hr ? th_tensor_f32(rank, rs, hr) : NULL};
    bool pair = epi == QW_EPI_SWIGLU || epi == QW_EPI_GEGLU;
    int n_out = pair ? 1 : nw;
    wgml_tensor *outs[WGML_QLINEAR_MULTI_MAX] = {NULL};
    wgml_sync(T.ctx);
    uint64_t d0 = dispatches_so_far();
    wgml_status s = qw_gemv_fused(T.g, "test", x, wp, nw, &f, outs);
    wgml_sync(T.ctx);
    uint64_t used = dispatches_so_far() - d0 - (uint64_t)n_out;
    char name[200];
    int len = snprintf(name, sizeof name, "%s M=%lld K=%lld%s epi %d:", what, (long long)m, (long long)k,
                       norm ? " norm" : "", (int)epi);
    name_weights(name, sizeof name, len, ws, nw);
    th_check(s == WGML_OK, "%s: %s", name, wgml_last_error(T.ctx));
    if (s == WGML_OK && want_dispatches >= 0)
        th_check(used == (uint64_t)want_dispatches, "%s: %llu dispatches, want %d", name, (unsigned long long)used,
                 want_dispatches);
    double *hd = ref_h(hx, hn, f.eps, m, k);
    double *y[WGML_QLINEAR_MULTI_MAX];
    for (int i = 0; i < nw; i++) y[i] = ref_prod(hd, &h[i], m, ws[i].n, k);
    for (int o = 0; o < n_out && s == WGML_OK; o++) {
        int64_t n = ws[o].n;
        double *ref = malloc(sizeof(double) * (size_t)(m * n));
        for (int64_t i = 0; i < m * n; i++) {
            if (pair) ref[i] = (epi == QW_EPI_SWIGLU ? silu_d(y[0][i]) : gelu_tanh_d(y[0][i])) * y[1][i];
            else ref[i] = y[o][i] + (hr ? (double)hr[i] : 0.0);
        }
        char oname[260];
        snprintf(oname, sizeof oname, "%s out %d", name, o);
        th_check(outs[o] && wgml_tensor_rank(outs[o]) == rank && wgml_tensor_dim(outs[o], -1) == n &&
                     wgml_tensor_numel(outs[o]) == m * n,
                 "%s shape", oname);
        float *got = th_read_f32(outs[o]);
        if (got) th_close(oname, got, ref, (size_t)(m * n), tol_abs(k), RTOL);
        free(got);
        free(ref);
    }
    for (int i = 0; i < WGML_QLINEAR_MULTI_MAX; i++) wgml_tensor_free(outs[i]);
    printf("  %-110s %.2f s\n", name, now() - t0);
    for (int i = 0; i < nw; i++) {
        free(y[i]);
        free_weight(&h[i]);
    }
    free(hd);
    wgml_tensor_free(x);
    wgml_tensor_free(f.norm_w);
    wgml_tensor_free(f.residual);
    free(hx);
    free(hn);
    free(hr);
}

/* The decode block's shapes (SmolLM2: d 576, FFN 1536; Gemma-3-270M: d 640, FFN 2048) scaled
 * down in N, and the K >= 2048 shape (32 threads x 8 rows), mostly at M = 1 (every case is a
 * pipeline of its own, long to compile on llvmpipe, the more so the more rows: few = only the
 * three decode forms). */
static void test_fused_cases(bool few) {
    static const wspec qkv[3] = {{1, 48, false}, {1, 16, false}, {2, 16, false}}; /* Q4_1 q, k; Q8_0 v: 2 groups */
    static const wspec one_b[1] = {{0, 37, true}};
    static const wspec gu41[2] = {{1, 70, false}, {1, 70, false}};
    static const wspec gu8[2] = {{2, 33, false}, {2, 33, false}};
    static const wspec gu_sym[2] = {{0, 45, true}, {0, 45, true}};
    static const wspec gu_k[2] = {{5, 40, false}, {5, 40, false}}; /* Q4_K gate and up */
    case_fused("qkv", qkv, 3, 1, 576, true, QW_EPI_STORE, 2);
    case_fused("o + residual", one_b, 1, 1, 576, false, QW_EPI_RESIDUAL, 1);
    case_fused("gate/up silu", gu41, 2, 1, 576, true, QW_EPI_SWIGLU, 1);
    if (few) return;
    case_fused("qkv", qkv, 3, 4, 576, true, QW_EPI_STORE, 2);
    case_fused("norm + residual", one_b, 1, 1, 640, true, QW_EPI_RESIDUAL, 1);
    case_fused("down + residual, K 1536", one_b, 1, 1, 1536, false, QW_EPI_RESIDUAL, 1);
    case_fused("gate/up gelu", gu8, 2, 1, 640, true, QW_EPI_GEGLU, 1);
    case_fused("gate/up gelu, biases", gu_sym, 2, 2, 200, false, QW_EPI_GEGLU, 1);
    case_fused("gate/up silu, no norm", gu_k, 2, 1, 512, false, QW_EPI_SWIGLU, 1);
    case_fused("K >= 2048 silu", gu41, 2, 1, 2080, true, QW_EPI_SWIGLU, 1);
    case_fused("K >= 2048 residual", one_b, 1, 2, 2080, false, QW_EPI_RESIDUAL, 1);
    case_fused("odd K", gu_sym, 2, 1, 77, true, QW_EPI_SWIGLU, 1);
}

/* Where the fused kernel does not apply the public ops give the same result: M past the
 * GEMV's rows (4 on a GPU, 8 on a CPU adapter: the tiled GEMM), x too long for workgroup memory (K = 8192 at M = 4: 128 KiB of staged x),
 * gate and up of different kinds. */
static void test_plain_paths(void) {
    static const wspec qkv[3] = {{1, 48, false}, {1, 16, false}, {2, 16, false}};
    static const wspec gu41[2] = {{1, 70, false}, {1, 70, false}};
    static const wspec mixed[2] = {{1, 24, false}, {2, 24, false}};
    static const wspec one[1] = {{1, 20, false}};
    case_fused("M > 8", qkv, 3, 10, 96, true, QW_EPI_STORE, -1);
    case_fused("M > 8", gu41, 2, 9, 96, true, QW_EPI_SWIGLU, -1);
    case_fused("M > 8", one, 1, 12, 64, false, QW_EPI_RESIDUAL, -1);
    case_fused("x past workgroup memory", one, 1, 2, 8192, true, QW_EPI_RESIDUAL, -1);
    case_fused("gate Q4_1, up Q8_0", mixed, 2, 1, 128, true, QW_EPI_GEGLU, -1);
}

/* In a built graph (weights, x, norm and residual its own), run twice with new inputs. */
static void test_built_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    const int64_t k = 192, n = 40;
    hw gw = make_weight(g, 1, n, k, 32, false), uw = make_weight(g, 1, n, k, 32, false);
    th_check(gw.w && uw.w, "built graph: upload: %s", wgml_last_error(T.ctx));
    const wgml_qweight *wp[2] = {gw.w, uw.w};
    int64_t xs[2] = {1, k}, ks[1] = {k};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *nw = wgml_tensor_new(g, WGML_F32, 1, ks), *o = NULL;
    qw_gemv_fuse f = {.norm_w = nw, .eps = 1e-6f, .epi = QW_EPI_SWIGLU};
    bool ok = x && nw;
    th_check(ok, "built graph: inputs: %s", wgml_last_error(T.ctx));
    ok = ok && qw_gemv_fused(g, "test", x, wp, 2, &f, &o) == WGML_OK;
    th_check(ok, "built graph: record: %s", wgml_last_error(T.ctx));
    ok = ok && wgml_graph_keep(g, o) == WGML_OK && wgml_graph_compile(g) == WGML_OK;
    th_check(ok, "built graph: compile: %s", wgml_last_error(T.ctx));
    th_check(!ok || wgml_graph_dispatch_count(g) == 1, "built graph: %zu dispatches, want 1",
             ok ? wgml_graph_dispatch_count(g) : 0);
    for (int run = 0; ok && run < 2; run++) {
        float *hx = th_random((size_t)k, -1, 1), *hn = th_random((size_t)k, 0.5, 1.5);
        th_check(wgml_tensor_write(x, hx, sizeof(float) * (size_t)k) == WGML_OK &&
                     wgml_tensor_write(nw, hn, sizeof(float) * (size_t)k) == WGML_OK,
                 "write inputs");
        th_check(wgml_graph_run(g) == WGML_OK, "run %d: %s", run, wgml_last_error(T.ctx));
        double *hd = ref_h(hx, hn, f.eps, 1, k), *yg = ref_prod(hd, &gw, 1, n, k), *yu = ref_prod(hd, &uw, 1, n, k);
        for (int64_t i = 0; i < n; i++) yg[i] = silu_d(yg[i]) * yu[i];
        float *got = th_read_f32(o);
        char name[64];
        snprintf(name, sizeof name, "built graph run %d", run);
        if (got) th_close(name, got, yg, (size_t)n, tol_abs(k), RTOL);
        free(got);
        free(hd);
        free(yg);
        free(yu);
        free(hx);
        free(hn);
    }
    free_weight(&gw);
    free_weight(&uw);
    wgml_graph_free(g);
}

/* Bad arguments: clear errors naming the op and argument, nothing recorded. */
static void test_errors(void) {
    hw a = make_weight(T.g, 1, 16, 64, 32, false), b = make_weight(T.g, 1, 24, 64, 32, false);
    const wgml_qweight *wp[3] = {a.w, b.w, a.w};
    int64_t xs[2] = {1, 64}, bad_k[1] = {63}, rs_bad[2] = {1, 15};
    float *hx = th_random(64, -1, 1);
    wgml_tensor *x = th_tensor_f32(2, xs, hx), *nw_bad = th_tensor_f32(1, bad_k, hx), *r_bad = th_tensor_f32(2, rs_bad, hx);
    wgml_tensor *o[3] = {NULL, NULL, NULL};
    struct {
        const char *what, *want;
        int n;
        qw_gemv_fuse f;
    } cases[] = {
        {"norm of the wrong length", "norm_w", 1, {.norm_w = nw_bad, .eps = 1e-5f}},
        {"residual of the wrong shape", "residual", 1, {.epi = QW_EPI_RESIDUAL, .residual = r_bad}},
        {"residual missing", "residual", 1, {.epi = QW_EPI_RESIDUAL}},
        {"residual with two weights", "one weight", 2, {.epi = QW_EPI_RESIDUAL}},
        {"pair of different N", "one N", 2, {.epi = QW_EPI_SWIGLU}},
        {"pair of three", "two weights", 3, {.epi = QW_EPI_GEGLU}},
        {"unknown epilogue", "epilogue", 1, {.epi = (qw_epilogue)9}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wgml_status s = qw_gemv_fused(T.g, "fusedop", x, wp, cases[i].n, &cases[i].f, o);
        const char *e = wgml_last_error(T.ctx);
        th_check(s != WGML_OK && strstr(e, "fusedop") && strstr(e, cases[i].want) && !o[0] && !o[1] && !o[2],
                 "%s: status %d, error '%s'", cases[i].what, (int)s, e);
    }
    th_check(qw_gemv_fused(T.g, "fusedop", x, wp, 1, NULL, o) != WGML_OK, "NULL fusion refused");
    th_check(qw_gemv_fused(T.g, "fusedop", NULL, wp, 1, &cases[0].f, o) != WGML_OK, "NULL x refused");
    wgml_tensor_free(x);
    wgml_tensor_free(nw_bad);
    wgml_tensor_free(r_bad);
    free(hx);
    free_weight(&a);
    free_weight(&b);
}

/* ------------------------------------------------------------------ the chunks' merge */

/* The merge prologue: x = attention's chunk partials [H, C, D + 2] (random sums, maxima and
 * positive sums l; the chunks before c_lo and from c_hi on empty: m = -3e38, l = 0, sums 0, as
 * a window or a short fill leaves them), merged in double as attn_combine.wgsl defines it,
 * then the product (+ residual) against fp64; one dispatch. */
static void case_merge(int kind, int64_t H, int64_t C, int64_t D, int64_t n, int c_lo, int c_hi, qw_epilogue epi) {
    double t0 = now();
    int64_t k = H * D, ps[3] = {H, C, D + 2}, rs[2] = {1, n};
    hw h = make_weight(T.g, kind, n, k, 32, false);
    float *hp = th_random((size_t)(H * C * (D + 2)), -2, 2);
    for (int64_t hh = 0; hh < H; hh++)
        for (int64_t c = 0; c < C; c++) {
            float *q = hp + (hh * C + c) * (D + 2);
            if (c < c_lo || c >= c_hi) {
                for (int64_t d = 0; d < D; d++) q[d] = 0.0f;
                q[D] = -3.0e38f, q[D + 1] = 0.0f;
            } else {
                q[D] = 4.0f * q[D];               /* the chunk's max score, log2 units */
                q[D + 1] = 1.0f + 2.0f * fabsf(q[D + 1]); /* its sum of 2^(s - m): at least 1 */
            }
        }
    double *hx = calloc((size_t)k, sizeof(double));
    for (int64_t hh = 0; hh < H; hh++) {
        double mx = -INFINITY, den = 0;
        for (int64_t c = 0; c < C; c++) mx = fmax(mx, hp[(hh * C + c) * (D + 2) + D]);
        for (int64_t c = 0; c < C; c++) den += hp[(hh * C + c) * (D + 2) + D + 1] * exp2(hp[(hh * C + c) * (D + 2) + D] - mx);
        for (int64_t d = 0; d < D; d++) {
            double num = 0;
            for (int64_t c = 0; c < C; c++)
                num += hp[(hh * C + c) * (D + 2) + d] * exp2(hp[(hh * C + c) * (D + 2) + D] - mx);
            hx[hh * D + d] = den > 0 ? num / den : 0.0;
        }
    }
    float *hr = epi == QW_EPI_RESIDUAL ? th_random((size_t)n, -3, 3) : NULL;
    wgml_tensor *x = th_tensor_f32(3, ps, hp), *out = NULL;
    qw_gemv_fuse f = {.epi = epi, .residual = hr ? th_tensor_f32(2, rs, hr) : NULL, .merge_heads = H, .merge_chunks = C,
                      .merge_dim = D};
    const wgml_qweight *wp[1] = {h.w};
    char name[160];
    snprintf(name, sizeof name, "merge %s H=%lld C=%lld D=%lld N=%lld chunks [%d, %d) epi %d", KIND_NAMES[kind],
             (long long)H, (long long)C, (long long)D, (long long)n, c_lo, c_hi, (int)epi);
    th_check(qw_gemv_merge_fits(T.ctx, h.w, &f), "%s: fits", name);
    wgml_sync(T.ctx);
    uint64_t d0 = dispatches_so_far();
    wgml_status s = qw_gemv_fused(T.g, "test", x, wp, 1, &f, &out);
    wgml_sync(T.ctx);
    th_check(s == WGML_OK, "%s: %s", name, wgml_last_error(T.ctx));
    th_check(s || dispatches_so_far() - d0 == 2, "%s: one dispatch (and the output's NaN fill)", name);
    if (!s) {
        th_check(wgml_tensor_rank(out) == 2 && wgml_tensor_dim(out, 0) == 1 && wgml_tensor_dim(out, 1) == n, "%s: [1, N]",
                 name);
        double *ref = malloc(sizeof(double) * (size_t)n);
        for (int64_t j = 0; j < n; j++) {
            double t = hr ? hr[j] : 0.0;
            for (int64_t c = 0; c < k; c++) t += hx[c] * h.deq[j * k + c];
            ref[j] = t;
        }
        float *got = th_read_f32(out);
        if (got) th_close(name, got, ref, (size_t)n, tol_abs(k), RTOL);
        free(got);
        free(ref);
    }
    printf("  %-100s %.2f s\n", name, now() - t0);
    wgml_tensor_free(out);
    wgml_tensor_free(x);
    wgml_tensor_free(f.residual);
    free(hx);
    free(hp);
    free(hr);
    free_weight(&h);
}

static void test_merge(void) {
    case_merge(1, 9, 12, 64, 576, 0, 10, QW_EPI_RESIDUAL); /* SmolLM2's o projection: 10 of 12 chunks filled */
    case_merge(3, 4, 6, 256, 640, 2, 6, QW_EPI_STORE);    /* Gemma 3's (Q5_0), a window past chunks 0, 1 */
    case_merge(0, 3, 4, 32, 70, 0, 4, QW_EPI_STORE);
    case_merge(1, 2, 5, 64, 64, 0, 0, QW_EPI_RESIDUAL); /* no chunk saw a key: x = 0, out = residual */
    /* refused: a norm with the merge; partials of the wrong shape */
    hw h = make_weight(T.g, 1, 64, 128, 32, false);
    int64_t ps[3] = {2, 3, 66}, bad[3] = {2, 3, 64}, ks[1] = {128};
    wgml_tensor *x = wgml_full(T.g, WGML_F32, 3, ps, 0.0), *xb = wgml_full(T.g, WGML_F32, 3, bad, 0.0);
    wgml_tensor *nw = wgml_full(T.g, WGML_F32, 1, ks, 1.0), *out = NULL;
    const wgml_qweight *wp[1] = {h.w};
    qw_gemv_fuse f = {.epi = QW_EPI_STORE, .norm_w = nw, .merge_heads = 2, .merge_chunks = 3, .merge_dim = 64};
    th_expect_error("merge with a norm", qw_gemv_fused(T.g, "mg", x, wp, 1, &f, &out) == WGML_ERR_ARG, WGML_ERR_ARG,
                    "mg", "no norm", NULL);
    f.norm_w = NULL;
    th_expect_error("merge: partials of the wrong shape", qw_gemv_fused(T.g, "mg", xb, wp, 1, &f, &out) == WGML_ERR_SHAPE,
                    WGML_ERR_SHAPE, "mg", "[2, 3, 64]", "dim 64 + 2", NULL);
    f.merge_dim = 32; /* K = 64: not the weight's 128 */
    int64_t p32[3] = {2, 3, 34};
    wgml_tensor *x32 = wgml_full(T.g, WGML_F32, 3, p32, 0.0);
    th_expect_error("merge: K against the weight", qw_gemv_fused(T.g, "mg", x32, wp, 1, &f, &out) == WGML_ERR_SHAPE,
                    WGML_ERR_SHAPE, "mg", "weights[0]", "K = 64", NULL);
    th_check(!out, "no output after the errors");
    wgml_tensor_free(x);
    wgml_tensor_free(xb);
    wgml_tensor_free(x32);
    wgml_tensor_free(nw);
    free_weight(&h);
}

/* ------------------------------------------------------------------ the norm handed over */

/* The handoff of a layer: the producer (one weight of kind okind, [d, k0], residual epilogue
 * with next_norm) gives s = r + x·Wᵀ, s * nw and the partial sums of s^2 in one dispatch; the
 * consumer (ws, K = d) takes those two for rms_norm(s) * nw through ssq, with epilogue epi. Every
 * output against fp64 (the partials by their sum per row), the dispatches counted. */
static void case_handoff(const char *what, int okind, const wspec *ws, int nw, int64_t m, int64_t k0, int64_t d,
                         qw_epilogue epi, int want_dispatches) {
    double t0 = now();
    hw wo = make_weight(T.g, okind, d, k0, 32, false), h[WGML_QLINEAR_MULTI_MAX];
    const wgml_qweight *wp[WGML_QLINEAR_MULTI_MAX], *op1[1] = {wo.w};
    for (int i = 0; i < nw; i++) {
        h[i] = make_weight(T.g, ws[i].kind, ws[i].n, d, 32, ws[i].bias);
        wp[i] = h[i].w;
    }
    int64_t xs[2] = {m, k0}, rs[2] = {m, d}, ds[1] = {d};
    float *hx = th_random((size_t)(m * k0), -2, 2), *hr = th_random((size_t)(m * d), -3, 3);
    float *hn = th_random((size_t)d, 0.5, 1.5);
    wgml_tensor *x = th_tensor_f32(2, xs, hx), *r = th_tensor_f32(2, rs, hr), *nwt = th_tensor_f32(1, ds, hn);
    qw_gemv_fuse fp = {.epi = QW_EPI_RESIDUAL, .residual = r, .next_norm = nwt, .eps = 1e-5f};
    wgml_tensor *po[3] = {NULL, NULL, NULL}, *co[WGML_QLINEAR_MULTI_MAX] = {NULL};
    char name[200];
    int len = snprintf(name, sizeof name, "%s M=%lld: %s [%lld, %lld] ->", what, (long long)m, KIND_NAMES[okind],
                       (long long)d, (long long)k0);
    name_weights(name, sizeof name, len, ws, nw);
    wgml_sync(T.ctx);
    uint64_t d0 = dispatches_so_far();
    wgml_status s = qw_gemv_fused(T.g, "test", x, op1, 1, &fp, po);
    wgml_sync(T.ctx);
    uint64_t used = dispatches_so_far() - d0 - 3; /* the harness fills each output with NaN first */
    th_check(s == WGML_OK && po[0] && po[1] && po[2], "%s: producer: %s", name, wgml_last_error(T.ctx));
    th_check(s != WGML_OK || used == 1, "%s: producer: %llu dispatches, want 1", name, (unsigned long long)used);
    double *sref = malloc(sizeof(double) * (size_t)(m * d));
    double *hx_d = ref_h(hx, NULL, 0.0f, m, k0); /* x in double */
    double *prod = ref_prod(hx_d, &wo, m, d, k0), *sg = malloc(sizeof(double) * (size_t)(m * d));
    for (int64_t i = 0; i < m * d; i++) {
        sref[i] = prod[i] + hr[i];
        sg[i] = sref[i] * hn[i % d];
    }
    if (s == WGML_OK) {
        char on[240];
        float *got = th_read_f32(po[0]);
        snprintf(on, sizeof on, "%s: the sum", name);
        if (got) th_close(on, got, sref, (size_t)(m * d), tol_abs(k0), RTOL);
        free(got);
        got = th_read_f32(po[1]);
        snprintf(on, sizeof on, "%s: the sum * next_norm", name);
        if (got) th_close(on, got, sg, (size_t)(m * d), tol_abs(k0), RTOL);
        free(got);
        int64_t P = wgml_tensor_dim(po[2], -1);
        th_check(wgml_tensor_rank(po[2]) == 2 && wgml_tensor_dim(po[2], 0) == m && P >= 1, "%s: partials shape", name);
        got = th_read_f32(po[2]);
        for (int64_t i = 0; got && i < m; i++) {
            double want = 0, sum = 0;
            for (int64_t c = 0; c < d; c++) want += sref[i * d + c] * sref[i * d + c];
            for (int64_t j = 0; j < P; j++) sum += got[i * P + j];
            th_check(fabs(sum - want) <= 1e-4 * want + 1e-3, "%s: row %lld's sum of squares %.6g, want %.6g", name,
                     (long long)i, sum, want);
        }
        free(got);
    }
    /* the consumer */
    qw_gemv_fuse fc = {.ssq = po[2], .eps = fp.eps, .epi = epi};
    bool pair = epi == QW_EPI_SWIGLU || epi == QW_EPI_GEGLU;
    int n_out = pair ? 1 : nw;
    if (s == WGML_OK) {
        d0 = dispatches_so_far();
        s = qw_gemv_fused(T.g, "test", po[1], wp, nw, &fc, co);
        wgml_sync(T.ctx);
        used = dispatches_so_far() - d0 - (uint64_t)n_out;
        th_check(s == WGML_OK, "%s: consumer: %s", name, wgml_last_error(T.ctx));
        th_check(s != WGML_OK || used == (uint64_t)want_dispatches, "%s: consumer: %llu dispatches, want %d", name,
                 (unsigned long long)used, want_dispatches);
    }
    double *hn_ref = ref_norm(sref, hn, fp.eps, m, d), *y[WGML_QLINEAR_MULTI_MAX];
    for (int i = 0; i < nw; i++) y[i] = ref_prod(hn_ref, &h[i], m, ws[i].n, d);
    for (int o = 0; o < n_out && s == WGML_OK; o++) {
        int64_t n = ws[o].n;
        double *ref = malloc(sizeof(double) * (size_t)(m * n));
        for (int64_t i = 0; i < m * n; i++)
            ref[i] = pair ? (epi == QW_EPI_SWIGLU ? silu_d(y[0][i]) : gelu_tanh_d(y[0][i])) * y[1][i] : y[o][i];
        char on[240];
        snprintf(on, sizeof on, "%s: out %d", name, o);
        float *got = co[o] && wgml_tensor_numel(co[o]) == m * n ? th_read_f32(co[o]) : NULL;
        th_check(got != NULL, "%s shape", on);
        if (got) th_close(on, got, ref, (size_t)(m * n), tol_abs(d), RTOL);
        free(got);
        free(ref);
    }
    printf("  %-110s %.2f s\n", name, now() - t0);
    for (int i = 0; i < 3; i++) wgml_tensor_free(po[i]);
    for (int i = 0; i < WGML_QLINEAR_MULTI_MAX; i++) wgml_tensor_free(co[i]);
    for (int i = 0; i < nw; i++) {
        free(y[i]);
        free_weight(&h[i]);
    }
    free_weight(&wo);
    free(hn_ref), free(prod), free(sg), free(sref), free(hx_d);
    wgml_tensor_free(x), wgml_tensor_free(r), wgml_tensor_free(nwt);
    free(hx), free(hr), free(hn);
}

/* The handoff's cases at the decode block's shapes (o into gate/up, down into the next q/k/v)
 * in the adapter's launch shape, then in the GPU shapes forced: row groups of one workgroup
 * summed through workgroup memory (32 x 2 in 64) or alone (64 x 4 in 64); each with the
 * subgroup sums where the device has them and without. */
static void handoff_cases(bool few) {
    static const wspec qkv[3] = {{1, 48, true}, {1, 16, true}, {2, 16, false}}; /* two groups, Q4_1 with biases */
    static const wspec gu41[2] = {{1, 70, false}, {1, 70, false}};
    static const wspec gu_k[2] = {{5, 40, false}, {5, 40, false}};
    static const wspec qkv_sym[3] = {{0, 48, true}, {0, 16, false}, {0, 16, true}}; /* one kind, two dispatches by the bindings */
    case_handoff("o -> gate/up silu", 1, gu41, 2, 1, 256, 576, QW_EPI_SWIGLU, 1);
    case_handoff("down -> q/k/v", 5, qkv, 3, 1, 1536, 512, QW_EPI_STORE, 2);
    if (few) return;
    case_handoff("o -> gate/up gelu, M 3", 2, gu_k, 2, 3, 320, 512, QW_EPI_GEGLU, 1);
    case_handoff("down -> q/k/v, M 2, odd K", 0, qkv_sym, 3, 2, 100, 77, QW_EPI_STORE, 2);
}

/* Bad handoffs: the op and argument named, nothing recorded. */
static void handoff_errors(void) {
    hw a = make_weight(T.g, 1, 16, 64, 32, false);
    const wgml_qweight *wp[2] = {a.w, a.w};
    int64_t xs[2] = {1, 64}, x9[2] = {9, 64}, n15[1] = {15}, n16[1] = {16}, sq_bad[2] = {2, 4}, sq1[1] = {4};
    float *hx = th_random(9 * 64, -1, 1);
    wgml_tensor *x = th_tensor_f32(2, xs, hx), *xm = th_tensor_f32(2, x9, hx), *nn_bad = th_tensor_f32(1, n15, hx);
    wgml_tensor *nn = th_tensor_f32(1, n16, hx), *r = th_tensor_f32(2, (int64_t[2]){1, 16}, hx);
    wgml_tensor *sqb = th_tensor_f32(2, sq_bad, hx), *sqr1 = th_tensor_f32(1, sq1, hx), *nk = th_tensor_f32(1, (int64_t[1]){64}, hx);
    wgml_tensor *sq = th_tensor_f32(2, (int64_t[2]){1, 4}, hx), *rm = th_tensor_f32(2, (int64_t[2]){9, 16}, hx);
    wgml_tensor *o[3] = {NULL, NULL, NULL};
    struct {
        const char *what, *want;
        wgml_tensor *x;
        int n;
        qw_gemv_fuse f;
    } cases[] = {
        {"next_norm without a residual", "next_norm", x, 1, {.next_norm = nn}},
        {"next_norm of the wrong length", "next_norm", x, 1, {.epi = QW_EPI_RESIDUAL, .residual = r, .next_norm = nn_bad}},
        {"ssq with a norm", "ssq", x, 1, {.ssq = sq, .norm_w = nk}},
        {"ssq of the wrong rows", "ssq", x, 1, {.ssq = sqb}},
        {"ssq of rank 1", "ssq", x, 1, {.ssq = sqr1}},
        {"ssq past the GEMV's rows", "handed over", xm, 1, {.ssq = (wgml_tensor *)NULL}},
        {"next_norm past the GEMV's rows", "handed over", xm, 1, {.epi = QW_EPI_RESIDUAL, .residual = rm, .next_norm = nn}},
        {"ssq with a pair of different N", "one N", x, 2, {.ssq = sq, .epi = QW_EPI_SWIGLU}},
    };
    wgml_tensor *sq9 = th_tensor_f32(2, (int64_t[2]){9, 4}, hx);
    cases[5].f.ssq = sq9;
    hw b = make_weight(T.g, 1, 24, 64, 32, false);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (i + 1 == sizeof cases / sizeof cases[0]) wp[1] = b.w;
        wgml_status s = qw_gemv_fused(T.g, "handop", cases[i].x, wp, cases[i].n, &cases[i].f, o);
        const char *e = wgml_last_error(T.ctx);
        th_check(s != WGML_OK && strstr(e, "handop") && strstr(e, cases[i].want) && !o[0] && !o[1] && !o[2],
                 "%s: status %d, error '%s'", cases[i].what, (int)s, e);
    }
    wgml_tensor *ts[] = {x, xm, nn_bad, nn, r, sqb, sqr1, nk, sq, rm, sq9};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wgml_tensor_free(ts[i]);
    free(hx);
    free_weight(&a);
    free_weight(&b);
}

/* The handoff's cases in launch shapes sh0 .. sh1 - 1 of {the adapter's, 32 x 2 in 64, 64 x 4 in
 * 64}, each with the subgroup sums where the device has them and without. */
static void handoff_shapes(int sh0, int sh1) {
    wgml_device_info info;
    wgml_device_get_info(T.ctx, &info);
    static const char *shapes[] = {NULL, "32,2,64", "64,4,64"};
    for (int sh = sh0; sh < sh1; sh++) {
        if (shapes[sh]) th_setenv("WGML_QW_GEMV", shapes[sh], 1);
        for (int sg = 0; sg < (info.has_subgroups ? 2 : 1); sg++) {
            printf("  launch shape %s, %s\n", shapes[sh] ? shapes[sh] : "the adapter's", sg ? "subgroup sums" : "no subgroups");
            th_setenv("WGML_QW_GEMV_SUBGROUP", sg ? "1" : "0", 1);
            handoff_cases(sh > 0);
        }
    }
    th_unsetenv("WGML_QW_GEMV");
    th_unsetenv("WGML_QW_GEMV_SUBGROUP");
}

/* The handoff: bad arguments, then its cases in the adapter's launch shape; and in the GPU shapes
 * forced (a part of its own: each shape and reduction is kernels to compile). */
static void part_handoff(void) {
    handoff_errors();
    handoff_shapes(0, 1);
}
static void part_handoff_forced(void) { handoff_shapes(1, 3); }

/* The fused cases with the tree reduction, after the bad arguments. */
static void part_tree(void) {
    test_errors();
    th_setenv("WGML_QW_GEMV_SUBGROUP", "0", 1);
    test_fused_cases(false);
    th_unsetenv("WGML_QW_GEMV_SUBGROUP");
}

/* The decode forms with subgroup operations, where the device has them. */
static void part_subgroup(void) {
    wgml_device_info info;
    wgml_device_get_info(T.ctx, &info);
    if (!info.has_subgroups) {
        printf("  the device has no subgroups: the tree reduction only (part tree)\n");
        return;
    }
    th_setenv("WGML_QW_GEMV_SUBGROUP", "1", 1);
    test_fused_cases(true);
    th_unsetenv("WGML_QW_GEMV_SUBGROUP");
}

/* The public ops' paths, a built graph, the chunks' merge. */
static void part_rest(void) {
    test_plain_paths();
    test_built_graph();
    th_unsetenv("WGML_QW_GEMV_MERGE");
    test_merge();
}

/* Parts of under a minute each at 256-bit vectors with checked kernels (every case is a
 * pipeline of its own). */
int main(int argc, char **argv) {
    /* before the device: its driver's threads read the environment as they start, and
     * setenv beside them is a race (lavapipe crashed in getenv under ASan) */
    th_setenv("WGML_QW_GEMV_MAX_M", "4", 0); /* the GEMV's rows on a GPU (a CPU adapter's takes one) */
    th_init_args("test_qw_gemv_fused", argc, argv);
    static const th_part parts[] = {
        {"tree", part_tree},          {"subgroup", part_subgroup},
        {"rest", part_rest},          {"handoff", part_handoff},
        {"handoff-forced", part_handoff_forced}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
