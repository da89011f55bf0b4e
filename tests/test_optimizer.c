#define _POSIX_C_SOURCE 200809L
/* The optimizer (wgml_adamw_*, include/wgml-train.h) against plain double-precision loops.
 * AdamW: parameters of 7, 37, 129 and 576x64 elements in the flat buffers; 10 eager steps with
 * weight decay changed at a later step and lr changed between steps; 10 runs of one built graph
 * with clipping, a cosine lr and a NaN gradient at step 5 (skipped, reported, and the next
 * step proceeds as if it never happened); zero_grad; gradient accumulation in a built graph
 * (held and applied runs); a +inf gradient; bad input. SGD in the same buffers: momentum 0.9 and
 * none, weight decay, clipping, a NaN gradient, gradients copied in from tensors of their own
 * (wgml_adamw_copy_grad), and copy_grad's bad input. Cross-entropy: test_train_ops.c.
 * Run with --dump DIR, tests/py/test_torch_train.py checks the AdamW cases against PyTorch. */
#include "harness.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wall_clock.h"

/* ------------------------------------------------------------------ AdamW */

#define NP 4
#define STEPS 10
static const int P_RANK[NP] = {1, 1, 1, 2};
static const int64_t P_SHAPE[NP][2] = {{7, 0}, {37, 0}, {129, 0}, {576, 64}};

typedef struct ref_adamw {
    int64_t n; /* used elements */
    double *p, *m, *v;
    int64_t t, skipped;
    double norm;
} ref_adamw;

/* Both optimizers' start of a step in double: the gradient's norm into r->norm and, when every
 * element is finite, the step counted and clip_grad_norm_'s factor in *coef (1 when max_norm is
 * 0); false (the step skipped and counted as such) otherwise. */
static bool ref_clip(ref_adamw *r, const float *g, double max_norm, double *coef) {
    double ss = 0;
    bool finite = true;
    for (int64_t i = 0; i < r->n; i++) {
        finite = finite && isfinite(g[i]);
        ss += (double)g[i] * g[i];
    }
    r->norm = sqrt(ss);
    if (!finite) {
        r->skipped++;
        return false;
    }
    r->t++;
    *coef = max_norm > 0 ? fmin(1.0, max_norm / (r->norm + 1e-6)) : 1.0;
    return true;
}

/* One torch.optim.AdamW step (after clip_grad_norm_ when max_norm > 0) in double; a step with a
 * non-finite gradient is skipped. lr and wd are the f32 values the GPU holds. */
static void ref_step(ref_adamw *r, const float *g, double lr, double wd, double b1, double b2, double eps,
                     double max_norm) {
    double coef;
    if (!ref_clip(r, g, max_norm, &coef)) return;
    double bc1 = 1 - pow(b1, (double)r->t), bc2 = 1 - pow(b2, (double)r->t);
    for (int64_t i = 0; i < r->n; i++) {
        double gi = g[i] * coef;
        r->p[i] *= 1 - lr * wd;
        r->m[i] = b1 * r->m[i] + (1 - b1) * gi;
        r->v[i] = b2 * r->v[i] + (1 - b2) * gi * gi;
        r->p[i] -= lr / bc1 * r->m[i] / (sqrt(r->v[i]) / sqrt(bc2) + eps);
    }
}

static int64_t adamw_capacity(void) {
    int64_t c = 0;
    for (int i = 0; i < NP; i++) c += wgml_adamw_padded(P_SHAPE[i][0] * (P_RANK[i] == 2 ? P_SHAPE[i][1] : 1));
    return c;
}

/* Registers the parameters, writes random initial values (and the host copy). */
static bool adamw_setup(wgml_optimizer *o, wgml_tensor **pv, wgml_tensor **gv, int64_t *offs, float *hp, int64_t used) {
    memset(hp, 0, sizeof(float) * (size_t)used);
    int64_t off = 0;
    for (int i = 0; i < NP; i++) {
        pv[i] = wgml_adamw_param(o, P_RANK[i], P_SHAPE[i]);
        gv[i] = wgml_adamw_grad(o, pv[i]);
        if (!pv[i] || !gv[i]) return false;
        int64_t n = wgml_tensor_numel(pv[i]);
        offs[i] = off;
        th_fill_uniform(hp + off, (size_t)n, -1, 1);
        if (wgml_tensor_write(pv[i], hp + off, sizeof(float) * (size_t)n)) return false;
        off += wgml_adamw_padded(n);
    }
    return off == used && wgml_adamw_used(o) == used;
}

