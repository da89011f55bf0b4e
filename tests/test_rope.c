/* Rotary position embedding (rope, rope_backward) against a double-precision reference: both
 * styles, positions [S] and [B, S], long positions, a built graph replayed with new positions,
 * a grid of more than 65,535 workgroups, per-pair frequency factors (a GGUF file's rope_freqs,
 * through the model's own table, its backward rule included), and bad input. */
#define _POSIX_C_SOURCE 199309L
#include "harness.h"
#include "ops/rope/rope_fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

/* Tolerance. The kernel reduces the angle modulo 2pi exactly (see rope_apply.wgsl), so the
 * angle error is ~1e-7 rad at any position and the output error is set by f32 sin/cos and the
 * rounding of a·cos − b·sin: a few 1e-7 for |x| <= 1. atol 2e-6 leaves margin for the driver's
 * sin/cos. (A plain f32 angle pos·inv_freq would be off by up to ~1e-3 rad at pos 8192: half an
 * ulp of 8192 is 4.9e-4, plus the rounding of inv_freq; that would need atol ~2e-3.) */
#define ROPE_ATOL 2e-6
#define ROPE_RTOL 1e-5

/* out = x rotated by sign·pos·theta^(-2i/D) / f_i (f = factors, or 1 without), in double. */
static void ref_rope_f(const float *x, const int32_t *pos, int per_batch, int64_t B, int64_t S, int64_t H, int64_t D,
                       double theta, const float *factors, wgml_rope_style style, double sign, double *out) {
    int64_t half = D / 2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            double p = pos[per_batch ? b * S + s : s];
            for (int64_t h = 0; h < H; h++) {
                int64_t base = ((b * S + s) * H + h) * D;
                for (int64_t i = 0; i < half; i++) {
                    double ang = sign * p * pow(theta, -2.0 * (double)i / (double)D) / (factors ? factors[i] : 1.0);
                    double c = cos(ang), sn = sin(ang);
                    int64_t ia = style == WGML_ROPE_INTERLEAVED ? base + 2 * i : base + i;
                    int64_t ib = style == WGML_ROPE_INTERLEAVED ? ia + 1 : ia + half;
                    out[ia] = x[ia] * c - x[ib] * sn;
                    out[ib] = x[ia] * sn + x[ib] * c;
                }
            }
        }
}

static void ref_rope(const float *x, const int32_t *pos, int per_batch, int64_t B, int64_t S, int64_t H, int64_t D,
                     double theta, wgml_rope_style style, double sign, double *out) {
    ref_rope_f(x, pos, per_batch, B, S, H, D, theta, NULL, style, sign, out);
}

static const char *style_name(wgml_rope_style s) { return s == WGML_ROPE_HALF ? "half" : "interleaved"; }

