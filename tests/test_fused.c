#define _POSIX_C_SOURCE 200809L
/* The fused inference ops of the op families, each in a built graph against an fp64
 * reference (random inputs, NaN-poisoned outputs) and with its dispatch count:
 *   norm_add_rms   (src/ops/norm/norm_fused.c)              residual add + RMSNorm
 *   norm_add_rms_post (the same)                            RMSNorm + residual add + RMSNorm
 *   ew_glu         (src/ops/elementwise/elementwise_fused.c) silu(gate) * up, gelu_tanh(gate) * up,
 *                  and its backward (d_gate, d_up in one dispatch)
 *   rope_kv_step   (src/ops/rope/rope_kv.c)                  RoPE of q and k + KV-cache writes, S rows
 * and their fallback to the plain ops (shapes the kernel does not take, inputs that need a
 * gradient). */
#include "harness.h"

#include "ops/elementwise/elementwise_fused.h"
#include "ops/norm/norm_fused.h"
#include "ops/rope/rope_fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static wgml_tensor *upload(wgml_graph *g, wgml_dtype dt, int rank, const int64_t *shape, const void *data) {
    wgml_tensor *t = wgml_tensor_new(g, dt, rank, shape);
    if (t && wgml_tensor_write(t, data, wgml_tensor_nbytes(t))) return NULL;
    return t;
}

static bool run(wgml_graph *g, const char *name) {
    return th_check(!wgml_graph_compile(g) && !wgml_graph_run(g), "%s: compile and run: %s", name,
                    wgml_last_error(T.ctx));
}

/* ------------------------------------------------------------------ norm_add_rms */

/* want_dispatches: 1 fused, 2 the plain add and rms_norm (3 with post: rms_norm first; one more
 * for the sum of y's slices). post: norm_add_rms_post, y RMSNormed with its own weight before
 * the add. ny > 1: y given as ny slices [ny, shape] to sum (norm_add_rms_parts). */
static void case_add_rms_ex(int rank, const int64_t *shape, bool train, bool post, int ny, size_t want_dispatches) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t n = 1, d = shape[rank - 1], ys[WGML_MAX_RANK] = {ny};
    for (int i = 0; i < rank; i++) n *= shape[i], ys[i + 1] = shape[i];
    float *hx = th_random((size_t)n, -2, 2), *hy = th_random((size_t)(n * ny), -2, 2),
          *hw = th_random((size_t)d, -1.5, 1.5);
    const float eps = 1e-5f;
    wgml_tensor *x = upload(g, WGML_F32, rank, shape, hx),
                *y = ny > 1 ? upload(g, WGML_F32, rank + 1, ys, hy) : upload(g, WGML_F32, rank, shape, hy);
    float *hwy = th_random((size_t)d, 0.5, 1.5);
    wgml_tensor *w = upload(g, WGML_F32, 1, &d, hw), *wy = upload(g, WGML_F32, 1, &d, hwy), *sum = NULL;
    if (train) wgml_tensor_set_trainable(x, 1);
    wgml_tensor *h = ny > 1 ? norm_add_rms_parts(g, x, y, ny, post ? wy : NULL, w, eps, NULL, 0, &sum)
                     : post ? norm_add_rms_post(g, x, y, wy, w, eps, &sum)
                            : norm_add_rms(g, x, y, w, eps, &sum);
    double *yd = malloc(sizeof(double) * (size_t)n); /* y: its slices summed in double */
    for (int64_t i = 0; i < n; i++) {
        yd[i] = hy[i];
        for (int sl = 1; sl < ny; sl++) yd[i] += hy[sl * n + i];
    }
    char name[128];
    snprintf(name, sizeof name, "add_rms_norm%s rows=%lld d=%lld%s%s", post ? "_post" : "", (long long)(n / d),
             (long long)d, train ? " (x trainable)" : "", ny > 1 ? " (y in slices)" : "");
    if (th_check(h && sum && !wgml_graph_keep(g, h) && !wgml_graph_keep(g, sum), "%s: record: %s", name,
                 wgml_last_error(T.ctx)) &&
        run(g, name)) {
        th_check(wgml_graph_dispatch_count(g) == want_dispatches, "%s: %zu dispatches (want %zu)", name,
                 wgml_graph_dispatch_count(g), want_dispatches);
        double *rs = malloc(sizeof(double) * (size_t)n), *rh = malloc(sizeof(double) * (size_t)n);
        for (int64_t r = 0; r < n / d; r++) {
            double ss = 0, sy = 0;
            for (int64_t j = 0; j < d; j++) sy += yd[r * d + j] * yd[r * d + j];
            double iy = post ? 1.0 / sqrt(sy / (double)d + eps) : 1.0;
            for (int64_t j = 0; j < d; j++) {
                double v = (double)hx[r * d + j] + yd[r * d + j] * iy * (post ? (double)hwy[j] : 1.0);
                rs[r * d + j] = v;
                ss += v * v;
            }
            double inv = 1.0 / sqrt(ss / (double)d + eps);
            for (int64_t j = 0; j < d; j++) rh[r * d + j] = rs[r * d + j] * inv * hw[j];
        }
        float *gs = th_read_f32(sum), *gh = th_read_f32(h);
        char what[160];
        snprintf(what, sizeof what, "%s sum", name);
        if (gs) th_close(what, gs, rs, (size_t)n, (post ? 1e-5 : 1e-6) * ny, post ? 1e-5 : 1e-6);
        snprintf(what, sizeof what, "%s out", name);
        if (gh) th_close(what, gh, rh, (size_t)n, 1e-5, 1e-4);
        free(gs);
        free(gh);
        free(rs);
        free(rh);
    }
    free(hx);
    free(hy);
    free(hw);
    free(hwy);
    free(yd);
    wgml_graph_free(g);
}