/* Fresh gradients for one step: uniform(-1, 1)·scale in every parameter (padding 0), written
 * into the grad views. nan_at >= 0 puts a NaN there. */
static bool adamw_grads(wgml_tensor **gv, const int64_t *offs, float *hg, int64_t used, double scale, int64_t nan_at) {
    memset(hg, 0, sizeof(float) * (size_t)used);
    for (int i = 0; i < NP; i++) {
        int64_t n = wgml_tensor_numel(gv[i]);
        th_fill_uniform(hg + offs[i], (size_t)n, -scale, scale);
    }
    if (nan_at >= 0) hg[nan_at] = NAN;
    for (int i = 0; i < NP; i++)
        if (wgml_tensor_write(gv[i], hg + offs[i], sizeof(float) * (size_t)wgml_tensor_numel(gv[i]))) return false;
    return true;
}

static void adamw_compare(const char *what, wgml_optimizer *o, const ref_adamw *r) {
    int64_t cap = wgml_tensor_numel(wgml_adamw_buffer(o, WGML_ADAMW_PARAMS));
    float *gp = malloc(sizeof(float) * (size_t)cap), *gm = malloc(sizeof(float) * (size_t)cap),
          *gvv = malloc(sizeof(float) * (size_t)cap);
    th_check(!wgml_tensor_read(wgml_adamw_buffer(o, WGML_ADAMW_PARAMS), gp, sizeof(float) * (size_t)cap) &&
                 !wgml_tensor_read(wgml_adamw_buffer(o, WGML_ADAMW_M), gm, sizeof(float) * (size_t)cap) &&
                 !wgml_tensor_read(wgml_adamw_buffer(o, WGML_ADAMW_V), gvv, sizeof(float) * (size_t)cap),
             "%s: read the flat buffers: %s", what, wgml_last_error(T.ctx));
    char nm[160];
    /* fp32 state updated 10 times: a few ulps per step (see the comment in main) */
    snprintf(nm, sizeof nm, "%s: params", what);
    th_close(nm, gp, r->p, (size_t)r->n, 2e-6, 1e-5);
    snprintf(nm, sizeof nm, "%s: m", what);
    th_close(nm, gm, r->m, (size_t)r->n, 1e-7, 1e-5);
    snprintf(nm, sizeof nm, "%s: v", what);
    th_close(nm, gvv, r->v, (size_t)r->n, 1e-9, 1e-5);
    int64_t taken = -1, skipped = -1;
    float norm = -1;
    th_check(!wgml_adamw_stats(o, &taken, &skipped, &norm) && taken == r->t && skipped == r->skipped &&
                 fabs(norm - r->norm) <= 1e-5 * r->norm,
             "%s: stats taken %lld skipped %lld norm %.7g, want %lld %lld %.7g", what, (long long)taken,
             (long long)skipped, (double)norm, (long long)r->t, (long long)r->skipped, r->norm);
    free(gp); free(gm); free(gvv);
}

static void adamw_dump(const char *cn, wgml_optimizer *o, const int64_t *offs, const float *p0, const float *grads,
                       const float *lrs, const float *wds, const wgml_adamw_config *c, int64_t used) {
    if (!th_dumping()) return;
    float layout[NP * 3], prm[4] = {(float)c->beta1, (float)c->beta2, (float)c->eps, (float)c->max_grad_norm};
    for (int i = 0; i < NP; i++) {
        layout[3 * i] = (float)offs[i];
        layout[3 * i + 1] = (float)P_SHAPE[i][0];
        layout[3 * i + 2] = P_RANK[i] == 2 ? (float)P_SHAPE[i][1] : 0.0f;
    }
    int64_t ls[2] = {NP, 3}, four = 4, steps = STEPS, gs[2] = {STEPS, used};
    th_dump(cn, "layout", WGML_F32, 2, ls, layout);
    th_dump(cn, "params", WGML_F32, 1, &four, prm);
    th_dump(cn, "p0", WGML_F32, 1, &used, p0);
    th_dump(cn, "grads", WGML_F32, 2, gs, grads);
    th_dump(cn, "lr", WGML_F32, 1, &steps, lrs);
    th_dump(cn, "wd", WGML_F32, 1, &steps, wds);
    wgml_tensor *names[3] = {wgml_adamw_buffer(o, WGML_ADAMW_PARAMS), wgml_adamw_buffer(o, WGML_ADAMW_M),
                             wgml_adamw_buffer(o, WGML_ADAMW_V)};
    const char *nn[3] = {"p", "m", "v"};
    for (int k = 0; k < 3; k++) {
        wgml_tensor *pre = wgml_tensor_view(names[k], 0, 1, &used);
        th_dump_tensor(cn, nn[k], pre);
        wgml_tensor_free(pre);
    }
    int64_t taken = 0, skipped = 0, three = 3;
    float norm = 0;
    wgml_adamw_stats(o, &taken, &skipped, &norm);
    float st[3] = {(float)taken, (float)skipped, norm};
    th_dump(cn, "stats", WGML_F32, 1, &three, st);
}