/* One case: random x [B,S,H,D], positions [S] or [B,S] up to max_pos, forward and backward. */
static void case_rope(int64_t B, int64_t S, int64_t H, int64_t D, double theta, wgml_rope_style style, int per_batch,
                      int32_t max_pos, const char *dump_case) {
    int64_t xs[4] = {B, S, H, D}, ps[2] = {B, S};
    int64_t n = B * S * H * D, np = per_batch ? B * S : S;
    float *hx = th_random((size_t)n, -1, 1);
    int32_t *hp = malloc(sizeof(int32_t) * (size_t)np);
    for (int64_t i = 0; i < np; i++) hp[i] = (int32_t)th_uniform(0, (double)max_pos + 1);
    hp[0] = 0;
    if (np > 1) hp[np - 1] = max_pos;
    wgml_tensor *x = th_tensor_f32(4, xs, hx), *p = th_tensor_i32(per_batch ? 2 : 1, per_batch ? ps : ps + 1, hp);
    double *ref = malloc(sizeof(double) * (size_t)n);
    char name[200];
    for (int dir = 0; dir < 2; dir++) {
        wgml_tensor *o = dir == 0 ? wgml_rope(T.g, x, p, (float)theta, style) : wgml_rope_backward(T.g, x, p, (float)theta, style);
        th_check(o != NULL, "rope returns a tensor: %s", wgml_last_error(T.ctx));
        float *got = th_read_f32(o);
        ref_rope(hx, hp, per_batch, B, S, H, D, (float)theta, style, dir == 0 ? 1.0 : -1.0, ref);
        snprintf(name, sizeof name, "%s %s [%lld,%lld,%lld,%lld] pos%s<=%d theta %g", dir ? "rope_backward" : "rope",
                 style_name(style), (long long)B, (long long)S, (long long)H, (long long)D, per_batch ? "[B,S]" : "[S]",
                 (int)max_pos, theta);
        th_close(name, got, ref, (size_t)n, ROPE_ATOL, ROPE_RTOL);
        if (dump_case) {
            char cn[96];
            snprintf(cn, sizeof cn, "%s%s", dump_case, dir ? "_bwd" : "");
            float prm[3] = {(float)theta, (float)style, dir ? -1.0f : 1.0f};
            int64_t three = 3;
            th_dump_tensor(cn, "x", x);
            th_dump_tensor(cn, "positions", p);
            th_dump(cn, "params", WGML_F32, 1, &three, prm);
            th_dump_tensor(cn, "out", o);
        }
        if (dir == 0) {
            /* backward of forward gives x back */
            float *back = th_read_f32(wgml_rope_backward(T.g, o, p, (float)theta, style));
            double *dx = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++) dx[i] = hx[i];
            snprintf(name, sizeof name, "rope_backward(rope(x)) == x %s D=%lld", style_name(style), (long long)D);
            th_close(name, back, dx, (size_t)n, 2 * ROPE_ATOL, ROPE_RTOL);
            free(back);
            free(dx);
        }
        free(got);
        wgml_tensor_free(o);
    }
    free(hx); free(hp); free(ref);
    wgml_tensor_free(x); wgml_tensor_free(p);
}

static void test_cases(void) {
    for (int st = 0; st < 2; st++) {
        wgml_rope_style s = (wgml_rope_style)st;
        case_rope(2, 5, 3, 64, 10000, s, 0, 8192, st ? "rope_inter_d64" : "rope_half_d64");
        case_rope(2, 7, 3, 8, 100000, s, 1, 8192, st ? "rope_inter_d8_bs" : "rope_half_d8_bs");
        case_rope(2, 4, 3, 64, 100000, s, 1, 1000000, st ? "rope_inter_long" : "rope_half_long");
        case_rope(1, 37, 9, 64, 100000, s, 0, 2047, NULL); /* SmolLM2-like q */
        case_rope(3, 2, 1, 2, 10000, s, 0, 50, NULL);      /* D = 2: one pair */
    }
    /* negative positions rotate the other way */
    int64_t xs[4] = {1, 2, 1, 8}, ps[1] = {2};
    float *hx = th_random(16, -1, 1);
    int32_t hp[2] = {-5, 5};
    double ref[16];
    wgml_tensor *x = th_tensor_f32(4, xs, hx), *p = th_tensor_i32(1, ps, hp);
    float *got = th_read_f32(wgml_rope(T.g, x, p, 10000, WGML_ROPE_HALF));
    ref_rope(hx, hp, 0, 1, 2, 1, 8, 10000, WGML_ROPE_HALF, 1, ref);
    th_close("rope negative position", got, ref, 16, ROPE_ATOL, ROPE_RTOL);
    free(got); free(hx);
    wgml_tensor_free(x); wgml_tensor_free(p);
}

