/* wgml_conv (src/ops/conv): PyTorch's convolution over 1-3 spatial dims, plain and transposed,
 * with stride, padding, dilation, output_padding and groups (depthwise among them), batched and
 * unbatched, with and without bias, against an fp64 reference written here from the definition
 * (every input element times every kernel element added where it lands: the plain convolution
 * as a gather over output positions, the transposed one as the scatter over input positions
 * that it is). Random shapes and arguments each run, NaN-poisoned outputs. The gradient: a
 * built graph, loss = Σ conv(x, w, b)·R for a fixed random R, compiled once and run twice with
 * new inputs; dx, dw and db against the reference's adjoint (the same loops, accumulating
 * R·w into dx, R·x into dw and R into db), which is itself checked against central finite
 * differences of the host forward. Bad arguments give errors naming them and the shapes. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t irand(int64_t lo, int64_t hi) { return (int64_t)floor(th_uniform((double)lo, (double)hi + 1.0 - 1e-9)); }

typedef struct ccase {
    int nd, tr, unbatched, has_bias;
    int64_t n, c, co, groups, in[3], k[3], st[3], pd[3], dl[3], op[3], out[3];
} ccase;

static int64_t prod(const int64_t *a, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= a[i];
    return p;
}
static int64_t nx(const ccase *c) { return c->n * c->c * prod(c->in, c->nd); }
static int64_t nw(const ccase *c) { return (c->tr ? c->c * (c->co / c->groups) : c->co * (c->c / c->groups)) * prod(c->k, c->nd); }
static int64_t ny(const ccase *c) { return c->n * c->co * prod(c->out, c->nd); }

/* A random valid case: kind 0 any, 1 depthwise (one output channel per group). */
static ccase draw(int nd, int tr, int kind) {
    ccase c = {.nd = nd, .tr = tr, .unbatched = irand(0, 4) == 0, .has_bias = irand(0, 3) != 0};
    c.n = c.unbatched ? 1 : irand(1, 2);
    c.groups = irand(1, 3);
    int64_t cig = irand(1, 3), cog = kind == 1 ? 1 : irand(1, 3);
    c.c = c.groups * cig, c.co = c.groups * cog;
    for (int d = 0; d < nd; d++) {
        c.in[d] = irand(nd == 3 ? 2 : 3, nd == 1 ? 12 : nd == 2 ? 7 : 5);
        c.k[d] = irand(1, 3), c.st[d] = irand(1, 3), c.dl[d] = irand(1, 2);
        if (tr) {
            c.pd[d] = irand(0, c.dl[d] * (c.k[d] - 1));
            c.op[d] = irand(0, (c.st[d] > c.dl[d] ? c.st[d] : c.dl[d]) - 1);
            c.out[d] = (c.in[d] - 1) * c.st[d] - 2 * c.pd[d] + c.dl[d] * (c.k[d] - 1) + c.op[d] + 1;
        } else {
            c.pd[d] = irand(0, 2);
            while (c.in[d] + 2 * c.pd[d] < c.dl[d] * (c.k[d] - 1) + 1) c.pd[d]++;
            c.out[d] = (c.in[d] + 2 * c.pd[d] - c.dl[d] * (c.k[d] - 1) - 1) / c.st[d] + 1;
        }
        if (c.out[d] < 1) return draw(nd, tr, kind); /* the padding ate the transposed output: draw again */
    }
    return c;
}

/* The reference, forward and (with R) adjoint. Plain: y[b, o, p] = bias[o] + Σ x[b, ch, p·st −
 * pd + j·dl] w[o, ci, j] over ci and j (ch = g·Cin/G + ci); transposed: x[b, ch, i] w[ch, oc, j]
 * lands on y[b, g·Cout/G + oc, i·st − pd + j·dl]. y may be NULL (adjoint only); with R the
 * gradients of Σ y·R go into dx, dw, db (zeroed here; db may be NULL). */
