#define _POSIX_C_SOURCE 200809L
/* Training operators: fused cross-entropy against plain double-precision loops.
 * cross_entropy: masked rows, all rows masked, vocab 49,152 with few rows, 70,000 rows of a
 * small vocab (more than 65,535 workgroups), logits spanning ±40, a grad scale, loss only, a
 * label >= V (eager: an error naming the row; built graph: ignored and flagged in the status
 * tensor), a built graph run twice, bad input; where n_valid is counted (inline in the row
 * workgroups for R <= V/4 with dlogits, else a count dispatch) with the dispatches of each
 * form, a single valid label and every row ignored in both, 1,200 row workgroups counting
 * inline, and a graph run repeatedly giving the same loss and dlogits bits in both forms.
 * The optimizer (AdamW, SGD): test_optimizer.c.
 * Run with --dump DIR, tests/py/test_torch_train.py checks the same cases against PyTorch. */
#include "harness.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wall_clock.h"

/* ------------------------------------------------------------------ cross-entropy */

/* loss and dlogits in double; labels outside [0, V) are ignored rows. Returns n_valid. */
static int64_t ref_ce(const float *x, const int32_t *lab, int64_t rows, int64_t v, double scale, double *loss,
                      double *dl) {
    int64_t n_valid = 0;
    for (int64_t r = 0; r < rows; r++) n_valid += lab[r] >= 0 && lab[r] < v;
    double sum = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * v;
        bool valid = lab[r] >= 0 && lab[r] < v;
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < v; j++) m = fmax(m, row[j]);
        for (int64_t j = 0; j < v; j++) z += exp(row[j] - m);
        double lse = m + log(z);
        if (valid) sum += lse - row[lab[r]];
        if (dl)
            for (int64_t j = 0; j < v; j++)
                dl[r * v + j] = valid ? (exp(row[j] - lse) - (j == lab[r])) * scale / (double)n_valid : 0.0;
    }
    *loss = n_valid ? sum / (double)n_valid : 0.0;
    return n_valid;
}

static int n_ce_dumped;

/* Random logits in [lo, hi], labels in [0, V) with a share of ignored rows (-100 and -1).
 * mask: fraction of ignored rows (1: all; 2: all but row rows / 2). scale < 0: no grad_scale
 * tensor. */
static void case_ce(int64_t rows, int64_t v, double mask, double lo, double hi, double scale, bool with_d) {
    int64_t shape[2] = {rows, v};
    float *hx = th_random((size_t)(rows * v), lo, hi);
    int32_t *hl = malloc(sizeof(int32_t) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        hl[r] = (int32_t)th_uniform(0, (double)v);
        if (hl[r] >= v) hl[r] = (int32_t)v - 1;
        if (th_uniform(0, 1) < mask) hl[r] = th_uniform(0, 1) < 0.5 ? -100 : -1;
    }
    if (mask > 0 && rows > 2) { /* at least one row of each ignored form */
        hl[1] = -100;
        hl[rows - 1] = -1;
    }
    if (mask >= 1) /* 1: every row ignored; 2: every row but one */
        for (int64_t r = 0; r < rows; r++) hl[r] = mask >= 2 && r == rows / 2 ? (int32_t)(v / 3) : -100;
    wgml_tensor *x = th_tensor_f32(2, shape, hx), *l = th_tensor_i32(1, &rows, hl), *sc = NULL;
    float fs = (float)(scale < 0 ? 1 : scale);
    if (scale >= 0) {
        int64_t one = 1;
        sc = th_tensor_f32(1, &one, &fs);
    }
    wgml_ce_options opt = {sc, NULL};
    wgml_tensor *dl = NULL;
    double t0 = now();
    wgml_tensor *loss = wgml_cross_entropy_ex(T.g, x, l, &opt, with_d ? &dl : NULL);
    float *gl = th_read_f32(loss), *gd = with_d && dl ? th_read_f32(dl) : NULL;
    double dt = now() - t0;
    double rl, *rd = with_d ? malloc(sizeof(double) * (size_t)(rows * v)) : NULL;
    int64_t nv = ref_ce(hx, hl, rows, v, fs, &rl, rd);
    char name[200];
    snprintf(name, sizeof name, "cross_entropy [%lld, %lld] %lld valid%s%s (%.0f ms)", (long long)rows, (long long)v,
             (long long)nv, sc ? " scaled" : "", with_d ? "" : " loss only", dt * 1e3);
    /* fp32: lse carries ~1e-7 of relative error of its magnitude (up to |hi| + log V) */
    double amax = fmax(fabs(lo), fabs(hi)) + log((double)v);
    th_close(name, gl, &rl, 1, 2e-6 * amax, 1e-5);
    if (with_d) {
        /* dlogits = (p - onehot) / n_valid with p good to ~1e-6 absolute */
        double atol = 2e-6 * fs / (double)(nv ? nv : 1);
        snprintf(name, sizeof name, "  dlogits [%lld, %lld]", (long long)rows, (long long)v);
        th_close(name, gd, rd, (size_t)(rows * v), atol, 1e-4);
        if (nv == 0) { /* all ignored: exactly zero */
            bool zero = true;
            for (int64_t i = 0; i < rows * v; i++) zero = zero && gd[i] == 0.0f;
            th_check(zero && gl[0] == 0.0f, "all rows ignored: loss and dlogits are exactly 0");
        }
    } else {
        th_check(dl == NULL, "loss only: no dlogits");
    }
    if (th_dumping()) {
        char cn[32];
        snprintf(cn, sizeof cn, "ce%d", n_ce_dumped++);
        float prm[2] = {fs, with_d ? 1.0f : 0.0f};
        int64_t two = 2;
        th_dump(cn, "logits", WGML_F32, 2, shape, hx);
        th_dump(cn, "labels", WGML_I32, 1, &rows, hl);
        th_dump(cn, "params", WGML_F32, 1, &two, prm);
        th_dump_tensor(cn, "loss", loss);
        if (with_d) th_dump_tensor(cn, "dlogits", dl);
    }
    free(hx); free(hl); free(gl); free(gd); free(rd);
    wgml_tensor_free(x); wgml_tensor_free(l); wgml_tensor_free(sc); wgml_tensor_free(loss); wgml_tensor_free(dl);
}

