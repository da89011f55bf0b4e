/* The matmul family's record function for other families' fused ops (no checks, no autograd
 * record): O[m, n] = a[m, k] · op(b) (+ O when accumulate) written into the existing f32
 * tensor `into` ([m, n] contiguous). trans_b = 1: b is [n, k] (a·bᵀ); 0: b is [k, n].
 * The caller has validated the operands (f32, one graph, shapes). */
#ifndef WGML_MATMUL_INTO_H
#define WGML_MATMUL_INTO_H
#include "graph/graph.h"
wgml_status matmul_record_into(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_b, int64_t m,
                               int64_t n, int64_t k, wgml_tensor *into, bool accumulate);
#endif