/* Eager: weight decay 0.01, raised to 0.1 from step 6; lr 1e-2, 5e-3 from step 4, 2e-3 from 8. */
static void test_adamw_eager(void) {
    wgml_adamw_config c = wgml_adamw_defaults();
    c.lr = 1e-2;
    c.weight_decay = 0.01;
    c.capacity = adamw_capacity();
    wgml_optimizer *o = wgml_adamw_new(T.g, &c);
    wgml_tensor *pv[NP], *gv[NP];
    int64_t offs[NP], used = c.capacity;
    float *p0 = malloc(sizeof(float) * (size_t)used), *grads = malloc(sizeof(float) * (size_t)(used * STEPS));
    float lrs[STEPS], wds[STEPS];
    if (!th_check(o && adamw_setup(o, pv, gv, offs, p0, used), "adamw eager setup: %s", wgml_last_error(T.ctx))) {
        wgml_adamw_free(o);
        free(p0); free(grads);
        return;
    }
    ref_adamw r = {used, calloc((size_t)used, sizeof(double)), calloc((size_t)used, sizeof(double)),
                   calloc((size_t)used, sizeof(double)), 0, 0, 0};
    for (int64_t i = 0; i < used; i++) r.p[i] = p0[i];
    double t0 = now();
    for (int k = 0; k < STEPS; k++) {
        double lr = k < 3 ? 1e-2 : k < 7 ? 5e-3 : 2e-3, wd = k < 5 ? 0.01 : 0.1;
        if (k == 3 || k == 7) th_check(!wgml_adamw_set_lr(o, lr), "set_lr: %s", wgml_last_error(T.ctx));
        if (k == 5) th_check(!wgml_adamw_set_weight_decay(o, wd), "set_weight_decay: %s", wgml_last_error(T.ctx));
        lrs[k] = (float)lr;
        wds[k] = (float)wd;
        float *hg = grads + k * used;
        th_check(adamw_grads(gv, offs, hg, used, 0.1 * (k + 1), -1), "write grads: %s", wgml_last_error(T.ctx));
        th_check(!wgml_adamw_step(T.g, o), "adamw_step: %s", wgml_last_error(T.ctx));
        ref_step(&r, hg, lrs[k], wds[k], c.beta1, c.beta2, c.eps, 0);
    }
    wgml_sync(T.ctx);
    printf("  adamw eager: %d steps over %lld elements in %.0f ms\n", STEPS, (long long)used, (now() - t0) * 1e3);
    adamw_compare("adamw eager, wd 0.01 -> 0.1 at step 6, lr changes", o, &r);
    /* a parameter view reads the same as its part of the flat buffer */
    float got[129];
    th_check(!wgml_tensor_read(pv[2], got, sizeof got), "read a param view");
    double want[129];
    for (int i = 0; i < 129; i++) want[i] = r.p[offs[2] + i];
    th_close("adamw eager: the [129] parameter view", got, want, 129, 2e-6, 1e-5);
    adamw_dump("adamw_eager", o, offs, p0, grads, lrs, wds, &c, used);
    /* zero_grad: the used part of the grad buffer becomes exactly 0 */
    th_check(!wgml_adamw_zero_grad(T.g, o), "zero_grad: %s", wgml_last_error(T.ctx));
    float *gg = malloc(sizeof(float) * (size_t)used);
    uint32_t *zero = calloc((size_t)used, sizeof(uint32_t));
    th_check(!wgml_tensor_read(wgml_adamw_buffer(o, WGML_ADAMW_GRADS), gg, sizeof(float) * (size_t)used), "read grads");
    th_exact_u32("adamw zero_grad", (const uint32_t *)gg, zero, (size_t)used);
    free(gg); free(zero);
    free(p0); free(grads); free(r.p); free(r.m); free(r.v);
    wgml_adamw_free(o);
}

