/* A 4-bit weight of one graph used in another (q4_share.c). */
#ifndef WGML_Q4_SHARE_H
#define WGML_Q4_SHARE_H
#include "graph/graph.h"

/* *out = w with its tensors (codes, ab and the bias when w has one) shared into g with
 * wgml_tensor_share: a model keeps its weights in one graph and every graph that runs uses
 * them this way. The error is on g's context, *out's tensors NULL, when a share fails. */
wgml_status q4_weight_share(wgml_graph *g, const wgml_q4_weight *w, wgml_q4_weight *out);

/* Whether rows [r0, r0 + n) of w can be a weight of their own (q4_weight_rows): inside w and
 * starting at storage-aligned offsets of its tensors. */
bool q4_weight_rows_fit(wgml_ctx *ctx, const wgml_q4_weight *w, int64_t r0, int64_t n);
/* Whether rows from r0 on of the weight wgml_q4_upload_gguf makes of GGUF type `type` with K = k
 * would start at storage-aligned offsets (q4_weight_rows_fit before the upload). */
bool q4_gguf_rows_fit(wgml_ctx *ctx, int type, int64_t k, int64_t r0);
/* A new weight (free with wgml_q4_free) whose tensors are views of rows [r0, r0 + n) of w's
 * (codes, (a, b) and the bias when w has one), in w's graph: a model loads weights that share
 * an input as one (q4_concat.h) and each part is this. NULL with the error set when the rows do
 * not fit. */
wgml_q4_weight *q4_weight_rows(const wgml_q4_weight *w, int64_t r0, int64_t n);

#endif
