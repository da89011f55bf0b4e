#define _POSIX_C_SOURCE 200809L
/* Training operators: fused cross-entropy and AdamW against plain double-precision loops.
 * cross_entropy: masked rows, all rows masked, vocab 49,152 with few rows, 70,000 rows of a
 * small vocab (more than 65,535 workgroups), logits spanning ±40, a grad scale, loss only, a
 * label >= V (eager: an error naming the row; built graph: ignored and flagged in the status
 * tensor), a built graph run twice, bad input; where n_valid is counted (inline in the row
 * workgroups for R <= V/4 with dlogits, else a count dispatch) with the dispatches of each
 * form, a single valid label and every row ignored in both, 1,200 row workgroups counting
 * inline, and a graph run repeatedly giving the same loss and dlogits bits in both forms.
 * AdamW: parameters of 7, 37, 129 and 576x64 elements in the flat buffers; 10 eager steps with
 * weight decay changed at a later step and lr changed between steps; 10 runs of one built graph
 * with clipping, a cosine lr and a NaN gradient at step 5 (skipped, reported, and the next
 * step proceeds as if it never happened); zero_grad; bad input.
 * Run with --dump DIR, tests/py/test_torch_train.py checks the same cases against PyTorch. */
#include "harness.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

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
        if (env[mode]) setenv("WGML_CE_COUNT", env[mode], 1);
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
        if (env[mode]) unsetenv("WGML_CE_COUNT");
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
    setenv("WGML_CE_COUNT", "inline:64", 1);
    case_ce(5001, 8, 0.25, -4, 4, -1, true);
    setenv("WGML_CE_COUNT", "inline:3", 1);
    case_ce(40, 20, 2.0, -3, 3, 0.5, true);
    unsetenv("WGML_CE_COUNT");
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

/* One torch.optim.AdamW step (after clip_grad_norm_ when max_norm > 0) in double; a step with a
 * non-finite gradient is skipped. lr and wd are the f32 values the GPU holds. */
static void ref_step(ref_adamw *r, const float *g, double lr, double wd, double b1, double b2, double eps,
                     double max_norm) {
    double ss = 0;
    bool finite = true;
    for (int64_t i = 0; i < r->n; i++) {
        finite = finite && isfinite(g[i]);
        ss += (double)g[i] * g[i];
    }
    r->norm = sqrt(ss);
    if (!finite) {
        r->skipped++;
        return;
    }
    r->t++;
    double coef = max_norm > 0 ? fmin(1.0, max_norm / (r->norm + 1e-6)) : 1.0;
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
    float *snap = malloc(sizeof(float) * (size_t)used * 4), *now = malloc(sizeof(float) * (size_t)used * 4);
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
        read_used(flat, 4, used, now);
        th_check(memcmp(snap, now, sizeof(float) * (size_t)used * 4) == 0,
                 "adamw accum %d: a held run changes neither params, m, v nor the grads", k);
        /* micro-batch 2 adds to the grads (as the backward does), then the applied run */
        adamw_grads(gv, offs, hg, used, 1.0, k == 1 ? offs[1] + 3 : -1);
        for (int64_t i = 0; i < used; i++) sum[i] += hg[i];
        for (int i = 0; i < NP; i++)
            wgml_tensor_write(gv[i], sum + offs[i], sizeof(float) * (size_t)wgml_tensor_numel(gv[i]));
        th_check(!wgml_adamw_set_apply(o, 1) && !wgml_graph_run(g), "applied run %d: %s", k, wgml_last_error(T.ctx));
        ref_step(&r, sum, (float)c.lr, (float)c.weight_decay, c.beta1, c.beta2, c.eps, c.max_grad_norm);
        read_used(flat, 4, used, now);
        th_exact_u32(k == 1 ? "adamw accum: the grads are zero after a skipped (NaN) step"
                            : "adamw accum: the grads are zero after the applied step",
                     (const uint32_t *)(now + 3 * used), zero, (size_t)used);
    }
    adamw_compare("adamw accum: 3 steps of 2 micro-batches, the second skipped (NaN)", o, &r);
    free(sum); free(zero);
out:
    free(p0); free(hg); free(snap); free(now); free(r.p); free(r.m); free(r.v);
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
    double ss = 0;
    bool finite = true;
    for (int64_t i = 0; i < r->n; i++) {
        finite = finite && isfinite(g[i]);
        ss += (double)g[i] * g[i];
    }
    r->norm = sqrt(ss);
    if (!finite) {
        r->skipped++;
        return;
    }
    r->t++;
    double coef = max_norm > 0 ? fmin(1.0, max_norm / (r->norm + 1e-6)) : 1.0;
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
    t0 = now();
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