/* The used part of each of the nb flat buffers, one after another into dst [nb * used]. */
static void read_used(wgml_tensor *const *flat, int nb, int64_t used, float *dst) {
    int64_t cap = wgml_tensor_numel(flat[0]);
    float *tmp = malloc(sizeof(float) * (size_t)cap);
    for (int b = 0; tmp && b < nb; b++) {
        wgml_tensor_read(flat[b], tmp, sizeof(float) * (size_t)cap);
        memcpy(dst + b * used, tmp, sizeof(float) * (size_t)used);
    }
    free(tmp);
}

/* A built graph compiled once and run 10 times: clipping at max_norm 100 (grad norms ~55 and
 * ~220 alternate, so some steps clip and some do not), a cosine lr written before every run,
 * weight decay 0.05, and a NaN gradient at step 5. */
static void test_adamw_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_adamw_config c = wgml_adamw_defaults();
    c.lr = 1e-2;
    c.weight_decay = 0.05;
    c.max_grad_norm = 100;
    c.capacity = adamw_capacity();
    wgml_optimizer *o = wgml_adamw_new(g, &c);
    wgml_tensor *pv[NP], *gv[NP];
    int64_t offs[NP], used = c.capacity;
    float *p0 = malloc(sizeof(float) * (size_t)used), *grads = malloc(sizeof(float) * (size_t)(used * STEPS));
    float lrs[STEPS], wds[STEPS];
    if (!th_check(o && adamw_setup(o, pv, gv, offs, p0, used) && !wgml_adamw_step(g, o) && !wgml_graph_compile(g),
                  "adamw graph setup: %s", wgml_last_error(T.ctx))) {
        wgml_adamw_free(o);
        wgml_graph_free(g);
        free(p0); free(grads);
        return;
    }
    th_check(wgml_graph_dispatch_count(g) == 3, "adamw_step is 3 dispatches for %d tensors (got %zu)", NP,
             wgml_graph_dispatch_count(g));
    ref_adamw r = {used, calloc((size_t)used, sizeof(double)), calloc((size_t)used, sizeof(double)),
                   calloc((size_t)used, sizeof(double)), 0, 0, 0};
    for (int64_t i = 0; i < used; i++) r.p[i] = p0[i];
    float *before = malloc(sizeof(float) * (size_t)used * 3), *after = malloc(sizeof(float) * (size_t)used * 3);
    wgml_tensor *flat[3] = {wgml_adamw_buffer(o, WGML_ADAMW_PARAMS), wgml_adamw_buffer(o, WGML_ADAMW_M),
                            wgml_adamw_buffer(o, WGML_ADAMW_V)};
    double t0 = now();
    for (int k = 0; k < STEPS; k++) {
        double lr = 1e-3 + 0.5 * (1e-2 - 1e-3) * (1 + cos(3.14159265358979323846 * k / STEPS));
        th_check(!wgml_adamw_set_lr(o, lr), "set_lr: %s", wgml_last_error(T.ctx));
        lrs[k] = (float)lr;
        wds[k] = (float)c.weight_decay;
        float *hg = grads + k * used;
        bool nan_step = k == 4;
        th_check(adamw_grads(gv, offs, hg, used, k % 2 ? 2.0 : 0.5, nan_step ? offs[2] + 100 : -1),
                 "write grads: %s", wgml_last_error(T.ctx));
        th_check(!wgml_graph_run(g), "adamw graph run %d: %s", k + 1, wgml_last_error(T.ctx));
        ref_step(&r, hg, lrs[k], wds[k], c.beta1, c.beta2, c.eps, c.max_grad_norm);
        if (k == 3 || nan_step) { /* the state before and after the NaN step */
            read_used(flat, 3, used, nan_step ? after : before);
        }
        if (nan_step) {
            int64_t taken = -1, skipped = -1;
            float norm = 0;
            th_check(!wgml_adamw_stats(o, &taken, &skipped, &norm) && taken == 4 && skipped == 1 && isnan(norm),
                     "NaN gradient at step 5: skipped (taken %lld, skipped %lld, norm %g)", (long long)taken,
                     (long long)skipped, (double)norm);
            th_check(memcmp(before, after, sizeof(float) * (size_t)used * 3) == 0,
                     "NaN gradient at step 5: params, m and v are unchanged, bit for bit");
        }
    }
    printf("  adamw graph: %d runs in %.0f ms\n", STEPS, (now() - t0) * 1e3);
    adamw_compare("adamw graph, clip 100, cosine lr, NaN at step 5", o, &r);
    adamw_dump("adamw_graph", o, offs, p0, grads, lrs, wds, &c, used);
    free(before); free(after);
    free(p0); free(grads); free(r.p); free(r.m); free(r.v);
    wgml_adamw_free(o);
    wgml_graph_free(g);
}

