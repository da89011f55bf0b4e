/* Throughput probes (probe_peak.wgsl): kernels that do nothing but one kind of instruction, to
 * measure a device's peak rate for it (`wgml bench peak`); the floors that the kernels' accounts
 * in docs/PERFORMANCE.md compare against. Not ops: only the benchmark and its test use them. */
#ifndef WGML_PROBE_H
#define WGML_PROBE_H

#include "graph/graph.h"

typedef enum probe_kind { PROBE_FMA, PROBE_DOT4I8, PROBE_CVT, PROBE_CVT_BITS, PROBE_FMA_F16, PROBE_N } probe_kind;

#define PROBE_CHAINS 16
#define PROBE_MAX_ITERS 32768u

/* The kind's name and what one chain step counts as in its rate: 2 flops (an FMA), 8 integer
 * operations (4 multiply-adds), 1 conversion. */
const char *probe_name(probe_kind k);
double probe_ops_per_step(probe_kind k);
/* Whether the adapter runs kind k (the integer dot product needs WGSL's packed 4x8 feature, the
 * f16 FMA shader-f16). */
bool probe_supported(wgml_ctx *ctx, probe_kind k);
/* Records the probe over `threads` threads of `iters` steps (iters <= PROBE_MAX_ITERS): a U32
 * tensor [threads], each the bits of the thread's result (probe_expected). NULL with the
 * context's error set. */
wgml_tensor *probe_record(wgml_graph *g, probe_kind k, uint32_t threads, uint32_t iters);
/* Thread t's result, computed on the host as the kernel defines it. */
uint32_t probe_expected(probe_kind k, uint32_t t, uint32_t iters);

#endif