/* The heads-first layout [B, H, S, D] (wgml_rope_ex): the reference transposes to [B, S, H, D]. */
static void test_heads_first(void) {
    int64_t B = 2, H = 3, S = 5, D = 16, xs[4] = {B, H, S, D}, ps[2] = {B, S};
    int64_t n = B * H * S * D;
    float *hx = th_random((size_t)n, -1, 1), *xt = malloc(sizeof(float) * (size_t)n);
    int32_t hp[10];
    for (int i = 0; i < 10; i++) hp[i] = (int32_t)th_uniform(0, 9000);
    double *rt = malloc(sizeof(double) * (size_t)n), *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                memcpy(xt + ((b * S + s) * H + h) * D, hx + ((b * H + h) * S + s) * D, sizeof(float) * (size_t)D);
    wgml_tensor *x = th_tensor_f32(4, xs, hx), *p = th_tensor_i32(2, ps, hp);
    for (int st = 0; st < 2; st++)
        for (int bw = 0; bw < 2; bw++) {
            float *got = th_read_f32(wgml_rope_ex(T.g, x, p, 10000, (wgml_rope_style)st, WGML_ROPE_BHSD, bw));
            ref_rope(xt, hp, 1, B, S, H, D, 10000, (wgml_rope_style)st, bw ? -1 : 1, rt);
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t s = 0; s < S; s++)
                        memcpy(ref + ((b * H + h) * S + s) * D, rt + ((b * S + s) * H + h) * D, sizeof(double) * (size_t)D);
            char name[96];
            snprintf(name, sizeof name, "rope_ex [B,H,S,D] %s%s", style_name((wgml_rope_style)st), bw ? " backward" : "");
            th_close(name, got, ref, (size_t)n, ROPE_ATOL, ROPE_RTOL);
            free(got);
        }
    th_expect_error("rope_ex bad layout", wgml_rope_ex(T.g, x, p, 10000, WGML_ROPE_HALF, (wgml_rope_layout)3, 0) == NULL,
                    WGML_ERR_ARG, "rope", "layout", NULL);
    free(hx); free(xt); free(rt); free(ref);
    wgml_tensor_free(x); wgml_tensor_free(p);
}

/* A built graph: q -> rope -> rope_backward(·) with the positions written before each run. */
static void test_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t B = 2, S = 3, H = 3, D = 64, xs[4] = {B, S, H, D}, ps[1] = {S};
    int64_t n = B * S * H * D;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 4, xs), *p = wgml_tensor_new(g, WGML_I32, 1, ps);
    wgml_tensor *y = wgml_rope(g, x, p, 10000, WGML_ROPE_INTERLEAVED);
    wgml_tensor *z = wgml_rope_backward(g, y, p, 10000, WGML_ROPE_HALF);
    th_check(z && !wgml_graph_keep(g, y) && !wgml_graph_keep(g, z) && !wgml_graph_compile(g),
             "rope graph builds and compiles: %s", wgml_last_error(T.ctx));
    double *ry = malloc(sizeof(double) * (size_t)n), *rz = malloc(sizeof(double) * (size_t)n);
    float *fy = malloc(sizeof(float) * (size_t)n), *gy = malloc(sizeof(float) * (size_t)n);
    float *gz = malloc(sizeof(float) * (size_t)n);
    for (int step = 0; step < 3; step++) {
        float *hx = th_random((size_t)n, -1, 1);
        int32_t hp[3] = {step * 100, step * 100 + 1, 4000 + step};
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)n);
        wgml_tensor_write(p, hp, sizeof hp);
        th_check(!wgml_graph_run(g), "rope graph run: %s", wgml_last_error(T.ctx));
        wgml_tensor_read(y, gy, sizeof(float) * (size_t)n);
        wgml_tensor_read(z, gz, sizeof(float) * (size_t)n);
        ref_rope(hx, hp, 0, B, S, H, D, 10000, WGML_ROPE_INTERLEAVED, 1, ry);
        for (int64_t i = 0; i < n; i++) fy[i] = (float)ry[i];
        ref_rope(fy, hp, 0, B, S, H, D, 10000, WGML_ROPE_HALF, -1, rz);
        char name[64];
        snprintf(name, sizeof name, "graph run %d: rope", step);
        th_close(name, gy, ry, (size_t)n, ROPE_ATOL, ROPE_RTOL);
        snprintf(name, sizeof name, "graph run %d: rope_backward of it", step);
        th_close(name, gz, rz, (size_t)n, 2 * ROPE_ATOL, ROPE_RTOL);
        free(hx);
    }
    free(ry); free(rz); free(fy); free(gy); free(gz);
    wgml_graph_free(g);
}

