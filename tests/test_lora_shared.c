#define _POSIX_C_SOURCE 200809L
/* Adapters sharing an input (lora_apply_shared, src/ops/lora/lora.c: the trainer's q/k/v and
 * gate/up), in a built graph against an fp64 reference written here: the outputs
 * y_i = base_i + s_i·(x·A_iᵀ)·B_iᵀ and, for the loss Σ_i <R_i, y_i>, every gradient:
 * dbase_i = R_i, dB_i = s_i·R_iᵀ·(x·A_iᵀ), dA_i = s_i·(R_i·B_i)ᵀ·x, dx = Σ_i s_i·R_i·B_i·A_i.
 * Fresh random inputs on each of two runs of one compiled graph, NaN-poisoned outputs. Cases: the
 * shared product (fewer dispatches than the adapters one by one), an output that carries no
 * gradient (its block of dHᵀ must be zero, whichever adapter it is), gradients into caller
 * tensors, the fallback where the blocks of Hᵀ cannot be bound apart, and bad arguments. */
#include "harness.h"

#include "ops/lora/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NMAX = LORA_GROUP_MAX };

typedef struct lcase {
    const char *name;
    int n;
    int64_t m, k, r, nn[NMAX];
    int unused;     /* index of the output left out of the loss, or -1 */
    bool sinks;     /* a_cat's and B_0's gradients into caller tensors */
    bool separate;  /* build the same with wgml_lora_apply one by one (for the dispatch count) */
} lcase;

typedef struct host {
    double *x, *a, *b[NMAX], *base[NMAX], *r[NMAX];
} host;

static double *widen(const float *f, int64_t n) {
    double *d = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

/* The reference: y, and the gradients of Σ_i <R_i, y_i> (R_i = 0 for the unused output). */
static void reference(const lcase *c, const host *h, const float *scale, double **y, double *dx, double *da,
                      double **db) {
    int64_t m = c->m, k = c->k, r = c->r;
    memset(dx, 0, sizeof(double) * (size_t)(m * k));
    for (int i = 0; i < c->n; i++) {
        int64_t nn = c->nn[i];
        const double *a = h->a + i * r * k, *b = h->b[i], *R = h->r[i];
        double *hh = calloc((size_t)(m * r), sizeof(double)), *dh = calloc((size_t)(m * r), sizeof(double));
        for (int64_t t = 0; t < m; t++)
            for (int64_t j = 0; j < r; j++)
                for (int64_t q = 0; q < k; q++) hh[t * r + j] += h->x[t * k + q] * a[j * k + q];
        for (int64_t t = 0; t < m; t++)
            for (int64_t o = 0; o < nn; o++) {
                double s = 0;
                for (int64_t j = 0; j < r; j++) s += hh[t * r + j] * b[o * r + j];
                y[i][t * nn + o] = h->base[i][t * nn + o] + scale[i] * s;
            }
        for (int64_t o = 0; o < nn; o++)
            for (int64_t j = 0; j < r; j++) {
                double s = 0;
                for (int64_t t = 0; t < m; t++) s += R[t * nn + o] * hh[t * r + j];
                db[i][o * r + j] = scale[i] * s;
            }
        for (int64_t t = 0; t < m; t++)
            for (int64_t j = 0; j < r; j++) {
                double s = 0;
                for (int64_t o = 0; o < nn; o++) s += R[t * nn + o] * b[o * r + j];
                dh[t * r + j] = scale[i] * s;
            }
        for (int64_t j = 0; j < r; j++)
            for (int64_t q = 0; q < k; q++) {
                double s = 0;
                for (int64_t t = 0; t < m; t++) s += dh[t * r + j] * h->x[t * k + q];
                da[(i * r + j) * k + q] = s;
            }
        for (int64_t t = 0; t < m; t++)
            for (int64_t q = 0; q < k; q++) {
                double s = 0;
                for (int64_t j = 0; j < r; j++) s += dh[t * r + j] * a[j * k + q];
                dx[t * k + q] += s;
            }
        free(hh);
        free(dh);
    }
}

/* The graph: x, a_cat, base_i, B_i trainable leaves; the loss Σ_i sum(y_i * R_i). */
typedef struct built {
    wgml_graph *g;
    wgml_tensor *x, *a, *b[NMAX], *base[NMAX], *r[NMAX], *y[NMAX], *a_dest, *b0_dest;
} built;

static bool build(const lcase *c, const float *scale, built *bt, bool separate) {
    wgml_graph *g = bt->g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {c->m, c->k}, as[2] = {c->n * c->r, c->k};
    bt->x = wgml_tensor_new(g, WGML_F32, 2, xs);
    bt->a = wgml_tensor_new(g, WGML_F32, 2, as);
    wgml_tensor_set_trainable(bt->x, 1);
    wgml_tensor_set_trainable(bt->a, 1);
    if (c->sinks) {
        bt->a_dest = wgml_tensor_new(g, WGML_F32, 2, as);
        wgml_tensor_set_grad(bt->a, bt->a_dest, 0);
    }
    wgml_lora l[NMAX];
    const wgml_lora *lp[NMAX];
    for (int i = 0; i < c->n; i++) {
        int64_t ys[2] = {c->m, c->nn[i]}, bs[2] = {c->nn[i], c->r};
        bt->base[i] = wgml_tensor_new(g, WGML_F32, 2, ys);
        bt->r[i] = wgml_tensor_new(g, WGML_F32, 2, ys);
        bt->b[i] = wgml_tensor_new(g, WGML_F32, 2, bs);
        wgml_tensor_set_trainable(bt->base[i], 1);
        wgml_tensor_set_trainable(bt->b[i], 1);
        if (c->sinks && i == 0) {
            bt->b0_dest = wgml_tensor_new(g, WGML_F32, 2, bs);
            wgml_tensor_set_grad(bt->b[0], bt->b0_dest, 0);
        }
        l[i] = (wgml_lora){.a = NULL, .b = bt->b[i], .n = c->nn[i], .k = c->k, .r = c->r, .scale = scale[i]};
        lp[i] = &l[i];
    }
    if (separate) {
        for (int i = 0; i < c->n; i++) {
            int64_t s[2] = {c->r, c->k};
            l[i].a = wgml_tensor_view(bt->a, i * c->r * c->k, 2, s);
            bt->y[i] = wgml_lora_apply(g, bt->x, bt->base[i], &l[i]);
        }
    } else if (!th_check(!lora_apply_shared(g, bt->x, bt->a, c->n, bt->base, lp, bt->y), "%s: lora_apply_shared: %s",
                         c->name, wgml_last_error(T.ctx))) {
        return false;
    }
    wgml_tensor *loss = NULL;
    for (int i = 0; i < c->n; i++) {
        if (i == c->unused) continue;
        wgml_tensor *li = wgml_sum(g, wgml_mul(g, bt->y[i], bt->r[i]), NULL, 0, 0);
        loss = loss ? wgml_add(g, loss, li, 1.0f) : li;
    }
    for (int i = 0; i < c->n; i++) wgml_graph_keep(g, bt->y[i]);
    return th_check(loss && !wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g), "%s: build: %s", c->name,
                    wgml_last_error(T.ctx));
}

