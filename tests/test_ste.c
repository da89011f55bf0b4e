#define _POSIX_C_SOURCE 200809L
/* The straight-through 4-bit linear (src/ops/qweight/qw_ste.c) in a built graph: the forward
 * y = x·Wqᵀ (+ bias) from the 4-bit codes, and through wgml_backward of L = Σ y∘r the input
 * gradient dx = r·Wq and the latent's gradient r ᵀ·x, each against fp64 (OpenBLAS dgemm on the
 * host dequantisation); outputs NaN-poisoned by the harness. Also: x alone trainable (the
 * latent gets nothing), x's requires_grad left as it was, and bad latents. */
#include "harness.h"

#include "ops/qweight/qw_ste.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qw_host.h"

/* ref[n, k] = r[m, :]ᵀ · x[m, :] summed over m */
static double *ref_dlatent(const float *r, const float *x, int64_t m, int64_t n, int64_t k) {
    double *dr = to_double(r, (size_t)(m * n)), *dx = to_double(x, (size_t)(m * k));
    double *ref = malloc(sizeof(double) * (size_t)(n * k));
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)k, (int)m, 1.0, dr, (int)n, dx, (int)k, 0.0, ref,
                (int)k);
    free(dr);
    free(dx);
    return ref;
}

/* train_latent: the latent is trainable (else only x is). */
static void case_ste(int kind, int64_t m, int64_t n, int64_t k, int group, bool bias, bool train_latent) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    hw h = make_weight(g, kind, n, k, group, bias);
    char name[160];
    snprintf(name, sizeof name, "%s M=%lld N=%lld K=%lld G=%d%s%s", KIND_NAMES[kind], (long long)m, (long long)n,
             (long long)k, group, bias ? " bias" : "", train_latent ? "" : " (x only)");
    float *hx = th_random((size_t)(m * k), -1, 1), *hr = th_random((size_t)(m * n), -1, 1);
    float *hl = th_random((size_t)(n * k), -1, 1); /* the forward must not read it */
    int64_t xs[2] = {m, k}, rs[2] = {m, n}, ls[2] = {n, k};
    wgml_tensor *x = h.w ? wgml_tensor_new(g, WGML_F32, 2, xs) : NULL;
    wgml_tensor *r = x ? wgml_tensor_new(g, WGML_F32, 2, rs) : NULL;
    wgml_tensor *lat = r ? wgml_tensor_new(g, WGML_F32, 2, ls) : NULL;
    bool ok = lat && !wgml_tensor_write(x, hx, sizeof(float) * (size_t)(m * k)) &&
              !wgml_tensor_write(r, hr, sizeof(float) * (size_t)(m * n)) &&
              !wgml_tensor_write(lat, hl, sizeof(float) * (size_t)(n * k)) && !wgml_tensor_set_trainable(x, 1) &&
              (!train_latent || !wgml_tensor_set_trainable(lat, 1));
    wgml_tensor *y = ok ? qw_ste_linear(g, x, h.w, lat) : NULL;
    th_check(y && wgml_tensor_rank(y) == 2 && wgml_tensor_dim(y, 0) == m && wgml_tensor_dim(y, 1) == n,
             "%s: output shape (%s)", name, wgml_last_error(T.ctx));
    wgml_tensor *loss = y ? wgml_sum(g, wgml_mul(g, y, r), NULL, 0, 0) : NULL;
    ok = loss && !wgml_graph_keep(g, y) && !wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g) &&
         !wgml_graph_run(g);
    if (th_check(ok, "%s: build and run: %s", name, wgml_last_error(T.ctx))) {
        char what[200];
        double *ry = ref_forward(hx, &h, m, n, k), *rdx = ref_dx(hr, &h, m, n, k);
        float *gy = th_read_f32(y), *gdx = th_read_f32(wgml_tensor_grad(x));
        snprintf(what, sizeof what, "ste forward %s", name);
        if (gy) th_close(what, gy, ry, (size_t)(m * n), tol_abs(k), RTOL);
        snprintf(what, sizeof what, "ste dx %s", name);
        if (gdx) th_close(what, gdx, rdx, (size_t)(m * k), tol_abs(n), RTOL);
        if (train_latent) {
            double *rdl = ref_dlatent(hr, hx, m, n, k);
            float *gdl = th_read_f32(wgml_tensor_grad(lat));
            snprintf(what, sizeof what, "ste dlatent %s", name);
            if (gdl) th_close(what, gdl, rdl, (size_t)(n * k), tol_abs(m), RTOL);
            free(gdl);
            free(rdl);
        } else {
            th_check(wgml_tensor_grad(lat) == NULL, "%s: a frozen latent gets no gradient", name);
        }
        free(gy);
        free(gdx);
        free(ry);
        free(rdx);
    }
    /* the op leaves x's autograd flag alone (the old form toggled it around the product) */
    th_check(!x || x->requires_grad, "%s: x still requires its gradient", name);
    free(hx);
    free(hr);
    free(hl);
    free_weight(&h);
    wgml_graph_free(g);
}

static void test_bad_input(void) {
    wgml_graph *g = wgml_graph_new(T.ctx), *g2 = wgml_graph_new(T.ctx);
    hw h = make_weight(g, 0, 8, 64, 32, false);
    int64_t xs[2] = {2, 64}, bad[2] = {8, 32}, good[2] = {8, 64};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_tensor *lb = wgml_tensor_new(g, WGML_F32, 2, bad), *lo = wgml_tensor_new(g2, WGML_F32, 2, good);
    wgml_tensor *li = wgml_tensor_new(g, WGML_I32, 2, good);
    th_expect_error("ste: latent of the wrong shape", !qw_ste_linear(g, x, h.w, lb), WGML_ERR_SHAPE, "qw_ste_linear",
                    "[8, 32]", "[8, 64]", NULL);
    th_expect_error("ste: latent of another graph", !qw_ste_linear(g, x, h.w, lo), WGML_ERR_ARG, "qw_ste_linear",
                    "another graph", NULL);
    th_expect_error("ste: i32 latent", !qw_ste_linear(g, x, h.w, li), WGML_ERR_DTYPE, "qw_ste_linear", NULL);
    th_expect_error("ste: NULL weight", !qw_ste_linear(g, x, NULL, lb), WGML_ERR_ARG, "qw_ste_linear", NULL);
    th_expect_error("ste: x of the wrong width", !qw_ste_linear(g, lb, h.w, wgml_tensor_new(g, WGML_F32, 2, good)),
                    WGML_ERR_SHAPE, "qw_ste_linear", NULL);
    free_weight(&h);
    wgml_graph_free(g2);
    wgml_graph_free(g);
}

int main(int argc, char **argv) {
    th_init_args("ste", argc, argv);
    /* GEMV (M <= 4) and tiled GEMM products, both 4-bit kinds, a bias, partial tiles */
    case_ste(0, 3, 40, 96, 32, true, true);
    case_ste(1, 4, 33, 64, 32, false, true);
    case_ste(0, 37, 70, 160, 64, false, true);
    case_ste(1, 70, 48, 128, 32, false, true);
    case_ste(0, 19, 24, 64, 32, false, false);
    test_bad_input();
    return th_done();
}
