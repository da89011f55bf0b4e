/* The training step (src/train/trainer.c) on a tiny synthetic Llama (2 layers, Q4_0 / Q4_1 /
 * Q8_0 / F32 weights, tied Q8_0 embedding, written as a GGUF with gguf_build.h): 20 LoRA steps
 * on fixed batches lower the loss; a step is one graph run (at most 3 submits) that reads back
 * only the 4-byte loss; the eval graph agrees with the step's loss on the same batch before the
 * update; the state read/write and optimizer blob round trip; the trained adapter attached to
 * the inference graphs gives the logits the eval graph implies; straight-through training of the
 * 4-bit weights (latents start at the dequantised weights, the loss falls, the model's codes
 * change); checkpoints and adapter files of a trainer restore another exactly; errors. With
 * --dump, the model, the batches, wgml's losses and the whole optimizer state (params, Adam m
 * and v) before every step go to tests/py/test_trainer_parity.py, which
 * checks each step from wgml's state and trains the same model in PyTorch float32; with
 * $WGML_TRAINER_MODEL (a GGUF path) also a LoRA run on that model (SmolLM2: 5 steps; Gemma-3-270M
 * for tests/py/test_gemma3_peft.py: fewer, shorter steps, see test_model). */
#define _POSIX_C_SOURCE 200809L
#include "gguf_build.h"
#include "harness.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tiny_llama.h"

/* ------------------------------------------------------------------ helpers */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Batch k of the fixed data: sequences following a simple rule (so there is something to
 * learn), labels = the next token, the last position of each sequence ignored (-100) and one
 * more ignored position in the middle (to exercise ignore_index). */
static void make_batch(int k, int B, int S, int vocab, int32_t *tok, int32_t *lab) {
    for (int b = 0; b < B; b++) {
        int start = (7 * k + 13 * b + 3) % vocab, stride = 1 + (k + b) % 3;
        for (int i = 0; i <= S; i++) {
            int v = (start + stride * i * i % 5 + stride * i) % vocab;
            if (i < S) tok[b * S + i] = v;
            if (i > 0) lab[b * S + i - 1] = v;
        }
        lab[b * S + S - 1] = -100;
        lab[b * S + S / 2] = -100;
    }
}

/* Every trainable tensor's state `what` (0 param, 1 Adam m, 2 Adam v) as "<tensor><suffix>". */
static void dump_state(const char *cs, wgml_trainer *tr, int what, const char *suffix) {
    int n = wgml_trainer_tensor_count(tr);
    for (int i = 0; i < n; i++) {
        int rank;
        int64_t shape[4];
        wgml_trainer_tensor_shape(tr, i, &rank, shape);
        float *h = malloc(sizeof(float) * (size_t)(shape[0] * shape[1]));
        wgml_trainer_read_state(tr, i, what, h);
        char name[96];
        snprintf(name, sizeof name, "%s%s", wgml_trainer_tensor_name(tr, i), suffix);
        th_dump(cs, name, WGML_F32, 2, shape, h);
        free(h);
    }
}

static void dump_params(const char *cs, wgml_trainer *tr, const char *suffix) { dump_state(cs, tr, 0, suffix); }

/* The whole optimizer state before step s (s = STEPS: after the last), so that the parity test
 * can check each step on its own from wgml's state: "<tensor>.p<s>", ".m<s>", ".v<s>". */
static void dump_step_state(const char *cs, wgml_trainer *tr, int s) {
    static const char kind[3] = {'p', 'm', 'v'};
    for (int what = 0; what < 3; what++) {
        char suffix[16];
        snprintf(suffix, sizeof suffix, ".%c%d", kind[what], s);
        dump_state(cs, tr, what, suffix);
    }
}

static void dump_config(const char *cs, const wgml_train_config *c, int steps, int n_batches) {
    float p[12] = {(float)c->lora_rank, c->lora_alpha, (float)c->targets, (float)c->batch, (float)c->seq_len, c->lr,
                   c->weight_decay,     c->beta1,      c->beta2,          c->eps,          c->clip_norm, (float)steps};
    (void)n_batches;
    int64_t n = 12;
    th_dump(cs, "config", WGML_F32, 1, &n, p);
}

static void dump_file(const char *cs, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) == (size_t)n) {
        int64_t sh = n;
        th_dump(cs, "gguf", WGML_BOOL, 1, &sh, b);
    }
    free(b);
    fclose(f);
}

/* ------------------------------------------------------------------ the tiny model */

enum { STEPS = 20, NB = 4, TB = 2, TS = 16 };

/* The tiny model's LoRA configuration: rank 4 on all seven targets, TB x TS tokens, lr 1e-2,
 * weight decay 0.01, clip 1.0. */
static wgml_train_config tiny_config(uint64_t seed) {
    wgml_train_config cfg = wgml_train_defaults();
    cfg.lora_rank = 4;
    cfg.lora_alpha = 8.0f;
    cfg.targets = WGML_TARGET_ALL;
    cfg.batch = TB;
    cfg.seq_len = TS;
    cfg.lr = 1e-2f;
    cfg.weight_decay = 0.01f;
    cfg.clip_norm = 1.0f;
    cfg.seed = seed;
    return cfg;
}

