#define _POSIX_C_SOURCE 200809L
/* The fused 4-bit GEMV over several weights that share x (wgml_qlinear_multi): each output
 * against an fp64 product on the host dequantisation, and against wgml_qlinear of the same
 * weight (the same kernel arithmetic); the number of dispatches (one per kind at M <= 4, one
 * GEMM per weight above), mixed kinds, the binding limit, biases, odd K and N, M = 1..4, more
 * than 65,535 workgroups, a built graph run twice, bad input, and both final reductions of the
 * GEMV (workgroup-memory tree and subgroup operations, $WGML_QW_GEMV_SUBGROUP) where the device
 * has subgroups. */
#include "harness.h"

#include "qw_host.h"

/* A weight on the GPU and its host dequantisation (qw_host.h's make_weight: kind 0 symmetric
 * q4gsw, 1 Q4_1, 2 Q8_0, 3..7 Q5_0, Q5_1, Q4_K, Q5_K, Q6_K). */
typedef hw hweight;

/* ref[m, n] = Σ_k x[m, k] W[n, k] + bias[n], plain loops in double */
static double *ref_linear(const float *x, const hweight *h, int64_t m, int64_t n, int64_t k) {
    return ref_rows(x, h, 0, m, n, k);
}

static uint64_t dispatches_so_far(void) {
    uint64_t ns, d;
    wgml_record_stats(T.ctx, &ns, &d);
    return d;
}

typedef struct wspec {
    int kind;
    int64_t n;
    bool bias;
} wspec;

/* Three 4-bit weights of one kind, odd N, a bias on the first: the fused, K >= 2048 and subgroup
 * cases' set. */
static const wspec THREE[3] = {{0, 37, true}, {0, 13, false}, {0, 70, false}};

/* One call of wgml_qlinear_multi in the eager graph on weights ws[0..nw) with x [m, k] (as
 * [2, m/2, k] when m is 4): every output against fp64 and, at M <= 4, bit for bit against
 * wgml_qlinear; want_dispatches: how many the call must record (-1: not checked). */
static void case_multi(const char *what, const wspec *ws, int nw, int64_t m, int64_t k, int group, int want_dispatches) {
    double t0 = now();
    hweight h[WGML_QLINEAR_MULTI_MAX];
    const wgml_qweight *wp[WGML_QLINEAR_MULTI_MAX];
    for (int i = 0; i < nw; i++) {
        h[i] = make_weight(T.g, ws[i].kind, ws[i].n, k, ws[i].kind == 0 ? group : 32, ws[i].bias);
        wp[i] = h[i].w;
    }
    float *hx = th_random((size_t)(m * k), -1, 1);
    bool r3 = m == 4;
    int64_t xs3[3] = {2, m / 2, k}, xs2[2] = {m, k};
    wgml_tensor *x = r3 ? th_tensor_f32(3, xs3, hx) : th_tensor_f32(2, xs2, hx);
    wgml_tensor *outs[WGML_QLINEAR_MULTI_MAX];
    wgml_sync(T.ctx);
    uint64_t d0 = dispatches_so_far();
    wgml_status s = wgml_qlinear_multi(T.g, x, wp, nw, outs);
    wgml_sync(T.ctx); /* the eager dispatches are counted when they are submitted */
    /* the harness's context fills each new output with NaN: one more dispatch per output */
    uint64_t used = dispatches_so_far() - d0 - (uint64_t)nw;
    char name[200];
    int len = snprintf(name, sizeof name, "%s M=%lld K=%lld:", what, (long long)m, (long long)k);
    for (int i = 0; i < nw; i++)
        len += snprintf(name + len, sizeof name - (size_t)len, " %s N=%lld%s", KIND_NAMES[ws[i].kind],
                        (long long)ws[i].n, ws[i].bias ? "+b" : "");
    th_check(s == WGML_OK, "%s: %s", name, wgml_last_error(T.ctx));
    if (want_dispatches >= 0)
        th_check(used == (uint64_t)want_dispatches, "%s: %llu dispatches, want %d", name, (unsigned long long)used,
                 want_dispatches);
    for (int i = 0; i < nw && s == WGML_OK; i++) {
        char oname[260];
        snprintf(oname, sizeof oname, "%s out %d", name, i);
        th_check(outs[i] && wgml_tensor_rank(outs[i]) == (r3 ? 3 : 2) && wgml_tensor_dim(outs[i], -1) == ws[i].n &&
                     wgml_tensor_numel(outs[i]) == m * ws[i].n,
                 "%s shape", oname);
        float *got = th_read_f32(outs[i]);
        double *ref = ref_linear(hx, &h[i], m, ws[i].n, k);
        if (got) th_close(oname, got, ref, (size_t)(m * ws[i].n), tol_abs(k), RTOL);
        if (got && m <= 4) { /* the same per-row arithmetic as the single-weight GEMV */
            wgml_tensor *one = wgml_qlinear(T.g, x, wp[i]);
            float *g1 = th_read_f32(one);
            snprintf(oname, sizeof oname, "%s out %d equals qlinear", name, i);
            if (g1) th_exact_u32(oname, (const uint32_t *)got, (const uint32_t *)g1, (size_t)(m * ws[i].n));
            free(g1);
            wgml_tensor_free(one);
        }
        free(got);
        free(ref);
        wgml_tensor_free(outs[i]);
    }
    printf("  %-100s %.2f s\n", name, now() - t0);
    wgml_tensor_free(x);
    free(hx);
    for (int i = 0; i < nw; i++) free_weight(&h[i]);
}

