/* Backward rule of wgml_sdpa, through wgml_sdpa_backward (sdpa_backward.c). */
#include "ops/attention/attention_grad.h"

#include <string.h>

typedef struct sdpa_attrs {
    int causal;
    float scale;
    int64_t window; /* 0: none (wgml_sdpa), else wgml_sdpa_window's */
} sdpa_attrs;

static wgml_status sdpa_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const sdpa_attrs *at = (const sdpa_attrs *)op->attrs;
    wgml_tensor *d[3] = {NULL, NULL, NULL}; /* the kernel makes all three; keep the wanted ones */
    if (at->window)
        wgml_sdpa_backward_window(g, op->in[0], op->in[1], op->in[2], op->out, dy, at->window, at->scale, &d[0], &d[1],
                                  &d[2]);
    else
        wgml_sdpa_backward(g, op->in[0], op->in[1], op->in[2], op->out, dy, at->causal, at->scale, &d[0], &d[1], &d[2]);
    for (int i = 0; i < 3; i++)
        if (graph_op_wants(op, i)) dx[i] = d[i];
    return grad_result(g, op, dx);
}

wgml_tensor *sdpa_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, int causal,
                              float scale, int64_t window) {
    graph_op op = {.name = "sdpa", .backward = sdpa_op_backward, .n_in = 3, .in = {q, k, v}, .out = out};
    sdpa_attrs at = {causal != 0, scale, window};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}
