#define _POSIX_C_SOURCE 200809L
/* One decode step's attention in one dispatch (attn_decode_step, ops/attention/attn_decode.h):
 * RoPE of q and k at the position, k and v written into the caches' row pos, attention over the
 * cache rows [lo, len) against an fp64 reference computed here (the rotation from the angle
 * pos * theta^(-2i/D) in double, softmax and weighted sum in double), random cache contents,
 * grouped heads, both pair styles, q/k norms, the sliding window, one chunk (the kernel's own output) and
 * many (the chunks merged), long caches (several passes of keys); the cache row written (k
 * rotated, v copied bit for bit) and every other row untouched; the caches' f16 form; bad shapes
 * refused. */
#include "harness.h"

#include "ops/attention/attn_decode.h"
#include "ops/rope/rope_fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dcase {
    const char *what;
    int64_t Hq, Hk, D, smax;
    int32_t pos; /* len = pos + 1 unless len_off */
    int32_t len_off;
    int64_t window;
    wgml_rope_style style;
    float theta;
    bool qkn; /* q/k norms before the rotation */
} dcase;

/* x (one head) RMSNormed with w in place, in double */
static void norm_d(double *x, const float *w, int64_t D, double eps) {
    double ss = 0;
    for (int64_t d = 0; d < D; d++) ss += x[d] * x[d];
    double r = 1.0 / sqrt(ss / (double)D + eps);
    for (int64_t d = 0; d < D; d++) x[d] *= r * (double)w[d];
}

/* x rotated in place at position pos: pairs (2i, 2i+1) or (i, i + D/2), angle pos theta^(-2i/D) */
static void rope_d(double *x, int64_t D, int32_t pos, float theta, wgml_rope_style style) {
    for (int64_t i = 0; i < D / 2; i++) {
        double ang = (double)pos * pow((double)theta, -(double)(2 * i) / (double)D);
        int64_t e0 = style == WGML_ROPE_INTERLEAVED ? 2 * i : i, e1 = style == WGML_ROPE_INTERLEAVED ? 2 * i + 1 : i + D / 2;
        double a = x[e0], b = x[e1];
        x[e0] = a * cos(ang) - b * sin(ang);
        x[e1] = a * sin(ang) + b * cos(ang);
    }
}

/* ref [Hq, D]: each query head (normed, rotated at pos) attending in double over the cache rows
 * [lo, L) of kc, vc [Hk, smax, D] */
static void ref_attend(const dcase *c, const float *hq, const float *hqn, float eps, float scale, int32_t len,
                       const double *kc, const float *vc, double *ref) {
    int64_t Hq = c->Hq, G = c->Hq / c->Hk, D = c->D, smax = c->smax;
    int64_t L = len < smax ? len : smax, lo = c->window > 0 && L - c->window > 0 ? L - c->window : 0;
    double *sc = malloc(sizeof(double) * (size_t)smax);
    for (int64_t hq_i = 0; hq_i < Hq; hq_i++) {
        int64_t h = hq_i / G;
        double qr[1024], mx = -INFINITY, sum = 0;
        for (int64_t d = 0; d < D; d++) qr[d] = hq[hq_i * D + d];
        if (c->qkn) norm_d(qr, hqn, D, eps);
        rope_d(qr, D, c->pos, c->theta, c->style);
        for (int64_t j = lo; j < L; j++) {
            double s = 0;
            for (int64_t d = 0; d < D; d++) s += qr[d] * kc[(h * smax + j) * D + d];
            sc[j] = s * scale;
            if (sc[j] > mx) mx = sc[j];
        }
        for (int64_t j = lo; j < L; j++) sum += (sc[j] = exp(sc[j] - mx));
        for (int64_t d = 0; d < D; d++) {
            double o = 0;
            for (int64_t j = lo; j < L; j++) o += sc[j] * (double)vc[(h * smax + j) * D + d];
            ref[hq_i * D + d] = o / sum;
        }
    }
    free(sc);
}

/* The caches after the step: row pos of k rotated (kcd; f32 rounding, and with f16 one binary16
 * spacing more) and of v copied (want_vc: bit for bit; f16: within a spacing), every other row
 * untouched bit for bit (hkc, hvc as uploaded). */
