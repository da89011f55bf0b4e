/* Backward rules of the index family (index_grad.c). */
#ifndef WGML_INDEX_GRAD_H
#define WGML_INDEX_GRAD_H
#include "graph/graph.h"
wgml_tensor *gather_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, wgml_tensor *index);
wgml_tensor *index_select_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, wgml_tensor *index);
wgml_tensor *embedding_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *weight, wgml_tensor *idx);
#endif