/* logits [B, S, V] with labels [B, S]: the leading dims flatten to rows. */
static void test_ce_rank3(void) {
    int64_t shape[3] = {3, 5, 64}, lshape[2] = {3, 5}, rows = 15, v = 64;
    float *hx = th_random((size_t)(rows * v), -4, 4);
    int32_t hl[15];
    for (int i = 0; i < 15; i++) hl[i] = i % 4 == 1 ? -100 : (i * 13) % 64;
    wgml_tensor *x = th_tensor_f32(3, shape, hx), *l = th_tensor_i32(2, lshape, hl), *dl = NULL;
    wgml_tensor *loss = wgml_cross_entropy(T.g, x, l, &dl);
    float *gl = th_read_f32(loss), *gd = dl ? th_read_f32(dl) : NULL;
    double rl, rd[15 * 64];
    int64_t nv = ref_ce(hx, hl, rows, v, 1, &rl, rd);
    th_check(dl && wgml_tensor_rank(dl) == 3 && wgml_tensor_dim(dl, 1) == 5, "rank-3 dlogits keep logits' shape");
    th_close("cross_entropy [3, 5, 64] labels [3, 5]: loss", gl, &rl, 1, 2e-5, 1e-5);
    th_close("cross_entropy [3, 5, 64] labels [3, 5]: dlogits", gd, rd, (size_t)(rows * v), 2e-6 / (double)nv, 1e-4);
    free(hx); free(gl); free(gd);
    wgml_tensor_free(x); wgml_tensor_free(l); wgml_tensor_free(loss); wgml_tensor_free(dl);
}

/* The autograd rule (dlogits_out NULL in a built graph): y = 1.5·x from a trainable x, loss =
 * cross_entropy(y), wgml_backward with d(loss) = 0.5 gives x the gradient 1.5·0.5·dlogits. */
