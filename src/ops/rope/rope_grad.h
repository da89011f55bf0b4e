/* Backward rule of rope (rope_grad.c). */
#ifndef WGML_ROPE_GRAD_H
#define WGML_ROPE_GRAD_H
#include "graph/graph.h"
wgml_tensor *rope_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *positions, float theta,
                              wgml_rope_style style, wgml_rope_layout layout, int backward);
#endif
