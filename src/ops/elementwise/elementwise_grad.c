/* Backward rules of the elementwise family: binary ops with broadcasting (the gradient is
 * summed back over the broadcast dims), their tensor-scalar forms, unary ops, clamp and where.
 * All are compositions of public elementwise ops; unary_backward and clamp_backward are the
 * single places where a dedicated kernel can replace the composition. */
#include "ops/elementwise/elementwise_grad.h"
#include "ops/elementwise/ew_ops.h"
#include "ops/reduce/reduce_grad.h"

#include <string.h>

typedef struct ew_attrs {
    int opc;
    float alpha, s, lo, hi;
} ew_attrs;

static wgml_tensor *zero(wgml_graph *g) { return wgml_scalar_tensor(g, WGML_F32, 0.0); }

/* min / max: the gradient goes to the selected operand, split evenly on ties (as PyTorch). */
static wgml_tensor *select_grad(wgml_graph *g, wgml_tensor *dy, wgml_tensor *wins, wgml_tensor *ties) {
    wgml_tensor *half = wgml_mul_scalar(g, dy, 0.5f);
    return wgml_where(g, wins, dy, wgml_where(g, ties, half, zero(g)));
}

/* ------------------------------------------------------------------ binary */

static wgml_status binary_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const ew_attrs *at = (const ew_attrs *)op->attrs;
    wgml_tensor *a = op->in[0], *b = op->in[1], *y = op->out, *da = NULL, *db = NULL;
    bool wa = graph_op_wants(op, 0), wb = graph_op_wants(op, 1);
    switch (at->opc) {
    case WGML_BIN_ADD:
    case WGML_BIN_SUB:
        da = dy;
        if (wb) db = wgml_mul_scalar(g, dy, at->opc == WGML_BIN_ADD ? at->alpha : -at->alpha);
        break;
    case WGML_BIN_MUL:
        if (wa) da = wgml_mul(g, dy, b);
        if (wb) db = wgml_mul(g, dy, a);
        break;
    case WGML_BIN_DIV: /* da = dy / b, db = −dy·a/b² = −dy·y/b */
        if (wa) da = wgml_div(g, dy, b);
        if (wb) db = wgml_neg(g, wgml_div(g, wgml_mul(g, dy, y), b));
        break;
    case WGML_BIN_MINIMUM:
    case WGML_BIN_MAXIMUM: {
        bool mx = at->opc == WGML_BIN_MAXIMUM;
        wgml_tensor *ties = wgml_eq(g, a, b);
        if (wa) da = select_grad(g, dy, mx ? wgml_gt(g, a, b) : wgml_lt(g, a, b), ties);
        if (wb) db = select_grad(g, dy, mx ? wgml_gt(g, b, a) : wgml_lt(g, b, a), ties);
        break;
    }
    case WGML_BIN_DIV_TRUNC: /* piecewise constant: zero gradient (as PyTorch) */
    case WGML_BIN_DIV_FLOOR:
        if (wa) da = wgml_mul_scalar(g, dy, 0.0f);
        if (wb) db = wgml_mul_scalar(g, dy, 0.0f);
        break;
    case WGML_BIN_POW: /* da = dy·b·a^(b−1), db = dy·y·ln a */
        if (wa) da = wgml_mul(g, dy, wgml_mul(g, b, wgml_pow(g, a, wgml_add_scalar(g, b, -1.0f, 1.0f))));
        if (wb) db = wgml_mul(g, wgml_mul(g, dy, y), wgml_log(g, a));
        break;
    default:
        return wgml_set_error(graph_ctx(g), WGML_ERR_UNSUPPORTED, "backward of binary op %d", at->opc);
    }
    if (wa) dx[0] = grad_reduce_to(g, da, a->rank, a->shape);
    if (wb) dx[1] = grad_reduce_to(g, db, b->rank, b->shape);
    return grad_result(g, op, dx);
}

