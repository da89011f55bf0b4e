/* Recording: graph_dispatch appends one node per dispatch (its kernel's pipeline, its binding
 * ranges or tensors, its uniform bytes). Before that it binds a copy (graph_copy.wgsl) in place
 * of any read-only binding that would break WebGPU's aliasing rule, and gives GRAPH_UNUSED
 * slots ranges of their own. The eager graph submits once EAGER_BATCH nodes are pending;
 * graph_run.c turns nodes into dispatches. */
#define _POSIX_C_SOURCE 200809L
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

wgml_tensor graph_unused_binding;

#define EAGER_BATCH 256 /* pending dispatches at which the eager graph submits */

void graph_clear_nodes(wgml_graph *g) {
    for (size_t i = 0; i < g->n_nodes; i++) free(g->nodes[i].prelude);
    g->n_nodes = 0;
}

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

/* Whether the dispatch over t[0..n_ro + n_rw) may bind one buffer both read-only and writable,
 * and so take its kernel's all-writable form: some read-only and some writable binding that may
 * share a buffer (two GRAPH_UNUSED slots do: both lie in the context's unused buffer). Exact for
 * the eager graph; for a built graph, whose intermediates share an arena unless the graph
 * outgrows one, the compile checks it against the final ranges. */
static bool may_take_all_writable(wgml_tensor *const *t, int n_ro, int n_rw) {
    for (int a = 0; a < n_ro; a++)
        for (int b = n_ro; b < n_ro + n_rw; b++) {
            bool ua = t[a] == GRAPH_UNUSED, ub = t[b] == GRAPH_UNUSED;
            if (ua || ub ? ua && ub : may_share_buffer(t[a], t[b])) return true;
        }
    return false;
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
        bool all_writable = may_take_all_writable(t, n_ro, n_rw);
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
    /* only the form the dispatch will take is created (Dawn compiles at creation) */
    n.all_writable = may_take_all_writable(t, n_ro, n_rw);
    n.pipeline = gpu_pipeline_get(g->ctx, shader, prelude, n_ro, n_rw, ubytes > 0, n.all_writable, !g->eager);
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
    if (!s && g->eager && g->n_nodes >= EAGER_BATCH) return graph_eager_flush(g);
    return s;
}
