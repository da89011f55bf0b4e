/* A small verifying flatbuffer reader (host only), for the ExecuTorch program and the Vulkan
 * delegate graph (src/io/pte.c). No schema compiler: the caller names tables and fields by
 * their vtable slot (the field's position in the schema, a union taking two slots: its type,
 * then its value).
 *
 * Every access is checked before it reads: a table's soffset, its vtable (inside the buffer,
 * even size >= 4, its own size and the table's size inside the buffer), each field (inside
 * the table as the vtable sizes it), each uoffset (its target inside the buffer, with room for
 * what is there), each vector (count × element size inside the buffer, 64-bit arithmetic) and
 * each string (its bytes and the NUL after them inside the buffer). Tables are reached by
 * forward offsets only, so a walk cannot loop; nesting is also capped (FB_MAX_DEPTH), and
 * the number of tables visited plus vector elements decoded is capped by a budget set from
 * the buffer size, so that tables shared by many offsets cannot make the work or the memory
 * grow faster than the file.
 *
 * Errors are WGML_ERR_FORMAT with "<prefix>: <what>: <problem> at file offset N", where N is
 * the offset in the whole file (base + the offset in this buffer), so a nested flatbuffer
 * (the delegate graph inside the program) reports offsets of the file. */
#ifndef WGML_IO_FLATBUF_H
#define WGML_IO_FLATBUF_H

#include "wgml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FB_MAX_DEPTH 64

typedef struct fb_ctx {
    const uint8_t *buf;
    uint64_t size;
    uint64_t base;      /* file offset of buf[0], for messages */
    const char *prefix; /* start of every message, e.g. "pte" */
    char *err;
    size_t errlen;
    uint64_t budget;    /* tables + vector elements that may still be decoded */
} fb_ctx;

typedef struct fb_table {
    uint64_t pos;       /* of the table (its soffset) in the buffer */
    uint64_t vt;        /* of its vtable */
    uint32_t vt_size;   /* bytes of the vtable */
    uint32_t size;      /* bytes of the table's inline part */
    int depth;
} fb_table;

typedef struct fb_vec {
    uint64_t pos;       /* of the first element */
    uint32_t n;
    uint32_t elem;      /* bytes per element */
} fb_vec;

/* Sets up c over buf[0..size); budget: 2 × size + 4096. */
void fb_init(fb_ctx *c, const uint8_t *buf, uint64_t size, uint64_t base, const char *prefix, char *err,
             size_t errlen);

/* Formats "<prefix>: <message> at file offset <base + off>" into the context's error buffer
 * and returns WGML_ERR_FORMAT. */
wgml_status fb_fail(const fb_ctx *c, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Takes n units of the budget (a table, or n vector elements about to be decoded). */
wgml_status fb_spend(fb_ctx *c, uint64_t n, uint64_t off, const char *what);

/* The root table. ident (4 characters, or NULL): the file identifier that must follow the
 * root offset. what names the root table in messages. */
wgml_status fb_root(fb_ctx *c, const char *ident, const char *what, fb_table *out);

/* The table at buffer position pos (verified). */
wgml_status fb_table_at(fb_ctx *c, uint64_t pos, int depth, const char *what, fb_table *out);

/* Position of field slot `field` in the buffer, or 0 when absent; checks that fsize bytes of
 * it lie inside the table. */
wgml_status fb_field(const fb_ctx *c, const fb_table *t, unsigned field, uint32_t fsize, const char *what,
                     uint64_t *pos);

/* Scalars (little-endian), def when the field is absent. */
wgml_status fb_u8(const fb_ctx *c, const fb_table *t, unsigned field, uint8_t def, const char *what, uint8_t *v);
wgml_status fb_i8(const fb_ctx *c, const fb_table *t, unsigned field, int8_t def, const char *what, int8_t *v);
wgml_status fb_bool(const fb_ctx *c, const fb_table *t, unsigned field, const char *what, bool *v);
wgml_status fb_u32(const fb_ctx *c, const fb_table *t, unsigned field, uint32_t def, const char *what, uint32_t *v);
wgml_status fb_i32(const fb_ctx *c, const fb_table *t, unsigned field, int32_t def, const char *what, int32_t *v);
wgml_status fb_u64(const fb_ctx *c, const fb_table *t, unsigned field, uint64_t def, const char *what, uint64_t *v);
wgml_status fb_i64(const fb_ctx *c, const fb_table *t, unsigned field, int64_t def, const char *what, int64_t *v);
wgml_status fb_f64(const fb_ctx *c, const fb_table *t, unsigned field, double def, const char *what, double *v);

/* A sub-table field; *present false (and *out untouched) when absent. */
wgml_status fb_table_field(fb_ctx *c, const fb_table *t, unsigned field, const char *what, fb_table *out,
                           bool *present);
/* A string field: *s points at its bytes in the buffer (NUL-terminated there), *len its
 * length; absent: s = "", len = 0, *present false (present may be NULL). */
wgml_status fb_string_field(const fb_ctx *c, const fb_table *t, unsigned field, const char *what, const char **s,
                            uint32_t *len, bool *present);
/* A vector field with elem bytes per element; absent: n = 0 (present may be NULL). */
wgml_status fb_vector_field(const fb_ctx *c, const fb_table *t, unsigned field, uint32_t elem, const char *what,
                            fb_vec *v, bool *present);
/* A union: the type in slot field, the value table in slot field + 1. *type 0 (NONE) when
 * the type is absent; a type other than NONE without a value is an error. */
wgml_status fb_union_field(fb_ctx *c, const fb_table *t, unsigned field, const char *what, uint8_t *type,
                           fb_table *val);

/* Element i (< v->n) of a vector of tables / strings. */
wgml_status fb_vec_table(fb_ctx *c, const fb_vec *v, uint32_t i, int depth, const char *what, fb_table *out);
wgml_status fb_vec_string(const fb_ctx *c, const fb_vec *v, uint32_t i, const char *what, const char **s,
                          uint32_t *len);
/* Element i (< v->n) of a vector of scalars, as raw little-endian bits (1, 2, 4 or 8 bytes). */
uint64_t fb_vec_raw(const fb_ctx *c, const fb_vec *v, uint32_t i);

/* Little-endian loads from any address. */
static inline uint16_t fb_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t fb_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t fb_rd64(const uint8_t *p) { return (uint64_t)fb_rd32(p) | (uint64_t)fb_rd32(p + 4) << 32; }

#endif
