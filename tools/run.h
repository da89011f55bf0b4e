/* The `run` subcommand of the wgml CLI: ExecuTorch programs (run.c). */
#ifndef WGML_TOOLS_RUN_H
#define WGML_TOOLS_RUN_H
#include "wgml.h"

/* ctx may be NULL only for --help. Returns the process exit code. */
int run_main(wgml_ctx *ctx, int argc, char **argv);
#endif