/* The GEMV cases at M = m0..m1 of 1, 2, 3 weights of one kind (one dispatch), odd N and K, a bias. */
static void fused_rows(int64_t m0, int64_t m1) {
    static const wspec one[1] = {{0, 37, true}};
    static const wspec two[2] = {{1, 40, false}, {1, 13, false}};
    for (int64_t m = m0; m <= m1; m++) {
        case_multi("one", one, 1, m, 77, 32, 1);
        case_multi("two", two, 2, m, 160, 32, 1);
        case_multi("three", THREE, 3, m, 200, 64, 1);
    }
}

/* Each M is a kernel of its own (its rows unrolled), so the cases are parts of about a minute
 * each at 256-bit vectors with checked kernels. */
static void test_fused(void) { fused_rows(1, 2); }
static void test_fused_m34(void) { fused_rows(3, 4); }

/* Three weights: Q8_0, Q4_1 at a qkv-like K, K >= 2048, biases on all three. */
static void test_fused_kinds(void) {
    static const wspec three_q8[3] = {{2, 66, false}, {2, 5, false}, {2, 33, false}};
    static const wspec three_q41[3] = {{1, 64, false}, {1, 19, false}, {1, 19, false}};
    case_multi("three q8", three_q8, 3, 2, 96, 32, 1);
    case_multi("three q4_1 (qkv-like)", three_q41, 3, 1, 576, 32, 1);
    case_multi("three, K >= 2048 (32x4 shape)", THREE, 3, 1, 2080, 32, 1);
    /* biases on all three: 13 storage buffers are more than one dispatch binds, so two */
    static const wspec biased[3] = {{0, 21, true}, {0, 9, true}, {0, 40, true}};
    case_multi("three biased", biased, 3, 3, 96, 32, 2);
}

