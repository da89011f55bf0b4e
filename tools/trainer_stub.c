/* TEMPORARY stand-in for src/train/trainer.c (see trainer_api.h): every call fails with
 * WGML_ERR_UNSUPPORTED. Compiles to nothing once the real trainer is in the tree. */
#include "trainer_api.h"

#ifdef WGML_TRAINER_STUB
#include "gpu/gpu.h"
#include "model/llama.h"

wgml_train_config wgml_train_defaults(void) {
    return (wgml_train_config){.mode = WGML_TRAIN_LORA, .lora_rank = 8, .lora_alpha = 16, .targets = WGML_TARGET_ALL, .batch = 1,
                               .seq_len = 64, .lr = 1e-3f, .weight_decay = 0.0f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                               .clip_norm = 1.0f, .seed = 0};
}
wgml_trainer *wgml_trainer_new(wgml_model *m, const wgml_train_config *cfg) {
    (void)cfg;
    wgml_set_error(llama_ctx(m), WGML_ERR_UNSUPPORTED, "trainer: not in this build (src/train/trainer.c is not merged yet)");
    return NULL;
}
void wgml_trainer_free(wgml_trainer *t) { (void)t; }
wgml_status wgml_trainer_step(wgml_trainer *t, const int32_t *a, const int32_t *b, float lr, float *loss) { return WGML_ERR_UNSUPPORTED; }
wgml_status wgml_trainer_eval(wgml_trainer *t, const int32_t *a, const int32_t *b, double *s, int64_t *n) { return WGML_ERR_UNSUPPORTED; }
int wgml_trainer_tensor_count(const wgml_trainer *t) { return 0; }
const char *wgml_trainer_tensor_name(const wgml_trainer *t, int i) { return NULL; }
wgml_status wgml_trainer_tensor_shape(const wgml_trainer *t, int i, int *rank, int64_t shape[4]) { return WGML_ERR_UNSUPPORTED; }
wgml_status wgml_trainer_read_state(wgml_trainer *t, int i, int what, float *out) { return WGML_ERR_UNSUPPORTED; }
wgml_status wgml_trainer_write_state(wgml_trainer *t, int i, int what, const float *in) { return WGML_ERR_UNSUPPORTED; }
wgml_status wgml_trainer_read_opt_state(wgml_trainer *t, void *buf, size_t *bytes) { return WGML_ERR_UNSUPPORTED; }
wgml_status wgml_trainer_write_opt_state(wgml_trainer *t, const void *buf, size_t bytes) { return WGML_ERR_UNSUPPORTED; }
wgml_status wgml_model_set_lora(wgml_model *m, const wgml_train_config *cfg, int n, const char *const *names, const float *const *data) {
    return wgml_set_error(llama_ctx(m), WGML_ERR_UNSUPPORTED, "set_lora: not in this build (src/train/trainer.c is not merged yet)");
}
#else
typedef int trainer_stub_unused; /* ISO C wants a translation unit to declare something */
#endif
