/* Reverse-mode autograd on the graph.
 *
 * Forward: an op handler that finished recording calls graph_record_op with a graph_op
 * (name, backward function, inputs, output, a small attribute blob). The record is kept only
 * when one of the inputs requires a gradient; the output then requires one too. Frozen
 * branches therefore leave no record and get no backward work.
 *
 * wgml_backward(g, loss, scale): seeds d(loss) = scale, walks the records from last to first
 * (recording order is a topological order) and calls each record's backward function, which
 * emits ordinary ops into g; gradients reaching one tensor from several uses are summed with
 * wgml_add. Finally each trainable leaf gets its gradient: an arena tensor kept alive to the
 * end of the run, or, when the caller gave one with wgml_tensor_set_grad, a store (or an
 * accumulate) into that persistent tensor. The backward graph is built once and runs with the
 * forward on every wgml_graph_run. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

typedef struct ag_state {
    graph_op *ops;
    size_t n, cap;
    wgml_tensor **leaves;
    size_t n_leaves, cap_leaves;
    bool building; /* inside wgml_backward: ops record no gradient */
    bool done;     /* wgml_backward ran: later ops (optimizer) record nothing */
} ag_state;

static ag_state *state(wgml_graph *g, bool create) {
    void **slot = graph_autograd_slot(g);
    if (!*slot && create) *slot = calloc(1, sizeof(ag_state));
    return *slot;
}

void autograd_release(wgml_graph *g) {
    ag_state *st = state(g, false);
    if (!st) return;
    free(st->ops);
    free(st->leaves);
    free(st);
    *graph_autograd_slot(g) = NULL;
}

bool graph_grad_enabled(const wgml_graph *g, wgml_tensor *const *ts, int n) {
    ag_state *st = *graph_autograd_slot((wgml_graph *)g);
    if (!st || st->building || st->done) return false;
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->requires_grad) return true;
    return false;
}

wgml_tensor *graph_record_op(wgml_graph *g, const graph_op *op) {
    if (!op->out) return NULL;
    if (!graph_grad_enabled(g, op->in, op->n_in)) return op->out;
    ag_state *st = state(g, false);
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        graph_op *p = realloc(st->ops, cap * sizeof *p);
        if (!p) {
            wgml_set_error(graph_ctx(g), WGML_ERR_OOM, "%s: out of host memory", op->name);
            return NULL;
        }
        st->ops = p;
        st->cap = cap;
    }
    st->ops[st->n++] = *op;
    op->out->requires_grad = true;
    return op->out;
}

/* ------------------------------------------------------------------ shared rule helpers */

wgml_status grad_result(wgml_graph *g, const graph_op *op, wgml_tensor *const *dx) {
    for (int i = 0; i < op->n_in; i++)
        if (graph_op_wants(op, i) && !dx[i]) {
            wgml_status s = wgml_last_status(graph_ctx(g));
            return s ? s : wgml_set_error(graph_ctx(g), WGML_ERR_STATE, "backward of %s: no gradient for input %d", op->name, i);
        }
    return WGML_OK;
}

wgml_tensor *graph_grad_sink(const graph_op *op, int i, bool *accumulate) {
    wgml_tensor *t = op->in[i];
    if (!t || !t->trainable || !t->grad_dest || t->grad_uses != 1 || t->grad_dest->rank != t->rank ||
        memcmp(t->grad_dest->shape, t->shape, sizeof(int64_t) * (size_t)t->rank))
        return NULL;
    *accumulate = t->grad_accumulate;
    return t->grad_dest;
}

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

/* ------------------------------------------------------------------ views */

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

wgml_tensor *autograd_view_record(wgml_graph *g, wgml_tensor *x, wgml_tensor *view, int64_t offset) {
    if (!view || !graph_grad_enabled(g, &x, 1)) return view;
    graph_op op = {.name = "view", .backward = view_backward, .n_in = 1, .in = {x}, .out = view};
    view_attrs a = {offset};
    memcpy(op.attrs, &a, sizeof a);
    return graph_record_op(g, &op);
}

