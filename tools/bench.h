/* The benchmark subcommands of the wgml CLI. */
#ifndef WGML_TOOLS_BENCH_H
#define WGML_TOOLS_BENCH_H
#include "wgml.h"

int bench_main(wgml_ctx *ctx, int argc, char **argv);       /* bench.c: dispatch, matmul, generate */
int bench_ops_main(wgml_ctx *ctx, int argc, char **argv);   /* bench_ops.c */
int bench_lmhead_main(wgml_ctx *ctx, int argc, char **argv); /* bench_lmhead.c */
int bench_train_main(wgml_ctx *ctx, int argc, char **argv); /* bench_train.c */
double bench_wall_now(void);                                /* monotonic seconds */
#endif