static void check(const char *what, const lcase *c, int run, wgml_tensor *t, const double *ref, int64_t n) {
    char name[128];
    snprintf(name, sizeof name, "%s run %d: %s", c->name, run, what);
    float *got = t ? th_read_f32(t) : NULL;
    double amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs(ref[i]));
    if (th_check(got != NULL, "%s: read: %s", name, wgml_last_error(T.ctx))) th_close(name, got, ref, (size_t)n, 1e-5 * (1 + amax), 1e-5);
    free(got);
}

static void run_case(const lcase *c) {
    float scale[NMAX] = {2.0f, 0.5f, 1.25f};
    built bt = {0};
    if (!build(c, scale, &bt, false)) goto done;
    int64_t m = c->m, k = c->k, r = c->r, an = c->n * r * k;
    for (int run = 0; run < 2; run++) {
        host h = {0};
        float *xf = th_random((size_t)(m * k), -1, 1), *af = th_random((size_t)an, -0.5, 0.5);
        wgml_tensor_write(bt.x, xf, sizeof(float) * (size_t)(m * k));
        wgml_tensor_write(bt.a, af, sizeof(float) * (size_t)an);
        h.x = widen(xf, m * k);
        h.a = widen(af, an);
        double *y[NMAX], *db[NMAX], *dx = malloc(sizeof(double) * (size_t)(m * k)), *da = malloc(sizeof(double) * (size_t)an);
        for (int i = 0; i < c->n; i++) {
            int64_t yn = m * c->nn[i], bn = c->nn[i] * r;
            float *bf = th_random((size_t)bn, -0.5, 0.5), *basef = th_random((size_t)yn, -1, 1), *rf = th_random((size_t)yn, -1, 1);
            wgml_tensor_write(bt.b[i], bf, sizeof(float) * (size_t)bn);
            wgml_tensor_write(bt.base[i], basef, sizeof(float) * (size_t)yn);
            wgml_tensor_write(bt.r[i], rf, sizeof(float) * (size_t)yn);
            h.b[i] = widen(bf, bn);
            h.base[i] = widen(basef, yn);
            h.r[i] = widen(rf, yn);
            if (i == c->unused) memset(h.r[i], 0, sizeof(double) * (size_t)yn);
            y[i] = malloc(sizeof(double) * (size_t)yn);
            db[i] = malloc(sizeof(double) * (size_t)bn);
            free(bf), free(basef), free(rf);
        }
        free(xf), free(af);
        reference(c, &h, scale, y, dx, da, db);
        if (th_check(!wgml_graph_run(bt.g), "%s: run: %s", c->name, wgml_last_error(T.ctx))) {
            check("dx", c, run, wgml_tensor_grad(bt.x), dx, m * k);
            check("da_cat", c, run, c->sinks ? bt.a_dest : wgml_tensor_grad(bt.a), da, an);
            for (int i = 0; i < c->n; i++) {
                char w[32];
                snprintf(w, sizeof w, "y%d", i);
                check(w, c, run, bt.y[i], y[i], m * c->nn[i]);
                snprintf(w, sizeof w, "dbase%d", i);
                check(w, c, run, wgml_tensor_grad(bt.base[i]), h.r[i], m * c->nn[i]);
                snprintf(w, sizeof w, "dB%d", i);
                check(w, c, run, c->sinks && i == 0 ? bt.b0_dest : wgml_tensor_grad(bt.b[i]), db[i], c->nn[i] * r);
            }
        }
        for (int i = 0; i < c->n; i++) free(h.b[i]), free(h.base[i]), free(h.r[i]), free(y[i]), free(db[i]);
        free(h.x), free(h.a), free(dx), free(da);
    }
    if (c->separate) { /* the same adapters one by one take more dispatches */
        built sep = {0};
        if (build(c, scale, &sep, true))
            th_check(wgml_graph_dispatch_count(bt.g) < wgml_graph_dispatch_count(sep.g),
                     "%s: %zu dispatches shared, %zu one by one", c->name, wgml_graph_dispatch_count(bt.g),
                     wgml_graph_dispatch_count(sep.g));
        wgml_graph_free(sep.g);
    }
done:
    wgml_graph_free(bt.g);
}

