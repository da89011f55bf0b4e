/* Backward rules of the matmul family (matmul_grad.c); the handlers record through these. */
#ifndef WGML_MATMUL_GRAD_H
#define WGML_MATMUL_GRAD_H
#include "graph/graph.h"
wgml_tensor *matmul_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b);
wgml_tensor *linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias);
wgml_tensor *addmm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *c, wgml_tensor *a, wgml_tensor *b, float beta,
                               float alpha);
wgml_tensor *add_linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *c, wgml_tensor *x, wgml_tensor *w,
                                   float alpha);
#endif
