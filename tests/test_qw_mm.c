#define _POSIX_C_SOURCE 200809L
/* The qweight GEMM's tile variants and split-K: every variant (single- and double-buffered) in both
 * orientations (forward O = A·Wᵀ + bias, input gradient O = A·W), unsplit and split, writing a
 * fresh output and accumulating into an existing one (qw_mm_into), on odd shapes with partial
 * tiles, every code kind (4-bit symmetric with G = 32/64/128, 4-bit with minimum, 8-bit);
 * the automatic choice; a built graph run twice. References in fp64 (qw_host.h). */
#include "harness.h"
#include "ops/qweight/qw_internal.h"
#include "qw_host.h"

/* One product through variant vi with `splits` K slices forced by the environment knobs
 * (the sweep's interface). api: through wgml_qlinear / wgml_qlinear_dx (fresh output);
 * else qw_mm_into on an output holding random values, accumulating or overwriting. */
static void case_mm(int vi, int trans, int splits, bool accumulate, bool api, int kind, int64_t m, int64_t r,
                    int64_t c, int group, bool bias) {
    double t0 = now();
    const char *vname = qw_mm_variant_name(vi);
    char sbuf[16];
    snprintf(sbuf, sizeof sbuf, "%d", splits);
    th_setenv("WGML_QW_MM_VARIANT", vname, 1);
    th_setenv("WGML_QW_MM_SPLITK", sbuf, 1);
    int64_t n = trans ? r : c, k = trans ? c : r;
    hw h = make_weight(T.g, kind, n, k, group, bias);
    char name[200];
    snprintf(name, sizeof name, "%s %s S=%d%s%s %s M=%lld R=%lld C=%lld G=%d%s", vname, trans ? "dx" : "fwd", splits,
             accumulate ? " acc" : "", api ? " api" : "", KIND_NAMES[kind], (long long)m, (long long)r, (long long)c,
             group, h.bias ? " bias" : "");
    if (!h.w) {
        free_weight(&h);
        return;
    }
    int pv, ps;
    qw_mm_plan(T.ctx, m, r, c, false, &pv, &ps);
    /* the plan caps the slices at one BR step each */
    int br = (int)(strstr(vname, "_k8_") ? 8 : strstr(vname, "_k32_") ? 32 : 16);
    int want_s = splits < (r + br - 1) / br ? splits : (int)((r + br - 1) / br);
    th_check(pv == vi && ps == want_s, "%s: plan %s S=%d (want S=%d)", name, qw_mm_variant_name(pv), ps, want_s);
    float *ha = th_random((size_t)(m * r), -1, 1);
    float *h0 = th_random((size_t)(m * c), -2, 2);
    int64_t as[2] = {m, r}, os[2] = {m, c};
    wgml_tensor *a = th_tensor_f32(2, as, ha), *o = NULL;
    if (api) {
        o = trans ? wgml_qlinear_dx(T.g, a, h.w) : wgml_qlinear(T.g, a, h.w);
        th_check(o != NULL, "%s: recorded (%s)", name, wgml_last_error(T.ctx));
    } else {
        o = th_tensor_f32(2, os, h0);
        th_check(qw_mm_into(T.g, "qw_mm_test", a, h.w, trans, m, o, accumulate) == WGML_OK, "%s: recorded (%s)", name,
                 wgml_last_error(T.ctx));
    }
    float *got = o ? th_read_f32(o) : NULL;
    double *ref = trans ? ref_dx(ha, &h, m, n, k) : ref_forward(ha, &h, m, n, k);
    if (accumulate)
        for (int64_t i = 0; i < m * c; i++) ref[i] += h0[i];
    if (got) th_close(name, got, ref, (size_t)(m * c), tol_abs(r), RTOL);
    printf("  %-86s %.2f s\n", name, now() - t0);
    free(got);
    free(ref);
    free(ha);
    free(h0);
    wgml_tensor_free(a);
    wgml_tensor_free(o);
    free_weight(&h);
}

/* Every variant x orientation x split (off, 3) x (fresh, accumulate), the forward with and
 * without a bias. The pipeline depends on the variant, the orientation, the code kind, G and
 * whether R is a multiple of 4 (vec4 loads of A), not on split, bias or ACC (uniform flags), so
 * each variant keeps one kind per orientation (rotating over the variants) to bound the
 * compile time on lavapipe; M and C leave partial tiles for every tile size. */
/* Variants [v0, v1): every orientation x split x accumulation on the q4 kinds, then the GGUF
 * 8-bit layouts (Q6_K, Q5_1, Q2_K) and F16 held as f32. */