static void test_errors(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {16, 8}, as[2] = {8, 8}, ys[2] = {16, 4}, bs[2] = {4, 4};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *a = wgml_tensor_new(g, WGML_F32, 2, as);
    wgml_tensor *base[2] = {wgml_tensor_new(g, WGML_F32, 2, ys), wgml_tensor_new(g, WGML_F32, 2, ys)}, *out[2];
    wgml_lora l = {.b = wgml_tensor_new(g, WGML_F32, 2, bs), .n = 4, .k = 8, .r = 4, .scale = 1.0f};
    const wgml_lora *lp[2] = {&l, &l};
    th_expect_error("shared: n 0", lora_apply_shared(g, x, a, 0, base, lp, out) != WGML_OK, WGML_ERR_ARG, "n 0", NULL);
    th_expect_error("shared: a_cat rows", lora_apply_shared(g, x, a, 1, base, lp, out) != WGML_OK, WGML_ERR_SHAPE,
                    "a_cat [8, 8] must be [4, 8]", NULL);
    wgml_lora wide = l;
    wide.n = 5;
    const wgml_lora *lw[2] = {&l, &wide};
    th_expect_error("shared: base width", lora_apply_shared(g, x, a, 2, base, lw, out) != WGML_OK, WGML_ERR_SHAPE,
                    "adapter 1", NULL);
    const wgml_lora *ln[2] = {&l, NULL};
    th_expect_error("shared: NULL adapter", lora_apply_shared(g, x, a, 2, base, ln, out) != WGML_OK, WGML_ERR_ARG,
                    "adapter 1 is NULL", NULL);
    wgml_graph_free(g);
}

int main(int argc, char **argv) {
    th_init_args("test_lora_shared", argc, argv);
    static const lcase cases[] = {
        {"qkv", 3, 32, 64, 4, {64, 16, 16}, -1, false, true},
        {"gate_up", 2, 64, 48, 8, {96, 96}, -1, false, true},
        {"last_unused", 3, 32, 64, 4, {40, 16, 24}, 2, false, false},
        {"middle_unused", 3, 32, 64, 4, {40, 16, 24}, 1, false, false},
        {"first_unused", 2, 16, 32, 4, {8, 12}, 0, true, false},
        {"sinks", 3, 32, 64, 4, {64, 16, 16}, -1, true, false},
        {"unaligned", 3, 5, 12, 3, {7, 4, 4}, -1, false, false},
        {"one", 1, 16, 32, 4, {8}, -1, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    test_errors();
    return th_done();
}
