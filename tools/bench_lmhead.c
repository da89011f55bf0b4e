/* wgml bench lmhead: the fused LM head + cross-entropy (wgml_lmhead_ce*) against the LM-head
 * GEMM alone and the unfused GEMM + wgml_cross_entropy, at R = 4096 rows, D = 576, V = 49152
 * (SmolLM's head) with the model's head format (Q8_0, the tied token embedding; --weight f32
 * for an f32 head). Each case is one built graph, run once with only 8 sampled rows labelled to
 * check it against a double reference (loss, d_h of those rows, logits rows for the GEMM),
 * then timed with every row labelled (wgml_graph_benchmark: 0.3 s warm-up, best of 5; GPU
 * timestamps when the adapter has them). Peak intermediates = the graph's arena bytes. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_GEMM, C_UNF_F, C_UNF_FB, C_FUSED_F, C_FUSED_FB, N_CASES };
static const char *NAMES[N_CASES] = {"LM-head GEMM alone", "unfused GEMM + cross_entropy", "unfused fwd + bwd",
                                     "fused forward", "fused forward + backward"};

typedef struct head {
    wgml_tensor *f;
    wgml_qweight *q;
} head;

/* out: the case's checked output (logits, or the loss); dh: d_h when the case has one. */
static wgml_status build(wgml_graph *g, int c, const head *w, wgml_tensor *h, wgml_tensor *l, int64_t chunk,
                         wgml_tensor **out, wgml_tensor **dh) {
    *dh = NULL;
    wgml_tensor *logits = NULL, *dl = NULL;
    switch (c) {
    case C_GEMM: *out = w->q ? wgml_qlinear(g, h, w->q) : wgml_linear(g, h, w->f, NULL); break;
    case C_UNF_F:
    case C_UNF_FB:
        logits = w->q ? wgml_qlinear(g, h, w->q) : wgml_linear(g, h, w->f, NULL);
        *out = logits ? wgml_cross_entropy(g, logits, l, c == C_UNF_FB ? &dl : NULL) : NULL;
        if (dl) *dh = w->q ? wgml_qlinear_dx(g, dl, w->q) : wgml_mm(g, dl, w->f);
        if (c == C_UNF_FB && !*dh) *out = NULL;
        break;
    default:
        *out = w->q ? wgml_lmhead_ce_qweight(g, h, w->q, l, chunk, NULL, c == C_FUSED_FB ? dh : NULL)
                    : wgml_lmhead_ce(g, h, w->f, l, chunk, NULL, c == C_FUSED_FB ? dh : NULL);
    }
    if (!*out || wgml_graph_keep(g, *out) || (*dh && wgml_graph_keep(g, *dh))) return WGML_ERR_ARG;
    return wgml_graph_compile(g);
}

/* Row r's logits in double. */
static void ref_logits(const float *hh, const float *wd, int64_t d, int64_t v, int64_t r, double *z) {
    for (int64_t j = 0; j < v; j++) {
        double a = 0;
        for (int64_t k = 0; k < d; k++) a += (double)hh[r * d + k] * wd[j * d + k];
        z[j] = a;
    }
}

/* The run's shape and head format (defaults smaller on a CPU adapter). */
typedef struct lm_opts {
    int64_t rows, d, v, chunk;
    int f32, cpu;
} lm_opts;

/* 0, or 2 after the usage line when an option or a size is off. */
static int parse_lm_opts(int argc, char **argv, int cpu, lm_opts *o) {
    *o = (lm_opts){.rows = cpu ? 128 : 4096, .d = 576, .v = cpu ? 8192 : 49152, .chunk = cpu ? 2048 : 8192, .cpu = cpu};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) o->rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc) o->d = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) o->v = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) o->chunk = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--weight") && i + 1 < argc) {
            const char *k = argv[++i];
            if (!strcmp(k, "f32")) o->f32 = 1;
            else if (!strcmp(k, "q8")) o->f32 = 0;
            else argc = -1;
        } else {
            argc = -1;
            break;
        }
    }
    if (argc < 0 || o->rows < 8 || o->d < 32 || o->d % 32 || o->v < 64 || o->chunk < 64 || o->chunk % 64) {
        fprintf(stderr, "usage: wgml bench lmhead [--rows N >= 8] [--dim D (multiple of 32)] [--vocab V >= 64]\n"
                        "                         [--chunk C (multiple of 64)] [--weight q8|f32]\n");
        return 2;
    }
    return 0;
}

/* The host side of a run: h, the head (wd as floats; blk its Q8_0 blocks), the labels (lab
 * every row, lab8 only the 8 sampled rows) and the double references of the sampled rows. */
typedef struct lm_data {
    float *hh, *wd;
    uint8_t *blk;
    int32_t *lab, *lab8;
    size_t nw, nb;
    int64_t sample[8];
    double *ref_dh, **ref_z, ref_loss;
} lm_data;

