/* The tape of a built graph: the op records (graph_op, recorded by each differentiable op
 * with graph_record_op) and the trainable leaves. It belongs to the graph layer, which the ops
 * record into; the backward engine (src/autograd/) walks it. */
#ifndef WGML_GRAPH_TAPE_H
#define WGML_GRAPH_TAPE_H

#include "graph/graph.h"

typedef struct graph_tape {
    graph_op *ops;
    size_t n, cap;
    wgml_tensor **leaves;
    size_t n_leaves, cap_leaves;
    bool building; /* inside wgml_backward: ops record no gradient */
    bool done;     /* wgml_backward ran: later ops (optimizer) record nothing */
} graph_tape;

/* g's tape; with create, made on first use. NULL when there is none (or, with create, when
 * memory runs out). */
graph_tape *graph_tape_get(wgml_graph *g, bool create);
/* The checks of the autograd entry points (fn names the caller): t is in a built graph that
 * is not compiled and whose backward has not run. Makes the tape. */
wgml_status graph_tape_check(const char *fn, wgml_tensor *t);

#endif
