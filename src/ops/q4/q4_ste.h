/* The straight-through 4-bit linear (q4_ste.c): an ops-internal op of the q4 family. */
#ifndef WGML_Q4_STE_H
#define WGML_Q4_STE_H
#include "graph/graph.h"

/* y[..., N] = x[..., K] · Wqᵀ (+ bias), Wq = dequant(w) (the 4-bit codes, as wgml_q4_linear),
 * whose autograd rule treats Wq as the fp32 latent [N, K] (a trainable tensor of g): x gets
 * dy · Wq, the latent dyᵀ · x. w's tensors and latent must be g's (shared). */
wgml_tensor *q4_ste_linear(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *w, wgml_tensor *latent);

#endif
