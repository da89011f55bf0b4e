/* The KV cache's two forms, and one home for how kernels reach them (attn_decode, attn_sdpa over
 * a cache, kv_append, rope_kv):
 *   f32 [B, Hkv, Smax, D];
 *   u32 [B, Hkv, Smax, D / 2] (D even): each word two f16 elements, element 2i in its low half
 *       (WGSL pack2x16float), half the bytes to hold and to read. Core WGSL, no shader-f16. A
 *       value outside f16's finite range has no defined word (as llama.cpp's f16 cache
 *       overflows); the rounding to f16 is the implementation's (nearest or toward zero).
 * Kernels read and write a cache only through the accessors kv_cache_wgsl writes into their
 * prelude, so every kernel takes both forms. */
#ifndef WGML_KV_CACHE_H
#define WGML_KV_CACHE_H
#include "tensor/tensor.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether t is the f16 form (u32 words). */
bool kv_cache_f16(const wgml_tensor *t);
/* The cache's head dimension D: its last dim, doubled in the f16 form. */
int64_t kv_cache_dim(const wgml_tensor *t);
/* Whether caches a and b (k's and v's) are the same form and shape. */
bool kv_cache_alike(const wgml_tensor *a, const wgml_tensor *b);
/* check_operand for a cache: rank 4, f32 or u32, in graph g; the error names both forms. */
wgml_status check_kv_cache(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t);
/* Appends to buf (its first len characters kept) the binding of cache `name` (write: read-write,
 * else read-only) and its accessors over units of w consecutive elements (w 1, 2 or 4; the f16
 * form 2 or 4; unit i is elements w*i .. w*i + w - 1):
 *   fn NAME_get(i: u32) -> vec4<f32>   the unit in the first w components, the rest 0;
 *   fn NAME_put(i: u32, x: vec4<f32>)  writes x's first w components (write only).
 * Returns the new length, or -1 when buf is too small or w does not suit the form. */
int kv_cache_wgsl(char *buf, size_t size, int len, const char *name, bool f16, bool write, int w);
#endif