static void lm_data_free(lm_data *x) {
    for (int s = 0; x->ref_z && s < 8; s++) free(x->ref_z[s]);
    free(x->ref_z), free(x->ref_dh);
    free(x->hh), free(x->wd), free(x->blk), free(x->lab), free(x->lab8);
}

/* Random h, head and labels, and the 8 sampled rows (one in each eighth of the rows): 0, or 1
 * after a message. */
static int lm_inputs(const lm_opts *o, lm_data *x) {
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    int64_t rows = o->rows, d = o->d, v = o->v;
    x->nw = (size_t)(v * d), x->nb = (size_t)(v * d / 32);
    x->hh = malloc(sizeof(float) * (size_t)(rows * d)), x->wd = malloc(sizeof(float) * x->nw);
    x->blk = o->f32 ? NULL : malloc(x->nb * 34);
    x->lab = malloc(sizeof(int32_t) * (size_t)rows), x->lab8 = malloc(sizeof(int32_t) * (size_t)rows);
    if (!x->hh || !x->wd || (!o->f32 && !x->blk) || !x->lab || !x->lab8) {
        fprintf(stderr, "bench lmhead: out of host memory\n");
        return 1;
    }
    for (int64_t i = 0; i < rows * d; i++) x->hh[i] = 2.0f * bench_frand(&seed);
    if (o->f32) {
        for (size_t i = 0; i < x->nw; i++) x->wd[i] = 0.1f * bench_frand(&seed);
    } else { /* Q8_0 blocks: fp16 scale in [2^-10, 2^-9), random int8 codes (|w| < 0.25) */
        for (size_t b = 0; b < x->nb; b++) {
            uint8_t *p = x->blk + b * 34;
            uint16_t hb = (uint16_t)((5u << 10) | ((uint32_t)((bench_frand(&seed) + 1) * 511) & 0x3FF));
            p[0] = (uint8_t)hb, p[1] = (uint8_t)(hb >> 8);
            for (int j = 2; j < 34; j++) p[j] = (uint8_t)((bench_frand(&seed) + 1) * 127.9f);
        }
        if (wgml_gguf_dequantize(WGML_GGML_Q8_0, x->blk, x->nb * 34, v, d, x->wd)) {
            fprintf(stderr, "bench lmhead: %s\n", wgml_last_error(NULL));
            return 1;
        }
    }
    for (int64_t r = 0; r < rows; r++) x->lab[r] = (int32_t)((bench_frand(&seed) + 1) * 0.5f * (float)(v - 1)), x->lab8[r] = -100;
    for (int s = 0; s < 8; s++) {
        x->sample[s] = (int64_t)s * (rows / 8) + (int64_t)((bench_frand(&seed) + 1) * 0.5f * (float)(rows / 8 - 1));
        x->lab8[x->sample[s]] = x->lab[x->sample[s]];
    }
    return 0;
}

/* References of the sampled rows: their logits, the loss (mean over the 8) and their d_h rows. */
static int lm_references(const lm_opts *o, lm_data *x) {
    int64_t d = o->d, v = o->v;
    x->ref_dh = malloc(sizeof(double) * (size_t)(8 * d));
    x->ref_z = calloc(8, sizeof(double *));
    if (!x->ref_dh || !x->ref_z) return 1;
    for (int s = 0; s < 8; s++) {
        int64_t r = x->sample[s];
        double *z = x->ref_z[s] = malloc(sizeof(double) * (size_t)v), *dh = x->ref_dh + s * d;
        if (!z) return 1;
        ref_logits(x->hh, x->wd, d, v, r, z);
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < v; j++) m = fmax(m, z[j]);
        for (int64_t j = 0; j < v; j++) sum += exp(z[j] - m);
        double lse = m + log(sum);
        x->ref_loss += (lse - z[x->lab[r]]) / 8;
        for (int64_t k = 0; k < d; k++) dh[k] = 0;
        for (int64_t j = 0; j < v; j++) {
            double gj = (exp(z[j] - lse) - (j == x->lab[r])) / 8;
            for (int64_t k = 0; k < d; k++) dh[k] += gj * x->wd[j * d + k];
        }
    }
    return 0;
}

/* Case c's outputs against the references on the sampled rows: the logits rows (the GEMM) or the
 * d_h rows, and the loss. */
