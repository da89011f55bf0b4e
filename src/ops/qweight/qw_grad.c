/* Backward rule of wgml_qlinear: the input gradient only (wgml_qlinear_dx); the 4-bit
 * base is frozen (straight-through training takes its weight gradient with wgml_linear_dw). */
#include "ops/qweight/qw_grad.h"

#include <string.h>

_Static_assert(sizeof(wgml_qweight) <= GRAPH_OP_ATTR_BYTES, "a quantised weight must fit the op attributes");

static wgml_status qw_linear_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    wgml_qweight w;
    memcpy(&w, op->attrs, sizeof w);
    dx[0] = wgml_qlinear_dx(g, dy, &w);
    return grad_result(g, op, dx);
}

wgml_tensor *qw_linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, const wgml_qweight *w) {
    graph_op op = {.name = "qlinear", .backward = qw_linear_backward, .n_in = 1, .in = {x}, .out = out};
    if (out) memcpy(op.attrs, w, sizeof *w); /* the struct's tensors belong to the graph */
    return graph_record_op(g, &op);
}
