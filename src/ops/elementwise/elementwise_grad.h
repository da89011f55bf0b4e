/* Backward rules of the elementwise family (elementwise_grad.c). */
#ifndef WGML_ELEMENTWISE_GRAD_H
#define WGML_ELEMENTWISE_GRAD_H
#include "graph/graph.h"
wgml_tensor *ew_grad_binary(wgml_graph *g, wgml_tensor *out, int opc, wgml_tensor *a, wgml_tensor *b, float alpha);
wgml_tensor *ew_grad_binary_scalar(wgml_graph *g, wgml_tensor *out, int opc, wgml_tensor *a, float s, float alpha);
/* The unary kernels' op codes past the public wgml_unary_op values (ew_unary.wgsl and
 * ew_unary_bwd.wgsl switch on them): clamp (lo, hi) and round to decimals (lo = 10^|d|,
 * hi = 1 when d < 0). */
#define EW_UNARY_CLAMP 18
#define EW_UNARY_ROUND_DEC 19
/* code: wgml_unary_op, EW_UNARY_CLAMP or EW_UNARY_ROUND_DEC */
wgml_tensor *ew_grad_unary(wgml_graph *g, wgml_tensor *out, int code, wgml_tensor *x, float lo, float hi);
wgml_tensor *ew_grad_where(wgml_graph *g, wgml_tensor *out, wgml_tensor *cond, wgml_tensor *a, wgml_tensor *b);
#endif
