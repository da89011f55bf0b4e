#define _POSIX_C_SOURCE 200809L
/* Fused LM head + cross-entropy (wgml_lmhead_ce, wgml_lmhead_ce_qweight) against plain double loops:
 * loss and d_h for f32, symmetric 4-bit (with bias) and Q8_0 head weights; ignored rows (-100,
 * -1), every row ignored, a vocabulary that is not a multiple of the chunk (and a last chunk of
 * odd width: the scalar path), a single chunk, D not a multiple of 4, a grad scale, rank-3 h,
 * 70,000 rows (more than 65,535 workgroups per dispatch), agreement with the unfused
 * wgml_linear + wgml_cross_entropy on the GPU, a built graph run twice (label >= V ignored and
 * reported), the autograd rule through wgml_backward, and bad input. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

/* loss and d_h = d(loss)/dh · scale in double from h [R, D], W [V, D]; labels outside [0, V)
 * are ignored rows. Returns n_valid. */
static int64_t ref_lmhead_ce(const float *h, const float *w, const float *bias, const int32_t *lab, int64_t rows,
                             int64_t d, int64_t v, double scale, double *loss, double *dh) {
    int64_t nv = 0;
    for (int64_t r = 0; r < rows; r++) nv += lab[r] >= 0 && lab[r] < v;
    double sum = 0, *z = malloc(sizeof(double) * (size_t)v);
    for (int64_t r = 0; r < rows; r++) {
        bool valid = lab[r] >= 0 && lab[r] < v;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < v; j++) {
            double a = bias ? bias[j] : 0;
            for (int64_t k = 0; k < d; k++) a += (double)h[r * d + k] * w[j * d + k];
            z[j] = a;
            m = fmax(m, a);
        }
        for (int64_t j = 0; j < v; j++) s += exp(z[j] - m);
        double lse = m + log(s);
        if (valid) sum += lse - z[lab[r]];
        if (dh) {
            for (int64_t k = 0; k < d; k++) dh[r * d + k] = 0;
            if (!valid) continue;
            for (int64_t j = 0; j < v; j++) {
                double gj = (exp(z[j] - lse) - (j == lab[r])) * scale / (double)nv;
                for (int64_t k = 0; k < d; k++) dh[r * d + k] += gj * w[j * d + k];
            }
        }
    }
    free(z);
    *loss = nv ? sum / (double)nv : 0.0;
    return nv;
}

static void make_labels(int32_t *hl, int64_t rows, int64_t v, double mask) {
    for (int64_t r = 0; r < rows; r++) {
        hl[r] = (int32_t)th_uniform(0, (double)v);
        if (hl[r] >= v) hl[r] = (int32_t)v - 1;
        if (th_uniform(0, 1) < mask) hl[r] = th_uniform(0, 1) < 0.5 ? -100 : -1;
    }
    if (mask > 0 && rows > 2) hl[1] = -100, hl[rows - 1] = -1;
    if (mask >= 1)
        for (int64_t r = 0; r < rows; r++) hl[r] = -100;
}

/* A head weight on graph g: kind 0 f32, 1 symmetric 4-bit (group 32, with bias), 2 Q8_0.
 * deq gets the values the GPU uses, bias the bias (kind 1) or NULL. */
typedef struct head {
    wgml_tensor *f;
    wgml_qweight *q;
    float *deq, *bias;
} head;

