/* A 4-bit weight of one graph used in another: its tensors shared (views, no copies). */
#include "ops/q4/q4_share.h"

wgml_status q4_weight_share(wgml_graph *g, const wgml_q4_weight *w, wgml_q4_weight *out) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "q4_weight_share: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    if (!w || !out) return wgml_set_error(ctx, WGML_ERR_ARG, "q4_weight_share: weight or out is NULL");
    *out = *w;
    out->codes = wgml_tensor_share(g, w->codes);
    out->ab = out->codes ? wgml_tensor_share(g, w->ab) : NULL;
    out->bias = w->bias && out->ab ? wgml_tensor_share(g, w->bias) : NULL;
    if (out->ab && (!w->bias || out->bias)) return WGML_OK;
    out->codes = out->ab = out->bias = NULL;
    return wgml_last_status(ctx) ? wgml_last_status(ctx) : wgml_set_error(ctx, WGML_ERR_ARG, "q4_weight_share: a share failed");
}
