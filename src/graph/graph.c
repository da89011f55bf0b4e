#define _POSIX_C_SOURCE 200809L
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct graph_node {
    const char *op;
    const char *shader;
    char *prelude;
    gpu_pipeline *pipeline;
    int n_ro, n_rw;
    wgml_tensor *t[GRAPH_MAX_BINDINGS]; /* built graphs: tensors, resolved at compile */
    gpu_range r[GRAPH_MAX_BINDINGS];    /* eager: ranges, fixed at record time */
    uint8_t uniform[GRAPH_MAX_UNIFORM];
    uint32_t ubytes;
    uint32_t x, y;
} graph_node;

struct wgml_graph {
    wgml_ctx *ctx;
    bool eager;
    bool compiled;
    graph_node *nodes;
    size_t n_nodes, cap_nodes;
    wgml_tensor *tensors; /* list of every tensor the graph owns */
    gpu_buffer **arenas;
    int n_arenas;
    uint64_t arena_bytes;
    gpu_buffer *uniforms;
    gpu_dispatch *dispatches;
    size_t n_dispatches;
    void *autograd;      /* autograd.c's op records */
    bool check_aliasing; /* $WGML_CHECK_ALIASING, read once per context (by its eager graph) */
    gpu_buffer *unused;  /* eager graph: the context's buffer for GRAPH_UNUSED slots */
};

wgml_tensor graph_unused_binding;

void **graph_autograd_slot(wgml_graph *g) { return &g->autograd; }
bool graph_is_compiled(const wgml_graph *g) { return g->compiled; }

#define EAGER_BATCH 256

wgml_ctx *graph_ctx(const wgml_graph *g) { return g ? g->ctx : NULL; }
bool graph_is_eager(const wgml_graph *g) { return g->eager; }

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

static void release_compiled(wgml_graph *g) {
    for (size_t i = 0; i < g->n_dispatches; i++) gpu_bind_group_release(g->dispatches[i].bind_group);
    free(g->dispatches);
    g->dispatches = NULL;
    g->n_dispatches = 0;
    if (g->uniforms) gpu_buffer_release(g->uniforms);
    g->uniforms = NULL;
    for (int i = 0; i < g->n_arenas; i++) gpu_buffer_put(g->ctx, g->arenas[i]);
    free(g->arenas);
    g->arenas = NULL;
    g->n_arenas = 0;
    g->compiled = false;
}

static void clear_nodes(wgml_graph *g) {
    for (size_t i = 0; i < g->n_nodes; i++) free(g->nodes[i].prelude);
    g->n_nodes = 0;
}

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
    release_compiled(g);
    clear_nodes(g);
    free(g->nodes);
    graph_tape_release(g);
    free_tensors(g);
    free(g);
}

void graph_eager_destroy(wgml_graph *g) {
    if (!g) return;
    graph_tape_release(g);
    clear_nodes(g);
    free(g->nodes);
    free_tensors(g);
    gpu_buffer_put(g->ctx, g->unused);
    free(g);
}

/* ------------------------------------------------------------------ tensors */

static wgml_status eager_flush(wgml_graph *g);

/* Queue writes land before the next submit, so eager work recorded before a write must be
 * submitted first: it may still use a pooled buffer that the write is about to fill. */
