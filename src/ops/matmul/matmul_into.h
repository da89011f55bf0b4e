/* The matmul family's record function for other families' fused ops (no checks, no autograd
 * record): O[m, n] = a[m, k] · op(b) (+ O when accumulate) written into the existing f32
 * tensor `into` ([m, n] contiguous). trans_b = 1: b is [n, k] (a·bᵀ); 0: b is [k, n].
 * The caller has validated the operands (f32, one graph, shapes). */
#ifndef WGML_MATMUL_INTO_H
#define WGML_MATMUL_INTO_H
#include "graph/graph.h"
wgml_status matmul_record_into(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_b, int64_t m,
                               int64_t n, int64_t k, wgml_tensor *into, bool accumulate);
/* out = alpha·op(a)·op(b) as [m, n] (written into `into`, added to it when accumulate), for
 * backward rules that fold a scale into the product. No checks, no autograd record. */
wgml_tensor *matmul_scaled(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b,
                           int64_t m, int64_t n, int64_t k, float alpha, wgml_tensor *into, bool accumulate);
/* out[..., N] = c + alpha·x[..., K]·w[N, K]ᵀ in one dispatch (c has out's shape; the product's
 * epilogue adds it), differentiable: dc = dy, dx = alpha·dy·w, dw = alpha·Σ_m dyᵀ·x. The LoRA
 * up-projection and its residual add (wgml_lora_apply). Checked; errors name `op`. */
wgml_tensor *matmul_add_linear(wgml_graph *g, const char *op, wgml_tensor *c, wgml_tensor *x, wgml_tensor *w,
                               float alpha);
#endif
