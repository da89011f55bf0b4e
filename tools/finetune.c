/* wgml finetune: the command line (options, the training loop, progress output,
 * Ctrl-C) over the public API only. Data, checkpoints, adapter files and reports are library
 * code (src/train, include/wgml-train.h) tested on their own. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "wgml.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <errno.h>
#include <math.h>
#ifndef __wasi__
#include <signal.h>
#else
typedef int sig_atomic_t;
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int finetune_main(wgml_ctx *ctx, int argc, char **argv);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the run's options ---- */
typedef struct opts {
    const char *model, *data, *out, *resume;
    wgml_train_config cfg;
    int grad_accum;
    int64_t steps;
    double epochs;
    double lr, min_lr;
    int64_t warmup;
    int64_t eval_every, eval_tokens, save_every;
    double eval_fraction;
    int warmup_set, min_lr_set;
    int64_t stop_after; /* tests: behave as if interrupted after this step (0: never) */
} opts;

static void finetune_usage(FILE *f) {
    wgml_train_config d = wgml_train_defaults();
    char tg[64];
    wgml_targets_format(d.targets, tg, sizeof tg);
    fprintf(f,
            "usage: wgml finetune --model FILE.gguf --data TEXT|JSONL --out DIR [options]\n"
            "\n"
            "Fine-tunes a GGUF Llama model on the GPU: LoRA adapters on a frozen 4-bit base (QLoRA), or\n"
            "straight-through training of the 4-bit weights themselves (--mode ste).\n"
            "\n"
            "data: a plain-text file (tokenised and packed into rows of seq-len + 1 tokens), or JSONL\n"
            "  (name ends in .jsonl or first byte '{'): {\"messages\":[{\"role\":..,\"content\":..},..]} or\n"
            "  {\"prompt\":..,\"response\":..} per line, formatted with the model's chat template; the loss\n"
            "  counts only the assistant's tokens. The last --eval-fraction is held out, never trained on.\n"
            "\n"
            "options (default):\n"
            "  --mode lora|ste       what to train (lora)\n"
            "  --rank R              LoRA rank (%d)\n"
            "  --alpha A             LoRA alpha; scale = alpha / rank (%g)\n"
            "  --targets LIST        projections with adapters: q,k,v,o,gate,up,down or all (%s)\n"
            "  --seq-len N           tokens per row (%d)\n"
            "  --batch B             rows per step (%d)\n"
            "  --grad-accum N        micro-batches of B rows per optimizer step: their gradients are\n"
            "                        averaged, so a step sees N x B rows with the memory of B (1)\n"
            "  --steps N | --epochs E  length of the run (1 epoch)\n"
            "  --lr LR               peak learning rate (%g)\n"
            "  --warmup N            linear warmup steps (5%% of the steps)\n"
            "  --min-lr LR           cosine decay floor (lr / 10)\n"
            "  --weight-decay W      AdamW weight decay (%g)\n"
            "  --clip C              global gradient-norm clip, 0 = off (%g)\n"
            "  --seed S              data order and adapter initialisation (%llu)\n"
            "  --eval-fraction F     held-out share of the data (0.05)\n"
            "  --eval-every N        held-out perplexity every N steps; 0 = only before and after (0)\n"
            "  --eval-tokens N       held-out tokens per evaluation (8192)\n"
            "  --save-every N        checkpoint every N steps; 0 = only at the end (0)\n"
            "  --resume DIR          continue the run whose outputs are in DIR (DIR/checkpoint);\n"
            "                        without --out the run continues in DIR. Give the same\n"
            "                        --model, --data and options as the first part\n"
            "\n"
            "outputs in DIR: adapter.safetensors + adapter_config.json and the same adapter for\n"
            "PEFT in peft/ (lora) or model.gguf (ste), loss.csv, loss.svg, checkpoint/. Ctrl-C finishes the current step, saves a checkpoint\n"
            "and exits; --resume DIR continues exactly where it stopped.\n",
            d.lora_rank, (double)d.lora_alpha, tg, d.seq_len, d.batch, (double)d.lr, (double)d.weight_decay, (double)d.clip_norm,
            (unsigned long long)d.seed);
}

