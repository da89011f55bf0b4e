/* TEMPORARY stand-in for src/train/trainer.c (see trainer_api.h): wgml_trainer_new and
 * wgml_model_set_lora fail with WGML_ERR_UNSUPPORTED. Compiles to nothing once the real trainer
 * is in the tree. */
#include "trainer_api.h"

#ifdef WGML_TRAINER_STUB
#include "gpu/gpu.h"
#include "model/llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wgml_train_config wgml_train_defaults(void) {
    /* the real trainer's defaults */
    return (wgml_train_config){.mode = WGML_TRAIN_LORA, .lora_rank = 8, .lora_alpha = 16, .targets = WGML_TARGET_Q | WGML_TARGET_V,
                               .batch = 1, .seq_len = 64, .lr = 2e-4f, .weight_decay = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
                               .eps = 1e-8f, .clip_norm = 1.0f, .seed = 0};
}
/* With WGML_FAKE_TRAINER=1 a fake trainer stands in, so the plumbing of wgml finetune / eval /
 * generate --lora (data order, schedule, checkpoints, resume, Ctrl-C, outputs) can be tested
 * before the real one is merged: LoRA-shaped tensors (A random, B zero), a "step" that moves
 * them deterministically from the tokens and the learning rate, AdamW-like moments, and a
 * loss that falls as B grows. Its numbers mean nothing. */
struct wgml_trainer {
    wgml_train_config cfg;
    int n;
    char name[7 * 64][48];
    int64_t shape[7 * 64][2];
    float *p[7 * 64], *m[7 * 64], *v[7 * 64];
    uint64_t t;
};

static int fake_on(void) {
    const char *e = getenv("WGML_FAKE_TRAINER");
    return e && !strcmp(e, "1");
}

