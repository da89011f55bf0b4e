#define _POSIX_C_SOURCE 200809L
/* An adapter folded into its 4-bit base's product (wgml_lora_qlinear with WGML_LORA_FOLD=1,
 * src/ops/lora/lora.c; the kernel's LORA steps in qw_mm.wgsl), in a built graph against an fp64
 * reference written here, with the host's dequantisation of the weight: for the loss <R, y>,
 *   y = x·Wᵀ (+ bias) + s·H·Bᵀ, H = x·Aᵀ;  dB = s·Rᵀ·H;  dH = s·R·B;  dA = dHᵀ·x;  dx = R·W + dH·A.
 * Fresh random inputs on each of two runs of one compiled graph, NaN-poisoned outputs (the
 * harness's context). Cases: the GPU tiles that fold the term (BR 32 and 16, a rank over one
 * step and not a multiple of it, split-K, a bias, 4-, 8-bit, K-quant and f16 weights, x of rank 3),
 * the forms that add it as a product of its own (the CPU kernel, the double-buffered tiles, the
 * GEMV of few rows), fewer dispatches than the unfolded composition, the eager graph (no memory
 * kept per call, folded or not), a shared-input group folded (lora_qlinear_shared, x's gradient
 * summed in place and by the engine), and bad arguments. */
#include "qw_host.h"

#include "ops/lora/lora.h"

typedef struct fcase {
    const char *name, *variant; /* $WGML_QW_MM_VARIANT, NULL: automatic */
    int kind, group;
    int64_t m, n, k, r;
    bool bias, rank3, fewer; /* fewer: the folded graph must take fewer dispatches */
    const char *splitk;      /* $WGML_QW_MM_SPLITK, or NULL */
} fcase;

typedef struct built {
    wgml_graph *g;
    hw w;
    wgml_lora l;
    wgml_tensor *x, *rr, *y;
} built;

static bool build(const fcase *c, bool fold, built *b) {
    th_setenv("WGML_LORA_FOLD", fold ? "1" : "0", 1);
    wgml_graph *g = b->g = wgml_graph_new(T.ctx);
    b->w = make_weight(g, c->kind, c->n, c->k, c->group, c->bias);
    int64_t xs3[3] = {2, c->m / 2, c->k}, xs[2] = {c->m, c->k}, ys3[3] = {2, c->m / 2, c->n}, ys[2] = {c->m, c->n};
    int64_t as[2] = {c->r, c->k}, bs[2] = {c->n, c->r};
    b->x = c->rank3 ? wgml_tensor_new(g, WGML_F32, 3, xs3) : wgml_tensor_new(g, WGML_F32, 2, xs);
    b->rr = c->rank3 ? wgml_tensor_new(g, WGML_F32, 3, ys3) : wgml_tensor_new(g, WGML_F32, 2, ys);
    b->l = (wgml_lora){.a = wgml_tensor_new(g, WGML_F32, 2, as), .b = wgml_tensor_new(g, WGML_F32, 2, bs), .n = c->n,
                       .k = c->k, .r = (int)c->r, .scale = 1.75f};
    wgml_tensor_set_trainable(b->x, 1);
    wgml_tensor_set_trainable(b->l.a, 1);
    wgml_tensor_set_trainable(b->l.b, 1);
    b->y = b->w.w ? wgml_lora_qlinear(g, b->x, b->w.w, &b->l) : NULL;
    wgml_tensor *loss = b->y ? wgml_sum(g, wgml_mul(g, b->y, b->rr), NULL, 0, 0) : NULL;
    if (b->y) wgml_graph_keep(g, b->y);
    return th_check(loss && !wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g), "%s: build: %s", c->name,
                    wgml_last_error(T.ctx));
}

static void free_built(built *b) {
    free_weight(&b->w);
    wgml_graph_free(b->g);
}

