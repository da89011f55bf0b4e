/* Writing GGUF files for straight-through (STE) fine-tuning: a copy of an input GGUF with
 * the 4-bit codes of chosen weights recomputed from trained fp32 latents. The metadata, the
 * tensor table, every other tensor and the blocks' scales (d) and minimums (m) stay byte for
 * byte as they were; only the 4-bit codes change (the GPU's wgml_q4_requant rule). Internal. */
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

#endif