static void case_add_rms(int rank, const int64_t *shape, bool train, size_t want_dispatches) {
    case_add_rms_ex(rank, shape, train, false, 1, want_dispatches);
}

static void test_add_rms(void) {
    int64_t s1[2] = {5, 64}, s2[2] = {3, 1024}, s3[2] = {7, 12}, s4[3] = {2, 3, 520}, s5[2] = {4, 6};
    case_add_rms(2, s1, false, 1);
    case_add_rms(2, s2, false, 1);
    case_add_rms(2, s3, false, 1); /* fewer vec4 than threads */
    case_add_rms(3, s4, false, 1);
    case_add_rms(2, s5, false, 2); /* d % 4 != 0: the plain ops */
    case_add_rms(2, s1, true, 2);  /* a gradient wanted: the plain, differentiable ops */
    int64_t g1[2] = {1, 640}, g2[2] = {3, 1024};
    case_add_rms_ex(2, g1, false, true, 1, 1); /* Gemma-3-270M's decode row */
    case_add_rms_ex(2, g2, false, true, 1, 1);
    case_add_rms_ex(2, s3, false, true, 1, 1);
    case_add_rms_ex(2, s5, false, true, 1, 3); /* d % 4 != 0: rms_norm, add, rms_norm */
    case_add_rms_ex(2, s1, true, true, 1, 3);
    /* y as the split-K slices of a product (norm_add_rms_parts) */
    int64_t p1[2] = {37, 576}, p2[3] = {2, 5, 640};
    case_add_rms_ex(2, p1, false, false, 6, 1);
    case_add_rms_ex(3, p2, false, true, 3, 1);
    case_add_rms_ex(2, s3, false, false, 2, 1);
    case_add_rms_ex(2, s5, false, false, 4, 3); /* d % 4 != 0: sum of the slices, add, rms_norm */
    case_add_rms_ex(2, s1, true, true, 3, 4);   /* a gradient: sum, rms_norm, add, rms_norm */
}

/* ------------------------------------------------------------------ ew_glu */

/* train: gate and up trainable, loss = sum(out · R) for a random R, and d_gate = act'(gate)·R·up,
 * d_up = act(gate)·R against fp64 (the fused rule: one backward dispatch; the plain ops' rules
 * where the kernel does not take the shape). want_dispatches counts the forward. */
