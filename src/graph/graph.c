/* Graphs: their lifetime (the eager graph of a context, built graphs, freeing) and their
 * tensors (persistent tensors and op outputs, views, shares, host reads and writes, keep).
 * Recording dispatches is graph_record.c's job, and flushing, compiling and running them
 * graph_run.c's; the three share the graph struct through graph_internal.h. */
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

void **graph_autograd_slot(wgml_graph *g) { return &g->autograd; }
bool graph_is_compiled(const wgml_graph *g) { return g->compiled; }

wgml_ctx *graph_ctx(const wgml_graph *g) { return g ? g->ctx : NULL; }
bool graph_is_eager(const wgml_graph *g) { return g->eager; }
void graph_set_x8(wgml_graph *g, bool on) { g->x8 = on; }
bool graph_x8(const wgml_graph *g) { return g->x8; }

bool graph_derived_set(wgml_graph *g, const wgml_tensor *src, uint64_t key, wgml_tensor *t) {
    if (g->eager) return true;
    if (g->n_derived == g->cap_derived) {
        size_t cap = g->cap_derived ? 2 * g->cap_derived : 16;
        graph_derive *d = realloc(g->derived, cap * sizeof *d);
        if (!d) return false;
        g->derived = d, g->cap_derived = cap;
    }
    g->derived[g->n_derived++] = (graph_derive){.src = src, .key = key, .t = t};
    return true;
}

wgml_tensor *graph_derived(const wgml_graph *g, const wgml_tensor *src, uint64_t key) {
    for (size_t i = 0; i < g->n_derived && !g->eager; i++)
        if (g->derived[i].src == src && g->derived[i].key == key) return g->derived[i].t;
    return NULL;
}

/* ------------------------------------------------------------------ lifetime */

