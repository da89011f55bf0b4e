/* PEFT's LoRA adapter directory (adapter_config.json + adapter_model.safetensors, what
 * transformers + PEFT's PeftModel.from_pretrained loads), written from wgml's adapter tensors and
 * read into them: the layer under wgml_trainer_save_adapter and wgml_adapter_load
 * (include/wgml-train.h). */
#ifndef WGML_TRAIN_PEFT_H
#define WGML_TRAIN_PEFT_H

#include "io/safetensors.h"
#include "wgml-train.h"

#define PEFT_SUBDIR "peft" /* wgml_trainer_save_adapter's PEFT copy: DIR/peft */
#define PEFT_FILE "adapter_model.safetensors"

/* How a model's q/k rows are ordered. GGUF Llama files hold q and k with the rows of each head
 * permuted (llama.cpp's converter pairs (2i, 2i+1) for its RoPE; Hugging Face pairs (i, i + d/2)
 * and transformers undoes the permutation when it loads the GGUF), so the lora_b of q and k
 * (rows = outputs) is permuted the same way between the two. Other families are not permuted. */
typedef struct peft_layout {
    int64_t n_layer, n_head, n_head_kv, head_dim;
    int permuted_qk; /* 1: GGUF rows (h, i, two) are Hugging Face's (h, two, i) */
} peft_layout;

/* The layout of m's weights (its family's RoPE pairing decides permuted_qk); the same from a
 * GGUF's architecture and hyper-parameters (arch_from_gguf), without a model on the GPU. */
peft_layout peft_layout_of(const wgml_model *m);
struct model_arch;
peft_layout peft_layout_from(const struct model_arch *a, const wgml_llama_config *c);

/* Parses wgml's tensor name "blk.L.TARGET.lora_a|lora_b": the layer, the target's index (as
 * decoder_target_names), and 0 (a) or 1 (b); -1 when it is not one. */
int peft_wgml_name(const char *name, long long *l, int *t);

/* Writes dir (created if missing) as a PEFT adapter: the n tensors t (wgml's names
 * blk.L.TARGET.lora_a|lora_b, F32) under PEFT's names and in its row order, and a config with
 * cfg's rank, alpha and targets; base names the base model (base_model_name_or_path). */
wgml_status peft_write(const char *dir, const wgml_train_config *cfg, const peft_layout *lay, const char *base, int n,
                       const st_write_tensor *t, char *err, size_t errlen);

/* 1 when dir's adapter_config.json is PEFT's (it has peft_type). */
int peft_is_dir(const char *dir);

/* An adapter read from a PEFT directory: wgml's names and F32 data, the tensors in PEFT's row
 * order until peft_to_model_order (the model decides it). */
typedef struct peft_adapter {
    wgml_train_config cfg; /* rank, alpha, targets */
    int n;
    char **names;
    float **data;
    int64_t *numel;
} peft_adapter;

/* Reads dir. What wgml cannot apply is refused, naming it: another PEFT method, DoRA, rsLoRA,
 * per-module ranks or alphas, biases, modules_to_save, fan_in_fan_out, a module that is not one
 * of the seven projections of a block. */
wgml_status peft_read(const char *dir, peft_adapter *a, char *err, size_t errlen);
/* The same from the two files' bytes (cfg[0..clen), and st_buf[0..st_size), which it takes and
 * frees); dir names them in messages. The fuzz target's entry (fuzz/fuzz_adapter.c). */
wgml_status peft_parse(const char *cfg, size_t clen, uint8_t *st_buf, size_t st_size, const char *dir, peft_adapter *a,
                       char *err, size_t errlen);
void peft_adapter_free(peft_adapter *a);

/* Puts the q/k lora_b rows of the n tensors (wgml's names, numel[i] elements) into the model's
 * order (lay->permuted_qk), in place. Non-zero when out of memory. */
int peft_to_model_order(const peft_layout *lay, int n, const char *const *names, float *const *data, const int64_t *numel);

#endif
