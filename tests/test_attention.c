/* Attention: sdpa (multi-head and grouped-query, causal end-aligned and not, prefill and
 * decode, key counts that are not multiples of the key block), the KV cache (append with
 * bounds, attention over the filled prefix, a built decode graph replayed over six steps with
 * rope and new positions; the f16 form), more than 65,535 workgroups, and bad input. References in double. */
#define _POSIX_C_SOURCE 200112L
#include "harness.h"
#include "ops/attention/sdpa_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

/* fp32 dot products of length D and a softmax-weighted average of v in [-1, 1]: errors are a
 * few 1e-7; 2e-5 leaves room for long key ranges and large logits. */
#define ATOL 2e-5
#define RTOL 1e-4

/* out[b,h,i,:] = softmax_j(q·k_j·scale, j < len, causal: j <= len - Sq + i, window > 0: also
 * j > len - Sq + i - window)·v; k, v rows are strided by kstride (Smax for a cache). A query
 * that sees no key gets zeros. */
static void ref_sdpa_w(const float *q, const float *k, const float *v, int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq,
                       int64_t len, int64_t kstride, int64_t D, int causal, double scale, int64_t window, double *out) {
    int64_t G = Hq / Hkv;
    double *s = malloc(sizeof(double) * (size_t)(len > 0 ? len : 1));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / G;
            const float *kb = k + (b * Hkv + hk) * kstride * D, *vb = v + (b * Hkv + hk) * kstride * D;
            for (int64_t i = 0; i < Sq; i++) {
                const float *qi = q + ((b * Hq + h) * Sq + i) * D;
                double *o = out + ((b * Hq + h) * Sq + i) * D;
                int64_t n = causal ? len - Sq + i + 1 : len;
                if (n > len) n = len;
                int64_t j0 = window > 0 && n > window ? n - window : 0;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = j0; j < n; j++) {
                    double d = 0;
                    for (int64_t e = 0; e < D; e++) d += (double)qi[e] * kb[j * D + e];
                    s[j] = d * scale;
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t e = 0; e < D; e++) o[e] = 0;
                for (int64_t j = j0; j < n; j++) {
                    double w = exp(s[j] - mx);
                    sum += w;
                    for (int64_t e = 0; e < D; e++) o[e] += w * vb[j * D + e];
                }
                for (int64_t e = 0; e < D; e++) o[e] = n > 0 ? o[e] / sum : 0;
            }
        }
    free(s);
}

static void ref_sdpa(const float *q, const float *k, const float *v, int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq,
                     int64_t len, int64_t kstride, int64_t D, int causal, double scale, double *out) {
    ref_sdpa_w(q, k, v, B, Hq, Hkv, Sq, len, kstride, D, causal, scale, 0, out);
}

/* Sliding-window causal attention (wgml_sdpa_window) and the same over a cache whose rows past
 * len are NaN (wgml_sdpa_cached_window): prefill, a chunk after earlier keys, decode over many
 * key chunks (most of them wholly before the window), Gemma 3's head dim 256 with one kv head,
 * and a window wider than the keys (plain causal). */
static void case_window(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Skv, int64_t D, int64_t window,
                        int cached) {
    int64_t Smax = cached ? Skv + 9 : Skv, qs[4] = {B, Hq, Sq, D}, ks[4] = {B, Hkv, Smax, D}, one = 1;
    int64_t nq = B * Hq * Sq * D, nk = B * Hkv * Smax * D;
    float *hq = th_random((size_t)nq, -1, 1), *hk = th_random((size_t)nk, -1, 1), *hv = th_random((size_t)nk, -1, 1);
    for (int64_t bh = 0; bh < B * Hkv; bh++)
        for (int64_t j = Skv; j < Smax; j++)
            for (int64_t e = 0; e < D; e++) hk[(bh * Smax + j) * D + e] = hv[(bh * Smax + j) * D + e] = NAN;
    wgml_tensor *q = th_tensor_f32(4, qs, hq), *k = th_tensor_f32(4, ks, hk), *v = th_tensor_f32(4, ks, hv);
    int32_t len = (int32_t)Skv;
    wgml_tensor *l = th_tensor_i32(1, &one, &len);
    wgml_tensor *o = cached ? wgml_sdpa_cached_window(T.g, q, k, v, l, window, 0) : wgml_sdpa_window(T.g, q, k, v, window, 0);
    th_check(o != NULL, "sdpa_window returns a tensor: %s", wgml_last_error(T.ctx));
    float *got = th_read_f32(o);
    double *ref = malloc(sizeof(double) * (size_t)nq);
    ref_sdpa_w(hq, hk, hv, B, Hq, Hkv, Sq, Skv, Smax, D, 1, 1 / sqrt((double)D), window, ref);
    char name[160];
    snprintf(name, sizeof name, "sdpa%s_window B%lld Hq%lld Hkv%lld Sq%lld Skv%lld D%lld window %lld",
             cached ? "_cached" : "", (long long)B, (long long)Hq, (long long)Hkv, (long long)Sq, (long long)Skv,
             (long long)D, (long long)window);
    th_close(name, got, ref, (size_t)nq, ATOL, RTOL);
    free(hq); free(hk); free(hv); free(got); free(ref);
    wgml_tensor_free(q); wgml_tensor_free(k); wgml_tensor_free(v); wgml_tensor_free(l); wgml_tensor_free(o);
}

