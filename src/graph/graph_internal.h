/* Private to src/graph/: the graph struct, its recorded dispatch nodes, and the helpers that
 * graph.c (lifetime, tensors), graph_record.c (recording) and graph_run.c (eager flush,
 * compile, memory plan, runs) share. Ops and the layers above include graph/graph.h only. */
#ifndef WGML_GRAPH_INTERNAL_H
#define WGML_GRAPH_INTERNAL_H

#include "graph/graph.h"

typedef struct graph_derive {
    const wgml_tensor *src;
    uint64_t key;
    wgml_tensor *t;
} graph_derive;

typedef struct graph_node {
    const char *op;
    const char *shader;
    char *prelude;
    gpu_pipeline *pipeline; /* the kernel's form chosen at record (all_writable) */
    bool all_writable;
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
    bool x8;             /* graph_set_x8 */
    graph_derive *derived; /* graph_derived_set's records */
    size_t n_derived, cap_derived;
};

/* graph_record.c: frees the recorded nodes' preludes and empties the node list (its room stays). */
void graph_clear_nodes(wgml_graph *g);

/* graph_run.c: submits the eager graph's pending dispatches (many per submit) and clears them. */
wgml_status graph_eager_flush(wgml_graph *g);
/* graph_run.c: undoes a compile (bind groups, uniforms, arenas); the nodes stay. */
void graph_release_compiled(wgml_graph *g);

#endif
