/* Backward rule of rope: a rotation's gradient is the rotation by the opposite angle, so the
 * backward of either direction is rope_ex (or rope_tab, with the same table) in the other
 * direction (no gradient for the positions or the table). */
#include "ops/rope/rope_fused.h"
#include "ops/rope/rope_grad.h"

#include <string.h>

typedef struct rope_attrs {
    float theta;
    wgml_rope_style style;
    wgml_rope_layout layout;
    int backward;
} rope_attrs;

static wgml_status rope_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const rope_attrs *at = (const rope_attrs *)op->attrs;
    dx[0] = op->n_in == 3 ? rope_tab(g, dy, op->in[1], op->in[2], at->style, at->layout, !at->backward)
                          : wgml_rope_ex(g, dy, op->in[1], at->theta, at->style, at->layout, !at->backward);
    return grad_result(g, op, dx);
}

wgml_tensor *rope_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *positions, float theta,
                              wgml_tensor *tab, wgml_rope_style style, wgml_rope_layout layout, int backward) {
    graph_op op = {.name = "rope", .backward = rope_op_backward, .n_in = tab ? 3 : 2, .in = {x, positions, tab},
                   .out = out};
    rope_attrs at = {theta, style, layout, backward != 0};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}
