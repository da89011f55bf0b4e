/* Helpers the CLI's subcommands share (cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cli_need_int(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *e;
    errno = 0;
    long long x = strtoll(v, &e, 10);
    if (errno || *e || e == v || x < lo || x > hi) {
        fprintf(stderr, "%s: %s needs an integer in [%lld, %lld], got '%s'\n", cmd, opt, (long long)lo, (long long)hi, v);
        return 1;
    }
    *out = x;
    return 0;
}

int cli_need_num(const char *cmd, const char *opt, const char *v, double lo, double hi, double *out) {
    char *e;
    double x = strtod(v, &e);
    if (*e || e == v || !(x >= lo && x <= hi)) {
        fprintf(stderr, "%s: %s needs a number in [%g, %g], got '%s'\n", cmd, opt, lo, hi, v);
        return 1;
    }
    *out = x;
    return 0;
}

int cli_make_dirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = n ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        buf[i] = c;
    }
    /* the last mkdir may have met a file of that name: only a directory will do */
    struct stat st;
    if (stat(path, &st)) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}