static void test_ce_rule(void) {
    int64_t shape[2] = {6, 96}, rows = 6, v = 96;
    float *hx = th_random((size_t)(rows * v), -3, 3), *hy = malloc(sizeof(float) * (size_t)(rows * v));
    int32_t hl[6] = {5, -100, 95, 0, 40, 7};
    for (int64_t i = 0; i < rows * v; i++) hy[i] = 1.5f * hx[i];
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, shape), *l = wgml_tensor_new(g, WGML_I32, 1, &rows);
    bool ok = x && l && !wgml_tensor_set_trainable(x, 1);
    wgml_tensor *loss = ok ? wgml_cross_entropy(g, wgml_mul_scalar(g, x, 1.5f), l, NULL) : NULL;
    ok = loss && !wgml_graph_keep(g, loss) && !wgml_backward(g, loss, 0.5f) && !wgml_graph_compile(g) &&
         !wgml_tensor_write(x, hx, sizeof(float) * (size_t)(rows * v)) && !wgml_tensor_write(l, hl, sizeof hl) &&
         !wgml_graph_run(g);
    th_check(ok, "cross_entropy rule graph: %s", wgml_last_error(T.ctx));
    if (ok) {
        float gl[1], *gd = th_read_f32(wgml_tensor_grad(x));
        double rl, rd[6 * 96];
        int64_t nv = ref_ce(hy, hl, rows, v, 1, &rl, rd);
        for (int64_t i = 0; i < rows * v; i++) rd[i] *= 1.5 * 0.5;
        th_check(!wgml_tensor_read(loss, gl, sizeof gl), "read the loss");
        th_close("cross_entropy rule: loss", gl, &rl, 1, 2e-5, 1e-5);
        th_close("cross_entropy rule: d(loss)/dx", gd, rd, (size_t)(rows * v), 2e-6 / (double)nv, 1e-4);
        free(gd);
    }
    free(hx);
    free(hy);
    wgml_graph_free(g);
}

/* A built graph with a grad scale and a status tensor, run twice; the second run has labels
 * >= V, which are treated as ignored and reported. */
static void test_ce_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t rows = 37, v = 1000, shape[2] = {37, 1000}, one = 1, three = 3;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, shape), *l = wgml_tensor_new(g, WGML_I32, 1, &rows);
    wgml_tensor *sc = wgml_tensor_new(g, WGML_F32, 1, &one), *st = wgml_tensor_new(g, WGML_I32, 1, &three);
    wgml_ce_options opt = {sc, st};
    wgml_tensor *dl = NULL, *loss = wgml_cross_entropy_ex(g, x, l, &opt, &dl);
    th_check(loss && dl && !wgml_graph_keep(g, loss) && !wgml_graph_keep(g, dl) && !wgml_graph_compile(g),
             "cross_entropy graph builds and compiles: %s", wgml_last_error(T.ctx));
    /* 37 rows <= 1000 / 4: the row workgroups count n_valid, then the sum (no count dispatch) */
    th_check(wgml_graph_dispatch_count(g) == 2, "cross_entropy with R <= V/4 is 2 dispatches (got %zu)",
             wgml_graph_dispatch_count(g));
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(rows * v), -8, 8), fs = run ? 0.25f : 1.0f;
        int32_t hl[37];
        for (int64_t r = 0; r < rows; r++) hl[r] = r % 7 == 3 ? -100 : (int32_t)((r * 7919 + run * 131) % v);
        if (run) {
            hl[5] = (int32_t)v + 3;
            hl[20] = 5000;
        }
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)(rows * v));
        wgml_tensor_write(l, hl, sizeof hl);
        wgml_tensor_write(sc, &fs, sizeof fs);
        th_check(!wgml_graph_run(g), "cross_entropy graph run: %s", wgml_last_error(T.ctx));
        float gl, *gd = malloc(sizeof(float) * (size_t)(rows * v));
        int32_t gs[3];
        th_check(!wgml_tensor_read(loss, &gl, sizeof gl) && !wgml_tensor_read(dl, gd, sizeof(float) * (size_t)(rows * v)) &&
                     !wgml_tensor_read(st, gs, sizeof gs),
                 "read cross_entropy graph outputs: %s", wgml_last_error(T.ctx));
        double rl, *rd = malloc(sizeof(double) * (size_t)(rows * v));
        int64_t nv = ref_ce(hx, hl, rows, v, fs, &rl, rd);
        char nm[100];
        snprintf(nm, sizeof nm, "graph run %d: cross_entropy loss", run + 1);
        th_close(nm, &gl, &rl, 1, 2e-5, 1e-5);
        snprintf(nm, sizeof nm, "graph run %d: cross_entropy dlogits (scale %g)", run + 1, (double)fs);
        th_close(nm, gd, rd, (size_t)(rows * v), 2e-6 * fs / (double)nv, 1e-4);
        int32_t want[3] = {run ? 2 : 0, run ? 5 : -1, (int32_t)nv};
        th_check(memcmp(gs, want, sizeof want) == 0, "graph run %d: status [%d, %d, %d], want [%d, %d, %d]", run + 1,
                 gs[0], gs[1], gs[2], want[0], want[1], want[2]);
        free(hx); free(gd); free(rd);
    }
    wgml_graph_free(g);
}

