/* Fused forms of the norm family for inference graphs (norm_fused.c). */
#ifndef WGML_NORM_FUSED_H
#define WGML_NORM_FUSED_H
#include "graph/graph.h"
#include "ops/qweight/qw_xq.h"

/* A residual add and the RMSNorm after it: *sum = x + y, returns rms_norm(*sum) * w (x, y f32
 * of one shape, w f32 [d] the last dim) in one dispatch (norm_add_rms.wgsl). When an input
 * needs a gradient, or d % 4 != 0, it records the plain add and rms_norm (differentiable, and
 * they name a bad argument). NULL, *sum NULL, on error. */
wgml_tensor *norm_add_rms(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *w, float eps, wgml_tensor **sum);

/* The same after a post-norm: *sum = x + rms_norm(y) * wy, returns rms_norm(*sum) * w (wy, w
 * f32 [d]), in one dispatch where rms_norm + add + rms_norm take three (the plain ops where the
 * fused kernel does not apply, as above). */
wgml_tensor *norm_add_rms_post(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *wy, wgml_tensor *w, float eps,
                               wgml_tensor **sum);

/* norm_add_rms (wy NULL) or norm_add_rms_post (wy the post-norm's weight) with y given as the
 * ny split-K slices of a product, f32 [ny, x's shape] (qw_linear_parts, ops/qweight/qw_parts.h; ny =
 * 1: y itself, x's shape), summed in order as the kernel reads them: the reduction's dispatch
 * goes. The plain ops (the slices summed by wgml_sum first) where the fused kernel does not
 * apply. With nf (0..QW_XQ_MAX) formats fmts (qw_xq_formats of the products that read the
 * result) the kernel also writes the result quantised to int8 in each, and records them for
 * those products (qw_xq_attach); not where the plain ops go, nor for a format that is not whole
 * blocks over a padded K of d or more (then the products quantise for themselves). */
wgml_tensor *norm_add_rms_parts(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, int ny, wgml_tensor *wy, wgml_tensor *w,
                                float eps, const qw_xq_fmt *fmts, int nf, wgml_tensor **sum);

#endif