static int need_int(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    return cli_need_int("wgml finetune", opt, v, lo, hi, out);
}

static int need_num(const char *opt, const char *v, double lo, double hi, double *out) {
    return cli_need_num("wgml finetune", opt, v, lo, hi, out);
}

/* One option a and its value v into o: 0, or 1 after a message. */
static int parse_opt(opts *o, const char *a, const char *v) {
    int64_t n;
    double x;
    if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--data")) o->data = v;
    else if (!strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--resume")) o->resume = v;
    else if (!strcmp(a, "--mode")) {
        if (!strcmp(v, "lora")) o->cfg.mode = WGML_TRAIN_LORA;
        else if (!strcmp(v, "ste")) o->cfg.mode = WGML_TRAIN_STE;
        else {
            fprintf(stderr, "wgml finetune: --mode is lora or ste, got '%s'\n", v);
            return 1;
        }
    } else if (!strcmp(a, "--targets")) {
        if (wgml_targets_parse(v, &o->cfg.targets)) {
            fprintf(stderr, "wgml finetune: --targets takes a comma list of q,k,v,o,gate,up,down (or all), got '%s'\n", v);
            return 1;
        }
    } else if (!strcmp(a, "--rank")) {
        if (need_int(a, v, 1, 4096, &n)) return 1;
        o->cfg.lora_rank = (int)n;
    } else if (!strcmp(a, "--alpha")) {
        if (need_num(a, v, 1e-6, 1e6, &x)) return 1;
        o->cfg.lora_alpha = (float)x;
    } else if (!strcmp(a, "--seq-len")) {
        if (need_int(a, v, 2, 1 << 16, &n)) return 1;
        o->cfg.seq_len = (int)n;
    } else if (!strcmp(a, "--batch")) {
        if (need_int(a, v, 1, 4096, &n)) return 1;
        o->cfg.batch = (int)n;
    } else if (!strcmp(a, "--grad-accum")) {
        if (need_int(a, v, 1, 4096, &n)) return 1;
        o->grad_accum = (int)n;
    } else if (!strcmp(a, "--steps")) {
        if (need_int(a, v, 1, INT64_MAX / 2, &o->steps)) return 1;
    } else if (!strcmp(a, "--epochs")) {
        if (need_num(a, v, 1e-9, 1e6, &o->epochs)) return 1;
    } else if (!strcmp(a, "--lr")) {
        if (need_num(a, v, 0, 10, &o->lr)) return 1;
    } else if (!strcmp(a, "--min-lr")) {
        if (need_num(a, v, 0, 10, &o->min_lr)) return 1;
        o->min_lr_set = 1;
    } else if (!strcmp(a, "--warmup")) {
        if (need_int(a, v, 0, INT64_MAX / 2, &o->warmup)) return 1;
        o->warmup_set = 1;
    } else if (!strcmp(a, "--weight-decay")) {
        if (need_num(a, v, 0, 10, &x)) return 1;
        o->cfg.weight_decay = (float)x;
    } else if (!strcmp(a, "--clip")) {
        if (need_num(a, v, 0, 1e9, &x)) return 1;
        o->cfg.clip_norm = (float)x;
    } else if (!strcmp(a, "--seed")) {
        if (need_int(a, v, 0, INT64_MAX, &n)) return 1;
        o->cfg.seed = (uint64_t)n;
    } else if (!strcmp(a, "--eval-every")) {
        if (need_int(a, v, 0, INT64_MAX / 2, &o->eval_every)) return 1;
    } else if (!strcmp(a, "--eval-tokens")) {
        if (need_int(a, v, 1, INT64_MAX / 2, &o->eval_tokens)) return 1;
    } else if (!strcmp(a, "--eval-fraction")) {
        if (need_num(a, v, 0.0, 0.9, &o->eval_fraction)) return 1;
    } else if (!strcmp(a, "--stop-after")) { /* undocumented: tests of --resume */
        if (need_int(a, v, 1, INT64_MAX / 2, &o->stop_after)) return 1;
    } else if (!strcmp(a, "--save-every")) {
        if (need_int(a, v, 0, INT64_MAX / 2, &o->save_every)) return 1;
    } else {
        fprintf(stderr, "wgml finetune: unknown option '%s' (see wgml finetune --help)\n", a);
        return 1;
    }
    return 0;
}

/* 0 ok, 1 error, 2 help printed */
static int parse_opts(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->cfg = wgml_train_defaults();
    o->grad_accum = 1;
    o->lr = o->cfg.lr;
    o->eval_tokens = 8192;
    o->eval_fraction = 0.05;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            finetune_usage(stdout);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "wgml finetune: %s needs a value (see wgml finetune --help)\n", a);
            return 1;
        }
        i++;
        if (parse_opt(o, a, v)) return 1;
    }
    if (!o->out) o->out = o->resume; /* continue in place */
    if (!o->model || !o->data || !o->out) {
        fprintf(stderr, "wgml finetune: --model, --data and --out (or --resume) are required (see wgml finetune --help)\n");
        return 1;
    }
    o->cfg.grad_accum = o->grad_accum;
    if (o->steps && o->epochs) {
        fprintf(stderr, "wgml finetune: give --steps or --epochs, not both\n");
        return 1;
    }
    o->cfg.lr = (float)o->lr;
    return 0;
}

