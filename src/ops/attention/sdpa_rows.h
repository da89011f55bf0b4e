/* The attention family's internal entry point for inference graphs: causal cached attention
 * (wgml_sdpa_cached with causal = 1 when window is 0, else wgml_sdpa_cached_window) returning
 * its output as [B, Sq, Hq, D], the rows the o projection reads ([B*Sq, Hq*D] after a reshape),
 * instead of [B, Hq, Sq, D]. The kernel (or the merge of split keys) writes that layout itself,
 * so no permute follows it. Checked as the public ops are, errors naming them; no autograd
 * record. */
#ifndef WGML_SDPA_ROWS_H
#define WGML_SDPA_ROWS_H
#include "graph/graph.h"
wgml_tensor *sdpa_cached_rows(wgml_graph *g, wgml_tensor *q, wgml_tensor *k_cache, wgml_tensor *v_cache,
                              wgml_tensor *len, int64_t window, float scale);
/* The merge of split attention's key chunks (attn_combine.wgsl): part f32 [rows, n_split, D + 2]
 * (per row and chunk the D unnormalised sums, the max m in log2 units and the sum l) into out
 * [rows, D], n = rows * D; with row layout (Hkv, G, Sq) the rows go to attn_rows.wgsl's layout. */
wgml_status attn_combine(wgml_graph *g, const char *op, wgml_tensor *part, wgml_tensor *out, int64_t n, int64_t D,
                         int64_t n_split, bool row_layout, int64_t Hkv, int64_t G, int64_t Sq);
#endif