/* Gradient accumulation in a built graph (adamw_step + zero_grad_after_step, compiled once):
 * a held run (set_apply 0) leaves params, m, v, t and the grads exactly as they were; the next
 * applied run steps on the grads present (checked against the double reference) and zeroes
 * them; an applied run with a NaN gradient is skipped and still zeroes them. */
static void test_adamw_accum(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_adamw_config c = wgml_adamw_defaults();
    c.lr = 1e-2;
    c.max_grad_norm = 10;
    c.capacity = adamw_capacity();
    wgml_optimizer *o = wgml_adamw_new(g, &c);
    wgml_tensor *pv[NP], *gv[NP];
    int64_t offs[NP], used = c.capacity;
    float *p0 = malloc(sizeof(float) * (size_t)used), *hg = malloc(sizeof(float) * (size_t)used);
    float *snap = malloc(sizeof(float) * (size_t)used * 4), *cur = malloc(sizeof(float) * (size_t)used * 4);
    ref_adamw r = {used, calloc((size_t)used, sizeof(double)), calloc((size_t)used, sizeof(double)),
                   calloc((size_t)used, sizeof(double)), 0, 0, 0};
    wgml_tensor *flat[4] = {wgml_adamw_buffer(o, WGML_ADAMW_PARAMS), wgml_adamw_buffer(o, WGML_ADAMW_M),
                            wgml_adamw_buffer(o, WGML_ADAMW_V), wgml_adamw_buffer(o, WGML_ADAMW_GRADS)};
    if (!th_check(o && adamw_setup(o, pv, gv, offs, p0, used) && !wgml_adamw_step(g, o) &&
                      !wgml_adamw_zero_grad_after_step(g, o) && !wgml_graph_compile(g),
                  "adamw accum setup: %s", wgml_last_error(T.ctx)))
        goto out;
    th_check(wgml_graph_dispatch_count(g) == 4, "adamw_step + zero_grad_after_step: 4 dispatches (got %zu)",
             wgml_graph_dispatch_count(g));
    for (int64_t i = 0; i < used; i++) r.p[i] = p0[i];
    float *sum = malloc(sizeof(float) * (size_t)used);
    uint32_t *zero = calloc((size_t)used, sizeof(uint32_t));
    for (int k = 0; k < 3; k++) {
        /* micro-batch 1, held */
        th_check(adamw_grads(gv, offs, hg, used, 1.0, -1), "write grads: %s", wgml_last_error(T.ctx));
        memcpy(sum, hg, sizeof(float) * (size_t)used);
        read_used(flat, 4, used, snap);
        th_check(!wgml_adamw_set_apply(o, 0) && !wgml_graph_run(g), "held run %d: %s", k, wgml_last_error(T.ctx));
        read_used(flat, 4, used, cur);
        th_check(memcmp(snap, cur, sizeof(float) * (size_t)used * 4) == 0,
                 "adamw accum %d: a held run changes neither params, m, v nor the grads", k);
        /* micro-batch 2 adds to the grads (as the backward does), then the applied run */
        adamw_grads(gv, offs, hg, used, 1.0, k == 1 ? offs[1] + 3 : -1);
        for (int64_t i = 0; i < used; i++) sum[i] += hg[i];
        for (int i = 0; i < NP; i++)
            wgml_tensor_write(gv[i], sum + offs[i], sizeof(float) * (size_t)wgml_tensor_numel(gv[i]));
        th_check(!wgml_adamw_set_apply(o, 1) && !wgml_graph_run(g), "applied run %d: %s", k, wgml_last_error(T.ctx));
        ref_step(&r, sum, (float)c.lr, (float)c.weight_decay, c.beta1, c.beta2, c.eps, c.max_grad_norm);
        read_used(flat, 4, used, cur);
        th_exact_u32(k == 1 ? "adamw accum: the grads are zero after a skipped (NaN) step"
                            : "adamw accum: the grads are zero after the applied step",
                     (const uint32_t *)(cur + 3 * used), zero, (size_t)used);
    }
    adamw_compare("adamw accum: 3 steps of 2 micro-batches, the second skipped (NaN)", o, &r);
    free(sum); free(zero);
out:
    free(p0); free(hg); free(snap); free(cur); free(r.p); free(r.m); free(r.v);
    wgml_adamw_free(o);
    wgml_graph_free(g);
}

