#define _POSIX_C_SOURCE 199309L
/* rms_norm and layer_norm over the last dim against plain double-precision loops (with and
 * without weight / bias, scalar and vec4 rows, long rows, more than 65,535 rows), a built
 * graph rms_norm -> softmax -> sum run twice, and bad input. Run with --dump DIR, the cases are
 * also checked by tests/py/test_torch_norm.py against PyTorch in float64. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

/* fp32 rows of up to a few thousand elements: the sums of squares carry a few ulps of relative
 * error, so outputs of magnitude ~1-3 are good to ~1e-6; atol 1e-5 / rtol 1e-4 leaves a
 * margin without hiding a wrong formula (a wrong eps, a missing weight, an unbiased variance
 * all miss by far more). */
#define ATOL 1e-5
#define RTOL 1e-4

static void ref_rms(const float *x, const float *w, double *out, int64_t rows, int64_t d, double eps) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += (double)x[r * d + j] * x[r * d + j];
        double rs = 1.0 / sqrt(s / (double)d + eps);
        for (int64_t j = 0; j < d; j++) out[r * d + j] = x[r * d + j] * rs * (w ? w[j] : 1.0);
    }
}

static void ref_layer(const float *x, const float *w, const float *b, double *out, double *mean, double *rstd,
                      int64_t rows, int64_t d, double eps) {
    for (int64_t r = 0; r < rows; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < d; j++) m += x[r * d + j];
        m /= (double)d;
        for (int64_t j = 0; j < d; j++) v += (x[r * d + j] - m) * (x[r * d + j] - m);
        v /= (double)d;
        double rs = 1.0 / sqrt(v + eps);
        mean[r] = m;
        rstd[r] = rs;
        for (int64_t j = 0; j < d; j++) out[r * d + j] = (x[r * d + j] - m) * rs * (w ? w[j] : 1.0) + (b ? b[j] : 0.0);
    }
}

static int n_dumped;

static void shape_name(char *buf, size_t n, const char *op, int rank, const int64_t *shape) {
    int used = snprintf(buf, n, "%s [", op);
    for (int i = 0; i < rank; i++) used += snprintf(buf + used, n - (size_t)used, "%s%lld", i ? "," : "", (long long)shape[i]);
    snprintf(buf + used, n - (size_t)used, "]");
}

static void case_rms(int rank, const int64_t *shape, bool has_w, float eps, double lo, double hi) {
    int64_t d = shape[rank - 1], numel = 1;
    for (int i = 0; i < rank; i++) numel *= shape[i];
    int64_t rows = numel / d;
    float *hx = th_random((size_t)numel, lo, hi), *hw = th_random((size_t)d, -2, 2);
    wgml_tensor *x = th_tensor_f32(rank, shape, hx), *w = has_w ? th_tensor_f32(1, &d, hw) : NULL;
    double t0 = now();
    wgml_tensor *o = wgml_rms_norm(T.g, x, w, eps);
    float *got = th_read_f32(o);
    double dt = now() - t0;
    double *ref = malloc(sizeof(double) * (size_t)numel);
    ref_rms(hx, has_w ? hw : NULL, ref, rows, d, eps);
    char name[300], base[120];
    shape_name(base, sizeof base, "rms_norm", rank, shape);
    snprintf(name, sizeof name, "%s %s eps %g (%.0f ms)", base, has_w ? "w" : "no w", (double)eps, dt * 1e3);
    th_close(name, got, ref, (size_t)numel, ATOL, RTOL);
    if (th_dumping() && numel <= 200000) {
        char cn[32];
        snprintf(cn, sizeof cn, "rms%d", n_dumped++);
        float prm[3] = {eps, has_w, 0};
        int64_t three = 3;
        th_dump(cn, "x", WGML_F32, rank, shape, hx);
        if (has_w) th_dump(cn, "w", WGML_F32, 1, &d, hw);
        th_dump(cn, "params", WGML_F32, 1, &three, prm);
        th_dump_tensor(cn, "out", o);
    }
    free(hx); free(hw); free(got); free(ref);
    wgml_tensor_free(x); wgml_tensor_free(w); wgml_tensor_free(o);
}