static void check_written(const dcase *c, bool f16, const double *kcd, const float *want_vc, const float *got_kc,
                          const float *got_vc, const float *hkc, const float *hvc) {
    int64_t Hk = c->Hk, D = c->D, smax = c->smax, n = Hk * D;
    int32_t pos = c->pos;
    double *tk = malloc(sizeof(double) * (size_t)n), *tv = malloc(sizeof(double) * (size_t)n);
    double *wk = malloc(sizeof(double) * (size_t)n), *wv = malloc(sizeof(double) * (size_t)n);
    float *gk = malloc(sizeof(float) * (size_t)n), *gv = malloc(sizeof(float) * (size_t)n);
    for (int64_t h = 0; h < Hk; h++)
        for (int64_t d = 0; d < D; d++) {
            int64_t i = h * D + d, at = (h * smax + pos) * D + d;
            wk[i] = kcd[at], wv[i] = want_vc[at], gk[i] = got_kc[at], gv[i] = got_vc[at];
            tk[i] = fmax(2e-6, 1e-5 * fabs(wk[i])) + (f16 ? th_half_ulp(wk[i]) : 0), tv[i] = f16 ? th_half_ulp(wv[i]) : 0;
        }
    char name[160];
    snprintf(name, sizeof name, "%s: k cache row %d rotated%s", c->what, pos, f16 ? ", f16" : "");
    th_close_each(name, gk, wk, (size_t)n, tk, 0);
    snprintf(name, sizeof name, "%s: v cache row %d copied%s", c->what, pos, f16 ? ", f16" : "");
    th_close_each(name, gv, wv, (size_t)n, tv, 0);
    bool copied = true; /* f32: v's row a copy bit for bit */
    for (int64_t h = 0; h < Hk && !f16; h++)
        copied = copied && !memcmp(got_vc + (h * smax + pos) * D, want_vc + (h * smax + pos) * D, 4 * (size_t)D);
    th_check(copied, "%s: v cache row %d copied bit for bit", c->what, pos);
    bool same = true;
    for (int64_t h = 0; h < Hk; h++)
        for (int64_t j = 0; j < smax; j++) {
            size_t o = (size_t)((h * smax + j) * D);
            if (j != pos) same = same && !memcmp(got_kc + o, hkc + o, 4 * (size_t)D) && !memcmp(got_vc + o, hvc + o, 4 * (size_t)D);
        }
    th_check(same, "%s: other cache rows untouched", c->what);
    free(tk), free(tv), free(wk), free(wv), free(gk), free(gv);
}

/* The step's partials gp [Hq, chunks, D + 2] merged here in double, as attn_combine.wgsl defines
 * the merge, against the reference output (one chunk: gp is the output itself). */
static void check_parts(const char *what, const float *gp, int64_t chunks, int64_t Hq, int64_t D, const double *ref) {
    char name[160];
    if (chunks <= 1) {
        snprintf(name, sizeof name, "%s: one chunk, the output itself", what);
        th_close(name, gp, ref, (size_t)(Hq * D), 2e-5, 1e-4);
        return;
    }
    float *mf = malloc(sizeof(float) * (size_t)(Hq * D));
    for (int64_t hq_i = 0; hq_i < Hq; hq_i++) {
        const float *pr = gp + hq_i * chunks * (D + 2);
        double mx = -INFINITY, den = 0;
        for (int64_t ch = 0; ch < chunks; ch++) mx = fmax(mx, pr[ch * (D + 2) + D]);
        for (int64_t ch = 0; ch < chunks; ch++) den += pr[ch * (D + 2) + D + 1] * exp2(pr[ch * (D + 2) + D] - mx);
        for (int64_t d = 0; d < D; d++) {
            double num = 0;
            for (int64_t ch = 0; ch < chunks; ch++) num += pr[ch * (D + 2) + d] * exp2(pr[ch * (D + 2) + D] - mx);
            mf[hq_i * D + d] = (float)(den > 0 ? num / den : 0.0);
        }
    }
    snprintf(name, sizeof name, "%s: its %lld chunks' partials merged", what, (long long)chunks);
    th_close(name, mf, ref, (size_t)(Hq * D), 2e-5, 1e-4);
    free(mf);
}