/* Llama 3's frequency factors for head dim D (rope_scaling "llama3", written from its definition:
 * wavelengths 2pi / freq over the original context / low_freq_factor scale by `factor`, those
 * under the original context / high_freq_factor keep theirs, and between them the inverse
 * frequency blends the two linearly in original context / wavelength); f_i = freq_i / new
 * freq_i, as a GGUF file's rope_freqs holds them. */
static void llama3_factors(int64_t D, double theta, float *f) {
    const double factor = 32, low = 1, high = 4, ctx = 8192;
    for (int64_t i = 0; i < D / 2; i++) {
        double freq = pow(theta, -2.0 * (double)i / (double)D), wavelen = 6.283185307179586 / freq;
        double smooth = (ctx / wavelen - low) / (high - low);
        f[i] = wavelen < ctx / high ? 1.0f : wavelen > ctx / low ? (float)factor : (float)(1.0 / ((1 - smooth) / factor + smooth));
    }
}

/* The rope with a frequency table of per-pair factors (rope_tab over rope_freq_table, as the
 * decoder uses it): forward and backward eagerly, then the backward rule in a built graph
 * (loss = sum(rope(x) * w), so dx = w rotated back, which needs the same table), and a table of
 * the wrong shape refused. */
static void test_factors(void) {
    int64_t B = 2, S = 5, H = 3, D = 64, n = B * S * H * D, xs[4] = {B, S, H, D}, ps[1] = {S}, hd2 = D / 2;
    float f[32];
    llama3_factors(D, 500000, f);
    th_check(f[0] == 1.0f && f[hd2 - 1] == 32.0f && f[16] > 1.0f && f[16] < 32.0f, "llama3 factors span 1 .. 32 (%g %g %g)",
             (double)f[0], (double)f[16], (double)f[hd2 - 1]);
    int32_t hp[5] = {0, 1, 777, 8191, 100000};
    float *hx = th_random((size_t)n, -1, 1);
    double *ref = malloc(sizeof(double) * (size_t)n), *plain = malloc(sizeof(double) * (size_t)n);
    wgml_tensor *x = th_tensor_f32(4, xs, hx), *p = th_tensor_i32(1, ps, hp);
    wgml_tensor *tab = rope_freq_table(T.g, "test_rope", D, 500000.0f, f);
    for (int dir = 0; dir < 2; dir++) {
        wgml_rope_style st = dir ? WGML_ROPE_HALF : WGML_ROPE_INTERLEAVED;
        float *got = th_read_f32(rope_tab(T.g, x, p, tab, st, WGML_ROPE_BSHD, dir));
        ref_rope_f(hx, hp, 0, B, S, H, D, 500000, f, st, dir ? -1.0 : 1.0, ref);
        th_close(dir ? "rope_backward with llama3 factors (half)" : "rope with llama3 factors (interleaved)", got, ref,
                 (size_t)n, ROPE_ATOL, ROPE_RTOL);
        ref_rope(hx, hp, 0, B, S, H, D, 500000, st, dir ? -1.0 : 1.0, plain);
        double moved = 0;
        for (int64_t i = 0; i < n; i++) moved = fmax(moved, fabs(ref[i] - plain[i]));
        th_check(moved > 0.1, "the factors move the rotation (%.3g at most)", moved);
        free(got);
    }
    /* the backward rule keeps the table: a built graph */
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *gx = wgml_tensor_new(g, WGML_F32, 4, xs), *gw = wgml_tensor_new(g, WGML_F32, 4, xs);
    wgml_tensor *gp = wgml_tensor_new(g, WGML_I32, 1, ps), *gt = rope_freq_table(g, "test_rope", D, 500000.0f, f);
    wgml_tensor_set_trainable(gx, 1);
    wgml_tensor *y = rope_tab(g, gx, gp, gt, WGML_ROPE_HALF, WGML_ROPE_BSHD, 0);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, y, gw), NULL, 0, 0);
    th_check(!wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g), "factors graph builds: %s", wgml_last_error(T.ctx));
    float *hw = th_random((size_t)n, -1, 1), *dx = malloc(sizeof(float) * (size_t)n);
    wgml_tensor_write(gx, hx, sizeof(float) * (size_t)n);
    wgml_tensor_write(gw, hw, sizeof(float) * (size_t)n);
    wgml_tensor_write(gp, hp, sizeof hp);
    th_check(!wgml_graph_run(g), "factors graph runs: %s", wgml_last_error(T.ctx));
    wgml_tensor_read(wgml_tensor_grad(gx), dx, sizeof(float) * (size_t)n);
    ref_rope_f(hw, hp, 0, B, S, H, D, 500000, f, WGML_ROPE_HALF, -1.0, ref);
    th_close("d x of sum(rope(x) * w) with llama3 factors: w rotated back", dx, ref, (size_t)n, ROPE_ATOL, ROPE_RTOL);
    wgml_graph_free(g);
    int64_t bs[2] = {hd2 + 1, 4};
    wgml_tensor *bad = wgml_tensor_new(T.g, WGML_F32, 2, bs);
    th_expect_error("rope table of the wrong shape", rope_tab(T.g, x, p, bad, WGML_ROPE_HALF, WGML_ROPE_BSHD, 0) == NULL,
                    WGML_ERR_SHAPE, "frequency table", "[33, 4]", "[2, 5, 3, 64]", NULL);
    th_expect_error("rope table NULL", rope_tab(T.g, x, p, NULL, WGML_ROPE_HALF, WGML_ROPE_BSHD, 0) == NULL, WGML_ERR_ARG,
                    "frequency table", NULL);
    free(hx); free(hw); free(dx); free(ref); free(plain);
    wgml_tensor_free(x); wgml_tensor_free(p); wgml_tensor_free(tab); wgml_tensor_free(bad);
}