static void test_window(void) {
    case_window(2, 4, 1, 70, 70, 64, 16, 0);    /* prefill: blocks straddle the window's edge */
    case_window(1, 9, 3, 37, 300, 64, 50, 0);   /* a chunk after 263 keys */
    case_window(1, 9, 3, 37, 300, 64, 50, 1);
    case_window(1, 4, 1, 1, 2000, 64, 512, 1);  /* decode: key chunks before the window are empty */
    case_window(1, 4, 1, 33, 40, 256, 7, 0);    /* Gemma 3's head dim, one kv head */
    case_window(1, 4, 1, 1, 40, 256, 7, 1);
    case_window(1, 2, 2, 20, 20, 32, 100, 0);   /* window wider than the keys */
    case_window(1, 2, 1, 9, 9, 16, 1, 0);       /* each query sees itself only */
    int64_t s4[4] = {1, 1, 4, 8};
    float zeros[32] = {0};
    wgml_tensor *x = th_tensor_f32(4, s4, zeros);
    th_expect_error("sdpa_window window 0", wgml_sdpa_window(T.g, x, x, x, 0, 0) == NULL, WGML_ERR_ARG, "sdpa_window",
                    "window 0", NULL);
    wgml_tensor_free(x);
}

/* One sdpa case with random q, k, v in [-amp, amp]. */
static void case_sdpa(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Skv, int64_t D, int causal, float scale,
                      double amp, const char *dump_case) {
    int64_t qs[4] = {B, Hq, Sq, D}, ks[4] = {B, Hkv, Skv, D};
    int64_t nq = B * Hq * Sq * D, nk = B * Hkv * Skv * D;
    float *hq = th_random((size_t)nq, -amp, amp), *hk = th_random((size_t)nk, -amp, amp), *hv = th_random((size_t)nk, -1, 1);
    wgml_tensor *q = th_tensor_f32(4, qs, hq), *k = th_tensor_f32(4, ks, hk), *v = th_tensor_f32(4, ks, hv);
    double t0 = now();
    wgml_tensor *o = wgml_sdpa(T.g, q, k, v, causal, scale);
    th_check(o != NULL, "sdpa returns a tensor: %s", wgml_last_error(T.ctx));
    double t1 = now();
    float *got = th_read_f32(o);
    double t2 = now();
    double *ref = malloc(sizeof(double) * (size_t)nq);
    double sc = scale > 0 ? scale : 1.0 / sqrt((double)D);
    ref_sdpa(hq, hk, hv, B, Hq, Hkv, Sq, Skv, Skv, D, causal, sc, ref);
    char name[200];
    snprintf(name, sizeof name, "sdpa B%lld Hq%lld Hkv%lld Sq%lld Skv%lld D%lld %s scale %g amp %g", (long long)B,
             (long long)Hq, (long long)Hkv, (long long)Sq, (long long)Skv, (long long)D, causal ? "causal" : "full",
             sc, amp);
    th_close(name, got, ref, (size_t)nq, ATOL, RTOL);
    printf("    (record %.2fs, run %.2fs)\n", t1 - t0, t2 - t1);
    if (dump_case) {
        float prm[2] = {(float)causal, (float)sc};
        int64_t two = 2;
        th_dump_tensor(dump_case, "q", q);
        th_dump_tensor(dump_case, "k", k);
        th_dump_tensor(dump_case, "v", v);
        th_dump(dump_case, "params", WGML_F32, 1, &two, prm);
        th_dump_tensor(dump_case, "out", o);
    }
    free(hq); free(hk); free(hv); free(got); free(ref);
    wgml_tensor_free(q); wgml_tensor_free(k); wgml_tensor_free(v); wgml_tensor_free(o);
}

static void test_sdpa(void) {
    for (int causal = 0; causal < 2; causal++) {
        case_sdpa(2, 3, 3, 37, 37, 64, causal, 0, 1, causal ? "sdpa_mha_causal" : "sdpa_mha_full"); /* prefill, MHA */
        case_sdpa(1, 9, 3, 129, 129, 64, causal, 0, 1, causal ? "sdpa_gqa_causal" : NULL);           /* SmolLM2 prefill */
        case_sdpa(2, 9, 3, 1, 129, 64, causal, 0, 1, causal ? "sdpa_gqa_decode" : NULL);             /* decode */
        case_sdpa(1, 2, 2, 1, 37, 64, causal, 0, 1, NULL);      /* decode, one row per workgroup */
        case_sdpa(2, 4, 2, 5, 37, 8, causal, 0, 1, NULL);       /* chunk of queries at the end */
        case_sdpa(1, 6, 1, 7, 7, 12, causal, 0.3f, 1, NULL);    /* D not a multiple of the threads of a row */
        case_sdpa(1, 2, 1, 16, 33, 64, causal, 0, 4, NULL);     /* large logits */
    }
    case_sdpa(1, 1, 1, 1, 1, 4, 1, 0, 1, NULL);                 /* one key */
    case_sdpa(1, 9, 3, 1, 2000, 64, 1, 0, 1, NULL);             /* long decode: many key chunks */
    case_sdpa(1, 9, 3, 37, 300, 64, 1, 0, 1, NULL);             /* prefill chunk after 263 keys */
    case_sdpa(1, 3, 3, 20, 20, 128, 1, 0, 1, "sdpa_d128");     /* D = 128: scores over chunks of D */
    for (int causal = 0; causal < 2; causal++)                 /* Gemma 3's D = 256 (4 query heads, 1 kv head) */
        case_sdpa(1, 4, 1, 37, 45, 256, causal, 0, 1, causal ? "sdpa_d256" : NULL);
    for (int causal = 0; causal < 2; causal++)                 /* D = 32: the 4x32-thread tile fits 32 KiB */
        case_sdpa(2, 6, 2, 70, 70, 32, causal, 0, 1, NULL);
    /* a GPU's few-rows tile (16x4 threads, 1 x 4 each), which a CPU adapter does not choose */
    th_setenv("WGML_SDPA_TILE", "16,4,1,4", 1);
    case_sdpa(2, 9, 3, 1, 129, 64, 1, 0, 1, NULL);
    th_unsetenv("WGML_SDPA_TILE");
}

