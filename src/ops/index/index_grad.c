/* Backward rules of the index family: the gradient of a gather / index_select / embedding is
 * a scatter-add, done here by grad_index_scatter (index_scatter.wgsl: one thread per element
 * of the result, no atomics, deterministic). embedding_backward is the place for a dedicated
 * kernel (wgml_embedding_backward). No gradient for indices. */
#include "ops/index/index_grad.h"

#include <string.h>

/* Must match index_scatter.wgsl's Params. */
typedef struct scatter_params {
    uint32_t shape[8], bound[8], istr[8], dstr[8];
    uint32_t n, rank, dim, len, size, pad[3];
} scatter_params;

static void strides_of(int rank, const int64_t *shape, int64_t *str) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        str[i] = s;
        s *= shape[i];
    }
}

wgml_tensor *grad_index_scatter(wgml_graph *g, const char *op, wgml_tensor *dy, wgml_tensor *idx, int dim, int x_rank,
                                const int64_t *x_shape, bool idx_select) {
    if (!dy || !idx) return NULL;
    if (!op) op = "index_scatter";
    wgml_tensor *dx = graph_output(g, op, WGML_F32, x_rank, x_shape);
    if (!dx) return NULL;
    scatter_params p;
    memset(&p, 0, sizeof p);
    int64_t dstr[WGML_MAX_RANK], istr[WGML_MAX_RANK];
    strides_of(dy->rank, dy->shape, dstr);
    strides_of(idx->rank, idx->shape, istr);
    for (int i = 0; i < x_rank; i++) {
        p.shape[i] = (uint32_t)x_shape[i];
        p.dstr[i] = (uint32_t)dstr[i];
        if (idx_select) {
            p.bound[i] = (uint32_t)x_shape[i];
            p.istr[i] = i == dim ? 1u : 0u;
        } else {
            p.bound[i] = (uint32_t)idx->shape[i];
            p.istr[i] = (uint32_t)istr[i];
        }
    }
    p.n = (uint32_t)dx->numel;
    p.rank = (uint32_t)x_rank;
    p.dim = (uint32_t)dim;
    p.len = (uint32_t)dy->shape[dim];
    p.size = (uint32_t)x_shape[dim];
    wgml_tensor *ro[2] = {dy, idx};
    if (graph_dispatch(g, op, "index_scatter", NULL, ro, 2, &dx, 1, &p, sizeof p, ((uint64_t)dx->numel + 255) / 256)) {
        wgml_tensor_free(dx);
        return NULL;
    }
    return dx;
}

typedef struct index_attrs {
    int dim;
} index_attrs;

static wgml_status gather_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const index_attrs *at = (const index_attrs *)op->attrs;
    wgml_tensor *x = op->in[0];
    dx[0] = grad_index_scatter(g, NULL, dy, op->in[1], at->dim, x->rank, x->shape, false);
    return grad_result(g, op, dx);
}

static wgml_status index_select_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const index_attrs *at = (const index_attrs *)op->attrs;
    wgml_tensor *x = op->in[0], *idx = op->in[1];
    if (idx->rank == 0) { /* one entry: dy has dim of size 1 */
        int64_t one = 1;
        idx = wgml_reshape(g, idx, 1, &one);
    }
    dx[0] = grad_index_scatter(g, NULL, dy, idx, at->dim, x->rank, x->shape, true);
    return grad_result(g, op, dx);
}

static wgml_status embedding_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    dx[0] = wgml_embedding_backward(g, op->in[1], dy, op->in[0]->shape[0]);
    return grad_result(g, op, dx);
}

static wgml_tensor *record(wgml_graph *g, const char *name, graph_backward_fn fn, wgml_tensor *out, wgml_tensor *x,
                           wgml_tensor *index, int dim) {
    if (!out || !graph_grad_enabled(g, &x, 1)) return out;
    graph_op op = {.name = name, .backward = fn, .n_in = 2, .in = {x, index}, .out = out};
    index_attrs at = {dim < 0 ? dim + x->rank : dim};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}

wgml_tensor *gather_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, wgml_tensor *index) {
    return record(g, "gather", gather_backward, out, x, index, dim);
}
wgml_tensor *index_select_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *x, int dim, wgml_tensor *index) {
    return record(g, "index_select", index_select_backward, out, x, index, dim);
}
wgml_tensor *embedding_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *weight, wgml_tensor *idx) {
    return record(g, "embedding", embedding_op_backward, out, weight, idx, 0);
}