/* f16: the caches in the f16 form (kv_cache.h): the written row checked within one binary16
 * spacing, attention against the reference over the caches as read back (the values the kernel
 * used), every other word untouched */
static void run_case(const dcase *c, bool f16) {
    int64_t Hq = c->Hq, Hk = c->Hk, D = c->D, smax = c->smax;
    int32_t pos = c->pos, len = c->pos + 1 + c->len_off;
    float *hq = th_random((size_t)(Hq * D), -1, 1), *hk = th_random((size_t)(Hk * D), -1, 1),
          *hv = th_random((size_t)(Hk * D), -1, 1);
    float *hkc = th_random((size_t)(Hk * smax * D), -1, 1), *hvc = th_random((size_t)(Hk * smax * D), -1, 1);
    int64_t qs[4] = {1, 1, Hq, D}, ks[4] = {1, 1, Hk, D}, cs[4] = {1, Hk, smax, D}, one[1] = {1};
    wgml_tensor *q = th_tensor_f32(4, qs, hq), *k = th_tensor_f32(4, ks, hk), *v = th_tensor_f32(4, ks, hv);
    int64_t cw[4] = {1, Hk, smax, D / 2};
    wgml_tensor *kc = f16 ? th_tensor_half(4, cw, hkc) : th_tensor_f32(4, cs, hkc);
    wgml_tensor *vc = f16 ? th_tensor_half(4, cw, hvc) : th_tensor_f32(4, cs, hvc);
    for (int64_t i = 0; f16 && i < Hk * smax * D; i++) /* the values the f16 caches hold */
        hkc[i] = (float)th_half(th_to_half(hkc[i])), hvc[i] = (float)th_half(th_to_half(hvc[i]));
    wgml_tensor *tp = th_tensor_i32(1, one, &pos), *tl = th_tensor_i32(1, one, &len);
    wgml_tensor *tab = rope_freq_table(T.g, "test", D, c->theta, NULL);
    float scale = 1.0f / sqrtf((float)D) * 1.25f, eps = 1e-6f;
    float *hqn = th_random((size_t)D, 0.5, 1.5), *hkn = th_random((size_t)D, 0.5, 1.5);
    int64_t ds[1] = {D};
    wgml_tensor *qn = c->qkn ? th_tensor_f32(1, ds, hqn) : NULL, *kn = c->qkn ? th_tensor_f32(1, ds, hkn) : NULL;
    wgml_tensor *out = attn_decode_step(T.g, q, k, v, tp, tl, tab, kc, vc, c->style, c->window, scale, qn, kn, eps);
    char name[160];
    snprintf(name, sizeof name, "%s (Hq %lld, Hk %lld, D %lld, smax %lld, pos %d, len %d, window %lld%s%s)", c->what,
             (long long)Hq, (long long)Hk, (long long)D, (long long)smax, pos, len, (long long)c->window,
             c->qkn ? ", q/k norms" : "", f16 ? ", f16 caches" : "");
    if (!th_check(out != NULL, "%s: %s", name, wgml_last_error(T.ctx))) goto done;
    /* the reference: the caches as the step leaves them, then attention over [lo, L) */
    double *kcd = malloc(sizeof(double) * (size_t)(Hk * smax * D)), *ref = calloc((size_t)(Hq * D), sizeof(double));
    for (int64_t i = 0; i < Hk * smax * D; i++) kcd[i] = hkc[i];
    float *want_vc = malloc(sizeof(float) * (size_t)(Hk * smax * D));
    memcpy(want_vc, hvc, sizeof(float) * (size_t)(Hk * smax * D));
    for (int64_t h = 0; h < Hk; h++) {
        double kr[1024];
        for (int64_t d = 0; d < D; d++) kr[d] = hk[h * D + d];
        if (c->qkn) norm_d(kr, hkn, D, eps);
        rope_d(kr, D, pos, c->theta, c->style);
        for (int64_t d = 0; d < D; d++) {
            kcd[(h * smax + pos) * D + d] = kr[d];
            want_vc[(h * smax + pos) * D + d] = hv[h * D + d];
        }
    }
    float *got = th_read_f32(out), *got_kc = f16 ? th_read_half(kc) : th_read_f32(kc);
    float *got_vc = f16 ? th_read_half(vc) : th_read_f32(vc);
    if (got_kc && got_vc) {
        check_written(c, f16, kcd, want_vc, got_kc, got_vc, hkc, hvc);
        double *katt = kcd;
        if (f16) { /* attention over the caches as the kernel left them */
            katt = malloc(sizeof(double) * (size_t)(Hk * smax * D));
            for (int64_t i = 0; i < Hk * smax * D; i++) katt[i] = got_kc[i];
        }
        ref_attend(c, hq, hqn, eps, scale, len, katt, f16 ? got_vc : want_vc, ref);
        if (katt != kcd) free(katt);
        snprintf(name, sizeof name, "%s: output%s", c->what, f16 ? ", f16 caches" : "");
        if (got) th_close(name, got, ref, (size_t)(Hq * D), 2e-5, 1e-4);
    }
    /* the same step with its chunks left unmerged (attn_decode_step_parts; the step again writes
     * the same row): merged here in double, as attn_combine.wgsl defines it, it is the output */
    int64_t chunks = 0;
    wgml_tensor *parts = attn_decode_step_parts(T.g, q, k, v, tp, tl, tab, kc, vc, c->style, c->window, scale, qn, kn,
                                                eps, &chunks);
    th_check(parts && chunks == attn_decode_chunks(T.ctx, Hq, Hk, D, smax), "%s: parts (%lld chunks): %s", c->what,
             (long long)chunks, wgml_last_error(T.ctx));
    float *gp = parts ? th_read_f32(parts) : NULL;
    if (gp) check_parts(c->what, gp, chunks, Hq, D, ref);
    free(gp);
    wgml_tensor_free(parts);
    free(got), free(got_kc), free(got_vc), free(kcd), free(ref), free(want_vc);
done:
    wgml_tensor_free(out);
    wgml_tensor_free(q), wgml_tensor_free(k), wgml_tensor_free(v), wgml_tensor_free(kc), wgml_tensor_free(vc);
    wgml_tensor_free(tp), wgml_tensor_free(tl), wgml_tensor_free(tab), wgml_tensor_free(qn), wgml_tensor_free(kn);
    free(hq), free(hk), free(hv), free(hkc), free(hvc), free(hqn), free(hkn);
}