/* More than 65,535 workgroups: 70,000 batch entries of one query row each. */
static void test_huge_grid(void) {
    case_sdpa(70000, 1, 1, 1, 3, 4, 0, 0, 1, NULL);
}

/* Writes random data into a cache, appends rows at pos and checks every cache word exactly:
 * rows outside 0 .. Smax - 1 are never written (no spill into the next head). */
static void case_append_bounds(int32_t pos, int64_t snew) {
    int64_t B = 2, H = 2, Smax = 4, D = 8, cs[4] = {B, H, Smax, D}, ns[4] = {B, H, snew, D}, ps[1] = {1};
    int64_t nc = B * H * Smax * D, nn = B * H * snew * D;
    float *hc = th_random((size_t)nc, -1, 1), *hn = th_random((size_t)nn, 2, 3);
    wgml_tensor *c = th_tensor_f32(4, cs, hc), *n = th_tensor_f32(4, ns, hn), *p = th_tensor_i32(1, ps, &pos);
    th_check(!wgml_kv_append(T.g, c, n, p), "kv_append: %s", wgml_last_error(T.ctx));
    float *got = th_read_f32(c);
    uint32_t *want = malloc(sizeof(uint32_t) * (size_t)nc);
    memcpy(want, hc, sizeof(float) * (size_t)nc);
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t s = 0; s < snew; s++) {
            int64_t row = (int64_t)pos + s;
            if (row >= 0 && row < Smax) memcpy(want + (bh * Smax + row) * D, hn + (bh * snew + s) * D, sizeof(float) * (size_t)D);
        }
    char name[96];
    snprintf(name, sizeof name, "kv_append %lld rows at pos %d into Smax 4", (long long)snew, (int)pos);
    if (got) th_exact_u32(name, (const uint32_t *)got, want, (size_t)nc);
    free(hc); free(hn); free(got); free(want);
    wgml_tensor_free(c); wgml_tensor_free(n); wgml_tensor_free(p);
}

static void test_append_bounds(void) {
    case_append_bounds(0, 2);
    case_append_bounds(2, 3);            /* last row would be 4: skipped */
    case_append_bounds(3, 1);
    case_append_bounds(-1, 3);           /* row -1 skipped */
    case_append_bounds(4, 1);            /* all past the end */
    case_append_bounds(100, 2);
    case_append_bounds(2147483647, 2);   /* no wrap-around */
    case_append_bounds(-2147483647, 2);
}

/* The f16 form (src/ops/attention/kv_cache.h): kv_append into a u32 cache, each element written
 * within one binary16 spacing of its value (the rounding is the implementation's), values in
 * +-300 so that the exponent matters, and every other word untouched (rows outside
 * 0 .. Smax - 1 skipped, no spill into the next head). */
static void case_append_f16(int32_t pos, int64_t snew) {
    int64_t B = 2, H = 2, Smax = 4, D = 8, cw[4] = {B, H, Smax, D / 2}, ns[4] = {B, H, snew, D}, ps[1] = {1};
    int64_t nc = B * H * Smax * D, nn = B * H * snew * D;
    float *hc = th_random((size_t)nc, -1, 1), *hn = th_random((size_t)nn, -300, 300);
    wgml_tensor *c = th_tensor_half(4, cw, hc), *n = th_tensor_f32(4, ns, hn), *p = th_tensor_i32(1, ps, &pos);
    th_check(!wgml_kv_append(T.g, c, n, p), "kv_append f16: %s", wgml_last_error(T.ctx));
    float *got = th_read_half(c);
    double *want = malloc(sizeof(double) * (size_t)nc), *tol = malloc(sizeof(double) * (size_t)nc);
    for (int64_t i = 0; i < nc; i++) want[i] = th_half(th_to_half(hc[i])), tol[i] = 0;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t s = 0; s < snew; s++) {
            int64_t row = (int64_t)pos + s;
            for (int64_t e = 0; row >= 0 && row < Smax && e < D; e++) {
                double x = hn[(bh * snew + s) * D + e];
                want[(bh * Smax + row) * D + e] = x, tol[(bh * Smax + row) * D + e] = th_half_ulp(x);
            }
        }
    char name[96];
    snprintf(name, sizeof name, "kv_append f16: %lld rows at pos %d into Smax 4", (long long)snew, (int)pos);
    th_close_each(name, got, want, (size_t)nc, tol, 0);
    free(hc); free(hn); free(got); free(want); free(tol);
    wgml_tensor_free(c); wgml_tensor_free(n); wgml_tensor_free(p);
}

/* sdpa_cached (window 0) or sdpa_cached_window over f16 caches against fp64 over the values the
 * caches hold (the inputs rounded by th_to_half, exact on the host): keys split or whole by the
 * shape, D 64 (q and k tiles whole) and 256 (in chunks of dims). */