static wgml_status flush_before_write(wgml_ctx *ctx) {
    wgml_graph *e = graph_ctx_eager(ctx);
    return e ? eager_flush(e) : gpu_check_alive(ctx);
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
    wgml_status s = t->graph->eager ? eager_flush(t->graph) : WGML_OK;
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

/* ------------------------------------------------------------------ recording */

static wgml_status push_node(wgml_graph *g, graph_node *n) {
    if (g->n_nodes == g->cap_nodes) {
        size_t cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        graph_node *p = realloc(g->nodes, cap * sizeof *p);
        if (!p) return wgml_set_error(g->ctx, WGML_ERR_OOM, "out of host memory");
        g->nodes = p;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes++] = *n;
    return WGML_OK;
}

/* The range of GRAPH_UNUSED binding slot b: slot b of the context's unused buffer, so that
 * two unused slots of one dispatch never overlap (in the all-writable form both are writable). */
static wgml_status unused_range(wgml_graph *g, int b, gpu_range *r) {
    wgml_graph *e = wgml_eager(g->ctx);
    if (!e) return wgml_last_status(g->ctx);
    uint64_t slot = gpu_get_caps(g->ctx)->storage_align;
    if (slot < 256) slot = 256;
    if (!e->unused && !(e->unused = gpu_buffer_get(g->ctx, slot * GRAPH_MAX_BINDINGS, "unused bindings")))
        return wgml_last_status(g->ctx);
    *r = (gpu_range){e->unused, slot * (uint64_t)b, slot};
    return WGML_OK;
}

static const wgml_tensor *base_of(const wgml_tensor *t) { return t->base ? t->base : t; }

/* Whether a and b may lie in one buffer: tensors with their own buffer (persistent ones, and
 * every tensor of the eager graph) when they are the same buffer; intermediates of a built
 * graph always (they are placed in the arenas at compile). */
static bool may_share_buffer(const wgml_tensor *a, const wgml_tensor *b) {
    if (a->persistent != b->persistent) return false;
    return !a->persistent || a->buf == b->buf;
}

/* Whether a and b (views of one base, or the same tensor) have bytes in common. */
static bool tensors_overlap(const wgml_tensor *a, const wgml_tensor *b) {
    if (base_of(a) != base_of(b)) return false;
    uint64_t oa = a->base ? a->view_offset : 0, ob = b->base ? b->view_offset : 0;
    return oa < ob + tensor_binding_size(b) && ob < oa + tensor_binding_size(a);
}

/* Binds a copy in place of each read-only binding that would break WebGPU's aliasing rule:
 * one that overlaps another binding of the dispatch when either is writable, or when the
 * dispatch may take the all-writable form (some read-only and some writable binding may share
 * a buffer). Repeats until no pair is left, since a copy (a new intermediate) can bring on the
 * all-writable form. Two overlapping writable bindings are the op's error; the check reports
 * them. */
static wgml_status copy_aliased(wgml_graph *g, const char *op, wgml_tensor **t, int n_ro, int n_rw) {
    int nb = n_ro + n_rw;
    for (bool changed = true; changed;) {
        changed = false;
        bool all_writable = false; /* whether the dispatch may take the all-writable form */
        for (int a = 0; a < n_ro && !all_writable; a++)
            for (int b = n_ro; b < nb; b++)
                if (t[a] != GRAPH_UNUSED && t[b] != GRAPH_UNUSED && may_share_buffer(t[a], t[b])) all_writable = true;
        for (int j = 0; j < nb && !changed; j++)
            for (int i = 0; i < j && !changed; i++) {
                if (t[i] == GRAPH_UNUSED || t[j] == GRAPH_UNUSED || !tensors_overlap(t[i], t[j])) continue;
                if (!all_writable && i < n_ro && j < n_ro) continue;
                int c = j < n_ro ? j : i < n_ro ? i : -1;
                if (c < 0) continue;
                wgml_tensor *src = t[c];
                wgml_tensor *dup = graph_output(g, op, src->dtype, src->rank, src->shape);
                if (!dup) return wgml_last_status(g->ctx);
                uint64_t words = tensor_binding_size(src) / 4;
                uint32_t params[4] = {(uint32_t)words, 0, 0, 0};
                wgml_status s = graph_dispatch(g, op, "graph_copy", NULL, &src, 1, &dup, 1, params, sizeof params,
                                               (words + 255) / 256);
                if (s) {
                    wgml_tensor_free(dup);
                    return s;
                }
                t[c] = dup;
                changed = true;
            }
    }
    return WGML_OK;
}

/* Appends the node of one dispatch over the final bindings t[0..n_ro + n_rw). */
static wgml_status push_dispatch(wgml_graph *g, const char *op, const char *shader, const char *prelude,
                                 wgml_tensor *const *t, int n_ro, int n_rw, const void *uniform, size_t ubytes,
                                 uint32_t x, uint32_t y) {
    graph_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.shader = shader;
    n.n_ro = n_ro;
    n.n_rw = n_rw;
    n.x = x;
    n.y = y;
    n.ubytes = (uint32_t)ubytes;
    if (ubytes) memcpy(n.uniform, uniform, ubytes);
    wgml_status s;
    for (int i = 0; i < n_ro + n_rw; i++) {
        n.t[i] = t[i];
        if (t[i] == GRAPH_UNUSED) {
            if ((s = unused_range(g, i, &n.r[i]))) return s;
        } else {
            n.r[i] = (gpu_range){t[i]->buf, t[i]->offset, tensor_binding_size(t[i])};
        }
    }
    n.pipeline = gpu_pipeline_get(g->ctx, shader, prelude, n_ro, n_rw, ubytes > 0, false);
    if (!n.pipeline) return wgml_last_status(g->ctx);
    n.prelude = strdup(prelude ? prelude : "");
    if (!n.prelude) return wgml_set_error(g->ctx, WGML_ERR_OOM, "out of host memory");
    if (g->eager) /* eager nodes keep ranges only: their tensors may be freed before the flush */
        for (int i = 0; i < n_ro + n_rw; i++) n.t[i] = NULL;
    s = push_node(g, &n);
    if (s) free(n.prelude);
    return s;
}

wgml_status graph_dispatch(wgml_graph *g, const char *op, const char *shader, const char *prelude,
                           wgml_tensor *const *ro, int n_ro, wgml_tensor *const *rw, int n_rw,
                           const void *uniform, size_t ubytes, uint64_t workgroups) {
    wgml_ctx *ctx = g->ctx;
    if (g->compiled) return wgml_set_error(ctx, WGML_ERR_STATE, "%s: the graph is already compiled", op);
    if (n_ro + n_rw + (ubytes ? 1 : 0) > GRAPH_MAX_BINDINGS || ubytes > GRAPH_MAX_UNIFORM)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: too many bindings or uniform bytes", op);
    if (workgroups == 0) return WGML_OK;
    const gpu_caps *caps = gpu_get_caps(ctx);
    uint64_t maxd = caps->max_wg_per_dim;
    uint64_t x = workgroups < maxd ? workgroups : maxd;
    uint64_t y = (workgroups + x - 1) / x;
    if (y > maxd)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %llu workgroups is more than one dispatch can hold", op,
                              (unsigned long long)workgroups);
    wgml_tensor *bound[GRAPH_MAX_BINDINGS];
    for (int i = 0; i < n_ro + n_rw; i++) {
        wgml_tensor *t = i < n_ro ? ro[i] : rw[i - n_ro];
        if (!t || (t != GRAPH_UNUSED && t->graph != g))
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: binding %d is %s", op, i,
                                  t ? "a tensor of another graph" : "NULL");
        bound[i] = t;
    }
    wgml_status s = copy_aliased(g, op, bound, n_ro, n_rw);
    if (!s) s = push_dispatch(g, op, shader, prelude, bound, n_ro, n_rw, uniform, ubytes, (uint32_t)x, (uint32_t)y);
    /* the copies made for this dispatch: an eager one goes back to the pool (the recorded
     * dispatches hold its range) */
    if (g->eager)
        for (int i = 0; i < n_ro; i++)
            if (bound[i] != ro[i]) wgml_tensor_free(bound[i]);
    if (!s && g->eager && g->n_nodes >= EAGER_BATCH) return eager_flush(g);
    return s;
}

