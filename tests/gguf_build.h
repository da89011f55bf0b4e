/* A tiny GGUF writer for the C tests: builds a file's bytes in memory (little-endian). */
#ifndef WGML_TEST_GGUF_BUILD_H
#define WGML_TEST_GGUF_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
} gb;

static inline void gb_put(gb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void gb_u8(gb *b, uint8_t v) { gb_put(b, &v, 1); }
static inline void gb_u32(gb *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    gb_put(b, x, 4);
}
static inline void gb_u64(gb *b, uint64_t v) {
    gb_u32(b, (uint32_t)v);
    gb_u32(b, (uint32_t)(v >> 32));
}
static inline void gb_f32(gb *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    gb_u32(b, u);
}
static inline void gb_str(gb *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}
static inline void gb_header(gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    gb_put(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}
static inline void gb_pad(gb *b, size_t align) {
    while (b->n % align) gb_u8(b, 0);
}
static inline int gb_write(const gb *b, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(b->p, 1, b->n, f) == b->n;
    return fclose(f) == 0 && ok;
}

#endif