static void reference(const ccase *c, const double *x, const double *w, const double *bias, double *y, const double *R,
                      double *dx, double *dw, double *db) {
    int nd = c->nd;
    int64_t P = prod(c->in, nd), K = prod(c->k, nd), NP = prod(c->out, nd), cig = c->c / c->groups, cog = c->co / c->groups;
    if (y)
        for (int64_t i = 0; i < c->n * c->co * NP; i++) y[i] = bias ? bias[(i / NP) % c->co] : 0.0;
    if (R) {
        memset(dx, 0, (size_t)nx(c) * sizeof *dx), memset(dw, 0, (size_t)nw(c) * sizeof *dw);
        for (int64_t o = 0; db && o < c->co; o++) db[o] = 0;
        for (int64_t i = 0; db && i < c->n * c->co * NP; i++) db[(i / NP) % c->co] += R[i];
    }
    for (int64_t b = 0; b < c->n; b++)
        for (int64_t g = 0; g < c->groups; g++)
            for (int64_t ci = 0; ci < cig; ci++)
                for (int64_t oc = 0; oc < cog; oc++)
                    for (int64_t j = 0; j < K; j++) {
                        int64_t ch = g * cig + ci, o = g * cog + oc, jj[3], jr = j;
                        for (int d = nd - 1; d >= 0; d--) jj[d] = jr % c->k[d], jr /= c->k[d];
                        int64_t wi = c->tr ? (ch * cog + oc) * K + j : (o * cig + ci) * K + j;
                        const int64_t *walk = c->tr ? c->in : c->out, *land = c->tr ? c->out : c->in;
                        for (int64_t q = 0; q < prod(walk, nd); q++) {
                            int64_t qq[3], qr = q, src = 0, dst = 0, inside = 1;
                            for (int d = nd - 1; d >= 0; d--) qq[d] = qr % walk[d], qr /= walk[d];
                            for (int d = 0; d < nd; d++) {
                                int64_t v = qq[d] * c->st[d] - c->pd[d] + jj[d] * c->dl[d];
                                if (v < 0 || v >= land[d]) inside = 0;
                                if (c->tr) src = src * c->in[d] + qq[d], dst = dst * c->out[d] + v;
                                else src = src * c->in[d] + v, dst = dst * c->out[d] + qq[d];
                            }
                            if (!inside) continue;
                            int64_t xi = (b * c->c + ch) * P + src, yi = (b * c->co + o) * NP + dst;
                            if (y) y[yi] += x[xi] * w[wi];
                            if (R) dx[xi] += R[yi] * w[wi], dw[wi] += R[yi] * x[xi];
                        }
                    }
}

/* The case's shapes: x, w, y (rank into *rank of each). */
static void shapes(const ccase *c, int64_t xs[5], int *xr, int64_t ws[5], int64_t ys[5], int *yr) {
    int r = 0;
    if (!c->unbatched) xs[r] = c->n, ys[r] = c->n, r++;
    xs[r] = c->c, ys[r] = c->co, r++;
    for (int d = 0; d < c->nd; d++) xs[r + d] = c->in[d], ys[r + d] = c->out[d];
    *xr = *yr = r + c->nd;
    ws[0] = c->tr ? c->c : c->co, ws[1] = c->tr ? c->co / c->groups : c->c / c->groups;
    for (int d = 0; d < c->nd; d++) ws[2 + d] = c->k[d];
}