static void test_variants(int v0, int v1) {
    static const int groups[] = {32, 64, 128};
    for (int v = v0; v < v1 && v < qw_mm_variant_count(); v++) {
        double t0 = now();
        for (int trans = 0; trans < 2; trans++)
            for (int si = 0; si < 2; si++)
                for (int acc = 0; acc < 2; acc++) {
                    int splits = si ? 3 : 1;
                    int64_t m = acc ? 133 : 70;
                    /* (the CPU kernel: odd R, a partial last word; its 8-bit cases below are even) */
                    bool odd_r = v % 2 == 1 || !strncmp(qw_mm_variant_name(v), "cpu", 3);
                    int kind = trans ? v % 3 : 0;
                    int group = kind == 0 ? groups[(v + trans) % 3] : 32;
                    int64_t r, c;
                    if (!trans) {
                        r = odd_r ? 203 : 200; /* K */
                        c = acc ? 150 : 37;    /* N */
                    } else {
                        r = odd_r ? 151 : 148;                            /* N */
                        c = kind == 0 ? (acc ? 200 : 77) : 96 + 64 * acc; /* K */
                    }
                    /* the fresh-output cases alternate between the public API and qw_mm_into */
                    bool api = !acc && (v + trans + si) % 2 == 0;
                    case_mm(v, trans, splits, acc != 0, api, kind, m, r, c, group, !trans && (si + acc) != 1);
                }
        printf("  variant %-22s %.2f s\n", qw_mm_variant_name(v), now() - t0);
        /* the GGUF 8-bit layouts, forward and dx (fresh, qw_mm_into, split and ACC rotating):
         * Q6_K (signed codes, G = 16: a step of 16 or 32 covers two groups) and Q5_1 (unsigned
         * codes with a minimum); and F16 held as f32 (one value per word, K = 77 padded to 96) */
        t0 = now();
        /* (the public API writes a fresh output: only qw_mm_into accumulates) */
        case_mm(v, 0, v % 3 == 0 ? 3 : 1, v % 2 == 0, v % 4 == 1, 7, 70, 512, 37, 16, false);
        case_mm(v, 1, v % 3 == 1 ? 3 : 1, v % 2 == 1, v % 4 == 2, 7, 133, 45, 256, 16, false);
        case_mm(v, v % 2, v % 3 == 2 ? 3 : 1, v % 4 == 1, v % 4 == 0, 4, 70, v % 2 ? 45 : 96, v % 2 ? 96 : 45, 32, false);
        case_mm(v, 1 - v % 2, 1, false, true, 8, 70, v % 2 ? 77 : 45, v % 2 ? 45 : 77, 32, false); /* F16 as f32 */
        /* Q2_K: G = 16 with a minimum (Q3_K and the IQ4 types share Q6_K's and Q8_0's forms) */
        case_mm(v, v % 2, 1, v % 4 == 3, v % 4 == 0, 9, 70, v % 2 ? 45 : 512, v % 2 ? 256 : 45, 16, false);
        printf("  variant %-22s (Q6_K, Q5_1, F16, Q2_K) %.2f s\n", qw_mm_variant_name(v), now() - t0);
    }
    th_unsetenv("WGML_QW_MM_VARIANT");
    th_unsetenv("WGML_QW_MM_SPLITK");
}

/* The forward with the GGUF kinds (4-bit with minimum, 8-bit) on double-buffered tiles; more
 * slices than steps (capped: one step each) and many slices with a bias and ACC. */
static void test_extra(void) {
    case_mm(3, 0, 1, false, true, 1, 133, 160, 150, 32, false);
    case_mm(3, 0, 3, true, false, 1, 70, 160, 37, 32, false);
    case_mm(5, 0, 1, true, false, 2, 133, 96, 150, 32, false);
    case_mm(5, 0, 3, false, true, 2, 70, 96, 37, 32, false);
    case_mm(3, 0, 64, true, false, 0, 70, 96, 37, 32, true);
    case_mm(5, 1, 7, true, false, 2, 133, 300, 96, 32, false);
    case_mm(0, 0, 5, false, true, 0, 65, 1000, 66, 128, true);
    th_unsetenv("WGML_QW_MM_VARIANT");
    th_unsetenv("WGML_QW_MM_SPLITK");
}

/* The automatic choice (no knobs set): 128 x 64 where it gives >= 256 tiles and the output is
 * not segmented, else 64 x 64; split when the tiles are < 528 and R >= 1024 (or < 132 and R >=
 * 512) and the product has >= 2^24 MACs. */
