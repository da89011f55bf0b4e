/* A 4-bit weight of one graph used in another (qw_share.c). */
#ifndef WGML_QW_SHARE_H
#define WGML_QW_SHARE_H
#include "graph/graph.h"

/* *out = w with its tensors (codes, ab and the bias when w has one) shared into g with
 * wgml_tensor_share: a model keeps its weights in one graph and every graph that runs uses
 * them this way. The error is on g's context, *out's tensors NULL, when a share fails. */
wgml_status qw_weight_share(wgml_graph *g, const wgml_qweight *w, wgml_qweight *out);

/* Whether rows [r0, r0 + n) of w can be a weight of their own (qw_weight_rows): inside w and
 * starting at storage-aligned offsets of its tensors. */
bool qw_weight_rows_fit(wgml_ctx *ctx, const wgml_qweight *w, int64_t r0, int64_t n);
/* Whether rows from r0 on of the weight wgml_qweight_upload_gguf makes of GGUF type `type` with K = k
 * would start at storage-aligned offsets (qw_weight_rows_fit before the upload). */
bool qw_gguf_rows_fit(wgml_ctx *ctx, int type, int64_t k, int64_t r0);
/* A new weight (free with wgml_qweight_free) whose tensors are views of rows [r0, r0 + n) of w's
 * (codes, (a, b) and the bias when w has one), in w's graph: a model loads weights that share
 * an input as one (qw_concat.h) and each part is this. NULL with the error set when the rows do
 * not fit. */
wgml_qweight *qw_weight_rows(const wgml_qweight *w, int64_t r0, int64_t n);

#endif