static double *widen(const float *f, int64_t n) {
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

static void describe(const ccase *c, char *buf, size_t n) {
    snprintf(buf, n, "%dd%s%s n%lld c%lld co%lld g%lld in %lld k %lld st %lld pd %lld dl %lld op %lld%s", c->nd,
             c->tr ? " transposed" : "", c->unbatched ? " unbatched" : "", (long long)c->n, (long long)c->c, (long long)c->co,
             (long long)c->groups, (long long)c->in[0], (long long)c->k[0], (long long)c->st[0], (long long)c->pd[0],
             (long long)c->dl[0], (long long)c->op[0], c->has_bias ? "" : " no bias");
}

static wgml_tensor *conv_of(wgml_graph *g, const ccase *c, wgml_tensor *x, wgml_tensor *w, wgml_tensor *b) {
    return wgml_conv(g, x, w, b, c->nd, c->st, c->pd, c->dl, c->tr, c->tr ? c->op : NULL, c->groups);
}

/* One forward case in the eager graph. */
static void forward_case(const ccase *c) {
    char what[200];
    describe(c, what, sizeof what);
    int64_t xs[5], ws[5], ys[5], co = c->co;
    int xr, yr;
    shapes(c, xs, &xr, ws, ys, &yr);
    float *hx = th_random((size_t)nx(c), -1, 1), *hw = th_random((size_t)nw(c), -1, 1), *hb = th_random((size_t)co, -1, 1);
    double *dx = widen(hx, nx(c)), *dw = widen(hw, nw(c)), *db = widen(hb, co), *ref = malloc((size_t)ny(c) * sizeof *ref);
    reference(c, dx, dw, c->has_bias ? db : NULL, ref, NULL, NULL, NULL, NULL);
    wgml_tensor *x = th_tensor_f32(xr, xs, hx), *w = th_tensor_f32(c->nd + 2, ws, hw), *b = c->has_bias ? th_tensor_f32(1, &co, hb) : NULL;
    wgml_tensor *y = conv_of(T.g, c, x, w, b);
    if (th_check(y != NULL, "%s: runs (%s)", what, y ? "" : wgml_last_error(T.ctx))) {
        int same = wgml_tensor_rank(y) == yr;
        for (int i = 0; same && i < yr; i++) same = wgml_tensor_dim(y, i) == ys[i];
        th_check(same, "%s: output shape", what);
        float *got = th_read_f32(y);
        int64_t K = prod(c->k, c->nd) * (c->tr ? c->co / c->groups : c->c / c->groups);
        if (got) th_close(what, got, ref, (size_t)ny(c), 1e-6 * (double)K, 1e-5);
        free(got);
    }
    wgml_tensor_free(x), wgml_tensor_free(w), wgml_tensor_free(b), wgml_tensor_free(y);
    free(hx), free(hw), free(hb), free(dx), free(dw), free(db), free(ref);
}

/* The reference adjoint against central finite differences of the host forward (the forward
 * is linear in x and in w, so the differences are exact up to rounding). */
static void adjoint_self_check(const ccase *c) {
    int64_t n_x = nx(c), n_w = nw(c), n_y = ny(c);
    float *fx = th_random((size_t)n_x, -1, 1), *fw = th_random((size_t)n_w, -1, 1), *fr = th_random((size_t)n_y, -1, 1);
    double *x = widen(fx, n_x), *w = widen(fw, n_w), *R = widen(fr, n_y), *y = malloc((size_t)n_y * sizeof *y);
    double *gx = malloc((size_t)n_x * sizeof *gx), *gw = malloc((size_t)n_w * sizeof *gw), worst = 0;
    reference(c, x, w, NULL, NULL, R, gx, gw, NULL);
    for (int which = 0; which < 2; which++) {
        double *v = which ? w : x, *gv = which ? gw : gx;
        for (int64_t i = 0; i < (which ? n_w : n_x); i++) {
            double keep = v[i], l[2];
            for (int s = 0; s < 2; s++) {
                v[i] = keep + (s ? -1e-3 : 1e-3);
                reference(c, x, w, NULL, y, NULL, NULL, NULL, NULL);
                l[s] = 0;
                for (int64_t k = 0; k < n_y; k++) l[s] += y[k] * R[k];
            }
            v[i] = keep;
            worst = th_max_err(worst, fabs((l[0] - l[1]) / 2e-3 - gv[i]));
        }
    }
    th_check(worst < 1e-9, "the reference adjoint matches finite differences (worst %.2e)", worst);
    free(fx), free(fw), free(fr), free(x), free(w), free(R), free(y), free(gx), free(gw);
}

/* The gradient through autograd: a built graph compiled once, run twice with new inputs. */
static void gradient_case(const ccase *c) {
    char what[200], name[240];
    describe(c, what, sizeof what);
    int64_t xs[5], ws[5], ys[5], co = c->co, n_x = nx(c), n_w = nw(c), n_y = ny(c);
    int xr, yr;
    shapes(c, xs, &xr, ws, ys, &yr);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, xr, xs), *w = wgml_tensor_new(g, WGML_F32, c->nd + 2, ws);
    wgml_tensor *b = c->has_bias ? wgml_tensor_new(g, WGML_F32, 1, &co) : NULL, *R = wgml_tensor_new(g, WGML_F32, yr, ys);
    wgml_tensor_set_trainable(x, 1), wgml_tensor_set_trainable(w, 1);
    if (b) wgml_tensor_set_trainable(b, 1);
    wgml_tensor *y = conv_of(g, c, x, w, b);
    wgml_tensor *loss = y ? wgml_sum(g, wgml_mul(g, y, R), NULL, 0, 0) : NULL;
    int ok = loss && !wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g);
    if (!th_check(ok, "%s: gradient graph builds (%s)", what, ok ? "" : wgml_last_error(T.ctx))) goto done;
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)n_x, -1, 1), *hw = th_random((size_t)n_w, -1, 1), *hb = th_random((size_t)co, -1, 1);
        float *hr = th_random((size_t)n_y, -1, 1);
        double *dx = widen(hx, n_x), *dw = widen(hw, n_w), *dr = widen(hr, n_y);
        double *gx = malloc((size_t)n_x * sizeof *gx), *gw = malloc((size_t)n_w * sizeof *gw), *gb = malloc((size_t)co * sizeof *gb);
        reference(c, dx, dw, NULL, NULL, dr, gx, gw, gb);
        wgml_tensor_write(x, hx, (size_t)n_x * sizeof *hx), wgml_tensor_write(w, hw, (size_t)n_w * sizeof *hw);
        wgml_tensor_write(R, hr, (size_t)n_y * sizeof *hr);
        if (b) wgml_tensor_write(b, hb, (size_t)co * sizeof *hb);
        th_check(!wgml_graph_run(g), "%s: gradient run %d (%s)", what, run, wgml_last_error(T.ctx));
        wgml_tensor *grads[3] = {wgml_tensor_grad(x), wgml_tensor_grad(w), b ? wgml_tensor_grad(b) : NULL};
        const double *refs[3] = {gx, gw, gb};
        const int64_t counts[3] = {n_x, n_w, co};
        static const char *names[3] = {"dx", "dw", "db"};
        for (int i = 0; i < (b ? 3 : 2); i++) {
            snprintf(name, sizeof name, "%s: %s (run %d)", what, names[i], run);
            float *got = grads[i] ? th_read_f32(grads[i]) : NULL;
            /* a sum of up to a few hundred products of numbers in [-1, 1] */
            if (th_check(got != NULL, "%s: read", name)) th_close(name, got, refs[i], (size_t)counts[i], 1e-5, 1e-4);
            free(got);
        }
        free(hx), free(hw), free(hb), free(hr), free(dx), free(dw), free(dr), free(gx), free(gw), free(gb);
    }