static head make_head(wgml_graph *g, int kind, int64_t v, int64_t d, double wscale) {
    head hd = {0};
    hd.deq = malloc(sizeof(float) * (size_t)(v * d));
    if (kind == 0) {
        th_fill_uniform(hd.deq, (size_t)(v * d), -wscale, wscale);
        int64_t s[2] = {v, d};
        hd.f = g ? wgml_tensor_new(g, WGML_F32, 2, s) : th_tensor_f32(2, s, hd.deq);
        if (g) wgml_tensor_write(hd.f, hd.deq, sizeof(float) * (size_t)(v * d));
    } else if (kind == 1) {
        float *wf = th_random((size_t)(v * d), -wscale, wscale);
        int64_t ng = (d + 31) / 32, kb = (d + 1) / 2, pn = (v + 3) / 4 * 4;
        uint8_t *codes = malloc((size_t)(v * kb));
        float *scales = malloc(sizeof(float) * (size_t)(ng * pn));
        hd.bias = th_random((size_t)v, -0.5, 0.5);
        th_check(wgml_q4gsw_quantize(wf, v, d, 32, codes, scales) == WGML_OK &&
                     wgml_q4gsw_dequantize(codes, scales, v, d, 32, hd.deq) == WGML_OK,
                 "q4gsw quantize");
        hd.q = wgml_qweight_upload_q4gsw(g ? g : T.g, codes, scales, hd.bias, v, d, 32);
        free(wf), free(codes), free(scales);
    } else {
        int64_t nb = v * d / 32;
        uint8_t *blk = malloc((size_t)nb * 34);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *p = blk + b * 34;
            /* d in [2^-9, 2^-8) * wscale-ish: fp16 exponent field 6, random mantissa */
            uint16_t hb = (uint16_t)((6u << 10) | ((uint32_t)th_uniform(0, 1024) & 0x3FF));
            p[0] = (uint8_t)hb, p[1] = (uint8_t)(hb >> 8);
            for (int j = 2; j < 34; j++) p[j] = (uint8_t)th_uniform(0, 256);
        }
        th_check(wgml_gguf_dequantize(WGML_GGML_Q8_0, blk, (size_t)nb * 34, v, d, hd.deq) == WGML_OK, "Q8_0 dequantize");
        hd.q = wgml_qweight_upload_gguf(g ? g : T.g, WGML_GGML_Q8_0, blk, (size_t)nb * 34, v, d);
        free(blk);
    }
    th_check(hd.f || hd.q, "head weight kind %d [%lld, %lld]: %s", kind, (long long)v, (long long)d,
             wgml_last_error(T.ctx));
    return hd;
}

static void head_free(head *hd) {
    wgml_tensor_free(hd->f);
    wgml_qweight_free(hd->q);
    free(hd->deq), free(hd->bias);
}

static wgml_tensor *call(wgml_graph *g, wgml_tensor *h, const head *hd, wgml_tensor *l, int64_t chunk,
                         const wgml_ce_options *opt, wgml_tensor **dh) {
    return hd->q ? wgml_lmhead_ce_qweight(g, h, hd->q, l, chunk, opt, dh) : wgml_lmhead_ce(g, h, hd->f, l, chunk, opt, dh);
}

static const char *KIND[] = {"f32", "q4sym+bias", "q8_0"};

