/* Backward rule of the 4-bit linear (q4_grad.c). */
#ifndef WGML_Q4_GRAD_H
#define WGML_Q4_GRAD_H
#include "graph/graph.h"
wgml_tensor *q4_linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, const wgml_q4_weight *w);
#endif
