/* Internal entry point (inference graphs only, no autograd record): a 4-bit product whose
 * split-K slices are left for the consumer to sum. A prefill's o and down projections are
 * split (their 64 x 64 tiles fill a fraction of the GPU), and the sum of the slices was a
 * dispatch of its own before the residual add and RMSNorm that follow; norm_add_rms_parts
 * (ops/norm/norm_fused.h) sums them as it reads y, so that dispatch goes. */
#ifndef WGML_QW_PARTS_H
#define WGML_QW_PARTS_H

#include "graph/graph.h"

/* Whether qw_linear_parts takes x (f32 [..., K], rank below the maximum) with w: K = w's, more
 * rows than the GEMV takes (> 4), no gradient wanted through x. $WGML_QW_PARTS=0 makes it say no
 * (the reduction's own dispatch, for A/B measurements). */
bool qw_parts_applies(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w);

/* x · Wᵀ (+ bias) by the tiled GEMM with the split-K count its plan chooses, *splits = S: for
 * S > 1 the slices P f32 [S, ..., N] (slice 0 holds the bias; the product is their sum, in
 * order), for S = 1 the product [..., N] itself. NULL with the error set (naming op);
 * WGML_ERR_UNSUPPORTED where qw_parts_applies says no. */
wgml_tensor *qw_linear_parts(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w, int *splits);

#endif
