/* TEMPORARY, until src/train/trainer.c (the training-step API, written on another branch)
 * is merged: its declarations, exactly as agreed, so tools/finetune.c builds and the rest of
 * `wgml finetune` can be exercised. Once src/train/trainer.c exists this header declares
 * nothing (the real declarations come from wgml.h) and tools/trainer_stub.c compiles to
 * nothing; both files can then be deleted. */
#ifndef WGML_TOOLS_TRAINER_API_H
#define WGML_TOOLS_TRAINER_API_H

#include "wgml.h"

#if !__has_include("../src/train/trainer.c")
#define WGML_TRAINER_STUB 1
typedef enum { WGML_TRAIN_LORA = 0, WGML_TRAIN_STE = 1 } wgml_train_mode;
enum {
    WGML_TARGET_Q = 1, WGML_TARGET_K = 2, WGML_TARGET_V = 4, WGML_TARGET_O = 8,
    WGML_TARGET_GATE = 16, WGML_TARGET_UP = 32, WGML_TARGET_DOWN = 64, WGML_TARGET_ALL = 127
};
typedef struct wgml_train_config {
    wgml_train_mode mode;
    int lora_rank;
    float lora_alpha;
    unsigned targets;
    int batch;
    int seq_len;
    float lr, weight_decay, beta1, beta2, eps, clip_norm;
    uint64_t seed;
} wgml_train_config;
typedef struct wgml_trainer wgml_trainer;
wgml_train_config wgml_train_defaults(void);
wgml_trainer *wgml_trainer_new(wgml_model *m, const wgml_train_config *cfg);
void wgml_trainer_free(wgml_trainer *t);
wgml_status wgml_trainer_step(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, float lr, float *loss);
wgml_status wgml_trainer_eval(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, double *loss_sum, int64_t *n_valid);
int wgml_trainer_tensor_count(const wgml_trainer *t);
const char *wgml_trainer_tensor_name(const wgml_trainer *t, int i);
wgml_status wgml_trainer_tensor_shape(const wgml_trainer *t, int i, int *rank, int64_t shape[4]);
wgml_status wgml_trainer_read_state(wgml_trainer *t, int i, int what, float *out);
wgml_status wgml_trainer_write_state(wgml_trainer *t, int i, int what, const float *in);
wgml_status wgml_trainer_read_opt_state(wgml_trainer *t, void *buf, size_t *bytes);
wgml_status wgml_trainer_write_opt_state(wgml_trainer *t, const void *buf, size_t bytes);
wgml_status wgml_model_set_lora(wgml_model *m, const wgml_train_config *cfg, int n, const char *const *names, const float *const *data);
#endif

#endif