/* ------------------------------------------------------------------ public API */

static wgml_status check_graph_tensor(const char *fn, wgml_tensor *t) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: tensor is NULL", fn);
    wgml_graph *g = t->graph;
    wgml_ctx *ctx = graph_ctx(g);
    if (graph_is_eager(g))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: autograd works on built graphs (wgml_graph_new), not the eager graph", fn);
    if (graph_is_compiled(g)) return wgml_set_error(ctx, WGML_ERR_STATE, "%s: the graph is already compiled", fn);
    ag_state *st = state(g, true);
    if (!st) return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", fn);
    if (st->done) return wgml_set_error(ctx, WGML_ERR_STATE, "%s: wgml_backward already ran on this graph", fn);
    return WGML_OK;
}

wgml_status wgml_tensor_set_trainable(wgml_tensor *t, int trainable) {
    const char *fn = "wgml_tensor_set_trainable";
    wgml_status s = check_graph_tensor(fn, t);
    if (s) return s;
    wgml_ctx *ctx = graph_ctx(t->graph);
    if ((s = check_dtype(ctx, fn, "t", t, WGML_F32))) return s;
    ag_state *st = state(t->graph, true);
    if (trainable && !t->trainable) {
        if (st->n_leaves == st->cap_leaves) {
            size_t cap = st->cap_leaves ? st->cap_leaves * 2 : 16;
            wgml_tensor **p = realloc(st->leaves, cap * sizeof *p);
            if (!p) return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", fn);
            st->leaves = p;
            st->cap_leaves = cap;
        }
        st->leaves[st->n_leaves++] = t;
    } else if (!trainable && t->trainable) {
        for (size_t i = 0; i < st->n_leaves; i++)
            if (st->leaves[i] == t) st->leaves[i] = st->leaves[--st->n_leaves];
    }
    t->trainable = trainable != 0;
    t->requires_grad = trainable != 0;
    return WGML_OK;
}

wgml_status wgml_tensor_set_grad(wgml_tensor *param, wgml_tensor *grad, int accumulate) {
    const char *fn = "wgml_tensor_set_grad";
    wgml_status s = check_graph_tensor(fn, param);
    if (s) return s;
    wgml_ctx *ctx = graph_ctx(param->graph);
    if (grad) {
        if ((s = check_dtype(ctx, fn, "grad", grad, WGML_F32)) || (s = check_same_graph(ctx, fn, param, grad))) return s;
        if (!grad->persistent)
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: grad %s must be a persistent tensor (wgml_tensor_new or a view of one)",
                                  fn, tshape(grad));
        if (grad->numel != param->numel)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: grad %s has %lld elements; param %s has %lld", fn, tshape(grad),
                                  (long long)grad->numel, tshape(param), (long long)param->numel);
    }
    param->grad_dest = grad;
    param->grad_accumulate = grad && accumulate;
    return WGML_OK;
}

wgml_tensor *wgml_tensor_grad(const wgml_tensor *t) { return t ? t->grad : NULL; }

/* Must match autograd_store.wgsl. */
typedef struct store_params {
    uint32_t n, accumulate, pad0, pad1;
} store_params;

static wgml_status store_grad(wgml_graph *g, wgml_tensor *src, wgml_tensor *dst, bool accumulate) {
    store_params p = {(uint32_t)dst->numel, accumulate ? 1u : 0u, 0, 0};
    uint64_t threads = ((uint64_t)dst->numel + 3) / 4;
    return graph_dispatch(g, "grad_store", "autograd_store", NULL, &src, 1, &dst, 1, &p, sizeof p, (threads + 255) / 256);
}

static wgml_status add_grad(wgml_graph *g, const graph_op *op, wgml_tensor *t, wgml_tensor *gi) {
    wgml_ctx *ctx = graph_ctx(g);
    if (gi->numel != t->numel)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "backward of %s: gradient %s for an input %s", op->name, tshape(gi),
                              tshape(t));
    if (gi->rank != t->rank || memcmp(gi->shape, t->shape, sizeof(int64_t) * (size_t)t->rank)) {
        gi = wgml_reshape(g, gi, t->rank, t->shape);
        if (!gi) return wgml_last_status(ctx);
    }
    if (!t->grad_sum) {
        t->grad_sum = gi;
        return WGML_OK;
    }
    t->grad_sum = wgml_add(g, t->grad_sum, gi, 1.0f);
    return t->grad_sum ? WGML_OK : wgml_last_status(ctx);
}