/* A built graph whose logits are an intermediate (so logits, the statistics and the per-row
 * losses share the arena), no options and no dlogits; a label >= V is ignored there. */
static void test_ce_graph_arena(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t rows = 50, v = 300, shape[2] = {50, 300};
    wgml_tensor *xin = wgml_tensor_new(g, WGML_F32, 2, shape), *l = wgml_tensor_new(g, WGML_I32, 1, &rows);
    wgml_tensor *x = wgml_mul_scalar(g, xin, 2.0f);
    wgml_tensor *loss = wgml_cross_entropy(g, x, l, NULL);
    th_check(loss && !wgml_graph_keep(g, loss) && !wgml_graph_compile(g), "cross_entropy arena graph: %s",
             wgml_last_error(T.ctx));
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(rows * v), -3, 3);
        int32_t hl[50];
        for (int64_t r = 0; r < rows; r++) hl[r] = r % 5 == 0 ? -100 : (int32_t)((r * 37 + run) % v);
        if (run) hl[7] = 1 << 30;
        wgml_tensor_write(xin, hx, sizeof(float) * (size_t)(rows * v));
        wgml_tensor_write(l, hl, sizeof hl);
        float gl = NAN;
        th_check(!wgml_graph_run(g) && !wgml_tensor_read(loss, &gl, sizeof gl), "arena graph run: %s",
                 wgml_last_error(T.ctx));
        for (int64_t i = 0; i < rows * v; i++) hx[i] *= 2.0f;
        double rl;
        ref_ce(hx, hl, rows, v, 1, &rl, NULL);
        char nm[100];
        snprintf(nm, sizeof nm, "arena graph run %d: cross_entropy loss%s", run + 1, run ? " (a label 2^30)" : "");
        th_close(nm, &gl, &rl, 1, 2e-5, 1e-5);
        free(hx);
    }
    wgml_graph_free(g);
}

/* The shaders a built graph's dispatches run, joined by spaces. */
static void graph_shaders(wgml_graph *g, char *buf, size_t cap) {
    buf[0] = 0;
    for (size_t i = 0; i < wgml_graph_dispatch_count(g); i++) {
        const char *sh = NULL;
        wgml_graph_dispatch_name(g, i, &sh);
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", len ? " " : "", sh ? sh : "?");
    }
}

/* Dispatches of one cross-entropy in a built graph: with dlogits and R <= V/4 the row
 * workgroups count n_valid themselves (no count dispatch: rows + sum); loss only is rows + sum
 * whatever R; R > V/4 with dlogits keeps the count dispatch (count + rows + sum). The label
 * statistics are always written (by the sum), checked against the host. */
