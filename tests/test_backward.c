#define _POSIX_C_SOURCE 200809L
/* Backward ops against plain double-precision loops (the references: backward_ref.h): softmax /
 * log_softmax backward (any dim), rms_norm and layer_norm backward (dx, dw, db; more than 65,535
 * rows; dw the same bits twice), the unary and clamp derivatives. The host references, sdpa's
 * included, are themselves checked against central finite differences of host double forwards.
 * Also a built graph of every backward op (sdpa's, embedding's and gather's too) run twice, and
 * bad input. sdpa, embedding and gather backward: test_backward_attn.c. Run with --dump DIR, the
 * cases are also checked by tests/py/test_torch_backward.py against PyTorch float64 autograd. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backward_ref.h"

/* ------------------------------------------------------------------ finite differences */

/* max over entries of |analytic − fd| / max(1, |fd|), folded with th_max_err: a NaN in the
 * analytic gradient is +inf, whatever the entries after it */
typedef double (*loss_fn)(void *ctx);
static double fd_check(loss_fn L, void *ctx, double *param, size_t n, const double *grad, size_t stride) {
    double worst = 0, h = 1e-5;
    for (size_t i = 0; i < n; i += stride) {
        double keep = param[i];
        param[i] = keep + h;
        double lp = L(ctx);
        param[i] = keep - h;
        double lm = L(ctx);
        param[i] = keep;
        double fd = (lp - lm) / (2 * h), e = fabs(fd - grad[i]) / fmax(1.0, fabs(fd));
        worst = th_max_err(worst, e);
    }
    return worst;
}