done:
    wgml_graph_free(g);
}

static void bad_input(void) {
    int64_t xs[4] = {1, 4, 5, 5}, ws[4] = {6, 2, 3, 3}, bs = 6, xis[4] = {1, 4, 5, 5};
    float *h = th_random(200, -1, 1);
    int32_t hi[100] = {0};
    wgml_tensor *x = th_tensor_f32(4, xs, h), *w = th_tensor_f32(4, ws, h), *b = th_tensor_f32(1, &bs, h);
    wgml_tensor *xi = th_tensor_i32(4, xis, hi);
    int64_t st0[2] = {0, 1}, pdn[2] = {-1, 0}, dl0[2] = {1, 0}, op1[2] = {1, 0}, one[2] = {1, 1}, big[2] = {9, 9};
    th_expect_error("NULL x", wgml_conv(T.g, NULL, w, b, 2, NULL, NULL, NULL, 0, NULL, 2) == NULL, WGML_ERR_ARG, "conv", "x", NULL);
    th_expect_error("i32 x", wgml_conv(T.g, xi, w, b, 2, NULL, NULL, NULL, 0, NULL, 2) == NULL, WGML_ERR_DTYPE, "conv", "x", NULL);
    th_expect_error("4 spatial dims", wgml_conv(T.g, x, w, b, 4, NULL, NULL, NULL, 0, NULL, 2) == NULL, WGML_ERR_ARG, "conv",
                    "spatial dims", NULL);
    th_expect_error("x rank for nd 1", wgml_conv(T.g, x, w, b, 1, NULL, NULL, NULL, 0, NULL, 2) == NULL, WGML_ERR_SHAPE, "conv",
                    "x [1, 4, 5, 5]", NULL);
    th_expect_error("groups 0", wgml_conv(T.g, x, w, b, 2, NULL, NULL, NULL, 0, NULL, 0) == NULL, WGML_ERR_ARG, "conv", "groups", NULL);
    th_expect_error("groups 3", wgml_conv(T.g, x, w, b, 2, NULL, NULL, NULL, 0, NULL, 3) == NULL, WGML_ERR_SHAPE, "groups",
                    "does not divide", NULL);
    th_expect_error("w channels", wgml_conv(T.g, x, w, b, 2, NULL, NULL, NULL, 0, NULL, 1) == NULL, WGML_ERR_SHAPE, "conv",
                    "w [6, 2, 3, 3]", "x [1, 4, 5, 5]", NULL);
    th_expect_error("transposed w", wgml_conv(T.g, x, w, b, 2, NULL, NULL, NULL, 1, NULL, 2) == NULL, WGML_ERR_SHAPE, "Cin, Cout/groups",
                    NULL);
    int64_t b5 = 5;
    wgml_tensor *b_bad = th_tensor_f32(1, &b5, h);
    th_expect_error("bias shape", wgml_conv(T.g, x, w, b_bad, 2, NULL, NULL, NULL, 0, NULL, 2) == NULL, WGML_ERR_SHAPE, "bias [5]",
                    "[6]", NULL);
    th_expect_error("stride 0", wgml_conv(T.g, x, w, b, 2, st0, NULL, NULL, 0, NULL, 2) == NULL, WGML_ERR_ARG, "stride of spatial dim 0",
                    NULL);
    th_expect_error("padding -1", wgml_conv(T.g, x, w, b, 2, NULL, pdn, NULL, 0, NULL, 2) == NULL, WGML_ERR_ARG, "padding", NULL);
    th_expect_error("dilation 0", wgml_conv(T.g, x, w, b, 2, NULL, NULL, dl0, 0, NULL, 2) == NULL, WGML_ERR_ARG,
                    "dilation of spatial dim 1", NULL);
    th_expect_error("output_padding, plain", wgml_conv(T.g, x, w, b, 2, NULL, NULL, NULL, 0, op1, 2) == NULL, WGML_ERR_ARG,
                    "output_padding", "transposed", NULL);
    int64_t wts[4] = {4, 3, 3, 3};
    wgml_tensor *wt = th_tensor_f32(4, wts, h);
    th_expect_error("output_padding >= stride and dilation", wgml_conv(T.g, x, wt, b, 2, one, NULL, one, 1, op1, 2) == NULL,
                    WGML_ERR_ARG, "output_padding", "smaller than the stride", NULL);
    th_expect_error("kernel over the input", wgml_conv(T.g, x, w, b, 2, NULL, NULL, big, 0, NULL, 2) == NULL, WGML_ERR_SHAPE,
                    "output extent", NULL);
    int64_t hs[4] = {1, 64, 256, 256}, hws[4] = {64, 64, 5, 5};
    wgml_graph *g = wgml_graph_new(T.ctx); /* only shapes: nothing is run */
    wgml_tensor *hx = wgml_tensor_new(g, WGML_F32, 4, hs), *hw = wgml_tensor_new(g, WGML_F32, 4, hws);
    th_expect_error("too large for the gather", wgml_conv(g, hx, hw, NULL, 2, NULL, NULL, NULL, 0, NULL, 1) == NULL, WGML_ERR_LIMIT,
                    "conv", "gathered", NULL);
    wgml_graph_free(g);
    wgml_tensor_free(x), wgml_tensor_free(w), wgml_tensor_free(b), wgml_tensor_free(xi), wgml_tensor_free(b_bad), wgml_tensor_free(wt);
    free(h);
}