static void test_errors(void) {
    int64_t qs[4] = {1, 1, 4, 6}, ks[4] = {1, 1, 3, 6}, cs[4] = {1, 3, 8, 6}, one[1] = {1}, ts[2] = {3, 4};
    int32_t z = 0;
    wgml_tensor *q = wgml_tensor_new(T.g, WGML_F32, 4, qs), *k = wgml_tensor_new(T.g, WGML_F32, 4, ks),
                *kc = wgml_tensor_new(T.g, WGML_F32, 4, cs), *p = th_tensor_i32(1, one, &z),
                *tab = wgml_tensor_new(T.g, WGML_F32, 2, ts);
    th_expect_error("q heads not a multiple of k's", !attn_decode_step(T.g, q, k, k, p, p, tab, kc, kc, 0, 0, 0, NULL, NULL, 1e-6f),
                    WGML_ERR_SHAPE, "attn_decode_step", NULL);
    th_expect_error("pos of the wrong dtype", !attn_decode_step(T.g, q, k, k, q, p, tab, kc, kc, 0, 0, 0, NULL, NULL, 1e-6f),
                    WGML_ERR_DTYPE, "attn_decode_step", "pos", NULL);
    int64_t qs2[4] = {1, 1, 3, 6};
    wgml_tensor *q2 = wgml_tensor_new(T.g, WGML_F32, 4, qs2);
    th_expect_error("D % 4", !attn_decode_step(T.g, q2, k, k, p, p, tab, kc, kc, 0, 0, 0, NULL, NULL, 1e-6f), WGML_ERR_UNSUPPORTED,
                    "attn_decode_step", NULL);
    /* k's cache f32, v's u32 words of the same shape (the f16 form): everything else fits, so
     * only the forms' check can refuse it */
    int64_t qs8[4] = {1, 1, 3, 8}, ks8[4] = {1, 1, 3, 8}, cf[4] = {1, 3, 8, 8}, ts8[2] = {4, 4};
    wgml_tensor *q8 = wgml_tensor_new(T.g, WGML_F32, 4, qs8), *k8 = wgml_tensor_new(T.g, WGML_F32, 4, ks8),
                *kc8 = wgml_tensor_new(T.g, WGML_F32, 4, cf), *vc16 = wgml_tensor_new(T.g, WGML_U32, 4, cf),
                *tab8 = wgml_tensor_new(T.g, WGML_F32, 2, ts8);
    th_expect_error("caches of two forms", !attn_decode_step(T.g, q8, k8, k8, p, p, tab8, kc8, vc16, 0, 0, 0, NULL, NULL, 1e-6f),
                    WGML_ERR_SHAPE, "attn_decode_step", "both alike", NULL);
    wgml_tensor_free(q8), wgml_tensor_free(k8), wgml_tensor_free(kc8), wgml_tensor_free(vc16), wgml_tensor_free(tab8);
    th_check(!attn_decode_fits(T.ctx, 3, 3, 6, 8) && attn_decode_fits(T.ctx, 9, 3, 64, 2048),
             "attn_decode_fits: D 6 no, SmolLM2's shape yes");
    wgml_tensor_free(q), wgml_tensor_free(q2), wgml_tensor_free(k), wgml_tensor_free(kc), wgml_tensor_free(p),
        wgml_tensor_free(tab);
}