/* Weights of different kinds: grouped by kind, one dispatch per kind. */
static void test_mixed(void) {
    static const wspec qkv[3] = {{1, 48, false}, {1, 16, false}, {2, 16, false}}; /* Q4_1 q, k; Q8_0 v */
    static const wspec alt[3] = {{2, 30, false}, {0, 17, true}, {2, 12, false}};
    static const wspec all3[3] = {{0, 11, false}, {1, 12, false}, {2, 13, false}};
    case_multi("mixed", qkv, 3, 1, 96, 32, 2);
    case_multi("mixed (first and last fused)", alt, 3, 4, 64, 32, 2);
    case_multi("three kinds", all3, 3, 2, 128, 32, 3);
    /* the GGUF formats by kind: Gemma-3's Q5_0 q and k with a Q8_0 v are one kind (signed 8-bit
     * codes, G = 32) and fuse into one dispatch; Q4_K with Q4_1 (4-bit with a minimum) fuse,
     * Q6_K (G = 16) gets its own */
    static const wspec gemma[3] = {{3, 40, false}, {3, 16, false}, {2, 16, false}};
    static const wspec kq[3] = {{5, 21, false}, {7, 19, false}, {1, 23, false}};
    case_multi("GGUF Q5_0, Q5_0, Q8_0", gemma, 3, 1, 256, 32, 1);
    /* Q4_K and Q4_1 are one kind, but Q4_K keeps its super-block scales (ab forms differ): 3 */
    case_multi("GGUF Q4_K, Q6_K, Q4_1", kq, 3, 3, 512, 32, 3);
    /* two Q4_K weights in one GEMV, each read through its own super-block reader */
    static const wspec kk[3] = {{5, 21, false}, {7, 19, false}, {5, 13, false}};
    case_multi("GGUF Q4_K, Q6_K, Q4_K", kk, 3, 2, 512, 32, 2);
    /* group sizes differ: separate dispatches */
    hweight a = make_weight(T.g, 0, 9, 128, 32, false), b = make_weight(T.g, 0, 7, 128, 64, false);
    const wgml_qweight *wp[2] = {a.w, b.w};
    float *hx = th_random(128, -1, 1);
    int64_t xs[2] = {1, 128};
    wgml_tensor *x = th_tensor_f32(2, xs, hx), *o[2];
    wgml_sync(T.ctx);
    uint64_t d0 = dispatches_so_far();
    th_check(wgml_qlinear_multi(T.g, x, wp, 2, o) == WGML_OK, "G 32 + G 64: %s", wgml_last_error(T.ctx));
    wgml_sync(T.ctx);
    th_check(dispatches_so_far() - d0 == 2 + 2, "G 32 + G 64: two dispatches (and two NaN fills)");
    for (int i = 0; i < 2; i++) {
        float *got = th_read_f32(o[i]);
        double *ref = ref_linear(hx, i ? &b : &a, 1, i ? 7 : 9, 128);
        if (got) th_close(i ? "G 64 out" : "G 32 out", got, ref, (size_t)(i ? 7 : 9), tol_abs(128), RTOL);
        free(got);
        free(ref);
        wgml_tensor_free(o[i]);
    }
    wgml_tensor_free(x);
    free(hx);
    free_weight(&a);
    free_weight(&b);
}

/* M past the GEMV's rows (4 on a GPU, 8 on a CPU adapter): the tiled GEMM for each weight (one
 * dispatch each). */
static void test_fallback(void) {
    static const wspec three[3] = {{0, 37, true}, {1, 29, false}, {1, 64, false}};
    case_multi("GEMM fallback", three, 3, 9, 96, 32, 3);
    case_multi("GEMM fallback", three, 3, 70, 160, 32, 3);
}

/* Two weights whose row groups add up to more than 65,535 workgroups (the 2-D fold, with the
 * second weight's workgroups past the fold): K = 32 gives 4 rows per workgroup. */
static void test_many_workgroups(void) {
    static const wspec big[2] = {{2, 140001, false}, {2, 131075, false}};
    case_multi("two, > 65,535 workgroups", big, 2, 1, 32, 32, 1);
}