/* ------------------------------------------------------------------ running */

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* WebGPU's aliasing rule, checked when $WGML_CHECK_ALIASING is set: within one dispatch a
 * writable storage binding may not overlap any other storage binding of the same buffer, and a
 * buffer may not be bound both read-only and writable (one usage scope). wgpu-native does not
 * validate this, Dawn and browsers do; the check makes the lax implementation strict. It runs
 * where ranges are final (a built graph's compile, the eager flush), never per run. */
static wgml_status check_aliasing(wgml_graph *g, const graph_node *n, bool all_writable) {
    int nb = n->n_ro + n->n_rw;
    for (int a = 0; a < nb; a++)
        for (int b = a + 1; b < nb; b++) {
            const gpu_range *ra = &n->r[a], *rb = &n->r[b];
            if (ra->buf != rb->buf) continue;
            bool wa = all_writable || a >= n->n_ro, wb = all_writable || b >= n->n_ro;
            bool overlap = ra->offset < rb->offset + rb->size && rb->offset < ra->offset + ra->size;
            if ((wa || wb) && (overlap || wa != wb))
                return wgml_set_error(
                    g->ctx, WGML_ERR_STATE,
                    "%s: aliasing (%s graph): kernel '%s'%s binds one buffer at binding %d [%llu, %llu) %s and "
                    "binding %d [%llu, %llu) %s; %s",
                    n->op, g->eager ? "eager" : "built", n->shader, all_writable ? " (all-writable form)" : "", a,
                    (unsigned long long)ra->offset, (unsigned long long)(ra->offset + ra->size),
                    wa ? "writable" : "read-only", b, (unsigned long long)rb->offset,
                    (unsigned long long)(rb->offset + rb->size), wb ? "writable" : "read-only",
                    overlap ? "WebGPU forbids a writable binding that overlaps another binding in one dispatch"
                            : "WebGPU forbids one buffer read-only and writable in one dispatch");
        }
    return WGML_OK;
}

/* Uniforms of all nodes in one buffer, bind groups, dispatch list. Ranges must be resolved. */
static wgml_status make_dispatches(wgml_graph *g, gpu_buffer **uniforms_out, gpu_dispatch **out) {
    wgml_ctx *ctx = g->ctx;
    uint64_t ua = gpu_get_caps(ctx)->uniform_align;
    if (ua < 16) ua = 16;
    uint64_t ubytes = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].ubytes) ubytes += align_up(g->nodes[i].ubytes, ua);
    gpu_buffer *ubuf = NULL;
    uint8_t *host = NULL;
    wgml_status s = WGML_OK;
    if (ubytes) {
        ubuf = gpu_uniform_create(ctx, ubytes);
        host = calloc(1, (size_t)ubytes);
        if (!ubuf || !host) {
            gpu_buffer_release(ubuf);
            free(host);
            return ubuf ? wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory") : wgml_last_status(ctx);
        }
    }
    gpu_dispatch *d = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *d);
    if (!d) {
        gpu_buffer_release(ubuf);
        free(host);
        return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    }
    uint64_t uoff = 0;
    size_t i = 0;
    for (; i < g->n_nodes; i++) {
        graph_node *n = &g->nodes[i];
        int nb = n->n_ro + n->n_rw;
        gpu_range r[GRAPH_MAX_BINDINGS];
        memcpy(r, n->r, sizeof(gpu_range) * (size_t)nb);
        if (n->ubytes) {
            memcpy(host + uoff, n->uniform, n->ubytes);
            r[nb++] = (gpu_range){ubuf, uoff, align_up(n->ubytes, 16)};
            uoff += align_up(n->ubytes, ua);
        }
        /* one buffer bound read-only and writable in one dispatch is invalid: use the
         * all-writable form of the kernel then */
        bool conflict = false;
        for (int a = 0; a < n->n_ro && !conflict; a++)
            for (int b = n->n_ro; b < n->n_ro + n->n_rw; b++)
                if (n->r[a].buf == n->r[b].buf) conflict = true;
        gpu_pipeline *p = n->pipeline;
        if (conflict) p = gpu_pipeline_get(ctx, n->shader, n->prelude, n->n_ro, n->n_rw, n->ubytes > 0, true);
        if (!p) {
            s = wgml_last_status(ctx);
            break;
        }
        if (g->check_aliasing && (s = check_aliasing(g, n, conflict))) break;
        d[i].pipeline = p;
        d[i].bind_group = gpu_bind_group_create(ctx, p, r, nb);
        if (!d[i].bind_group) {
            s = wgml_last_status(ctx);
            wgml_set_error(ctx, s, "%s: %s", n->op, wgml_last_error(ctx));
            break;
        }
        d[i].x = n->x;
        d[i].y = n->y;
        d[i].z = 1;
    }
    if (!s && ubytes) s = gpu_write(ctx, ubuf, 0, host, ubytes);
    free(host);
    if (s) {
        for (size_t j = 0; j < i; j++) gpu_bind_group_release(d[j].bind_group);
        free(d);
        gpu_buffer_release(ubuf);
        return s;
    }
    *uniforms_out = ubuf;
    *out = d;
    return WGML_OK;
}

