/* The straight-through 4-bit linear (qw_ste.c): an ops-internal op of the qweight family. */
#ifndef WGML_QW_STE_H
#define WGML_QW_STE_H
#include "graph/graph.h"

/* y[..., N] = x[..., K] · Wqᵀ (+ bias), Wq = dequant(w) (the 4-bit codes, as wgml_qlinear),
 * whose autograd rule treats Wq as the fp32 latent [N, K] (a trainable tensor of g): x gets
 * dy · Wq, the latent dyᵀ · x. w's tensors and latent must be g's (shared). */
wgml_tensor *qw_ste_linear(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, wgml_tensor *latent);

#endif
