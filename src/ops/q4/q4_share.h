/* A 4-bit weight of one graph used in another (q4_share.c). */
#ifndef WGML_Q4_SHARE_H
#define WGML_Q4_SHARE_H
#include "graph/graph.h"

/* *out = w with its tensors (codes, ab and the bias when w has one) shared into g with
 * wgml_tensor_share: a model keeps its weights in one graph and every graph that runs uses
 * them this way. The error is on g's context, *out's tensors NULL, when a share fails. */
wgml_status q4_weight_share(wgml_graph *g, const wgml_q4_weight *w, wgml_q4_weight *out);

#endif