static wgml_status eager_flush(wgml_graph *g) {
    wgml_status s = gpu_check_alive(g->ctx);
    if (s || g->n_nodes == 0) {
        clear_nodes(g);
        return s;
    }
    gpu_buffer *ubuf = NULL;
    gpu_dispatch *d = NULL;
    s = make_dispatches(g, &ubuf, &d);
    if (!s) s = gpu_submit(g->ctx, d, g->n_nodes, NULL);
    if (d)
        for (size_t i = 0; i < g->n_nodes; i++) gpu_bind_group_release(d[i].bind_group);
    free(d);
    gpu_buffer_release(ubuf); /* the submitted work keeps what it uses alive */
    clear_nodes(g);
    return s;
}

wgml_status wgml_sync(wgml_ctx *ctx) {
    if (!ctx) return WGML_ERR_ARG;
    wgml_graph *g = wgml_eager(ctx);
    wgml_status s = g ? eager_flush(g) : wgml_last_status(ctx);
    return s ? s : gpu_wait_idle(ctx);
}

/* Liveness-based placement of the graph's intermediate tensors in arenas: tensors are placed
 * in order of first use, each at the lowest offset of the first arena where no live tensor
 * occupies it and where it ends below the arena cap (the device's buffer size limit, or
 * $WGML_ARENA_BYTES); a tensor that fits in no arena opens a new one. Every tensor lies inside
 * one arena, so none straddles a buffer or a binding. */
