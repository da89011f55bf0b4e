/* The fp64 host references of the backward ops and the helpers of their tests, shared by
 * test_backward.c (softmax, the norms, the unary ops, a built graph of every backward op, bad
 * input, and the finite-difference check of these references) and test_backward_attn.c (sdpa,
 * embedding, gather): softmax / log_softmax, rms_norm and layer_norm forwards and backwards, the
 * unary table's functions and derivatives, sdpa's forward and backward; and the clock
 * (wall_clock.h). Static inline so that each test uses what it needs. */
#ifndef WGML_TEST_BACKWARD_REF_H
#define WGML_TEST_BACKWARD_REF_H
#include "wall_clock.h"

#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATOL 1e-5
#define RTOL 1e-4

/* the cases dumped so far (--dump): the number in the next case's name */
static int n_dumped;

static inline double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static inline int64_t numel_of(int rank, const int64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= s[i];
    return n;
}

static inline double *to_d(const float *f, size_t n) {
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

/* ------------------------------------------------------------------ host references */

/* softmax / log_softmax of the [outer, n, inner] view along n, in double */
static inline void ref_softmax(const double *x, double *y, int64_t outer, int64_t n, int64_t inner, bool lg) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *xr = x + o * n * inner + i;
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j < n; j++) m = fmax(m, xr[j * inner]);
            for (int64_t j = 0; j < n; j++) z += exp(xr[j * inner] - m);
            for (int64_t j = 0; j < n; j++) {
                double v = xr[j * inner] - m;
                y[o * n * inner + i + j * inner] = lg ? v - log(z) : exp(v) / z;
            }
        }
}

/* dx from the forward output y: softmax y ⊙ (dy − Σ dy ⊙ y); log_softmax dy − e^y Σ dy */
static inline void ref_softmax_bwd(const double *y, const double *dy, double *dx, int64_t outer, int64_t n,
                                   int64_t inner, bool lg) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t b = o * n * inner + i;
            double s = 0;
            for (int64_t j = 0; j < n; j++) s += lg ? dy[b + j * inner] : dy[b + j * inner] * y[b + j * inner];
            for (int64_t j = 0; j < n; j++) {
                int64_t k = b + j * inner;
                dx[k] = lg ? dy[k] - exp(y[k]) * s : y[k] * (dy[k] - s);
            }
        }
}

static inline void ref_rms(const double *x, const double *w, double *y, int64_t rows, int64_t d, double eps) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += x[r * d + j] * x[r * d + j];
        double rs = 1.0 / sqrt(s / (double)d + eps);
        for (int64_t j = 0; j < d; j++) y[r * d + j] = x[r * d + j] * rs * (w ? w[j] : 1.0);
    }
}

/* y_j = x_j r w_j, r = (Σx²/d + eps)^-1/2, dr/dx_k = −r³ x_k / d:
 * dx_k = r w_k dy_k − r³ x_k / d · Σ_j dy_j w_j x_j; dw_j = Σ_rows dy_j x_j r */
static inline void ref_rms_bwd(const double *x, const double *w, const double *dy, double *dx, double *dw,
                               int64_t rows, int64_t d, double eps) {
    if (dw) memset(dw, 0, sizeof(double) * (size_t)d);
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * d, *gr = dy + r * d;
        double s = 0, t = 0;
        for (int64_t j = 0; j < d; j++) {
            s += xr[j] * xr[j];
            t += gr[j] * (w ? w[j] : 1.0) * xr[j];
        }
        double rs = 1.0 / sqrt(s / (double)d + eps);
        for (int64_t j = 0; j < d; j++) {
            dx[r * d + j] = rs * (w ? w[j] : 1.0) * gr[j] - rs * rs * rs * xr[j] * t / (double)d;
            if (dw) dw[j] += gr[j] * xr[j] * rs;
        }
    }
}

static inline void ref_layer(const double *x, const double *w, const double *b, double *y, double *mean,
                             double *rstd, int64_t rows, int64_t d, double eps) {
    for (int64_t r = 0; r < rows; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < d; j++) m += x[r * d + j];
        m /= (double)d;
        for (int64_t j = 0; j < d; j++) v += (x[r * d + j] - m) * (x[r * d + j] - m);
        double rs = 1.0 / sqrt(v / (double)d + eps);
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = rs;
        for (int64_t j = 0; j < d; j++) y[r * d + j] = (x[r * d + j] - m) * rs * (w ? w[j] : 1.0) + (b ? b[j] : 0.0);
    }
}

