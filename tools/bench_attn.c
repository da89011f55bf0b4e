/* wgml bench attention: causal grouped-query attention at the shape of a SmolLM2-135M training
 * step (B = 8, Hq = 9, Hkv = 3, S = 512, D = 64; options change it). Times the forward
 * (wgml_sdpa) and forward + backward (wgml_sdpa_backward) as built graphs of back-to-back
 * calls (wgml_graph_benchmark: 0.3 s warm-up, best of 5), after checking sampled output rows
 * and gradient rows against a double-precision reference. FLOPs counted as the causal half of
 * the products (forward: q·kᵀ and p·v, 2·2·B·Hq·S²·D / 2; backward: the recomputed q·kᵀ and
 * dout·vᵀ, dq, dk and dv, 2.5 times the forward). --profile prints the per-kernel GPU time of
 * one forward + backward; --forward times the forward alone. $WGML_SDPA_TILE and $WGML_SDPA_SPLIT
 * select the forward tile and key split. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct attn_shape {
    int64_t B, Hq, Hkv, S, D;
} attn_shape;

/* Reference for query row (b, h, i): the attention output o[D] and, given dout, dq[D]; also
 * accumulates this row's contribution to dk, dv of its kv head (rows [S, D], zeroed by the
 * caller) when they are not NULL. Scores in double, causal mask j <= i. */
static void ref_row(const attn_shape *a, const float *q, const float *k, const float *v, const float *dout, int64_t b,
                    int64_t h, int64_t i, double *o, double *dq, double *dk, double *dv) {
    int64_t S = a->S, D = a->D, hk = h / (a->Hq / a->Hkv);
    const float *qr = q + ((b * a->Hq + h) * S + i) * D;
    const float *kb = k + (b * a->Hkv + hk) * S * D, *vb = v + (b * a->Hkv + hk) * S * D;
    double scale = 1.0 / sqrt((double)D), mx = -INFINITY, z = 0;
    double *p = malloc(sizeof(double) * (size_t)(i + 1));
    if (!p) return;
    for (int64_t j = 0; j <= i; j++) {
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)qr[d] * kb[j * D + d];
        p[j] = s * scale;
        if (p[j] > mx) mx = p[j];
    }
    for (int64_t j = 0; j <= i; j++) z += (p[j] = exp(p[j] - mx));
    for (int64_t d = 0; d < D; d++) o[d] = 0;
    for (int64_t j = 0; j <= i; j++) {
        p[j] /= z;
        for (int64_t d = 0; d < D; d++) o[d] += p[j] * vb[j * D + d];
    }
    if (dout && dq) {
        const float *g = dout + ((b * a->Hq + h) * S + i) * D;
        double delta = 0;
        for (int64_t d = 0; d < D; d++) delta += (double)g[d] * o[d];
        for (int64_t d = 0; d < D; d++) dq[d] = 0;
        for (int64_t j = 0; j <= i; j++) {
            double dp = 0;
            for (int64_t d = 0; d < D; d++) dp += (double)g[d] * vb[j * D + d];
            double ds = p[j] * (dp - delta) * scale;
            for (int64_t d = 0; d < D; d++) {
                dq[d] += ds * kb[j * D + d];
                if (dk) dk[j * D + d] += ds * qr[d];
                if (dv) dv[j * D + d] += p[j] * g[d];
            }
        }
    }
    free(p);
}

/* max |got - ref| over the row, relative to the row's largest |ref| (plus 1e-3: the inputs are
 * O(1), and dq of query 0 is 0) */
static int check_close(const float *got, const double *ref, int64_t n, double tol_rel, double *worst) {
    double mag = 0;
    for (int64_t d = 0; d < n; d++) mag = fmax(mag, fabs(ref[d]));
    int ok = 1;
    for (int64_t d = 0; d < n; d++) {
        double e = fabs((double)got[d] - ref[d]) / (mag + 1e-3); /* a row's values are exactly 0 at i = 0 */
        if (!(e <= tol_rel)) ok = 0;
        if (e > *worst || e != e) *worst = e;
    }
    return ok;
}

typedef struct attn_opts {
    attn_shape a;
    int reps, profile, forward_only, cpu;
} attn_opts;

