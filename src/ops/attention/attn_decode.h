/* Internal entry point (decode graphs only, no autograd record): one decode step's attention,
 * RoPE and KV-cache append included, in one dispatch of attn_decode.wgsl plus the merge of its
 * key chunks (attn_combine.wgsl), where rope_kv_step and wgml_sdpa_cached take three. The
 * decode step is a chain of small dependent dispatches (docs/PERFORMANCE.md, decode): fewer,
 * and a kernel shaped for one query row per head instead of the prefill tile, is the point. */
#ifndef WGML_ATTN_DECODE_H
#define WGML_ATTN_DECODE_H
#include "graph/graph.h"

/* q f32 [1, 1, Hq, D] and k, v [1, 1, Hk, D] (Hq a multiple of Hk, D / 4 a power of two <= 256): q and k
 * rotated at position pos (i32 [1]) with tab = rope_freq_table(.., D, theta) and the pair style;
 * rotated k and v written to row pos of k_cache, v_cache f32 [1, Hk, smax, D] or both in the f16
 * form (kv_cache.h) (nothing when pos is outside 0..smax-1); each query head attends to the cache rows [lo, min(len, smax)) (len
 * i32 [1]; lo = that minus window when window > 0, else 0), scores scaled by scale (<= 0:
 * 1/sqrt(D)). With q_norm and k_norm (f32 [D], both or neither) each head of q and k is first
 * RMSNormed with them (eps), as the q/k norms of an architecture that has them. Returns the
 * output [1, Hq, 1, D] (wgml_sdpa_cached's layout). NULL with the error set,
 * WGML_ERR_UNSUPPORTED when the shapes do not fit the kernel (attn_decode_fits says beforehand). */
wgml_tensor *attn_decode_step(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                              wgml_tensor *len, wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache,
                              wgml_rope_style style, int64_t window, float scale, wgml_tensor *q_norm,
                              wgml_tensor *k_norm, float eps);

/* The same step with the merge of its key chunks left to the consumer (the o projection's GEMV
 * prologue, qw_gemv_fused's merge: one dispatch fewer). *chunks = the step's chunk count
 * (attn_decode_chunks); more than 1: returns the chunks' partials f32 [Hq, chunks, D + 2] (per
 * query head and chunk the D unnormalised sums of 2^(s - m) v, the chunk's max score m in log2
 * units and its sum l of 2^(s - m); an empty chunk m = -3e38, l = 0), which attn_combine.wgsl
 * would merge; 1: the output itself, as attn_decode_step. */
wgml_tensor *attn_decode_step_parts(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                                    wgml_tensor *len, wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache,
                                    wgml_rope_style style, int64_t window, float scale, wgml_tensor *q_norm,
                                    wgml_tensor *k_norm, float eps, int64_t *chunks);
/* The key chunks attn_decode_step splits Hq query heads over Hk kv heads of dimension D with
 * caches of smax rows into (0: the shapes do not fit it). */
int64_t attn_decode_chunks(wgml_ctx *ctx, int64_t Hq, int64_t Hk, int64_t D, int64_t smax);
/* Whether attn_decode_step takes Hq query heads over Hk kv heads of dimension D with caches of
 * smax rows on this device. */
bool attn_decode_fits(wgml_ctx *ctx, int64_t Hq, int64_t Hk, int64_t D, int64_t smax);
/* Whether a decode step should take it: wherever it fits (H200, 768 keys: SmolLM2-135M 11.4 us a
 * layer against 30.2 for rope_kv + sdpa + merge, Gemma-3-270M 15.5 + 7.5 against 36.6;
 * bench/NOTES.md) and the device binds its storage buffers in one stage (9, 11 with qk_norm:
 * WebGPU's default limit is 8, Chromium on SwiftShader gives 10). */
bool attn_decode_preferred(wgml_ctx *ctx, int64_t Hq, int64_t Hk, int64_t D, int64_t smax, bool qk_norm);

#endif