/* More than 65,535 workgroups: [1, 4, 262145, 8] has 4,194,320 pairs = 65,537 workgroups of
 * 64 threads. Positions [S] take 4 values, so the reference uses a small cos/sin table. */
static void test_huge_grid(void) {
    int64_t S = 4, H = 262145, D = 8, xs[4] = {1, S, H, D}, ps[1] = {S};
    int64_t n = S * H * D;
    float *hx = th_random((size_t)n, -1, 1);
    int32_t hp[4] = {3, 7000, 0, 123456};
    wgml_tensor *x = th_tensor_f32(4, xs, hx), *p = th_tensor_i32(1, ps, hp);
    wgml_tensor *o = wgml_rope(T.g, x, p, 10000, WGML_ROPE_HALF);
    float *got = th_read_f32(o);
    double cs[4][4][2];
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < 4; i++) {
            double ang = hp[s] * pow(10000.0, -2.0 * i / 8.0);
            cs[s][i][0] = cos(ang);
            cs[s][i][1] = sin(ang);
        }
    size_t bad = 0, nan = 0;
    double worst = 0;
    for (int64_t row = 0; got && row < S * H; row++) {
        int s = (int)(row / H);
        for (int i = 0; i < 4; i++) {
            int64_t ia = row * D + i, ib = ia + 4;
            double ra = hx[ia] * cs[s][i][0] - hx[ib] * cs[s][i][1], rb = hx[ia] * cs[s][i][1] + hx[ib] * cs[s][i][0];
            double ea = fabs(got[ia] - ra), eb = fabs(got[ib] - rb);
            if (isnan(got[ia]) || isnan(got[ib])) nan++;
            worst = th_max_err(th_max_err(worst, ea), eb);
            if ((ea > ROPE_ATOL && ea > ROPE_RTOL * fabs(ra)) || (eb > ROPE_ATOL && eb > ROPE_RTOL * fabs(rb))) bad++;
        }
    }
    th_check(got && bad == 0 && nan == 0, "rope over 65,537 workgroups (%lld elements): %zu off, %zu NaN, max err %.3g",
             (long long)n, bad, nan, worst);
    free(got); free(hx);
    wgml_tensor_free(x); wgml_tensor_free(p); wgml_tensor_free(o);
}