static void case_layer(int rank, const int64_t *shape, bool has_w, bool has_b, float eps, double lo, double hi) {
    int64_t d = shape[rank - 1], numel = 1;
    for (int i = 0; i < rank; i++) numel *= shape[i];
    int64_t rows = numel / d;
    float *hx = th_random((size_t)numel, lo, hi), *hw = th_random((size_t)d, -2, 2), *hb = th_random((size_t)d, -1, 1);
    wgml_tensor *x = th_tensor_f32(rank, shape, hx);
    wgml_tensor *w = has_w ? th_tensor_f32(1, &d, hw) : NULL, *b = has_b ? th_tensor_f32(1, &d, hb) : NULL;
    wgml_tensor *mean = NULL, *rstd = NULL;
    double t0 = now();
    wgml_tensor *o = wgml_layer_norm(T.g, x, w, b, eps, &mean, &rstd);
    float *got = th_read_f32(o), *gm = th_read_f32(mean), *gr = th_read_f32(rstd);
    double dt = now() - t0;
    double *ref = malloc(sizeof(double) * (size_t)numel), *rm = malloc(sizeof(double) * (size_t)rows),
           *rr = malloc(sizeof(double) * (size_t)rows);
    ref_layer(hx, has_w ? hw : NULL, has_b ? hb : NULL, ref, rm, rr, rows, d, eps);
    char name[300], base[120];
    shape_name(base, sizeof base, "layer_norm", rank, shape);
    snprintf(name, sizeof name, "%s%s%s eps %g x in [%g,%g] (%.0f ms)", base, has_w ? " w" : "", has_b ? " b" : "",
             (double)eps, lo, hi, dt * 1e3);
    th_close(name, got, ref, (size_t)numel, ATOL, RTOL);
    /* mean and rstd shaped like x without its last dim ([1] for rank 1) */
    bool sok = mean && rstd && wgml_tensor_rank(mean) == (rank > 1 ? rank - 1 : 1) && wgml_tensor_numel(mean) == rows &&
               wgml_tensor_numel(rstd) == rows;
    for (int i = 0; sok && i + 1 < rank; i++) sok = wgml_tensor_dim(mean, i) == shape[i] && wgml_tensor_dim(rstd, i) == shape[i];
    th_check(sok, "%s: mean/rstd shapes", base);
    char mn[160];
    snprintf(mn, sizeof mn, "%s mean", base);
    th_close(mn, gm, rm, (size_t)rows, ATOL, RTOL);
    snprintf(mn, sizeof mn, "%s rstd", base);
    th_close(mn, gr, rr, (size_t)rows, ATOL, RTOL);
    if (th_dumping() && numel <= 200000) {
        char cn[32];
        snprintf(cn, sizeof cn, "layer%d", n_dumped++);
        float prm[3] = {eps, has_w, has_b};
        int64_t three = 3;
        th_dump(cn, "x", WGML_F32, rank, shape, hx);
        if (has_w) th_dump(cn, "w", WGML_F32, 1, &d, hw);
        if (has_b) th_dump(cn, "b", WGML_F32, 1, &d, hb);
        th_dump(cn, "params", WGML_F32, 1, &three, prm);
        th_dump_tensor(cn, "out", o);
        th_dump_tensor(cn, "mean", mean);
        th_dump_tensor(cn, "rstd", rstd);
    }
    free(hx); free(hw); free(hb); free(got); free(gm); free(gr); free(ref); free(rm); free(rr);
    wgml_tensor_free(x); wgml_tensor_free(w); wgml_tensor_free(b); wgml_tensor_free(o);
    wgml_tensor_free(mean); wgml_tensor_free(rstd);
}

static void test_rms(void) {
    const int64_t a[2] = {7, 37}, b[2] = {37, 129}, c[3] = {5, 3, 132}, l[2] = {3, 4096}, one[1] = {129};
    case_rms(2, a, true, 1e-5f, -1, 1);
    case_rms(2, a, false, 1e-6f, -3, 3);
    case_rms(2, b, true, 1e-5f, -1, 1);
    case_rms(3, c, true, 1e-6f, -2, 2); /* vec4 rows */
    case_rms(3, c, false, 1e-5f, -2, 2);
    case_rms(2, l, true, 1e-5f, -1, 1);
    case_rms(1, one, true, 0.5f, -0.1, 0.1); /* eps that dominates */
    const int64_t many[2] = {70000, 7};      /* more than 65,535 workgroups */
    case_rms(2, many, true, 1e-5f, -1, 1);
}