static double amax_of(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* One eager case. scale < 0: no grad_scale tensor. */
static void case_lmhead_ce(int kind, int64_t rows, int64_t d, int64_t v, int64_t chunk, double mask, double scale,
                           bool with_d) {
    head hd = make_head(NULL, kind, v, d, 0.5);
    float *hh = th_random((size_t)(rows * d), -2, 2);
    int32_t *hl = malloc(sizeof(int32_t) * (size_t)rows);
    make_labels(hl, rows, v, mask);
    int64_t hs[2] = {rows, d}, one = 1;
    float fs = (float)(scale < 0 ? 1 : scale);
    wgml_tensor *h = th_tensor_f32(2, hs, hh), *l = th_tensor_i32(1, &rows, hl);
    wgml_tensor *sc = scale >= 0 ? th_tensor_f32(1, &one, &fs) : NULL, *dh = NULL;
    wgml_ce_options opt = {sc, NULL};
    double t0 = now();
    wgml_tensor *loss = call(T.g, h, &hd, l, chunk, &opt, with_d ? &dh : NULL);
    float *gl = th_read_f32(loss), *gd = with_d && dh ? th_read_f32(dh) : NULL;
    double dt = now() - t0;
    double rl, *rd = with_d ? malloc(sizeof(double) * (size_t)(rows * d)) : NULL;
    double t1 = now();
    int64_t nv = ref_lmhead_ce(hh, hd.deq, hd.bias, hl, rows, d, v, fs, &rl, rd);
    double dr = now() - t1;
    char name[240];
    snprintf(name, sizeof name, "lmhead_ce %s h [%lld, %lld] V %lld chunk %lld, %lld valid%s%s (%.0f ms, ref %.0f ms)",
             KIND[kind], (long long)rows, (long long)d, (long long)v, (long long)chunk, (long long)nv,
             sc ? " scaled" : "", with_d ? "" : " loss only", dt * 1e3, dr * 1e3);
    /* logits up to ~|h|·|w|·D; fp32 lse and dot products carry ~1e-6 relative of that */
    th_close(name, gl, &rl, 1, 1e-5 * (1 + sqrt((double)d)), 1e-5);
    if (with_d) {
        snprintf(name, sizeof name, "  d_h [%lld, %lld]", (long long)rows, (long long)d);
        double am = amax_of(rd, (size_t)(rows * d));
        th_close(name, gd, rd, (size_t)(rows * d), 2e-4 * (am > 0 ? am : 1), 1e-3);
        if (nv == 0) {
            bool zero = true;
            for (int64_t i = 0; i < rows * d; i++) zero = zero && gd && gd[i] == 0.0f;
            th_check(zero && gl && gl[0] == 0.0f, "all rows ignored: loss and d_h are exactly 0");
        }
    } else {
        th_check(dh == NULL, "loss only: no d_h");
    }
    free(hh), free(hl), free(gl), free(gd), free(rd);
    wgml_tensor_free(h), wgml_tensor_free(l), wgml_tensor_free(sc), wgml_tensor_free(loss), wgml_tensor_free(dh);
    head_free(&hd);
}

/* The fused op against the unfused GPU path on the same inputs: logits = wgml_linear(h, W),
 * wgml_cross_entropy(logits) -> loss, dlogits; d_h = dlogits · W. */
static void test_vs_unfused(void) {
    int64_t rows = 64, d = 48, v = 777, hs[2] = {rows, d}, ws[2] = {v, d};
    float *hh = th_random((size_t)(rows * d), -2, 2), *hw = th_random((size_t)(v * d), -0.5, 0.5);
    int32_t hl[64];
    make_labels(hl, rows, v, 0.2);
    wgml_tensor *h = th_tensor_f32(2, hs, hh), *w = th_tensor_f32(2, ws, hw), *l = th_tensor_i32(1, &rows, hl);
    wgml_tensor *dh = NULL, *dl = NULL;
    wgml_tensor *loss = wgml_lmhead_ce(T.g, h, w, l, 128, NULL, &dh);
    wgml_tensor *logits = wgml_linear(T.g, h, w, NULL);
    wgml_tensor *uloss = wgml_cross_entropy(T.g, logits, l, &dl);
    wgml_tensor *udh = dl ? wgml_mm(T.g, dl, w) : NULL;
    float *a = th_read_f32(loss), *b = th_read_f32(uloss), *da = th_read_f32(dh), *db = th_read_f32(udh);
    if (a && b && da && db) {
        double rb = b[0], *rdb = malloc(sizeof(double) * (size_t)(rows * d));
        for (int64_t i = 0; i < rows * d; i++) rdb[i] = db[i];
        th_close("fused loss = unfused linear + cross_entropy loss", a, &rb, 1, 2e-5, 1e-5);
        th_close("fused d_h = unfused dlogits · W", da, rdb, (size_t)(rows * d), 1e-4 * amax_of(rdb, (size_t)(rows * d)),
                 1e-3);
        free(rdb);
    } else {
        th_check(false, "unfused comparison ran: %s", wgml_last_error(T.ctx));
    }
    free(hh), free(hw), free(a), free(b), free(da), free(db);
    wgml_tensor_free(h), wgml_tensor_free(w), wgml_tensor_free(l), wgml_tensor_free(dh), wgml_tensor_free(dl);
    wgml_tensor_free(loss), wgml_tensor_free(logits), wgml_tensor_free(uloss), wgml_tensor_free(udh);
}

/* h [3, 5, D] with labels [3, 5]: d_h keeps h's shape. */
static void test_rank3(void) {
    int64_t hs[3] = {3, 5, 16}, ls[2] = {3, 5}, rows = 15, d = 16, v = 130;
    head hd = make_head(NULL, 0, v, d, 0.5);
    float *hh = th_random((size_t)(rows * d), -1, 1);
    int32_t hl[15];
    for (int i = 0; i < 15; i++) hl[i] = i % 4 == 1 ? -100 : (i * 13) % 130;
    wgml_tensor *h = th_tensor_f32(3, hs, hh), *l = th_tensor_i32(2, ls, hl), *dh = NULL;
    wgml_tensor *loss = wgml_lmhead_ce(T.g, h, hd.f, l, 64, NULL, &dh);
    float *gl = th_read_f32(loss), *gd = th_read_f32(dh);
    double rl, rd[15 * 16];
    ref_lmhead_ce(hh, hd.deq, NULL, hl, rows, d, v, 1, &rl, rd);
    th_check(dh && wgml_tensor_rank(dh) == 3 && wgml_tensor_dim(dh, 1) == 5, "rank-3 d_h keeps h's shape");
    th_close("lmhead_ce h [3, 5, 16] labels [3, 5]: loss", gl, &rl, 1, 5e-5, 1e-5);
    th_close("lmhead_ce h [3, 5, 16]: d_h", gd, rd, 240, 2e-4 * amax_of(rd, 240), 1e-3);
    free(hh), free(gl), free(gd);
    wgml_tensor_free(h), wgml_tensor_free(l), wgml_tensor_free(loss), wgml_tensor_free(dh);
    head_free(&hd);
}

/* A built graph (grad scale, status) run twice; the second run has labels >= V, ignored and
 * reported. Then a graph where h is trainable and d_h comes from wgml_backward (the rule). */
static void test_graph(int kind) {
    int64_t rows = 50, d = 64, v = 300, hs[2] = {rows, d}, one = 1, three = 3;
    wgml_graph *g = wgml_graph_new(T.ctx);
    head hd = make_head(g, kind, v, d, 0.5);
    wgml_tensor *h = wgml_tensor_new(g, WGML_F32, 2, hs), *l = wgml_tensor_new(g, WGML_I32, 1, &rows);
    wgml_tensor *sc = wgml_tensor_new(g, WGML_F32, 1, &one), *st = wgml_tensor_new(g, WGML_I32, 1, &three);
    wgml_ce_options opt = {sc, st};
    wgml_tensor *dh = NULL, *loss = call(g, h, &hd, l, 128, &opt, &dh);
    th_check(loss && dh && !wgml_graph_keep(g, loss) && !wgml_graph_keep(g, dh) && !wgml_graph_compile(g),
             "lmhead_ce %s graph builds and compiles: %s", KIND[kind], wgml_last_error(T.ctx));
    for (int run = 0; run < 2; run++) {
        float *hh = th_random((size_t)(rows * d), -2, 2), fs = run ? 0.25f : 1.0f;
        int32_t hl[50];
        for (int64_t r = 0; r < rows; r++) hl[r] = r % 7 == 3 ? -100 : (int32_t)((r * 7919 + run * 131) % v);
        if (run) hl[5] = (int32_t)v + 3, hl[20] = 5000;
        wgml_tensor_write(h, hh, sizeof(float) * (size_t)(rows * d));
        wgml_tensor_write(l, hl, sizeof hl);
        wgml_tensor_write(sc, &fs, sizeof fs);
        th_check(!wgml_graph_run(g), "lmhead_ce graph run: %s", wgml_last_error(T.ctx));
        float gl = NAN, gd[50 * 64];
        int32_t gs[3] = {0};
        th_check(!wgml_tensor_read(loss, &gl, sizeof gl) && !wgml_tensor_read(dh, gd, sizeof gd) &&
                     !wgml_tensor_read(st, gs, sizeof gs),
                 "read lmhead_ce graph outputs: %s", wgml_last_error(T.ctx));
        double rl, rd[50 * 64];
        int64_t nv = ref_lmhead_ce(hh, hd.deq, hd.bias, hl, rows, d, v, fs, &rl, rd);
        char nm[120];
        snprintf(nm, sizeof nm, "graph %s run %d: loss", KIND[kind], run + 1);
        th_close(nm, &gl, &rl, 1, 1e-4, 1e-5);
        snprintf(nm, sizeof nm, "graph %s run %d: d_h (scale %g)", KIND[kind], run + 1, (double)fs);
        th_close(nm, gd, rd, 50 * 64, 2e-4 * amax_of(rd, 50 * 64), 1e-3);
        int32_t want[3] = {run ? 2 : 0, run ? 5 : -1, (int32_t)nv};
        th_check(memcmp(gs, want, sizeof want) == 0, "graph run %d: status [%d, %d, %d], want [%d, %d, %d]", run + 1,
                 gs[0], gs[1], gs[2], want[0], want[1], want[2]);
        free(hh);
        if (run == 1) { /* the same inputs again: the same bits (fixed-order sums only) */
            float gl2 = NAN, gd2[50 * 64];
            int32_t gs2[3] = {0};
            bool ok = !wgml_graph_run(g) && !wgml_tensor_read(loss, &gl2, sizeof gl2) &&
                      !wgml_tensor_read(dh, gd2, sizeof gd2) && !wgml_tensor_read(st, gs2, sizeof gs2);
            th_check(ok && !memcmp(&gl, &gl2, sizeof gl) && !memcmp(gd, gd2, sizeof gd) && !memcmp(gs, gs2, sizeof gs),
                     "graph %s run 3 (run 2's inputs): the same loss, d_h and status bits (%.9g vs %.9g)", KIND[kind],
                     (double)gl2, (double)gl);
        }
    }
    head_free(&hd);
    wgml_graph_free(g);

    /* autograd: h a trainable leaf; h2 = 2·h feeds the op; wgml_backward(loss, 3) */
    g = wgml_graph_new(T.ctx);
    hd = make_head(g, kind, v, d, 0.5);
    h = wgml_tensor_new(g, WGML_F32, 2, hs);
    l = wgml_tensor_new(g, WGML_I32, 1, &rows);
    wgml_tensor_set_trainable(h, 1);
    wgml_tensor *h2 = wgml_mul_scalar(g, h, 2.0f);
    loss = call(g, h2, &hd, l, 64, NULL, NULL);
    wgml_status s = loss ? wgml_graph_keep(g, loss) : WGML_ERR_ARG;
    if (!s) s = wgml_backward(g, loss, 3.0f);
    wgml_tensor *gh = s ? NULL : wgml_tensor_grad(h);
    th_check(gh && !wgml_graph_compile(g), "lmhead_ce %s autograd graph: %s", KIND[kind], wgml_last_error(T.ctx));
    for (int run = 0; run < 2 && gh; run++) {
        float *hh = th_random((size_t)(rows * d), -1, 1), *h2h = malloc(sizeof(float) * (size_t)(rows * d));
        for (int64_t i = 0; i < rows * d; i++) h2h[i] = 2.0f * hh[i];
        int32_t hl[50];
        make_labels(hl, rows, v, 0.3);
        wgml_tensor_write(h, hh, sizeof(float) * (size_t)(rows * d));
        wgml_tensor_write(l, hl, sizeof hl);
        float gl = NAN, gd[50 * 64];
        th_check(!wgml_graph_run(g) && !wgml_tensor_read(loss, &gl, sizeof gl) && !wgml_tensor_read(gh, gd, sizeof gd),
                 "autograd graph run: %s", wgml_last_error(T.ctx));
        double rl, rd[50 * 64];
        ref_lmhead_ce(h2h, hd.deq, hd.bias, hl, rows, d, v, 6.0, &rl, rd); /* d/dh = 2 · 3 · d/dh2 */
        char nm[120];
        snprintf(nm, sizeof nm, "autograd %s run %d: loss", KIND[kind], run + 1);
        th_close(nm, &gl, &rl, 1, 1e-4, 1e-5);
        snprintf(nm, sizeof nm, "autograd %s run %d: grad of h through wgml_backward", KIND[kind], run + 1);
        th_close(nm, gd, rd, 50 * 64, 2e-4 * amax_of(rd, 50 * 64), 1e-3);
        free(hh), free(h2h);
    }
    head_free(&hd);
    wgml_graph_free(g);
}

/* No [R, V] tensor: a built graph's intermediates (scratch, accumulator, d_h, statistics)
 * stay well below the logits' bytes, and the dispatch count is 2 per chunk for the loss alone
 * and 3 per chunk with d_h (plus the input's mul_scalar, the sum, which also counts n_valid,
 * and the d_h finish; no count dispatch). */
static void test_memory(void) {
    int64_t rows = 64, d = 32, v = 4096, hs[2] = {rows, d}, ws[2] = {v, d};
    /* the dispatch count below assumes one dispatch per chunk GEMM: no split-K reduction */
    th_setenv("WGML_MATMUL_SPLITK", "1", 1);
    for (int with_d = 0; with_d < 2; with_d++) {
        wgml_graph *g = wgml_graph_new(T.ctx);
        wgml_tensor *h = wgml_tensor_new(g, WGML_F32, 2, hs), *w = wgml_tensor_new(g, WGML_F32, 2, ws);
        wgml_tensor *l = wgml_tensor_new(g, WGML_I32, 1, &rows), *dh = NULL;
        wgml_tensor *loss = wgml_lmhead_ce(g, wgml_mul_scalar(g, h, 1.0f), w, l, 256, NULL, with_d ? &dh : NULL);
        bool ok = loss && !wgml_graph_keep(g, loss) && (!dh || !wgml_graph_keep(g, dh)) && !wgml_graph_compile(g);
        uint64_t arena = wgml_graph_arena_bytes(g), logits = (uint64_t)(rows * v * 4);
        size_t nd = wgml_graph_dispatch_count(g), want = 1 + (with_d ? 3 : 2) * 16 + 1 + (with_d ? 1 : 0);
        th_check(ok && arena * 4 < logits, "%s: arena %llu bytes < 1/4 of the %llu bytes of logits", with_d ? "with d_h" : "loss only",
                 (unsigned long long)arena, (unsigned long long)logits);
        th_check(nd == want, "%s: %zu dispatches (want %zu)", with_d ? "with d_h" : "loss only", nd, want);
        int n_count = 0, n_sum = 0;
        for (size_t i = 0; i < nd; i++) {
            const char *sh = NULL;
            wgml_graph_dispatch_name(g, i, &sh);
            n_count += sh && !strcmp(sh, "ce_count");
            n_sum += sh && !strcmp(sh, "ce_sum");
        }
        th_check(n_count == 0 && n_sum == 1, "%s: no ce_count dispatch (%d) and one ce_sum (%d)",
                 with_d ? "with d_h" : "loss only", n_count, n_sum);
        printf("  memory %s: arena %llu bytes (logits would be %llu), %zu dispatches\n", with_d ? "with d_h" : "loss only",
               (unsigned long long)arena, (unsigned long long)logits, nd);
        wgml_graph_free(g);
    }
    th_unsetenv("WGML_MATMUL_SPLITK");
}

static void test_errors(void) {
    int64_t hs[2] = {4, 8}, ws[2] = {100, 8}, w2s[2] = {100, 7}, four = 4, three = 3, two = 2;
    float hh[32] = {0}, hw[800] = {0}, hw2[700] = {0};
    int32_t hl[4] = {1, 2, -100, 99}, bad[4] = {1, 100, 2, 3};
    wgml_tensor *h = th_tensor_f32(2, hs, hh), *w = th_tensor_f32(2, ws, hw), *w7 = th_tensor_f32(2, w2s, hw2);
    wgml_tensor *l = th_tensor_i32(1, &four, hl), *lbad = th_tensor_i32(1, &four, bad), *l3 = th_tensor_i32(1, &three, hl);
    wgml_tensor *lf = th_tensor_f32(1, &four, hh), *hi = th_tensor_i32(2, hs, (int32_t[32]){0});
    wgml_tensor *sc2 = th_tensor_f32(1, &two, hh), *dh = NULL;
    th_expect_error("NULL h", !wgml_lmhead_ce(T.g, NULL, w, l, 64, NULL, &dh), WGML_ERR_ARG, "lmhead_ce", "h", NULL);
    th_check(dh == NULL, "failed call leaves d_h NULL");
    th_expect_error("NULL w", !wgml_lmhead_ce(T.g, h, NULL, l, 64, NULL, NULL), WGML_ERR_ARG, "lmhead_ce", "w", NULL);
    th_expect_error("NULL qweight w", !wgml_lmhead_ce_qweight(T.g, h, NULL, l, 64, NULL, NULL), WGML_ERR_ARG, "lmhead_ce_qweight",
                    "w is NULL", NULL);
    th_expect_error("i32 h", !wgml_lmhead_ce(T.g, hi, w, l, 64, NULL, NULL), WGML_ERR_DTYPE, "lmhead_ce", "h", NULL);
    th_expect_error("f32 labels", !wgml_lmhead_ce(T.g, h, w, lf, 64, NULL, NULL), WGML_ERR_DTYPE, "labels", NULL);
    th_expect_error("D mismatch", !wgml_lmhead_ce(T.g, h, w7, l, 64, NULL, NULL), WGML_ERR_SHAPE, "h [4, 8]",
                    "D = 7", NULL);
    th_expect_error("labels shape", !wgml_lmhead_ce(T.g, h, w, l3, 64, NULL, NULL), WGML_ERR_SHAPE, "labels [3]",
                    "h [4, 8]", NULL);
    th_expect_error("chunk 100", !wgml_lmhead_ce(T.g, h, w, l, 100, NULL, NULL), WGML_ERR_ARG, "chunk 100",
                    "multiple of 64", NULL);
    th_expect_error("chunk -64", !wgml_lmhead_ce(T.g, h, w, l, -64, NULL, NULL), WGML_ERR_ARG, "chunk -64", NULL);
    wgml_ce_options o2 = {sc2, NULL};
    th_expect_error("grad_scale [2]", !wgml_lmhead_ce(T.g, h, w, l, 64, &o2, NULL), WGML_ERR_SHAPE, "grad_scale [2]",
                    NULL);
    wgml_ce_options o3 = {NULL, l};
    th_expect_error("status i32 [4]", !wgml_lmhead_ce(T.g, h, w, l, 64, &o3, NULL), WGML_ERR_SHAPE, "status", NULL);
    th_expect_error("label >= V (eager)", !wgml_lmhead_ce(T.g, h, w, lbad, 64, NULL, NULL), WGML_ERR_ARG, "labels[1]",
                    "100", "vocab 100", NULL);
    th_check(wgml_lmhead_ce(NULL, h, w, l, 64, NULL, NULL) == NULL, "NULL graph gives NULL");
    /* another graph's weight; a trainable f32 head */
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *gw = wgml_tensor_new(g, WGML_F32, 2, ws), *gh = wgml_tensor_new(g, WGML_F32, 2, hs);
    wgml_tensor *gl = wgml_tensor_new(g, WGML_I32, 1, &four);
    th_expect_error("w of another graph", !wgml_lmhead_ce(T.g, h, gw, l, 64, NULL, NULL), WGML_ERR_ARG, "graph", NULL);
    wgml_tensor_set_trainable(gw, 1);
    th_expect_error("trainable head", !wgml_lmhead_ce(g, gh, gw, gl, 64, NULL, NULL), WGML_ERR_UNSUPPORTED, "w [100, 8]",
                    "frozen", NULL);
    wgml_graph_free(g);
    /* a broken qweight struct */
    head hq = make_head(NULL, 2, 64, 32, 0.5);
    wgml_qweight broken = *hq.q;
    broken.n = 65;
    th_expect_error("invalid qweight", !wgml_lmhead_ce_qweight(T.g, h, &broken, l, 64, NULL, NULL), WGML_ERR_ARG,
                    "not a valid", NULL);
    th_expect_error("qweight D mismatch", !wgml_lmhead_ce_qweight(T.g, h, hq.q, l, 64, NULL, NULL), WGML_ERR_SHAPE, "D = 32",
                    NULL);
    head_free(&hq);
    wgml_tensor_free(h), wgml_tensor_free(w), wgml_tensor_free(w7), wgml_tensor_free(l), wgml_tensor_free(lbad);
    wgml_tensor_free(l3), wgml_tensor_free(lf), wgml_tensor_free(hi), wgml_tensor_free(sc2);
}

int main(int argc, char **argv) {
    th_init_args("test_lmhead_ce", argc, argv);
    double t0 = now();
    /* kind, rows, D, V, chunk, mask, scale, with d_h */
    case_lmhead_ce(0, 37, 24, 1000, 256, 0.2, -1, true); /* V = 3·256 + 232 */
    case_lmhead_ce(0, 20, 13, 333, 64, 0.1, 0.5, true);  /* D % 4 != 0; last chunk 13 wide (scalar) */
    case_lmhead_ce(0, 9, 16, 200, 8192, 0.0, -1, true);  /* one chunk */
    case_lmhead_ce(0, 12, 16, 150, 64, 1.0, -1, true);   /* every row ignored */
    case_lmhead_ce(0, 33, 20, 500, 128, 0.2, -1, false); /* loss only */
    case_lmhead_ce(1, 40, 40, 300, 64, 0.2, 2.0, true);  /* 4-bit with bias, K padded to 64 */
    case_lmhead_ce(2, 48, 64, 1000, 192, 0.2, -1, true); /* Q8_0, the model's tied head format */
    case_lmhead_ce(2, 70000, 32, 64, 64, 0.1, -1, true); /* 70,000 rows: > 65,535 workgroups */
    test_vs_unfused();
    printf("  [%s done at %.1f s]\n", "test_vs_unfused", now() - t0);
    test_rank3();
    printf("  [%s done at %.1f s]\n", "test_rank3", now() - t0);
    test_graph(0);
    printf("  [%s done at %.1f s]\n", "test_graph(", now() - t0);
    test_graph(2);
    printf("  [%s done at %.1f s]\n", "test_graph(", now() - t0);
    test_graph(1);
    printf("  [%s done at %.1f s]\n", "test_graph(", now() - t0);
    test_memory();
    test_errors();
    printf("  [%s done at %.1f s]\n", "test_errors", now() - t0);
    printf("test_lmhead_ce: %.1f s\n", now() - t0);
    return th_done();
}