static const dcase cases[] = {
    {"one chunk, GQA 3", 9, 3, 64, 40, 17, 0, 0, WGML_ROPE_INTERLEAVED, 10000.0f, false},
    {"one chunk, first position", 9, 3, 64, 40, 0, 0, 0, WGML_ROPE_INTERLEAVED, 10000.0f, false},
    {"one chunk, last row", 4, 2, 16, 64, 63, 0, 0, WGML_ROPE_HALF, 10000.0f, false},
    {"chunks merged, D 256, half pairs", 4, 1, 256, 300, 250, 0, 0, WGML_ROPE_HALF, 1000000.0f, false},
    {"chunks, window", 4, 1, 256, 300, 250, 0, 100, WGML_ROPE_HALF, 10000.0f, false},
    {"chunks, window wider than the keys", 6, 2, 32, 300, 50, 0, 100, WGML_ROPE_INTERLEAVED, 10000.0f, false},
    {"chunks, len past pos", 6, 2, 32, 300, 130, 20, 0, WGML_ROPE_INTERLEAVED, 10000.0f, false},
    {"long cache, two passes of keys", 2, 1, 8, 9000, 8500, 0, 0, WGML_ROPE_HALF, 10000.0f, false},
    {"8 kv heads: 128 keys a chunk (DECODE_SPREAD)", 8, 8, 8, 4200, 4100, 0, 0, WGML_ROPE_INTERLEAVED, 10000.0f, false},
    {"D 128, GQA 4", 8, 2, 128, 200, 199, 0, 0, WGML_ROPE_INTERLEAVED, 500000.0f, false},
    {"q/k norms, window (Gemma-like)", 4, 1, 256, 300, 260, 0, 128, WGML_ROPE_HALF, 10000.0f, true},
    {"q/k norms, one chunk", 6, 2, 64, 50, 30, 0, 0, WGML_ROPE_HALF, 1000000.0f, true},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* two parts of about equal compile time (tests/CMakeLists.txt runs them as two CTests) */
static void part_one(void) {
    test_errors();
    for (size_t i = 0; i < 5; i++) run_case(&cases[i], false);
    run_case(&cases[3], true); /* chunks merged, D 256, half pairs */
}
static void part_two(void) {
    for (size_t i = 5; i < N_CASES; i++) run_case(&cases[i], false);
    run_case(&cases[9], true);  /* D 128, GQA 4, interleaved */
    run_case(&cases[11], true); /* q/k norms, one chunk */
}

int main(int argc, char **argv) {
    th_init_args("test_attn_decode", argc, argv);
    static const th_part parts[] = {{"one", part_one}, {"two", part_two}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