/* ref[i, j] = Σ_t p[i, t]·q[t, j] (p [ni, nt], q [nt, nj], either read transposed) */
static void gemm(bool tp, bool tq, int64_t ni, int64_t nj, int64_t nt, const double *p, const double *q, double s,
                 double *ref) {
    cblas_dgemm(CblasRowMajor, tp ? CblasTrans : CblasNoTrans, tq ? CblasTrans : CblasNoTrans, (int)ni, (int)nj,
                (int)nt, s, p, tp ? (int)ni : (int)nt, q, tq ? (int)nt : (int)nj, 0.0, ref, (int)nj);
}

static void check(const char *what, const fcase *c, int run, wgml_tensor *t, const double *ref, int64_t n) {
    char name[160];
    snprintf(name, sizeof name, "%s (%s) run %d: %s", c->name, KIND_NAMES[c->kind], run, what);
    float *got = t ? th_read_f32(t) : NULL;
    double amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs(ref[i]));
    if (th_check(got != NULL, "%s: read: %s", name, wgml_last_error(T.ctx)))
        th_close(name, got, ref, (size_t)n, 2e-5 * (1 + amax), 1e-5);
    free(got);
}

static void run_once(const fcase *c, built *b, int run) {
    int64_t m = c->m, n = c->n, k = c->k, r = c->r;
    float *xf = th_random((size_t)(m * k), -1, 1), *af = th_random((size_t)(r * k), -0.5, 0.5);
    float *bf = th_random((size_t)(n * r), -0.5, 0.5), *rf = th_random((size_t)(m * n), -1, 1);
    wgml_tensor_write(b->x, xf, sizeof(float) * (size_t)(m * k));
    wgml_tensor_write(b->l.a, af, sizeof(float) * (size_t)(r * k));
    wgml_tensor_write(b->l.b, bf, sizeof(float) * (size_t)(n * r));
    wgml_tensor_write(b->rr, rf, sizeof(float) * (size_t)(m * n));
    double *x = to_double(xf, (size_t)(m * k)), *a = to_double(af, (size_t)(r * k)), *bb = to_double(bf, (size_t)(n * r));
    double *R = to_double(rf, (size_t)(m * n)), *w = to_double(b->w.deq, (size_t)(n * k)), s = b->l.scale;
    double *h = malloc(sizeof(double) * (size_t)(m * r)), *dh = malloc(sizeof(double) * (size_t)(m * r));
    double *y = malloc(sizeof(double) * (size_t)(m * n)), *ly = malloc(sizeof(double) * (size_t)(m * n));
    double *dx = malloc(sizeof(double) * (size_t)(m * k)), *ldx = malloc(sizeof(double) * (size_t)(m * k));
    double *da = malloc(sizeof(double) * (size_t)(r * k)), *db = malloc(sizeof(double) * (size_t)(n * r));
    gemm(false, true, m, r, k, x, a, 1, h);   /* H = x·Aᵀ */
    gemm(false, true, m, n, k, x, w, 1, y);   /* x·Wᵀ */
    gemm(false, true, m, n, r, h, bb, s, ly); /* s·H·Bᵀ */
    for (int64_t i = 0; i < m * n; i++) y[i] += ly[i] + (b->w.bias ? b->w.bias[i % n] : 0.0);
    gemm(true, false, n, r, m, R, h, s, db);  /* s·Rᵀ·H */
    gemm(false, false, m, r, n, R, bb, s, dh); /* s·R·B */
    gemm(true, false, r, k, m, dh, x, 1, da); /* dHᵀ·x */
    gemm(false, false, m, k, n, R, w, 1, dx); /* R·W */
    gemm(false, false, m, k, r, dh, a, 1, ldx); /* dH·A */
    for (int64_t i = 0; i < m * k; i++) dx[i] += ldx[i];
    if (th_check(!wgml_graph_run(b->g), "%s: run: %s", c->name, wgml_last_error(T.ctx))) {
        check("y", c, run, b->y, y, m * n);
        check("dx", c, run, wgml_tensor_grad(b->x), dx, m * k);
        check("dA", c, run, wgml_tensor_grad(b->l.a), da, r * k);
        check("dB", c, run, wgml_tensor_grad(b->l.b), db, n * r);
    }
    free(xf), free(af), free(bf), free(rf), free(x), free(a), free(bb), free(R), free(w);
    free(h), free(dh), free(y), free(ly), free(dx), free(ldx), free(da), free(db);
}

