/* Trainers (src/train/trainer.c) of the tiny synthetic Llama (tiny_llama.h, as test_trainer.c's)
 * compared with each other from the same start: LoRA's graph forms (the shared-input groups, the
 * adapters folded into their 4-bit bases, both) against the adapters one by one, with fewer
 * dispatches; gradient accumulation (grad_accum 2 at batch 1) against the full batch (losses,
 * the gradient norm, Adam's m, the parameters; the first micro-batch of a step moves nothing);
 * a checkpoint of a trainer restores another exactly (one of another rank is refused), and the
 * trained adapter, saved and loaded back, gives a third trainer the same parameters and attaches
 * to the model. */
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
    if (val) th_setenv(name, val, 1);
    else th_unsetenv(name);
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
                float *cur = all_params(tb, &n1);
                float *prev = s == 0 ? p0 : pb;
                held_changed += !cur || !prev || memcmp(cur, prev, sizeof(float) * (size_t)n) != 0;
                free(cur);
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

int main(int argc, char **argv) {
    th_init_args("test_trainer_compare", argc, argv);
    char path[64];
    synth s;
    if (tiny_model_write(&s, path, sizeof path)) {
        double t0 = now();
        test_lora_forms(path);
        printf("  LoRA's forms: %.2f s\n", now() - t0);
        t0 = now();
        test_accum(path);
        printf("  gradient accumulation: %.2f s\n", now() - t0);
        t0 = now();
        test_checkpoint_adapter(path);
        printf("  checkpoint and adapter: %.2f s\n", now() - t0);
    }
    remove(path);
    synth_free(&s);
    return th_done();
}
