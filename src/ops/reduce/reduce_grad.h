/* Backward rules of the reduce family (reduce_grad.c). */
#ifndef WGML_REDUCE_GRAD_H
#define WGML_REDUCE_GRAD_H
#include "graph/graph.h"
enum { REDUCE_GRAD_SUM = 0, REDUCE_GRAD_MEAN = 1, REDUCE_GRAD_AMAX = 2 };
/* sum / mean / amax over dims[0..n_dims) (n_dims = 0: all) */
wgml_tensor *reduce_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int kind, const int *dims, int n_dims);
wgml_tensor *softmax_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, bool log_form, int dim);
/* Rule helper (reduce_grad.c; the elementwise, matmul and shape rules use it too): the sum of dy over the dims in
 * which shape `to` was broadcast up to dy's shape, reshaped to `to` (dy itself when nothing was broadcast). */
wgml_tensor *grad_reduce_to(wgml_graph *g, wgml_tensor *dy, int rank, const int64_t *to);
#endif
