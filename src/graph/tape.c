/* The tape (see tape.h): recording op records, the gradient flags of tensors
 * (wgml_tensor_set_trainable, wgml_tensor_set_grad) and the helpers the backward rules use to
 * read it. */
#include "graph/tape.h"

#include <stdlib.h>
#include <string.h>

graph_tape *graph_tape_get(wgml_graph *g, bool create) {
    void **slot = graph_autograd_slot(g);
    if (!*slot && create) *slot = calloc(1, sizeof(graph_tape));
    return *slot;
}

void graph_tape_release(wgml_graph *g) {
    graph_tape *st = graph_tape_get(g, false);
    if (!st) return;
    free(st->ops);
    free(st->leaves);
    free(st);
    *graph_autograd_slot(g) = NULL;
}

bool graph_grad_enabled(const wgml_graph *g, wgml_tensor *const *ts, int n) {
    graph_tape *st = *graph_autograd_slot((wgml_graph *)g);
    if (!st || st->building || st->done) return false;
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->requires_grad) return true;
    return false;
}

wgml_tensor *graph_record_op(wgml_graph *g, const graph_op *op) {
    if (!op->out) return NULL;
    if (!graph_grad_enabled(g, op->in, op->n_in)) return op->out;
    graph_tape *st = graph_tape_get(g, false);
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

wgml_tensor *graph_grad_accum(const graph_op *op, int i) {
    wgml_tensor *t = op->in[i], *gs = t ? t->grad_sum : NULL;
    if (!gs || !t->grad_sum_owned || gs->dtype != WGML_F32 || gs->rank != t->rank ||
        memcmp(gs->shape, t->shape, sizeof(int64_t) * (size_t)t->rank))
        return NULL;
    return gs;
}

void graph_grad_fresh(wgml_tensor *d) {
    if (d) d->grad_fresh = true;
}

/* ------------------------------------------------------------------ public API */

wgml_status graph_tape_check(const char *fn, wgml_tensor *t) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: tensor is NULL", fn);
    wgml_graph *g = t->graph;
    wgml_ctx *ctx = graph_ctx(g);
    if (graph_is_eager(g))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: autograd works on built graphs (wgml_graph_new), not the eager graph", fn);
    if (graph_is_compiled(g)) return wgml_set_error(ctx, WGML_ERR_STATE, "%s: the graph is already compiled", fn);
    graph_tape *st = graph_tape_get(g, true);
    if (!st) return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", fn);
    if (st->done) return wgml_set_error(ctx, WGML_ERR_STATE, "%s: wgml_backward already ran on this graph", fn);
    return WGML_OK;
}

wgml_status wgml_tensor_set_trainable(wgml_tensor *t, int trainable) {
    const char *fn = "wgml_tensor_set_trainable";
    wgml_status s = graph_tape_check(fn, t);
    if (s) return s;
    wgml_ctx *ctx = graph_ctx(t->graph);
    if ((s = check_dtype(ctx, fn, "t", t, WGML_F32))) return s;
    graph_tape *st = graph_tape_get(t->graph, true);
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
    wgml_status s = graph_tape_check(fn, param);
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

