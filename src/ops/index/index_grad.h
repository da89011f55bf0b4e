/* Backward rules of the index family (index_grad.c). */
#ifndef WGML_INDEX_GRAD_H
#define WGML_INDEX_GRAD_H
#include "graph/graph.h"
wgml_tensor *gather_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, wgml_tensor *index);
wgml_tensor *index_select_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, wgml_tensor *index);
wgml_tensor *embedding_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *weight, wgml_tensor *idx);
/* Rule helper (index_grad.c; the shape rules and wgml_gather_backward use it too). Scatter-add along one dim: dx
 * (shape x_rank/x_shape) where dx[p] = Σ_j dy[p with dim := j] over j with wrapped idx == p[dim]. idx_select: idx
 * is 1-D (index_select); else idx has dy's shape (gather) and positions outside idx's extent get 0. Deterministic
 * (no atomics). op names the op in errors (NULL: "index_scatter"). */
wgml_tensor *grad_index_scatter(wgml_graph *g, const char *op, wgml_tensor *dy, wgml_tensor *idx, int dim, int x_rank,
                                const int64_t *x_shape, bool idx_select);
#endif
