/* Backward rule of sdpa (attention_grad.c). */
#ifndef WGML_ATTENTION_GRAD_H
#define WGML_ATTENTION_GRAD_H
#include "graph/graph.h"
wgml_tensor *sdpa_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, int causal,
                              float scale, int64_t window);
#endif
