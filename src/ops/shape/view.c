/* Views: wgml_reshape and wgml_tensor_view make tensors that share x's memory (the graph layer's
 * graph_view: base + byte offset, no dispatch) and record their backward. They are shape ops
 * above the graph layer because that rule builds from ops (zeros, cat). */
#include "graph/graph.h"
#include "graph/tape.h"
#include "gpu/gpu.h"

#include <string.h>

typedef struct view_attrs {
    int64_t offset; /* tensor_view: element offset into x */
} view_attrs;

/* reshape: dx = dy in x's shape. tensor_view: dy scattered back into zeros of x's size. */
static wgml_status view_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    wgml_tensor *x = op->in[0];
    const view_attrs *a = (const view_attrs *)op->attrs;
    if (dy->numel == x->numel) {
        dx[0] = wgml_reshape(g, dy, x->rank, x->shape);
        return dx[0] ? WGML_OK : wgml_last_status(graph_ctx(g));
    }
    int64_t n = dy->numel, before = a->offset, after = x->numel - a->offset - n;
    wgml_tensor *parts[3];
    int k = 0;
    if (before > 0) parts[k++] = wgml_zeros(g, WGML_F32, 1, &before);
    parts[k++] = wgml_reshape(g, dy, 1, &n);
    if (after > 0) parts[k++] = wgml_zeros(g, WGML_F32, 1, &after);
    wgml_tensor *flat = k == 1 ? parts[0] : wgml_cat(g, parts, k, 0);
    dx[0] = flat ? wgml_reshape(g, flat, x->rank, x->shape) : NULL;
    return dx[0] ? WGML_OK : wgml_last_status(graph_ctx(g));
}

static wgml_tensor *record_view(wgml_graph *g, wgml_tensor *x, wgml_tensor *view, int64_t offset) {
    if (!view || !graph_grad_enabled(g, &x, 1)) return view;
    graph_op op = {.name = "view", .backward = view_backward, .n_in = 1, .in = {x}, .out = view};
    view_attrs a = {offset};
    memcpy(op.attrs, &a, sizeof a);
    return graph_record_op(g, &op);
}

wgml_tensor *wgml_reshape(wgml_graph *g, wgml_tensor *x, int rank, const int64_t *shape) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, "reshape", "x", x) || check_shape(ctx, "reshape", rank, shape) ||
        check_graph(ctx, g, "reshape", "x", x))
        return NULL;
    if (shape_numel(rank, shape) != x->numel) {
        char b[SHAPE_STR_LEN];
        wgml_set_error(ctx, WGML_ERR_SHAPE, "reshape: x %s has %lld elements; shape %s has %lld", tshape(x),
                       (long long)x->numel, shape_str(b, sizeof b, rank, shape), (long long)shape_numel(rank, shape));
        return NULL;
    }
    return record_view(g, x, graph_view(g, x, "reshape", 0, rank, shape), 0);
}

wgml_tensor *wgml_tensor_view(wgml_tensor *x, int64_t offset, int rank, const int64_t *shape) {
    if (!x) return NULL;
    wgml_ctx *ctx = graph_ctx(x->graph);
    if (check_shape(ctx, "tensor_view", rank, shape)) return NULL;
    int64_t n = shape_numel(rank, shape);
    uint64_t esize = wgml_dtype_size(x->dtype), align = gpu_get_caps(ctx)->storage_align;
    if (offset < 0 || offset > x->numel || n > x->numel - offset) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "tensor_view: %lld elements at offset %lld do not fit in x %s", (long long)n,
                       (long long)offset, tshape(x));
        return NULL;
    }
    if (((uint64_t)offset * esize) % align) {
        wgml_set_error(ctx, WGML_ERR_ARG,
                       "tensor_view: offset %lld (%llu bytes) is not a multiple of the device's %llu-byte storage "
                       "offset alignment",
                       (long long)offset, (unsigned long long)((uint64_t)offset * esize), (unsigned long long)align);
        return NULL;
    }
    return record_view(x->graph, x, graph_view(x->graph, x, "tensor_view", (uint64_t)offset * esize, rank, shape),
                       offset);
}