typedef struct placed {
    uint64_t lo, hi;
    int last_use;
} placed;

typedef struct arena_plan {
    placed *live; /* sorted by offset */
    size_t n_live;
    uint64_t size;
} arena_plan;

#define MAX_ARENAS 64

static uint64_t arena_cap(wgml_ctx *ctx, uint64_t align) {
    uint64_t cap = gpu_get_caps(ctx)->max_buffer_size;
    const char *env = getenv("WGML_ARENA_BYTES");
    if (env && strtoull(env, NULL, 0) > 0 && strtoull(env, NULL, 0) < cap) cap = strtoull(env, NULL, 0);
    return cap / align * align;
}

/* Lowest offset in a where [at, at + size) meets no tensor live at `first`; UINT64_MAX when
 * it would end past cap. Drops the tensors that died before `first`: a tensor is live through
 * its last use, so an input whose last use is dispatch i keeps its bytes from the outputs that
 * i writes (in the all-writable form two overlapping bindings of one dispatch break WebGPU's
 * aliasing rule). */
static uint64_t arena_fit(arena_plan *a, int first, uint64_t size, uint64_t cap) {
    size_t k = 0;
    for (size_t j = 0; j < a->n_live; j++)
        if (a->live[j].last_use >= first) a->live[k++] = a->live[j];
    a->n_live = k;
    uint64_t at = 0;
    for (size_t j = 0; j < a->n_live; j++) {
        if (a->live[j].lo >= at + size) break;
        if (a->live[j].hi > at) at = a->live[j].hi;
    }
    return at + size <= cap ? at : UINT64_MAX;
}

static void arena_put(arena_plan *a, placed p) {
    size_t b = a->n_live++;
    while (b > 0 && a->live[b - 1].lo > p.lo) {
        a->live[b] = a->live[b - 1];
        b--;
    }
    a->live[b] = p;
    if (p.hi > a->size) a->size = p.hi;
}

/* Each tensor's first and last dispatch (a view counts as a use of its base). */
static void mark_uses(wgml_graph *g) {
    for (wgml_tensor *t = g->tensors; t; t = t->next) t->first_use = t->last_use = -1;
    for (size_t i = 0; i < g->n_nodes; i++)
        for (int b = 0; b < g->nodes[i].n_ro + g->nodes[i].n_rw; b++) {
            wgml_tensor *t = g->nodes[i].t[b];
            if (t == GRAPH_UNUSED) continue;
            if (t->base) t = t->base;
            if (t->first_use < 0) t->first_use = (int)i;
            t->last_use = (int)i;
        }
}

/* The intermediates (neither persistent nor views) into order, *n of them, sorted by first use;
 * kept ones, and ones made but never used, live throughout. order holds room for all. */
static void order_intermediates(wgml_graph *g, wgml_tensor **order, size_t *n_out) {
    size_t n = 0;
    for (wgml_tensor *t = g->tensors; t; t = t->next)
        if (!t->persistent && !t->base) {
            if (t->keep || t->first_use < 0) { /* kept, or made but never used: live throughout */
                if (t->first_use < 0) t->first_use = 0;
                t->last_use = (int)g->n_nodes;
            }
            order[n++] = t;
        }
    /* insertion sort by first use (stable; graphs are built in order, so nearly sorted) */
    for (size_t i = 1; i < n; i++) {
        wgml_tensor *t = order[i];
        size_t j = i;
        while (j > 0 && order[j - 1]->first_use > t->first_use) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = t;
    }
    *n_out = n;
}

