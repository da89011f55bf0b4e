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
#include "graph/tape.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the backward pass */

/* Must match autograd_store.wgsl. */
typedef struct store_params {
    uint32_t n, accumulate, pad0, pad1;
} store_params;

static wgml_status store_grad(wgml_graph *g, wgml_tensor *src, wgml_tensor *dst, bool accumulate) {
    store_params p = {(uint32_t)dst->numel, accumulate ? 1u : 0u, 0, 0};
    uint64_t threads = ((uint64_t)dst->numel + 3) / 4;
    return graph_dispatch(g, "grad_store", "autograd_store", NULL, &src, 1, &dst, 1, &p, sizeof p, (threads + 255) / 256);
}

/* Adds gi to t's running sum: the first term is the sum; a term the rule added into the sum in
 * place (graph_grad_accum) is already in it; else one wgml_add. The sum is owned (a rule may
 * add into it) when it is a term marked fresh or the engine's add. */
static wgml_status add_grad(wgml_graph *g, const graph_op *op, wgml_tensor *t, wgml_tensor *gi) {
    wgml_ctx *ctx = graph_ctx(g);
    if (gi == t->grad_sum) return WGML_OK;
    bool fresh = gi->grad_fresh;
    gi->grad_fresh = false;
    if (gi->numel != t->numel)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "backward of %s: gradient %s for an input %s", op->name, tshape(gi),
                              tshape(t));
    if (gi->rank != t->rank || memcmp(gi->shape, t->shape, sizeof(int64_t) * (size_t)t->rank)) {
        gi = wgml_reshape(g, gi, t->rank, t->shape);
        if (!gi) return wgml_last_status(ctx);
    }
    if (!t->grad_sum) {
        t->grad_sum = gi;
        t->grad_sum_owned = fresh;
        return WGML_OK;
    }
    t->grad_sum = wgml_add(g, t->grad_sum, gi, 1.0f);
    t->grad_sum_owned = true;
    return t->grad_sum ? WGML_OK : wgml_last_status(ctx);
}

static wgml_status run_backward(wgml_graph *g, graph_tape *st, wgml_tensor *loss, float loss_scale) {
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
    s = graph_tape_check(fn, loss);
    if (s) return s;
    if (loss->numel != 1)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: loss %s must have one element", fn, tshape(loss));
    if (!loss->requires_grad)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: loss does not depend on any trainable tensor", fn);
    graph_tape *st = graph_tape_get(g, true);
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
                st->ops[i].in[j]->grad_sum_owned = false;
                st->ops[i].in[j]->grad_uses = 0;
            }
    }
    for (size_t i = 0; i < st->n_leaves; i++) st->leaves[i]->grad_sum = NULL;
    free(st->ops);
    st->ops = NULL;
    st->n = st->cap = 0;
    return s;
}
