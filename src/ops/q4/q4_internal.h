/* Shared between the host-format code (q4_format.c) and the GPU handler (q4.c). */
#ifndef WGML_Q4_INTERNAL_H
#define WGML_Q4_INTERNAL_H

#include "graph/graph.h"

float q4_half_to_float(uint16_t h);
wgml_status q4_check_gguf(wgml_ctx *ctx, const char *op, int type, const void *data, size_t bytes, int64_t n,
                          int64_t k, bool blocks_only);
wgml_status q4_check_q4gsw(wgml_ctx *ctx, const char *op, const void *codes, const void *scales, int64_t n, int64_t k,
                           int group);
/* Host images of the GPU layout (see include/wgml.h): words [n, kp/8] (Q8: [n, kp/4]) and ab
 * [n, kp/G] (Q4_1: [n, kp/G, 2]). */
void q4_pack_q4gsw(const uint8_t *codes, const float *scales, int64_t n, int64_t k, int group, uint32_t *words,
                   float *ab);
void q4_pack_gguf(int type, const uint8_t *p, int64_t n, int64_t k, uint32_t *words, float *ab);
/* Whether the GPU runs GGUF block type `type`, and as which kind, group size and code bits
 * (any pointer may be NULL); whether the type's values carry a per-group minimum. */
bool q4_gguf_gpu(int type, wgml_qkind *kind, int *group, int *bits);
bool q4_gguf_has_min(int type);
/* The structural checks of a quantised weight (any kind), shared by every op that takes one:
 * false with the error (op, arg) set when w is NULL or inconsistent. */
bool q4_weight_valid(wgml_ctx *ctx, const char *op, const char *arg, const wgml_q4_weight *w);

/* The tiled q4 product for other families' fused ops (no checks, no autograd record), written
 * into the existing f32 tensor `into`: trans = 0: into[m, N] = a[m, K] · dequant(W)ᵀ (+ bias);
 * trans = 1: into[m, K] = a[m, N] · dequant(W). accumulate: into += the product. */
wgml_status q4_mm_into(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_q4_weight *w, int trans, int64_t m,
                       wgml_tensor *into, bool accumulate);

/* wgml_q4_linear's product with its checks (errors name op) but without its autograd record:
 * for ops whose own record covers x (the straight-through linear, q4_ste.c). */
wgml_tensor *q4_linear_product(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *w);

/* The q4 GEMM's tile variants (q4.c: names as in the matmul family) and its choice of variant
 * and split-K count for out[m, c] with reduction length r, segmented or not (q4_linear_concat)
 * ($WGML_Q4_MM_VARIANT, $WGML_Q4_MM_SPLITK, a matmul variant forced on the context, else the
 * automatic rules). */
int q4_mm_variant_count(void);
const char *q4_mm_variant_name(int v);
void q4_mm_plan(wgml_ctx *ctx, int64_t m, int64_t r, int64_t c, bool segmented, int *variant, int *splits);
/* q4_mm_plan as on a CPU adapter (cpu) or a GPU, whatever ctx's adapter is (tests). */
void q4_mm_plan_for(wgml_ctx *ctx, bool cpu, int64_t m, int64_t r, int64_t c, bool segmented, int *variant,
                    int *splits);
/* The most rows of x the forward takes through the GEMV (q4_gemv) on ctx's adapter; more rows go
 * to the tiled GEMM. */
int q4_gemv_max_m(wgml_ctx *ctx);

#endif