static void test_layer(void) {
    const int64_t a[2] = {7, 37}, b[2] = {37, 129}, c[3] = {4, 3, 132}, l[2] = {3, 4096}, one[1] = {129};
    case_layer(2, a, true, true, 1e-5f, -1, 1);
    case_layer(2, a, false, false, 1e-5f, -1, 1);
    case_layer(2, b, true, false, 1e-5f, 9, 11); /* mean large against the spread */
    case_layer(3, c, false, true, 1e-6f, -2, 2); /* vec4 rows */
    case_layer(3, c, true, true, 1e-5f, 99, 101);
    case_layer(2, l, true, true, 1e-5f, -1, 3);
    case_layer(1, one, true, true, 1e-5f, -1, 1);
    const int64_t many[2] = {70000, 8};
    case_layer(2, many, true, true, 1e-5f, -1, 1);
    /* mean / rstd not taken */
    int64_t s[2] = {3, 37};
    float *hx = th_random(3 * 37, -1, 1);
    wgml_tensor *x = th_tensor_f32(2, s, hx);
    double *ref = malloc(sizeof(double) * 3 * 37), rm[3], rr[3];
    ref_layer(hx, NULL, NULL, ref, rm, rr, 3, 37, 1e-5);
    float *got = th_read_f32(wgml_layer_norm(T.g, x, NULL, NULL, 1e-5f, NULL, NULL));
    th_close("layer_norm without mean/rstd outputs", got, ref, 3 * 37, ATOL, RTOL);
    free(hx); free(ref); free(got);
    wgml_tensor_free(x);
}

/* A built graph: rms_norm -> softmax -> sum over the last dim, and layer_norm with its
 * statistics kept; compiled once, run twice with new inputs. */
static void test_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t rows = 37, d = 132, shape[2] = {37, 132};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, shape), *w = wgml_tensor_new(g, WGML_F32, 1, &d);
    wgml_tensor *n1 = wgml_rms_norm(g, x, w, 1e-5f);
    wgml_tensor *sm = wgml_softmax(g, n1, -1);
    int dl = -1;
    wgml_tensor *s = wgml_sum(g, sm, &dl, 1, 0);
    wgml_tensor *mean = NULL, *rstd = NULL;
    wgml_tensor *ln = wgml_layer_norm(g, n1, w, NULL, 1e-5f, &mean, &rstd);
    th_check(s && ln && !wgml_graph_keep(g, sm) && !wgml_graph_keep(g, s) && !wgml_graph_keep(g, ln) &&
                 !wgml_graph_keep(g, mean) && !wgml_graph_keep(g, rstd) && !wgml_graph_compile(g),
             "norm graph builds and compiles: %s", wgml_last_error(T.ctx));
    float *hw = th_random((size_t)d, -2, 2);
    wgml_tensor_write(w, hw, sizeof(float) * (size_t)d);
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(rows * d), -1, 1);
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)(rows * d));
        th_check(!wgml_graph_run(g), "norm graph run: %s", wgml_last_error(T.ctx));
        double *r1 = malloc(sizeof(double) * (size_t)(rows * d)), *rsm = malloc(sizeof(double) * (size_t)(rows * d));
        double *rln = malloc(sizeof(double) * (size_t)(rows * d)), rs[37], rm[37], rr[37];
        float *f1 = malloc(sizeof(float) * (size_t)(rows * d));
        ref_rms(hx, hw, r1, rows, d, 1e-5);
        for (int64_t r = 0; r < rows; r++) {
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j < d; j++) m = fmax(m, r1[r * d + j]);
            for (int64_t j = 0; j < d; j++) z += exp(r1[r * d + j] - m);
            rs[r] = 0;
            for (int64_t j = 0; j < d; j++) rs[r] += rsm[r * d + j] = exp(r1[r * d + j] - m) / z;
        }
        for (int64_t i = 0; i < rows * d; i++) f1[i] = (float)r1[i];
        ref_layer(f1, hw, NULL, rln, rm, rr, rows, d, 1e-5);
        float *gsm = malloc(sizeof(float) * (size_t)(rows * d)), *gln = malloc(sizeof(float) * (size_t)(rows * d));
        float gs[37], gm[37], gr[37];
        th_check(!wgml_tensor_read(sm, gsm, sizeof(float) * (size_t)(rows * d)) && !wgml_tensor_read(s, gs, sizeof gs) &&
                     !wgml_tensor_read(ln, gln, sizeof(float) * (size_t)(rows * d)) &&
                     !wgml_tensor_read(mean, gm, sizeof gm) && !wgml_tensor_read(rstd, gr, sizeof gr),
                 "read norm graph outputs: %s", wgml_last_error(T.ctx));
        char nm[64];
        snprintf(nm, sizeof nm, "graph run %d: softmax(rms_norm)", run + 1);
        th_close(nm, gsm, rsm, (size_t)(rows * d), ATOL, RTOL);
        snprintf(nm, sizeof nm, "graph run %d: sum(softmax(rms_norm))", run + 1);
        th_close(nm, gs, rs, 37, ATOL, RTOL);
        /* layer_norm of rms_norm's output: the rms_norm rounding (relative 1e-7) is amplified
         * by rstd * |w| (up to ~3), still far below the tolerance */
        snprintf(nm, sizeof nm, "graph run %d: layer_norm(rms_norm)", run + 1);
        th_close(nm, gln, rln, (size_t)(rows * d), 5 * ATOL, RTOL);
        snprintf(nm, sizeof nm, "graph run %d: layer_norm mean", run + 1);
        th_close(nm, gm, rm, 37, ATOL, RTOL);
        snprintf(nm, sizeof nm, "graph run %d: layer_norm rstd", run + 1);
        th_close(nm, gr, rr, 37, ATOL, RTOL);
        free(hx); free(r1); free(rsm); free(rln); free(f1); free(gsm); free(gln);
    }
    free(hw);
    wgml_graph_free(g);
}