static void test_auto(void) {
    static const struct {
        int64_t m, r, c;
        const char *variant;
        int splits;
        bool segmented;
    } cases[] = {
        {4096, 576, 1536, "tile128x64_k16_r8x4", 1, false},  /* training forward: 768 tiles */
        {4096, 1536, 576, "tile128x64_k16_r8x4", 4, false},  /* 288 tiles, R = 1536: ceil(1056 / 288) */
        {4096, 576, 49152, "tile128x64_k16_r8x4", 1, false}, /* the LM head */
        {512, 1536, 576, "tile128x64_k16_r8x4", 6, false},   /* 36 tiles of 128 x 64, split: min(30, 1536/256) */
        {512, 576, 1536, "tile128x64_k16_r8x4", 4, false},   /* 96 tiles, R = 576 split: min(11, 576/128) */
        {512, 576, 192, "tile128x64_k16_r8x4", 4, false},    /* 12 tiles, R = 576: min(88, 576/128) */
        {4096, 576, 192, "tile128x64_k16_r8x4", 4, false},   /* SmolLM2's k/v forward: 96 tiles, split */
        {1024, 576, 1536, "tile64x64_k32_r4x4", 1, false},   /* 192 tiles of 128 x 64, not split: 64 x 64 */
        {70, 4096, 37, "tile64x64_k32_r4x4", 1, false},      /* too small a product to split */
        {4096, 576, 1536, "tile64x64_k32_r4x4", 1, true}, /* segmented: never 128 x 64 */
        {512, 640, 4096, "tile64x64_k32_r4x4", 1, true}, /* Gemma-3-270M's gate and up as one */
        {512, 640, 4096, "tile128x64_k16_r8x4", 1, false}, /* the same unsegmented: 256 tiles */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int v, s;
        qw_mm_plan_for(T.ctx, false, cases[i].m, cases[i].r, cases[i].c, cases[i].segmented, &v, &s);
        const char *want = cases[i].variant;
        int want_s = cases[i].splits;
        th_check(!strcmp(qw_mm_variant_name(v), want) && s == want_s,
                 "auto plan M=%lld R=%lld C=%lld: %s S=%d (want %s S=%d)", (long long)cases[i].m,
                 (long long)cases[i].r, (long long)cases[i].c, qw_mm_variant_name(v), s, want, want_s);
    }
    /* a CPU adapter: the CPU kernel at every shape, segmented or not; split only a reduction of
     * >= 1024 over fewer than 32 tiles (4 x 512), into about 32 workgroups of >= 256 steps, at
     * most 16 */
    static const struct {
        int64_t m, r, c;
        int splits;
    } cpu[] = {
        {16, 640, 262144, 1}, /* Gemma-3-270M's LM head, 16 rows */
        {16, 262144, 640, 4}, /* its input gradient: 8 tiles, 4 slices */
        {4, 2048, 640, 8},    /* 2 tiles, R / 256 = 8 */
        {512, 2048, 640, 1},  /* 256 tiles */
        {16, 576, 640, 1},    /* R < 1024 */
    };
    for (size_t i = 0; i < sizeof cpu / sizeof cpu[0]; i++)
        for (int seg = 0; seg < 2; seg++) {
            int v, s;
            qw_mm_plan_for(T.ctx, true, cpu[i].m, cpu[i].r, cpu[i].c, seg, &v, &s);
            th_check(!strcmp(qw_mm_variant_name(v), "cpu_k32_r4x8") && s == cpu[i].splits,
                     "CPU plan M=%lld R=%lld C=%lld%s: %s S=%d (want cpu_k32_r4x8 S=%d)", (long long)cpu[i].m,
                     (long long)cpu[i].r, (long long)cpu[i].c, seg ? " segmented" : "", qw_mm_variant_name(v), s,
                     cpu[i].splits);
        }
    /* an unknown name falls back to the automatic choice; an index selects by position */
    int v, s;
    th_setenv("WGML_QW_MM_VARIANT", "no_such_tile", 1);
    qw_mm_plan_for(T.ctx, false, 4096, 576, 1536, false, &v, &s);
    th_check(!strcmp(qw_mm_variant_name(v), "tile128x64_k16_r8x4"), "unknown variant name: auto (%s)",
             qw_mm_variant_name(v));
    th_setenv("WGML_QW_MM_VARIANT", "0", 1);
    th_setenv("WGML_QW_MM_SPLITK", "1", 1);
    qw_mm_plan(T.ctx, 512, 1536, 576, false, &v, &s);
    th_check(v == 0 && s == 1, "variant by index 0, split 1: %s S=%d", qw_mm_variant_name(v), s);
    th_unsetenv("WGML_QW_MM_VARIANT");
    th_unsetenv("WGML_QW_MM_SPLITK");
    /* the automatic split on a real product: M = 512, R = 1536, C = 576 at S = 6 */
    case_mm(5, 1, 6, false, true, 0, 512, 1536, 576, 64, false);
    th_unsetenv("WGML_QW_MM_VARIANT");
    th_unsetenv("WGML_QW_MM_SPLITK");
}

