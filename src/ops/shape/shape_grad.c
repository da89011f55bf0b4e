/* Backward rules of the shape family: clone (identity), slice (the gradient placed back
 * between zeros; strided slices through the index scatter), cat (slices of the gradient),
 * permute / transpose (the inverse permutation) and expand_copy (summed over the broadcast
 * dims). Inputs beyond GRAPH_OP_MAX_IN of a cat get no gradient (an error at backward). */
#include "ops/shape/shape_grad.h"
#include "ops/index/index_grad.h"
#include "ops/reduce/reduce_grad.h"

#include <stdlib.h>
#include <string.h>

typedef struct shape_attrs {
    int dim;
    int64_t start, step;
    int dims[WGML_MAX_RANK];
} shape_attrs;

static wgml_tensor *record(wgml_graph *g, const char *name, graph_backward_fn fn, wgml_tensor *out, wgml_tensor *const *in,
                           int n, const shape_attrs *at) {
    if (!out || !graph_grad_enabled(g, in, n)) return out;
    if (n > GRAPH_OP_MAX_IN) {
        wgml_set_error(graph_ctx(g), WGML_ERR_UNSUPPORTED, "%s: autograd takes at most %d inputs, got %d", name,
                       GRAPH_OP_MAX_IN, n);
        return NULL;
    }
    graph_op op = {.name = name, .backward = fn, .n_in = n, .out = out};
    for (int i = 0; i < n; i++) op.in[i] = in[i];
    if (at) memcpy(op.attrs, at, sizeof *at);
    return graph_record_op(g, &op);
}

static wgml_status clone_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    dx[0] = dy;
    return grad_result(g, op, dx);
}

wgml_tensor *clone_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x) {
    return record(g, "clone", clone_backward, out, &x, 1, NULL);
}

static wgml_status slice_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const shape_attrs *at = (const shape_attrs *)op->attrs;
    wgml_tensor *x = op->in[0];
    int d = at->dim;
    int64_t len = dy->shape[d], size = x->shape[d];
    if (at->step == 1) {
        wgml_tensor *parts[3];
        int k = 0;
        int64_t s[WGML_MAX_RANK];
        memcpy(s, x->shape, sizeof(int64_t) * (size_t)x->rank);
        if (at->start > 0) {
            s[d] = at->start;
            parts[k++] = wgml_zeros(g, WGML_F32, x->rank, s);
        }
        parts[k++] = dy;
        if (at->start + len < size) {
            s[d] = size - at->start - len;
            parts[k++] = wgml_zeros(g, WGML_F32, x->rank, s);
        }
        dx[0] = k == 1 ? dy : wgml_cat(g, parts, k, d);
        return grad_result(g, op, dx);
    }
    wgml_tensor *idx = wgml_tensor_new(g, WGML_I32, 1, &len);
    int32_t *h = malloc(sizeof(int32_t) * (size_t)len);
    if (idx && h) {
        for (int64_t j = 0; j < len; j++) h[j] = (int32_t)(at->start + j * at->step);
        if (!wgml_tensor_write(idx, h, sizeof(int32_t) * (size_t)len))
            dx[0] = grad_index_scatter(g, NULL, dy, idx, d, x->rank, x->shape, true);
    }
    free(h);
    return grad_result(g, op, dx);
}

wgml_tensor *slice_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, int64_t start, int64_t step) {
    shape_attrs at = {.dim = dim, .start = start, .step = step};
    return record(g, "slice", slice_backward, out, &x, 1, &at);
}

static wgml_status cat_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const shape_attrs *at = (const shape_attrs *)op->attrs;
    int64_t off = 0;
    for (int i = 0; i < op->n_in; i++) {
        int64_t n = op->in[i]->shape[at->dim];
        if (graph_op_wants(op, i)) dx[i] = wgml_slice(g, dy, at->dim, off, off + n, 1);
        off += n;
    }
    return grad_result(g, op, dx);
}

wgml_tensor *cat_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *const *tensors, int n, int dim) {
    if (!out) return NULL;
    shape_attrs at = {.dim = dim < 0 ? dim + out->rank : dim};
    return record(g, "cat", cat_backward, out, tensors, n, &at);
}

static wgml_status permute_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const shape_attrs *at = (const shape_attrs *)op->attrs;
    int inv[WGML_MAX_RANK];
    for (int i = 0; i < dy->rank; i++) inv[at->dims[i]] = i;
    dx[0] = wgml_permute(g, dy, inv);
    return grad_result(g, op, dx);
}

wgml_tensor *permute_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, const int *dims) {
    if (!out) return NULL;
    shape_attrs at = {0};
    for (int i = 0; i < x->rank; i++) at.dims[i] = dims[i] < 0 ? dims[i] + x->rank : dims[i];
    return record(g, "permute", permute_backward, out, &x, 1, &at);
}

static wgml_status expand_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    dx[0] = grad_reduce_to(g, dy, op->in[0]->rank, op->in[0]->shape);
    return grad_result(g, op, dx);
}

wgml_tensor *expand_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x) {
    return record(g, "expand_copy", expand_backward, out, &x, 1, NULL);
}