static void test_ce_dispatches(void) {
    struct { int64_t rows, v; bool with_d; const char *want; } cs[] = {
        {64, 256, true, "ce_rows ce_sum"},       /* R = V/4, vec4 labels */
        {63, 256, true, "ce_rows ce_sum"},       /* scalar labels */
        {65, 256, true, "ce_count ce_rows ce_sum"},
        {300, 64, false, "ce_rows ce_sum"},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int64_t rows = cs[c].rows, v = cs[c].v, shape[2] = {rows, v}, three = 3;
        wgml_graph *g = wgml_graph_new(T.ctx);
        wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, shape), *l = wgml_tensor_new(g, WGML_I32, 1, &rows);
        wgml_tensor *st = wgml_tensor_new(g, WGML_I32, 1, &three);
        wgml_ce_options opt = {NULL, st};
        wgml_tensor *dl = NULL, *loss = wgml_cross_entropy_ex(g, x, l, &opt, cs[c].with_d ? &dl : NULL);
        bool ok = loss && !wgml_graph_keep(g, loss) && (!dl || !wgml_graph_keep(g, dl)) && !wgml_graph_compile(g);
        char got[200];
        graph_shaders(g, got, sizeof got);
        th_check(ok && !strcmp(got, cs[c].want), "cross_entropy [%lld, %lld]%s dispatches: %s (want %s)",
                 (long long)rows, (long long)v, cs[c].with_d ? "" : " loss only", got, cs[c].want);
        float *hx = th_random((size_t)(rows * v), -5, 5);
        int32_t *hl = malloc(sizeof(int32_t) * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) hl[r] = r % 3 == 0 ? -100 : (int32_t)((r * 101) % v);
        hl[rows - 2] = (int32_t)v; /* out of range: ignored and reported */
        hl[rows - 1] = (int32_t)v + 7;
        ok = ok && !wgml_tensor_write(x, hx, sizeof(float) * (size_t)(rows * v)) &&
             !wgml_tensor_write(l, hl, sizeof(int32_t) * (size_t)rows) && !wgml_graph_run(g);
        float gl = NAN, *gd = dl ? malloc(sizeof(float) * (size_t)(rows * v)) : NULL;
        int32_t gs[3] = {0, 0, 0};
        ok = ok && !wgml_tensor_read(loss, &gl, sizeof gl) && !wgml_tensor_read(st, gs, sizeof gs) &&
             (!dl || !wgml_tensor_read(dl, gd, sizeof(float) * (size_t)(rows * v)));
        th_check(ok, "cross_entropy dispatch graph runs: %s", wgml_last_error(T.ctx));
        double rl, *rd = dl ? malloc(sizeof(double) * (size_t)(rows * v)) : NULL;
        int64_t nv = ref_ce(hx, hl, rows, v, 1, &rl, rd);
        char nm[120];
        snprintf(nm, sizeof nm, "  [%lld, %lld] loss", (long long)rows, (long long)v);
        th_close(nm, &gl, &rl, 1, 2e-5, 1e-5);
        if (dl) {
            snprintf(nm, sizeof nm, "  [%lld, %lld] dlogits", (long long)rows, (long long)v);
            th_close(nm, gd, rd, (size_t)(rows * v), 2e-6 / (double)nv, 1e-4);
        }
        int32_t want[3] = {2, (int32_t)rows - 2, (int32_t)nv};
        th_check(!memcmp(gs, want, sizeof want), "  [%lld, %lld] status [%d, %d, %d], want [%d, %d, %d]",
                 (long long)rows, (long long)v, gs[0], gs[1], gs[2], want[0], want[1], want[2]);
        free(hx); free(hl); free(gd); free(rd);
        wgml_graph_free(g);
    }
}

/* Many rows counted inline (1,200 row workgroups of 256 threads, each reading all 1,200 labels:
 * more than one wave of an H200, 8 such workgroups per SM x 132 SMs), run three times in
 * one built graph, then once each with n_valid counted by the count dispatch
 * ($WGML_CE_COUNT=dispatch) and inline by workgroups of 7 rows each (inline:7; the last one
 * has 3): the loss and dlogits are the same bits every run and in every mode (the count is an
 * integer either way and the loss is summed in one fixed order). */
