/* wgml eval (perplexity of a model, with or without a LoRA adapter, on held-out text) and the
 * held-out loss that wgml finetune's evaluations share, over the public API only. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "wgml.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int eval_main(wgml_ctx *ctx, int argc, char **argv);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* cli.h: the held-out loss; rows of a batch past the requested count get no labels. */
double cli_evaluate(wgml_trainer *t, wgml_dataset *ds, int batch, int64_t max_tokens, wgml_ctx *ctx, int64_t *n_tokens) {
    int64_t rows = (max_tokens + ds->seq_len - 1) / ds->seq_len;
    if (rows > ds->n_eval) rows = ds->n_eval;
    size_t bl = (size_t)batch * (size_t)ds->seq_len;
    int32_t *in = malloc(bl * sizeof(int32_t)), *lab = malloc(bl * sizeof(int32_t));
    double sum = 0;
    int64_t n = 0;
    wgml_status s = in && lab ? WGML_OK : WGML_ERR_OOM;
    for (int64_t r = 0; r < rows && !s; r += batch) {
        wgml_data_eval_batch(ds, r, batch, in, lab);
        /* rows of this batch beyond the requested count are ignored too */
        for (int b = 0; b < batch; b++)
            if (r + b >= rows)
                for (int j = 0; j < ds->seq_len; j++) lab[(size_t)b * (size_t)ds->seq_len + (size_t)j] = -100;
        double ls = 0;
        int64_t nv = 0;
        s = wgml_trainer_eval(t, in, lab, &ls, &nv);
        sum += ls;
        n += nv;
    }
    free(in);
    free(lab);
    if (s) {
        fprintf(stderr, "\nwgml: evaluation failed: %s\n", wgml_last_error(ctx));
        return NAN;
    }
    if (n_tokens) *n_tokens = n;
    if (!n) fprintf(stderr, "\nwgml: the held-out rows evaluated hold no labels (raise --eval-tokens or --seq-len)\n");
    return n ? sum / (double)n : NAN;
}

/* wgml eval --model FILE --data TEXT|JSONL [--lora DIR] [--seq-len N] [--batch B]
 *           [--eval-fraction F | --all] [--eval-tokens N] */
typedef struct eval_opts {
    const char *model, *data, *lora;
    wgml_train_config cfg;
    double frac;
    int all;
    int64_t max_tokens;
} eval_opts;

/* wgml eval's options into e: -1 to go on, else the exit status (0 after --help). */
static int parse_eval_opts(int argc, char **argv, eval_opts *e) {
    *e = (eval_opts){.cfg = wgml_train_defaults(), .frac = 0.05, .max_tokens = INT64_MAX / 4};
    int64_t n;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--all")) {
            e->all = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !v) {
            fprintf(!v && strcmp(a, "--help") && strcmp(a, "-h") ? stderr : stdout,
                    "usage: wgml eval --model FILE.gguf --data TEXT|JSONL [--lora DIR] [--seq-len N] [--batch B]\n"
                    "                 [--eval-fraction F | --all] [--eval-tokens N]\n"
                    "Perplexity (exp of the mean next-token loss) of the model, with a LoRA adapter directory\n"
                    "written by wgml finetune if given, on the held-out part of the data (the same last\n"
                    "--eval-fraction, default 0.05, that wgml finetune holds out) or on all of it (--all).\n");
            return v || !strcmp(a, "--help") || !strcmp(a, "-h") ? 0 : 2;
        }
        i++;
        if (!strcmp(a, "--model")) e->model = v;
        else if (!strcmp(a, "--data")) e->data = v;
        else if (!strcmp(a, "--lora")) e->lora = v;
        else if (!strcmp(a, "--seq-len")) {
            if (cli_need_int("wgml eval", a, v, 2, 1 << 16, &n)) return 2;
            e->cfg.seq_len = (int)n;
        } else if (!strcmp(a, "--batch")) {
            if (cli_need_int("wgml eval", a, v, 1, 4096, &n)) return 2;
            e->cfg.batch = (int)n;
        } else if (!strcmp(a, "--eval-tokens")) {
            if (cli_need_int("wgml eval", a, v, 1, INT64_MAX / 4, &e->max_tokens)) return 2;
        } else if (!strcmp(a, "--eval-fraction")) {
            if (cli_need_num("wgml eval", a, v, 1e-6, 0.9, &e->frac)) return 2;
        } else {
            fprintf(stderr, "wgml eval: unknown option '%s' (see wgml eval --help)\n", a);
            return 2;
        }
    }
    if (!e->model || !e->data) {
        fprintf(stderr, "wgml eval: --model and --data are required (see wgml eval --help)\n");
        return 2;
    }
    return -1;
}