static wgml_graph *graph_alloc(wgml_ctx *ctx, bool eager) {
    wgml_graph *g = calloc(1, sizeof *g);
    if (!g) {
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    g->ctx = ctx;
    g->eager = eager;
    if (eager) {
        const char *env = getenv("WGML_CHECK_ALIASING");
        g->check_aliasing = env && *env && strcmp(env, "0") != 0;
    } else {
        wgml_graph *e = wgml_eager(ctx);
        g->check_aliasing = e && e->check_aliasing;
    }
    return g;
}

wgml_graph *wgml_eager(wgml_ctx *ctx) {
    if (!ctx) return NULL;
    wgml_graph *g = graph_ctx_eager(ctx);
    if (!g) {
        g = graph_alloc(ctx, true);
        graph_ctx_set_eager(ctx, g);
    }
    return g;
}

wgml_graph *wgml_graph_new(wgml_ctx *ctx) { return ctx ? graph_alloc(ctx, false) : NULL; }

static void unlink_tensor(wgml_tensor *t) {
    wgml_graph *g = t->graph;
    if (t->prev) t->prev->next = t->next;
    else g->tensors = t->next;
    if (t->next) t->next->prev = t->prev;
}

static void release_eager(wgml_tensor *t);

static void free_tensors(wgml_graph *g) {
    while (g->tensors) {
        wgml_tensor *t = g->tensors;
        g->tensors = t->next;
        /* a view of another graph's tensor (wgml_tensor_share): let that tensor go when it was
         * freed (eager) while this view was alive */
        if (t->base && t->base->graph != g && --t->base->n_views == 0 && t->base->freed) release_eager(t->base);
        if (t->persistent && t->buf && !t->base) gpu_buffer_put(g->ctx, t->buf);
        free(t);
    }
}

void wgml_graph_free(wgml_graph *g) {
    if (!g || g->eager) return; /* the eager graph belongs to its context */
    graph_release_compiled(g);
    graph_clear_nodes(g);
    free(g->nodes);
    graph_tape_release(g);
    free_tensors(g);
    free(g->derived);
    free(g);
}

void graph_eager_destroy(wgml_graph *g) {
    if (!g) return;
    graph_tape_release(g);
    graph_clear_nodes(g);
    free(g->nodes);
    free_tensors(g);
    gpu_buffer_put(g->ctx, g->unused);
    free(g);
}

/* ------------------------------------------------------------------ tensors */


/* Queue writes land before the next submit, so eager work recorded before a write must be
 * submitted first: it may still use a pooled buffer that the write is about to fill. */
static wgml_status flush_before_write(wgml_ctx *ctx) {
    wgml_graph *e = graph_ctx_eager(ctx);
    return e ? graph_eager_flush(e) : gpu_check_alive(ctx);
}

static wgml_status poison_now(wgml_ctx *ctx, wgml_tensor *t) {
    wgml_status s = flush_before_write(ctx);
    if (s) return s;
    uint64_t n = tensor_binding_size(t);
    void *bits = malloc((size_t)n);
    if (!bits) return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    memset(bits, 0xFF, (size_t)n);
    s = gpu_write(ctx, t->buf, t->offset, bits, n);
    free(bits);
    return s;
}

static wgml_tensor *tensor_alloc(wgml_graph *g, const char *op, wgml_dtype dtype, int rank, const int64_t *shape,
                                 bool persistent) {
    wgml_ctx *ctx = g->ctx;
    if (check_shape(ctx, op, rank, shape)) return NULL;
    if ((unsigned)dtype > WGML_BOOL) {
        wgml_set_error(ctx, WGML_ERR_DTYPE, "%s: unknown dtype %d", op, (int)dtype);
        return NULL;
    }
    int64_t numel = shape_numel(rank, shape);
    uint64_t nbytes = (uint64_t)numel * wgml_dtype_size(dtype);
    const gpu_caps *caps = gpu_get_caps(ctx);
    if (((nbytes + 3) & ~3ull) > caps->max_storage_binding) {
        char b[SHAPE_STR_LEN];
        wgml_set_error(ctx, WGML_ERR_LIMIT,
                       "%s: a %s tensor of shape %s needs %llu bytes, over the device's %llu-byte storage binding limit",
                       op, wgml_dtype_name(dtype), shape_str(b, sizeof b, rank, shape), (unsigned long long)nbytes,
                       (unsigned long long)caps->max_storage_binding);
        return NULL;
    }
    wgml_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    t->graph = g;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    t->numel = numel;
    t->nbytes = nbytes;
    t->persistent = persistent || g->eager;
    t->first_use = t->last_use = -1;
    if (t->persistent) {
        t->buf = gpu_buffer_get(ctx, tensor_binding_size(t), op);
        if (!t->buf) {
            free(t);
            return NULL;
        }
    }
    t->next = g->tensors;
    if (g->tensors) g->tensors->prev = t;
    g->tensors = t;
    if (t->persistent && gpu_poison_outputs(ctx)) {
        /* in a built graph a recorded fill would re-run every time: poison now, through the
         * eager graph's path */
        wgml_status s = g->eager ? graph_fill_bits(g, t, 0xFFFFFFFFu) : poison_now(ctx, t);
        if (s) {
            unlink_tensor(t);
            gpu_buffer_put(ctx, t->buf);
            free(t);
            return NULL;
        }
    }
    return t;
}

wgml_tensor *wgml_tensor_new(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape) {
    if (!g) return NULL;
    if (g->compiled) {
        wgml_set_error(g->ctx, WGML_ERR_STATE, "wgml_tensor_new: the graph is already compiled");
        return NULL;
    }
    return tensor_alloc(g, "wgml_tensor_new", dtype, rank, shape, true);
}

wgml_tensor *graph_output(wgml_graph *g, const char *op, wgml_dtype dtype, int rank, const int64_t *shape) {
    if (g->compiled) {
        wgml_set_error(g->ctx, WGML_ERR_STATE, "%s: the graph is already compiled; build a new one", op);
        return NULL;
    }
    return tensor_alloc(g, op, dtype, rank, shape, false);
}

static void release_eager(wgml_tensor *t) {
    /* dispatches already recorded hold the buffer range, not the tensor; the pool hands the
     * buffer out again only to later dispatches, which run after them */
    unlink_tensor(t);
    if (!t->base) gpu_buffer_put(t->graph->ctx, t->buf);
    free(t);
}

void wgml_tensor_free(wgml_tensor *t) {
    if (!t || !t->graph->eager || t->freed) return;
    wgml_tensor *base = t->base;
    if (t->n_views > 0) { /* its views still use the memory: release with the last one */
        t->freed = true;
        return;
    }
    release_eager(t);
    if (base && --base->n_views == 0 && base->freed) release_eager(base);
}

/* A view of x (or of x's base) recorded in graph g (x's own graph, or another graph of the
 * same context for a shared persistent tensor). */
wgml_tensor *graph_view(wgml_graph *g, wgml_tensor *x, const char *op, uint64_t byte_offset, int rank,
                        const int64_t *shape) {
    wgml_ctx *ctx = g->ctx;
    wgml_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    wgml_tensor *base = x->base ? x->base : x;
    t->graph = g;
    t->dtype = x->dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    t->numel = shape_numel(rank, shape);
    t->nbytes = (uint64_t)t->numel * wgml_dtype_size(x->dtype);
    t->persistent = base->persistent;
    t->first_use = t->last_use = -1;
    t->base = base;
    t->view_offset = x->view_offset + byte_offset;
    t->buf = base->buf;
    t->offset = base->offset + t->view_offset;
    base->n_views++;
    t->next = g->tensors;
    if (g->tensors) g->tensors->prev = t;
    g->tensors = t;
    return t;
}

/* A view, in graph g, of the persistent tensor x of another graph of the same context (or of g):
 * lets several built graphs (a model's prefill and decode graphs) use one copy of the weights
 * and the KV cache. x's graph must outlive g. */
wgml_tensor *wgml_tensor_share(wgml_graph *g, wgml_tensor *x) {
    if (!g || !x) {
        wgml_set_error(g ? g->ctx : NULL, WGML_ERR_ARG, "tensor_share: %s is NULL", g ? "x" : "g");
        return NULL;
    }
    if (x->graph->ctx != g->ctx) {
        wgml_set_error(g->ctx, WGML_ERR_ARG, "tensor_share: x belongs to another context");
        return NULL;
    }
    if (!x->persistent) {
        wgml_set_error(g->ctx, WGML_ERR_ARG, "tensor_share: x %s is not a persistent tensor", tshape(x));
        return NULL;
    }
    if (g->compiled) {
        wgml_set_error(g->ctx, WGML_ERR_STATE, "tensor_share: the graph is already compiled");
        return NULL;
    }
    return graph_view(g, x, "tensor_share", 0, x->rank, x->shape);
}

wgml_status wgml_tensor_write(wgml_tensor *t, const void *data, size_t bytes) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "wgml_tensor_write: tensor is NULL");
    wgml_ctx *ctx = t->graph->ctx;
    if (!data) return wgml_set_error(ctx, WGML_ERR_ARG, "wgml_tensor_write: data is NULL");
    if (bytes != t->nbytes)
        return wgml_set_error(ctx, WGML_ERR_ARG, "wgml_tensor_write: %zu bytes given for a %s tensor %s of %llu bytes",
                              bytes, wgml_dtype_name(t->dtype), tshape(t), (unsigned long long)t->nbytes);
    if (!t->buf)
        return wgml_set_error(ctx, WGML_ERR_STATE,
                              "wgml_tensor_write: %s is an intermediate of a graph that is not compiled", tshape(t));
    wgml_status s = flush_before_write(ctx);
    return s ? s : gpu_write(ctx, t->buf, t->offset, data, bytes);
}

