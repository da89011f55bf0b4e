/* The launch side of wg_reduce.wgsl, the workgroup tree of the kernels that give each row its
 * own workgroup (norms and their backward, reduce_rows/pairs, softmax and its backward, ce_rows,
 * lmhead_ce, attn_bwd_soft). */
#ifndef WGML_OPS_REDUCE_WG_REDUCE_H
#define WGML_OPS_REDUCE_WG_REDUCE_H
#include <stdint.h>

/* Threads of the workgroup that owns a row of n loads (vec4 or scalar): 32..256, doubled while
 * each thread keeps at least 8 loads. One rule for every row kernel, so a row of a given length
 * gets the same tree whichever op reduces it. */
static inline uint32_t row_workgroup(uint64_t n) {
    uint32_t wg = 32;
    while (wg < 256 && (uint64_t)wg * 8 <= n) wg *= 2;
    return wg;
}
#endif
