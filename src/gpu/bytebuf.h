/* A growable byte buffer: the one every layer uses to build a text or a file in memory (the
 * kernels' WGSL, a chat prompt, a GGUF file). The bytes stay NUL-terminated, so a text reads as
 * a string. A failed allocation sets oom and drops every later put; the owner checks oom once,
 * at the end, and frees p either way. */
#ifndef WGML_GPU_BYTEBUF_H
#define WGML_GPU_BYTEBUF_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct bytebuf {
    char *p;
    size_t n, cap;
    bool oom;
} bytebuf;

static inline void bytebuf_put(bytebuf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = 0;
}

static inline void bytebuf_str(bytebuf *b, const char *s) { bytebuf_put(b, s, strlen(s)); }

#endif
