/* wgml bench train: tokens/s of the LoRA training step (forward, backward and AdamW in one
 * graph run) on a GGUF Llama, with the GPU time of the run from timestamps where available. */
#include "bench.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_train_main(wgml_ctx *ctx, int argc, char **argv) {
    const char *path = NULL;
    wgml_train_config cfg = wgml_train_defaults();
    cfg.lora_rank = 16;
    cfg.lora_alpha = 32;
    cfg.targets = WGML_TARGET_ALL;
    cfg.batch = 8;
    cfg.seq_len = 512;
    int steps = 10, profile = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) cfg.batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seq-len") && i + 1 < argc) cfg.seq_len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rank") && i + 1 < argc) cfg.lora_rank = atoi(argv[++i]), cfg.lora_alpha = 2.0f * cfg.lora_rank;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else path = NULL, i = argc;
    }
    if (!path || cfg.batch < 1 || cfg.seq_len < 2 || cfg.lora_rank < 1 || steps < 1) {
        fprintf(stderr, "usage: wgml bench train --model FILE [--batch N] [--seq-len N] [--rank R] [--steps N] [--profile]\n");
        return 2;
    }
    wgml_model_options mo = {.n_ctx = cfg.seq_len + 1};
    wgml_model *m = wgml_model_load(ctx, path, &mo);
    if (!m) {
        fprintf(stderr, "bench train: %s\n", wgml_last_error(ctx));
        return 1;
    }
    double t0 = bench_wall_now();
    wgml_trainer *t = wgml_trainer_new(m, &cfg);
    if (!t) {
        fprintf(stderr, "bench train: %s\n", wgml_last_error(ctx));
        wgml_model_free(m);
        return 1;
    }
    double t_build = bench_wall_now() - t0;
    size_t n = (size_t)cfg.batch * (size_t)cfg.seq_len;
    int32_t *tok = malloc(sizeof(int32_t) * n), *lab = malloc(sizeof(int32_t) * n);
    int64_t vocab = wgml_model_config(m)->n_vocab;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n && tok && lab; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        tok[i] = (int32_t)(s % (uint64_t)vocab);
    }
    for (size_t i = 0; i < n && tok && lab; i++) lab[i] = (i + 1) % (size_t)cfg.seq_len ? tok[i + 1] : -100;
    int rc = 1;
    float loss = 0;
    double *times = NULL;
    /* check: the train graph's loss (computed before its update) equals the eval graph's, two
     * separately built graphs over the same weights and batch */
    double esum = 0;
    int64_t nvalid = 0;
    if (!tok || !lab || wgml_trainer_eval(t, tok, lab, &esum, &nvalid) || nvalid <= 0) goto done;
    if (wgml_trainer_step(t, tok, lab, 1e-4f, &loss)) goto done; /* also the warm-up */
    double emean = esum / (double)nvalid;
    int check = isfinite(loss) && fabs(loss - emean) <= 1e-4 * fabs(emean) + 1e-5;
    printf("train check %s (train-graph loss %.6f, eval-graph loss %.6f)\n", check ? "ok" : "FAIL", loss, emean);
    /* as the peer (bench/peer_train.py): 5 warm-up steps (the first above), then the median
     * of the timed steps */
    for (int i = 0; i < 4; i++)
        if (wgml_trainer_step(t, tok, lab, 1e-4f, &loss)) goto done;
    times = malloc(sizeof(double) * (size_t)steps);
    if (!times) goto done;
    for (int i = 0; i < steps; i++) {
        double a = bench_wall_now();
        if (wgml_trainer_step(t, tok, lab, 1e-4f, &loss)) goto done;
        times[i] = bench_wall_now() - a;
    }
    qsort(times, (size_t)steps, sizeof *times, bench_cmp_double);
    double med = times[steps / 2];
    printf("model %s; LoRA r=%d on all projections; batch %d x %d tokens; graph build %.2f s; %llu submits per step\n",
           path, cfg.lora_rank, cfg.batch, cfg.seq_len, t_build, (unsigned long long)wgml_trainer_submits_per_step(t));
    printf("train_step: median %.1f ms of %d (%.1f-%.1f ms), %.1f tokens/s (median), loss %.4f\n", med * 1e3, steps,
           times[0] * 1e3, times[steps - 1] * 1e3, (double)n / med, loss);
    if (profile && bench_profile_print(wgml_trainer_graph(t), "train step", 40)) goto done;
    if (profile && (wgml_trainer_eval(t, tok, lab, NULL, NULL) ||
                    bench_profile_print(wgml_trainer_eval_graph(t), "eval (forward and loss)", 40)))
        goto done;
    rc = check ? 0 : 1;
done:
    if (rc) fprintf(stderr, "bench train: %s\n", wgml_last_error(ctx));
    free(times);
    free(tok);
    free(lab);
    wgml_trainer_free(t);
    wgml_model_free(m);
    return rc;
}