static void case_glu(int rank, const int64_t *shape, bool train, ew_glu_act act, size_t want_dispatches) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    float *hg = th_random((size_t)n, -8, 8), *hu = th_random((size_t)n, -2, 2), *hr = th_random((size_t)n, -1, 1);
    wgml_tensor *gate = upload(g, WGML_F32, rank, shape, hg), *up = upload(g, WGML_F32, rank, shape, hu);
    if (train) wgml_tensor_set_trainable(gate, 1), wgml_tensor_set_trainable(up, 1);
    wgml_tensor *out = ew_glu(g, gate, up, act);
    size_t fwd = wgml_graph_dispatch_count(g);
    char name[128];
    snprintf(name, sizeof name, "%s n=%lld rank %d%s", act == EW_GLU_SILU ? "swiglu" : "geglu", (long long)n, rank,
             train ? " (trained)" : "");
    bool ok = th_check(out && !wgml_graph_keep(g, out), "%s: record: %s", name, wgml_last_error(T.ctx));
    if (ok && train) {
        wgml_tensor *r = upload(g, WGML_F32, rank, shape, hr);
        wgml_tensor *loss = r ? wgml_sum(g, wgml_mul(g, out, r), NULL, 0, 0) : NULL;
        ok = th_check(loss && !wgml_backward(g, loss, 1.0f), "%s: backward: %s", name, wgml_last_error(T.ctx));
    }
    if (ok && run(g, name)) {
        th_check(fwd == want_dispatches, "%s: %zu forward dispatches (want %zu)", name, fwd, want_dispatches);
        double *ref = malloc(sizeof(double) * (size_t)n), *rg = malloc(sizeof(double) * (size_t)n),
               *ru = malloc(sizeof(double) * (size_t)n);
        const double c = sqrt(2.0 / 3.14159265358979323846);
        for (int64_t i = 0; i < n; i++) {
            double v = hg[i], a, da;
            if (act == EW_GLU_SILU) {
                double s = 1.0 / (1.0 + exp(-v));
                a = v * s, da = s * (1.0 + v * (1.0 - s));
            } else {
                double u = c * (v + 0.044715 * v * v * v), t = tanh(u);
                a = 0.5 * v * (1.0 + t), da = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * v * v);
            }
            ref[i] = a * (double)hu[i];
            rg[i] = da * (double)hr[i] * (double)hu[i];
            ru[i] = a * (double)hr[i];
        }
        float *got = th_read_f32(out);
        if (got) th_close(name, got, ref, (size_t)n, 1e-6, 1e-5);
        free(got);
        for (int w = 0; train && w < 2; w++) {
            wgml_tensor *gt = wgml_tensor_grad(w ? up : gate);
            float *gv = gt ? th_read_f32(gt) : NULL;
            char gn[160];
            snprintf(gn, sizeof gn, "%s: d_%s", name, w ? "up" : "gate");
            if (th_check(gv != NULL, "%s: read", gn)) th_close(gn, gv, w ? ru : rg, (size_t)n, 1e-6, 1e-5);
            free(gv);
        }
        free(ref), free(rg), free(ru);
    }
    free(hg), free(hu), free(hr);
    wgml_graph_free(g);
}

static void test_glu(void) {
    int64_t s1[2] = {3, 40}, s2[1] = {1000}, s3[3] = {2, 3, 64}, s4[2] = {2, 3};
    for (int a = 0; a < 2; a++) {
        ew_glu_act act = a ? EW_GLU_GELU_TANH : EW_GLU_SILU;
        case_glu(2, s1, false, act, 1);
        case_glu(1, s2, false, act, 1);
        case_glu(3, s3, false, act, 1);
        case_glu(2, s4, false, act, 2); /* 6 elements: the plain activation and mul */
        case_glu(2, s1, true, act, 1);  /* the fused rule */
        case_glu(3, s3, true, act, 1);
        case_glu(2, s4, true, act, 2);  /* the plain ops' rules */
    }
}

/* ------------------------------------------------------------------ rope_kv_step */

/* Pair i of each head of x [heads, hd] (elements (2i, 2i+1) interleaved, (i, i + hd/2) half)
 * rotated by pos·theta^(-2i/hd). */