/* ---- Ctrl-C ----
 * SIGINT/SIGTERM stop the run after the current step (a checkpoint is written). WASI (the
 * browser build) has no signals: there a run is stopped by ending its worker. */
static volatile sig_atomic_t g_stop;
#ifndef __wasi__
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}
static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a signal during a GPU wait does not fail the wait */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
#else
static void catch_stop_signals(void) {}
#endif

/* ---- helpers over the trainer ---- */
/* The trainer's tensor count and their elements in all (for the run's summary). */
static int trainer_size(wgml_trainer *t, int *n, int64_t *params, wgml_ctx *ctx) {
    *n = wgml_trainer_tensor_count(t);
    *params = 0;
    for (int i = 0; i < *n; i++) {
        int rank;
        int64_t shape[4], numel = 1;
        if (!wgml_trainer_tensor_name(t, i) || wgml_trainer_tensor_shape(t, i, &rank, shape)) {
            fprintf(stderr, "wgml: trainer tensor %d: %s\n", i, wgml_last_error(ctx));
            return 1;
        }
        for (int d = 0; d < rank; d++) numel *= shape[d];
        *params += numel;
    }
    return 0;
}

static char *path_in(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) snprintf(p, a + b + 2, "%s/%s", dir, name);
    return p;
}

typedef struct run_id {
    char sha256[65];
    uint64_t size;
} run_id;

/* The run's identity and configuration, as checkpoint metadata (and checked on resume). */
typedef struct meta_kv {
    char k[32], v[600];
} meta_kv;

static int add_meta(meta_kv *m, int n, const char *k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int add_meta(meta_kv *m, int n, const char *k, const char *fmt, ...) {
    snprintf(m[n].k, sizeof m[n].k, "%s", k);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m[n].v, sizeof m[n].v, fmt, ap);
    va_end(ap);
    return n + 1;
}

/* Config keys that must match for a resume. */
static const char *const fixed_keys[] = {"model_sha256", "mode", "rank", "alpha", "targets", "seq_len", "batch", "seed", "data_rows"};