/* +inf is non-finite too: the step is skipped; the first finite step after it is step 1
 * (t was not advanced), checked against the reference run without the bad step. */
static void test_adamw_inf(void) {
    wgml_adamw_config c = wgml_adamw_defaults();
    c.capacity = 64;
    c.lr = 0.05;
    wgml_optimizer *o = wgml_adamw_new(T.g, &c);
    int64_t n = 7;
    wgml_tensor *p = wgml_adamw_param(o, 1, &n), *gr = wgml_adamw_grad(o, p);
    float hp[7], hg[7];
    th_fill_uniform(hp, 7, -1, 1);
    th_fill_uniform(hg, 7, -1, 1);
    ref_adamw r = {64, calloc(64, sizeof(double)), calloc(64, sizeof(double)), calloc(64, sizeof(double)), 0, 0, 0};
    for (int i = 0; i < 7; i++) r.p[i] = hp[i];
    float bad[7];
    memcpy(bad, hg, sizeof bad);
    bad[3] = INFINITY;
    float g64[64] = {0};
    memcpy(g64, hg, sizeof hg);
    bool ok = p && gr && !wgml_tensor_write(p, hp, sizeof hp) && !wgml_tensor_write(gr, bad, sizeof bad) &&
              !wgml_adamw_step(T.g, o) && !wgml_tensor_write(gr, hg, sizeof hg) && !wgml_adamw_step(T.g, o);
    th_check(ok, "adamw inf steps: %s", wgml_last_error(T.ctx));
    g64[3] = INFINITY;
    ref_step(&r, g64, (float)c.lr, (float)c.weight_decay, c.beta1, c.beta2, c.eps, 0);
    g64[3] = hg[3];
    ref_step(&r, g64, (float)c.lr, (float)c.weight_decay, c.beta1, c.beta2, c.eps, 0);
    float got[7];
    double want[7];
    th_check(!wgml_tensor_read(p, got, sizeof got), "read params");
    for (int i = 0; i < 7; i++) want[i] = r.p[i];
    th_close("adamw: +inf step skipped, next step is t = 1", got, want, 7, 2e-6, 1e-5);
    int64_t taken = -1, skipped = -1;
    th_check(!wgml_adamw_stats(o, &taken, &skipped, NULL) && taken == 1 && skipped == 1,
             "adamw +inf: taken %lld skipped %lld, want 1 1", (long long)taken, (long long)skipped);
    free(r.p); free(r.m); free(r.v);
    wgml_adamw_free(o);
}

