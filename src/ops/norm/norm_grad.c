/* Backward rules of the norm family, through the dedicated kernels of norm_backward.c. */
#include "ops/norm/norm_grad.h"

#include <string.h>

typedef struct norm_attrs {
    float eps;
} norm_attrs;

static wgml_status rms_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const norm_attrs *at = (const norm_attrs *)op->attrs;
    wgml_tensor *d_x = NULL; /* the kernel always makes dx; dropped when x needs none */
    wgml_rms_norm_backward(g, op->in[0], op->in[1], dy, at->eps, &d_x, graph_op_wants(op, 1) ? &dx[1] : NULL);
    if (graph_op_wants(op, 0)) dx[0] = d_x;
    return grad_result(g, op, dx);
}

wgml_tensor *rms_norm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, float eps) {
    graph_op op = {.name = "rms_norm", .backward = rms_op_backward, .n_in = 2, .in = {x, w}, .out = out};
    norm_attrs at = {eps};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

static wgml_status layer_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    wgml_tensor *d_x = NULL;
    wgml_layer_norm_backward(g, op->in[0], op->in[1], op->in[3], op->in[4], dy, &d_x,
                             graph_op_wants(op, 1) ? &dx[1] : NULL, graph_op_wants(op, 2) ? &dx[2] : NULL);
    if (graph_op_wants(op, 0)) dx[0] = d_x;
    return grad_result(g, op, dx);
}

wgml_tensor *layer_norm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, wgml_tensor *b,
                                    wgml_tensor *mean, wgml_tensor *rstd) {
    graph_op op = {.name = "layer_norm", .backward = layer_op_backward, .n_in = 5, .in = {x, w, b, mean, rstd}, .out = out};
    return graph_record_op(g, &op);
}
