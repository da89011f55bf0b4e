/* Fused forms of the elementwise family for inference graphs (elementwise_fused.c). */
#ifndef WGML_ELEMENTWISE_FUSED_H
#define WGML_ELEMENTWISE_FUSED_H
#include "graph/graph.h"

/* silu(gate) * up (f32, one shape) in one dispatch (ew_swiglu.wgsl). When an input needs a
 * gradient, or the element count is not a multiple of 4, it records the plain silu and mul
 * (differentiable, and they name a bad argument). */
wgml_tensor *ew_swiglu(wgml_graph *g, wgml_tensor *gate, wgml_tensor *up);

#endif