static void case_cached_f16(int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Smax, int64_t D, int32_t len, int64_t window) {
    int64_t B = 2, qs[4] = {B, Hq, Sq, D}, cw[4] = {B, Hkv, Smax, D / 2}, ls[1] = {1};
    int64_t nq = B * Hq * Sq * D, nc = B * Hkv * Smax * D;
    float *hq = th_random((size_t)nq, -1, 1), *hk = th_random((size_t)nc, -1, 1), *hv = th_random((size_t)nc, -1, 1);
    wgml_tensor *q = th_tensor_f32(4, qs, hq), *k = th_tensor_half(4, cw, hk), *v = th_tensor_half(4, cw, hv);
    wgml_tensor *l = th_tensor_i32(1, ls, &len);
    for (int64_t i = 0; i < nc; i++) hk[i] = (float)th_half(th_to_half(hk[i])), hv[i] = (float)th_half(th_to_half(hv[i]));
    double sc = 1.0 / sqrt((double)D);
    wgml_tensor *o = window ? wgml_sdpa_cached_window(T.g, q, k, v, l, window, 0) : wgml_sdpa_cached(T.g, q, k, v, l, 1, 0);
    float *got = th_read_f32(o);
    double *ref = malloc(sizeof(double) * (size_t)nq);
    ref_sdpa_w(hq, hk, hv, B, Hq, Hkv, Sq, len, Smax, D, 1, sc, window, ref);
    char name[160];
    snprintf(name, sizeof name, "sdpa_cached f16 caches Hq%lld Hkv%lld Sq%lld Smax%lld D%lld len %d window %lld",
             (long long)Hq, (long long)Hkv, (long long)Sq, (long long)Smax, (long long)D, (int)len, (long long)window);
    th_close(name, got, ref, (size_t)nq, ATOL, RTOL);
    free(hq); free(hk); free(hv); free(got); free(ref);
    wgml_tensor_free(o); wgml_tensor_free(q); wgml_tensor_free(k); wgml_tensor_free(v); wgml_tensor_free(l);
}

