/* Backward rules of the shape family (shape_grad.c). */
#ifndef WGML_SHAPE_GRAD_H
#define WGML_SHAPE_GRAD_H
#include "graph/graph.h"
wgml_tensor *clone_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x);
wgml_tensor *slice_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, int64_t start, int64_t step);
wgml_tensor *cat_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *const *tensors, int n, int dim);
wgml_tensor *permute_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, const int *dims);
wgml_tensor *expand_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x);
#endif