int eval_main(wgml_ctx *ctx, int argc, char **argv) {
    eval_opts e;
    int pr = parse_eval_opts(argc, argv, &e);
    if (pr >= 0) return pr;
    const char *model = e.model, *data = e.data, *lora = e.lora;
    wgml_train_config cfg = e.cfg;
    wgml_adapter *l = NULL;
    char err[700];
    if (lora) {
        if (wgml_adapter_load(lora, model, &l, err, sizeof err)) {
            fprintf(stderr, "wgml: --lora: %s\n", err);
            return 1;
        }
        cfg.lora_rank = wgml_adapter_config(l)->lora_rank;
        cfg.lora_alpha = wgml_adapter_config(l)->lora_alpha;
        cfg.targets = wgml_adapter_config(l)->targets;
    }
    cfg.mode = WGML_TRAIN_LORA;
    wgml_model_options mo = {.n_ctx = cfg.seq_len > 256 ? cfg.seq_len : 256};
    wgml_model *m = wgml_model_load(ctx, model, &mo);
    if (!m) {
        fprintf(stderr, "wgml eval: %s\n", wgml_last_error(ctx));
        wgml_adapter_free(l);
        return 1;
    }
    int rc = 1;
    wgml_dataset ds = {0};
    wgml_trainer *t = NULL;
    if (!wgml_model_tokenizer(m)) {
        fprintf(stderr, "wgml eval: the model has no tokenizer wgml can build (%s), so %s cannot be tokenized\n",
                wgml_model_tokenizer_error(m), data);
        goto out;
    }
    if (wgml_data_from_file(wgml_model_tokenizer(m), data, cfg.seq_len, e.all ? 0.0 : e.frac, &ds, err, sizeof err)) {
        fprintf(stderr, "wgml eval: %s\n", err);
        goto out;
    }
    if (e.all) { /* every row is evaluated: treat them all as held out */
        ds.n_eval = ds.n_train;
        ds.n_train = 0;
    }
    t = wgml_trainer_new(m, &cfg);
    if (!t) {
        fprintf(stderr, "wgml eval: %s\n", wgml_last_error(ctx));
        goto out;
    }
    /* the adapter's tensors replace the fresh ones (B = 0 there: the base model) */
    if (lora && wgml_trainer_load_adapter(t, l, err, sizeof err)) {
        fprintf(stderr, "wgml eval: --lora %s: %s\n", lora, err);
        goto out;
    }
    double t0 = now_s();
    int64_t nv = 0;
    double loss = cli_evaluate(t, &ds, cfg.batch, e.max_tokens, ctx, &nv);
    if (!isfinite(loss)) goto out;
    printf("perplexity %.4f (mean loss %.5f nats over %lld tokens of %s%s, %s; %.1f s)\n", exp(loss), loss, (long long)nv, data,
           e.all ? "" : " (held-out part)", lora ? lora : "base model", now_s() - t0);
    rc = 0;
out:
    wgml_trainer_free(t);
    wgml_data_free(&ds);
    wgml_model_free(m);
    wgml_adapter_free(l);
    return rc;
}