static void ref_rope(const float *x, int64_t heads, int64_t hd, int32_t pos, double theta, wgml_rope_style style,
                     double *out) {
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++) {
            double ang = (double)pos * pow(theta, -(double)(2 * i) / (double)hd);
            int64_t e0 = style == WGML_ROPE_INTERLEAVED ? 2 * i : i, e1 = style == WGML_ROPE_INTERLEAVED ? 2 * i + 1 : i + hd / 2;
            double a = x[h * hd + e0], b = x[h * hd + e1];
            out[h * hd + e0] = a * cos(ang) - b * sin(ang);
            out[h * hd + e1] = a * sin(ang) + b * cos(ang);
        }
}

/* S rows at positions pos0, pos0 + 1, ... (a decode step when S = 1, a prefill chunk else).
 * f16: the caches in their f16 form (src/ops/attention/kv_cache.h), the rows written within one
 * binary16 spacing more and every other word untouched. */
static void case_rope_kv_f16(int64_t S, int64_t H, int64_t Hk, int64_t hd, int64_t smax, int32_t pos0, float theta,
                             wgml_rope_style style, bool f16) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t qs[4] = {1, S, H, hd}, ks[4] = {1, S, Hk, hd}, cs[4] = {1, Hk, smax, hd};
    int64_t nq = S * H * hd, nk = S * Hk * hd, nc = Hk * smax * hd;
    float *hq = th_random((size_t)nq, -1, 1), *hk = th_random((size_t)nk, -1, 1), *hv = th_random((size_t)nk, -1, 1);
    float *hkc = th_random((size_t)nc, -1, 1), *hvc = th_random((size_t)nc, -1, 1);
    int32_t *hp = malloc(sizeof(int32_t) * (size_t)S);
    for (int64_t r = 0; r < S; r++) hp[r] = pos0 + (int32_t)r;
    wgml_tensor *q = upload(g, WGML_F32, 4, qs, hq), *k = upload(g, WGML_F32, 4, ks, hk);
    wgml_tensor *v = upload(g, WGML_F32, 4, ks, hv), *p = upload(g, WGML_I32, 1, &S, hp);
    int64_t cw[4] = {1, Hk, smax, hd / 2};
    uint32_t *wk = f16 ? th_pack_half(hkc, (size_t)nc / 2) : NULL, *wv = f16 ? th_pack_half(hvc, (size_t)nc / 2) : NULL;
    wgml_tensor *kc = f16 ? upload(g, WGML_U32, 4, cw, wk) : upload(g, WGML_F32, 4, cs, hkc);
    wgml_tensor *vc = f16 ? upload(g, WGML_U32, 4, cw, wv) : upload(g, WGML_F32, 4, cs, hvc);
    for (int64_t i = 0; f16 && i < nc; i++) /* the values the f16 caches hold */
        hkc[i] = (float)th_half(th_to_half(hkc[i])), hvc[i] = (float)th_half(th_to_half(hvc[i]));
    free(wk), free(wv);
    wgml_tensor *tab = rope_freq_table(g, "test_fused", hd, theta, NULL);
    wgml_tensor *out = rope_kv_step(g, q, k, v, p, tab, kc, vc, style);
    /* the plain rope of q at the same positions: the fused step must match it bit for bit */
    wgml_tensor *plain = wgml_rope_ex(g, q, p, theta, style, WGML_ROPE_BSHD, 0);
    char name[160];
    snprintf(name, sizeof name, "rope_kv S=%lld H=%lld Hk=%lld hd=%lld smax=%lld pos=%d %s%s", (long long)S, (long long)H,
             (long long)Hk, (long long)hd, (long long)smax, (int)pos0,
             style == WGML_ROPE_INTERLEAVED ? "interleaved" : "half", f16 ? " f16 caches" : "");
    bool ok = out && plain && wgml_tensor_rank(out) == 4 && wgml_tensor_dim(out, 1) == H &&
              wgml_tensor_dim(out, 2) == S && !wgml_graph_keep(g, out) && !wgml_graph_keep(g, plain);
    if (th_check(ok, "%s: record: %s", name, wgml_last_error(T.ctx)) && run(g, name)) {
        th_check(wgml_graph_dispatch_count(g) == 2, "%s: %zu dispatches (want 1 fused + 1 plain rope)", name,
                 wgml_graph_dispatch_count(g));
        /* references: q heads-first [H, S, hd], the plain rope's [S, H, hd] moved there too */
        double *rq = malloc(sizeof(double) * (size_t)nq), *rk = malloc(sizeof(double) * (size_t)nk);
        double *row = malloc(sizeof(double) * (size_t)(H * hd));
        double *rkc = malloc(sizeof(double) * (size_t)nc), *rvc = malloc(sizeof(double) * (size_t)nc);
        float *gq = th_read_f32(out), *gp = th_read_f32(plain);
        float *gkc = f16 ? th_read_half(kc) : th_read_f32(kc), *gvc = f16 ? th_read_half(vc) : th_read_f32(vc);
        double *tk = malloc(sizeof(double) * (size_t)nc), *tv = malloc(sizeof(double) * (size_t)nc);
        float *gpt = malloc(sizeof(float) * (size_t)nq);
        for (int64_t i = 0; i < nc; i++) rkc[i] = hkc[i], rvc[i] = hvc[i], tk[i] = tv[i] = 0;
        for (int64_t r = 0; r < S; r++) {
            ref_rope(hq + r * H * hd, H, hd, hp[r], theta, style, row);
            for (int64_t h = 0; h < H; h++)
                for (int64_t j = 0; j < hd; j++) {
                    rq[(h * S + r) * hd + j] = row[h * hd + j];
                    if (gp) gpt[(h * S + r) * hd + j] = gp[(r * H + h) * hd + j];
                }
            ref_rope(hk + r * Hk * hd, Hk, hd, hp[r], theta, style, rk + r * Hk * hd);
            if (hp[r] >= 0 && hp[r] < smax) /* row pos[r] of each head; other rows as they were */
                for (int64_t h = 0; h < Hk; h++)
                    for (int64_t j = 0; j < hd; j++) {
                        int64_t at = (h * smax + hp[r]) * hd + j;
                        rkc[at] = rk[(r * Hk + h) * hd + j];
                        rvc[at] = hv[(r * Hk + h) * hd + j];
                        tk[at] = fmax(2e-5, 1e-4 * fabs(rkc[at])) + (f16 ? th_half_ulp(rkc[at]) : 0);
                        tv[at] = f16 ? th_half_ulp(rvc[at]) : 0;
                    }
        }
        char what[224];
        snprintf(what, sizeof what, "%s q", name);
        if (gq) th_close(what, gq, rq, (size_t)nq, 2e-5, 1e-4);
        snprintf(what, sizeof what, "%s q = plain rope", name);
        if (gq && gp) th_exact_u32(what, (const uint32_t *)gq, (const uint32_t *)gpt, (size_t)nq);
        snprintf(what, sizeof what, "%s k cache", name); /* other rows: exact */
        if (gkc) th_close_each(what, gkc, rkc, (size_t)nc, tk, 0);
        snprintf(what, sizeof what, "%s v cache", name);
        if (gvc) th_close_each(what, gvc, rvc, (size_t)nc, tv, 0);
        free(tk);
        free(tv);
        free(gq);
        free(gp);
        free(gpt);
        free(gkc);
        free(gvc);
        free(rq);
        free(rk);
        free(row);
        free(rkc);
        free(rvc);
    }
    free(hq);
    free(hk);
    free(hv);
    free(hkc);
    free(hvc);
    free(hp);
    wgml_graph_free(g);
}