wgml_tensor *ew_grad_binary(wgml_graph *g, wgml_tensor *out, int opc, wgml_tensor *a, wgml_tensor *b, float alpha) {
    graph_op op = {.name = "binary", .backward = binary_backward, .n_in = 2, .in = {a, b}, .out = out};
    ew_attrs at = {opc, alpha, 0, 0, 0};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

static wgml_status binary_scalar_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const ew_attrs *at = (const ew_attrs *)op->attrs;
    wgml_tensor *a = op->in[0];
    float s = at->s;
    switch (at->opc) {
    case WGML_BIN_ADD:
    case WGML_BIN_SUB: dx[0] = dy; break;
    case WGML_BIN_MUL: dx[0] = wgml_mul_scalar(g, dy, s); break;
    case WGML_BIN_DIV: dx[0] = wgml_div_scalar(g, dy, s); break;
    case WGML_BIN_MINIMUM:
    case WGML_BIN_MAXIMUM: {
        wgml_tensor *wins = at->opc == WGML_BIN_MAXIMUM ? wgml_gt_scalar(g, a, s) : wgml_lt_scalar(g, a, s);
        dx[0] = select_grad(g, dy, wins, wgml_eq_scalar(g, a, s));
        break;
    }
    case WGML_BIN_POW: dx[0] = wgml_mul(g, dy, wgml_mul_scalar(g, wgml_pow_scalar(g, a, s - 1.0f), s)); break;
    case WGML_BIN_DIV_TRUNC:
    case WGML_BIN_DIV_FLOOR: dx[0] = wgml_mul_scalar(g, dy, 0.0f); break;
    default: return wgml_set_error(graph_ctx(g), WGML_ERR_UNSUPPORTED, "backward of binary op %d", at->opc);
    }
    return grad_result(g, op, dx);
}

wgml_tensor *ew_grad_binary_scalar(wgml_graph *g, wgml_tensor *out, int opc, wgml_tensor *a, float s, float alpha) {
    graph_op op = {.name = "binary_scalar", .backward = binary_scalar_backward, .n_in = 1, .in = {a}, .out = out};
    ew_attrs at = {opc, alpha, s, 0, 0};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

/* ------------------------------------------------------------------ unary */

static wgml_status unary_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const ew_attrs *at = (const ew_attrs *)op->attrs;
    /* round to decimals has round's zero gradient */
    int opc = at->opc == EW_UN_ROUND_DEC ? (int)WGML_UN_ROUND : at->opc;
    dx[0] = opc == EW_UN_CLAMP ? wgml_clamp_backward(g, op->in[0], dy, at->lo, at->hi)
                                  : wgml_unary_backward(g, (wgml_unary_op)opc, op->in[0], dy);
    return grad_result(g, op, dx);
}

wgml_tensor *ew_grad_unary(wgml_graph *g, wgml_tensor *out, int code, wgml_tensor *x, float lo, float hi) {
    graph_op op = {.name = "unary", .backward = unary_op_backward, .n_in = 1, .in = {x}, .out = out};
    ew_attrs at = {code, 1, 0, lo, hi};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

/* ------------------------------------------------------------------ where */

/* out = cond ? a : b: da = dy where cond, db = dy elsewhere (no gradient for cond). */
static wgml_status where_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    wgml_tensor *cond = op->in[0], *a = op->in[1], *b = op->in[2];
    if (graph_op_wants(op, 1)) dx[1] = grad_reduce_to(g, wgml_where(g, cond, dy, zero(g)), a->rank, a->shape);
    if (graph_op_wants(op, 2)) dx[2] = grad_reduce_to(g, wgml_where(g, cond, zero(g), dy), b->rank, b->shape);
    return grad_result(g, op, dx);
}

wgml_tensor *ew_grad_where(wgml_graph *g, wgml_tensor *out, wgml_tensor *cond, wgml_tensor *a, wgml_tensor *b) {
    graph_op op = {.name = "where", .backward = where_backward, .n_in = 3, .in = {cond, a, b}, .out = out};
    return graph_record_op(g, &op);
}