/* First fit of the n ordered intermediates into the arenas of plans (opening a new one, of at
 * most cap bytes, when none has room), setting each tensor's arena and offset. */
static wgml_status place_intermediates(wgml_ctx *ctx, wgml_tensor **order, size_t n, uint64_t align, uint64_t cap,
                                       arena_plan *plans, int *n_plans) {
    for (size_t i = 0; i < n; i++) {
        wgml_tensor *t = order[i];
        uint64_t size = align_up(tensor_binding_size(t), align), at = UINT64_MAX;
        int a = 0;
        for (; a < *n_plans; a++)
            if ((at = arena_fit(&plans[a], t->first_use, size, cap)) != UINT64_MAX) break;
        if (a == *n_plans) { /* a new arena */
            if (*n_plans == MAX_ARENAS || size > cap)
                return wgml_set_error(ctx, WGML_ERR_LIMIT,
                                      "graph compile: the intermediates need more than %d arenas of %llu bytes",
                                      MAX_ARENAS, (unsigned long long)cap);
            plans[*n_plans].live = calloc(n, sizeof(placed));
            if (!plans[*n_plans].live) return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
            (*n_plans)++;
            at = 0;
        }
        t->arena = a;
        t->offset = at;
        arena_put(&plans[a], (placed){at, at + size, t->last_use});
    }
    return WGML_OK;
}

/* One buffer per planned arena, in g->arenas (g->n_arenas of them made, g->arena_bytes in all). */
static wgml_status make_arenas(wgml_graph *g, const arena_plan *plans, int n_plans) {
    wgml_ctx *ctx = g->ctx;
    wgml_status s = WGML_OK;
    g->arena_bytes = 0;
    if (!n_plans) return WGML_OK;
    g->arenas = calloc((size_t)n_plans, sizeof *g->arenas);
    if (!g->arenas) s = wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    for (int a = 0; !s && a < n_plans; a++) {
        g->arenas[a] = gpu_buffer_get(ctx, plans[a].size, "graph arena");
        if (!g->arenas[a]) s = wgml_last_status(ctx);
        else g->n_arenas++;
        g->arena_bytes += plans[a].size;
    }
    return s;
}

/* Each tensor's buffer and offset (intermediates in their arena, views in their base's range),
 * then each dispatch's binding ranges. */
static void bind_ranges(wgml_graph *g) {
    for (wgml_tensor *t = g->tensors; t; t = t->next)
        if (!t->persistent && !t->base) t->buf = g->arenas[t->arena];
    for (wgml_tensor *t = g->tensors; t; t = t->next)
        if (t->base) {
            t->buf = t->base->buf;
            t->offset = t->base->offset + t->view_offset;
        }
    for (size_t i = 0; i < g->n_nodes; i++)
        for (int b = 0; b < g->nodes[i].n_ro + g->nodes[i].n_rw; b++) {
            wgml_tensor *t = g->nodes[i].t[b];
            if (t != GRAPH_UNUSED) g->nodes[i].r[b] = (gpu_range){t->buf, t->offset, tensor_binding_size(t)};
        }
}

static wgml_status plan_memory(wgml_graph *g) {
    wgml_ctx *ctx = g->ctx;
    uint64_t align = gpu_get_caps(ctx)->storage_align;
    if (align < 256) align = 256;
    uint64_t cap = arena_cap(ctx, align);
    mark_uses(g);
    size_t n = 0;
    for (wgml_tensor *t = g->tensors; t; t = t->next)
        if (!t->persistent && !t->base) n++;
    wgml_tensor **order = calloc(n ? n : 1, sizeof *order);
    arena_plan plans[MAX_ARENAS];
    memset(plans, 0, sizeof plans);
    int n_plans = 0;
    if (!order) return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    order_intermediates(g, order, &n);
    wgml_status s = place_intermediates(ctx, order, n, align, cap, plans, &n_plans);
    free(order);
    if (!s) s = make_arenas(g, plans, n_plans);
    else g->arena_bytes = 0;
    for (int a = 0; a < n_plans; a++) free(plans[a].live);
    if (s) return s;
    bind_ranges(g);
    return WGML_OK;
}

