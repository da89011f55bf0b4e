/* Backward rule of rope (rope_grad.c). */
#ifndef WGML_ROPE_GRAD_H
#define WGML_ROPE_GRAD_H
#include "graph/graph.h"
/* tab: the caller's frequency table (rope_tab), or NULL for the table of theta */
wgml_tensor *rope_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *positions, float theta,
                              wgml_tensor *tab, wgml_rope_style style, wgml_rope_layout layout, int backward);
#endif