/* Recorded into a built graph (weights and x its persistent tensors), run twice with new x. */
static void test_built_graph(void) {
    double t0 = now();
    wgml_graph *g = wgml_graph_new(T.ctx);
    const int64_t k = 160, m = 2, ns[3] = {40, 13, 27};
    hweight h[3];
    const wgml_qweight *wp[3];
    for (int i = 0; i < 3; i++) {
        h[i] = make_weight(g, i == 2 ? 0 : 1, ns[i], k, 32, i == 2);
        wp[i] = h[i].w;
    }
    int64_t xs[2] = {m, k};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *o[3];
    bool ok = x && wgml_qlinear_multi(g, x, wp, 3, o) == WGML_OK;
    for (int i = 0; ok && i < 3; i++) ok = wgml_graph_keep(g, o[i]) == WGML_OK;
    ok = ok && wgml_graph_compile(g) == WGML_OK;
    th_check(ok, "built graph: %s", wgml_last_error(T.ctx));
    th_check(!ok || wgml_graph_dispatch_count(g) == 2, "built graph: %zu dispatches (Q4_1 pair + q4sym)",
             ok ? wgml_graph_dispatch_count(g) : 0);
    for (int run = 0; ok && run < 2; run++) {
        float *hx = th_random((size_t)(m * k), -1, 1);
        th_check(wgml_tensor_write(x, hx, sizeof(float) * (size_t)(m * k)) == WGML_OK, "write x");
        th_check(wgml_graph_run(g) == WGML_OK, "run %d: %s", run, wgml_last_error(T.ctx));
        for (int i = 0; i < 3; i++) {
            float *got = th_read_f32(o[i]);
            double *ref = ref_linear(hx, &h[i], m, ns[i], k);
            char name[64];
            snprintf(name, sizeof name, "built graph run %d out %d", run, i);
            if (got) th_close(name, got, ref, (size_t)(m * ns[i]), tol_abs(k), RTOL);
            free(got);
            free(ref);
        }
        free(hx);
    }
    for (int i = 0; i < 3; i++) free_weight(&h[i]);
    wgml_graph_free(g);
    printf("  built graph: %.2f s\n", now() - t0);
}

static void test_errors(void) {
    hweight a = make_weight(T.g, 1, 8, 64, 32, false), b = make_weight(T.g, 1, 8, 96, 32, false);
    int64_t xs[2] = {1, 64};
    wgml_tensor *x = wgml_full(T.g, WGML_F32, 2, xs, 1.0), *xi = wgml_full(T.g, WGML_I32, 2, xs, 1.0);
    wgml_tensor *o[4] = {(wgml_tensor *)1, (wgml_tensor *)1, (wgml_tensor *)1, (wgml_tensor *)1};
    const wgml_qweight *kmis[2] = {a.w, b.w}, *null1[2] = {a.w, NULL}, *four[4] = {a.w, a.w, a.w, a.w};
    wgml_status s = wgml_qlinear_multi(T.g, x, kmis, 2, o);
    th_expect_error("K mismatch", s == WGML_ERR_SHAPE, WGML_ERR_SHAPE, "qlinear_multi", "weights[1]", "[8, 96]",
                    "K = 64", NULL);
    th_check(!o[0] && !o[1], "outputs are NULL after an error");
    s = wgml_qlinear_multi(T.g, x, null1, 2, o);
    th_expect_error("NULL weight", s == WGML_ERR_ARG, WGML_ERR_ARG, "qlinear_multi", "weights[1] is NULL", NULL);
    s = wgml_qlinear_multi(T.g, x, four, 4, o);
    th_expect_error("too many weights", s == WGML_ERR_ARG, WGML_ERR_ARG, "qlinear_multi", "4 weights", "1 to 3", NULL);
    s = wgml_qlinear_multi(T.g, x, four, 0, o);
    th_expect_error("no weights", s == WGML_ERR_ARG, WGML_ERR_ARG, "qlinear_multi", "0 weights", NULL);
    s = wgml_qlinear_multi(T.g, x, NULL, 1, o);
    th_expect_error("NULL weights array", s == WGML_ERR_ARG, WGML_ERR_ARG, "qlinear_multi", "weights is NULL", NULL);
    s = wgml_qlinear_multi(T.g, x, kmis, 1, NULL);
    th_expect_error("NULL outs", s == WGML_ERR_ARG, WGML_ERR_ARG, "qlinear_multi", "outs is NULL", NULL);
    s = wgml_qlinear_multi(T.g, NULL, kmis, 1, o);
    th_expect_error("NULL x", s == WGML_ERR_ARG, WGML_ERR_ARG, "qlinear_multi", "x is NULL", NULL);
    s = wgml_qlinear_multi(T.g, xi, kmis, 1, o);
    th_expect_error("i32 x", s == WGML_ERR_DTYPE, WGML_ERR_DTYPE, "qlinear_multi", "x", "i32", NULL);
    s = wgml_qlinear_multi(NULL, x, kmis, 1, o);
    th_check(s == WGML_ERR_ARG && strstr(wgml_last_error(NULL), "qlinear_multi: graph is NULL"),
             "NULL graph: %s", wgml_last_error(NULL));
    /* x on another graph than the weights */
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    wgml_tensor *x2 = wgml_tensor_new(g2, WGML_F32, 2, xs);
    s = wgml_qlinear_multi(g2, x2, kmis, 1, o);
    th_expect_error("weight of another graph", s == WGML_ERR_ARG, WGML_ERR_ARG, "qlinear_multi", "weights[0]",
                    "different graphs", NULL);
    wgml_graph_free(g2);
    wgml_tensor_free(x);
    wgml_tensor_free(xi);
    free_weight(&a);
    free_weight(&b);
    wgml_sync(T.ctx);
}

