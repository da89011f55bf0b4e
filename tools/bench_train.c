/* wgml bench train: tokens/s of the LoRA training step (forward, backward and AdamW in one
 * graph run) on a GGUF Llama, with the GPU time of the run from timestamps where available. */
#include "bench.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct train_opts {
    const char *path;
    wgml_train_config cfg;
    int steps, profile;
} train_opts;

/* 0, or 2 after the usage line. */
static int parse_train_opts(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.cfg = wgml_train_defaults(), .steps = 10};
    wgml_train_config *cfg = &o->cfg;
    cfg->lora_rank = 16;
    cfg->lora_alpha = 32;
    cfg->targets = WGML_TARGET_ALL;
    cfg->batch = 8;
    cfg->seq_len = 512;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) o->path = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) cfg->batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seq-len") && i + 1 < argc) cfg->seq_len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rank") && i + 1 < argc) cfg->lora_rank = atoi(argv[++i]), cfg->lora_alpha = 2.0f * cfg->lora_rank;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) o->steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile")) o->profile = 1;
        else o->path = NULL, i = argc;
    }
    if (!o->path || cfg->batch < 1 || cfg->seq_len < 2 || cfg->lora_rank < 1 || o->steps < 1) {
        fprintf(stderr, "usage: wgml bench train --model FILE [--batch N] [--seq-len N] [--rank R] [--steps N] [--profile]\n");
        return 2;
    }
    return 0;
}

/* A random batch of n tokens (xorshift over the vocabulary); each row's labels are its next
 * tokens, the last -100. */
static void random_batch(int32_t *tok, int32_t *lab, size_t n, int64_t vocab, int seq_len) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        tok[i] = (int32_t)(s % (uint64_t)vocab);
    }
    for (size_t i = 0; i < n; i++) lab[i] = (i + 1) % (size_t)seq_len ? tok[i + 1] : -100;
}

/* The timed steps: as the peer (bench/peer_train.py), 5 warm-up steps (the first is the check's
 * step, taken before), then the median of the timed steps, and the report. 0, or 1 on an error. */
static int time_steps(wgml_trainer *t, const train_opts *o, const int32_t *tok, const int32_t *lab, double t_build) {
    const wgml_train_config *cfg = &o->cfg;
    size_t n = (size_t)cfg->batch * (size_t)cfg->seq_len;
    float loss = 0;
    for (int i = 0; i < 4; i++)
        if (wgml_trainer_step(t, tok, lab, 1e-4f, &loss)) return 1;
    double *times = malloc(sizeof(double) * (size_t)o->steps);
    if (!times) return 1;
    for (int i = 0; i < o->steps; i++) {
        double a = bench_wall_now();
        if (wgml_trainer_step(t, tok, lab, 1e-4f, &loss)) {
            free(times);
            return 1;
        }
        times[i] = bench_wall_now() - a;
    }
    qsort(times, (size_t)o->steps, sizeof *times, bench_cmp_double);
    double med = times[o->steps / 2];
    printf("model %s; LoRA r=%d on all projections; batch %d x %d tokens; graph build %.2f s; %llu submits and %zu "
           "dispatches per step\n",
           o->path, cfg->lora_rank, cfg->batch, cfg->seq_len, t_build, (unsigned long long)wgml_trainer_submits_per_step(t),
           wgml_graph_dispatch_count(wgml_trainer_graph(t)));
    printf("train_step: median %.1f ms of %d (%.1f-%.1f ms), %.1f tokens/s (median), loss %.4f\n", med * 1e3, o->steps,
           times[0] * 1e3, times[o->steps - 1] * 1e3, (double)n / med, loss);
    free(times);
    if (!o->profile) return 0;
    if (bench_profile_print(wgml_trainer_graph(t), "train step", 40)) return 1;
    return wgml_trainer_eval(t, tok, lab, NULL, NULL) ||
           bench_profile_print(wgml_trainer_eval_graph(t), "eval (forward and loss)", 40);
}

int bench_train_main(wgml_ctx *ctx, int argc, char **argv) {
    train_opts o;
    if (parse_train_opts(argc, argv, &o)) return 2;
    wgml_model_options mo = {.n_ctx = o.cfg.seq_len + 1};
    wgml_model *m = wgml_model_load(ctx, o.path, &mo);
    if (!m) {
        fprintf(stderr, "bench train: %s\n", wgml_last_error(ctx));
        return 1;
    }
    double t0 = bench_wall_now();
    wgml_trainer *t = wgml_trainer_new(m, &o.cfg);
    if (!t) {
        fprintf(stderr, "bench train: %s\n", wgml_last_error(ctx));
        wgml_model_free(m);
        return 1;
    }
    double t_build = bench_wall_now() - t0;
    size_t n = (size_t)o.cfg.batch * (size_t)o.cfg.seq_len;
    int32_t *tok = malloc(sizeof(int32_t) * n), *lab = malloc(sizeof(int32_t) * n);
    if (tok && lab) random_batch(tok, lab, n, wgml_model_config(m)->n_vocab, o.cfg.seq_len);
    int rc = 1;
    float loss = 0;
    /* check: the train graph's loss (computed before its update) equals the eval graph's, two
     * separately built graphs over the same weights and batch */
    double esum = 0;
    int64_t nvalid = 0;
    if (!tok || !lab || wgml_trainer_eval(t, tok, lab, &esum, &nvalid) || nvalid <= 0) goto done;
    if (wgml_trainer_step(t, tok, lab, 1e-4f, &loss)) goto done; /* also the warm-up */
    double emean = esum / (double)nvalid;
    int check = isfinite(loss) && fabs(loss - emean) <= 1e-4 * fabs(emean) + 1e-5;
    printf("train check %s (train-graph loss %.6f, eval-graph loss %.6f)\n", check ? "ok" : "FAIL", loss, emean);
    if (time_steps(t, &o, tok, lab, t_build)) goto done;
    rc = check ? 0 : 1;
done:
    if (rc) fprintf(stderr, "bench train: %s\n", wgml_last_error(ctx));
    free(tok);
    free(lab);
    wgml_trainer_free(t);
    wgml_model_free(m);
    return rc;
}