static double dotd(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static double *drandom(size_t n, double lo, double hi) {
    double *p = dalloc(n);
    for (size_t i = 0; i < n; i++) p[i] = th_uniform(lo, hi);
    return p;
}

typedef struct fdc {
    int kind; /* 0 softmax, 1 log_softmax, 2 rms, 3 layer, 4 unary, 5 sdpa */
    double *x, *w, *b, *dy, *tmp, *k, *v;
    int64_t outer, n, inner, rows, d;
    wgml_unary_op op;
    attn_dims a;
    bool causal;
} fdc;

static double fd_loss(void *vc) {
    fdc *c = vc;
    size_t n;
    switch (c->kind) {
    case 0:
    case 1:
        n = (size_t)(c->outer * c->n * c->inner);
        ref_softmax(c->x, c->tmp, c->outer, c->n, c->inner, c->kind == 1);
        return dotd(c->tmp, c->dy, n);
    case 2:
        n = (size_t)(c->rows * c->d);
        ref_rms(c->x, c->w, c->tmp, c->rows, c->d, 1e-5);
        return dotd(c->tmp, c->dy, n);
    case 3:
        n = (size_t)(c->rows * c->d);
        ref_layer(c->x, c->w, c->b, c->tmp, NULL, NULL, c->rows, c->d, 1e-5);
        return dotd(c->tmp, c->dy, n);
    case 4:
        n = (size_t)c->rows;
        for (size_t i = 0; i < n; i++) c->tmp[i] = un_f(c->op, c->x[i]);
        return dotd(c->tmp, c->dy, n);
    default:
        n = (size_t)(c->a.B * c->a.Hq * c->a.Sq * c->a.D);
        ref_sdpa(&c->a, c->x, c->k, c->v, NULL, c->causal, 1 / sqrt((double)c->a.D), c->tmp, NULL, NULL, NULL);
        return dotd(c->tmp, c->dy, n);
    }
}

static void test_finite_differences(void) {
    const double tol = 1e-6;
    /* the check itself: a NaN in the first entry of an otherwise right gradient must fail it */
    {
        double x[4] = {0.5, -1, 2, 0.25}, dy[4] = {1, -0.5, 0.25, 2}, tmp[4], dx[4];
        fdc c = {.kind = 4, .rows = 4, .op = WGML_UN_EXP, .x = x, .dy = dy, .tmp = tmp};
        for (int i = 0; i < 4; i++) dx[i] = un_df(c.op, x[i]) * dy[i];
        double right = fd_check(fd_loss, &c, x, 4, dx, 1);
        dx[0] = NAN;
        double e = fd_check(fd_loss, &c, x, 4, dx, 1);
        th_check(right < tol && !(e < tol), "finite differences: a NaN gradient entry fails (err %.2g; right %.2g)", e,
                 right);
    }
    /* softmax / log_softmax along the middle dim of [3, 7, 2] */
    for (int lg = 0; lg < 2; lg++) {
        fdc c = {.kind = lg, .outer = 3, .n = 7, .inner = 2};
        size_t n = 42;
        c.x = drandom(n, -3, 3);
        c.dy = drandom(n, -1, 1);
        c.tmp = dalloc(n);
        double *y = dalloc(n), *dx = dalloc(n);
        ref_softmax(c.x, y, 3, 7, 2, lg);
        ref_softmax_bwd(y, c.dy, dx, 3, 7, 2, lg);
        double e = fd_check(fd_loss, &c, c.x, n, dx, 1);
        th_check(e < tol, "finite differences: %s backward (max err %.2g)", lg ? "log_softmax" : "softmax", e);
        free(c.x); free(c.dy); free(c.tmp); free(y); free(dx);
    }
    /* rms_norm: dx and dw */
    {
        fdc c = {.kind = 2, .rows = 4, .d = 7};
        size_t n = 28;
        c.x = drandom(n, -2, 2);
        c.w = drandom(7, -2, 2);
        c.dy = drandom(n, -1, 1);
        c.tmp = dalloc(n);
        double *dx = dalloc(n), dw[7];
        ref_rms_bwd(c.x, c.w, c.dy, dx, dw, 4, 7, 1e-5);
        double e1 = fd_check(fd_loss, &c, c.x, n, dx, 1), e2 = fd_check(fd_loss, &c, c.w, 7, dw, 1);
        th_check(e1 < tol && e2 < tol, "finite differences: rms_norm dx %.2g, dw %.2g", e1, e2);
        free(c.x); free(c.w); free(c.dy); free(c.tmp); free(dx);
    }
    /* layer_norm: dx, dw, db */
    {
        fdc c = {.kind = 3, .rows = 4, .d = 7};
        size_t n = 28;
        c.x = drandom(n, -2, 2);
        c.w = drandom(7, -2, 2);
        c.b = drandom(7, -1, 1);
        c.dy = drandom(n, -1, 1);
        c.tmp = dalloc(n);
        double *dx = dalloc(n), dw[7], db[7];
        ref_layer_bwd(c.x, c.w, c.dy, dx, dw, db, 4, 7, 1e-5);
        double e1 = fd_check(fd_loss, &c, c.x, n, dx, 1), e2 = fd_check(fd_loss, &c, c.w, 7, dw, 1),
               e3 = fd_check(fd_loss, &c, c.b, 7, db, 1);
        th_check(e1 < tol && e2 < tol && e3 < tol, "finite differences: layer_norm dx %.2g, dw %.2g, db %.2g", e1, e2,
                 e3);
        free(c.x); free(c.w); free(c.b); free(c.dy); free(c.tmp); free(dx);
    }
    /* every unary op of the table (positive inputs for log, sqrt, rsqrt; none at the kinks of
     * relu / abs; not the rounding ops, whose steps finite differences cannot cross) */
    for (int op = 0; op < N_UNARY; op++) {
        if (op >= WGML_UN_FLOOR && op <= WGML_UN_ROUND) continue;
        bool pos = op == WGML_UN_LOG || op == WGML_UN_SQRT || op == WGML_UN_RSQRT;
        fdc c = {.kind = 4, .rows = 64, .op = (wgml_unary_op)op};
        c.x = drandom(64, pos ? 0.2 : -5, pos ? 4 : 5);
        for (int i = 0; i < 64 && !pos; i++)
            if (fabs(c.x[i]) < 1e-3) c.x[i] = 0.5;
        c.dy = drandom(64, -1, 1);
        c.tmp = dalloc(64);
        double dx[64];
        for (int i = 0; i < 64; i++) dx[i] = un_df(c.op, c.x[i]) * c.dy[i];
        double e = fd_check(fd_loss, &c, c.x, 64, dx, 1);
        th_check(e < tol, "finite differences: unary op %d derivative (max err %.2g)", op, e);
        free(c.x); free(c.dy); free(c.tmp);
    }
    /* sdpa: GQA 4/2 heads, causal with Sq < Skv and not */
    for (int causal = 0; causal < 2; causal++) {
        fdc c = {.kind = 5, .a = {1, 4, 2, 5, 7, 8}, .causal = causal};
        size_t nq = 4 * 5 * 8, nk = 2 * 7 * 8;
        c.x = drandom(nq, -1, 1);
        c.k = drandom(nk, -1, 1);
        c.v = drandom(nk, -1, 1);
        c.dy = drandom(nq, -1, 1);
        c.tmp = dalloc(nq);
        double *dq = dalloc(nq), *dk = dalloc(nk), *dv = dalloc(nk);
        ref_sdpa(&c.a, c.x, c.k, c.v, c.dy, causal, 1 / sqrt(8.0), c.tmp, dq, dk, dv);
        double e1 = fd_check(fd_loss, &c, c.x, nq, dq, 1), e2 = fd_check(fd_loss, &c, c.k, nk, dk, 1),
               e3 = fd_check(fd_loss, &c, c.v, nk, dv, 1);
        th_check(e1 < tol && e2 < tol && e3 < tol, "finite differences: sdpa%s dq %.2g, dk %.2g, dv %.2g",
                 causal ? " causal" : "", e1, e2, e3);
        free(c.x); free(c.k); free(c.v); free(c.dy); free(c.tmp); free(dq); free(dk); free(dv);
    }
}

/* ------------------------------------------------------------------ GPU cases */

static void case_softmax_ex(int rank, const int64_t *shape, int dim, bool lg, double lo, double hi, bool masked) {
    int64_t numel = numel_of(rank, shape);
    int dd = dim < 0 ? dim + rank : dim;
    int64_t outer = 1, n = shape[dd], inner = 1;
    for (int i = 0; i < dd; i++) outer *= shape[i];
    for (int i = dd + 1; i < rank; i++) inner *= shape[i];
    float *hx = th_random((size_t)numel, lo, hi), *hdy = th_random((size_t)numel, -1, 1);
    for (int64_t i = 0; masked && i < numel; i += 5) hx[i] = -INFINITY; /* masked entries: y 0 / -inf */
    double *xd = to_d(hx, (size_t)numel), *yd = dalloc((size_t)numel);
    ref_softmax(xd, yd, outer, n, inner, lg);
    float *hy = malloc(sizeof(float) * (size_t)numel);
    for (int64_t i = 0; i < numel; i++) hy[i] = (float)yd[i];
    double *yf = to_d(hy, (size_t)numel), *dyd = to_d(hdy, (size_t)numel), *ref = dalloc((size_t)numel);
    ref_softmax_bwd(yf, dyd, ref, outer, n, inner, lg);
    wgml_tensor *y = th_tensor_f32(rank, shape, hy), *dy = th_tensor_f32(rank, shape, hdy);
    double t0 = now();
    wgml_tensor *dx = lg ? wgml_log_softmax_backward(T.g, y, dy, dim) : wgml_softmax_backward(T.g, y, dy, dim);
    float *got = th_read_f32(dx);
    char name[160];
    snprintf(name, sizeof name, "%s_backward rank %d [..%lld..] dim %d x in [%g,%g]%s (%.0f ms)",
             lg ? "log_softmax" : "softmax", rank, (long long)n, dim, lo, hi, masked ? " some -inf" : "",
             (now() - t0) * 1e3);
    th_close(name, got, ref, (size_t)numel, ATOL, RTOL);
    if (th_dumping() && numel <= 100000) {
        char cn[32];
        snprintf(cn, sizeof cn, "%s%d", lg ? "logsoftmax" : "softmax", n_dumped++);
        float prm[1] = {(float)dim};
        int64_t one = 1;
        th_dump(cn, "x", WGML_F32, rank, shape, hx);
        th_dump(cn, "dy", WGML_F32, rank, shape, hdy);
        th_dump(cn, "params", WGML_F32, 1, &one, prm);
        th_dump_tensor(cn, "dx", dx);
    }
    free(hx); free(hdy); free(xd); free(yd); free(hy); free(yf); free(dyd); free(ref); free(got);
    wgml_tensor_free(y); wgml_tensor_free(dy); wgml_tensor_free(dx);
}

static void case_softmax(int rank, const int64_t *shape, int dim, bool lg, double lo, double hi) {
    case_softmax_ex(rank, shape, dim, lg, lo, hi, false);
}

static void test_softmax(void) {
    const int64_t a[2] = {7, 37}, b[2] = {37, 129}, c[3] = {5, 7, 9}, l[2] = {3, 2000}, s[2] = {129, 7};
    case_softmax(2, a, -1, false, -3, 3);
    case_softmax(2, a, -1, true, -3, 3);
    case_softmax(2, b, 1, false, -40, 40); /* inputs spanning ±40 */
    case_softmax(2, b, -1, true, -40, 40);
    case_softmax(3, c, 1, false, -2, 2); /* a middle dim: strided rows */
    case_softmax(3, c, 0, true, -2, 2);
    case_softmax(2, l, -1, false, -5, 5); /* long rows: a workgroup per row */
    case_softmax(2, l, -1, true, -5, 5);
    case_softmax(2, s, 0, false, -1, 1);
    case_softmax_ex(2, b, -1, false, -3, 3, true);
    case_softmax_ex(2, b, -1, true, -3, 3, true);
    case_softmax_ex(3, c, 1, true, -3, 3, true);
    const int64_t many[2] = {70000, 17}; /* more than 65,535 workgroups (one per row) */
    case_softmax(2, many, -1, false, -3, 3);
    case_softmax(2, many, -1, true, -3, 3);
}

static void case_rms(int rank, const int64_t *shape, bool has_w, bool want_dw, float eps, int dump) {
    int64_t d = shape[rank - 1], numel = numel_of(rank, shape), rows = numel / d;
    float *hx = th_random((size_t)numel, -2, 2), *hw = th_random((size_t)d, -2, 2),
          *hdy = th_random((size_t)numel, -1, 1);
    wgml_tensor *x = th_tensor_f32(rank, shape, hx), *w = has_w ? th_tensor_f32(1, &d, hw) : NULL,
                *dy = th_tensor_f32(rank, shape, hdy), *dx = NULL, *dw = NULL;
    double t0 = now();
    wgml_status s = wgml_rms_norm_backward(T.g, x, w, dy, eps, &dx, want_dw ? &dw : NULL);
    float *gx = th_read_f32(dx), *gw = want_dw ? th_read_f32(dw) : NULL;
    double dt = now() - t0;
    double *xd = to_d(hx, (size_t)numel), *wd = to_d(hw, (size_t)d), *dyd = to_d(hdy, (size_t)numel);
    double *rx = dalloc((size_t)numel), *rw = dalloc((size_t)d);
    ref_rms_bwd(xd, has_w ? wd : NULL, dyd, rx, rw, rows, d, eps);
    char name[200];
    snprintf(name, sizeof name, "rms_norm_backward [%lld rows, %lld]%s dx (%.0f ms)", (long long)rows, (long long)d,
             has_w ? " w" : "", dt * 1e3);
    th_check(!s, "rms_norm_backward status: %s", wgml_last_error(T.ctx));
    th_close(name, gx, rx, (size_t)numel, ATOL, RTOL);
    if (want_dw) {
        snprintf(name, sizeof name, "rms_norm_backward [%lld rows, %lld] dw", (long long)rows, (long long)d);
        th_close(name, gw, rw, (size_t)d, ATOL * sqrt((double)rows), RTOL);
        /* determinism: a second run gives the same bits */
        wgml_tensor *dx2 = NULL, *dw2 = NULL;
        wgml_rms_norm_backward(T.g, x, w, dy, eps, &dx2, &dw2);
        float *g2 = th_read_f32(dw2);
        th_exact_u32("rms_norm_backward dw: the same bits twice", (const uint32_t *)g2, (const uint32_t *)gw, (size_t)d);
        free(g2);
        wgml_tensor_free(dx2); wgml_tensor_free(dw2);
    }
    if (dump && th_dumping()) {
        char cn[32];
        snprintf(cn, sizeof cn, "rms%d", n_dumped++);
        float prm[3] = {eps, has_w, want_dw};
        int64_t three = 3;
        th_dump(cn, "x", WGML_F32, rank, shape, hx);
        if (has_w) th_dump(cn, "w", WGML_F32, 1, &d, hw);
        th_dump(cn, "dy", WGML_F32, rank, shape, hdy);
        th_dump(cn, "params", WGML_F32, 1, &three, prm);
        th_dump_tensor(cn, "dx", dx);
        if (want_dw) th_dump_tensor(cn, "dw", dw);
    }
    free(hx); free(hw); free(hdy); free(gx); free(gw); free(xd); free(wd); free(dyd); free(rx); free(rw);
    wgml_tensor_free(x); wgml_tensor_free(w); wgml_tensor_free(dy); wgml_tensor_free(dx); wgml_tensor_free(dw);
}

static void case_layer(int rank, const int64_t *shape, bool has_w, bool want_dw, bool want_db, double lo, double hi,
                       int dump) {
    int64_t d = shape[rank - 1], numel = numel_of(rank, shape), rows = numel / d;
    float eps = 1e-5f;
    float *hx = th_random((size_t)numel, lo, hi), *hw = th_random((size_t)d, -2, 2), *hb = th_random((size_t)d, -1, 1),
          *hdy = th_random((size_t)numel, -1, 1);
    wgml_tensor *x = th_tensor_f32(rank, shape, hx), *w = has_w ? th_tensor_f32(1, &d, hw) : NULL,
                *b = th_tensor_f32(1, &d, hb), *dy = th_tensor_f32(rank, shape, hdy);
    wgml_tensor *mean = NULL, *rstd = NULL, *dx = NULL, *dw = NULL, *db = NULL;
    double t0 = now();
    wgml_tensor *y = wgml_layer_norm(T.g, x, w, b, eps, &mean, &rstd);
    wgml_status s = wgml_layer_norm_backward(T.g, x, w, mean, rstd, dy, &dx, want_dw ? &dw : NULL, want_db ? &db : NULL);
    float *gx = th_read_f32(dx), *gw = want_dw ? th_read_f32(dw) : NULL, *gb = want_db ? th_read_f32(db) : NULL;
    double dt = now() - t0;
    double *xd = to_d(hx, (size_t)numel), *wd = to_d(hw, (size_t)d), *dyd = to_d(hdy, (size_t)numel);
    double *rx = dalloc((size_t)numel), *rw = dalloc((size_t)d), *rb = dalloc((size_t)d), *cond = dalloc((size_t)numel);
    ref_layer_bwd_cond(xd, has_w ? wd : NULL, dyd, rx, rw, rb, cond, rows, d, eps);
    th_check(!s, "layer_norm_backward status: %s", wgml_last_error(T.ctx));
    char name[200];
    snprintf(name, sizeof name, "layer_norm_backward [%lld rows, %lld]%s x in [%g,%g] dx (%.0f ms)", (long long)rows,
             (long long)d, has_w ? " w" : "", lo, hi, dt * 1e3);
    /* (x − mean) in fp32 loses |mean|·2^-24 against a spread ~1: scale atol by the offset. dx is
     * rstd times a difference of terms (cond) that can be far larger than it: a row whose values
     * lie close together has a large rstd, and float32 errs by ulps of cond, however small dx is
     * (seen: 1 element in 490,000 off by 1.15e-5, rel 2.4e-4: 15 ulps of its cond, 13; the
     * forward's one-pass variance leaves rstd ~1e-6 relative, and dx holds rstd up to cubed). So
     * an element may also be off by 32 ulps of its cond. */
    double at = ATOL * fmax(1.0, fabs(lo + hi) / 2);
    for (int64_t i = 0; i < numel; i++) cond[i] = fmax(at, 32 * 0x1p-24 * cond[i]);
    th_close_each(name, gx, rx, (size_t)numel, cond, RTOL);
    if (want_dw) {
        snprintf(name, sizeof name, "layer_norm_backward [%lld rows, %lld] dw", (long long)rows, (long long)d);
        th_close(name, gw, rw, (size_t)d, at * sqrt((double)rows), RTOL);
    }
    if (want_db) {
        snprintf(name, sizeof name, "layer_norm_backward [%lld rows, %lld] db", (long long)rows, (long long)d);
        th_close(name, gb, rb, (size_t)d, ATOL * sqrt((double)rows), RTOL);
    }
    if (dump && th_dumping()) {
        char cn[32];
        snprintf(cn, sizeof cn, "layer%d", n_dumped++);
        float prm[4] = {eps, has_w, want_dw, want_db};
        int64_t four = 4;
        th_dump(cn, "x", WGML_F32, rank, shape, hx);
        if (has_w) th_dump(cn, "w", WGML_F32, 1, &d, hw);
        th_dump(cn, "b", WGML_F32, 1, &d, hb);
        th_dump(cn, "dy", WGML_F32, rank, shape, hdy);
        th_dump(cn, "params", WGML_F32, 1, &four, prm);
        th_dump_tensor(cn, "dx", dx);
        if (want_dw) th_dump_tensor(cn, "dw", dw);
        if (want_db) th_dump_tensor(cn, "db", db);
    }
    free(hx); free(hw); free(hb); free(hdy); free(gx); free(gw); free(gb); free(xd); free(wd); free(dyd);
    free(rx); free(rw); free(rb); free(cond);
    wgml_tensor_free(x); wgml_tensor_free(w); wgml_tensor_free(b); wgml_tensor_free(dy); wgml_tensor_free(y);
    wgml_tensor_free(mean); wgml_tensor_free(rstd); wgml_tensor_free(dx); wgml_tensor_free(dw); wgml_tensor_free(db);
}

static void test_norms(void) {
    const int64_t a[2] = {7, 37}, b[2] = {37, 129}, c[3] = {4, 3, 132}, one[1] = {129}, many[2] = {70000, 7},
                  l[2] = {5, 4096};
    case_rms(2, a, true, true, 1e-5f, 1);
    case_rms(2, l, true, true, 1e-5f, 0); /* long vec4 rows */
    case_layer(2, l, true, true, true, -1, 1, 0);
    case_rms(3, c, false, true, 1e-5f, 1); /* vec4 rows without w */
    case_layer(3, c, false, false, true, -1, 1, 1);
    case_rms(2, a, false, true, 1e-6f, 1);
    case_rms(2, b, true, true, 1e-5f, 1);
    case_rms(3, c, true, false, 1e-5f, 1);
    case_rms(1, one, true, true, 0.5f, 1); /* eps that dominates */
    case_rms(2, many, true, true, 1e-5f, 0); /* more than 65,535 workgroups */
    case_layer(2, a, true, true, true, -1, 1, 1);
    case_layer(2, a, false, false, true, -1, 1, 1);
    case_layer(2, b, true, true, false, 9, 11, 1); /* mean large against the spread */
    case_layer(3, c, true, true, true, -2, 2, 1);
    case_layer(1, one, true, true, true, -1, 1, 1);
    case_layer(2, many, true, true, true, -1, 1, 0);
}

static void case_unary(int op, int64_t n, double lo, double hi) {
    bool is_clamp = op < 0;
    float clo = -0.5f, chi = 1.25f;
    float *hx = th_random((size_t)n, lo, hi), *hdy = th_random((size_t)n, -1, 1);
    if (!is_clamp && (op == WGML_UN_RELU || op == WGML_UN_ABS)) hx[0] = 0.0f; /* the kink: gradient 0 */
    if (is_clamp && n >= 3) {
        hx[1] = clo; /* the bounds themselves pass the gradient */
        hx[2] = chi;
    }
    wgml_tensor *x = th_tensor_f32(1, &n, hx), *dy = th_tensor_f32(1, &n, hdy);
    double t0 = now();
    wgml_tensor *dx = is_clamp ? wgml_clamp_backward(T.g, x, dy, clo, chi)
                               : wgml_unary_backward(T.g, (wgml_unary_op)op, x, dy);
    float *got = th_read_f32(dx);
    double dt = now() - t0;
    double *ref = dalloc((size_t)n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = is_clamp ? (hx[i] >= clo && hx[i] <= chi ? hdy[i] : 0.0) : un_df((wgml_unary_op)op, hx[i]) * hdy[i];
    char name[160];
    snprintf(name, sizeof name, "%s_backward op %d n %lld x in [%g,%g] (%.0f ms)", is_clamp ? "clamp" : "unary", op,
             (long long)n, lo, hi, dt * 1e3);
    /* exp / rsqrt reach ~e^6 and ~11: relative tolerance decides there */
    th_close(name, got, ref, (size_t)n, ATOL, RTOL);
    if (th_dumping() && n <= 10000) {
        char cn[32];
        snprintf(cn, sizeof cn, "unary%d", n_dumped++);
        float prm[3] = {(float)op, clo, chi};
        int64_t three = 3;
        th_dump(cn, "x", WGML_F32, 1, &n, hx);
        th_dump(cn, "dy", WGML_F32, 1, &n, hdy);
        th_dump(cn, "params", WGML_F32, 1, &three, prm);
        th_dump_tensor(cn, "dx", dx);
    }
    free(hx); free(hdy); free(got); free(ref);
    wgml_tensor_free(x); wgml_tensor_free(dy); wgml_tensor_free(dx);
}

static void test_unary(void) {
    for (int op = 0; op < N_UNARY; op++) {
        bool pos = op == WGML_UN_LOG || op == WGML_UN_SQRT || op == WGML_UN_RSQRT;
        case_unary(op, 37, pos ? 0.1 : -6, pos ? 4 : 6);       /* scalar path */
        case_unary(op, 4 * 1031, pos ? 0.05 : -12, pos ? 9 : 12); /* vec4 path, wide range */
    }
    case_unary(-1, 129, -2, 2);
    case_unary(-1, 4096, -2, 2);
    case_unary(WGML_UN_GELU, 300001, -30, 30); /* several workgroups, tails */
}

/* ------------------------------------------------------------------ built graph */

static void test_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t rows = 37, d = 64, xs[2] = {37, 64}, qs[4] = {1, 9, 7, 64}, ks[4] = {1, 3, 7, 64}, V = 129, n_ids = 37;
    size_t nx = (size_t)(rows * d), nq = 9 * 7 * 64, nk = 3 * 7 * 64;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w = wgml_tensor_new(g, WGML_F32, 1, &d),
                *dy = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_tensor *q = wgml_tensor_new(g, WGML_F32, 4, qs), *k = wgml_tensor_new(g, WGML_F32, 4, ks),
                *v = wgml_tensor_new(g, WGML_F32, 4, ks), *dout = wgml_tensor_new(g, WGML_F32, 4, qs);
    wgml_tensor *ids = wgml_tensor_new(g, WGML_I32, 1, &n_ids);
    wgml_tensor *dxr = NULL, *dwr = NULL, *dxl = NULL, *dwl = NULL, *dbl = NULL, *dq = NULL, *dk = NULL, *dv = NULL;
    wgml_tensor *mean = NULL, *rstd = NULL;
    wgml_status s = wgml_rms_norm_backward(g, x, w, dy, 1e-5f, &dxr, &dwr);
    wgml_tensor *y = wgml_softmax(g, x, -1);
    wgml_tensor *dxs = wgml_softmax_backward(g, y, dy, -1);
    wgml_tensor *dxu = wgml_unary_backward(g, WGML_UN_SILU, x, dy);
    wgml_tensor *ln = wgml_layer_norm(g, x, w, NULL, 1e-5f, &mean, &rstd);
    if (!s) s = wgml_layer_norm_backward(g, x, w, mean, rstd, dy, &dxl, &dwl, &dbl);
    wgml_tensor *out = wgml_sdpa(g, q, k, v, 1, 0);
    if (!s) s = wgml_sdpa_backward(g, q, k, v, out, dout, 1, 0, &dq, &dk, &dv);
    wgml_tensor *dE = wgml_embedding_backward(g, ids, dy, V);
    int64_t gis[2] = {37, 3};
    wgml_tensor *gidx = wgml_tensor_new(g, WGML_I32, 2, gis), *gdy = wgml_tensor_new(g, WGML_F32, 2, gis);
    wgml_tensor *dG = wgml_gather_backward(g, x, 1, gidx, gdy);
    wgml_tensor *keep[] = {dxr, dwr, dxs, dxu, dxl, dwl, dbl, dq, dk, dv, dE, dG};
    bool ok = !s && ln && dE;
    for (size_t i = 0; ok && i < sizeof keep / sizeof *keep; i++) ok = keep[i] && !wgml_graph_keep(g, keep[i]);
    th_check(ok && !wgml_graph_compile(g), "backward graph builds and compiles: %s", wgml_last_error(T.ctx));
    if (!ok) {
        wgml_graph_free(g);
        return;
    }
    for (int run = 0; run < 2; run++) {
        float *hx = th_random(nx, -2, 2), *hw = th_random((size_t)d, -2, 2), *hdy = th_random(nx, -1, 1);
        float *hq = th_random(nq, -1, 1), *hk = th_random(nk, -1, 1), *hv = th_random(nk, -1, 1),
              *hdo = th_random(nq, -1, 1);
        int32_t hid[37];
        for (int i = 0; i < 37; i++) hid[i] = (int32_t)(th_uniform(0, 129)) % 129;
        wgml_tensor_write(x, hx, nx * 4); wgml_tensor_write(w, hw, (size_t)d * 4); wgml_tensor_write(dy, hdy, nx * 4);
        wgml_tensor_write(q, hq, nq * 4); wgml_tensor_write(k, hk, nk * 4); wgml_tensor_write(v, hv, nk * 4);
        wgml_tensor_write(dout, hdo, nq * 4); wgml_tensor_write(ids, hid, sizeof hid);
        int32_t hg[111];
        float *hgd = th_random(111, -1, 1);
        for (int i = 0; i < 111; i++) hg[i] = (int32_t)th_uniform(0, 64) % 64;
        wgml_tensor_write(gidx, hg, sizeof hg); wgml_tensor_write(gdy, hgd, 111 * 4);
        th_check(!wgml_graph_run(g), "backward graph run %d: %s", run + 1, wgml_last_error(T.ctx));
        double *xd = to_d(hx, nx), *wd = to_d(hw, (size_t)d), *dyd = to_d(hdy, nx);
        double *r1 = dalloc(nx), *r2 = dalloc((size_t)d), *r3 = dalloc((size_t)d), *yd = dalloc(nx);
        char nm[96];
        float *got = malloc(sizeof(float) * (nq > nx ? nq : nx) * 4);
#define GRAPH_CHECK(t, n, ref, at)                                                                               \
    do {                                                                                                         \
        snprintf(nm, sizeof nm, "graph run %d: %s", run + 1, #t);                                                \
        th_check(!wgml_tensor_read(t, got, (n) * 4), "read %s: %s", #t, wgml_last_error(T.ctx));                 \
        th_close(nm, got, ref, n, at, RTOL);                                                                     \
    } while (0)
        ref_rms_bwd(xd, wd, dyd, r1, r2, rows, d, 1e-5);
        GRAPH_CHECK(dxr, nx, r1, ATOL);
        GRAPH_CHECK(dwr, (size_t)d, r2, 1e-4);
        ref_layer_bwd(xd, wd, dyd, r1, r2, r3, rows, d, 1e-5);
        GRAPH_CHECK(dxl, nx, r1, ATOL);
        GRAPH_CHECK(dwl, (size_t)d, r2, 1e-4);
        GRAPH_CHECK(dbl, (size_t)d, r3, 1e-4);
        ref_softmax(xd, yd, rows, d, 1, false);
        ref_softmax_bwd(yd, dyd, r1, rows, d, 1, false);
        GRAPH_CHECK(dxs, nx, r1, ATOL);
        for (size_t i = 0; i < nx; i++) r1[i] = un_df(WGML_UN_SILU, xd[i]) * dyd[i];
        GRAPH_CHECK(dxu, nx, r1, ATOL);
        attn_dims a = {1, 9, 3, 7, 7, 64};
        double *qd = to_d(hq, nq), *kd = to_d(hk, nk), *vd = to_d(hv, nk), *dod = to_d(hdo, nq);
        double *rq = dalloc(nq), *rk = dalloc(nk), *rv = dalloc(nk);
        ref_sdpa(&a, qd, kd, vd, dod, true, 0.125, NULL, rq, rk, rv);
        GRAPH_CHECK(dq, nq, rq, 2e-5);
        GRAPH_CHECK(dk, nk, rk, 1e-4);
        GRAPH_CHECK(dv, nk, rv, 1e-4);
        double *re = dalloc((size_t)(V * d));
        for (int i = 0; i < 37; i++)
            for (int64_t c = 0; c < d; c++) re[hid[i] * d + c] += hdy[i * d + c];
        GRAPH_CHECK(dE, (size_t)(V * d), re, ATOL);
        memset(r1, 0, sizeof(double) * nx);
        for (int i = 0; i < 111; i++) r1[(i / 3) * 64 + hg[i]] += hgd[i];
        GRAPH_CHECK(dG, nx, r1, ATOL);
        free(hgd);
#undef GRAPH_CHECK
        free(hx); free(hw); free(hdy); free(hq); free(hk); free(hv); free(hdo); free(xd); free(wd); free(dyd);
        free(r1); free(r2); free(r3); free(yd); free(got); free(qd); free(kd); free(vd); free(dod);
        free(rq); free(rk); free(rv); free(re);
    }
    wgml_graph_free(g);
}

/* ------------------------------------------------------------------ bad input */

static void test_bad_input(void) {
    int64_t s[2] = {3, 8}, s2[2] = {3, 7}, s8 = 8, s7 = 7, qs[4] = {1, 4, 5, 8}, ks[4] = {1, 3, 5, 8},
            k2s[4] = {1, 2, 3, 8}, q2s[4] = {1, 4, 5, 8};
    float z[256] = {0};
    int32_t zi[24] = {0}, bad[3] = {0, 9, 1};
    wgml_tensor *x = th_tensor_f32(2, s, z), *x7 = th_tensor_f32(2, s2, z), *xi = th_tensor_i32(2, s, zi);
    wgml_tensor *w7 = th_tensor_f32(1, &s7, z), *w8 = th_tensor_f32(1, &s8, z), *r3 = th_tensor_f32(1, s, z);
    wgml_tensor *dx = x, *dw = x, *db = x;
    th_expect_error("softmax_backward NULL dy", wgml_softmax_backward(T.g, x, NULL, -1) == NULL, WGML_ERR_ARG,
                    "softmax_backward", "dy is NULL", NULL);
    th_expect_error("softmax_backward shapes", wgml_softmax_backward(T.g, x, x7, -1) == NULL, WGML_ERR_SHAPE,
                    "softmax_backward", "[3, 7]", "[3, 8]", NULL);
    th_expect_error("log_softmax_backward bad dim", wgml_log_softmax_backward(T.g, x, x, 2) == NULL, WGML_ERR_ARG,
                    "log_softmax_backward", "dim 2", NULL);
    th_expect_error("softmax_backward i32 y", wgml_softmax_backward(T.g, xi, x, -1) == NULL, WGML_ERR_DTYPE,
                    "softmax_backward", "y", NULL);
    th_expect_error("rms_norm_backward w shape", wgml_rms_norm_backward(T.g, x, w7, x, 1e-5f, &dx, &dw) != WGML_OK,
                    WGML_ERR_SHAPE, "rms_norm_backward", "w [7]", NULL);
    th_check(dx == NULL && dw == NULL, "rms_norm_backward sets its outputs to NULL on error");
    th_expect_error("rms_norm_backward dy shape", wgml_rms_norm_backward(T.g, x, w8, x7, 1e-5f, &dx, NULL) != WGML_OK,
                    WGML_ERR_SHAPE, "rms_norm_backward", "dy [3, 7]", NULL);
    th_expect_error("rms_norm_backward NULL dx pointer", wgml_rms_norm_backward(T.g, x, w8, x, 1e-5f, NULL, NULL) != WGML_OK,
                    WGML_ERR_ARG, "rms_norm_backward", "dx", NULL);
    th_expect_error("rms_norm_backward negative eps", wgml_rms_norm_backward(T.g, x, w8, x, -1.0f, &dx, NULL) != WGML_OK,
                    WGML_ERR_ARG, "rms_norm_backward", "eps", NULL);
    th_expect_error("layer_norm_backward rstd size",
                    wgml_layer_norm_backward(T.g, x, w8, r3, w8, x, &dx, &dw, &db) != WGML_OK, WGML_ERR_SHAPE,
                    "layer_norm_backward", "rstd [8]", "3 elements", NULL);
    th_check(dx == NULL && dw == NULL && db == NULL, "layer_norm_backward sets its outputs to NULL on error");
    th_expect_error("layer_norm_backward NULL mean",
                    wgml_layer_norm_backward(T.g, x, NULL, NULL, r3, x, &dx, NULL, NULL) != WGML_OK, WGML_ERR_ARG,
                    "layer_norm_backward", "mean is NULL", NULL);
    th_expect_error("unary_backward unknown op", wgml_unary_backward(T.g, (wgml_unary_op)99, x, x) == NULL,
                    WGML_ERR_ARG, "unary_backward", "99", NULL);
    th_expect_error("unary_backward shapes", wgml_unary_backward(T.g, WGML_UN_EXP, x, x7) == NULL, WGML_ERR_SHAPE,
                    "unary_backward", "dy [3, 7]", NULL);
    th_expect_error("clamp_backward NaN bound", wgml_clamp_backward(T.g, x, x, NAN, 1) == NULL, WGML_ERR_ARG,
                    "clamp_backward", NULL);
    th_expect_error("unary_backward NULL x", wgml_unary_backward(T.g, WGML_UN_EXP, NULL, x) == NULL, WGML_ERR_ARG,
                    "unary_backward", "x is NULL", NULL);
    wgml_tensor *q = th_tensor_f32(4, qs, z), *k = th_tensor_f32(4, ks, z), *k2 = th_tensor_f32(4, k2s, z),
                *o = th_tensor_f32(4, q2s, z), *dq = NULL, *dk = NULL, *dv = NULL;
    th_expect_error("sdpa_backward heads", wgml_sdpa_backward(T.g, q, k, k, o, o, 0, 0, &dq, &dk, &dv) != WGML_OK,
                    WGML_ERR_SHAPE, "sdpa_backward", "not a multiple", NULL);
    th_expect_error("sdpa_backward causal Sq > Skv",
                    wgml_sdpa_backward(T.g, q, k2, k2, o, o, 1, 0, &dq, &dk, &dv) != WGML_OK, WGML_ERR_SHAPE,
                    "sdpa_backward", "Sq <= Skv", NULL);
    th_expect_error("sdpa_backward dout shape", wgml_sdpa_backward(T.g, q, k2, k2, o, k2, 0, 0, &dq, &dk, &dv) != WGML_OK,
                    WGML_ERR_SHAPE, "sdpa_backward", "dout", NULL);
    th_expect_error("sdpa_backward rank", wgml_sdpa_backward(T.g, x, k2, k2, o, o, 0, 0, &dq, &dk, &dv) != WGML_OK,
                    WGML_ERR_SHAPE, "sdpa_backward", "q", NULL);
    th_check(dq == NULL && dk == NULL && dv == NULL, "sdpa_backward sets its outputs to NULL on error");
    int64_t three = 3;
    wgml_tensor *ib = th_tensor_i32(1, &three, bad), *d38 = th_tensor_f32(2, (int64_t[]){3, 8}, z);
    th_expect_error("embedding_backward index out of range", wgml_embedding_backward(T.g, ib, d38, 9) == NULL,
                    WGML_ERR_ARG, "embedding_backward", "= 9", "[-9, 9)", NULL);
    th_expect_error("embedding_backward dy shape", wgml_embedding_backward(T.g, ib, w7, 10) == NULL, WGML_ERR_SHAPE,
                    "embedding_backward", "dy", NULL);
    th_expect_error("embedding_backward f32 idx", wgml_embedding_backward(T.g, x, x, 10) == NULL, WGML_ERR_DTYPE,
                    "embedding_backward", "idx", NULL);
    th_expect_error("embedding_backward zero rows", wgml_embedding_backward(T.g, ib, d38, 0) == NULL, WGML_ERR_ARG,
                    "embedding_backward", "num_embeddings", NULL);
    th_expect_error("gather_backward dy shape", wgml_gather_backward(T.g, w8, 0, ib, w8) == NULL,
                    WGML_ERR_SHAPE, "gather_backward", "dy [8]", NULL);
    th_expect_error("gather_backward index value", wgml_gather_backward(T.g, w7, 0, ib, r3) == NULL, WGML_ERR_ARG,
                    "gather_backward", "= 9", "[-7, 7)", NULL);
    th_expect_error("gather_backward rank", wgml_gather_backward(T.g, x, 0, ib, r3) == NULL, WGML_ERR_SHAPE,
                    "gather_backward", "rank", NULL);
    th_expect_error("gather_backward bad dim", wgml_gather_backward(T.g, w7, 1, ib, r3) == NULL, WGML_ERR_ARG,
                    "gather_backward", "dim 1", NULL);
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    wgml_tensor *other = wgml_tensor_new(g2, WGML_F32, 2, s);
    th_expect_error("softmax_backward dy of another graph", wgml_softmax_backward(T.g, x, other, -1) == NULL,
                    WGML_ERR_ARG, "softmax_backward", "different graphs", NULL);
    wgml_graph_free(g2);
    wgml_tensor_free(x); wgml_tensor_free(x7); wgml_tensor_free(xi); wgml_tensor_free(w7); wgml_tensor_free(w8);
    wgml_tensor_free(r3); wgml_tensor_free(q); wgml_tensor_free(k); wgml_tensor_free(k2); wgml_tensor_free(o);
    wgml_tensor_free(ib); wgml_tensor_free(d38);
}

int main(int argc, char **argv) {
    th_init_args("test_backward", argc, argv);
    double t0 = now(), t;
    test_finite_differences();
    printf("finite differences: %.1f s\n", now() - t0);
    t = now();
    test_softmax();
    printf("softmax: %.1f s\n", now() - t);
    t = now();
    test_norms();
    printf("norms: %.1f s\n", now() - t);
    t = now();
    test_unary();
    printf("unary: %.1f s\n", now() - t);
    t = now();
    test_graph();
    printf("graph: %.1f s\n", now() - t);
    test_bad_input();
    printf("total: %.1f s\n", now() - t0);
    return th_done();
}