static void test_ce_repeat(void) {
    int64_t rows = 1200, v = 4800, shape[2] = {1200, 4800}, n = rows * v;
    float *hx = th_random((size_t)n, -6, 6);
    int32_t *hl = malloc(sizeof(int32_t) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        hl[r] = (int32_t)th_uniform(0, (double)v);
        if (hl[r] >= v) hl[r] = (int32_t)v - 1;
        if (th_uniform(0, 1) < 0.2) hl[r] = -100;
    }
    static const char *env[3] = {NULL, "dispatch", "inline:7"};
    static const char *want[3] = {"ce_rows ce_sum", "ce_count ce_rows ce_sum",
                                  "ce_rows ce_sum"};
    float loss_bits[5] = {0}, *d0 = malloc(sizeof(float) * (size_t)n), *d1 = malloc(sizeof(float) * (size_t)n);
    bool same_d = true;
    int nl = 0;
    double t0 = now();
    for (int mode = 0; mode < 3; mode++) {
        if (env[mode]) th_setenv("WGML_CE_COUNT", env[mode], 1);
        wgml_graph *g = wgml_graph_new(T.ctx);
        wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, shape), *l = wgml_tensor_new(g, WGML_I32, 1, &rows);
        wgml_tensor *dl = NULL, *loss = wgml_cross_entropy(g, x, l, &dl);
        bool ok = loss && dl && !wgml_graph_keep(g, loss) && !wgml_graph_keep(g, dl) && !wgml_graph_compile(g) &&
                  !wgml_tensor_write(x, hx, sizeof(float) * (size_t)n) &&
                  !wgml_tensor_write(l, hl, sizeof(int32_t) * (size_t)rows);
        char shaders[200];
        graph_shaders(g, shaders, sizeof shaders);
        th_check(!strcmp(shaders, want[mode]), "[1200, 4800] %s: dispatches \"%s\" (want \"%s\")",
                 env[mode] ? env[mode] : "default", shaders, want[mode]);
        for (int run = 0; ok && run < (mode ? 1 : 3); run++) {
            float *dst = run == 0 && mode == 0 ? d0 : d1;
            ok = !wgml_graph_run(g) && !wgml_tensor_read(loss, &loss_bits[nl++], sizeof(float)) &&
                 !wgml_tensor_read(dl, dst, sizeof(float) * (size_t)n);
            if (ok && dst == d1) same_d = same_d && !memcmp(d0, d1, sizeof(float) * (size_t)n);
        }
        th_check(ok, "cross_entropy [1200, 4800] graph (%s): %s", env[mode] ? env[mode] : "default",
                 wgml_last_error(T.ctx));
        wgml_graph_free(g);
        if (env[mode]) th_unsetenv("WGML_CE_COUNT");
    }
    double dt = now() - t0;
    bool same_l = nl == 5;
    for (int i = 1; i < nl; i++) same_l = same_l && !memcmp(&loss_bits[0], &loss_bits[i], 4);
    th_check(same_l,
             "cross_entropy [1200, 4800]: the same loss bits on 3 runs, with the count dispatch and inline:7 (%.9g "
             "%.9g %.9g %.9g %.9g)",
             (double)loss_bits[0], (double)loss_bits[1], (double)loss_bits[2], (double)loss_bits[3],
             (double)loss_bits[4]);
    th_check(same_d, "cross_entropy [1200, 4800]: the same dlogits bits on every run and in every count mode");
    double rl, *rd = malloc(sizeof(double) * (size_t)n);
    int64_t nv = ref_ce(hx, hl, rows, v, 1, &rl, rd);
    char nm[120];
    snprintf(nm, sizeof nm, "cross_entropy [1200, 4800] %lld valid, 5 graph runs (%.0f ms)", (long long)nv, dt * 1e3);
    th_close(nm, &loss_bits[0], &rl, 1, 2e-6 * (6 + log((double)v)), 1e-5);
    th_close("  dlogits [1200, 4800]", d0, rd, (size_t)n, 2e-6 / (double)nv, 1e-4);
    free(hx); free(hl); free(d0); free(d1); free(rd);
}

/* Inline counting with several rows per workgroup where R > V/4 (the default there is the count
 * dispatch): 5,001 rows of 8 (scalar labels) in workgroups of 64 rows, eager, against the
 * reference; and a scaled single-valid-label case in workgroups of 3 rows. */
static void test_ce_multirow(void) {
    th_setenv("WGML_CE_COUNT", "inline:64", 1);
    case_ce(5001, 8, 0.25, -4, 4, -1, true);
    th_setenv("WGML_CE_COUNT", "inline:3", 1);
    case_ce(40, 20, 2.0, -3, 3, 0.5, true);
    th_unsetenv("WGML_CE_COUNT");
}