/* A built graph with split double-buffered products (forward with bias; input gradient
 * accumulated into an existing tensor), run twice with new inputs. */
static void test_graph(void) {
    const int64_t m = 70, n = 150, k = 200;
    wgml_graph *g = wgml_graph_new(T.ctx);
    hw h = make_weight(g, 0, n, k, 64, true);
    th_setenv("WGML_QW_MM_VARIANT", "db128x64_k16_r8x4", 1);
    th_setenv("WGML_QW_MM_SPLITK", "3", 1);
    int64_t xs[2] = {m, k}, ds[2] = {m, n};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *d = wgml_tensor_new(g, WGML_F32, 2, ds);
    wgml_tensor *gx = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_tensor *o = h.w && x ? wgml_qlinear(g, x, h.w) : NULL;
    th_setenv("WGML_QW_MM_VARIANT", "db128x128_k8_r8x8", 1);
    th_setenv("WGML_QW_MM_SPLITK", "4", 1);
    wgml_status s = h.w && d && gx ? qw_mm_into(g, "qw_mm_test", d, h.w, 1, m, gx, true) : WGML_ERR_ARG;
    th_unsetenv("WGML_QW_MM_VARIANT");
    th_unsetenv("WGML_QW_MM_SPLITK");
    bool ok = o && s == WGML_OK && !wgml_graph_keep(g, o) && !wgml_graph_keep(g, gx) && !wgml_graph_compile(g);
    th_check(ok, "graph built: %s", wgml_last_error(T.ctx));
    for (int run = 0; ok && run < 2; run++) {
        float *hx = th_random((size_t)(m * k), -1, 1), *hd = th_random((size_t)(m * n), -1, 1);
        float *g0 = th_random((size_t)(m * k), -1, 1);
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)(m * k));
        wgml_tensor_write(d, hd, sizeof(float) * (size_t)(m * n));
        wgml_tensor_write(gx, g0, sizeof(float) * (size_t)(m * k));
        th_check(wgml_graph_run(g) == WGML_OK, "graph run %d: %s", run, wgml_last_error(T.ctx));
        float *go = th_read_f32(o), *gg = th_read_f32(gx);
        double *ro = ref_forward(hx, &h, m, n, k), *rg = ref_dx(hd, &h, m, n, k);
        for (int64_t i = 0; i < m * k; i++) rg[i] += g0[i];
        char name[96];
        snprintf(name, sizeof name, "graph run %d: forward + bias (db128x64, S=3)", run);
        if (go) th_close(name, go, ro, (size_t)(m * n), tol_abs(k), RTOL);
        snprintf(name, sizeof name, "graph run %d: d_x accumulated (db128x128, S=4)", run);
        if (gg) th_close(name, gg, rg, (size_t)(m * k), tol_abs(n), RTOL);
        free(hx);
        free(hd);
        free(g0);
        free(go);
        free(gg);
        free(ro);
        free(rg);
    }
    free_weight(&h);
    wgml_graph_free(g);
}

static void variants_01(void) { test_variants(0, 2); }
static void variants_23(void) { test_variants(2, 4); }
static void variants_4(void) { test_variants(4, 5); }
static void variants_5(void) { test_variants(5, 6); }
static void variants_67(void) { test_variants(6, 8); }
static void variants_8(void) { test_variants(8, 9); }
static void test_rest(void) {
    test_auto();
    test_graph();
}

int main(int argc, char **argv) {
    th_init_args("test_qw_mm", argc, argv);
    th_check(qw_mm_variant_count() == 9, "the parts below cover the %d variants", qw_mm_variant_count());
    static const th_part parts[] = {{"v01", variants_01}, {"v23", variants_23}, {"v4", variants_4},
                                    {"v5", variants_5},   {"v67", variants_67}, {"v8", variants_8},
                                    {"extra", test_extra}, {"rest", test_rest}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
