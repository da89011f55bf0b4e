/* Internal entry point (inference graphs only, no autograd record): the products of x with
 * weights of one input stored as one weight, their rows concatenated (a model's q, k and v, or
 * gate and up, loaded that way; each part is also a weight of its own through qw_weight_rows).
 * At prefill sizes one wider GEMM fills the GPU better than a narrow one per weight and needs
 * less split-K (docs/PERFORMANCE.md, the prefill); its output is the parts side by side in
 * memory, so that each part is a contiguous view with no copy. */
#ifndef WGML_QW_CONCAT_H
#define WGML_QW_CONCAT_H

#include "graph/graph.h"

/* Whether qw_linear_concat takes x (f32 [..., K]) with w split into n parts of ns[0..n) rows:
 * 2 or 3 parts adding up to w's rows, K = w's, more rows of x than the GEMV takes (> 4), no
 * gradient wanted through x, and each part's output starting at a storage-aligned offset.
 * $WGML_QW_CONCAT=0 makes it say no (the per-weight products, for A/B measurements). */
bool qw_concat_applies(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, int n, const int64_t *ns);

/* outs[i] = x · W_iᵀ (+ the bias's rows) for the parts W_i of w (rows ns[0], ns[1], ... in
 * order): one tiled GEMM (split-K as the product's shape asks), outs[i] views [..., ns[i]] of
 * its output. WGML_ERR_UNSUPPORTED (naming op) when qw_concat_applies says no. */
wgml_status qw_linear_concat(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w, int n,
                             const int64_t *ns, wgml_tensor **outs);

#endif