static void run_case(const fcase *c) {
    if (c->variant) th_setenv("WGML_QW_MM_VARIANT", c->variant, 1);
    if (c->splitk) th_setenv("WGML_QW_MM_SPLITK", c->splitk, 1);
    built b = {0};
    if (build(c, true, &b))
        for (int run = 0; run < 2; run++) run_once(c, &b, run);
    if (c->fewer) { /* the unfolded composition: qlinear, then lora_apply's products */
        built u = {0};
        if (build(c, false, &u))
            th_check(wgml_graph_dispatch_count(b.g) < wgml_graph_dispatch_count(u.g),
                     "%s: %zu dispatches folded, %zu unfolded", c->name, wgml_graph_dispatch_count(b.g),
                     wgml_graph_dispatch_count(u.g));
        free_built(&u);
    }
    free_built(&b);
    th_unsetenv("WGML_QW_MM_VARIANT");
    th_unsetenv("WGML_QW_MM_SPLITK");
}

/* The eager graph: y right (folded and not, and wgml_lora_linear's composition) and no memory
 * kept per call: the products' intermediates (H, the base's output) are freed once read. */
static void test_eager(void) {
    wgml_graph *g = wgml_eager(T.ctx);
    const int64_t m = 24, n = 40, k = 64, r = 8;
    hw w = make_weight(g, 1, n, k, 32, false);
    float *xf = th_random((size_t)(m * k), -1, 1), *wf = th_random((size_t)(n * k), -1, 1);
    int64_t xs[2] = {m, k}, ws[2] = {n, k};
    wgml_tensor *x = th_tensor_f32(2, xs, xf), *wt = th_tensor_f32(2, ws, wf);
    wgml_lora *l = wgml_lora_new(g, n, k, (int)r, 24.0f, 5);
    float *bf = th_random((size_t)(n * r), -0.5, 0.5), *af = malloc(sizeof(float) * (size_t)(r * k));
    if (!th_check(w.w && x && wt && l && !wgml_tensor_write(l->b, bf, sizeof(float) * (size_t)(n * r)) &&
                      !wgml_tensor_read(l->a, af, sizeof(float) * (size_t)(r * k)),
                  "eager: set-up: %s", wgml_last_error(T.ctx)))
        goto done;
    double *xd = to_double(xf, (size_t)(m * k)), *ad = to_double(af, (size_t)(r * k)), *bd = to_double(bf, (size_t)(n * r));
    double *h = malloc(sizeof(double) * (size_t)(m * r)), *yq = malloc(sizeof(double) * (size_t)(m * n));
    double *yf = malloc(sizeof(double) * (size_t)(m * n)), *lo = malloc(sizeof(double) * (size_t)(m * n));
    double *wq = to_double(w.deq, (size_t)(n * k)), *wd = to_double(wf, (size_t)(n * k));
    gemm(false, true, m, r, k, xd, ad, 1, h);
    gemm(false, true, m, n, r, h, bd, l->scale, lo);
    gemm(false, true, m, n, k, xd, wq, 1, yq);
    gemm(false, true, m, n, k, xd, wd, 1, yf);
    for (int64_t i = 0; i < m * n; i++) yq[i] += lo[i], yf[i] += lo[i];
    static const fcase eq = {.name = "eager", .kind = 1};
    for (int form = 0; form < 3; form++) {
        th_setenv("WGML_LORA_FOLD", form == 1 ? "1" : "0", 1);
        wgml_memory_stats s0 = {0}, s1 = {0};
        for (int it = 0; it < 12; it++) {
            if (it == 2 && !wgml_sync(T.ctx)) wgml_memory_get(T.ctx, &s0);
            wgml_tensor *y = form < 2 ? wgml_lora_qlinear(g, x, w.w, l) : wgml_lora_linear(g, x, wt, NULL, l);
            if (it == 0) check(form == 0 ? "qlinear unfolded" : form == 1 ? "qlinear folded" : "linear", &eq, 0, y,
                               form < 2 ? yq : yf, m * n);
            wgml_tensor_free(y);
        }
        wgml_sync(T.ctx);
        wgml_memory_get(T.ctx, &s1);
        th_check(s1.in_use == s0.in_use, "eager form %d: memory in use %llu after 10 more calls, %llu before", form,
                 (unsigned long long)s1.in_use, (unsigned long long)s0.in_use);
    }
    free(xd), free(ad), free(bd), free(h), free(yq), free(yf), free(lo), free(wq), free(wd);
done:
    free(xf), free(wf), free(bf), free(af);
    wgml_lora_free(l);
    wgml_tensor_free(x), wgml_tensor_free(wt);
    free_weight(&w);
}