static void test_f16_cache(void) {
    case_append_f16(0, 2);
    case_append_f16(2, 3);          /* last row would be 4: skipped */
    case_append_f16(-1, 3);         /* row -1 skipped */
    case_append_f16(2147483647, 2); /* no wrap-around */
    case_cached_f16(9, 3, 1, 200, 64, 170, 0);  /* decode: keys split */
    case_cached_f16(9, 3, 64, 80, 64, 70, 16);  /* a prefill chunk after 6 keys, through a window */
    case_cached_f16(4, 1, 5, 40, 256, 33, 0);   /* D 256 */
    int64_t q6[4] = {1, 3, 2, 6}, w3[4] = {1, 3, 4, 3}, q8[4] = {1, 3, 2, 8}, w8[4] = {1, 3, 4, 8}, f8[4] = {1, 3, 4, 8};
    int64_t one[1] = {1}, n16[4] = {1, 3, 1, 8};
    static float z[256];
    static int32_t zi[1];
    wgml_tensor *qa = th_tensor_f32(4, q6, z), *ka = th_tensor_half(4, w3, z), *qb = th_tensor_f32(4, q8, z);
    wgml_tensor *kb = th_tensor_half(4, w8, z), *fb = th_tensor_f32(4, f8, z), *li = th_tensor_i32(1, one, zi);
    wgml_tensor *nr = th_tensor_f32(4, n16, z);
    th_expect_error("sdpa_cached f16 cache, D 6", wgml_sdpa_cached(T.g, qa, ka, ka, li, 1, 0) == NULL, WGML_ERR_UNSUPPORTED,
                    "sdpa_cached", "multiple of 4", NULL);
    th_expect_error("sdpa_cached f16 k, f32 v", wgml_sdpa_cached(T.g, qb, kb, fb, li, 1, 0) == NULL, WGML_ERR_DTYPE,
                    "sdpa_cached", "same form", NULL);
    th_expect_error("sdpa_cached q D 8, f16 cache of D 16", wgml_sdpa_cached(T.g, qb, kb, kb, li, 1, 0) == NULL,
                    WGML_ERR_SHAPE, "sdpa_cached", "head dimensions", "D / 2 words", NULL);
    th_expect_error("kv_append 8 into an f16 cache of D 16", wgml_kv_append(T.g, kb, nr, li) != 0, WGML_ERR_SHAPE,
                    "kv_append", "f16 form", NULL);
    wgml_tensor *all[] = {qa, ka, qb, kb, fb, li, nr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wgml_tensor_free(all[i]);
}

/* sdpa_cached over a cache with garbage (NaN) past len: prefill chunk, clamped len, len 0,
 * len smaller than Sq (early queries see nothing: zeros). */
static void case_cached(int64_t Hq, int64_t Hkv, int64_t Sq, int32_t len, int causal) {
    int64_t B = 2, Smax = 40, D = 64, qs[4] = {B, Hq, Sq, D}, cs[4] = {B, Hkv, Smax, D}, ls[1] = {1};
    int64_t nq = B * Hq * Sq * D, nc = B * Hkv * Smax * D;
    float *hq = th_random((size_t)nq, -1, 1), *hk = th_random((size_t)nc, -1, 1), *hv = th_random((size_t)nc, -1, 1);
    int32_t eff = len < 0 ? 0 : len > Smax ? (int32_t)Smax : len;
    for (int64_t bh = 0; bh < B * Hkv; bh++)
        for (int64_t j = eff; j < Smax; j++)
            for (int64_t e = 0; e < D; e++) hk[(bh * Smax + j) * D + e] = hv[(bh * Smax + j) * D + e] = NAN;
    wgml_tensor *q = th_tensor_f32(4, qs, hq), *k = th_tensor_f32(4, cs, hk), *v = th_tensor_f32(4, cs, hv);
    wgml_tensor *l = th_tensor_i32(1, ls, &len);
    float *got = th_read_f32(wgml_sdpa_cached(T.g, q, k, v, l, causal, 0));
    double *ref = malloc(sizeof(double) * (size_t)nq);
    ref_sdpa(hq, hk, hv, B, Hq, Hkv, Sq, eff, Smax, D, causal, 1.0 / 8.0, ref);
    char name[128];
    snprintf(name, sizeof name, "sdpa_cached Hq%lld Hkv%lld Sq%lld len %d (Smax 40) %s", (long long)Hq, (long long)Hkv,
             (long long)Sq, (int)len, causal ? "causal" : "full");
    th_close(name, got, ref, (size_t)nq, ATOL, RTOL);
    free(hq); free(hk); free(hv); free(got); free(ref);
    wgml_tensor_free(q); wgml_tensor_free(k); wgml_tensor_free(v); wgml_tensor_free(l);
}

/* sdpa_cached_rows (ops/attention/sdpa_rows.h): the output as [B, Sq, Hq, D], bit for bit the
 * head-first op's output moved there (causal, window 0 or not), and against the fp64 reference;
 * written by the kernel (keys whole) or by the merge of split keys. */
static void case_cached_rows(int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Smax, int32_t len, int64_t window) {
    int64_t B = 2, D = 64, qs[4] = {B, Hq, Sq, D}, cs[4] = {B, Hkv, Smax, D}, ls[1] = {1};
    int64_t nq = B * Hq * Sq * D, nc = B * Hkv * Smax * D;
    float *hq = th_random((size_t)nq, -1, 1), *hk = th_random((size_t)nc, -1, 1), *hv = th_random((size_t)nc, -1, 1);
    wgml_tensor *q = th_tensor_f32(4, qs, hq), *k = th_tensor_f32(4, cs, hk), *v = th_tensor_f32(4, cs, hv);
    wgml_tensor *l = th_tensor_i32(1, ls, &len);
    wgml_tensor *rows = sdpa_cached_rows(T.g, q, k, v, l, window, 0);
    wgml_tensor *heads = window ? wgml_sdpa_cached_window(T.g, q, k, v, l, window, 0) : wgml_sdpa_cached(T.g, q, k, v, l, 1, 0);
    char name[160];
    snprintf(name, sizeof name, "sdpa_cached_rows Hq%lld Hkv%lld Sq%lld Smax%lld len %d window %lld", (long long)Hq,
             (long long)Hkv, (long long)Sq, (long long)Smax, (int)len, (long long)window);
    if (th_check(rows && heads && wgml_tensor_dim(rows, 1) == Sq && wgml_tensor_dim(rows, 2) == Hq, "%s: shape: %s",
                 name, wgml_last_error(T.ctx))) {
        float *gr = th_read_f32(rows), *gh = th_read_f32(heads), *moved = malloc(sizeof(float) * (size_t)nq);
        double *ref = malloc(sizeof(double) * (size_t)nq), *ref_rows = malloc(sizeof(double) * (size_t)nq);
        ref_sdpa_w(hq, hk, hv, B, Hq, Hkv, Sq, len, Smax, D, 1, 1.0 / 8.0, window, ref);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < Sq; i++)
                    for (int64_t d = 0; d < D; d++) {
                        int64_t from = ((b * Hq + h) * Sq + i) * D + d, to = ((b * Sq + i) * Hq + h) * D + d;
                        if (gh) moved[to] = gh[from];
                        ref_rows[to] = ref[from];
                    }
        char what[192];
        snprintf(what, sizeof what, "%s = head-first moved", name);
        if (gr && gh) th_exact_u32(what, (const uint32_t *)gr, (const uint32_t *)moved, (size_t)nq);
        snprintf(what, sizeof what, "%s vs fp64", name);
        if (gr) th_close(what, gr, ref_rows, (size_t)nq, ATOL, RTOL);
        free(gr); free(gh); free(moved); free(ref); free(ref_rows);
    }
    free(hq); free(hk); free(hv);
    wgml_tensor_free(rows); wgml_tensor_free(heads);
    wgml_tensor_free(q); wgml_tensor_free(k); wgml_tensor_free(v); wgml_tensor_free(l);
}

static void test_cached(void) {
    case_cached_rows(9, 3, 64, 80, 70, 0);  /* a prefill chunk after 6 keys: few row blocks, keys split */
    case_cached_rows(9, 3, 64, 80, 70, 16); /* the same through a window */
    case_cached_rows(9, 3, 1, 40, 29, 0);   /* decode: split keys, merged into rows */
    case_cached_rows(4, 1, 5, 40, 33, 0);
    /* forced: 3 even chunks of the 70 filled keys of an 80-row cache, merged into rows; then the
     * keys whole, the kernel writing the rows */
    th_setenv("WGML_SDPA_SPLIT", "3", 1);
    case_cached_rows(9, 3, 64, 80, 70, 0);
    case_cached_rows(9, 3, 64, 80, 70, 16);
    case_sdpa(1, 4, 1, 37, 45, 256, 1, 0, 1, NULL); /* and without a cache: chunks of all the keys */
    th_setenv("WGML_SDPA_SPLIT", "1", 1);
    case_cached_rows(9, 3, 64, 80, 70, 0);
    case_cached_rows(9, 3, 64, 80, 70, 16);
    th_unsetenv("WGML_SDPA_SPLIT");
    case_cached(9, 3, 1, 17, 1);
    case_cached(9, 3, 6, 29, 1);
    case_cached(4, 4, 3, 37, 0);
    case_cached(9, 3, 1, 1000, 1);  /* clamped to Smax */
    case_cached(9, 3, 2, 0, 1);     /* nothing to see: zeros */
    case_cached(3, 1, 5, 3, 1);     /* first two queries see nothing */
    /* a GPU's few-rows tile (16x4 threads, 1 x 4 each), which a CPU adapter does not choose */
    th_setenv("WGML_SDPA_TILE", "16,4,1,4", 1);
    case_cached(9, 3, 1, 17, 1);
    th_unsetenv("WGML_SDPA_TILE");
}