static void test_adamw_errors(void) {
    wgml_adamw_config c = wgml_adamw_defaults();
    th_expect_error("adamw capacity 0", wgml_adamw_new(T.g, &c) == NULL, WGML_ERR_ARG, "adamw_new", "capacity", NULL);
    c.capacity = 192;
    c.beta2 = 1.0;
    th_expect_error("adamw beta2 1", wgml_adamw_new(T.g, &c) == NULL, WGML_ERR_ARG, "adamw_new", "betas", NULL);
    c.beta2 = 0.999;
    c.eps = -1;
    th_expect_error("adamw eps -1", wgml_adamw_new(T.g, &c) == NULL, WGML_ERR_ARG, "adamw_new", "eps", NULL);
    c.eps = 1e-8;
    c.lr = NAN;
    th_expect_error("adamw lr NaN", wgml_adamw_new(T.g, &c) == NULL, WGML_ERR_ARG, "adamw_new", "lr", NULL);
    c.lr = 1e-3;
    th_expect_error("adamw NULL config", wgml_adamw_new(T.g, NULL) == NULL, WGML_ERR_ARG, "config", NULL);
    wgml_optimizer *o = wgml_adamw_new(T.g, &c);
    th_check(o != NULL, "adamw_new with capacity 192: %s", wgml_last_error(T.ctx));
    th_expect_error("adamw step without parameters", wgml_adamw_step(T.g, o) != WGML_OK, WGML_ERR_STATE,
                    "adamw_step", "no parameters", NULL);
    int64_t s100 = 100, s20 = 20;
    wgml_tensor *p = wgml_adamw_param(o, 1, &s100);
    th_check(p && wgml_tensor_numel(p) == 100, "adamw_param [100]");
    th_expect_error("adamw param over capacity", wgml_adamw_param(o, 1, &s100) == NULL, WGML_ERR_LIMIT, "adamw_param",
                    "[100]", "64 of the capacity 192", NULL);
    wgml_tensor *q = wgml_adamw_param(o, 1, &s20);
    th_check(q != NULL, "adamw_param [20] fits the rest: %s", wgml_last_error(T.ctx));
    wgml_tensor *other = th_tensor_f32(1, &s20, (float[20]){0});
    th_expect_error("adamw grad of a non-parameter", wgml_adamw_grad(o, other) == NULL, WGML_ERR_ARG, "adamw_grad",
                    "not a parameter", NULL);
    th_expect_error("adamw negative lr", wgml_adamw_set_lr(o, -1) != WGML_OK, WGML_ERR_ARG, "set_lr", NULL);
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    th_expect_error("adamw step in another graph", wgml_adamw_step(g2, o) != WGML_OK, WGML_ERR_ARG, "adamw_step",
                    "another graph", NULL);
    th_expect_error("adamw step NULL optimizer", wgml_adamw_step(T.g, NULL) != WGML_OK, WGML_ERR_ARG, "adamw_step",
                    NULL);
    wgml_graph_free(g2);
    wgml_tensor_free(other);
    wgml_adamw_free(o);
}

/* ------------------------------------------------------------------ SGD (same buffers) */

/* One torch.optim.SGD step (dampening 0, not Nesterov; after clip_grad_norm_ when max_norm > 0)
 * in double, buf kept in r->m; a step with a non-finite gradient is skipped (the optimizer's
 * shared rule). */
static void ref_sgd(ref_adamw *r, const float *g, double lr, double wd, double momentum, double max_norm) {
    double coef;
    if (!ref_clip(r, g, max_norm, &coef)) return;
    for (int64_t i = 0; i < r->n; i++) {
        double d = g[i] * coef + wd * r->p[i];
        r->m[i] = r->t == 1 ? d : momentum * r->m[i] + d;
        r->p[i] -= lr * r->m[i];
    }
}

/* Eager SGD, momentum 0.9 (0 in a second optimizer), weight decay 0.01, lr 0.05 then 0.02
 * from step 4, clipping at norm 30 (the gradient norms grow from ~10 to ~100 over the
 * steps), a NaN gradient at step 6 (skipped); the gradients of two parameters come through
 * wgml_adamw_copy_grad from ordinary tensors, the others are written into their views. */
