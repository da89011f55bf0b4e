/* Backward rules of the norm family, as compositions of public ops; rms_norm_backward and
 * layer_norm_backward are the places for the dedicated kernels. */
#include "ops/norm/norm_grad.h"

#include <string.h>

typedef struct norm_attrs {
    float eps;
} norm_attrs;

/* Row statistics in x's shape with a last dim of 1. */
static wgml_tensor *keep_last(wgml_graph *g, wgml_tensor *t, const wgml_tensor *x) {
    int64_t s[WGML_MAX_RANK];
    memcpy(s, x->shape, sizeof(int64_t) * (size_t)x->rank);
    s[x->rank - 1] = 1;
    return wgml_reshape(g, t, x->rank, s);
}

/* y = x·r·w with r = rsqrt(mean(x²) + eps), x̂ = x·r, ĝ = dy·w:
 *   dx = r·(ĝ − x̂·mean(ĝ·x̂)), dw = Σ_rows dy·x̂. */
static void rms_norm_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *dy, float eps, wgml_tensor **dx,
                              wgml_tensor **dw) {
    int last = -1;
    wgml_tensor *r = wgml_rsqrt(g, wgml_add_scalar(g, wgml_mean(g, wgml_mul(g, x, x), &last, 1, 1), eps, 1.0f));
    wgml_tensor *xhat = wgml_mul(g, x, r);
    if (dx) {
        wgml_tensor *gh = w ? wgml_mul(g, dy, w) : dy;
        wgml_tensor *m = wgml_mean(g, wgml_mul(g, gh, xhat), &last, 1, 1);
        *dx = wgml_mul(g, r, wgml_sub(g, gh, wgml_mul(g, xhat, m), 1.0f));
    }
    if (dw) *dw = grad_reduce_to(g, wgml_mul(g, dy, xhat), 1, &x->shape[x->rank - 1]);
}

static wgml_status rms_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const norm_attrs *at = (const norm_attrs *)op->attrs;
    rms_norm_backward(g, op->in[0], op->in[1], dy, at->eps, graph_op_wants(op, 0) ? &dx[0] : NULL,
                      graph_op_wants(op, 1) ? &dx[1] : NULL);
    return grad_result(g, op, dx);
}

wgml_tensor *rms_norm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, float eps) {
    graph_op op = {.name = "rms_norm", .backward = rms_op_backward, .n_in = 2, .in = {x, w}, .out = out};
    norm_attrs at = {eps};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

/* y = x̂·w + b with x̂ = (x − mean)·rstd, ĝ = dy·w:
 *   dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)), dw = Σ_rows dy·x̂, db = Σ_rows dy. */
static void layer_norm_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *mean, wgml_tensor *rstd,
                                wgml_tensor *dy, wgml_tensor **dx, wgml_tensor **dw, wgml_tensor **db) {
    int last = -1;
    const int64_t *d = &x->shape[x->rank - 1];
    wgml_tensor *r = keep_last(g, rstd, x);
    wgml_tensor *xhat = wgml_mul(g, wgml_sub(g, x, keep_last(g, mean, x), 1.0f), r);
    if (dx) {
        wgml_tensor *gh = w ? wgml_mul(g, dy, w) : dy;
        wgml_tensor *m1 = wgml_mean(g, gh, &last, 1, 1);
        wgml_tensor *m2 = wgml_mean(g, wgml_mul(g, gh, xhat), &last, 1, 1);
        *dx = wgml_mul(g, r, wgml_sub(g, wgml_sub(g, gh, m1, 1.0f), wgml_mul(g, xhat, m2), 1.0f));
    }
    if (dw) *dw = grad_reduce_to(g, wgml_mul(g, dy, xhat), 1, d);
    if (db) *db = grad_reduce_to(g, dy, 1, d);
}

static wgml_status layer_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    layer_norm_backward(g, op->in[0], op->in[1], op->in[3], op->in[4], dy, graph_op_wants(op, 0) ? &dx[0] : NULL,
                        graph_op_wants(op, 1) ? &dx[1] : NULL, graph_op_wants(op, 2) ? &dx[2] : NULL);
    return grad_result(g, op, dx);
}

wgml_tensor *layer_norm_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, wgml_tensor *w, wgml_tensor *b,
                                    wgml_tensor *mean, wgml_tensor *rstd) {
    graph_op op = {.name = "layer_norm", .backward = layer_op_backward, .n_in = 5, .in = {x, w, b, mean, rstd}, .out = out};
    return graph_record_op(g, &op);
}