/* The shared-input group folded (lora_qlinear_shared: q/k/v-like, three 4-bit weights of one
 * x, their A's stacked in a_cat) with one more use of x, the term <Rx, x>, recorded before or
 * after the group, so that x's gradient sums the group's terms in both orders the engine meets
 * them (a rule adding its dx into the running sum in place, graph_grad_accum, or the engine's
 * add): y_i = x·W_iᵀ + s_i·H_i·B_iᵀ, H_i = x·A_iᵀ; dB_i = s_i·R_iᵀ·H_i, dA_i = dH_iᵀ·x with
 * dH_i = s_i·R_i·B_i, dx = Σ_i (R_i·W_i + dH_i·A_i) + Rx. */
static void test_shared(bool x_use_first) {
    th_setenv("WGML_LORA_FOLD", "1", 1);
    enum { NG = 3 };
    const int64_t m = 48, k = 64, r = 8, ns[NG] = {40, 24, 24};
    const char *name = x_use_first ? "shared group, x's other use first" : "shared group, x's other use last";
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {m, k}, acs[2] = {NG * r, k};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *ac = wgml_tensor_new(g, WGML_F32, 2, acs);
    wgml_tensor *rx = wgml_tensor_new(g, WGML_F32, 2, xs), *rr[NG], *y[NG] = {0};
    hw w[NG];
    wgml_lora l[NG];
    const wgml_qweight *wp[NG];
    const wgml_lora *lp[NG];
    for (int i = 0; i < NG; i++) {
        int64_t bs[2] = {ns[i], r}, ys[2] = {m, ns[i]};
        w[i] = make_weight(g, 1, ns[i], k, 32, false);
        rr[i] = wgml_tensor_new(g, WGML_F32, 2, ys);
        l[i] = (wgml_lora){.b = wgml_tensor_new(g, WGML_F32, 2, bs), .n = ns[i], .k = k, .r = (int)r,
                           .scale = 0.5f + (float)i};
        wgml_tensor_set_trainable(l[i].b, 1);
        wp[i] = w[i].w, lp[i] = &l[i];
    }
    wgml_tensor_set_trainable(x, 1);
    wgml_tensor_set_trainable(ac, 1);
    wgml_tensor *other = x_use_first ? wgml_sum(g, wgml_mul(g, x, rx), NULL, 0, 0) : NULL;
    bool ok = !lora_qlinear_shared(g, x, ac, NG, wp, lp, y);
    if (!x_use_first) other = wgml_sum(g, wgml_mul(g, x, rx), NULL, 0, 0);
    wgml_tensor *loss = other;
    for (int i = 0; i < NG && ok; i++) {
        loss = wgml_add(g, loss, wgml_sum(g, wgml_mul(g, y[i], rr[i]), NULL, 0, 0), 1.0f);
        ok = !wgml_graph_keep(g, y[i]);
    }
    if (!th_check(ok && loss && !wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g), "%s: build: %s", name,
                  wgml_last_error(T.ctx)))
        goto done;
    static const fcase sc = {.name = "shared", .kind = 1};
    for (int run = 0; run < 2; run++) {
        float *xf = th_random((size_t)(m * k), -1, 1), *af = th_random((size_t)(NG * r * k), -0.5, 0.5);
        float *rxf = th_random((size_t)(m * k), -1, 1);
        wgml_tensor_write(x, xf, sizeof(float) * (size_t)(m * k));
        wgml_tensor_write(ac, af, sizeof(float) * (size_t)(NG * r * k));
        wgml_tensor_write(rx, rxf, sizeof(float) * (size_t)(m * k));
        double *xd = to_double(xf, (size_t)(m * k)), *ad = to_double(af, (size_t)(NG * r * k));
        double *dx = to_double(rxf, (size_t)(m * k)), *da = malloc(sizeof(double) * (size_t)(NG * r * k));
        double *t = malloc(sizeof(double) * (size_t)(m * k)), *h = malloc(sizeof(double) * (size_t)(m * r));
        double *dh = malloc(sizeof(double) * (size_t)(m * r));
        double *ref[NG][2]; /* dB_i, y_i */
        float *keep[NG][2];
        for (int i = 0; i < NG; i++) {
            int64_t n = ns[i];
            float *bf = th_random((size_t)(n * r), -0.5, 0.5), *rf = th_random((size_t)(m * n), -1, 1);
            wgml_tensor_write(l[i].b, bf, sizeof(float) * (size_t)(n * r));
            wgml_tensor_write(rr[i], rf, sizeof(float) * (size_t)(m * n));
            keep[i][0] = bf, keep[i][1] = rf;
            double *bd = to_double(bf, (size_t)(n * r)), *R = to_double(rf, (size_t)(m * n));
            double *wd = to_double(w[i].deq, (size_t)(n * k)), s = l[i].scale, *ai = ad + i * r * k;
            double *yy = malloc(sizeof(double) * (size_t)(m * n)), *ly = malloc(sizeof(double) * (size_t)(m * n));
            ref[i][0] = malloc(sizeof(double) * (size_t)(n * r)), ref[i][1] = yy;
            gemm(false, true, m, r, k, xd, ai, 1, h);            /* H_i = x·A_iᵀ */
            gemm(false, true, m, n, k, xd, wd, 1, yy);           /* x·W_iᵀ */
            gemm(false, true, m, n, r, h, bd, s, ly);            /* s·H_i·B_iᵀ */
            for (int64_t j = 0; j < m * n; j++) yy[j] += ly[j];
            gemm(true, false, n, r, m, R, h, s, ref[i][0]);      /* dB_i = s·R_iᵀ·H_i */
            gemm(false, false, m, r, n, R, bd, s, dh);           /* dH_i = s·R_i·B_i */
            gemm(true, false, r, k, m, dh, xd, 1, da + i * r * k); /* dA_i = dH_iᵀ·x */
            gemm(false, false, m, k, n, R, wd, 1, t);            /* R_i·W_i */
            for (int64_t j = 0; j < m * k; j++) dx[j] += t[j];
            gemm(false, false, m, k, r, dh, ai, 1, t);           /* dH_i·A_i */
            for (int64_t j = 0; j < m * k; j++) dx[j] += t[j];
            free(bd), free(R), free(wd), free(ly);
        }
        if (th_check(!wgml_graph_run(g), "%s: run: %s", name, wgml_last_error(T.ctx))) {
            char what[96];
            for (int i = 0; i < NG; i++) {
                snprintf(what, sizeof what, "%s y%d", name, i);
                check(what, &sc, run, y[i], ref[i][1], m * ns[i]);
                snprintf(what, sizeof what, "%s dB%d", name, i);
                check(what, &sc, run, wgml_tensor_grad(l[i].b), ref[i][0], ns[i] * r);
            }
            snprintf(what, sizeof what, "%s dx", name);
            check(what, &sc, run, wgml_tensor_grad(x), dx, m * k);
            snprintf(what, sizeof what, "%s dA_cat", name);
            check(what, &sc, run, wgml_tensor_grad(ac), da, NG * r * k);
        }
        for (int i = 0; i < NG; i++) free(ref[i][0]), free(ref[i][1]), free(keep[i][0]), free(keep[i][1]);
        free(xf), free(af), free(rxf), free(xd), free(ad), free(dx), free(da), free(t), free(h), free(dh);
    }
