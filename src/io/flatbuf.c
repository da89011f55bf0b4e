/* The verifying flatbuffer reader (see flatbuf.h for the rules it checks).
 *
 * Layout reminders (all little-endian): a buffer starts with a uoffset (u32) to the root table,
 * optionally followed by a 4-byte file identifier. A table starts with an soffset (i32): its
 * vtable is at table - soffset. A vtable is u16 vtable size, u16 table size, then one u16 per
 * field slot: the field's offset from the table start, 0 when absent (slots past the vtable's
 * size are absent too). A field holding a table, vector or string holds a uoffset relative to
 * the field's own position. A vector is a u32 count then the elements; a string a u32 length,
 * the bytes and a NUL. Positions are kept as uint64_t so no sum of two 32-bit values can wrap. */
#include "io/flatbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void fb_init(fb_ctx *c, const uint8_t *buf, uint64_t size, uint64_t base, const char *prefix, char *err,
             size_t errlen) {
    *c = (fb_ctx){
        .buf = buf,
        .size = size,
        .base = base,
        .prefix = prefix,
        .err = err,
        .errlen = errlen,
        .budget = 2 * size + 4096,
    };
}

wgml_status fb_fail(const fb_ctx *c, uint64_t off, const char *fmt, ...) {
    if (c->err && c->errlen) {
        char what[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(c->err, c->errlen, "%s: %s at file offset %llu", c->prefix, what,
                 (unsigned long long)(c->base + off));
    }
    return WGML_ERR_FORMAT;
}

wgml_status fb_spend(fb_ctx *c, uint64_t n, uint64_t off, const char *what) {
    if (n > c->budget)
        return fb_fail(c, off,
                       "%s: decoding needs more than %llu tables and elements for a buffer of %llu bytes "
                       "(tables or vectors shared by many offsets?)",
                       what, (unsigned long long)(2 * c->size + 4096), (unsigned long long)c->size);
    c->budget -= n;
    return WGML_OK;
}

wgml_status fb_table_at(fb_ctx *c, uint64_t pos, int depth, const char *what, fb_table *out) {
    if (depth > FB_MAX_DEPTH) return fb_fail(c, pos, "%s: tables nested deeper than %d", what, FB_MAX_DEPTH);
    if (pos > c->size || c->size - pos < 4)
        return fb_fail(c, pos, "%s: table at %llu outside the %llu-byte buffer", what, (unsigned long long)pos,
                       (unsigned long long)c->size);
    wgml_status s = fb_spend(c, 1, pos, what);
    if (s) return s;
    int32_t so = (int32_t)fb_rd32(c->buf + pos);
    int64_t vt = (int64_t)pos - (int64_t)so;
    if (vt < 0 || (uint64_t)vt > c->size || c->size - (uint64_t)vt < 4)
        return fb_fail(c, pos, "%s: vtable at %lld (soffset %d) outside the %llu-byte buffer", what, (long long)vt,
                       so, (unsigned long long)c->size);
    uint32_t vt_size = fb_rd16(c->buf + vt), tsize = fb_rd16(c->buf + vt + 2);
    if (vt_size < 4 || (vt_size & 1))
        return fb_fail(c, (uint64_t)vt, "%s: vtable size %u is not an even number >= 4", what, vt_size);
    if (c->size - (uint64_t)vt < vt_size)
        return fb_fail(c, (uint64_t)vt, "%s: vtable of %u bytes at %lld runs past the %llu-byte buffer", what,
                       vt_size, (long long)vt, (unsigned long long)c->size);
    if (tsize < 4) return fb_fail(c, (uint64_t)vt, "%s: table size %u is less than 4", what, tsize);
    if (c->size - pos < tsize)
        return fb_fail(c, pos, "%s: table of %u bytes at %llu runs past the %llu-byte buffer", what, tsize,
                       (unsigned long long)pos, (unsigned long long)c->size);
    *out = (fb_table){.pos = pos, .vt = (uint64_t)vt, .vt_size = vt_size, .size = tsize, .depth = depth};
    return WGML_OK;
}

wgml_status fb_root(fb_ctx *c, const char *ident, const char *what, fb_table *out) {
    uint64_t need = ident ? 8 : 4;
    if (c->size < need)
        return fb_fail(c, 0, "%s: %llu bytes is too short for a flatbuffer (needs %llu)", what,
                       (unsigned long long)c->size, (unsigned long long)need);
    if (ident && memcmp(c->buf + 4, ident, 4) != 0) {
        char got[5] = {0};
        for (int i = 0; i < 4; i++) {
            unsigned char ch = c->buf[4 + i];
            got[i] = (char)(ch >= 32 && ch < 127 ? ch : '?');
        }
        return fb_fail(c, 4, "%s: file identifier '%s' is not '%s'", what, got, ident);
    }
    uint32_t root = fb_rd32(c->buf);
    if (root > c->size || c->size - root < 4)
        return fb_fail(c, 0, "%s: root offset %u outside the %llu-byte buffer", what, root, (unsigned long long)c->size);
    return fb_table_at(c, root, 0, what, out);
}

wgml_status fb_field(const fb_ctx *c, const fb_table *t, unsigned field, uint32_t fsize, const char *what,
                     uint64_t *pos) {
    *pos = 0;
    uint64_t slot = 4 + 2 * (uint64_t)field;
    if (slot + 2 > t->vt_size) return WGML_OK;
    uint32_t o = fb_rd16(c->buf + t->vt + slot);
    if (!o) return WGML_OK;
    if ((uint64_t)o + fsize > t->size)
        return fb_fail(c, t->pos, "%s: field of %u bytes at +%u runs past its table of %u bytes", what, fsize, o,
                       t->size);
    *pos = t->pos + o;
    return WGML_OK;
}

/* Reads an absent-or-present scalar field of n bytes into *raw. */
static wgml_status scalar(const fb_ctx *c, const fb_table *t, unsigned field, uint32_t n, const char *what,
                          uint64_t *raw, bool *present) {
    uint64_t p;
    wgml_status s = fb_field(c, t, field, n, what, &p);
    if (s) return s;
    *present = p != 0;
    if (!p) return WGML_OK;
    *raw = n == 1 ? c->buf[p] : n == 2 ? fb_rd16(c->buf + p) : n == 4 ? fb_rd32(c->buf + p) : fb_rd64(c->buf + p);
    return WGML_OK;
}

#define FB_SCALAR(NAME, T, N, CONV)                                                                        \
    wgml_status NAME(const fb_ctx *c, const fb_table *t, unsigned field, T def, const char *what, T *v) {  \
        uint64_t raw = 0;                                                                                  \
        bool present;                                                                                      \
        wgml_status s = scalar(c, t, field, N, what, &raw, &present);                                      \
        if (s) return s;                                                                                   \
        *v = present ? CONV : def;                                                                         \
        return WGML_OK;                                                                                    \
    }

static double f64_of(uint64_t raw) {
    double d;
    memcpy(&d, &raw, sizeof d);
    return d;
}

FB_SCALAR(fb_u8, uint8_t, 1, (uint8_t)raw)
FB_SCALAR(fb_i8, int8_t, 1, (int8_t)(uint8_t)raw)
FB_SCALAR(fb_u32, uint32_t, 4, (uint32_t)raw)
FB_SCALAR(fb_i32, int32_t, 4, (int32_t)(uint32_t)raw)
FB_SCALAR(fb_u64, uint64_t, 8, raw)
FB_SCALAR(fb_i64, int64_t, 8, (int64_t)raw)
FB_SCALAR(fb_f64, double, 8, f64_of(raw))

wgml_status fb_bool(const fb_ctx *c, const fb_table *t, unsigned field, const char *what, bool *v) {
    uint8_t u;
    wgml_status s = fb_u8(c, t, field, 0, what, &u);
    if (s) return s;
    *v = u != 0;
    return WGML_OK;
}

/* Follows the uoffset at position p: its target, with at least `room` bytes there. */
static wgml_status follow(const fb_ctx *c, uint64_t p, uint64_t room, const char *what, uint64_t *target) {
    uint64_t to = p + fb_rd32(c->buf + p);
    if (to > c->size || c->size - to < room)
        return fb_fail(c, p, "%s: offset to %llu outside the %llu-byte buffer", what, (unsigned long long)to,
                       (unsigned long long)c->size);
    *target = to;
    return WGML_OK;
}

wgml_status fb_table_field(fb_ctx *c, const fb_table *t, unsigned field, const char *what, fb_table *out,
                           bool *present) {
    uint64_t p = 0, to = 0;
    wgml_status s = fb_field(c, t, field, 4, what, &p);
    if (s) return s;
    *present = p != 0;
    if (!p) return WGML_OK;
    if ((s = follow(c, p, 4, what, &to))) return s;
    return fb_table_at(c, to, t->depth + 1, what, out);
}

/* The string at position to (its length word). */
static wgml_status string_at(const fb_ctx *c, uint64_t to, const char *what, const char **str, uint32_t *len) {
    uint32_t n = fb_rd32(c->buf + to);
    /* bytes [to+4, to+4+n) and the NUL at to+4+n must be inside the buffer */
    if (c->size - to - 4 < (uint64_t)n + 1)
        return fb_fail(c, to, "%s: string of %u bytes runs past the %llu-byte buffer", what, n,
                       (unsigned long long)c->size);
    if (c->buf[to + 4 + n] != 0) return fb_fail(c, to, "%s: string of %u bytes is not NUL-terminated", what, n);
    *str = (const char *)c->buf + to + 4;
    *len = n;
    return WGML_OK;
}

wgml_status fb_string_field(const fb_ctx *c, const fb_table *t, unsigned field, const char *what, const char **s,
                            uint32_t *len, bool *present) {
    uint64_t p = 0, to = 0;
    *s = "";
    *len = 0;
    if (present) *present = false;
    wgml_status st = fb_field(c, t, field, 4, what, &p);
    if (st || !p) return st;
    if ((st = follow(c, p, 4, what, &to))) return st;
    if ((st = string_at(c, to, what, s, len))) return st;
    if (present) *present = true;
    return WGML_OK;
}

/* The vector at position to (its count word). */
static wgml_status vector_at(const fb_ctx *c, uint64_t to, uint32_t elem, const char *what, fb_vec *v) {
    uint32_t n = fb_rd32(c->buf + to);
    if ((uint64_t)n * elem > c->size - to - 4)
        return fb_fail(c, to, "%s: vector of %u elements of %u bytes runs past the %llu-byte buffer", what, n, elem,
                       (unsigned long long)c->size);
    *v = (fb_vec){.pos = to + 4, .n = n, .elem = elem};
    return WGML_OK;
}

wgml_status fb_vector_field(const fb_ctx *c, const fb_table *t, unsigned field, uint32_t elem, const char *what,
                            fb_vec *v, bool *present) {
    uint64_t p = 0, to = 0;
    *v = (fb_vec){.elem = elem};
    if (present) *present = false;
    wgml_status s = fb_field(c, t, field, 4, what, &p);
    if (s || !p) return s;
    if ((s = follow(c, p, 4, what, &to))) return s;
    if ((s = vector_at(c, to, elem, what, v))) return s;
    if (present) *present = true;
    return WGML_OK;
}

wgml_status fb_union_field(fb_ctx *c, const fb_table *t, unsigned field, const char *what, uint8_t *type,
                           fb_table *val) {
    wgml_status s = fb_u8(c, t, field, 0, what, type);
    if (s || *type == 0) return s;
    bool present;
    if ((s = fb_table_field(c, t, field + 1, what, val, &present))) return s;
    if (!present) return fb_fail(c, t->pos, "%s: union of type %u has no value", what, *type);
    return WGML_OK;
}

wgml_status fb_vec_table(fb_ctx *c, const fb_vec *v, uint32_t i, int depth, const char *what, fb_table *out) {
    uint64_t p = v->pos + (uint64_t)i * 4, to = 0;
    wgml_status s = follow(c, p, 4, what, &to);
    if (s) return s;
    return fb_table_at(c, to, depth, what, out);
}

wgml_status fb_vec_string(const fb_ctx *c, const fb_vec *v, uint32_t i, const char *what, const char **s,
                          uint32_t *len) {
    uint64_t p = v->pos + (uint64_t)i * 4, to = 0;
    wgml_status st = follow(c, p, 4, what, &to);
    if (st) return st;
    return string_at(c, to, what, s, len);
}

uint64_t fb_vec_raw(const fb_ctx *c, const fb_vec *v, uint32_t i) {
    const uint8_t *p = c->buf + v->pos + (uint64_t)i * v->elem;
    switch (v->elem) {
    case 1: return p[0];
    case 2: return fb_rd16(p);
    case 4: return fb_rd32(p);
    default: return fb_rd64(p);
    }
}
