/* Backward rules of the reduce family: sum, mean and amax (the gradient broadcast back with
 * expand_copy; amax shares it among tied maxima), softmax and log_softmax (compositions; softmax_backward and
 * log_softmax_backward are the places for dedicated kernels). */
#include "ops/reduce/reduce_grad.h"

#include <string.h>

typedef struct red_attrs {
    bool reduced[WGML_MAX_RANK];
    bool mean; /* mean (else sum) */
    bool amax;
    bool log_form; /* softmax: log_softmax (else softmax) */
    int dim;       /* softmax */
} red_attrs;

static wgml_status reduce_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const red_attrs *at = (const red_attrs *)op->attrs;
    wgml_tensor *x = op->in[0];
    int64_t keep[WGML_MAX_RANK], count = 1;
    for (int i = 0; i < x->rank; i++) {
        keep[i] = at->reduced[i] ? 1 : x->shape[i];
        if (at->reduced[i]) count *= x->shape[i];
    }
    wgml_tensor *d = wgml_expand_copy(g, wgml_reshape(g, dy, x->rank, keep), x->rank, x->shape);
    if (at->amax) { /* the gradient shared evenly by the elements equal to the maximum (PyTorch) */
        wgml_tensor *hit = wgml_eq(g, x, wgml_reshape(g, op->out, x->rank, keep));
        wgml_tensor *ind = wgml_where(g, hit, wgml_scalar_tensor(g, WGML_F32, 1.0), wgml_scalar_tensor(g, WGML_F32, 0.0));
        int dims[WGML_MAX_RANK], n = 0;
        for (int i = 0; i < x->rank; i++)
            if (at->reduced[i]) dims[n++] = i;
        dx[0] = wgml_mul(g, d, wgml_div(g, ind, wgml_sum(g, ind, dims, n, 1)));
        return grad_result(g, op, dx);
    }
    dx[0] = at->mean ? wgml_mul_scalar(g, d, (float)(1.0 / (double)count)) : d;
    return grad_result(g, op, dx);
}

wgml_tensor *reduce_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int kind, const int *dims, int n_dims) {
    if (!out || !graph_grad_enabled(g, &x, 1)) return out;
    static const char *const names[] = {"sum", "mean", "amax"};
    graph_op op = {.name = names[kind], .backward = reduce_backward, .n_in = 1, .in = {x}, .out = out};
    red_attrs at;
    memset(&at, 0, sizeof at);
    at.mean = kind == REDUCE_GRAD_MEAN;
    at.amax = kind == REDUCE_GRAD_AMAX;
    for (int i = 0; i < x->rank; i++) at.reduced[i] = n_dims == 0;
    for (int i = 0; i < n_dims; i++) at.reduced[dims[i] < 0 ? dims[i] + x->rank : dims[i]] = true;
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

static wgml_status softmax_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const red_attrs *at = (const red_attrs *)op->attrs;
    dx[0] = at->log_form ? wgml_log_softmax_backward(g, op->out, dy, at->dim)
                         : wgml_softmax_backward(g, op->out, dy, at->dim);
    return grad_result(g, op, dx);
}

wgml_tensor *softmax_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, bool log_form, int dim) {
    if (!out || !graph_grad_enabled(g, &x, 1)) return out;
    graph_op op = {.name = log_form ? "log_softmax" : "softmax", .backward = softmax_op_backward, .n_in = 1, .in = {x},
                   .out = out};
    red_attrs at = {.log_form = log_form, .dim = dim < 0 ? dim + x->rank : dim};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

/* ------------------------------------------------------------------ shared with other families' rules */

wgml_tensor *grad_reduce_to(wgml_graph *g, wgml_tensor *dy, int rank, const int64_t *to) {
    if (!dy) return NULL;
    int dims[WGML_MAX_RANK], n = 0, lead = dy->rank - rank;
    for (int i = 0; i < dy->rank; i++) {
        int64_t want = i < lead ? 1 : to[i - lead];
        if (i < lead || (want == 1 && dy->shape[i] != 1)) dims[n++] = i;
    }
    wgml_tensor *r = n ? wgml_sum(g, dy, dims, n, 1) : dy;
    if (r && (r->rank != rank || memcmp(r->shape, to, sizeof(int64_t) * (size_t)rank)))
        r = wgml_reshape(g, r, rank, to);
    return r;
}

