/* The trainer's internal hook for the model's training forward (public API in include/wgml.h,
 * block "trainer"). */
#ifndef WGML_TRAIN_TRAINER_H
#define WGML_TRAIN_TRAINER_H

#include "wgml.h"

/* Straight-through 4-bit linear: out[..., N] = x[..., K] · dequant(w)ᵀ (the 4-bit weight, as
 * wgml_q4_linear), whose backward gives x the gradient d_out · dequant(w) (wgml_q4_linear_dx)
 * and the fp32 latent [N, K] (a trainable tensor of g) the weight gradient d_outᵀ · x
 * (wgml_linear_dw). w's tensors must be g's (shared). */
wgml_tensor *trainer_ste_linear(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *w, wgml_tensor *latent);

#endif