wgml_status wgml_tensor_read(wgml_tensor *t, void *data, size_t bytes) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "wgml_tensor_read: tensor is NULL");
    wgml_ctx *ctx = t->graph->ctx;
    if (!data) return wgml_set_error(ctx, WGML_ERR_ARG, "wgml_tensor_read: data is NULL");
    if (bytes != t->nbytes)
        return wgml_set_error(ctx, WGML_ERR_ARG, "wgml_tensor_read: %zu bytes asked of a %s tensor %s of %llu bytes",
                              bytes, wgml_dtype_name(t->dtype), tshape(t), (unsigned long long)t->nbytes);
    if (!t->buf)
        return wgml_set_error(ctx, WGML_ERR_STATE,
                              "wgml_tensor_read: %s is an intermediate of a graph that is not compiled", tshape(t));
    if (!t->persistent && !t->keep)
        return wgml_set_error(ctx, WGML_ERR_STATE,
                              "wgml_tensor_read: %s is an intermediate whose memory is reused; mark it with "
                              "wgml_graph_keep before compiling",
                              tshape(t));
    wgml_status s = t->graph->eager ? graph_eager_flush(t->graph) : WGML_OK;
    return s ? s : gpu_read(ctx, t->buf, t->offset, data, bytes);
}

wgml_status wgml_graph_keep(wgml_graph *g, wgml_tensor *t) {
    if (!g || !t) return wgml_set_error(g ? g->ctx : NULL, WGML_ERR_ARG, "wgml_graph_keep: NULL argument");
    if (t->graph != g) return wgml_set_error(g->ctx, WGML_ERR_ARG, "wgml_graph_keep: tensor of another graph");
    if (g->compiled) return wgml_set_error(g->ctx, WGML_ERR_STATE, "wgml_graph_keep: the graph is already compiled");
    t->keep = true;
    if (t->base) t->base->keep = true;
    return WGML_OK;
}
