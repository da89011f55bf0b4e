/* Backward rule of wgml_q4_linear: the input gradient only (wgml_q4_linear_dx); the 4-bit
 * base is frozen (straight-through training takes its weight gradient with wgml_linear_dw). */
#include "ops/q4/q4_grad.h"

#include <string.h>

_Static_assert(sizeof(wgml_q4_weight) <= GRAPH_OP_ATTR_BYTES, "q4 weight must fit the op attributes");

static wgml_status q4_linear_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    wgml_q4_weight w;
    memcpy(&w, op->attrs, sizeof w);
    dx[0] = wgml_q4_linear_dx(g, dy, &w);
    return grad_result(g, op, dx);
}

wgml_tensor *q4_linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, const wgml_q4_weight *w) {
    graph_op op = {.name = "q4_linear", .backward = q4_linear_backward, .n_in = 1, .in = {x}, .out = out};
    if (out) memcpy(op.attrs, w, sizeof *w); /* the struct's tensors belong to the graph */
    return graph_record_op(g, &op);
}
