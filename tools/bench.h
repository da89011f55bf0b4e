/* The benchmark subcommands of the wgml CLI. */
#ifndef WGML_TOOLS_BENCH_H
#define WGML_TOOLS_BENCH_H
#include "wgml.h"

int bench_main(wgml_ctx *ctx, int argc, char **argv);       /* bench.c: dispatch, matmul, generate */
int bench_ops_main(wgml_ctx *ctx, int argc, char **argv);   /* bench_ops.c */
int bench_peak_main(wgml_ctx *ctx, int argc, char **argv);  /* bench_peak.c */
int bench_lmhead_main(wgml_ctx *ctx, int argc, char **argv); /* bench_lmhead.c */
int bench_train_main(wgml_ctx *ctx, int argc, char **argv); /* bench_train.c */
int bench_attn_main(wgml_ctx *ctx, int argc, char **argv);  /* bench_attn.c */
int bench_attn_decode_main(wgml_ctx *ctx, int argc, char **argv); /* bench_attn_decode.c: attention --decode */
/* bench_qw.c: times the M = 1 decode shapes (effective GB/s) and the M = 512 GEMM (GFLOP/s)
 * with built graphs of repeated dispatches, each checked against a double-precision product on
 * sampled outputs; writes a table to out (a FILE*). mode 0: both; 1: the M = 1 shapes only; 2:
 * the training GEMMs (forward and input gradient at M = 4096 and 512, the LM head chunk) with
 * the tile variant and split-K count used ($WGML_QW_MM_VARIANT, $WGML_QW_MM_SPLITK). Returns 0
 * when all ran and passed. */
int bench_qw(wgml_ctx *ctx, void *out, int mode);
/* nd whole numbers in [lo, hi] joined by 'x' ("512x2048x64") at *p into dims, *p moved past
 * them: 1, or 0 (*p then undefined) when the text is not that. */
int bench_parse_dims(const char **p, int nd, long long lo, long long hi, int64_t *dims);
double bench_wall_now(void);                                /* monotonic seconds */
int bench_cpu_adapter(wgml_ctx *ctx);                       /* the adapter is a CPU (lavapipe, SwiftShader) */
float bench_frand(uint64_t *s);                             /* xorshift64 step: uniform in [-1, 1) */
int bench_cmp_double(const void *a, const void *b);         /* qsort order of doubles, ascending */
/* Profiles one run of compiled graph g (wgml_graph_profile) and prints the GPU time per
 * (op, kernel), largest first, with counts and shares; with $WGML_PROFILE_SHAPES=1 per (op,
 * kernel, workgroups, first four uniform words: a GEMM's sizes), 4 x top rows. Returns 0 or a
 * wgml status. */
int bench_profile_print(wgml_graph *g, const char *title, int top);
#endif
