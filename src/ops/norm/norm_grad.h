/* Backward rules of the norm family (norm_grad.c). */
#ifndef WGML_NORM_GRAD_H
#define WGML_NORM_GRAD_H
#include "graph/graph.h"
wgml_tensor *rms_norm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, float eps);
wgml_tensor *layer_norm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, wgml_tensor *b,
                                    wgml_tensor *mean, wgml_tensor *rstd);
#endif