static void test_bad_input(void) {
    float z[64] = {0};
    int32_t zi[8] = {0};
    int64_t xs[4] = {1, 2, 3, 8}, xodd[4] = {1, 2, 3, 7}, x3[3] = {2, 3, 8}, ps[1] = {2}, pbad[1] = {3}, pbs[2] = {2, 2};
    wgml_tensor *x = th_tensor_f32(4, xs, z), *p = th_tensor_i32(1, ps, zi);
    th_expect_error("rope NULL x", wgml_rope(T.g, NULL, p, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_ARG, "rope", "x is NULL", NULL);
    th_expect_error("rope NULL positions", wgml_rope(T.g, x, NULL, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_ARG, "rope",
                    "positions is NULL", NULL);
    th_check(wgml_rope(NULL, x, p, 10000, WGML_ROPE_HALF) == NULL, "rope NULL graph gives NULL");
    wgml_tensor *xo = th_tensor_f32(4, xodd, z);
    th_expect_error("rope odd D", wgml_rope(T.g, xo, p, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_SHAPE, "rope", "[1, 2, 3, 7]",
                    "even", NULL);
    int32_t zi48[48] = {0};
    wgml_tensor *xi = th_tensor_i32(4, xs, zi48);
    th_expect_error("rope x i32", wgml_rope(T.g, xi, p, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_DTYPE, "rope", "x must be f32",
                    NULL);
    wgml_tensor *pf = th_tensor_f32(1, ps, z);
    th_expect_error("rope positions f32", wgml_rope(T.g, x, pf, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_DTYPE, "rope",
                    "positions must be i32", NULL);
    wgml_tensor *pb = th_tensor_i32(1, pbad, zi);
    th_expect_error("rope positions length", wgml_rope(T.g, x, pb, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_SHAPE, "rope",
                    "positions [3]", "[1, 2, 3, 8]", NULL);
    wgml_tensor *pbs2 = th_tensor_i32(2, pbs, zi);
    th_expect_error("rope positions [B,S] wrong B", wgml_rope(T.g, x, pbs2, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_SHAPE,
                    "rope", "positions [2, 2]", NULL);
    wgml_tensor *x3t = th_tensor_f32(3, x3, z);
    th_expect_error("rope rank 3", wgml_rope(T.g, x3t, p, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_SHAPE, "rope", "rank 4",
                    NULL);
    th_expect_error("rope theta 0", wgml_rope(T.g, x, p, 0, WGML_ROPE_HALF) == NULL, WGML_ERR_ARG, "rope", "theta", NULL);
    th_expect_error("rope bad style", wgml_rope(T.g, x, p, 10000, (wgml_rope_style)7) == NULL, WGML_ERR_ARG, "rope", "style",
                    NULL);
    th_expect_error("rope_backward odd D", wgml_rope_backward(T.g, xo, p, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_SHAPE,
                    "rope_backward", "dy", NULL);
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    wgml_tensor *p2 = wgml_tensor_new(g2, WGML_I32, 1, ps);
    th_expect_error("rope tensors of two graphs", wgml_rope(T.g, x, p2, 10000, WGML_ROPE_HALF) == NULL, WGML_ERR_ARG, "rope",
                    NULL);
    wgml_graph_free(g2);
    /* still works */
    float *got = th_read_f32(wgml_rope(T.g, x, p, 10000, WGML_ROPE_HALF));
    double ref[48] = {0};
    th_close("rope after errors", got, ref, 48, 1e-7, 1e-7);
    free(got);
    wgml_tensor_free(x); wgml_tensor_free(p); wgml_tensor_free(xo); wgml_tensor_free(xi); wgml_tensor_free(pf);
    wgml_tensor_free(pb); wgml_tensor_free(pbs2); wgml_tensor_free(x3t);
}

int main(int argc, char **argv) {
    th_init_args("test_rope", argc, argv);
    double t0 = now();
    test_cases();
    test_heads_first();
    double t1 = now();
    test_graph();
    test_factors();
    double t2 = now();
    if (!th_dumping()) test_huge_grid();
    double t3 = now();
    test_bad_input();
    printf("times: cases %.2fs, graph and factors %.2fs, huge grid %.2fs, bad input %.2fs\n", t1 - t0, t2 - t1, t3 - t2, now() - t3);
    return th_done();
}
