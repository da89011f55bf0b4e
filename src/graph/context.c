/* The context as the public API sees it: wgml_ctx_create makes the device (the gpu layer's
 * gpu_device_create), then the graph layer's state for it (the eager graph and per-context op
 * settings); wgml_ctx_destroy undoes them the other way round. The last error stays on the
 * gpu layer's struct, where device errors are reported (see gpu/gpu_internal.h). */
#include "graph/graph.h"

#include <stdlib.h>

/* What the graph layer keeps per context, hung off the device with gpu_ctx_set_layer_state. */
typedef struct graph_ctx_state {
    wgml_graph *eager;  /* the context's eager graph (graph.c) */
    int matmul_variant; /* wgml_matmul_force_variant; -1: none (ops/matmul, ops/qweight read it) */
} graph_ctx_state;

wgml_status wgml_ctx_create(const wgml_ctx_options *options, wgml_ctx **out) {
    if (!out) return wgml_set_error(NULL, WGML_ERR_ARG, "wgml_ctx_create: out is NULL");
    *out = NULL;
    wgml_ctx *ctx = NULL;
    wgml_status s = gpu_device_create(options, &ctx);
    if (s) return s;
    graph_ctx_state *st = calloc(1, sizeof *st);
    if (!st) {
        gpu_device_destroy(ctx);
        return wgml_set_error(NULL, WGML_ERR_OOM, "out of host memory");
    }
    st->matmul_variant = -1;
    gpu_ctx_set_layer_state(ctx, st);
    if (!wgml_eager(ctx)) {
        wgml_ctx_destroy(ctx);
        return wgml_set_error(NULL, WGML_ERR_OOM, "out of host memory");
    }
    *out = ctx;
    return WGML_OK;
}

void wgml_ctx_destroy(wgml_ctx *ctx) {
    if (!ctx) return;
    graph_ctx_state *st = gpu_ctx_layer_state(ctx);
    if (st) {
        graph_eager_destroy(st->eager);
        free(st);
        gpu_ctx_set_layer_state(ctx, NULL);
    }
    gpu_device_destroy(ctx);
}

wgml_graph *graph_ctx_eager(const wgml_ctx *ctx) {
    graph_ctx_state *st = gpu_ctx_layer_state(ctx);
    return st ? st->eager : NULL;
}

void graph_ctx_set_eager(wgml_ctx *ctx, wgml_graph *g) {
    graph_ctx_state *st = gpu_ctx_layer_state(ctx);
    if (st) st->eager = g;
}

int graph_ctx_matmul_variant(const wgml_ctx *ctx) {
    graph_ctx_state *st = gpu_ctx_layer_state(ctx);
    return st ? st->matmul_variant : -1;
}

void wgml_matmul_force_variant(wgml_ctx *ctx, int v) {
    graph_ctx_state *st = ctx ? gpu_ctx_layer_state(ctx) : NULL;
    if (st) st->matmul_variant = v;
}
