/* The LoRA family's internal entry for adapters that share their input (a layer's q/k/v, its
 * gate/up): their down-projections x·Aᵀ, and in the backward their A gradients and their input
 * gradient, are one product each over the A's stacked. */
#ifndef WGML_LORA_H
#define WGML_LORA_H
#include "graph/graph.h"

#define LORA_GROUP_MAX 3

/* out[i] = base[i] + l[i]->scale·(x·A_iᵀ)·B_iᵀ for i < n (n <= LORA_GROUP_MAX), where a_cat
 * [n·r, K] holds A_0 .. A_{n-1} stacked (the trainer's view over them; l[i]->a is not read) and
 * every adapter has the same r and K. Differentiable in x, a_cat, base[i] and l[i]->b. Where the
 * adapters' blocks of the shared product H cannot be bound apart (r·rows not a multiple of the
 * storage offset alignment), each adapter runs alone on its rows of a_cat (a slice). */
wgml_status lora_apply_shared(wgml_graph *g, wgml_tensor *x, wgml_tensor *a_cat, int n, wgml_tensor *const *base,
                              const wgml_lora *const *l, wgml_tensor **out);
/* out[i] = x·W_iᵀ + l[i]->scale·(x·A_iᵀ)·B_iᵀ for i < n over 4-bit weights w[i], a_cat as above:
 * the shared down-projection with each up-projection folded into its base's product (as
 * wgml_lora_qlinear; each adapter alone through it when the blocks cannot be bound apart; with
 * $WGML_LORA_FOLD=0 the bases' products and lora_apply_shared over them). Differentiable in x,
 * a_cat and l[i]->b. */
wgml_status lora_qlinear_shared(wgml_graph *g, wgml_tensor *x, wgml_tensor *a_cat, int n, const wgml_qweight *const *w,
                                const wgml_lora *const *l, wgml_tensor **out);
#endif