static int run_meta(meta_kv *m, const opts *o, const run_id *id, const wgml_dataset *ds) {
    char tg[64];
    wgml_targets_format(o->cfg.targets, tg, sizeof tg);
    int n = 0;
    n = add_meta(m, n, "model_sha256", "%s", id->sha256);
    n = add_meta(m, n, "mode", "%s", o->cfg.mode == WGML_TRAIN_STE ? "ste" : "lora");
    n = add_meta(m, n, "rank", "%d", o->cfg.lora_rank);
    n = add_meta(m, n, "alpha", "%.9g", (double)o->cfg.lora_alpha);
    n = add_meta(m, n, "targets", "%s", tg);
    n = add_meta(m, n, "seq_len", "%d", o->cfg.seq_len);
    n = add_meta(m, n, "batch", "%d", o->cfg.batch);
    n = add_meta(m, n, "grad_accum", "%d", o->cfg.grad_accum);
    n = add_meta(m, n, "seed", "%llu", (unsigned long long)o->cfg.seed);
    n = add_meta(m, n, "data_rows", "%lld+%lld", (long long)ds->n_train, (long long)ds->n_eval);
    n = add_meta(m, n, "model_size", "%llu", (unsigned long long)id->size);
    n = add_meta(m, n, "model_path", "%s", o->model);
    n = add_meta(m, n, "data_path", "%s", o->data);
    return n;
}

static int save_checkpoint(wgml_trainer *t, const opts *o, const run_id *id, const wgml_dataset *ds, int64_t step, int64_t total,
                           int64_t data_pos) {
    meta_kv m[24];
    int nm = run_meta(m, o, id, ds);
    nm = add_meta(m, nm, "step", "%lld", (long long)step);
    nm = add_meta(m, nm, "total_steps", "%lld", (long long)total);
    nm = add_meta(m, nm, "data_pos", "%lld", (long long)data_pos);
    /* the data order is a function of (seed, data_pos); the trainer's own randomness is in its state */
    nm = add_meta(m, nm, "rng", "splitmix64 seed %llu position %lld", (unsigned long long)o->cfg.seed, (long long)data_pos);
    nm = add_meta(m, nm, "lr", "%.9g", o->lr);
    nm = add_meta(m, nm, "min_lr", "%.9g", o->min_lr);
    nm = add_meta(m, nm, "warmup", "%lld", (long long)o->warmup);
    nm = add_meta(m, nm, "weight_decay", "%.9g", (double)o->cfg.weight_decay);
    nm = add_meta(m, nm, "clip", "%.9g", (double)o->cfg.clip_norm);
    const char *k[24], *v[24];
    for (int i = 0; i < nm; i++) k[i] = m[i].k, v[i] = m[i].v;
    char *dir = path_in(o->out, "checkpoint"), err[700];
    int rc = !dir || wgml_checkpoint_save(t, dir, k, v, nm, err, sizeof err);
    if (rc) fprintf(stderr, "\nwgml: checkpoint: %s\n", dir ? err : "out of memory");
    free(dir);
    return rc;
}

/* Restores the trainer from DIR/checkpoint; returns 0 and the step and data position. */
static int load_checkpoint(wgml_trainer *t, const opts *o, const run_id *id, const wgml_dataset *ds, int64_t *step, int64_t *data_pos) {
    char *dir = path_in(o->resume, "checkpoint"), err[700];
    wgml_checkpoint *c = NULL;
    if (!dir || wgml_checkpoint_open(dir, &c, err, sizeof err)) {
        fprintf(stderr, "wgml finetune: --resume: %s\n", dir ? err : "out of memory");
        free(dir);
        return 1;
    }
    free(dir);
    int rc = 1;
    meta_kv m[24];
    int nm = run_meta(m, o, id, ds);
    for (size_t i = 0; i < sizeof fixed_keys / sizeof fixed_keys[0]; i++) {
        const char *want = "";
        for (int j = 0; j < nm && !*want; j++)
            if (!strcmp(m[j].k, fixed_keys[i])) want = m[j].v;
        if (wgml_checkpoint_expect(c, fixed_keys[i], want, err, sizeof err)) {
            fprintf(stderr, "wgml finetune: --resume %s: %s\n", o->resume, err);
            goto out;
        }
    }
    /* checkpoints written before --grad-accum existed were all made with 1 */
    const char *ga = wgml_checkpoint_meta(c, "grad_accum");
    if (atoi(ga ? ga : "1") != o->cfg.grad_accum) {
        fprintf(stderr, "wgml finetune: --resume %s: checkpoint mismatch: grad_accum is %s in the checkpoint but %d in this run\n",
                o->resume, ga ? ga : "1 (absent)", o->cfg.grad_accum);
        goto out;
    }
    if (wgml_checkpoint_restore(c, t, err, sizeof err)) {
        fprintf(stderr, "wgml finetune: --resume: %s\n", err);
        goto out;
    }
    const char *sv = wgml_checkpoint_meta(c, "step"), *dv = wgml_checkpoint_meta(c, "data_pos");
    if (!sv || !dv) {
        fprintf(stderr, "wgml finetune: --resume: the checkpoint lacks step or data_pos\n");
        goto out;
    }
    *step = strtoll(sv, NULL, 10);
    *data_pos = strtoll(dv, NULL, 10);
    rc = 0;
out:
    wgml_checkpoint_close(c);
    return rc;
}