static int lm_check(int c, const lm_opts *o, const lm_data *x, wgml_tensor *out, wgml_tensor *dh) {
    int64_t d = o->d, v = o->v;
    wgml_tensor *big = c == C_GEMM ? out : dh; /* logits [R, V] or d_h [R, D] */
    size_t bytes = big ? wgml_tensor_nbytes(big) : 0;
    float *all = big ? malloc(bytes) : NULL;
    int good = !big || (all && !wgml_tensor_read(big, all, bytes));
    for (int s = 0; s < 8 && good && big; s++) {
        int64_t r = x->sample[s];
        const double *z = x->ref_z[s], *rdh = x->ref_dh + s * d;
        if (c == C_GEMM) {
            const float *row = all + r * v;
            for (int64_t j = 0; good && j < v; j++) good = fabs(row[j] - z[j]) <= 1e-4 + 1e-4 * fabs(z[j]);
        } else {
            const float *row = all + r * d;
            double am = 0;
            for (int64_t k = 0; k < d; k++) am = fmax(am, fabs(rdh[k]));
            for (int64_t k = 0; good && k < d; k++) good = fabs(row[k] - rdh[k]) <= 1e-4 * am + 1e-3 * fabs(rdh[k]);
        }
    }
    if (good && c != C_GEMM) {
        float gl = NAN;
        good = !wgml_tensor_read(out, &gl, sizeof gl) && fabs(gl - x->ref_loss) <= 1e-4 * (1 + fabs(x->ref_loss));
    }
    free(all);
    return good;
}

/* Case c: built, run once with the sampled rows labelled and checked, then timed with every row
 * labelled; its row of the table. Returns 1 when it failed or its check did (*gemm_t: the GEMM's
 * time, which the later rows are relative to). */
static int lm_case(wgml_ctx *ctx, int c, const lm_opts *o, const lm_data *x, double *gemm_t) {
    int64_t rows = o->rows, d = o->d, v = o->v;
    wgml_graph *g = wgml_graph_new(ctx);
    int64_t hs[2] = {rows, d};
    head w = {0};
    if (o->f32) {
        int64_t ws[2] = {v, d};
        w.f = wgml_tensor_new(g, WGML_F32, 2, ws);
        if (w.f && wgml_tensor_write(w.f, x->wd, sizeof(float) * x->nw)) w.f = NULL;
    } else {
        w.q = wgml_qweight_upload_gguf(g, WGML_GGML_Q8_0, x->blk, x->nb * 34, v, d);
    }
    wgml_tensor *h = wgml_tensor_new(g, WGML_F32, 2, hs), *l = wgml_tensor_new(g, WGML_I32, 1, &rows);
    wgml_tensor *out = NULL, *dh = NULL;
    double best = INFINITY;
    int failed = 0;
    int ok = (w.f || w.q) && h && l && !wgml_tensor_write(h, x->hh, sizeof(float) * (size_t)(rows * d)) &&
             !wgml_tensor_write(l, x->lab8, sizeof(int32_t) * (size_t)rows) && !build(g, c, &w, h, l, o->chunk, &out, &dh) &&
             !wgml_graph_run(g);
    if (!ok) {
        fprintf(stderr, "bench lmhead: %s: %s\n", NAMES[c], wgml_last_error(ctx));
        wgml_qweight_free(w.q);
        wgml_graph_free(g);
        return 1;
    }
    int good = lm_check(c, o, x, out, dh);
    if (wgml_tensor_write(l, x->lab, sizeof(int32_t) * (size_t)rows) ||
        wgml_graph_benchmark(g, o->cpu ? 0.0 : 0.3, o->cpu ? 1 : 5, &best, NULL)) {
        fprintf(stderr, "bench lmhead: %s: %s\n", NAMES[c], wgml_last_error(ctx));
        failed = 1;
    } else {
        if (c == C_GEMM) *gemm_t = best;
        printf("%-30s %10.3f %8.2fx %10.1f MiB %s\n", NAMES[c], best * 1e3, *gemm_t > 0 ? best / *gemm_t : 0,
               (double)wgml_graph_arena_bytes(g) / 1048576.0, good ? "ok" : "FAIL");
        fflush(stdout);
    }
    if (!good) failed = 1;
    wgml_qweight_free(w.q);
    wgml_graph_free(g);
    return failed;
}

int bench_lmhead_main(wgml_ctx *ctx, int argc, char **argv) {
    wgml_device_info info;
    wgml_device_get_info(ctx, &info);
    lm_opts o;
    if (parse_lm_opts(argc, argv, strcmp(info.type, "CPU") == 0, &o)) return 2;
    lm_data x = {0};
    int failed = lm_inputs(&o, &x) || lm_references(&o, &x);
    if (!failed) {
        printf("adapter: %s (%s, %s); h [%lld, %lld], head [%lld, %lld] %s, chunk %lld; %s\n", info.adapter, info.backend,
               info.type, (long long)o.rows, (long long)o.d, (long long)o.v, (long long)o.d, o.f32 ? "f32" : "Q8_0",
               (long long)o.chunk, info.has_timestamps ? "GPU timestamps" : "wall clock");
        printf("%-30s %10s %9s %14s %s\n", "case", "ms", "x GEMM", "peak interm.", "check");
        double gemm_t = 0;
        for (int c = 0; c < N_CASES; c++) failed |= lm_case(ctx, c, &o, &x, &gemm_t);
    }
    lm_data_free(&x);
    return failed;
}