/* 0, or 2 after the usage or the range line. */
static int parse_attn_opts(int argc, char **argv, int cpu, attn_opts *o) {
    *o = (attn_opts){.a = {8, 9, 3, 512, 64}, .reps = cpu ? 1 : 10, .cpu = cpu};
    attn_shape *a = &o->a;
    if (cpu) a->B = 1, a->S = 128;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) a->B = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc) a->S = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc) a->Hq = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--kv-heads") && i + 1 < argc) a->Hkv = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc) a->D = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--forward")) o->forward_only = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) o->reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile")) o->profile = 1;
        else {
            fprintf(stderr, "usage: wgml bench attention [--batch B] [--seq S] [--heads H] [--kv-heads H] [--dim D] "
                            "[--forward] [--reps N] [--profile]\n");
            return 2;
        }
    }
    if (a->B < 1 || a->S < 1 || a->S > 8192 || o->reps < 1 || o->reps > 100 || a->Hq < 1 || a->Hkv < 1 || a->Hq % a->Hkv ||
        a->D < 1 || a->D > 1024) {
        fprintf(stderr, "bench attention: --batch >= 1, --seq 1..8192, --heads a multiple of --kv-heads, --dim 1..1024, "
                        "--reps 1..100\n");
        return 2;
    }
    return 0;
}

/* The host side: the inputs (q, k, v, dout), what is read back (got, gotk), the reference rows'
 * scratch (o, dq; dk, dv of one kv head) and the generator the sampled rows are drawn from. */
typedef struct attn_host {
    int64_t nq, nk;
    float *hq, *hk, *hv, *hg, *got, *gotk;
    double *o, *dq, *dk, *dv;
    uint64_t seed;
} attn_host;

static void attn_host_free(attn_host *x) {
    free(x->hq), free(x->hk), free(x->hv), free(x->hg), free(x->got), free(x->gotk);
    free(x->o), free(x->dq), free(x->dk), free(x->dv);
}

/* Random inputs: 0, or 1 after a message. */
static int attn_host_new(const attn_shape *a, attn_host *x) {
    int64_t nq = x->nq = a->B * a->Hq * a->S * a->D, nk = x->nk = a->B * a->Hkv * a->S * a->D;
    x->hq = malloc(sizeof(float) * (size_t)nq), x->hk = malloc(sizeof(float) * (size_t)nk);
    x->hv = malloc(sizeof(float) * (size_t)nk), x->hg = malloc(sizeof(float) * (size_t)nq);
    x->got = malloc(sizeof(float) * (size_t)nq), x->gotk = malloc(sizeof(float) * (size_t)nk);
    x->o = malloc(sizeof(double) * (size_t)a->D), x->dq = malloc(sizeof(double) * (size_t)a->D);
    x->dk = calloc((size_t)(a->S * a->D), sizeof(double)), x->dv = calloc((size_t)(a->S * a->D), sizeof(double));
    if (!x->hq || !x->hk || !x->hv || !x->hg || !x->got || !x->gotk || !x->o || !x->dq || !x->dk || !x->dv) {
        fprintf(stderr, "bench attention: out of host memory\n");
        return 1;
    }
    x->seed = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < nq; i++) x->hq[i] = bench_frand(&x->seed), x->hg[i] = bench_frand(&x->seed);
    for (int64_t i = 0; i < nk; i++) x->hk[i] = bench_frand(&x->seed), x->hv[i] = bench_frand(&x->seed);
    return 0;
}

/* Case c's check: 8 sampled query rows (out, and dq for the backward) and, for the backward,
 * dk of one kv head over all its rows. 1 when within tolerance; *worst: the largest error. */
static int attn_check(int c, const attn_shape *a, attn_host *x, wgml_tensor *out, wgml_tensor *gq, wgml_tensor *gk, double *worst) {
    /* the gradients' f32 error grows with the D-long dot products inside them (2e-4 held to D = 64;
     * D = 256 measured 3.1e-4) */
    double grow = a->D > 64 ? (double)a->D / 64 : 1;
    int good = !wgml_tensor_read(c == 0 ? out : gq, x->got, sizeof(float) * (size_t)x->nq);
    for (int s = 0; good && s < 8; s++) {
        int64_t b = (int64_t)((bench_frand(&x->seed) * 0.5f + 0.5f) * (float)(a->B - 1));
        int64_t h = (int64_t)((bench_frand(&x->seed) * 0.5f + 0.5f) * (float)(a->Hq - 1));
        int64_t i = s == 0 ? 0 : s == 1 ? a->S - 1 : (int64_t)((bench_frand(&x->seed) * 0.5f + 0.5f) * (float)(a->S - 1));
        ref_row(a, x->hq, x->hk, x->hv, c ? x->hg : NULL, b, h, i, x->o, x->dq, NULL, NULL);
        good = check_close(x->got + ((b * a->Hq + h) * a->S + i) * a->D, c ? x->dq : x->o, a->D, c ? 2e-4 * grow : 2e-4, worst);
    }
    if (good && c == 1) {
        int64_t b = a->B - 1, hk0 = 0, rep = a->Hq / a->Hkv;
        good = !wgml_tensor_read(gk, x->gotk, sizeof(float) * (size_t)x->nk);
        for (int64_t h = hk0 * rep; good && h < (hk0 + 1) * rep; h++)
            for (int64_t i = 0; i < a->S; i++) ref_row(a, x->hq, x->hk, x->hv, x->hg, b, h, i, x->o, x->dq, x->dk, NULL);
        for (int64_t j = 0; good && j < a->S; j++)
            good = check_close(x->gotk + ((b * a->Hkv + hk0) * a->S + j) * a->D, x->dk + j * a->D, a->D, 5e-4 * grow, worst);
    }
    return good;
}