wgml_trainer *wgml_trainer_new(wgml_model *m, const wgml_train_config *cfg) {
    if (!fake_on() || cfg->mode != WGML_TRAIN_LORA) {
        wgml_set_error(llama_ctx(m), WGML_ERR_UNSUPPORTED, "trainer: not in this build (src/train/trainer.c is not merged yet)");
        return NULL;
    }
    const wgml_llama_config *c = wgml_model_config(m);
    wgml_trainer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->cfg = *cfg;
    static const char *const proj[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    int64_t q = c->n_head * c->head_dim, kv = c->n_head_kv * c->head_dim;
    int64_t nk[7][2] = {{q, c->n_embd}, {kv, c->n_embd}, {kv, c->n_embd}, {c->n_embd, q}, {c->n_ff, c->n_embd}, {c->n_ff, c->n_embd}, {c->n_embd, c->n_ff}};
    uint64_t st = cfg->seed * 0x9e3779b97f4a7c15ull + 1;
    for (int l = 0; l < c->n_layer && l < 64; l++)
        for (int j = 0; j < 7; j++) {
            if (!(cfg->targets & (1u << j))) continue;
            for (int ab = 0; ab < 2; ab++) {
                int i = t->n++;
                snprintf(t->name[i], sizeof t->name[i], "blk.%d.%s.lora_%s", l, proj[j], ab ? "b" : "a");
                t->shape[i][0] = ab ? nk[j][0] : cfg->lora_rank;
                t->shape[i][1] = ab ? cfg->lora_rank : nk[j][1];
                size_t ne = (size_t)(t->shape[i][0] * t->shape[i][1]);
                t->p[i] = calloc(ne, 4), t->m[i] = calloc(ne, 4), t->v[i] = calloc(ne, 4);
                for (size_t e = 0; !ab && e < ne; e++) {
                    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                    t->p[i][e] = (float)((double)(st >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
                }
            }
        }
    return t;
}
void wgml_trainer_free(wgml_trainer *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->p[i]), free(t->m[i]), free(t->v[i]);
    free(t);
}
static double fake_bsum(const wgml_trainer *t) {
    double s = 0;
    for (int i = 1; i < t->n; i += 2)
        for (int64_t e = 0; e < t->shape[i][0] * t->shape[i][1]; e++) s += fabs(t->p[i][e]);
    return s;
}
static double fake_row_loss(const wgml_trainer *t, double bsum, int32_t tok, int32_t lab) {
    (void)t;
    return 2.0 + 3.0 / (1.0 + bsum) + 0.01 * (double)((tok * 31 + lab) % 17);
}
wgml_status wgml_trainer_step(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, float lr, float *loss) {
    int64_t n = (int64_t)t->cfg.batch * t->cfg.seq_len, nv = 0;
    double sum = 0, bsum = fake_bsum(t), h = 0;
    for (int64_t j = 0; j < n; j++)
        if (labels[j] >= 0) sum += fake_row_loss(t, bsum, tokens[j], labels[j]), nv++, h += tokens[j] % 5;
    *loss = nv ? (float)(sum / (double)nv) : 0.0f;
    t->t++;
    for (int i = 0; i < t->n; i++)
        for (int64_t e = 0; e < t->shape[i][0] * t->shape[i][1]; e++) {
            float g = (float)((h + (double)e) * 1e-3) - (i % 2 ? 1.0f : 0.0f);
            t->m[i][e] = 0.9f * t->m[i][e] + 0.1f * g;
            t->v[i][e] = 0.999f * t->v[i][e] + 0.001f * g * g;
            t->p[i][e] -= lr * t->m[i][e] / (sqrtf(t->v[i][e]) + 1e-8f) * (float)t->t / (float)(t->t + 1);
        }
    return WGML_OK;
}
wgml_status wgml_trainer_eval(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, double *loss_sum, int64_t *n_valid) {
    int64_t n = (int64_t)t->cfg.batch * t->cfg.seq_len, nv = 0;
    double sum = 0, bsum = fake_bsum(t);
    for (int64_t j = 0; j < n; j++)
        if (labels[j] >= 0) sum += fake_row_loss(t, bsum, tokens[j], labels[j]), nv++;
    *loss_sum = sum;
    *n_valid = nv;
    return WGML_OK;
}
int wgml_trainer_tensor_count(const wgml_trainer *t) { return t->n; }
const char *wgml_trainer_tensor_name(const wgml_trainer *t, int i) { return i >= 0 && i < t->n ? t->name[i] : NULL; }
wgml_status wgml_trainer_tensor_shape(const wgml_trainer *t, int i, int *rank, int64_t shape[4]) {
    if (i < 0 || i >= t->n) return WGML_ERR_ARG;
    *rank = 2;
    shape[0] = t->shape[i][0], shape[1] = t->shape[i][1];
    return WGML_OK;
}
static float *fake_buf(wgml_trainer *t, int i, int what) { return what == 0 ? t->p[i] : what == 1 ? t->m[i] : t->v[i]; }
wgml_status wgml_trainer_read_state(wgml_trainer *t, int i, int what, float *out) {
    if (i < 0 || i >= t->n || what < 0 || what > 2) return WGML_ERR_ARG;
    memcpy(out, fake_buf(t, i, what), (size_t)(t->shape[i][0] * t->shape[i][1]) * 4);
    return WGML_OK;
}
wgml_status wgml_trainer_write_state(wgml_trainer *t, int i, int what, const float *in) {
    if (i < 0 || i >= t->n || what < 0 || what > 2) return WGML_ERR_ARG;
    memcpy(fake_buf(t, i, what), in, (size_t)(t->shape[i][0] * t->shape[i][1]) * 4);
    return WGML_OK;
}
wgml_status wgml_trainer_read_opt_state(wgml_trainer *t, void *buf, size_t *bytes) {
    if (!buf || !bytes || *bytes < 8) return WGML_ERR_ARG;
    memcpy(buf, &t->t, 8);
    *bytes = 8;
    return WGML_OK;
}
wgml_status wgml_trainer_write_opt_state(wgml_trainer *t, const void *buf, size_t bytes) {
    if (bytes != 8) return WGML_ERR_FORMAT;
    memcpy(&t->t, buf, 8);
    return WGML_OK;
}
wgml_status wgml_model_set_lora(wgml_model *m, const wgml_train_config *cfg, int n, const char *const *names, const float *const *data) {
    if (fake_on()) return WGML_OK; /* the fake changes nothing in the model */
    return wgml_set_error(llama_ctx(m), WGML_ERR_UNSUPPORTED, "set_lora: not in this build (src/train/trainer.c is not merged yet)");
}
#else
typedef int trainer_stub_unused; /* ISO C wants a translation unit to declare something */
#endif
