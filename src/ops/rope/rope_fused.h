/* Ops-internal parts of the rope family: the frequency table its kernels share and the fused
 * attention inputs (rope_kv.c) of the inference graphs. */
#ifndef WGML_ROPE_FUSED_H
#define WGML_ROPE_FUSED_H
#include "graph/graph.h"

/* The per-pair frequency table f32 [D/2, 4] of rope_angle.wgsl for head dim D and base theta,
 * each pair i's frequency theta^(-2i/D) divided by factors[i] when factors is not NULL (a
 * GGUF file's rope_freqs: Llama 3's long-context scaling), a new tensor of g (op names the
 * caller in errors). */
wgml_tensor *rope_freq_table(wgml_graph *g, const char *op, int64_t D, float theta, const float *factors);

/* wgml_rope_ex with the frequencies of tab (a rope_freq_table of x's head dimension, which the
 * caller keeps as long as the graph, its backward included). */
wgml_tensor *rope_tab(wgml_graph *g, wgml_tensor *x, wgml_tensor *positions, wgml_tensor *tab, wgml_rope_style style,
                      wgml_rope_layout layout, int backward);

/* The attention inputs of S rows in one dispatch (no autograd rule; inference graphs): q f32
 * [1, S, H, hd] and k [1, S, Hk, hd] rotated (the pairs of style, as wgml_rope) at the positions
 * pos (i32 [S]) with tab = rope_freq_table(.., hd, theta); rotated k and v [1, S, Hk, hd] written
 * to rows pos[s] of the caches k_cache, v_cache f32 [1, Hk, smax, hd] or both in the f16 form
 * (ops/attention/kv_cache.h) (nothing for a position
 * outside 0..smax-1). Returns rotated q as [1, H, S, hd], the layout attention takes. */
wgml_tensor *rope_kv_step(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *pos,
                          wgml_tensor *tab, wgml_tensor *k_cache, wgml_tensor *v_cache, wgml_rope_style style);

#endif