/* The final reduction through subgroup operations: $WGML_QW_GEMV_SUBGROUP=1 (subgroupAdd or
 * the shuffle butterfly, then one workgroup-memory step), and =4 (the subgroup taken to hold at
 * least 4 lanes: with TPR = 4 the sums are final in the subgroup) under several GEMV shapes. */
static void test_subgroup(void) {
    wgml_device_info info;
    wgml_device_get_info(T.ctx, &info);
    if (!info.has_subgroups) {
        printf("  the device has no subgroups: the tree reduction only\n");
        return;
    }
    printf("  subgroups: size %u..%u (0: not reported)\n", info.subgroup_min, info.subgroup_max);
    static const wspec two[2] = {{1, 40, false}, {1, 19, false}};
    static const struct {
        const char *sg, *shape;
    } runs[] = {{"1", NULL}, {"1", "4,2,64,1"}, {"1", "16,2,256,2"}, {"4", "4,2,64,1"}, {"1", "32,4,256,1"}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        th_setenv("WGML_QW_GEMV_SUBGROUP", runs[r].sg, 1);
        if (runs[r].shape) th_setenv("WGML_QW_GEMV", runs[r].shape, 1);
        char what[96];
        snprintf(what, sizeof what, "subgroup=%s shape %s", runs[r].sg, runs[r].shape ? runs[r].shape : "auto");
        case_multi(what, THREE, 3, 3, 200, 64, 1);
        case_multi(what, two, 2, 1, 2080, 32, 1);
        th_unsetenv("WGML_QW_GEMV");
    }
    th_unsetenv("WGML_QW_GEMV_SUBGROUP");
}

/* M past the GEMV's rows, more than 65,535 workgroups, a built graph */
static void test_rest(void) {
    test_fallback();
    test_many_workgroups();
    test_built_graph();
}

int main(int argc, char **argv) {
    /* before the device: its driver's threads read the environment as they start, and
     * setenv beside them is a race (lavapipe crashed in getenv under ASan) */
    th_setenv("WGML_QW_GEMV_MAX_M", "4", 0); /* the GEMV's rows on a GPU (a CPU adapter's takes one) */
    /* the tree reduction unless $WGML_QW_GEMV_SUBGROUP says otherwise (auto may pick subgroups) */
    th_setenv("WGML_QW_GEMV_SUBGROUP", "0", 0);
    th_init_args("test_qw_multi", argc, argv);
    static const th_part parts[] = {
        {"errors", test_errors}, {"fused", test_fused}, {"fused-m34", test_fused_m34}, {"fused-kinds", test_fused_kinds},
        {"mixed", test_mixed},   {"rest", test_rest},   {"subgroup", test_subgroup}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