static void test_ce_errors(void) {
    int64_t s[2] = {4, 10}, s4 = 4, s5 = 5, two = 2;
    float z[40] = {0};
    int32_t lab[5] = {1, 2, -100, 9, 0}, bad[4] = {1, 2, -100, 10};
    wgml_tensor *x = th_tensor_f32(2, s, z), *xi = th_tensor_i32(2, s, (int32_t *)z), *l = th_tensor_i32(1, &s4, lab);
    wgml_tensor *lf = th_tensor_f32(1, &s4, z), *l5 = th_tensor_i32(1, &s5, lab), *lb = th_tensor_i32(1, &s4, bad);
    wgml_tensor *sc2 = th_tensor_f32(1, &two, z), *st2 = th_tensor_i32(1, &two, lab), *stf = th_tensor_f32(1, &s5, z);
    wgml_tensor *dl = NULL;
    th_expect_error("ce NULL logits", wgml_cross_entropy(T.g, NULL, l, &dl) == NULL && dl == NULL, WGML_ERR_ARG,
                    "cross_entropy", "logits", NULL);
    th_expect_error("ce NULL labels", wgml_cross_entropy(T.g, x, NULL, &dl) == NULL, WGML_ERR_ARG, "cross_entropy",
                    "labels", NULL);
    th_expect_error("ce i32 logits", wgml_cross_entropy(T.g, xi, l, &dl) == NULL, WGML_ERR_DTYPE, "cross_entropy",
                    "logits", NULL);
    th_expect_error("ce f32 labels", wgml_cross_entropy(T.g, x, lf, &dl) == NULL, WGML_ERR_DTYPE, "cross_entropy",
                    "labels", NULL);
    th_expect_error("ce labels shape", wgml_cross_entropy(T.g, x, l5, &dl) == NULL, WGML_ERR_SHAPE, "cross_entropy",
                    "labels [5]", "[4, 10]", NULL);
    th_expect_error("ce label >= V (eager)", wgml_cross_entropy(T.g, x, lb, &dl) == NULL && dl == NULL, WGML_ERR_ARG,
                    "cross_entropy", "labels[3]", "row 3", "is 10", "vocab 10", NULL);
    wgml_ce_options o1 = {sc2, NULL}, o2 = {NULL, st2}, o3 = {NULL, stf};
    th_expect_error("ce grad_scale [2]", wgml_cross_entropy_ex(T.g, x, l, &o1, &dl) == NULL, WGML_ERR_SHAPE,
                    "cross_entropy", "grad_scale [2]", NULL);
    th_expect_error("ce status [2]", wgml_cross_entropy_ex(T.g, x, l, &o2, &dl) == NULL, WGML_ERR_SHAPE,
                    "cross_entropy", "status [2]", NULL);
    th_expect_error("ce status f32", wgml_cross_entropy_ex(T.g, x, l, &o3, &dl) == NULL, WGML_ERR_DTYPE,
                    "cross_entropy", "status", NULL);
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    wgml_tensor *l2 = wgml_tensor_new(g2, WGML_I32, 1, &s4);
    th_expect_error("ce labels of another graph", wgml_cross_entropy(T.g, x, l2, &dl) == NULL, WGML_ERR_ARG,
                    "cross_entropy", NULL);
    wgml_graph_free(g2);
    wgml_tensor *ts[] = {x, xi, l, lf, l5, lb, sc2, st2, stf};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) wgml_tensor_free(ts[i]);
}

int main(int argc, char **argv) {
    th_init_args("test_train_ops", argc, argv);
    double t0 = now();
    case_ce(6, 49152, 0.34, -6, 6, -1, true);    /* vocab much larger than a workgroup, masked rows */
    case_ce(37, 129, 0.3, -3, 3, -1, true);      /* scalar rows (V % 4 != 0) */
    case_ce(16, 1000, 1.0, -3, 3, -1, true);     /* every row ignored */
    case_ce(24, 512, 0.2, -40, 40, 0.25, true);  /* logits spanning ±40, grad scale */
    case_ce(70000, 8, 0.1, -4, 4, -1, true);     /* more than 65,535 workgroups */
    case_ce(9, 4097, 0.2, -5, 5, -1, false);     /* loss only */
    case_ce(100, 64, 1.0, -3, 3, -1, true);      /* every row ignored, n_valid from the count dispatch */
    case_ce(40, 300, 2.0, -3, 3, 0.5, true);     /* a single valid label, counted inline (scalar) */
    case_ce(400, 72, 2.0, -3, 3, -1, true);      /* a single valid label, count dispatch */
    printf("  cross_entropy cases: %.1f s\n", now() - t0);
    test_ce_rank3();
    test_ce_rule();
    test_ce_graph();
    test_ce_graph_arena();
    test_ce_dispatches();
    t0 = now();
    test_ce_repeat();
    test_ce_multirow();
    printf("  cross_entropy repeat and multi-row: %.1f s\n", now() - t0);
    test_ce_errors();
    return th_done();
}
