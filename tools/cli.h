/* Helpers the CLI's subcommands share: option values checked with a message naming the command,
 * the option and the value, and directories made with their parents (cli.c); the held-out loss
 * of wgml eval and wgml finetune (eval.c). */
#ifndef WGML_TOOLS_CLI_H
#define WGML_TOOLS_CLI_H
#include "wgml-train.h"

#include <stdint.h>

/* v as an integer in [lo, hi] into *out: 0, or 1 after "CMD: OPT needs an integer in [lo, hi],
 * got 'V'" on stderr. */
int cli_need_int(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out);
/* v as a number in [lo, hi] (never NaN) into *out: 0, or 1 after the same kind of message. */
int cli_need_num(const char *cmd, const char *opt, const char *v, double lo, double hi, double *out);
/* mkdir -p: creates path and any missing parents; 0, or -1 with errno set. */
int cli_make_dirs(const char *path);
/* The mean next-token loss of the trainer's model over the held-out rows of ds, up to
 * max_tokens labels' worth of rows, batch rows at a time; the labels counted into *n_tokens
 * (when not NULL). NaN after a message on stderr when the evaluation fails or counts no label. */
double cli_evaluate(wgml_trainer *t, wgml_dataset *ds, int batch, int64_t max_tokens, wgml_ctx *ctx, int64_t *n_tokens);
#endif
