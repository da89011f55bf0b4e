/* Running: turning recorded nodes into dispatches (one uniform buffer, the bind groups, the
 * aliasing check), the eager graph's flush and wgml_sync, a built graph's compile (the
 * liveness-based memory plan of its intermediates in arenas) and its runs, timings and
 * introspection. */
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

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

/* The uniform bytes of all nodes, each at a multiple of ua: the buffer *ubuf and its host
 * image *host, both of *ubytes bytes (none when no node has a uniform). */
static wgml_status make_uniforms(wgml_graph *g, uint64_t ua, uint64_t *ubytes, gpu_buffer **ubuf, uint8_t **host) {
    wgml_ctx *ctx = g->ctx;
    uint64_t n = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].ubytes) n += align_up(g->nodes[i].ubytes, ua);
    *ubytes = n;
    *ubuf = NULL;
    *host = NULL;
    if (!n) return WGML_OK;
    gpu_buffer *buf = gpu_uniform_create(ctx, n);
    uint8_t *img = calloc(1, (size_t)n);
    if (!buf || !img) {
        gpu_buffer_release(buf);
        free(img);
        return buf ? wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory") : wgml_last_status(ctx);
    }
    *ubuf = buf;
    *host = img;
    return WGML_OK;
}

/* Whether node n binds one buffer both read-only and writable. */
static bool needs_all_writable(const graph_node *n) {
    for (int a = 0; a < n->n_ro; a++)
        for (int b = n->n_ro; b < n->n_ro + n->n_rw; b++)
            if (n->r[a].buf == n->r[b].buf) return true;
    return false;
}

/* Node n's dispatch in *d: its ranges (its uniform copied into host at *uoff, which moves on by
 * its size rounded up to ua), its pipeline and its bind group. */
static wgml_status node_dispatch(wgml_graph *g, const graph_node *n, gpu_buffer *ubuf, uint8_t *host, uint64_t ua,
                                 uint64_t *uoff, gpu_dispatch *d) {
    wgml_ctx *ctx = g->ctx;
    int nb = n->n_ro + n->n_rw;
    gpu_range r[GRAPH_MAX_BINDINGS];
    memcpy(r, n->r, sizeof(gpu_range) * (size_t)nb);
    if (n->ubytes) {
        memcpy(host + *uoff, n->uniform, n->ubytes);
        r[nb++] = (gpu_range){ubuf, *uoff, align_up(n->ubytes, 16)};
        *uoff += align_up(n->ubytes, ua);
    }
    /* one buffer bound read-only and writable in one dispatch is invalid: the all-writable form
     * of the kernel then. The form recorded is a prediction for a built graph (its
     * intermediates' arenas were not known); the other is created only when it was wrong. */
    bool conflict = needs_all_writable(n);
    gpu_pipeline *p = n->pipeline;
    if (conflict != n->all_writable)
        p = gpu_pipeline_get(ctx, n->shader, n->prelude, n->n_ro, n->n_rw, n->ubytes > 0, conflict, false);
    if (!p) return wgml_last_status(ctx);
    wgml_status s;
    if (g->check_aliasing && (s = check_aliasing(g, n, conflict))) return s;
    d->pipeline = p;
    d->bind_group = gpu_bind_group_create(ctx, p, r, nb);
    if (!d->bind_group) {
        s = wgml_last_status(ctx);
        wgml_set_error(ctx, s, "%s: %s", n->op, wgml_last_error(ctx));
        return s;
    }
    d->x = n->x;
    d->y = n->y;
    d->z = 1;
    return WGML_OK;
}

/* Uniforms of all nodes in one buffer, bind groups, dispatch list. Ranges must be resolved. */
static wgml_status make_dispatches(wgml_graph *g, gpu_buffer **uniforms_out, gpu_dispatch **out) {
    wgml_ctx *ctx = g->ctx;
    uint64_t ua = gpu_get_caps(ctx)->uniform_align;
    if (ua < 16) ua = 16;
    uint64_t ubytes;
    gpu_buffer *ubuf;
    uint8_t *host;
    wgml_status s = make_uniforms(g, ua, &ubytes, &ubuf, &host);
    if (s) return s;
    gpu_dispatch *d = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *d);
    if (!d) {
        gpu_buffer_release(ubuf);
        free(host);
        return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    }
    uint64_t uoff = 0;
    size_t i = 0;
    for (; i < g->n_nodes; i++)
        if ((s = node_dispatch(g, &g->nodes[i], ubuf, host, ua, &uoff, &d[i]))) break;
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

wgml_status graph_eager_flush(wgml_graph *g) {
    wgml_status s = gpu_check_alive(g->ctx);
    if (s || g->n_nodes == 0) {
        graph_clear_nodes(g);
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
    graph_clear_nodes(g);
    return s;
}

wgml_status wgml_sync(wgml_ctx *ctx) {
    if (!ctx) return WGML_ERR_ARG;
    wgml_graph *g = wgml_eager(ctx);
    wgml_status s = g ? graph_eager_flush(g) : wgml_last_status(ctx);
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

/* Undoes a compile: the bind groups, the uniform buffer and the arenas go; the nodes stay. */
void graph_release_compiled(wgml_graph *g) {
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

wgml_status wgml_graph_compile(wgml_graph *g) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "wgml_graph_compile: graph is NULL");
    if (g->eager) return wgml_set_error(g->ctx, WGML_ERR_STATE, "wgml_graph_compile: the eager graph runs by itself");
    if (g->compiled) return WGML_OK;
    wgml_status s = gpu_check_alive(g->ctx);
    if (s) return s;
    if ((s = plan_memory(g)) || (s = make_dispatches(g, &g->uniforms, &g->dispatches))) {
        graph_release_compiled(g);
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

uint64_t wgml_graph_dispatch_detail(const wgml_graph *g, size_t i, uint32_t *words, size_t n) {
    for (size_t w = 0; words && w < n; w++) {
        words[w] = 0;
        if (g && i < g->n_nodes && (w + 1) * 4 <= g->nodes[i].ubytes) memcpy(&words[w], g->nodes[i].uniform + w * 4, 4);
    }
    return g && i < g->n_nodes ? (uint64_t)g->nodes[i].x * g->nodes[i].y : 0;
}

size_t wgml_graph_dispatch_count(const wgml_graph *g) { return g ? g->n_nodes : 0; }
uint64_t wgml_graph_arena_bytes(const wgml_graph *g) { return g ? g->arena_bytes : 0; }
int wgml_graph_arena_count(const wgml_graph *g) { return g ? g->n_arenas : 0; }
