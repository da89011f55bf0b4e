/* The matmul family's choice of kernel variant and split-K factor for a problem, as
 * matmul_record makes it (forced variant, $WGML_MATMUL_VARIANT, $WGML_MATMUL_SPLITK, else the
 * automatic rules); for the benchmark's report. */
#ifndef WGML_MATMUL_PLAN_H
#define WGML_MATMUL_PLAN_H

#include "wgml.h"

#include <stdint.h>

/* *variant: index into the variant table (wgml_matmul_variant_name); *splits: K slices (1: none).
 * trans_a / trans_b: the operands' storage (A stored [K, M], B stored [N, K]), which the skinny
 * kernel's choice reads (nonzero: transposed). */
void matmul_plan(wgml_ctx *ctx, int64_t batch, int64_t m, int64_t n, int64_t k, int trans_a, int trans_b,
                 int *variant, int *splits);

#endif
