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
#endif
