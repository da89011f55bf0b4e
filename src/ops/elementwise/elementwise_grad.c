/* Backward rules of the elementwise family: binary ops with broadcasting (the gradient is
 * summed back over the broadcast dims), their tensor-scalar forms, unary ops, clamp and where.
 * All are compositions of public elementwise ops; unary_backward and clamp_backward are the
 * single places where a dedicated kernel can replace the composition. */
#include "ops/elementwise/elementwise_grad.h"

#include <string.h>

#define CLAMP_CODE 12

typedef struct ew_attrs {
    int opc;
    float alpha, s, lo, hi;
} ew_attrs;

static wgml_tensor *zero(wgml_graph *g) { return wgml_scalar_tensor(g, WGML_F32, 0.0); }
static wgml_tensor *one_minus(wgml_graph *g, wgml_tensor *t) { return wgml_add_scalar(g, wgml_neg(g, t), 1.0f, 1.0f); }

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

/* dx = dy·f'(x) for a unary op f with output y = f(x). A composition; the dedicated kernel
 * wgml_unary_backward(g, op, x, dy) replaces it. */
static wgml_tensor *unary_backward(wgml_graph *g, int code, wgml_tensor *x, wgml_tensor *y, wgml_tensor *dy) {
    const float inv_sqrt_2pi = 0.3989422804014327f, c = 0.7978845608028654f; /* 1/√(2π), √(2/π) */
    switch (code) {
    case WGML_UN_RELU: return wgml_where(g, wgml_gt_scalar(g, x, 0.0f), dy, zero(g));
    case WGML_UN_SIGMOID: return wgml_mul(g, dy, wgml_mul(g, y, one_minus(g, y)));
    case WGML_UN_SILU: { /* s·(1 + x·(1 − s)) */
        wgml_tensor *s = wgml_sigmoid(g, x);
        return wgml_mul(g, dy, wgml_mul(g, s, wgml_add_scalar(g, wgml_mul(g, x, one_minus(g, s)), 1.0f, 1.0f)));
    }
    case WGML_UN_GELU: { /* Φ(x) + x·φ(x); Φ(x) = gelu(x)/x, or its Taylor form 1/2 + x/√(2π) near 0 */
        wgml_tensor *near0 = wgml_lt_scalar(g, wgml_abs(g, x), 1e-2f);
        wgml_tensor *cdf = wgml_where(g, near0, wgml_add_scalar(g, wgml_mul_scalar(g, x, inv_sqrt_2pi), 0.5f, 1.0f),
                                      wgml_div(g, y, x));
        wgml_tensor *pdf = wgml_mul_scalar(g, wgml_exp(g, wgml_mul_scalar(g, wgml_mul(g, x, x), -0.5f)), inv_sqrt_2pi);
        return wgml_mul(g, dy, wgml_add(g, cdf, wgml_mul(g, x, pdf), 1.0f));
    }
    case WGML_UN_GELU_TANH: { /* ½(1 + t) + ½x(1 − t²)·c(1 + 3·0.044715x²), t = tanh(c(x + 0.044715x³)) */
        wgml_tensor *x2 = wgml_mul(g, x, x);
        wgml_tensor *u = wgml_mul_scalar(g, wgml_mul(g, x, wgml_add_scalar(g, wgml_mul_scalar(g, x2, 0.044715f), 1.0f, 1.0f)), c);
        wgml_tensor *t = wgml_tanh(g, u);
        wgml_tensor *du = wgml_mul_scalar(g, wgml_add_scalar(g, wgml_mul_scalar(g, x2, 3.0f * 0.044715f), 1.0f, 1.0f), c);
        wgml_tensor *left = wgml_mul_scalar(g, wgml_add_scalar(g, t, 1.0f, 1.0f), 0.5f);
        wgml_tensor *right = wgml_mul_scalar(g, wgml_mul(g, wgml_mul(g, x, one_minus(g, wgml_mul(g, t, t))), du), 0.5f);
        return wgml_mul(g, dy, wgml_add(g, left, right, 1.0f));
    }
    case WGML_UN_EXP: return wgml_mul(g, dy, y);
    case WGML_UN_LOG: return wgml_div(g, dy, x);
    case WGML_UN_NEG: return wgml_neg(g, dy);
    case WGML_UN_ABS: /* sign(x)·dy, 0 at x = 0 */
        return wgml_where(g, wgml_gt_scalar(g, x, 0.0f), dy, wgml_where(g, wgml_lt_scalar(g, x, 0.0f), wgml_neg(g, dy), zero(g)));
    case WGML_UN_SQRT: return wgml_div(g, wgml_mul_scalar(g, dy, 0.5f), y);
    case WGML_UN_RSQRT: return wgml_mul(g, wgml_mul_scalar(g, dy, -0.5f), wgml_pow_scalar(g, y, 3.0f));
    case WGML_UN_TANH: return wgml_mul(g, dy, one_minus(g, wgml_mul(g, y, y)));
    default: wgml_set_error(graph_ctx(g), WGML_ERR_UNSUPPORTED, "backward of unary op %d", code); return NULL;
    }
}

/* dx = dy where lo <= x <= hi, else 0 (PyTorch's rule). A composition; the dedicated kernel
 * wgml_clamp_backward(g, x, dy, lo, hi) replaces it. */
static wgml_tensor *clamp_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *dy, float lo, float hi) {
    wgml_tensor *inside = wgml_logical_and(g, wgml_ge_scalar(g, x, lo), wgml_le_scalar(g, x, hi));
    return wgml_where(g, inside, dy, zero(g));
}

static wgml_status unary_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const ew_attrs *at = (const ew_attrs *)op->attrs;
    dx[0] = at->opc == CLAMP_CODE ? clamp_backward(g, op->in[0], dy, at->lo, at->hi)
                                  : unary_backward(g, at->opc, op->in[0], op->out, dy);
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