done:
    for (int i = 0; i < NG; i++) free_weight(&w[i]);
    wgml_graph_free(g);
}

static void test_errors(void) {
    th_setenv("WGML_LORA_FOLD", "1", 1);
    wgml_graph *g = wgml_graph_new(T.ctx);
    hw w = make_weight(g, 0, 8, 32, 32, false);
    int64_t xs[2] = {16, 32}, as[2] = {4, 32}, bs[2] = {8, 4};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_lora l = {.a = wgml_tensor_new(g, WGML_F32, 2, as), .b = wgml_tensor_new(g, WGML_F32, 2, bs), .n = 9, .k = 32,
                   .r = 4, .scale = 1.0f};
    th_expect_error("fold: adapter n", wgml_lora_qlinear(g, x, w.w, &l) == NULL, WGML_ERR_SHAPE, "must agree", NULL);
    l.n = 8;
    int64_t xb[2] = {16, 31};
    wgml_tensor *x31 = wgml_tensor_new(g, WGML_F32, 2, xb);
    th_expect_error("fold: x width", wgml_lora_qlinear(g, x31, w.w, &l) == NULL, WGML_ERR_SHAPE, "x [16, 31]", NULL);
    th_expect_error("fold: NULL weight", wgml_lora_qlinear(g, x, NULL, &l) == NULL, WGML_ERR_ARG, "w is NULL", NULL);
    free_weight(&w);
    wgml_graph_free(g);
}

