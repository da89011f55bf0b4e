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
/* out[g] = alpha·op(a[g])·op(b[g]) for g < batch as [batch, m, n] (written into `into`, added
 * to it when accumulate), operand g at element g·a_bs of a (g·b_bs of b; 0: the same matrix for
 * every g). No checks, no autograd record. */
wgml_tensor *matmul_batched(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b,
                            int64_t batch, int64_t a_bs, int64_t b_bs, int64_t m, int64_t n, int64_t k, float alpha,
                            wgml_tensor *into, bool accumulate);
/* out = c + alpha·op(a)·op(b) as a new tensor of c's shape (c holds [m, n] contiguous; the
 * product's epilogue adds it). No checks, no autograd record: for rules and fused ops that
 * record their own (the LoRA up-projections of a shared-input group, lora.c). */
wgml_tensor *matmul_add_product(wgml_graph *g, const char *op, wgml_tensor *c, wgml_tensor *a, wgml_tensor *b,
                                int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha);
/* out[..., N] = c + alpha·x[..., K]·w[N, K]ᵀ in one dispatch (c has out's shape; the product's
 * epilogue adds it), differentiable: dc = dy, dx = alpha·dy·w, dw = alpha·Σ_m dyᵀ·x. The LoRA
 * up-projection and its residual add (wgml_lora_apply). Checked; errors name `op`. */
wgml_tensor *matmul_add_linear(wgml_graph *g, const char *op, wgml_tensor *c, wgml_tensor *x, wgml_tensor *w,
                               float alpha);
/* The matmul family's ordered split-K reduction (matmul_splitk.wgsl), for other families'
 * split products: out[i] = alpha * sum_{s < splits} part[s * total + i] (slices summed in order)
 * + beta * out[i] when c_is_out, else + beta * C[b * c_bs + m * c_sm + n * c_sn] when c is given
 * (i = b * mn + m * n_cols + n, n_cols = n). part is f32 [splits * total]. */
wgml_status matmul_splitk_record(wgml_graph *g, const char *op, wgml_tensor *part, int splits, int64_t total,
                                 int64_t mn, int64_t n, wgml_tensor *c, int64_t c_bs, int64_t c_sm, int64_t c_sn,
                                 float alpha, float beta, bool c_is_out, wgml_tensor *out);
/* The causal band of attention's products (matmul.wgsl says how each mode skips): terms vanish
 * where key > query + off, the query index taken modulo sq. mode 1: rows queries, columns keys;
 * 2: rows queries, K keys; 3: rows keys, K queries. 0: no band. */
typedef struct matmul_band {
    int mode;
    int64_t sq, off;
} matmul_band;
/* A batched product [G, M, K]·[G, K, N] (operands 3-D with the same batch, as the transpose
 * flags read them) whose skipped terms are zeros in the operands by the band; the result is
 * the full product. No checks, no autograd record. */
wgml_tensor *matmul_banded(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b,
                           const matmul_band *band);
#endif
