/* Backward rules of the elementwise family (elementwise_grad.c). */
#ifndef WGML_ELEMENTWISE_GRAD_H
#define WGML_ELEMENTWISE_GRAD_H
#include "graph/graph.h"
wgml_tensor *ew_grad_binary(wgml_graph *g, wgml_tensor *out, int opc, wgml_tensor *a, wgml_tensor *b, float alpha);
wgml_tensor *ew_grad_binary_scalar(wgml_graph *g, wgml_tensor *out, int opc, wgml_tensor *a, float s, float alpha);
/* code: a row of the unary table (ew_ops.h): a wgml_unary_op, EW_UN_CLAMP (lo, hi) or
 * EW_UN_ROUND_DEC */
wgml_tensor *ew_grad_unary(wgml_graph *g, wgml_tensor *out, int code, wgml_tensor *x, float lo, float hi);
wgml_tensor *ew_grad_where(wgml_graph *g, wgml_tensor *out, wgml_tensor *cond, wgml_tensor *a, wgml_tensor *b);
#endif