static int write_adapter(wgml_trainer *t, const opts *o, const run_id *id, int64_t step) {
    wgml_adapter_info info = {.base_model = o->model, .base_size = id->size, .base_sha256 = id->sha256, .data = o->data, .steps = step};
    char err[700];
    if (wgml_trainer_save_adapter(t, &o->cfg, o->out, &info, err, sizeof err)) {
        fprintf(stderr, "wgml: %s\n", err);
        return 1;
    }
    return 0;
}

static int write_ste_model(wgml_trainer *t, const opts *o) {
    char *path = path_in(o->out, "model.gguf"), err[700];
    if (!path) return 1;
    int rc = wgml_trainer_save_ste_gguf(t, o->model, path, err, sizeof err) != WGML_OK;
    if (rc) fprintf(stderr, "wgml: ste export: %s\n", err);
    else printf("wrote %s\n", path);
    free(path);
    return rc;
}

static void write_reports(const opts *o, const wgml_report_row *rows, size_t n) {
    char *csv = path_in(o->out, "loss.csv"), *svg = path_in(o->out, "loss.svg"), err[600], title[300];
    const char *base = strrchr(o->model, '/');
    snprintf(title, sizeof title, "wgml finetune (%s): %s", o->cfg.mode == WGML_TRAIN_STE ? "ste" : "lora", base ? base + 1 : o->model);
    if (csv && wgml_report_write_csv(csv, rows, n, err, sizeof err)) fprintf(stderr, "\nwgml: %s\n", err);
    if (svg && wgml_report_write_svg(svg, title, rows, n, err, sizeof err)) fprintf(stderr, "\nwgml: %s\n", err);
    free(csv);
    free(svg);
}

static int push_row(wgml_report_row **rows, size_t *n, size_t *cap, wgml_report_row r) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        wgml_report_row *q = realloc(*rows, c * sizeof *q);
        if (!q) return 1;
        *rows = q, *cap = c;
    }
    (*rows)[(*n)++] = r;
    return 0;
}

static void fmt_time(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, n, "?");
    else if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(fmod(s, 3600) / 60));
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%.0fs", s);
}

/* ---- the run ----
 * One run's state, shared by the steps of finetune_main below: the options, the model file's
 * identity, the data, the trainer, the report's rows and where the run stands. */
typedef struct run {
    wgml_ctx *ctx;
    opts o;
    run_id id;
    wgml_dataset ds;
    wgml_trainer *t;
    wgml_report_row *rows;
    size_t n_rows, cap_rows;
    int64_t total, step, pos, first_step;
    double start; /* when the first step of this part began */
} run;

/* Tokenizes and packs the data (a line on what it holds); 1 when it cannot be trained on. A
 * held-out part without labels is dropped, with a note. */