static void case_rope_kv_style(int64_t S, int64_t H, int64_t Hk, int64_t hd, int64_t smax, int32_t pos0, float theta,
                               wgml_rope_style style) {
    case_rope_kv_f16(S, H, Hk, hd, smax, pos0, theta, style, false);
}

static void case_rope_kv(int64_t S, int64_t H, int64_t Hk, int64_t hd, int64_t smax, int32_t pos, float theta) {
    case_rope_kv_style(S, H, Hk, hd, smax, pos, theta, WGML_ROPE_INTERLEAVED);
}

static void test_rope_kv(void) {
    case_rope_kv_style(1, 4, 1, 256, 16, 9, 10000.0f, WGML_ROPE_HALF); /* Gemma 3's local layers */
    case_rope_kv_style(1, 6, 2, 32, 12, 11, 1000000.0f, WGML_ROPE_HALF);
    case_rope_kv(1, 4, 2, 8, 16, 5, 10000.0f);
    case_rope_kv(1, 8, 8, 64, 40, 39, 500000.0f); /* the last row */
    case_rope_kv(1, 6, 2, 32, 12, 0, 10000.0f);
    case_rope_kv(1, 4, 2, 16, 8, 8, 10000.0f); /* past the cache: q only, the caches untouched */
    /* prefill chunks: S rows at once */
    case_rope_kv_style(37, 4, 1, 256, 64, 3, 10000.0f, WGML_ROPE_HALF); /* Gemma 3 */
    case_rope_kv(48, 9, 3, 64, 80, 20, 100000.0f);                    /* SmolLM2's heads */
    case_rope_kv(12, 6, 2, 32, 16, 9, 10000.0f);                      /* the last 5 rows past the cache */
    /* the f16 form: both pair styles, a decode step and a prefill chunk running past the cache */
    case_rope_kv_f16(1, 4, 1, 256, 16, 9, 10000.0f, WGML_ROPE_HALF, true);
    case_rope_kv_f16(12, 6, 2, 32, 16, 9, 10000.0f, WGML_ROPE_INTERLEAVED, true);
    case_rope_kv_f16(37, 4, 1, 256, 64, 3, 10000.0f, WGML_ROPE_HALF, true);
}

