/* The caller's error buffer of the file readers and writers (GGUF writer, safetensors) and of
 * the layers above that read and write files (tokenizer, checkpoints): errbuf_set formats the
 * message into err (at most errlen bytes, always terminated) and returns s, so that a failing
 * path reads `return errbuf_set(err, errlen, WGML_ERR_IO, "...", ...)`. A NULL err (or errlen 0)
 * means the caller wants no message; the status still comes back. */
#ifndef WGML_ERRBUF_H
#define WGML_ERRBUF_H

#include "wgml.h"

#include <stdarg.h>
#include <stdio.h>

/* errbuf_set with the arguments as a va_list (for wrappers that add their own context). */
static inline wgml_status errbuf_vset(char *err, size_t errlen, wgml_status s, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static inline wgml_status errbuf_vset(char *err, size_t errlen, wgml_status s, const char *fmt, va_list ap) {
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    return s;
}

static inline wgml_status errbuf_set(char *err, size_t errlen, wgml_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline wgml_status errbuf_set(char *err, size_t errlen, wgml_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    errbuf_vset(err, errlen, s, fmt, ap);
    va_end(ap);
    return s;
}

#endif
