/* The training step (src/train/trainer.c) on a tiny synthetic Llama (2 layers, Q4_0 / Q4_1 /
 * Q8_0 / F32 weights, tied Q8_0 embedding, written as a GGUF with gguf_build.h): 20 LoRA steps
 * on fixed batches lower the loss; a step is one graph run (at most 3 submits) that reads back
 * only the 4-byte loss; the eval graph agrees with the step's loss on the same batch before the
 * update; the state read/write and optimizer blob round trip; the trained adapter attached to
 * the inference graphs gives the logits the eval graph implies; straight-through training of the
 * 4-bit weights (latents start at the dequantised weights, the loss falls, the model's codes
 * change); errors. Trainers compared with each other (LoRA's graph forms, gradient accumulation,
 * checkpoints and adapter files): test_trainer_compare.c. With --dump, the model, the batches,
 * wgml's losses and the whole optimizer state (params, Adam m and v) before every step go to
 * tests/py/test_trainer_parity.py, which checks each step from wgml's state and trains the same
 * model in PyTorch float32; with $WGML_TRAINER_MODEL (a GGUF path) also a LoRA run on that model
 * (SmolLM2: 5 steps; Gemma-3-270M for tests/py/test_gemma3_peft.py: fewer, shorter steps, see
 * test_model). */
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

#include "trainer_util.h"

/* ------------------------------------------------------------------ helpers */

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

static void test_tiny(const char *path) {
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    if (!th_check(m != NULL, "load the synthetic model: %s", wgml_last_error(T.ctx))) return;
    wgml_train_config cfg = tiny_config(1234);

    /* base logits of a prompt before any adapter, to check wgml_model_set_lora(n = 0) later */
    int32_t tok[NB][TB * TS], lab[NB][TB * TS];
    for (int k = 0; k < NB; k++) make_batch(k, TB, TS, V, tok[k], lab[k]);
    float *base_logits = malloc(sizeof(float) * V), *l2 = malloc(sizeof(float) * V);
    th_check(!wgml_model_prefill(m, tok[0], TS, base_logits, NULL), "base prefill: %s", wgml_last_error(T.ctx));

    double t0 = now();
    wgml_trainer *tr = wgml_trainer_new(m, &cfg);
    if (!th_check(tr != NULL, "trainer_new: %s", wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        free(base_logits), free(l2);
        return;
    }
    printf("  tiny: trainer built and compiled in %.2f s; %d trainable tensors\n", now() - t0,
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
        double ts = now();
        if (!th_check(!wgml_trainer_step(tr, tok[k], lab[k], cfg.lr, &losses[s]), "step %d: %s", s,
                      wgml_last_error(T.ctx)))
            break;
        step_s += now() - ts;
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
    double t0 = now();
    wgml_trainer *tr = wgml_trainer_new(m, &cfg);
    if (!th_check(tr != NULL, "%s trainer_new: %s", cs, wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        free(tok), free(lab), free(losses);
        return;
    }
    printf("  %s: trainer built in %.2f s\n", cs, now() - t0);
    dump_config(cs, &cfg, SSTEPS, 2);
    dump_params(cs, tr, ".init");
    int64_t sh[3] = {2, SB, SS};
    th_dump(cs, "tokens", WGML_I32, 3, sh, tok);
    th_dump(cs, "labels", WGML_I32, 3, sh, lab);
    for (int s = 0; s < SSTEPS; s++) {
        double ts = now();
        if (!th_check(!wgml_trainer_step(tr, tok + s % 2 * SS, lab + s % 2 * SS, cfg.lr, &losses[s]), "%s step %d: %s", cs, s,
                      wgml_last_error(T.ctx)))
            break;
        printf("  %s: step %d loss %.5f, %.2f s, %llu submits\n", cs, s, losses[s], now() - ts,
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
    synth s;
    if (tiny_model_write(&s, path, sizeof path)) {
        double t0 = now();
        test_tiny(path);
        printf("  tiny model: %.2f s\n", now() - t0);
        t0 = now();
        test_ste(path, &s);
        printf("  straight-through: %.2f s\n", now() - t0);
    }
    remove(path);
    synth_free(&s);
    const char *smol = getenv("WGML_TRAINER_MODEL");
    const char *cs = getenv("WGML_TRAINER_CASE");
    if (smol && *smol) test_model(smol, cs && *cs ? cs : "smol");
    return th_done();
}