static void test_bad_input(void) {
    int64_t s[2] = {3, 8}, s7 = 7, s8 = 8;
    float z[24] = {0};
    int32_t zi[24] = {0};
    wgml_tensor *x = th_tensor_f32(2, s, z), *xi = th_tensor_i32(2, s, zi);
    wgml_tensor *w7 = th_tensor_f32(1, &s7, z), *w8i = th_tensor_i32(1, &s8, zi), *w8 = th_tensor_f32(1, &s8, z);
    th_expect_error("rms_norm NULL x", wgml_rms_norm(T.g, NULL, w8, 1e-5f) == NULL, WGML_ERR_ARG, "rms_norm",
                    "x is NULL", NULL);
    th_expect_error("rms_norm i32 x", wgml_rms_norm(T.g, xi, w8, 1e-5f) == NULL, WGML_ERR_DTYPE, "rms_norm",
                    "x must be f32", NULL);
    th_expect_error("rms_norm w shape", wgml_rms_norm(T.g, x, w7, 1e-5f) == NULL, WGML_ERR_SHAPE, "rms_norm", "w [7]",
                    "[8]", "[3, 8]", NULL);
    th_expect_error("rms_norm w i32", wgml_rms_norm(T.g, x, w8i, 1e-5f) == NULL, WGML_ERR_DTYPE, "rms_norm", "w", NULL);
    th_expect_error("rms_norm negative eps", wgml_rms_norm(T.g, x, w8, -1.0f) == NULL, WGML_ERR_ARG, "rms_norm", "eps",
                    NULL);
    wgml_tensor *m = w8, *r = w8;
    th_expect_error("layer_norm b shape", wgml_layer_norm(T.g, x, w8, w7, 1e-5f, &m, &r) == NULL, WGML_ERR_SHAPE,
                    "layer_norm", "b [7]", NULL);
    th_check(m == NULL && r == NULL, "layer_norm sets mean/rstd to NULL on error");
    th_expect_error("layer_norm w shape", wgml_layer_norm(T.g, x, w7, NULL, 1e-5f, NULL, NULL) == NULL, WGML_ERR_SHAPE,
                    "layer_norm", "w [7]", NULL);
    th_expect_error("layer_norm NULL x", wgml_layer_norm(T.g, NULL, NULL, NULL, 1e-5f, NULL, NULL) == NULL,
                    WGML_ERR_ARG, "layer_norm", "x is NULL", NULL);
    th_expect_error("layer_norm NaN eps", wgml_layer_norm(T.g, x, NULL, NULL, NAN, NULL, NULL) == NULL, WGML_ERR_ARG,
                    "layer_norm", "eps", NULL);
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    wgml_tensor *wo = wgml_tensor_new(g2, WGML_F32, 1, &s8);
    th_expect_error("rms_norm w of another graph", wgml_rms_norm(T.g, x, wo, 1e-5f) == NULL, WGML_ERR_ARG, "rms_norm",
                    "different graphs", NULL);
    wgml_graph_free(g2);
    wgml_tensor_free(x); wgml_tensor_free(xi); wgml_tensor_free(w7); wgml_tensor_free(w8i); wgml_tensor_free(w8);
}

int main(int argc, char **argv) {
    th_init_args("test_norm", argc, argv);
    double t0 = now();
    test_rms();
    test_layer();
    printf("eager cases: %.1f s\n", now() - t0);
    test_graph();
    test_bad_input();
    return th_done();
}