/* xh = (x − m) r, g = dy w: dx = r (g − mean g − xh mean(g xh)); dw = Σ dy xh; db = Σ dy */
/* cond (may be NULL): each dx element's condition, rs·(|g| + |mean g| + |xh·mean(g·xh)|), the size
 * of the terms whose difference dx is: float32 arithmetic errs by a few ulps of it. */
static inline void ref_layer_bwd_cond(const double *x, const double *w, const double *dy, double *dx, double *dw,
                                      double *db, double *cond, int64_t rows, int64_t d, double eps) {
    if (dw) memset(dw, 0, sizeof(double) * (size_t)d);
    if (db) memset(db, 0, sizeof(double) * (size_t)d);
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * d, *gr = dy + r * d;
        double m = 0, v = 0;
        for (int64_t j = 0; j < d; j++) m += xr[j];
        m /= (double)d;
        for (int64_t j = 0; j < d; j++) v += (xr[j] - m) * (xr[j] - m);
        double rs = 1.0 / sqrt(v / (double)d + eps), mg = 0, mgx = 0;
        for (int64_t j = 0; j < d; j++) {
            double g = gr[j] * (w ? w[j] : 1.0);
            mg += g;
            mgx += g * (xr[j] - m) * rs;
        }
        mg /= (double)d;
        mgx /= (double)d;
        for (int64_t j = 0; j < d; j++) {
            double xh = (xr[j] - m) * rs, g = gr[j] * (w ? w[j] : 1.0);
            dx[r * d + j] = rs * (g - mg - xh * mgx);
            if (cond) cond[r * d + j] = rs * (fabs(g) + fabs(mg) + fabs(xh * mgx));
            if (dw) dw[j] += gr[j] * xh;
            if (db) db[j] += gr[j];
        }
    }
}

static inline void ref_layer_bwd(const double *x, const double *w, const double *dy, double *dx, double *dw,
                                 double *db, int64_t rows, int64_t d, double eps) {
    ref_layer_bwd_cond(x, w, dy, dx, dw, db, NULL, rows, d, eps);
}

static inline double sigm(double v) { return 1.0 / (1.0 + exp(-v)); }
#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */

/* The unary table's rows (include/wgml.h), so a new row enters every loop below; the switches
 * of un_f and un_df have no default, so the compiler asks for its reference. */
#define UN_COUNT_(NAME, name, value) +1
#define N_UNARY (0 WGML_UNARY_OPS(UN_COUNT_))

static inline double un_f(wgml_unary_op op, double v) {
    switch (op) {
    case WGML_UN_RELU: return v > 0 ? v : 0;
    case WGML_UN_SIGMOID: return sigm(v);
    case WGML_UN_SILU: return v * sigm(v);
    case WGML_UN_GELU: return v * 0.5 * erfc(-v / sqrt(2.0));
    case WGML_UN_GELU_TANH: return 0.5 * v * (1 + tanh(GELU_C * (v + 0.044715 * v * v * v)));
    case WGML_UN_EXP: return exp(v);
    case WGML_UN_LOG: return log(v);
    case WGML_UN_NEG: return -v;
    case WGML_UN_ABS: return fabs(v);
    case WGML_UN_SQRT: return sqrt(v);
    case WGML_UN_RSQRT: return 1 / sqrt(v);
    case WGML_UN_TANH: return tanh(v);
    case WGML_UN_FLOOR: return floor(v);
    case WGML_UN_CEIL: return ceil(v);
    case WGML_UN_TRUNC: return trunc(v);
    case WGML_UN_ROUND: return nearbyint(v);
    case WGML_UN_SIN: return sin(v);
    case WGML_UN_COS: return cos(v);
    case WGML_UN_EXPM1: return expm1(v);
    }
    return NAN;
}

