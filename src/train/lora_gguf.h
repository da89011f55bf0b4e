/* llama.cpp's LoRA adapter GGUF (what `llama-cli --lora FILE` and llama-server load), written from
 * an adapter and read back: general.type "adapter", adapter.type "lora", adapter.lora.alpha,
 * general.architecture of the base; F32 tensors blk.L.attn_q.weight.lora_a (dims [K, r], i.e.
 * [r, K] row-major) and .lora_b (dims [r, N]) for attn_q/k/v/output and ffn_gate/up/down. llama.cpp
 * adds them to the GGUF's own weights, so q's and k's rows are in the GGUF's order, as wgml's
 * are. The layer under wgml_adapter_save_gguf and wgml_adapter_load (include/wgml-train.h). */
#ifndef WGML_TRAIN_LORA_GGUF_H
#define WGML_TRAIN_LORA_GGUF_H

#include "train/peft.h"

/* Writes path (atomically): the n tensors (wgml's names blk.L.TARGET.lora_a|lora_b, numel[i]
 * F32 values, rank cfg->lora_rank) with cfg's alpha, for a base of architecture arch. */
wgml_status lora_gguf_write(const char *path, const char *arch, const wgml_train_config *cfg, int n, const char *const *names,
                            const float *const *data, const int64_t *numel, char *err, size_t errlen);
/* Reads path into a (wgml's names, the model's row order): a LoRA adapter of F32 or F16
 * tensors of the blocks' seven projections; anything else is refused naming it. *arch (when
 * not NULL, arch_len bytes) gets the base's general.architecture. */
wgml_status lora_gguf_read(const char *path, peft_adapter *a, char *arch, size_t arch_len, char *err, size_t errlen);

#endif
