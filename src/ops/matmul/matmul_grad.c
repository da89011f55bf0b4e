/* Backward rules of the matmul family. Products use wgml_matmul's transpose flags (no
 * transpose copies); weight gradients of linear use wgml_linear_dw. mm and bmm are recorded
 * as matmul. */
#include "ops/matmul/matmul_grad.h"
#include "ops/matmul/matmul_into.h"
#include "ops/reduce/reduce_grad.h"

#include <string.h>

typedef struct mm_attrs {
    int trans_a, trans_b;
    float beta, alpha;
} mm_attrs;

/* out = op(a)·op(b) (op: optional transpose of the last two dims; a batch of 1 broadcasts):
 *   d op(a) = dy·op(b)ᵀ, d op(b) = op(a)ᵀ·dy, each summed over a broadcast batch. */
static wgml_status matmul_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const mm_attrs *at = (const mm_attrs *)op->attrs;
    wgml_tensor *a = op->in[0], *b = op->in[1];
    int ta = at->trans_a, tb = at->trans_b;
    if (graph_op_wants(op, 0)) {
        wgml_tensor *da = ta ? wgml_matmul(g, b, dy, tb, 1) : wgml_matmul(g, dy, b, 0, !tb);
        dx[0] = grad_reduce_to(g, da, a->rank, a->shape);
    }
    if (graph_op_wants(op, 1)) {
        wgml_tensor *db = tb ? wgml_matmul(g, dy, a, 1, ta) : wgml_matmul(g, a, dy, !ta, 0);
        dx[1] = grad_reduce_to(g, db, b->rank, b->shape);
    }
    return grad_result(g, op, dx);
}

wgml_tensor *matmul_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b) {
    graph_op op = {.name = "matmul", .backward = matmul_backward, .n_in = 2, .in = {a, b}, .out = out};
    mm_attrs at = {trans_a != 0, trans_b != 0, 0, 1};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

/* out[..., N] = x[..., K]·wᵀ + bias: dx = dy·w, dw = Σ_m dyᵀ·x (wgml_linear_dw), dbias = Σ_m dy. */
static wgml_status linear_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    wgml_tensor *x = op->in[0], *w = op->in[1];
    int64_t n = w->shape[0], k = w->shape[1], m = x->numel / k;
    int64_t dy2[2] = {m, n};
    wgml_tensor *dyf = wgml_reshape(g, dy, 2, dy2);
    if (graph_op_wants(op, 0)) {
        wgml_tensor *d = wgml_matmul(g, dyf, w, 0, 0);
        dx[0] = d ? wgml_reshape(g, d, x->rank, x->shape) : NULL;
    }
    if (graph_op_wants(op, 1) && dyf) { /* straight into the caller's gradient tensor when it can */
        bool acc = false;
        wgml_tensor *dw = graph_grad_sink(op, 1, &acc);
        if (!dw) dw = graph_output(g, "linear_dw", WGML_F32, 2, w->shape);
        dx[1] = dw && !wgml_linear_dw(g, dyf, x, dw, acc) ? dw : NULL;
    }
    if (graph_op_wants(op, 2)) {
        int d0 = 0;
        dx[2] = wgml_sum(g, dyf, &d0, 1, 0);
    }
    return grad_result(g, op, dx);
}

wgml_tensor *linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias) {
    graph_op op = {.name = "linear", .backward = linear_backward, .n_in = 3, .in = {x, w, bias}, .out = out};
    return graph_record_op(g, &op);
}

/* out = beta·c + alpha·a·b: dc = beta·(dy summed to c's shape), da = alpha·dy·bᵀ, db = alpha·aᵀ·dy. */
static wgml_status addmm_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const mm_attrs *at = (const mm_attrs *)op->attrs;
    wgml_tensor *c = op->in[0], *a = op->in[1], *b = op->in[2];
    if (graph_op_wants(op, 0)) {
        wgml_tensor *dc = grad_reduce_to(g, dy, c->rank, c->shape);
        dx[0] = at->beta == 1.0f ? dc : wgml_mul_scalar(g, dc, at->beta);
    }
    wgml_tensor *dys = at->alpha == 1.0f ? dy : wgml_mul_scalar(g, dy, at->alpha);
    if (graph_op_wants(op, 1)) dx[1] = wgml_matmul(g, dys, b, 0, 1);
    if (graph_op_wants(op, 2)) dx[2] = wgml_matmul(g, a, dys, 1, 0);
    return grad_result(g, op, dx);
}

wgml_tensor *addmm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *c, wgml_tensor *a, wgml_tensor *b, float beta,
                               float alpha) {
    graph_op op = {.name = "addmm", .backward = addmm_backward, .n_in = 3, .in = {c, a, b}, .out = out};
    mm_attrs at = {0, 0, beta, alpha};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

/* out = c + alpha·x·wᵀ (matmul_add_linear): dc = dy; dx = alpha·dy·w and dw = alpha·Σ_m dyᵀ·x
 * with the scale folded into the products (no scaled copy of dy). */
static wgml_status add_linear_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const mm_attrs *at = (const mm_attrs *)op->attrs;
    wgml_tensor *x = op->in[1], *w = op->in[2];
    int64_t n = w->shape[0], k = w->shape[1], m = x->numel / k;
    if (graph_op_wants(op, 0)) dx[0] = dy;
    int64_t dy2[2] = {m, n}, x2[2] = {m, k};
    wgml_tensor *dyf = wgml_reshape(g, dy, 2, dy2);
    if (graph_op_wants(op, 1) && dyf) {
        wgml_tensor *d = matmul_scaled(g, "lora_dx", dyf, w, 0, 0, m, k, n, at->alpha, NULL, false);
        dx[1] = d ? wgml_reshape(g, d, x->rank, x->shape) : NULL;
    }
    wgml_tensor *xf = graph_op_wants(op, 2) ? wgml_reshape(g, x, 2, x2) : NULL;
    if (xf && dyf) { /* straight into the caller's gradient tensor when it can */
        bool acc = false;
        wgml_tensor *dw = graph_grad_sink(op, 2, &acc);
        if (!dw) dw = graph_output(g, "lora_dw", WGML_F32, 2, w->shape);
        dx[2] = dw && matmul_scaled(g, "lora_dw", dyf, xf, 1, 0, n, k, m, at->alpha, dw, acc) ? dw : NULL;
    }
    return grad_result(g, op, dx);
}

wgml_tensor *add_linear_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *c, wgml_tensor *x, wgml_tensor *w,
                                   float alpha) {
    graph_op op = {.name = "add_linear", .backward = add_linear_backward, .n_in = 3, .in = {c, x, w}, .out = out};
    mm_attrs at = {0, 1, 1, alpha};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}