static int open_data(run *r, wgml_model *m) {
    const opts *o = &r->o;
    wgml_dataset *ds = &r->ds;
    char err[700];
    double t0 = now_s();
    if (!wgml_model_tokenizer(m)) {
        fprintf(stderr, "wgml finetune: the model has no tokenizer wgml can build (%s), so %s cannot be tokenized\n",
                wgml_model_tokenizer_error(m), o->data);
        return 1;
    }
    if (wgml_data_from_file(wgml_model_tokenizer(m), o->data, o->cfg.seq_len, o->eval_fraction, ds, err, sizeof err)) {
        fprintf(stderr, "wgml finetune: %s\n", err);
        return 1;
    }
    printf("data: %s: %lld training rows (%lld labels), %lld held-out rows (%lld labels) of %d tokens",
           o->data, (long long)ds->n_train, (long long)ds->train_labels, (long long)ds->n_eval, (long long)ds->eval_labels, ds->seq_len);
    if (ds->n_examples) printf("; %lld examples, %lld truncated", (long long)ds->n_examples, (long long)ds->n_truncated);
    printf(" (%.1f s)\n", now_s() - t0);
    if (ds->train_labels == 0) {
        fprintf(stderr, "wgml finetune: the training rows hold no labels (every answer falls beyond --seq-len %d); raise --seq-len\n",
                ds->seq_len);
        return 1;
    }
    if (ds->n_eval && ds->eval_labels == 0) {
        printf("note: the held-out rows hold no labels (answers beyond --seq-len): no perplexity is reported\n");
        ds->n_eval = 0;
    }
    if (ds->n_eval == 0) printf("note: no held-out data: no perplexity is reported\n");
    return 0;
}

/* The schedule (its length from the data unless --steps gave it, warmup and floor defaulting
 * from it) and the trainer, with a line on each. */
static int start_trainer(run *r, wgml_model *m) {
    opts *o = &r->o;
    r->total = o->steps;
    if (!r->total)
        r->total = (int64_t)ceil((o->epochs > 0 ? o->epochs : 1.0) * (double)r->ds.n_train / ((double)o->cfg.batch * o->cfg.grad_accum));
    if (r->total < 1) r->total = 1;
    if (!o->warmup_set) o->warmup = r->total / 20;
    if (!o->min_lr_set) o->min_lr = o->lr / 10;
    r->t = wgml_trainer_new(m, &o->cfg);
    if (!r->t) {
        fprintf(stderr, "wgml finetune: %s\n", wgml_last_error(r->ctx));
        return 1;
    }
    int nt;
    int64_t params;
    if (trainer_size(r->t, &nt, &params, r->ctx)) return 1;
    char tg[64];
    wgml_targets_format(o->cfg.targets, tg, sizeof tg);
    if (o->cfg.mode == WGML_TRAIN_LORA)
        printf("lora: rank %d, alpha %g, targets %s: %d tensors, %lld trainable parameters\n", o->cfg.lora_rank, (double)o->cfg.lora_alpha,
               tg, nt, (long long)params);
    else printf("ste: %d 4-bit weights trained straight-through (%lld latent parameters)\n", nt, (long long)params);
    char accum[48] = "";
    if (o->cfg.grad_accum > 1) snprintf(accum, sizeof accum, " (%d micro-batches of %d)", o->cfg.grad_accum, o->cfg.batch);
    printf("schedule: %lld steps of %d x %d tokens%s, lr %g, warmup %lld, cosine to %g, weight decay %g, clip %g, seed %llu\n",
           (long long)r->total, o->cfg.batch * o->cfg.grad_accum, o->cfg.seq_len, accum, o->lr, (long long)o->warmup, o->min_lr,
           (double)o->cfg.weight_decay, (double)o->cfg.clip_norm, (unsigned long long)o->cfg.seed);
    return 0;
}

/* With --resume, the trainer, step and data position from the checkpoint and the report's rows
 * up to that step; otherwise the held-out perplexity before training (the report's row 0). */
