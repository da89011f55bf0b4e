/* Shared by the fused cross-entropy (cross_entropy.c) and the fused LM head + cross-entropy
 * (lmhead_ce.c). */
#ifndef WGML_OPS_CROSS_ENTROPY_H
#define WGML_OPS_CROSS_ENTROPY_H
#include "graph/graph.h"
/* Eager graph only: reads the labels back and names the first one >= vocab (false, error set). */
bool train_ce_check_labels(wgml_ctx *ctx, const char *op, wgml_tensor *labels, int64_t vocab);
/* The wgml_ce_options tensors (either may be NULL): grad_scale f32 of one element, status i32
 * [3], both on like's graph. false with the error set (naming op and the argument) otherwise. */
bool train_ce_check_options(wgml_ctx *ctx, const char *op, wgml_tensor *like, wgml_tensor *scale, wgml_tensor *status);
/* One dispatch of ce_sum: stats (i32 [3]: labels >= vocab, the first such row or -1,
 * n_valid) from the labels, and loss[0] = sum of row_loss [R] in a fixed order / n_valid (0 when
 * n_valid is 0). */
wgml_status train_ce_finish(wgml_graph *g, const char *op, wgml_tensor *row_loss, wgml_tensor *labels, int64_t vocab,
                            wgml_tensor *stats, wgml_tensor *loss);
#endif