static void test_sgd_eager(void) {
    for (int variant = 0; variant < 2; variant++) {
        wgml_adamw_config c = wgml_adamw_defaults();
        c.lr = 0.05;
        c.weight_decay = 0.01;
        c.momentum = variant ? 0 : 0.9;
        c.max_grad_norm = 30;
        c.capacity = adamw_capacity();
        wgml_optimizer *o = wgml_adamw_new(T.g, &c);
        wgml_tensor *pv[NP], *gv[NP];
        int64_t offs[NP], used = c.capacity;
        float *p0 = malloc(sizeof(float) * (size_t)used), *hg = malloc(sizeof(float) * (size_t)used);
        if (!th_check(o && adamw_setup(o, pv, gv, offs, p0, used), "sgd setup: %s", wgml_last_error(T.ctx))) {
            wgml_adamw_free(o);
            free(p0); free(hg);
            return;
        }
        ref_adamw r = {used, calloc((size_t)used, sizeof(double)), calloc((size_t)used, sizeof(double)),
                       calloc((size_t)used, sizeof(double)), 0, 0, 0};
        for (int64_t i = 0; i < used; i++) r.p[i] = p0[i];
        for (int k = 0; k < STEPS; k++) {
            double lr = k < 4 ? 0.05 : 0.02;
            if (k == 4) th_check(!wgml_adamw_set_lr(o, lr), "sgd set_lr: %s", wgml_last_error(T.ctx));
            th_check(adamw_grads(gv, offs, hg, used, 0.1 * (k + 1), k == 6 ? offs[1] + 3 : -1), "sgd grads: %s",
                     wgml_last_error(T.ctx));
            /* parameters 0 and 3 get their gradients from tensors of their own, copied in */
            wgml_tensor *own[2] = {NULL, NULL};
            for (int q = 0; q < 2; q++) {
                int i = q ? 3 : 0;
                own[q] = th_tensor_f32(P_RANK[i], P_SHAPE[i], hg + offs[i]);
                th_check(!wgml_fill(T.g, gv[i], NAN) && own[q] && !wgml_adamw_copy_grad(T.g, o, pv[i], own[q]),
                         "sgd copy_grad: %s", wgml_last_error(T.ctx));
            }
            th_check(!wgml_sgd_step(T.g, o), "sgd_step: %s", wgml_last_error(T.ctx));
            wgml_tensor_free(own[0]);
            wgml_tensor_free(own[1]);
            ref_sgd(&r, hg, (float)lr, (float)c.weight_decay, (float)c.momentum, (float)c.max_grad_norm);
        }
        wgml_sync(T.ctx);
        int64_t cap = wgml_tensor_numel(wgml_adamw_buffer(o, WGML_ADAMW_PARAMS));
        float *gp = malloc(sizeof(float) * (size_t)cap), *gm = malloc(sizeof(float) * (size_t)cap);
        th_check(!wgml_tensor_read(wgml_adamw_buffer(o, WGML_ADAMW_PARAMS), gp, sizeof(float) * (size_t)cap) &&
                     !wgml_tensor_read(wgml_adamw_buffer(o, WGML_ADAMW_M), gm, sizeof(float) * (size_t)cap),
                 "sgd: read the flat buffers: %s", wgml_last_error(T.ctx));
        char nm[96];
        snprintf(nm, sizeof nm, "sgd momentum %g: params", c.momentum);
        th_close(nm, gp, r.p, (size_t)used, 1e-6, 1e-5);
        snprintf(nm, sizeof nm, "sgd momentum %g: momentum buffer", c.momentum);
        th_close(nm, gm, r.m, (size_t)used, 1e-6, 1e-5);
        int64_t taken = -1, skipped = -1;
        th_check(!wgml_adamw_stats(o, &taken, &skipped, NULL) && taken == r.t && skipped == r.skipped,
                 "sgd stats: taken %lld skipped %lld, want %lld %lld", (long long)taken, (long long)skipped,
                 (long long)r.t, (long long)r.skipped);
        free(gp); free(gm); free(p0); free(hg); free(r.p); free(r.m); free(r.v);
        wgml_adamw_free(o);
    }
}

/* copy_grad refuses a gradient of another shape or dtype, and a tensor that is not a parameter. */
static void test_copy_grad_errors(void) {
    wgml_adamw_config c = wgml_adamw_defaults();
    c.capacity = 128;
    wgml_optimizer *o = wgml_adamw_new(T.g, &c);
    int64_t s10 = 10, s11 = 11;
    wgml_tensor *p = o ? wgml_adamw_param(o, 1, &s10) : NULL;
    wgml_tensor *g11 = th_tensor_f32(1, &s11, (float[11]){0}), *g10 = th_tensor_f32(1, &s10, (float[10]){0});
    th_expect_error("copy_grad of another shape", wgml_adamw_copy_grad(T.g, o, p, g11) != WGML_OK, WGML_ERR_SHAPE,
                    "adamw_copy_grad", "[11]", "[10]", NULL);
    th_expect_error("copy_grad to a non-parameter", wgml_adamw_copy_grad(T.g, o, g11, g10) != WGML_OK, WGML_ERR_ARG,
                    "adamw_grad", "not a parameter", NULL);
    c.momentum = -1;
    th_expect_error("sgd momentum -1", wgml_adamw_new(T.g, &c) == NULL, WGML_ERR_ARG, "adamw_new", "momentum", NULL);
    wgml_tensor_free(g10);
    wgml_tensor_free(g11);
    wgml_adamw_free(o);
}

int main(int argc, char **argv) {
    th_init_args("test_optimizer", argc, argv);
    double t0 = now();
    test_adamw_eager();
    test_adamw_graph();
    test_adamw_inf();
    test_adamw_accum();
    test_adamw_errors();
    test_sgd_eager();
    test_copy_grad_errors();
    printf("  adamw and sgd cases: %.1f s\n", now() - t0);
    return th_done();
}