wgml_status wgml_graph_compile(wgml_graph *g) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "wgml_graph_compile: graph is NULL");
    if (g->eager) return wgml_set_error(g->ctx, WGML_ERR_STATE, "wgml_graph_compile: the eager graph runs by itself");
    if (g->compiled) return WGML_OK;
    wgml_status s = gpu_check_alive(g->ctx);
    if (s) return s;
    if ((s = plan_memory(g)) || (s = make_dispatches(g, &g->uniforms, &g->dispatches))) {
        release_compiled(g);
        for (wgml_tensor *t = g->tensors; t; t = t->next)
            if (!t->persistent) t->buf = NULL;
        return s;
    }
    g->n_dispatches = g->n_nodes;
    g->compiled = true;
    return WGML_OK;
}

wgml_status wgml_graph_run(wgml_graph *g) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "wgml_graph_run: graph is NULL");
    if (!g->compiled) return wgml_set_error(g->ctx, WGML_ERR_STATE, "wgml_graph_run: compile the graph first");
    return gpu_submit(g->ctx, g->dispatches, g->n_dispatches, NULL);
}

wgml_status wgml_graph_run_timed(wgml_graph *g, double *seconds) {
    if (!g || !seconds) return wgml_set_error(g ? g->ctx : NULL, WGML_ERR_ARG, "wgml_graph_run_timed: NULL argument");
    if (!g->compiled) return wgml_set_error(g->ctx, WGML_ERR_STATE, "wgml_graph_run_timed: compile the graph first");
    return gpu_submit(g->ctx, g->dispatches, g->n_dispatches, seconds);
}

gpu_async *graph_run_async(wgml_graph *g, size_t repeat, wgml_tensor *out, uint64_t byte_offset, uint64_t bytes,
                           bool timed) {
    if (!g || !g->compiled || !out || !out->persistent || out->graph != g || byte_offset + bytes > out->nbytes ||
        repeat == 0) {
        wgml_set_error(g ? g->ctx : NULL, WGML_ERR_ARG,
                       "graph_run_async: needs a compiled graph, a persistent tensor of it and a range inside it");
        return NULL;
    }
    return gpu_submit_async(g->ctx, g->dispatches, g->n_dispatches, repeat, out->buf, out->offset + byte_offset, bytes,
                            timed);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

wgml_status wgml_graph_benchmark(wgml_graph *g, double warmup_s, int runs, double *best, double *median) {
    if (!g || runs < 1 || runs > 1000)
        return wgml_set_error(g ? g->ctx : NULL, WGML_ERR_ARG, "wgml_graph_benchmark: NULL graph or runs outside 1..1000");
    double t = 0, *times = malloc(sizeof(double) * (size_t)runs);
    if (!times) return wgml_set_error(g->ctx, WGML_ERR_OOM, "out of host memory");
    wgml_status s = WGML_OK;
    /* keep the GPU busy until its clocks have ramped up (an idle GPU sits at a fraction of its
     * clock, and one short run is over before it speeds up) */
    uint64_t start = gpu_now_ns();
    do {
        s = wgml_graph_run_timed(g, &t);
    } while (!s && (double)(gpu_now_ns() - start) * 1e-9 < warmup_s);
    for (int i = 0; !s && i < runs; i++) s = wgml_graph_run_timed(g, &times[i]);
    if (!s) {
        qsort(times, (size_t)runs, sizeof *times, cmp_double);
        if (best) *best = times[0];
        if (median) *median = times[runs / 2];
    }
    free(times);
    return s;
}

wgml_status wgml_graph_profile(wgml_graph *g, double *seconds) {
    if (!g || !seconds) return wgml_set_error(g ? g->ctx : NULL, WGML_ERR_ARG, "wgml_graph_profile: NULL argument");
    if (!g->compiled) return wgml_set_error(g->ctx, WGML_ERR_STATE, "wgml_graph_profile: compile the graph first");
    return gpu_submit_profile(g->ctx, g->dispatches, g->n_dispatches, seconds);
}

const char *wgml_graph_dispatch_name(const wgml_graph *g, size_t i, const char **shader) {
    if (!g || i >= g->n_nodes) return NULL;
    if (shader) *shader = g->nodes[i].shader;
    return g->nodes[i].op;
}

size_t wgml_graph_dispatch_count(const wgml_graph *g) { return g ? g->n_nodes : 0; }
uint64_t wgml_graph_arena_bytes(const wgml_graph *g) { return g ? g->arena_bytes : 0; }
int wgml_graph_arena_count(const wgml_graph *g) { return g ? g->n_arenas : 0; }