static int resume_or_evaluate(run *r) {
    const opts *o = &r->o;
    char err[700];
    if (o->resume) {
        if (load_checkpoint(r->t, o, &r->id, &r->ds, &r->step, &r->pos)) return 1;
        char *csv = path_in(o->resume, "loss.csv");
        if (csv && wgml_report_read_csv(csv, r->step, &r->rows, &r->n_rows, err, sizeof err) == WGML_OK) r->cap_rows = r->n_rows;
        free(csv);
        printf("resumed from %s at step %lld (data position %lld)\n", o->resume, (long long)r->step, (long long)r->pos);
        if (r->step >= r->total) printf("the run is already complete (%lld steps)\n", (long long)r->total);
    }
    if (r->ds.n_eval && !o->resume) {
        int64_t nv = 0;
        double l = cli_evaluate(r->t, &r->ds, o->cfg.batch, o->eval_tokens, r->ctx, &nv);
        if (!isfinite(l)) return 1;
        printf("held-out perplexity before training: %.3f (loss %.4f over %lld tokens)\n", exp(l), l, (long long)nv);
        push_row(&r->rows, &r->n_rows, &r->cap_rows, (wgml_report_row){0, NAN, 0, 0, exp(l)});
    }
    return 0;
}

/* One optimizer step: grad_accum micro-batches (the trainer steps on the last); the step's loss
 * is the mean of theirs, as their gradients are averaged. */
static int train_step(run *r, int32_t *in, int32_t *lab, double lr, float *loss) {
    const opts *o = &r->o;
    *loss = 0;
    for (int mb = 0; mb < o->cfg.grad_accum; mb++) {
        float l = NAN;
        r->pos = wgml_data_train_batch(&r->ds, o->cfg.seed, r->pos, o->cfg.batch, in, lab);
        if (wgml_trainer_step(r->t, in, lab, (float)lr, &l)) {
            fprintf(stderr, "\nwgml finetune: step %lld: %s\n", (long long)r->step + 1, wgml_last_error(r->ctx));
            return 1;
        }
        *loss += l / (float)o->cfg.grad_accum;
    }
    return 0;
}

/* The progress line of the step just taken: one line redrawn on a terminal; in a log, about 100
 * lines per run. */
static void print_progress(const run *r, float loss, double lr, double ema_tps, int interactive) {
    double elapsed = now_s() - r->start, eta = elapsed / (double)(r->step - r->first_step) * (double)(r->total - r->step);
    char eta_s[32];
    fmt_time(eta, eta_s, sizeof eta_s);
    int64_t every = r->total > 200 ? r->total / 100 : 1;
    if (interactive || r->step % every == 0 || r->step == r->total || r->step == r->first_step + 1) {
        printf("%sstep %lld/%lld  loss %.4f  lr %.3g  %.0f tok/s  ETA %s%s", interactive ? "\r" : "", (long long)r->step,
               (long long)r->total, (double)loss, lr, ema_tps, eta_s, interactive ? "   " : "\n");
        fflush(stdout);
    }
}

/* The steps from r->step to the end, or to Ctrl-C (or --stop-after): each step's progress line,
 * its held-out perplexity when due, its report row and the periodic checkpoint. */
static int train_steps(run *r, int32_t *in, int32_t *lab) {
    const opts *o = &r->o;
    size_t bl = (size_t)o->cfg.batch * (size_t)o->cfg.seq_len;
    double ema_tps = 0;
    int interactive = isatty(fileno(stdout));
    while (r->step < r->total && !g_stop) {
        double lr = wgml_lr_schedule(r->step, r->total, o->warmup, o->lr, o->min_lr);
        double ts = now_s();
        float loss;
        if (train_step(r, in, lab, lr, &loss)) return 1;
        double dt = now_s() - ts;
        r->step++;
        double tps = (double)bl * o->cfg.grad_accum / (dt > 0 ? dt : 1e-9);
        ema_tps = ema_tps ? 0.9 * ema_tps + 0.1 * tps : tps;
        print_progress(r, loss, lr, ema_tps, interactive);
        wgml_report_row row = {r->step, loss, lr, tps, 0};
        if (r->ds.n_eval && ((o->eval_every && r->step % o->eval_every == 0) || r->step == r->total)) {
            int64_t nv = 0;
            double l = cli_evaluate(r->t, &r->ds, o->cfg.batch, o->eval_tokens, r->ctx, &nv);
            if (!isfinite(l)) return 1;
            row.eval_ppl = exp(l);
            printf("%sheld-out perplexity at step %lld: %.3f (loss %.4f over %lld tokens)\n", interactive ? "\n" : "",
                   (long long)r->step, exp(l), l, (long long)nv);
        }
        push_row(&r->rows, &r->n_rows, &r->cap_rows, row);
        if (o->stop_after && r->step == o->stop_after) g_stop = 1;
        /* loss.csv before the checkpoint: a run killed between the two resumes from the older
         * checkpoint and keeps the rows up to it, so no row is ever missing */
        if (o->save_every && r->step % o->save_every == 0 && r->step < r->total) {
            write_reports(o, r->rows, r->n_rows);
            if (save_checkpoint(r->t, o, &r->id, &r->ds, r->step, r->total, r->pos)) return 1;
        }
    }
    if (interactive) printf("\n");
    return 0;
}