int main(int argc, char **argv) {
    th_init_args("test_lora_fold", argc, argv);
    static const fcase cases[] = {
        {"tile64 q4sym bias", "tile64x64_k32_r4x4", 0, 32, 70, 72, 96, 8, true, false, true, NULL},
        {"tile128x64 q4_1 r40", "tile128x64_k16_r8x4", 1, 32, 130, 66, 64, 40, false, false, true, NULL},
        {"tile64 q4_k split 3", "tile64x64_k32_r4x4", 5, 256, 40, 40, 512, 16, false, false, false, "3"},
        {"tile128 q6_k", "tile128x128_k16_r8x8", 7, 16, 33, 48, 256, 4, false, false, false, NULL},
        {"tile64 q8_0 rank 3", "tile64x64_k32_r4x4", 2, 32, 48, 40, 64, 16, false, true, false, NULL},
        {"tile64 f16 (held as f32)", "tile64x64_k32_r4x4", 8, 32, 40, 24, 48, 8, false, false, false, NULL},
        {"cpu kernel", "cpu_k32_r4x8", 0, 32, 37, 20, 64, 8, true, false, false, NULL},
        {"double-buffered", "db64x64_k16_r4x4", 1, 32, 36, 24, 64, 8, false, false, false, NULL},
        {"gemv", NULL, 0, 32, 1, 24, 64, 8, false, false, false, NULL},
        {"automatic", NULL, 1, 32, 24, 40, 96, 16, false, true, false, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    test_eager();
    test_shared(false);
    test_shared(true);
    test_errors();
    th_unsetenv("WGML_LORA_FOLD");
    return th_done();
}