/* Fixed cases that name what each argument does, then random ones. */
static void run_forward(void) {
    ccase fixed[4] = {
        /* 2-D, stride 2, padding 1, dilation 2, two groups */
        {.nd = 2, .n = 2, .c = 4, .co = 6, .groups = 2, .has_bias = 1, .in = {7, 6}, .k = {3, 2}, .st = {2, 1}, .pd = {1, 1}, .dl = {2, 1}},
        /* 1-D depthwise, unbatched, no bias */
        {.nd = 1, .n = 1, .unbatched = 1, .c = 3, .co = 3, .groups = 3, .in = {11}, .k = {3}, .st = {1}, .pd = {2}, .dl = {1}},
        /* 3-D transposed, stride 2 with output_padding 1 */
        {.nd = 3, .tr = 1, .n = 1, .c = 2, .co = 3, .groups = 1, .has_bias = 1, .in = {3, 2, 3}, .k = {2, 3, 2}, .st = {2, 1, 2},
         .pd = {0, 1, 1}, .dl = {1, 1, 1}, .op = {1, 0, 1}},
        /* 2-D transposed, groups 2, dilation 2 */
        {.nd = 2, .tr = 1, .n = 2, .c = 4, .co = 2, .groups = 2, .has_bias = 1, .in = {4, 5}, .k = {2, 3}, .st = {1, 2}, .pd = {1, 0},
         .dl = {2, 1}, .op = {1, 1}},
    };
    for (int i = 0; i < 4; i++) {
        ccase *c = &fixed[i];
        for (int d = 0; d < c->nd; d++)
            c->out[d] = c->tr ? (c->in[d] - 1) * c->st[d] - 2 * c->pd[d] + c->dl[d] * (c->k[d] - 1) + c->op[d] + 1
                              : (c->in[d] + 2 * c->pd[d] - c->dl[d] * (c->k[d] - 1) - 1) / c->st[d] + 1;
        forward_case(c);
    }
    for (int rep = 0; rep < 2; rep++)
        for (int nd = 1; nd <= 3; nd++)
            for (int tr = 0; tr < 2; tr++) {
                ccase c = draw(nd, tr, 0);
                forward_case(&c);
            }
    for (int nd = 1; nd <= 2; nd++) {
        ccase c = draw(nd, 0, 1);
        forward_case(&c);
    }
}

static void run_gradient(void) {
    ccase c = draw(1, 1, 0);
    adjoint_self_check(&c);
    c = draw(2, 0, 0);
    adjoint_self_check(&c);
    for (int nd = 1; nd <= 3; nd++)
        for (int tr = 0; tr < 2; tr++) {
            ccase k = draw(nd, tr, 0);
            gradient_case(&k);
        }
    c = draw(2, 0, 1); /* depthwise: the product-and-sum form */
    gradient_case(&c);
}

int main(int argc, char **argv) {
    th_init_args("conv", argc, argv);
    static const th_part parts[] = {{"forward", run_forward}, {"gradient", run_gradient}, {"errors", bad_input}};
    return th_run_parts(parts, 3);
}
