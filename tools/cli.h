/* Helpers the CLI's subcommands share (cli.c): option values checked with a message naming the
 * command, the option and the value, and directories made with their parents. */
#ifndef WGML_TOOLS_CLI_H
#define WGML_TOOLS_CLI_H
#include <stdint.h>

/* v as an integer in [lo, hi] into *out: 0, or 1 after "CMD: OPT needs an integer in [lo, hi],
 * got 'V'" on stderr. */
int cli_need_int(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out);
/* v as a number in [lo, hi] (never NaN) into *out: 0, or 1 after the same kind of message. */
int cli_need_num(const char *cmd, const char *opt, const char *v, double lo, double hi, double *out);
/* mkdir -p: creates path and any missing parents; 0, or -1 with errno set. */
int cli_make_dirs(const char *path);
#endif