static wgml_status run_backward(wgml_graph *g, ag_state *st, wgml_tensor *loss, float loss_scale) {
    wgml_ctx *ctx = graph_ctx(g);
    for (size_t i = 0; i < st->n; i++)
        for (int j = 0; j < st->ops[i].n_in; j++)
            if (st->ops[i].in[j]) st->ops[i].in[j]->grad_uses = 0;
    for (size_t i = 0; i < st->n; i++)
        for (int j = 0; j < st->ops[i].n_in; j++)
            if (st->ops[i].in[j]) st->ops[i].in[j]->grad_uses++;
    loss->grad_sum = wgml_full(g, WGML_F32, loss->rank, loss->shape, loss_scale);
    if (!loss->grad_sum) return wgml_last_status(ctx);
    for (size_t i = st->n; i-- > 0;) {
        const graph_op *op = &st->ops[i];
        wgml_tensor *dy = op->out->grad_sum;
        if (!dy) continue; /* nothing flows back through this op */
        wgml_tensor *din[GRAPH_OP_MAX_IN] = {0};
        wgml_status s = op->backward(g, op, dy, din);
        if (s) return s;
        for (int j = 0; j < op->n_in; j++)
            if (graph_op_wants(op, j) && din[j] && (s = add_grad(g, op, op->in[j], din[j]))) return s;
    }
    for (size_t i = 0; i < st->n_leaves; i++) {
        wgml_tensor *t = st->leaves[i], *gs = t->grad_sum;
        wgml_status s = WGML_OK;
        if (t->grad_dest) {
            t->grad = t->grad_dest;
            if (gs == t->grad_dest) continue; /* the rule wrote it there (graph_grad_sink) */
            if (gs) s = store_grad(g, gs, t->grad_dest, t->grad_accumulate);
            else if (!t->grad_accumulate) s = wgml_fill(g, t->grad_dest, 0.0);
        } else {
            t->grad = gs ? gs : wgml_zeros(g, WGML_F32, t->rank, t->shape);
            if (!t->grad) return wgml_last_status(ctx);
            if (!t->grad->persistent) s = wgml_graph_keep(g, t->grad);
        }
        if (s) return s;
    }
    return WGML_OK;
}

wgml_status wgml_backward(wgml_graph *g, wgml_tensor *loss, float loss_scale) {
    const char *fn = "wgml_backward";
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: graph is NULL", fn);
    wgml_ctx *ctx = graph_ctx(g);
    if (!loss) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: loss is NULL", fn);
    wgml_status s = check_graph(ctx, g, fn, "loss", loss);
    if (s) return s;
    s = check_graph_tensor(fn, loss);
    if (s) return s;
    if (loss->numel != 1)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: loss %s must have one element", fn, tshape(loss));
    if (!loss->requires_grad)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: loss does not depend on any trainable tensor", fn);
    ag_state *st = state(g, true);
    st->building = true;
    s = run_backward(g, st, loss, loss_scale);
    st->building = false;
    st->done = true;
    /* the running sums are only meaningful during this call */
    loss->grad_sum = NULL;
    for (size_t i = 0; i < st->n; i++) {
        st->ops[i].out->grad_sum = NULL;
        for (int j = 0; j < st->ops[i].n_in; j++)
            if (st->ops[i].in[j]) {
                st->ops[i].in[j]->grad_sum = NULL;
                st->ops[i].in[j]->grad_uses = 0;
            }
    }
    for (size_t i = 0; i < st->n_leaves; i++) st->leaves[i]->grad_sum = NULL;
    free(st->ops);
    st->ops = NULL;
    st->n = st->cap = 0;
    return s;
}
