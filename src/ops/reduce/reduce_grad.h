/* Backward rules of the reduce family (reduce_grad.c). */
#ifndef WGML_REDUCE_GRAD_H
#define WGML_REDUCE_GRAD_H
#include "graph/graph.h"
enum { REDUCE_GRAD_SUM = 0, REDUCE_GRAD_MEAN = 1, REDUCE_GRAD_AMAX = 2 };
/* sum / mean / amax over dims[0..n_dims) (n_dims = 0: all) */
wgml_tensor *reduce_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int kind, const int *dims, int n_dims);
wgml_tensor *softmax_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, bool log_form, int dim);
#endif