/* rows of [.., D] rotated (interleaved pairs) by pos·theta^(-2i/D), in double */
static void ref_rope_interleaved(const float *x, int64_t rows, int64_t D, int32_t pos, double theta, float *out) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < D / 2; i++) {
            double ang = pos * pow(theta, -2.0 * i / D), c = cos(ang), s = sin(ang);
            double a = x[r * D + 2 * i], b = x[r * D + 2 * i + 1];
            out[r * D + 2 * i] = (float)(a * c - b * s);
            out[r * D + 2 * i + 1] = (float)(a * s + b * c);
        }
}

/* A decode graph built and compiled once: rope(q), rope(k) ([B, H, 1, D] layout) at the
 * position held in pos, kv_append of k and v at pos, sdpa_cached over len = pos + 1. Run for
 * t = 0..5 writing pos, len and new q/k/v each step; each step's output against a fresh
 * reference over the filled prefix. SmolLM2's heads: 9 query heads, 3 kv heads, D = 64. */
static void test_decode_graph(void) {
    int64_t B = 2, Hq = 9, Hkv = 3, D = 64, Smax = 70, T_STEPS = 6; /* Smax 70: keys split in chunks */
    int64_t qs[4] = {B, Hq, 1, D}, ks[4] = {B, Hkv, 1, D}, cs[4] = {B, Hkv, Smax, D}, one[1] = {1};
    int64_t nq = B * Hq * D, nk = B * Hkv * D, nc = B * Hkv * Smax * D;
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *q = wgml_tensor_new(g, WGML_F32, 4, qs), *kn = wgml_tensor_new(g, WGML_F32, 4, ks);
    wgml_tensor *vn = wgml_tensor_new(g, WGML_F32, 4, ks);
    wgml_tensor *kc = wgml_tensor_new(g, WGML_F32, 4, cs), *vc = wgml_tensor_new(g, WGML_F32, 4, cs);
    wgml_tensor *pos = wgml_tensor_new(g, WGML_I32, 1, one), *len = wgml_tensor_new(g, WGML_I32, 1, one);
    wgml_tensor *qrot = wgml_rope_ex(g, q, pos, 10000, WGML_ROPE_INTERLEAVED, WGML_ROPE_BHSD, 0);
    wgml_tensor *krot = wgml_rope_ex(g, kn, pos, 10000, WGML_ROPE_INTERLEAVED, WGML_ROPE_BHSD, 0);
    wgml_status s1 = wgml_kv_append(g, kc, krot, pos);
    wgml_status s2 = wgml_kv_append(g, vc, vn, pos);
    wgml_tensor *out = wgml_sdpa_cached(g, qrot, kc, vc, len, 1, 0);
    th_check(out && !s1 && !s2 && !wgml_graph_keep(g, out) && !wgml_graph_compile(g), "decode graph builds: %s",
             wgml_last_error(T.ctx));
    /* the caches start as NaN (poisoned): rows past len must never be read */
    float *refk = malloc(sizeof(float) * (size_t)nc), *refv = malloc(sizeof(float) * (size_t)nc);
    float *qr = malloc(sizeof(float) * (size_t)nq), *kr = malloc(sizeof(float) * (size_t)nk);
    double *ref = malloc(sizeof(double) * (size_t)nq);
    float *got = malloc(sizeof(float) * (size_t)nq);
    size_t runs_before = (size_t)wgml_submit_count(T.ctx);
    for (int32_t t = 0; t < T_STEPS; t++) {
        float *hq = th_random((size_t)nq, -1, 1), *hk = th_random((size_t)nk, -1, 1), *hv = th_random((size_t)nk, -1, 1);
        int32_t l = t + 1;
        wgml_tensor_write(q, hq, sizeof(float) * (size_t)nq);
        wgml_tensor_write(kn, hk, sizeof(float) * (size_t)nk);
        wgml_tensor_write(vn, hv, sizeof(float) * (size_t)nk);
        wgml_tensor_write(pos, &t, sizeof t);
        wgml_tensor_write(len, &l, sizeof l);
        th_check(!wgml_graph_run(g), "decode step %d runs: %s", (int)t, wgml_last_error(T.ctx));
        wgml_tensor_read(out, got, sizeof(float) * (size_t)nq);
        ref_rope_interleaved(hq, B * Hq, D, t, 10000, qr);
        ref_rope_interleaved(hk, B * Hkv, D, t, 10000, kr);
        for (int64_t bh = 0; bh < B * Hkv; bh++) {
            memcpy(refk + (bh * Smax + t) * D, kr + bh * D, sizeof(float) * (size_t)D);
            memcpy(refv + (bh * Smax + t) * D, hv + bh * D, sizeof(float) * (size_t)D);
        }
        ref_sdpa(qr, refk, refv, B, Hq, Hkv, 1, l, Smax, D, 1, 1.0 / 8.0, ref);
        char name[64];
        snprintf(name, sizeof name, "decode graph step %d (len %d)", (int)t, (int)l);
        th_close(name, got, ref, (size_t)nq, ATOL, RTOL);
        free(hq); free(hk); free(hv);
    }
    th_check((size_t)wgml_submit_count(T.ctx) >= runs_before + (size_t)T_STEPS, "one submit per step");
    /* the cache holds exactly the appended rows */
    float *gk = malloc(sizeof(float) * (size_t)nc);
    wgml_tensor_read(kc, gk, sizeof(float) * (size_t)nc);
    size_t off = 0;
    for (int64_t bh = 0; bh < B * Hkv; bh++)
        for (int64_t j = 0; j < T_STEPS; j++)
            for (int64_t e = 0; e < D; e++) {
                double a = gk[(bh * Smax + j) * D + e], b = refk[(bh * Smax + j) * D + e];
                if (!(fabs(a - b) <= 2e-6)) off++;
            }
    th_check(off == 0, "k cache after 6 steps holds the roped keys (%zu off)", off);
    free(gk); free(refk); free(refv); free(qr); free(kr); free(ref); free(got);
    wgml_graph_free(g);
}