static void test_tiny(const char *path) {
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    if (!th_check(m != NULL, "load the synthetic model: %s", wgml_last_error(T.ctx))) return;
    wgml_train_config cfg = tiny_config(1234);

    /* base logits of a prompt before any adapter, to check wgml_model_set_lora(n = 0) later */
    int32_t tok[NB][TB * TS], lab[NB][TB * TS];
    for (int k = 0; k < NB; k++) make_batch(k, TB, TS, V, tok[k], lab[k]);
    float *base_logits = malloc(sizeof(float) * V), *l2 = malloc(sizeof(float) * V);
    th_check(!wgml_model_prefill(m, tok[0], TS, base_logits, NULL), "base prefill: %s", wgml_last_error(T.ctx));

    double t0 = now_s();
    wgml_trainer *tr = wgml_trainer_new(m, &cfg);
    if (!th_check(tr != NULL, "trainer_new: %s", wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        free(base_logits), free(l2);
        return;
    }
    printf("  tiny: trainer built and compiled in %.2f s; %d trainable tensors\n", now_s() - t0,
           wgml_trainer_tensor_count(tr));
    th_check(wgml_trainer_tensor_count(tr) == NL * 7 * 2, "tensor count %d", wgml_trainer_tensor_count(tr));
    th_check(!strcmp(wgml_trainer_tensor_name(tr, 0), "blk.0.attn_q.lora_a") &&
                 !strcmp(wgml_trainer_tensor_name(tr, 3), "blk.0.attn_k.lora_b") &&
                 !strcmp(wgml_trainer_tensor_name(tr, 27), "blk.1.ffn_down.lora_b"),
             "tensor names: %s %s %s", wgml_trainer_tensor_name(tr, 0), wgml_trainer_tensor_name(tr, 3),
             wgml_trainer_tensor_name(tr, 27));
    int rank;
    int64_t shape[4];
    th_check(!wgml_trainer_tensor_shape(tr, 27, &rank, shape) && rank == 2 && shape[0] == D && shape[1] == 4,
             "blk.1.ffn_down.lora_b shape [%lld, %lld]", (long long)shape[0], (long long)shape[1]);
    th_check(!wgml_trainer_tensor_shape(tr, 26, &rank, shape) && shape[0] == 4 && shape[1] == FF,
             "blk.1.ffn_down.lora_a shape [%lld, %lld]", (long long)shape[0], (long long)shape[1]);

    const char *cs = "tiny";
    if (th_dumping()) {
        dump_file(cs, path);
        dump_config(cs, &cfg, STEPS, NB);
        dump_params(cs, tr, ".init");
        int64_t sh[3] = {NB, TB, TS};
        th_dump(cs, "tokens", WGML_I32, 3, sh, tok);
        th_dump(cs, "labels", WGML_I32, 3, sh, lab);
    }

    float losses[STEPS];
    double eval_err = 0, step_s = 0;
    int bad_submits = 0, bad_reads = 0, bad_valid = 0;
    for (int s = 0; s < STEPS; s++) {
        int k = s % NB;
        double lsum;
        int64_t nv;
        int valid = 0;
        for (int i = 0; i < TB * TS; i++) valid += lab[k][i] >= 0;
        if (s % 5 == 0) { /* eval on the same batch before the update */
            if (!th_check(!wgml_trainer_eval(tr, tok[k], lab[k], &lsum, &nv), "eval: %s", wgml_last_error(T.ctx))) break;
            bad_valid += nv != valid;
        }
        if (th_dumping()) dump_step_state(cs, tr, s);
        uint64_t r0 = wgml_read_bytes(T.ctx);
        double ts = now_s();
        if (!th_check(!wgml_trainer_step(tr, tok[k], lab[k], cfg.lr, &losses[s]), "step %d: %s", s,
                      wgml_last_error(T.ctx)))
            break;
        step_s += now_s() - ts;
        bad_reads += wgml_read_bytes(T.ctx) - r0 != 4;
        bad_submits += wgml_trainer_submits_per_step(tr) > 3;
        if (s % 5 == 0) {
            double e = fabs(lsum / (double)nv - losses[s]) / fabs(losses[s]);
            eval_err = th_max_err(eval_err, e);
        }
    }
    printf("  tiny: losses");
    for (int s = 0; s < STEPS; s++) printf(" %.4f", losses[s]);
    printf("\n  tiny: %.1f ms per step, %llu submits per step\n", 1e3 * step_s / STEPS,
           (unsigned long long)wgml_trainer_submits_per_step(tr));
    th_check(bad_submits == 0 && wgml_trainer_submits_per_step(tr) >= 1,
             "every step is at most 3 submits (last: %llu)", (unsigned long long)wgml_trainer_submits_per_step(tr));
    th_check(bad_reads == 0, "every step reads back exactly the 4-byte loss (%d steps did not)", bad_reads);
    th_check(bad_valid == 0, "eval counts the valid labels");
    th_check(eval_err < 1e-5, "eval loss = step loss before the update (max rel. diff %.2e)", eval_err);
    double first = (losses[0] + losses[1] + losses[2] + losses[3]) / 4;
    double last = (losses[STEPS - 4] + losses[STEPS - 3] + losses[STEPS - 2] + losses[STEPS - 1]) / 4;
    th_check(isfinite(last) && last < 0.8 * first, "the loss decreases: first 4 steps %.4f, last 4 %.4f", first, last);
    if (th_dumping()) {
        int64_t n = STEPS;
        th_dump(cs, "losses", WGML_F32, 1, &n, losses);
        dump_step_state(cs, tr, STEPS);
    }

    /* optimizer state: 20 steps taken; blob round trip */
    uint8_t blob[64];
    size_t bytes = sizeof blob;
    th_check(!wgml_trainer_read_opt_state(tr, blob, &bytes) && bytes <= 64, "read_opt_state: %s", wgml_last_error(T.ctx));
    uint32_t words[10];
    memcpy(words, blob, sizeof words);
    th_check(words[2] == STEPS, "the optimizer counted %u steps", words[2]);
    uint32_t w2[10];
    memcpy(w2, words, sizeof w2);
    w2[2] = 7;
    th_check(!wgml_trainer_write_opt_state(tr, w2, bytes), "write_opt_state: %s", wgml_last_error(T.ctx));
    size_t b2 = sizeof blob;
    uint8_t blob2[64];
    th_check(!wgml_trainer_read_opt_state(tr, blob2, &b2) && !memcmp(blob2, w2, bytes), "opt state round trip");
    th_check(!wgml_trainer_write_opt_state(tr, words, bytes), "restore opt state");
    th_expect_error("write_opt_state: wrong size", wgml_trainer_write_opt_state(tr, words, 5) != WGML_OK, WGML_ERR_ARG,
                    "bytes", NULL);

    /* state round trip: params, m, v of one tensor */
    {
        int i = 5;
        wgml_trainer_tensor_shape(tr, i, &rank, shape);
        size_t n = (size_t)(shape[0] * shape[1]);
        float *orig = malloc(n * sizeof(float)), *mod = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
        for (int what = 0; what < 3; what++) {
            th_check(!wgml_trainer_read_state(tr, i, what, orig), "read_state %d", what);
            int nonzero = 0;
            for (size_t j = 0; j < n; j++) nonzero += orig[j] != 0;
            th_check(nonzero > 0, "state %d of %s is trained (non-zero)", what, wgml_trainer_tensor_name(tr, i));
            for (size_t j = 0; j < n; j++) mod[j] = (float)j * 0.25f - 1.0f;
            th_check(!wgml_trainer_write_state(tr, i, what, mod) && !wgml_trainer_read_state(tr, i, what, back) &&
                         !memcmp(back, mod, n * sizeof(float)),
                     "write_state/read_state round trip (what %d)", what);
            th_check(!wgml_trainer_write_state(tr, i, what, orig), "restore state %d", what);
        }
        free(orig), free(mod), free(back);
    }
    th_expect_error("read_state: bad index", wgml_trainer_read_state(tr, 99, 0, l2) != WGML_OK, WGML_ERR_ARG, "index 99",
                    NULL);
    th_expect_error("read_state: bad what", wgml_trainer_read_state(tr, 0, 3, l2) != WGML_OK, WGML_ERR_ARG, "what 3",
                    NULL);
    int32_t badtok[TB * TS];
    memcpy(badtok, tok[0], sizeof badtok);
    badtok[5] = V;
    th_expect_error("step: token out of range", wgml_trainer_step(tr, badtok, lab[0], 1e-3f, NULL) != WGML_OK,
                    WGML_ERR_ARG, "tokens[5] = 96", NULL);
    th_expect_error("step: bad lr", wgml_trainer_step(tr, tok[0], lab[0], -1.0f, NULL) != WGML_OK, WGML_ERR_ARG, "lr",
                    NULL);

    /* the trained adapter in the inference graphs: the last position's logits of sequence 0
     * give the cross-entropy that the eval graph computes for that one label */
    {
        th_check(!wgml_trainer_attach_lora(tr), "attach_lora: %s", wgml_last_error(T.ctx));
        th_check(wgml_model_pos(m) == 0, "set_lora resets the position");
        th_check(!wgml_model_prefill(m, tok[1], TS, l2, NULL), "adapted prefill: %s", wgml_last_error(T.ctx));
        int32_t one_label[TB * TS];
        for (int i = 0; i < TB * TS; i++) one_label[i] = -100;
        int32_t want = 17;
        one_label[TS - 1] = want;
        double lsum;
        int64_t nv;
        th_check(!wgml_trainer_eval(tr, tok[1], one_label, &lsum, &nv) && nv == 1, "eval of one label");
        double mx = -INFINITY, se = 0;
        for (int j = 0; j < V; j++) mx = l2[j] > mx ? l2[j] : mx;
        for (int j = 0; j < V; j++) se += exp(l2[j] - mx);
        double ce = log(se) + mx - l2[want];
        th_check(fabs(ce - lsum) < 1e-4 * (1 + fabs(ce)), "attached adapter: prefill CE %.6f = eval CE %.6f", ce, lsum);
        double diff = 0;
        wgml_model_reset(m);
        th_check(!wgml_model_prefill(m, tok[0], TS, l2, NULL), "adapted prefill 2");
        for (int j = 0; j < V; j++) diff = th_max_err(diff, fabs(l2[j] - base_logits[j]));
        th_check(isfinite(diff) && diff > 1e-3, "the adapter changes the logits, no NaN (max diff %.3g)", diff);
        th_check(!wgml_model_set_lora(m, 0, 0.0f, 0, NULL, NULL), "set_lora n=0: %s", wgml_last_error(T.ctx));
        th_check(!wgml_model_prefill(m, tok[0], TS, l2, NULL), "base prefill again");
        diff = 0;
        for (int j = 0; j < V; j++) diff = th_max_err(diff, fabs(l2[j] - base_logits[j]));
        th_check(diff < 1e-5, "removing the adapter restores the base logits (max diff %.3g)", diff);
        const char *nm[1] = {"blk.0.attn_q.lora_a"};
        const float *dt[1] = {l2};
        th_expect_error("set_lora: a without b", wgml_model_set_lora(m, cfg.lora_rank, cfg.lora_alpha, 1, nm, dt) != WGML_OK,
                        WGML_ERR_ARG, "only its lora_a", NULL);
        const char *nm2[1] = {"blk.9.attn_q.lora_a"};
        th_expect_error("set_lora: bad layer", wgml_model_set_lora(m, cfg.lora_rank, cfg.lora_alpha, 1, nm2, dt) != WGML_OK,
                        WGML_ERR_ARG, "blk.9.attn_q.lora_a", NULL);
    }

    /* configuration errors */
    wgml_train_config bad = cfg;
    bad.mode = (wgml_train_mode)5;
    th_expect_error("trainer_new: bad mode", wgml_trainer_new(m, &bad) == NULL, WGML_ERR_ARG, "mode 5", NULL);
    bad = cfg;
    bad.targets = 0;
    th_expect_error("trainer_new: no targets", wgml_trainer_new(m, &bad) == NULL, WGML_ERR_ARG, "targets", NULL);
    bad = cfg;
    bad.lora_rank = 0;
    th_expect_error("trainer_new: rank 0", wgml_trainer_new(m, &bad) == NULL, WGML_ERR_ARG, "lora_rank", NULL);
    bad = cfg;
    bad.grad_accum = 0;
    th_expect_error("trainer_new: grad_accum 0", wgml_trainer_new(m, &bad) == NULL, WGML_ERR_ARG, "grad_accum 0", NULL);
    th_check(wgml_trainer_new(NULL, &cfg) == NULL, "trainer_new: NULL model gives NULL");
    wgml_trainer_free(tr);
    wgml_model_free(m);
    free(base_logits), free(l2);
}

/* ------------------------------------------------------------------ gradient accumulation */

/* Every trainable tensor's params, concatenated. */
/* Every trainer tensor's part `what` (0 parameter, 1 Adam m, 2 Adam v) in tensor order (NaN
 * bits where a read fails). */
static float *all_state(wgml_trainer *tr, int what, int64_t *n_out) {
    int64_t n = 0;
    int64_t shape[4];
    int rank;
    for (int i = 0; i < wgml_trainer_tensor_count(tr); i++) {
        wgml_trainer_tensor_shape(tr, i, &rank, shape);
        n += shape[0] * shape[1];
    }
    float *h = malloc(sizeof(float) * (size_t)n);
    int64_t at = 0;
    for (int i = 0; h && i < wgml_trainer_tensor_count(tr); i++) {
        wgml_trainer_tensor_shape(tr, i, &rank, shape);
        if (wgml_trainer_read_state(tr, i, what, h + at)) memset(h + at, 0xFF, sizeof(float) * (size_t)(shape[0] * shape[1]));
        at += shape[0] * shape[1];
    }
    *n_out = n;
    return h;
}

static float *all_params(wgml_trainer *tr, int64_t *n_out) { return all_state(tr, 0, n_out); }

/* The gradient norm (before clipping) of tr's last step: word 4 of its optimizer state blob
 * (magic, version, then [t, skipped, norm, ...]); false when it cannot be read. */
static bool last_grad_norm(wgml_trainer *tr, float *norm) {
    uint8_t blob[64];
    size_t bytes = sizeof blob;
    if (wgml_trainer_read_opt_state(tr, blob, &bytes)) return false;
    memcpy(norm, blob + 4 * sizeof(uint32_t), sizeof *norm);
    return true;
}

/* |pb - pa| / |pa - p0| over all n parameters: how far two runs from p0 ended apart, against
 * how far they moved (-1 when they did not move). Elementwise bounds do not fit parameters after
 * AdamW: its m / (sqrt(v) + eps) is about sign(g) for an element whose gradient nearly cancels
 * over the tokens, and there float32 summation order alone can move the update by a good part of
 * lr (test_accum below says more). */
static double update_diff(const float *p0, const float *pa, const float *pb, int64_t n) {
    double dn = 0, un = 0;
    for (int64_t i = 0; i < n; i++) {
        dn += ((double)pa[i] - pb[i]) * ((double)pa[i] - pb[i]);
        un += ((double)pa[i] - p0[i]) * ((double)pa[i] - p0[i]);
    }
    return un > 0 ? sqrt(dn / un) : -1.0;
}

/* |b - a| / |a| over n values (-1 when a is all zero). */
static double rel_diff(const float *a, const float *b, int64_t n) {
    double dn = 0, an = 0;
    for (int64_t i = 0; i < n; i++) {
        dn += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        an += (double)a[i] * a[i];
    }
    return an > 0 ? sqrt(dn / an) : -1.0;
}

/* Copies every tensor's parameters and Adam moments from one trainer into another of the same
 * model and configuration (at a step boundary); false when a read or write fails. */
static bool copy_state(wgml_trainer *from, wgml_trainer *to) {
    bool ok = wgml_trainer_tensor_count(from) == wgml_trainer_tensor_count(to);
    for (int i = 0; ok && i < wgml_trainer_tensor_count(from); i++) {
        int rank;
        int64_t shape[4];
        ok = !wgml_trainer_tensor_shape(from, i, &rank, shape);
        float *h = ok ? malloc(sizeof(float) * (size_t)(shape[0] * shape[1])) : NULL;
        for (int what = 0; ok && what < 3; what++)
            ok = h && !wgml_trainer_read_state(from, i, what, h) && !wgml_trainer_write_state(to, i, what, h);
        free(h);
    }
    return ok;
}

/* Sets $name to val (NULL: unset) and returns its value before, copied into keep (NULL: unset). */
static const char *env_swap(const char *name, const char *val, char *keep, size_t cap) {
    const char *was = getenv(name);
    if (was) snprintf(keep, cap, "%s", was);
    if (val) setenv(name, val, 1);
    else unsetenv(name);
    return was ? keep : NULL;
}

/* A trainer built with $WGML_LORA_SHARED and $WGML_LORA_FOLD set as given (the graph's forms are
 * chosen when it is built), the caller's values put back after. */
static wgml_trainer *trainer_with(wgml_model *m, const wgml_train_config *cfg, const char *shared, const char *fold) {
    char k1[16], k2[16];
    const char *w1 = env_swap("WGML_LORA_SHARED", shared, k1, sizeof k1);
    const char *w2 = env_swap("WGML_LORA_FOLD", fold, k2, sizeof k2);
    wgml_trainer *t = m ? wgml_trainer_new(m, cfg) : NULL;
    env_swap("WGML_LORA_SHARED", w1, k1, sizeof k1);
    env_swap("WGML_LORA_FOLD", w2, k2, sizeof k2);
    return t;
}

/* Two forms of the same training graph from the same start (ta the reference form), over three
 * steps: the same loss (1e-5 rel.) and gradient norm (1e-4 rel.) at every step, and parameters
 * within 1e-2 of the update, test_accum's bound (update_diff; 36 runs of each form gave at most
 * 8.6e-5; a form that drops or misweights a gradient shows as O(1)); tb with fewer dispatches
 * when fewer is set. */
static void compare_forms(const char *what, wgml_trainer *ta, wgml_trainer *tb, const wgml_train_config *cfg,
                          bool fewer) {
    enum { SSTEPS = 3 };
    if (!th_check(ta && tb, "%s: two trainers: %s", what, wgml_last_error(T.ctx))) return;
    size_t da = wgml_graph_dispatch_count(wgml_trainer_graph(ta)), db = wgml_graph_dispatch_count(wgml_trainer_graph(tb));
    printf("  %s: %zu dispatches a step against %zu\n", what, db, da);
    if (fewer) th_check(db < da, "%s: %zu dispatches a step against %zu", what, db, da);
    int64_t n0 = 0, na = 0, nb = 0;
    float *p0 = all_params(ta, &n0);
    int32_t tok[TB * TS], lab[TB * TS];
    for (int k = 0; k < SSTEPS; k++) {
        make_batch(k, TB, TS, V, tok, lab);
        float la = 0, lb = 0, ga = 0, gb = 0; /* set before the checks read them for their messages */
        bool stepped = !wgml_trainer_step(ta, tok, lab, cfg->lr, &la) && !wgml_trainer_step(tb, tok, lab, cfg->lr, &lb);
        th_check(stepped && fabs((double)la - lb) <= 1e-5 * fabs((double)la), "%s: step %d loss %.7f against %.7f: %s",
                 what, k, (double)lb, (double)la, wgml_last_error(T.ctx));
        bool normed = last_grad_norm(ta, &ga) && last_grad_norm(tb, &gb);
        th_check(normed && ga > 0 && fabs((double)ga - gb) <= 1e-4 * ga, "%s: step %d gradient norm %.7g against %.7g",
                 what, k, (double)gb, (double)ga);
    }
    float *pa = all_params(ta, &na), *pb = all_params(tb, &nb);
    if (th_check(p0 && pa && pb && na == nb && n0 == na, "%s: parameters read", what)) {
        double e = update_diff(p0, pa, pb, na);
        printf("  %s: parameters after %d steps %.2e of the update apart\n", what, SSTEPS, e);
        th_check(e >= 0 && e < 1e-2, "%s: parameters after %d steps (diff %.2e of the update)", what, SSTEPS, e);
    }
    free(p0), free(pa), free(pb);
}

/* The shared-input LoRA groups (WGML_LORA_SHARED=1: each layer's q/k/v and gate/up through one
 * stacked A, lora_apply_shared) against the adapters one by one (both unfolded), with fewer
 * dispatches; each adapter folded into its 4-bit base's product (WGML_LORA_FOLD=1,
 * wgml_lora_qlinear) against the same; and the shared groups folded (lora_qlinear_shared, the
 * default) against the folded adapters one by one. */
static void test_lora_forms(const char *path) {
    wgml_model *ma = wgml_model_load(T.ctx, path, NULL), *mb = wgml_model_load(T.ctx, path, NULL);
    wgml_train_config cfg = tiny_config(7);
    wgml_trainer *ta = trainer_with(ma, &cfg, "0", "0"), *tb = trainer_with(mb, &cfg, "1", "0");
    compare_forms("shared groups", ta, tb, &cfg, true);
    wgml_trainer_free(ta), wgml_trainer_free(tb);
    ta = trainer_with(ma, &cfg, "0", "0");
    tb = trainer_with(mb, &cfg, "0", "1");
    compare_forms("folded adapters", ta, tb, &cfg, true);
    wgml_trainer_free(ta), wgml_trainer_free(tb);
    ta = trainer_with(ma, &cfg, "0", "1");
    tb = trainer_with(mb, &cfg, "1", "1");
    compare_forms("shared groups, folded", ta, tb, &cfg, true);
    wgml_trainer_free(ta), wgml_trainer_free(tb);
    wgml_model_free(ma), wgml_model_free(mb);
}

/* grad_accum 2 at batch 1 against grad_accum 1 at batch 2 on the same sequences: both sequences
 * of a batch have the same number of valid labels, so the mean of the two micro-batch means is
 * the batch mean and the steps must agree (to float32 summation order: the weight gradients
 * sum over 16 + 16 tokens instead of 32). The first micro-batch of a step changes no parameter
 * and no optimizer count; the loss of the batch is the mean of its micro-batches' losses. After
 * each step the accumulating trainer takes the full batch's parameters and moments, so every
 * step compares the two from the same state: AdamW turns the float32 differences of one update
 * into larger ones of the next (seed 627427693, without the copy: gradient norms 6.4e-8, 1.6e-6,
 * 3.2e-4 apart over three steps). */
static void test_accum(const char *path) {
    enum { ASTEPS = 3 };
    wgml_model *ma = wgml_model_load(T.ctx, path, NULL), *mb = wgml_model_load(T.ctx, path, NULL);
    wgml_train_config cfg = tiny_config(99);
    wgml_trainer *ta = ma ? wgml_trainer_new(ma, &cfg) : NULL;
    wgml_train_config cb = cfg;
    cb.batch = 1;
    cb.grad_accum = TB;
    wgml_trainer *tb = mb ? wgml_trainer_new(mb, &cb) : NULL;
    if (!th_check(ta && tb, "two trainers: %s", wgml_last_error(T.ctx))) goto out;
    wgml_train_config got = wgml_trainer_config(tb);
    th_check(got.batch == 1 && got.grad_accum == TB && got.lora_rank == cb.lora_rank && got.seq_len == cb.seq_len &&
                 wgml_trainer_config(NULL).lora_rank == wgml_train_defaults().lora_rank,
             "wgml_trainer_config: the configuration the trainer was made with (NULL: the defaults)");
    int64_t n = 0;
    float *p0 = all_params(ta, &n), *pa = NULL, *pb = NULL;
    double loss_err = 0, norm_err = 0, m_err = 0;
    bool synced = true;
    int held_changed = 0, bad_pending = 0, bad_count = 0;
    for (int s = 0; s < ASTEPS; s++) {
        int32_t tok[TB * TS], lab[TB * TS];
        make_batch(s, TB, TS, V, tok, lab);
        float la = 0, lb[TB] = {0};
        if (s == ASTEPS - 1) { /* a micro-batch that restoring the optimizer state drops: the
                                   last step's comparisons show none of it leaks */
            int32_t xt[TS], xl[TS];
            make_batch(7, 1, TS, V, xt, xl);
            uint8_t ob[64];
            size_t obn = sizeof ob;
            float lx;
            th_check(!wgml_trainer_step(tb, xt, xl, cfg.lr, &lx) && wgml_trainer_pending(tb) == 1 &&
                         !wgml_trainer_read_opt_state(tb, ob, &obn) && !wgml_trainer_write_opt_state(tb, ob, obn) &&
                         wgml_trainer_pending(tb) == 0,
                     "accum: wgml_trainer_write_opt_state drops a pending micro-batch: %s", wgml_last_error(T.ctx));
        }
        th_check(!wgml_trainer_step(ta, tok, lab, cfg.lr, &la), "accum: full-batch step %d: %s", s, wgml_last_error(T.ctx));
        for (int j = 0; j < TB; j++) {
            int64_t n1;
            th_check(!wgml_trainer_step(tb, tok + j * TS, lab + j * TS, cfg.lr, &lb[j]), "accum: micro-batch %d.%d: %s", s, j,
                     wgml_last_error(T.ctx));
            bad_pending += wgml_trainer_pending(tb) != (j + 1) % TB;
            if (j == 0) { /* held: the params must not have moved since the last step */
                float *now = all_params(tb, &n1);
                float *prev = s == 0 ? p0 : pb;
                held_changed += !now || !prev || memcmp(now, prev, sizeof(float) * (size_t)n) != 0;
                free(now);
            }
        }
        /* the blob: magic, version, then the optimizer's state words [t, skipped, norm, ...];
         * the gradient norm (before clipping) shows the 1 / grad_accum weighting, which Adam's
         * normalisation and the clip would hide from the parameters */
        uint8_t blob[64], blob_a[64];
        size_t bytes = sizeof blob, bytes_a = sizeof blob_a;
        uint32_t w[10], wa[10];
        if (!wgml_trainer_read_opt_state(tb, blob, &bytes) && !wgml_trainer_read_opt_state(ta, blob_a, &bytes_a)) {
            memcpy(w, blob, sizeof w);
            memcpy(wa, blob_a, sizeof wa);
            bad_count += w[2] != (uint32_t)(s + 1);
            float nb, na;
            memcpy(&nb, &w[4], sizeof nb);
            memcpy(&na, &wa[4], sizeof na);
            double e = fabs((double)nb - na) / na;
            norm_err = th_max_err(norm_err, e);
        }
        double mean = 0;
        for (int j = 0; j < TB; j++) mean += lb[j] / (double)TB;
        double e = fabs(mean - la) / fabs(la);
        loss_err = th_max_err(loss_err, e);
        /* Adam's m: the step's gradient after the clip (its direction; the clip hides the 1 /
         * grad_accum weighting from it, which the norm above shows) */
        int64_t nm = 0;
        float *ma = all_state(ta, 1, &nm), *mb = all_state(tb, 1, &nm);
        double me = ma && mb ? rel_diff(ma, mb, nm) : -1.0;
        m_err = me < 0 || m_err < 0 ? -1.0 : th_max_err(m_err, me);
        free(ma), free(mb);
        if (s + 1 < ASTEPS) synced = synced && copy_state(ta, tb);
        free(pb);
        pb = all_params(tb, &n);
    }
    pa = all_params(ta, &n);
    double ud = p0 && pa && pb ? update_diff(p0, pa, pb, n) : -1.0;
    printf("  accum: %d steps of 2 x 1 micro-batches vs batch 2: losses within %.2e, Adam's m %.2e, params %.2e of the "
           "update\n", ASTEPS, loss_err, m_err, ud);
    th_check(held_changed == 0, "accum: the first micro-batch of a step changes no parameter");
    th_check(bad_pending == 0, "accum: wgml_trainer_pending counts the micro-batches");
    th_check(bad_count == 0, "accum: the optimizer counts one step per %d micro-batches", TB);
    th_check(loss_err < 1e-4, "accum: batch loss = mean of its micro-batch losses (max rel. diff %.2e)", loss_err);
    th_check(norm_err < 1e-4, "accum: the summed gradient's norm = the full batch's (max rel. diff %.2e)", norm_err);
    th_check(synced, "accum: the full batch's state copied into the accumulating trainer: %s", wgml_last_error(T.ctx));
    th_check(m_err >= 0 && m_err < 1e-4, "accum: Adam's m = the full batch's (max rel. diff %.2e)", m_err);
    /* 1e-2 of the update, not tighter: Adam's m / (sqrt(v) + eps) is about sign(g) for an element
     * whose gradient nearly cancels over the tokens, and there the summation order (16 + 16 vs
     * 32 tokens) can move the update by a good part of lr. With the state copied each step, seeds
     * 627427693, 862906324, 5, 6 and 7 gave 6.1e-8 to 6.6e-8; without the copy the first two gave
     * 1.07e-2 and 3.8e-4 (the first step's flips carried on). A wrong 1 / grad_accum weighting
     * fails the norm check (a weight of 1/3 for 1/2: 3.3e-1), a lost or stale micro-batch shows
     * as O(1) here and in the loss, norm and m checks. */
    th_check(ud >= 0 && ud < 1e-2, "accum: params after %d steps equal the full batch's (diff %.2e of the update)",
             ASTEPS, ud);
    free(p0), free(pa), free(pb);
out:
    wgml_trainer_free(ta);
    wgml_trainer_free(tb);
    wgml_model_free(ma);
    wgml_model_free(mb);
}

/* ------------------------------------------------------------------ checkpoints and adapters */

/* A checkpoint of a trainer after two steps restores another trainer of the same configuration
 * exactly (parameters, Adam moments, optimizer blob; the next step's loss is bit-identical);
 * one of another rank is refused naming the mismatch. The adapter saved from the trainer loads
 * back into a third trainer with the same parameters and attaches to the model. */
static void test_checkpoint_adapter(const char *path) {
    char dir[96], err[700];
    th_tmp_path(dir, sizeof dir, "wgml-trainer-ckpt-%d", (int)getpid());
    wgml_model *ma = wgml_model_load(T.ctx, path, NULL), *mb = wgml_model_load(T.ctx, path, NULL);
    wgml_train_config cfg = tiny_config(5), c4 = tiny_config(5);
    c4.lora_rank = 2;
    wgml_trainer *ta = ma ? wgml_trainer_new(ma, &cfg) : NULL, *tb = mb ? wgml_trainer_new(mb, &cfg) : NULL;
    wgml_trainer *tr2 = mb ? wgml_trainer_new(mb, &c4) : NULL, *tc = NULL;
    wgml_checkpoint *ck = NULL;
    wgml_adapter *ad = NULL;
    if (!th_check(ta && tb && tr2, "three trainers: %s", wgml_last_error(T.ctx))) goto out;
    int32_t tok[TB * TS], lab[TB * TS];
    float l = 0, la = 0, lb = 0;
    for (int s = 0; s < 2; s++) {
        make_batch(s, TB, TS, V, tok, lab);
        th_check(!wgml_trainer_step(ta, tok, lab, cfg.lr, &l), "checkpoint: step %d: %s", s, wgml_last_error(T.ctx));
    }
    const char *keys[2] = {"step", "note"}, *vals[2] = {"2", "two steps"};
    wgml_status s = wgml_checkpoint_save(ta, dir, keys, vals, 2, err, sizeof err);
    th_check(s == WGML_OK, "checkpoint: saved (%s)", s ? err : "");
    s = wgml_checkpoint_open(dir, &ck, err, sizeof err);
    th_check(s == WGML_OK && ck && wgml_checkpoint_meta(ck, "step") && !strcmp(wgml_checkpoint_meta(ck, "step"), "2") &&
                 !wgml_checkpoint_meta(ck, "absent") && wgml_checkpoint_expect(ck, "note", "two steps", err, sizeof err) == WGML_OK,
             "checkpoint: opened, the caller's metadata read back (%s)", s ? err : "");
    if (!ck) goto out;
    th_check(wgml_checkpoint_expect(ck, "step", "3", err, sizeof err) == WGML_ERR_FORMAT &&
                 strstr(err, "checkpoint mismatch: step is '2' in the checkpoint but '3' in this run"),
             "checkpoint: a metadata mismatch is named (%s)", err);
    s = wgml_checkpoint_restore(ck, tr2, err, sizeof err);
    th_check(s == WGML_ERR_FORMAT && strstr(err, "checkpoint mismatch: tensor blk.0.attn_q.lora_a is missing or has another shape"),
             "checkpoint: a trainer of another rank is refused (%s)", err);
    s = wgml_checkpoint_restore(ck, tb, err, sizeof err);
    th_check(s == WGML_OK && wgml_trainer_pending(tb) == 0, "checkpoint: restored (%s)", s ? err : "");
    int same = 1;
    for (int what = 0; what < 3; what++) {
        int64_t na = 0, nb = 0;
        float *xa = all_state(ta, what, &na), *xb = all_state(tb, what, &nb);
        same &= xa && xb && na == nb && !memcmp(xa, xb, sizeof(float) * (size_t)na);
        free(xa), free(xb);
    }
    uint8_t oa[64], ob[64];
    size_t noa = sizeof oa, nob = sizeof ob;
    same &= !wgml_trainer_read_opt_state(ta, oa, &noa) && !wgml_trainer_read_opt_state(tb, ob, &nob) && noa == nob && !memcmp(oa, ob, noa);
    th_check(same, "checkpoint: parameters, Adam moments and the optimizer blob restored bit for bit");
    make_batch(2, TB, TS, V, tok, lab);
    th_check(!wgml_trainer_step(ta, tok, lab, cfg.lr, &la) && !wgml_trainer_step(tb, tok, lab, cfg.lr, &lb) && la == lb,
             "checkpoint: the next step's loss is the same (%.9g, %.9g)", (double)la, (double)lb);

    /* the adapter of ta (three steps) */
    char sha[65];
    wgml_adapter_info info = {.base_model = path, .base_sha256 = sha, .data = "batches", .steps = 3};
    th_check(wgml_file_sha256(path, sha, &info.base_size, err, sizeof err) == WGML_OK, "adapter: sha256 of the model");
    s = wgml_trainer_save_adapter(ta, &cfg, dir, &info, err, sizeof err);
    th_check(s == WGML_OK, "adapter: saved (%s)", s ? err : "");
    s = wgml_adapter_load(dir, path, &ad, err, sizeof err);
    th_check(s == WGML_OK && ad && wgml_adapter_tensor_count(ad) == wgml_trainer_tensor_count(ta),
             "adapter: loads against the model it was trained on (%s)", s ? err : "");
    if (!ad) goto out;
    th_check(wgml_trainer_load_adapter(tr2, ad, err, sizeof err) == WGML_ERR_FORMAT && strstr(err, "missing or has another shape"),
             "adapter: a trainer of another rank is refused (%s)", err);
    tc = wgml_trainer_new(mb, wgml_adapter_config(ad));
    s = tc ? wgml_trainer_load_adapter(tc, ad, err, sizeof err) : WGML_ERR_STATE;
    th_check(s == WGML_OK, "adapter: written into a trainer of its configuration (%s)", s ? err : wgml_last_error(T.ctx));
    int64_t na = 0, nc = 0;
    float *pa = all_params(ta, &na), *pc = tc ? all_params(tc, &nc) : NULL;
    th_check(pa && pc && na == nc && !memcmp(pa, pc, sizeof(float) * (size_t)na), "adapter: the trained parameters read back bit for bit");
    free(pa), free(pc);
    th_check(wgml_adapter_attach(mb, ad) == WGML_OK, "adapter: attached to the model's inference graphs: %s", wgml_last_error(T.ctx));
out:
    wgml_checkpoint_close(ck);
    wgml_adapter_free(ad);
    wgml_trainer_free(ta);
    wgml_trainer_free(tb);
    wgml_trainer_free(tr2);
    wgml_trainer_free(tc);
    wgml_model_free(ma);
    wgml_model_free(mb);
    th_check(th_remove_tree(dir) == 0, "checkpoint: the test's folder %s removed", dir);
}

/* ------------------------------------------------------------------ straight-through */

static void test_ste(const char *path, const synth *sy) {
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    if (!th_check(m != NULL, "load the synthetic model: %s", wgml_last_error(T.ctx))) return;
    wgml_train_config cfg = wgml_train_defaults();
    cfg.mode = WGML_TRAIN_STE;
    cfg.targets = WGML_TARGET_ALL;
    cfg.batch = TB;
    cfg.seq_len = TS;
    cfg.lr = 1e-2f;
    cfg.weight_decay = 0.0f;
    cfg.clip_norm = 1.0f;
    int32_t tok[NB][TB * TS], lab[NB][TB * TS];
    for (int k = 0; k < NB; k++) make_batch(k, TB, TS, V, tok[k], lab[k]);
    float *base = malloc(sizeof(float) * V), *after = malloc(sizeof(float) * V);
    th_check(!wgml_model_prefill(m, tok[0], TS, base, NULL), "STE: base prefill");
    wgml_trainer *tr = wgml_trainer_new(m, &cfg);
    if (!th_check(tr != NULL, "STE trainer_new: %s", wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        free(base), free(after);
        return;
    }
    /* 4-bit targets: 14 linears less layer 0's F32 attn_v and layer 1's Q8_0 ffn_up */
    int n = wgml_trainer_tensor_count(tr);
    th_check(n == 12 && !strcmp(wgml_trainer_tensor_name(tr, 0), "blk.0.attn_q.latent") &&
                 !strcmp(wgml_trainer_tensor_name(tr, 2), "blk.0.attn_output.latent"),
             "STE: %d latents, names %s, %s", n, wgml_trainer_tensor_name(tr, 0), wgml_trainer_tensor_name(tr, 2));
    /* the latent starts at the dequantised weight (the reference's dequantisation) */
    {
        const mat *wq = NULL;
        for (int i = 0; i < sy->n; i++)
            if (!strcmp(sy->m[i].name, "blk.0.attn_q.weight")) wq = &sy->m[i];
        float *lat = malloc(sizeof(float) * (size_t)(wq->n * wq->k));
        th_check(!wgml_trainer_read_state(tr, 0, 0, lat), "STE: read latent");
        th_close("STE: initial latent = dequantised blk.0.attn_q", lat, wq->w, (size_t)(wq->n * wq->k), 0, 0);
        free(lat);
    }
    float losses[STEPS];
    int bad_submits = 0, bad_reads = 0;
    double eval_err = 0;
    for (int s = 0; s < STEPS; s++) {
        int k = s % NB;
        double lsum = 0;
        int64_t nv = 1;
        if (s % 5 == 0) th_check(!wgml_trainer_eval(tr, tok[k], lab[k], &lsum, &nv), "STE eval");
        uint64_t r0 = wgml_read_bytes(T.ctx);
        if (!th_check(!wgml_trainer_step(tr, tok[k], lab[k], cfg.lr, &losses[s]), "STE step %d: %s", s,
                      wgml_last_error(T.ctx)))
            break;
        bad_reads += wgml_read_bytes(T.ctx) - r0 != 4;
        bad_submits += wgml_trainer_submits_per_step(tr) > 3;
        if (s % 5 == 0) eval_err = th_max_err(eval_err, fabs(lsum / (double)nv - losses[s]) / fabs(losses[s]));
    }
    printf("  STE: losses");
    for (int s = 0; s < STEPS; s++) printf(" %.4f", losses[s]);
    printf("\n");
    th_check(bad_submits == 0 && bad_reads == 0, "STE: every step is <= 3 submits and reads 4 bytes");
    th_check(eval_err < 1e-5, "STE: eval loss = step loss before the update (max rel. diff %.2e)", eval_err);
    double first = (losses[0] + losses[1] + losses[2] + losses[3]) / 4;
    double last = (losses[STEPS - 4] + losses[STEPS - 3] + losses[STEPS - 2] + losses[STEPS - 1]) / 4;
    th_check(isfinite(last) && last < 0.9 * first, "STE: the loss decreases: first 4 steps %.4f, last 4 %.4f", first,
             last);
    /* the model's own codes changed: generation sees the trained weights */
    th_check(!wgml_trainer_attach_lora(tr), "STE: attach is a no-op");
    wgml_model_reset(m);
    th_check(!wgml_model_prefill(m, tok[0], TS, after, NULL), "STE: prefill after training");
    double diff = 0;
    for (int j = 0; j < V; j++) diff = th_max_err(diff, fabs(after[j] - base[j]));
    th_check(isfinite(diff) && diff > 1e-3, "STE: the trained codes change the model's logits, no NaN (max diff %.3g)",
             diff);
    wgml_trainer_free(tr);
    wgml_model_free(m);
    free(base), free(after);
}

/* ------------------------------------------------ a real model (parity dump only) */

/* An environment knob's integer or float value, `def` when unset. */
static double env_num(const char *name, double def) {
    const char *v = getenv(name);
    return v && *v ? atof(v) : def;
}

static const char *KJV =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided "
    "the light from the darkness. And God called the light Day, and the darkness he called Night. And the "
    "evening and the morning were the first day.";

/* A LoRA run (r 8, alpha 16, q and v) on the model file `path`, dumped as case `cs` for
 * tests/py/test_trainer_parity.py (SmolLM2: 5 steps of 32 tokens at lr 2e-3, the defaults) and
 * tests/py/test_gemma3_peft.py, which sets WGML_TRAINER_STEPS, _SEQ and _LR to keep Gemma short. */
static void test_model(const char *path, const char *cs) {
    enum { SB = 1 };
    const int SS = (int)env_num("WGML_TRAINER_SEQ", 32), SSTEPS = (int)env_num("WGML_TRAINER_STEPS", 5);
    if (!th_check(SS >= 2 && SS <= 256 && SSTEPS >= 1 && SSTEPS <= 100, "WGML_TRAINER_SEQ %d, _STEPS %d", SS, SSTEPS))
        return;
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    if (!th_check(m != NULL, "load %s: %s", path, wgml_last_error(T.ctx))) return;
    int32_t *ids = NULL;
    size_t n = 0;
    wgml_tokenizer_encode(wgml_model_tokenizer(m), KJV, strlen(KJV), 0, &ids, &n);
    if (!th_check(n >= (size_t)(2 * SS + 2), "the text gives %zu tokens", n)) {
        free(ids);
        wgml_model_free(m);
        return;
    }
    int32_t *tok = malloc(sizeof(int32_t) * 2 * (size_t)SS), *lab = malloc(sizeof(int32_t) * 2 * (size_t)SS);
    float *losses = calloc((size_t)SSTEPS, sizeof(float));
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < SS; i++) {
            tok[k * SS + i] = ids[k * SS + i];
            lab[k * SS + i] = ids[k * SS + i + 1];
        }
    free(ids);
    wgml_train_config cfg = wgml_train_defaults();
    cfg.lora_rank = 8;
    cfg.lora_alpha = 16.0f;
    cfg.targets = WGML_TARGET_Q | WGML_TARGET_V;
    cfg.batch = SB;
    cfg.seq_len = SS;
    cfg.lr = (float)env_num("WGML_TRAINER_LR", 2e-3);
    cfg.clip_norm = 1.0f;
    cfg.seed = 7;
    double t0 = now_s();
    wgml_trainer *tr = wgml_trainer_new(m, &cfg);
    if (!th_check(tr != NULL, "%s trainer_new: %s", cs, wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        free(tok), free(lab), free(losses);
        return;
    }
    printf("  %s: trainer built in %.2f s\n", cs, now_s() - t0);
    dump_config(cs, &cfg, SSTEPS, 2);
    dump_params(cs, tr, ".init");
    int64_t sh[3] = {2, SB, SS};
    th_dump(cs, "tokens", WGML_I32, 3, sh, tok);
    th_dump(cs, "labels", WGML_I32, 3, sh, lab);
    for (int s = 0; s < SSTEPS; s++) {
        double ts = now_s();
        if (!th_check(!wgml_trainer_step(tr, tok + s % 2 * SS, lab + s % 2 * SS, cfg.lr, &losses[s]), "%s step %d: %s", cs, s,
                      wgml_last_error(T.ctx)))
            break;
        printf("  %s: step %d loss %.5f, %.2f s, %llu submits\n", cs, s, losses[s], now_s() - ts,
               (unsigned long long)wgml_trainer_submits_per_step(tr));
    }
    int64_t ns = SSTEPS;
    th_dump(cs, "losses", WGML_F32, 1, &ns, losses);
    th_check(wgml_trainer_submits_per_step(tr) <= 3, "%s: %llu submits per step", cs,
             (unsigned long long)wgml_trainer_submits_per_step(tr));
    wgml_trainer_free(tr);
    wgml_model_free(m);
    free(tok), free(lab), free(losses);
}

int main(int argc, char **argv) {
    th_init_args("test_trainer", argc, argv);
    char path[64];
    th_tmp_path(path, sizeof path, "wgml-trainer-%d.gguf", (int)getpid());
    synth s;
    synth_make(&s, 1);
    if (th_check(synth_write(&s, path, "llama", NULL, NULL), "write %s", path)) {
        double t0 = now_s();
        test_tiny(path);
        printf("  tiny model: %.2f s\n", now_s() - t0);
        t0 = now_s();
        test_lora_forms(path);
        printf("  LoRA's forms: %.2f s\n", now_s() - t0);
        t0 = now_s();
        test_accum(path);
        printf("  gradient accumulation: %.2f s\n", now_s() - t0);
        t0 = now_s();
        test_checkpoint_adapter(path);
        printf("  checkpoint and adapter: %.2f s\n", now_s() - t0);
        t0 = now_s();
        test_ste(path, &s);
        printf("  straight-through: %.2f s\n", now_s() - t0);
    }
    remove(path);
    synth_free(&s);
    const char *smol = getenv("WGML_TRAINER_MODEL");
    const char *cs = getenv("WGML_TRAINER_CASE");
    if (smol && *smol) test_model(smol, cs && *cs ? cs : "smol");
    return th_done();
}