static inline double un_df(wgml_unary_op op, double v) {
    switch (op) {
    case WGML_UN_RELU: return v > 0 ? 1 : 0;
    case WGML_UN_SIGMOID: return sigm(v) * sigm(-v);
    case WGML_UN_SILU: return sigm(v) * (1 + v * sigm(-v));
    case WGML_UN_GELU: return 0.5 * erfc(-v / sqrt(2.0)) + v * exp(-0.5 * v * v) / 2.5066282746310002;
    case WGML_UN_GELU_TANH: {
        double t = tanh(GELU_C * (v + 0.044715 * v * v * v));
        return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * v * v);
    }
    case WGML_UN_EXP: return exp(v);
    case WGML_UN_LOG: return 1 / v;
    case WGML_UN_NEG: return -1;
    case WGML_UN_ABS: return v > 0 ? 1 : v < 0 ? -1 : 0;
    case WGML_UN_SQRT: return 0.5 / sqrt(v);
    case WGML_UN_RSQRT: return -0.5 / (v * sqrt(v));
    case WGML_UN_TANH: return 1 - tanh(v) * tanh(v);
    case WGML_UN_FLOOR: case WGML_UN_CEIL: case WGML_UN_TRUNC: case WGML_UN_ROUND: return 0;
    case WGML_UN_SIN: return cos(v);
    case WGML_UN_COS: return -sin(v);
    case WGML_UN_EXPM1: return exp(v);
    }
    return NAN;
}

typedef struct attn_dims {
    int64_t B, Hq, Hkv, Sq, Skv, D;
} attn_dims;

/* sdpa forward (out) and backward (dq, dk, dv; any may be NULL) in double. */
/* window > 0 (causal only): query i sees keys nk - window .. nk - 1 only. */
static int64_t ref_window;
static inline void ref_sdpa(const attn_dims *a, const double *q, const double *k, const double *v, const double *dout,
                            bool causal, double sc, double *out, double *dq, double *dk, double *dv) {
    int64_t D = a->D, rep = a->Hq / a->Hkv;
    size_t kvn = (size_t)(a->B * a->Hkv * a->Skv * D);
    if (dk) memset(dk, 0, sizeof(double) * kvn);
    if (dv) memset(dv, 0, sizeof(double) * kvn);
    double *pr = dalloc((size_t)a->Skv), *dp = dalloc((size_t)a->Skv);
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->Hq; h++)
            for (int64_t i = 0; i < a->Sq; i++) {
                const double *qr = q + ((b * a->Hq + h) * a->Sq + i) * D;
                int64_t kb = (b * a->Hkv + h / rep) * a->Skv * D;
                int64_t nk = causal ? a->Skv - a->Sq + i + 1 : a->Skv;
                int64_t j0 = causal && ref_window > 0 && nk > ref_window ? nk - ref_window : 0;
                double m = -INFINITY, z = 0;
                for (int64_t j = j0; j < nk; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < D; c++) s += qr[c] * k[kb + j * D + c];
                    pr[j] = s * sc;
                    m = fmax(m, pr[j]);
                }
                for (int64_t j = j0; j < nk; j++) z += pr[j] = exp(pr[j] - m);
                for (int64_t j = j0; j < nk; j++) pr[j] /= z;
                int64_t ob = ((b * a->Hq + h) * a->Sq + i) * D;
                if (out)
                    for (int64_t c = 0; c < D; c++) {
                        double s = 0;
                        for (int64_t j = j0; j < nk; j++) s += pr[j] * v[kb + j * D + c];
                        out[ob + c] = s;
                    }
                if (!dout) continue;
                double delta = 0;
                for (int64_t j = j0; j < nk; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < D; c++) s += dout[ob + c] * v[kb + j * D + c];
                    dp[j] = s;
                    delta += pr[j] * s;
                }
                for (int64_t c = 0; dq && c < D; c++) dq[ob + c] = 0;
                for (int64_t j = j0; j < nk; j++) {
                    double ds = pr[j] * (dp[j] - delta);
                    for (int64_t c = 0; c < D; c++) {
                        if (dq) dq[ob + c] += sc * ds * k[kb + j * D + c];
                        if (dk) dk[kb + j * D + c] += sc * ds * qr[c];
                        if (dv) dv[kb + j * D + c] += pr[j] * dout[ob + c];
                    }
                }
            }
    free(pr);
    free(dp);
}

#endif
