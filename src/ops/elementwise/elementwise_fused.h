/* Fused forms of the elementwise family (elementwise_fused.c). */
#ifndef WGML_ELEMENTWISE_FUSED_H
#define WGML_ELEMENTWISE_FUSED_H
#include "graph/graph.h"

/* act(gate) * up (f32, one shape) in one dispatch (ew_glu.wgsl), act silu (SwiGLU) or the tanh
 * form of gelu (GEGLU, as wgml_gelu(.., 1)); differentiable, its backward one dispatch
 * (ew_glu_bwd.wgsl). When the shapes differ or the element count is not a multiple of 4, it
 * records the plain activation and mul (differentiable, and they name a bad argument). */
typedef enum ew_glu_act { EW_GLU_SILU, EW_GLU_GELU_TANH } ew_glu_act;
wgml_tensor *ew_glu(wgml_graph *g, wgml_tensor *gate, wgml_tensor *up, ew_glu_act act);

#endif