static void test_bad_input(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t s[2] = {2, 8}, w5 = 5, q3[3] = {1, 4, 8}, qs[4] = {1, 1, 4, 8}, cs[4] = {1, 2, 4, 8}, one = 1;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, s), *w = wgml_tensor_new(g, WGML_F32, 1, &w5), *sum = NULL;
    th_expect_error("add_rms_norm: w of the wrong length", !norm_add_rms(g, x, x, w, 1e-5f, &sum) && !sum,
                    WGML_ERR_SHAPE, "rms_norm", NULL);
    th_expect_error("add_rms_norm: NULL y", !norm_add_rms(g, x, NULL, w, 1e-5f, &sum), WGML_ERR_ARG, "add_rms_norm",
                    "y is NULL", NULL);
    th_expect_error("swiglu: i32 up", !ew_glu(g, x, wgml_tensor_new(g, WGML_I32, 2, s), EW_GLU_SILU), WGML_ERR_DTYPE, "swiglu",
                    NULL);
    wgml_tensor *q = wgml_tensor_new(g, WGML_F32, 4, qs), *c = wgml_tensor_new(g, WGML_F32, 4, cs);
    wgml_tensor *p = wgml_tensor_new(g, WGML_I32, 1, &one), *tab = rope_freq_table(g, "test_fused", 8, 10000.0f, NULL);
    th_expect_error("rope_kv_step: rank-3 q", !rope_kv_step(g, wgml_tensor_new(g, WGML_F32, 3, q3), q, q, p, tab, c, c, WGML_ROPE_INTERLEAVED),
                    WGML_ERR_SHAPE, "rope_kv_step", "rank 4", NULL);
    int64_t two = 2, cs4[4] = {1, 4, 4, 8};
    wgml_tensor *c4 = wgml_tensor_new(g, WGML_F32, 4, cs4);
    th_expect_error("rope_kv_step: 2 positions for 1 row", !rope_kv_step(g, q, q, q, wgml_tensor_new(g, WGML_I32, 1, &two), tab, c4, c4, WGML_ROPE_INTERLEAVED),
                    WGML_ERR_SHAPE, "rope_kv_step", "pos", "[S]", NULL);
    th_expect_error("rope_kv_step: caches with 2 heads for k with 4", !rope_kv_step(g, q, q, q, p, tab, c, c, WGML_ROPE_INTERLEAVED),
                    WGML_ERR_SHAPE, "rope_kv_step", NULL);
    /* k's cache f32, v's u32 words of the same shape: only the forms' check can refuse it */
    th_expect_error("rope_kv_step: caches of two forms",
                    !rope_kv_step(g, q, q, q, p, tab, c4, wgml_tensor_new(g, WGML_U32, 4, cs4), WGML_ROPE_INTERLEAVED),
                    WGML_ERR_SHAPE, "rope_kv_step", "both alike", NULL);
    wgml_graph_free(g);
}

int main(int argc, char **argv) {
    th_init_args("fused", argc, argv);
    test_add_rms();
    test_glu();
    test_rope_kv();
    test_bad_input();
    return th_done();
}