/* The training loop: the batch buffers, Ctrl-C caught, then the steps. */
static int train(run *r) {
    size_t bl = (size_t)r->o.cfg.batch * (size_t)r->o.cfg.seq_len;
    int32_t *in = malloc(bl * sizeof(int32_t)), *lab = malloc(bl * sizeof(int32_t));
    int rc = 1;
    if (in && lab) {
        catch_stop_signals();
        r->start = now_s();
        r->first_step = r->step;
        rc = train_steps(r, in, lab);
    }
    free(in);
    free(lab);
    return rc;
}

/* The run's outputs (report, checkpoint, the adapter or the 4-bit model) and its last line. */
static int finish_run(run *r) {
    const opts *o = &r->o;
    write_reports(o, r->rows, r->n_rows);
    if (save_checkpoint(r->t, o, &r->id, &r->ds, r->step, r->total, r->pos)) return 1;
    if (o->cfg.mode == WGML_TRAIN_LORA) {
        if (write_adapter(r->t, o, &r->id, r->step)) return 1;
    } else if (write_ste_model(r->t, o)) {
        return 1;
    }
    if (g_stop) {
        printf("interrupted: stopped after step %lld of %lld; checkpoint saved in %s/checkpoint (continue with --resume %s)\n",
               (long long)r->step, (long long)r->total, o->out, o->out);
    } else {
        char el[32];
        fmt_time(now_s() - r->start, el, sizeof el);
        printf("done: %lld steps in %s; outputs in %s (%s, loss.csv, loss.svg, checkpoint/)\n", (long long)(r->step - r->first_step), el,
               o->out, o->cfg.mode == WGML_TRAIN_LORA ? "adapter.safetensors, adapter_config.json, peft/" : "model.gguf");
    }
    return 0;
}

int finetune_main(wgml_ctx *ctx, int argc, char **argv) {
    run r = {.ctx = ctx};
    int pr = parse_opts(argc, argv, &r.o);
    if (pr) return pr == 2 ? 0 : 2;
    if (cli_make_dirs(r.o.out)) {
        fprintf(stderr, "wgml finetune: cannot create %s: %s\n", r.o.out, strerror(errno));
        return 1;
    }
    char err[700];
    if (wgml_file_sha256(r.o.model, r.id.sha256, &r.id.size, err, sizeof err)) {
        fprintf(stderr, "wgml finetune: %s\n", err);
        return 1;
    }
    wgml_model_options mo = {.n_ctx = r.o.cfg.seq_len > 256 ? r.o.cfg.seq_len : 256};
    wgml_model *m = wgml_model_load(ctx, r.o.model, &mo);
    if (!m) {
        fprintf(stderr, "wgml finetune: %s\n", wgml_last_error(ctx));
        return 1;
    }
    int rc = open_data(&r, m) || start_trainer(&r, m) || resume_or_evaluate(&r) || train(&r) || finish_run(&r);
    free(r.rows);
    wgml_trainer_free(r.t);
    wgml_data_free(&r.ds);
    wgml_model_free(m);
    return rc;
}
