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
#endif