/* Prefill through the cache in eager mode: append 5 rows at 0, attend with Sq = 5; then one
 * more row at 5 and a decode query: both against plain sdpa references. */
static void test_prefill_then_decode(void) {
    int64_t B = 1, Hq = 9, Hkv = 3, D = 64, Smax = 16;
    int64_t cs[4] = {B, Hkv, Smax, D}, one[1] = {1};
    wgml_tensor *kc = wgml_tensor_new(T.g, WGML_F32, 4, cs), *vc = wgml_tensor_new(T.g, WGML_F32, 4, cs);
    float *hk = malloc(sizeof(float) * (size_t)(B * Hkv * Smax * D)), *hv = malloc(sizeof(float) * (size_t)(B * Hkv * Smax * D));
    int32_t p0 = 0, l0 = 5, p1 = 5, l1 = 6;
    wgml_tensor *P0 = th_tensor_i32(1, one, &p0), *L0 = th_tensor_i32(1, one, &l0);
    wgml_tensor *P1 = th_tensor_i32(1, one, &p1), *L1 = th_tensor_i32(1, one, &l1);
    for (int stage = 0; stage < 2; stage++) {
        int64_t sn = stage ? 1 : 5, start = stage ? 5 : 0, Sq = sn;
        int64_t ns[4] = {B, Hkv, sn, D}, qs[4] = {B, Hq, Sq, D};
        float *nk = th_random((size_t)(B * Hkv * sn * D), -1, 1), *nv = th_random((size_t)(B * Hkv * sn * D), -1, 1);
        float *hq = th_random((size_t)(B * Hq * Sq * D), -1, 1);
        for (int64_t h = 0; h < Hkv; h++) {
            memcpy(hk + (h * Smax + start) * D, nk + h * sn * D, sizeof(float) * (size_t)(sn * D));
            memcpy(hv + (h * Smax + start) * D, nv + h * sn * D, sizeof(float) * (size_t)(sn * D));
        }
        wgml_tensor *tk = th_tensor_f32(4, ns, nk), *tv = th_tensor_f32(4, ns, nv), *tq = th_tensor_f32(4, qs, hq);
        th_check(!wgml_kv_append(T.g, kc, tk, stage ? P1 : P0) && !wgml_kv_append(T.g, vc, tv, stage ? P1 : P0),
                 "append: %s", wgml_last_error(T.ctx));
        float *got = th_read_f32(wgml_sdpa_cached(T.g, tq, kc, vc, stage ? L1 : L0, 1, 0));
        double *ref = malloc(sizeof(double) * (size_t)(B * Hq * Sq * D));
        ref_sdpa(hq, hk, hv, B, Hq, Hkv, Sq, start + sn, Smax, D, 1, 1.0 / 8.0, ref);
        th_close(stage ? "cache: decode after prefill" : "cache: prefill of 5 (causal)", got, ref, (size_t)(B * Hq * Sq * D),
                 ATOL, RTOL);
        free(nk); free(nv); free(hq); free(got); free(ref);
        wgml_tensor_free(tk); wgml_tensor_free(tv); wgml_tensor_free(tq);
    }
    free(hk); free(hv);
    wgml_tensor_free(kc); wgml_tensor_free(vc);
    wgml_tensor_free(P0); wgml_tensor_free(L0); wgml_tensor_free(P1); wgml_tensor_free(L1);
}