/* Case c (0: the forward, 1: forward + backward): reps calls in one graph, timed, then checked;
 * its row of the table. Returns 1 when it failed or its check did. */
static int attn_case(wgml_ctx *ctx, int c, const attn_opts *op, attn_host *x, double fwd_flop) {
    const attn_shape *a = &op->a;
    wgml_graph *g = wgml_graph_new(ctx);
    int64_t sq[4] = {a->B, a->Hq, a->S, a->D}, sk[4] = {a->B, a->Hkv, a->S, a->D};
    wgml_tensor *q = wgml_tensor_new(g, WGML_F32, 4, sq), *k = wgml_tensor_new(g, WGML_F32, 4, sk);
    wgml_tensor *v = wgml_tensor_new(g, WGML_F32, 4, sk), *dout = wgml_tensor_new(g, WGML_F32, 4, sq);
    wgml_tensor *out = NULL, *gq = NULL, *gk = NULL, *gv = NULL;
    int ok = q && k && v && dout && !wgml_tensor_write(q, x->hq, sizeof(float) * (size_t)x->nq) &&
             !wgml_tensor_write(k, x->hk, sizeof(float) * (size_t)x->nk) &&
             !wgml_tensor_write(v, x->hv, sizeof(float) * (size_t)x->nk) &&
             !wgml_tensor_write(dout, x->hg, sizeof(float) * (size_t)x->nq);
    for (int r = 0; ok && r < op->reps; r++) {
        ok = (out = wgml_sdpa(g, q, k, v, 1, 0.0f)) != NULL;
        if (ok && c == 1) ok = !wgml_sdpa_backward(g, q, k, v, out, dout, 1, 0.0f, &gq, &gk, &gv);
    }
    double best = 0;
    ok = ok && !wgml_graph_keep(g, out) && (c == 0 || (!wgml_graph_keep(g, gq) && !wgml_graph_keep(g, gk))) &&
         !wgml_graph_compile(g) && !wgml_graph_benchmark(g, op->cpu ? 0.0 : 0.3, op->cpu ? 1 : 5, &best, NULL);
    if (!ok) {
        fprintf(stderr, "bench attention: %s\n", wgml_last_error(ctx));
        wgml_graph_free(g);
        return 1;
    }
    double worst = 0;
    int good = attn_check(c, a, x, out, gq, gk, &worst), failed = !good;
    double per = best / op->reps, flop = c == 0 ? fwd_flop : 3.5 * fwd_flop;
    printf("%-28s %10.3f %10.2f %s (%.1e)\n", c == 0 ? "sdpa forward" : "sdpa forward + backward", per * 1e3,
           flop / per * 1e-12, good ? "ok" : "FAIL", worst);
    if (op->profile && c == 1 && bench_profile_print(g, "attention forward + backward", 10)) failed = 1;
    wgml_graph_free(g);
    return failed;
}

int bench_attn_main(wgml_ctx *ctx, int argc, char **argv) {
    wgml_device_info info;
    wgml_device_get_info(ctx, &info);
    attn_opts op;
    if (parse_attn_opts(argc, argv, strcmp(info.type, "CPU") == 0, &op)) return 2;
    const attn_shape *a = &op.a;
    attn_host x = {0};
    int failed = attn_host_new(a, &x);
    if (!failed) {
        double fwd_flop = 2.0 * 2.0 * (double)(a->B * a->Hq) * (double)a->S * (double)a->S * (double)a->D / 2.0;
        const char *tile = getenv("WGML_SDPA_TILE");
        printf("attention B=%lld Hq=%lld Hkv=%lld S=%lld D=%lld causal f32; %d calls per graph run; tile %s\n",
               (long long)a->B, (long long)a->Hq, (long long)a->Hkv, (long long)a->S, (long long)a->D, op.reps,
               tile ? tile : "auto");
        printf("%-28s %10s %10s %s\n", "case", "ms", "TFLOP/s", "check (max rel. error)");
        for (int c = 0; c < 2 - op.forward_only; c++) failed |= attn_case(ctx, c, &op, &x, fwd_flop);
    }
    attn_host_free(&x);
    return failed;
}
