/* Backward rule of the 4-bit linear (qw_grad.c). */
#ifndef WGML_QW_GRAD_H
#define WGML_QW_GRAD_H
#include "graph/graph.h"
wgml_tensor *qw_linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, const wgml_qweight *w);
#endif