static void test_bad_input(void) {
    static float z[4096];
    static int32_t zi[4096];
    int64_t q9[4] = {1, 9, 2, 8}, k3[4] = {1, 3, 4, 8}, k4[4] = {1, 4, 4, 8}, kd[4] = {1, 3, 4, 16}, k2b[4] = {2, 3, 4, 8};
    int64_t k5[4] = {1, 3, 5, 8}, q9l[4] = {1, 9, 6, 8}, s3[3] = {9, 2, 8}, one[1] = {1}, two[1] = {2};
    wgml_tensor *q = th_tensor_f32(4, q9, z), *k = th_tensor_f32(4, k3, z), *v = th_tensor_f32(4, k3, z);
    wgml_tensor *kh = th_tensor_f32(4, k4, z), *kdd = th_tensor_f32(4, kd, z), *kb = th_tensor_f32(4, k2b, z);
    wgml_tensor *kl = th_tensor_f32(4, k5, z), *ql = th_tensor_f32(4, q9l, z), *q3 = th_tensor_f32(3, s3, z);
    wgml_tensor *qi = th_tensor_i32(4, q9, zi), *li = th_tensor_i32(1, one, zi), *l2 = th_tensor_i32(1, two, zi);
    wgml_tensor *lf = th_tensor_f32(1, one, z);
    th_expect_error("sdpa heads not divisible", wgml_sdpa(T.g, q, kh, kh, 1, 0) == NULL, WGML_ERR_SHAPE, "sdpa", "9 heads",
                    "4 kv heads", NULL);
    th_expect_error("sdpa D mismatch", wgml_sdpa(T.g, q, kdd, kdd, 1, 0) == NULL, WGML_ERR_SHAPE, "sdpa", "head dimensions",
                    NULL);
    th_expect_error("sdpa k/v shapes differ", wgml_sdpa(T.g, q, k, kl, 0, 0) == NULL, WGML_ERR_SHAPE, "sdpa", "same shape",
                    NULL);
    th_expect_error("sdpa batch mismatch", wgml_sdpa(T.g, q, kb, kb, 0, 0) == NULL, WGML_ERR_SHAPE, "sdpa", "batch", NULL);
    th_expect_error("sdpa causal Sq > Skv", wgml_sdpa(T.g, ql, k, v, 1, 0) == NULL, WGML_ERR_SHAPE, "sdpa", "Sq <= Skv",
                    NULL);
    th_expect_error("sdpa q i32", wgml_sdpa(T.g, qi, k, v, 0, 0) == NULL, WGML_ERR_DTYPE, "sdpa", "q must be f32", NULL);
    th_expect_error("sdpa q rank 3", wgml_sdpa(T.g, q3, k, v, 0, 0) == NULL, WGML_ERR_SHAPE, "sdpa", "rank 4", NULL);
    th_expect_error("sdpa NULL v", wgml_sdpa(T.g, q, k, NULL, 0, 0) == NULL, WGML_ERR_ARG, "sdpa", "v is NULL", NULL);
    th_expect_error("sdpa NaN scale", wgml_sdpa(T.g, q, k, v, 0, NAN) == NULL, WGML_ERR_ARG, "sdpa", "scale", NULL);
    th_check(wgml_sdpa(NULL, q, k, v, 0, 0) == NULL, "sdpa NULL graph gives NULL");
    th_expect_error("sdpa_cached len f32", wgml_sdpa_cached(T.g, q, k, v, lf, 1, 0) == NULL, WGML_ERR_DTYPE, "sdpa_cached",
                    "len must be i32", NULL);
    th_expect_error("sdpa_cached len [2]", wgml_sdpa_cached(T.g, q, k, v, l2, 1, 0) == NULL, WGML_ERR_SHAPE, "sdpa_cached",
                    "one element", NULL);
    th_expect_error("sdpa_cached NULL len", wgml_sdpa_cached(T.g, q, k, v, NULL, 1, 0) == NULL, WGML_ERR_ARG, "sdpa_cached",
                    "len is NULL", NULL);
    th_expect_error("sdpa_cached heads", wgml_sdpa_cached(T.g, q, kh, kh, li, 1, 0) == NULL, WGML_ERR_SHAPE, "sdpa_cached",
                    NULL);
    th_expect_error("kv_append D mismatch", wgml_kv_append(T.g, k, kdd, li) != 0, WGML_ERR_SHAPE, "kv_append", "new_rows",
                    NULL);
    th_expect_error("kv_append heads mismatch", wgml_kv_append(T.g, k, kh, li) != 0, WGML_ERR_SHAPE, "kv_append", NULL);
    th_expect_error("kv_append pos f32", wgml_kv_append(T.g, k, kl, lf) != 0, WGML_ERR_DTYPE, "kv_append", "pos", NULL);
    th_expect_error("kv_append pos [2]", wgml_kv_append(T.g, k, kl, l2) != 0, WGML_ERR_SHAPE, "kv_append", "pos", NULL);
    th_expect_error("kv_append NULL cache", wgml_kv_append(T.g, NULL, kl, li) != 0, WGML_ERR_ARG, "kv_append", "cache is NULL",
                    NULL);
    th_expect_error("kv_append cache i32", wgml_kv_append(T.g, qi, kl, li) != 0, WGML_ERR_DTYPE, "kv_append", "cache", NULL);
    th_expect_error("kv_append into itself", wgml_kv_append(T.g, k, k, li) != 0, WGML_ERR_ARG, "kv_append", "same tensor",
                    NULL);
    /* still works */
    float *got = th_read_f32(wgml_sdpa(T.g, q, k, v, 1, 0));
    double ref[144] = {0};
    th_close("sdpa after errors", got, ref, 144, 1e-7, 1e-7);
    free(got);
    wgml_tensor *all[] = {q, k, v, kh, kdd, kb, kl, ql, q3, qi, li, l2, lf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wgml_tensor_free(all[i]);
}

static void part_sdpa(void) {
    test_sdpa();
    test_window();
}

static void part_cache(void) {
    test_append_bounds();
    test_f16_cache();
    test_cached();
    test_prefill_then_decode();
    test_decode_graph();
    test_bad_input();
}

static void part_huge(void) {
    if (!th_dumping()) test_huge_grid();
}

/* Parts (each part's time is printed): sdpa, the KV cache and the decode graph with bad input,
 * more than 65,535 workgroups. */
int main(int argc, char **argv) {
    th_init_args("test_attention", argc, argv);
    static const th_part parts[] = {{"sdpa", part_sdpa}, {"cache", part_cache}, {"huge", part_huge}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
