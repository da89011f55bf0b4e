/* Writing GGUF files: for straight-through (STE) fine-tuning, a copy of an input GGUF with
 * the 4-bit codes of chosen weights recomputed from trained fp32 latents; and small new files of
 * F32 tensors (llama.cpp's LoRA adapters). The metadata, the
 * tensor table, every other tensor and the blocks' scales (d) and minimums (m) stay byte for
 * byte as they were; only the 4-bit codes change (the GPU's wgml_qweight_requant rule). Internal. */
#ifndef WGML_MODEL_GGUF_WRITE_H
#define WGML_MODEL_GGUF_WRITE_H

#include "wgml.h"

/* Rewrites the codes of n rows of k elements of GGUF blocks (Q4_0 or Q4_1, ne = [k, n]) in
 * place from latent[n·k] at the blocks' own d (and m):
 *   Q4_0: code = clamp(round_half_even(latent / d), -8, 7) + 8, d = 0 gives 8;
 *   Q4_1: code = clamp(round_half_even((latent - m) / d), 0, 15), d = 0 gives 0;
 * with d, m the f16 values widened to f32 and the arithmetic in f32. */
wgml_status gguf_requant_blocks(uint32_t type, const float *latent, int64_t n, int64_t k, uint8_t *blocks, size_t bytes,
                                char *err, size_t errlen);

/* Copies in_path to out_path (atomically), replacing the codes of the n tensors named
 * names[i] (GGUF tensor names, Q4_0/Q4_1) from latent[i] (numel floats in the tensor's
 * row-major [rows, k] order). */
wgml_status gguf_write_ste(const char *in_path, const char *out_path, int n, const char *const *names, const float *const *latent,
                           char *err, size_t errlen);

/* A new GGUF v3 file in memory: n_kv metadata pairs (strings or float32s) and n tensors of F32
 * data (dims[0] the contiguous one, as in the file), aligned to 32 bytes. *out is malloc'ed. */
typedef struct gguf_kv_write {
    const char *key;
    const char *str; /* a string value, or NULL for ... */
    float f32;       /* ... a float32 value */
} gguf_kv_write;
typedef struct gguf_tensor_write {
    const char *name;
    int n_dims;       /* 1..4 */
    int64_t dims[4];
    const float *data;
} gguf_tensor_write;
wgml_status gguf_build_f32(const gguf_kv_write *kv, int n_kv, const gguf_tensor_write *t, int n, uint8_t **out, size_t *len,
                           char *err, size_t errlen);

#endif
