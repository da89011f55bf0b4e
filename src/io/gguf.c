/* GGUF reader: maps the file read-only and validates the whole header (metadata and tensor
 * infos) at open, so that every later accessor works on checked offsets.
 *
 * Layout (little-endian): magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 kv count,
 * kv pairs (string key, u32 type, value), tensor infos (string name, u32 n_dims, u64 dims[],
 * u32 type, u64 offset), padding to general.alignment, then the data section.
 * A string is a u64 length and its bytes; an array is a u32 element type, a u64 count and the
 * elements. Every read checks the remaining size first (64-bit, no overflow); every count is
 * checked against the bytes its elements need at least before anything is allocated. */
#define _POSIX_C_SOURCE 200809L
#include "io/gguf.h"
#include "wgml-io.h"
#include "io/errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAX_DEPTH 32 /* nesting of arrays */
#define GGUF_MAX_DIMS 4

typedef struct gguf_kv {
    char *key;
    wgml_gguf_value v;
} gguf_kv;

struct wgml_gguf {
    char *path;
    const uint8_t *map;
    uint64_t size;
    uint32_t version;
    uint64_t alignment, data_offset;
    int64_t n_kv, n_tensors;
    gguf_kv *kv;
    wgml_gguf_tensor *tensors;
    /* element tables of arrays whose elements are strings or arrays */
    wgml_gguf_value *nodes;
    uint64_t n_nodes, cap_nodes;
    char err[512];
};

/* ---- parsing --------------------------------------------------------------------------- */

typedef struct cursor {
    wgml_gguf *f;
    uint64_t pos;
    char *err;
    size_t errlen;
} cursor;

static wgml_status fail(cursor *c, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static wgml_status fail(cursor *c, uint64_t off, const char *fmt, ...) {
    if (c->err && c->errlen) {
        char what[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(c->err, c->errlen, "gguf: %s: %s at offset %llu", c->f->path, what, (unsigned long long)off);
    }
    return WGML_ERR_FORMAT;
}

static uint64_t remaining(const cursor *c) { return c->f->size - c->pos; }

static wgml_status need(cursor *c, uint64_t n, const char *what) {
    if (n > remaining(c))
        return fail(c, c->pos, "truncated: %s needs %llu bytes, %llu left", what, (unsigned long long)n,
                    (unsigned long long)remaining(c));
    return WGML_OK;
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static wgml_status get_u32(cursor *c, uint32_t *v, const char *what) {
    wgml_status s = need(c, 4, what);
    if (s) return s;
    *v = rd32(c->f->map + c->pos);
    c->pos += 4;
    return WGML_OK;
}

static wgml_status get_u64(cursor *c, uint64_t *v, const char *what) {
    wgml_status s = need(c, 8, what);
    if (s) return s;
    *v = rd64(c->f->map + c->pos);
    c->pos += 8;
    return WGML_OK;
}

/* A string: sets *off to its bytes and *len; advances past it. */
static wgml_status get_str(cursor *c, uint64_t *off, uint64_t *len, const char *what) {
    uint64_t at = c->pos;
    wgml_status s = get_u64(c, len, what);
    if (s) return s;
    if (*len > remaining(c))
        return fail(c, at, "%s: string length %llu past the end of the file (%llu bytes left)", what,
                    (unsigned long long)*len, (unsigned long long)remaining(c));
    *off = c->pos;
    c->pos += *len;
    return WGML_OK;
}

static uint64_t scalar_size(uint32_t t) {
    switch (t) {
    case WGML_GGUF_U8: case WGML_GGUF_I8: case WGML_GGUF_BOOL: return 1;
    case WGML_GGUF_U16: case WGML_GGUF_I16: return 2;
    case WGML_GGUF_U32: case WGML_GGUF_I32: case WGML_GGUF_F32: return 4;
    case WGML_GGUF_U64: case WGML_GGUF_I64: case WGML_GGUF_F64: return 8;
    default: return 0;
    }
}

static int known_type(uint32_t t) { return t <= WGML_GGUF_F64; }

static wgml_status reserve_nodes(cursor *c, uint64_t n, uint64_t *base) {
    wgml_gguf *f = c->f;
    /* n is bounded by the file size (each element takes at least 8 bytes), so this cannot
     * overflow, but check anyway. */
    if (n > UINT64_MAX / 2 - f->n_nodes) return fail(c, c->pos, "too many array elements");
    uint64_t want = f->n_nodes + n;
    if (want > f->cap_nodes) {
        uint64_t cap = f->cap_nodes ? f->cap_nodes : 256;
        while (cap < want) cap *= 2;
        if (cap > SIZE_MAX / sizeof(wgml_gguf_value)) return fail(c, c->pos, "too many array elements");
        wgml_gguf_value *p = realloc(f->nodes, (size_t)cap * sizeof *p);
        if (!p) return fail(c, c->pos, "out of memory for %llu array elements", (unsigned long long)want);
        f->nodes = p;
        f->cap_nodes = cap;
    }
    *base = f->n_nodes;
    f->n_nodes = want;
    return WGML_OK;
}

/* Parses a value of type t at the cursor into *v. */
static wgml_status parse_value(cursor *c, uint32_t t, wgml_gguf_value *v, const char *key, int depth) {
    uint64_t at = c->pos;
    wgml_status s;
    v->type = (wgml_gguf_type)t;
    v->elem_type = 0;
    v->count = 0;
    v->index = -1;
    v->offset = at;
    if (!known_type(t)) return fail(c, at, "unknown value type %u (key '%s')", t, key);
    if (t == WGML_GGUF_STRING) return get_str(c, &v->offset, &v->count, key);
    if (t != WGML_GGUF_ARRAY) {
        s = need(c, scalar_size(t), key);
        if (s) return s;
        if (t == WGML_GGUF_BOOL && c->f->map[at] > 1)
            return fail(c, at, "bool value %u is neither 0 nor 1 (key '%s')", c->f->map[at], key);
        c->pos += scalar_size(t);
        return WGML_OK;
    }
    if (depth >= GGUF_MAX_DEPTH) return fail(c, at, "arrays nested deeper than %d (key '%s')", GGUF_MAX_DEPTH, key);
    uint32_t et;
    uint64_t n;
    if ((s = get_u32(c, &et, key)) || (s = get_u64(c, &n, key))) return s;
    if (!known_type(et)) return fail(c, at, "unknown array element type %u (key '%s')", et, key);
    v->elem_type = (wgml_gguf_type)et;
    v->count = n;
    /* the least bytes one element takes */
    uint64_t least = et == WGML_GGUF_STRING ? 8 : et == WGML_GGUF_ARRAY ? 12 : scalar_size(et);
    if (n > remaining(c) / least)
        return fail(c, at, "array count %llu of %s needs more than the %llu bytes left (key '%s')",
                    (unsigned long long)n, wgml_gguf_type_name(et), (unsigned long long)remaining(c), key);
    v->offset = c->pos;
    if (et != WGML_GGUF_STRING && et != WGML_GGUF_ARRAY) {
        c->pos += n * least;
        return WGML_OK;
    }
    uint64_t base = 0;
    if ((s = reserve_nodes(c, n, &base))) return s;
    v->index = (int64_t)base;
    for (uint64_t i = 0; i < n; i++) {
        wgml_gguf_value e;
        if ((s = parse_value(c, et, &e, key, depth + 1))) return s;
        c->f->nodes[base + i] = e;
    }
    return WGML_OK;
}

static uint64_t fnv_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static char *dup_bytes(const uint8_t *p, uint64_t n) {
    if (n >= SIZE_MAX) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    return s;
}

const char *wgml_gguf_type_name(wgml_gguf_type t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    if ((unsigned)t < sizeof names / sizeof names[0]) return names[t];
    return "unknown";
}

void wgml_gguf_close(wgml_gguf *f) {
    if (!f) return;
    if (f->map && f->size) munmap((void *)f->map, (size_t)f->size);
    for (int64_t i = 0; f->kv && i < f->n_kv; i++) free(f->kv[i].key);
    for (int64_t i = 0; f->tensors && i < f->n_tensors; i++) free((char *)f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(f->nodes);
    free(f->path);
    free(f);
}

/* Checks that no two names in a list are equal (hash table of indices). */
static int64_t find_duplicate(const char **names, int64_t n, int64_t *first) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap *= 2;
    int64_t *tab = malloc(cap * sizeof *tab);
    if (!tab) return -2;
    for (uint64_t i = 0; i < cap; i++) tab[i] = -1;
    int64_t dup = -1;
    for (int64_t i = 0; i < n && dup < 0; i++) {
        uint64_t h = fnv_str(names[i]) & (cap - 1);
        while (tab[h] >= 0) {
            if (!strcmp(names[tab[h]], names[i])) {
                dup = i;
                *first = tab[h];
                break;
            }
            h = (h + 1) & (cap - 1);
        }
        if (dup < 0) tab[h] = i;
    }
    free(tab);
    return dup;
}

/* Magic, version and the two counts (each checked against the bytes left), then the kv and
 * tensor tables. */
static wgml_status parse_header(cursor *c, uint64_t *nt, uint64_t *nkv) {
    wgml_gguf *f = c->f;
    wgml_status s;
    if (f->size < 4 || memcmp(f->map, "GGUF", 4) != 0)
        return fail(c, 0, f->size < 4 ? "truncated: no GGUF magic" : "bad magic (not a GGUF file)");
    c->pos = 4;
    if ((s = get_u32(c, &f->version, "version"))) return s;
    if (f->version != 2 && f->version != 3)
        return fail(c, 4, "unsupported GGUF version %u (2 and 3 are supported%s)", f->version,
                    f->version > 0xffff ? "; a big-endian file?" : "");
    if ((s = get_u64(c, nt, "tensor count")) || (s = get_u64(c, nkv, "metadata count"))) return s;
    /* a kv pair takes at least 8 (key) + 4 (type) + 1 bytes; a tensor info 8 + 4 + 8 + 4 + 8 */
    if (*nkv > remaining(c) / 13) return fail(c, 16, "metadata count %llu is more than the file can hold", (unsigned long long)*nkv);
    if (*nt > remaining(c) / 32) return fail(c, 8, "tensor count %llu is more than the file can hold", (unsigned long long)*nt);
    f->kv = calloc(*nkv ? *nkv : 1, sizeof *f->kv);
    f->tensors = calloc(*nt ? *nt : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) return fail(c, 8, "out of memory");
    return WGML_OK;
}

/* Metadata pair i: a non-empty key without NUL bytes, its type and value; general.alignment
 * must be a u32 power of two. */
static wgml_status parse_kv(cursor *c, uint64_t i) {
    wgml_gguf *f = c->f;
    wgml_status s;
    uint64_t at = c->pos, koff, klen;
    if ((s = get_str(c, &koff, &klen, "metadata key"))) return s;
    if (klen == 0) return fail(c, at, "metadata key %llu is empty", (unsigned long long)i);
    if (memchr(f->map + koff, 0, (size_t)klen)) return fail(c, at, "metadata key %llu holds a NUL byte", (unsigned long long)i);
    char *key = dup_bytes(f->map + koff, klen);
    if (!key) return fail(c, at, "out of memory");
    f->kv[i].key = key;
    f->n_kv = (int64_t)i + 1;
    uint32_t t;
    if ((s = get_u32(c, &t, key))) return s;
    if ((s = parse_value(c, t, &f->kv[i].v, key, 0))) return s;
    if (!strcmp(key, "general.alignment")) {
        if (t != WGML_GGUF_U32)
            return fail(c, at, "general.alignment has type %s, expected u32", wgml_gguf_type_name(t));
        uint32_t a = rd32(f->map + f->kv[i].v.offset);
        if (a == 0 || (a & (a - 1)))
            return fail(c, f->kv[i].v.offset, "general.alignment %u is not a power of two", a);
        f->alignment = a;
    }
    return WGML_OK;
}

/* The names of n entries, names[i] the string at byte `field` of the i-th `stride`-byte element
 * at base (the metadata keys, the tensor names): the index of the first that repeats an earlier
 * one (that one's into *first), -1 when all differ, -2 out of host memory. */
static int64_t repeated_name(const void *base, size_t stride, size_t field, uint64_t n, int64_t *first) {
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names) return -2;
    for (uint64_t i = 0; i < n; i++) memcpy(&names[i], (const char *)base + i * stride + field, sizeof names[i]);
    int64_t d = find_duplicate(names, (int64_t)n, first);
    free(names);
    return d;
}

static wgml_status check_unique_keys(cursor *c, uint64_t nkv) {
    wgml_gguf *f = c->f;
    int64_t first = -1, d = repeated_name(f->kv, sizeof *f->kv, offsetof(gguf_kv, key), nkv, &first);
    if (d == -2) return fail(c, c->pos, "out of memory");
    if (d >= 0) return fail(c, f->kv[d].v.offset, "duplicate metadata key '%s' (entries %lld and %lld)", f->kv[d].key, (long long)first, (long long)d);
    return WGML_OK;
}

/* Tensor info i: name without NUL bytes, 1..GGUF_MAX_DIMS dimensions whose product fits in
 * int64, type, an aligned data offset, and the byte size for the types whose size is known. */
static wgml_status parse_tensor_info(cursor *c, uint64_t i) {
    wgml_gguf *f = c->f;
    wgml_status s;
    wgml_gguf_tensor *t = &f->tensors[i];
    uint64_t at = c->pos, noff, nlen;
    if ((s = get_str(c, &noff, &nlen, "tensor name"))) return s;
    if (memchr(f->map + noff, 0, (size_t)nlen)) return fail(c, at, "tensor name %llu holds a NUL byte", (unsigned long long)i);
    t->name = dup_bytes(f->map + noff, nlen);
    if (!t->name) return fail(c, at, "out of memory");
    f->n_tensors = (int64_t)i + 1;
    uint32_t nd;
    if ((s = get_u32(c, &nd, t->name))) return s;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return fail(c, c->pos - 4, "tensor '%s' has %u dimensions (1..%d allowed)", t->name, nd, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t numel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->dims[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        if ((s = get_u64(c, &v, t->name))) return s;
        if (v > (uint64_t)INT64_MAX || (v && numel > (uint64_t)INT64_MAX / v))
            return fail(c, c->pos - 8, "tensor '%s' dimension %u (%llu) overflows the element count", t->name, d, (unsigned long long)v);
        t->dims[d] = (int64_t)v;
        numel *= v;
    }
    t->numel = (int64_t)numel;
    if ((s = get_u32(c, &t->type, t->name))) return s;
    if ((s = get_u64(c, &t->offset, t->name))) return s;
    if (t->offset % f->alignment)
        return fail(c, c->pos - 8, "tensor '%s' data offset %llu is not a multiple of the alignment %llu", t->name,
                    (unsigned long long)t->offset, (unsigned long long)f->alignment);
    uint64_t be, bb;
    t->nbytes = 0;
    if (wgml_ggml_type_size(t->type, &be, &bb)) {
        if ((uint64_t)t->dims[0] % be)
            return fail(c, at, "tensor '%s' of type %s: first dimension %lld is not a multiple of the block size %llu",
                        t->name, wgml_ggml_type_name(t->type), (long long)t->dims[0], (unsigned long long)be);
        uint64_t blocks = numel / be;
        if (blocks > UINT64_MAX / bb) return fail(c, at, "tensor '%s' size overflows", t->name);
        t->nbytes = blocks * bb;
    }
    return WGML_OK;
}

static wgml_status check_unique_tensor_names(cursor *c, uint64_t nt) {
    wgml_gguf *f = c->f;
    int64_t first = -1, d = repeated_name(f->tensors, sizeof *f->tensors, offsetof(wgml_gguf_tensor, name), nt, &first);
    if (d == -2) return fail(c, c->pos, "out of memory");
    if (d >= 0) return fail(c, c->pos, "duplicate tensor name '%s' (tensors %lld and %lld)", f->tensors[d].name, (long long)first, (long long)d);
    return WGML_OK;
}

/* The data section starts at the next multiple of the alignment after the header; every
 * tensor's bytes must lie inside it. */
static wgml_status place_data_section(cursor *c, uint64_t nt) {
    wgml_gguf *f = c->f;
    uint64_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    f->data_offset = c->pos + pad;
    if (nt > 0 && f->data_offset > f->size)
        return fail(c, c->pos, "truncated: the data section would start at %llu, past the end (%llu bytes)",
                    (unsigned long long)f->data_offset, (unsigned long long)f->size);
    uint64_t data_size = f->data_offset <= f->size ? f->size - f->data_offset : 0;
    for (uint64_t i = 0; i < nt; i++) {
        const wgml_gguf_tensor *t = &f->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return fail(c, f->data_offset + t->offset, "tensor '%s' data (%llu bytes at data offset %llu) lies past the end of the file",
                        t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset);
    }
    return WGML_OK;
}

/* The whole header, in file order: header, metadata, tensor infos, data section. */
static wgml_status parse(cursor *c) {
    wgml_status s;
    uint64_t nt, nkv;
    if ((s = parse_header(c, &nt, &nkv))) return s;
    c->f->alignment = 32;
    for (uint64_t i = 0; i < nkv; i++)
        if ((s = parse_kv(c, i))) return s;
    if ((s = check_unique_keys(c, nkv))) return s;
    for (uint64_t i = 0; i < nt; i++)
        if ((s = parse_tensor_info(c, i))) return s;
    if ((s = check_unique_tensor_names(c, nt))) return s;
    return place_data_section(c, nt);
}

wgml_status wgml_gguf_open(const char *path, wgml_gguf **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return WGML_ERR_ARG;
    *out = NULL;
    if (!path) {
        if (err && errlen) snprintf(err, errlen, "gguf: no path given");
        return WGML_ERR_ARG;
    }
    wgml_gguf *f = calloc(1, sizeof *f);
    if (!f || !(f->path = dup_bytes((const uint8_t *)path, strlen(path)))) {
        free(f);
        if (err && errlen) snprintf(err, errlen, "gguf: %s: out of memory", path);
        return WGML_ERR_IO;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (err && errlen) snprintf(err, errlen, "gguf: %s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        wgml_gguf_close(f);
        return WGML_ERR_IO;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX) {
        if (err && errlen) snprintf(err, errlen, "gguf: %s: not a regular file", path);
        close(fd);
        wgml_gguf_close(f);
        return WGML_ERR_IO;
    }
    f->size = (uint64_t)st.st_size;
    if (f->size) {
        void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            if (err && errlen) snprintf(err, errlen, "gguf: %s: cannot map: %s", path, strerror(errno));
            close(fd);
            f->size = 0;
            wgml_gguf_close(f);
            return WGML_ERR_IO;
        }
        f->map = m;
    } else {
        f->map = (const uint8_t *)"";
    }
    close(fd);
    cursor c = {f, 0, err, errlen};
    wgml_status s = parse(&c);
    if (s) {
        wgml_gguf_close(f);
        return s;
    }
    *out = f;
    return WGML_OK;
}

/* ---- accessors --------------------------------------------------------------------------- */

static wgml_status ferr(const wgml_gguf *f, wgml_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static wgml_status ferr(const wgml_gguf *f, wgml_status s, const char *fmt, ...) {
    wgml_gguf *m = (wgml_gguf *)f; /* the error buffer is the only mutable state */
    if (!m) return s;
    va_list ap;
    va_start(ap, fmt);
    errbuf_vset(m->err, sizeof m->err, s, fmt, ap);
    va_end(ap);
    return s;
}

const char *wgml_gguf_error(const wgml_gguf *f) { return f ? f->err : "no file"; }
uint32_t wgml_gguf_version(const wgml_gguf *f) { return f ? f->version : 0; }
uint64_t wgml_gguf_alignment(const wgml_gguf *f) { return f ? f->alignment : 0; }
uint64_t wgml_gguf_data_offset(const wgml_gguf *f) { return f ? f->data_offset : 0; }
uint64_t wgml_gguf_file_size(const wgml_gguf *f) { return f ? f->size : 0; }
int64_t wgml_gguf_kv_count(const wgml_gguf *f) { return f ? f->n_kv : 0; }

const char *wgml_gguf_kv_key(const wgml_gguf *f, int64_t i) {
    return f && i >= 0 && i < f->n_kv ? f->kv[i].key : NULL;
}

wgml_gguf_value wgml_gguf_kv_value(const wgml_gguf *f, int64_t i) {
    if (f && i >= 0 && i < f->n_kv) return f->kv[i].v;
    wgml_gguf_value none = {.type = (wgml_gguf_type)-1, .index = -1};
    return none;
}

int wgml_gguf_find(const wgml_gguf *f, const char *key, wgml_gguf_value *v) {
    if (!f || !key) return 0;
    for (int64_t i = 0; i < f->n_kv; i++)
        if (!strcmp(f->kv[i].key, key)) {
            if (v) *v = f->kv[i].v;
            return 1;
        }
    return 0;
}

/* Reads an integer-typed scalar as a signed 128-bit-free pair: *neg set when negative. */
static int read_int(const wgml_gguf *f, wgml_gguf_value v, uint64_t *mag, int *neg) {
    if (!f || v.offset >= f->size) return 0; /* a NULL file or a value not from it */
    const uint8_t *p = f->map + v.offset;
    int64_t sv = 0;
    *neg = 0;
    switch (v.type) {
    case WGML_GGUF_U8: case WGML_GGUF_BOOL: *mag = p[0]; return 1;
    case WGML_GGUF_U16: *mag = (uint64_t)p[0] | (uint64_t)p[1] << 8; return 1;
    case WGML_GGUF_U32: *mag = rd32(p); return 1;
    case WGML_GGUF_U64: *mag = rd64(p); return 1;
    case WGML_GGUF_I8: sv = (int8_t)p[0]; break;
    case WGML_GGUF_I16: sv = (int16_t)(uint16_t)((unsigned)p[0] | (unsigned)p[1] << 8); break;
    case WGML_GGUF_I32: sv = (int32_t)rd32(p); break;
    case WGML_GGUF_I64: sv = (int64_t)rd64(p); break;
    default: return 0;
    }
    if (sv < 0) {
        *neg = 1;
        *mag = (uint64_t)(-(sv + 1)) + 1;
    } else {
        *mag = (uint64_t)sv;
    }
    return 1;
}

wgml_status wgml_gguf_value_u64(const wgml_gguf *f, wgml_gguf_value v, uint64_t *out) {
    if (!f || !out) return ferr(f, WGML_ERR_ARG, "gguf: NULL argument");
    uint64_t m;
    int neg;
    if (!read_int(f, v, &m, &neg)) return ferr(f, WGML_ERR_FORMAT, "value of type %s is not an integer", wgml_gguf_type_name(v.type));
    if (neg) return ferr(f, WGML_ERR_FORMAT, "value -%llu is negative", (unsigned long long)m);
    *out = m;
    return WGML_OK;
}

wgml_status wgml_gguf_value_i64(const wgml_gguf *f, wgml_gguf_value v, int64_t *out) {
    if (!f || !out) return ferr(f, WGML_ERR_ARG, "gguf: NULL argument");
    uint64_t m;
    int neg;
    if (!read_int(f, v, &m, &neg)) return ferr(f, WGML_ERR_FORMAT, "value of type %s is not an integer", wgml_gguf_type_name(v.type));
    if (!neg && m > (uint64_t)INT64_MAX) return ferr(f, WGML_ERR_FORMAT, "value %llu does not fit in i64", (unsigned long long)m);
    *out = neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m) : (int64_t)m;
    return WGML_OK;
}

wgml_status wgml_gguf_value_f64(const wgml_gguf *f, wgml_gguf_value v, double *out) {
    if (!f || !out) return ferr(f, WGML_ERR_ARG, "gguf: NULL argument");
    const uint8_t *p = f->map + v.offset;
    if (v.type == WGML_GGUF_F32) {
        uint32_t b = rd32(p);
        float x;
        memcpy(&x, &b, 4);
        *out = x;
        return WGML_OK;
    }
    if (v.type == WGML_GGUF_F64) {
        uint64_t b = rd64(p);
        memcpy(out, &b, 8);
        return WGML_OK;
    }
    uint64_t m;
    int neg;
    if (!read_int(f, v, &m, &neg)) return ferr(f, WGML_ERR_FORMAT, "value of type %s is not a number", wgml_gguf_type_name(v.type));
    *out = neg ? -(double)m : (double)m;
    return WGML_OK;
}

wgml_status wgml_gguf_value_string(const wgml_gguf *f, wgml_gguf_value v, const char **s, size_t *len) {
    if (!f || !s || !len) return ferr(f, WGML_ERR_ARG, "gguf: NULL argument");
    if (v.type != WGML_GGUF_STRING) return ferr(f, WGML_ERR_FORMAT, "value of type %s is not a string", wgml_gguf_type_name(v.type));
    *s = (const char *)f->map + v.offset;
    *len = (size_t)v.count;
    return WGML_OK;
}

wgml_status wgml_gguf_array_elem(const wgml_gguf *f, wgml_gguf_value arr, uint64_t i, wgml_gguf_value *out) {
    if (!f || !out) return ferr(f, WGML_ERR_ARG, "gguf: NULL argument");
    if (arr.type != WGML_GGUF_ARRAY) return ferr(f, WGML_ERR_FORMAT, "value of type %s is not an array", wgml_gguf_type_name(arr.type));
    if (i >= arr.count) return ferr(f, WGML_ERR_ARG, "array index %llu out of range (%llu elements)", (unsigned long long)i, (unsigned long long)arr.count);
    if (arr.index >= 0) {
        *out = f->nodes[(uint64_t)arr.index + i];
        return WGML_OK;
    }
    wgml_gguf_value e = {.type = arr.elem_type, .offset = arr.offset + i * scalar_size(arr.elem_type), .index = -1};
    *out = e;
    return WGML_OK;
}

static wgml_status lookup(const wgml_gguf *f, const char *key, wgml_gguf_value *v) {
    if (!f || !key) return ferr(f, WGML_ERR_ARG, "gguf: NULL argument");
    if (!wgml_gguf_find(f, key, v)) return ferr(f, WGML_ERR_FORMAT, "gguf: %s: missing metadata key '%s'", f->path, key);
    return WGML_OK;
}

static wgml_status keyed(const wgml_gguf *f, const char *key, wgml_status s) {
    if (s) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", f->err);
        ferr(f, s, "gguf: %s: key '%s': %s", f->path, key, tmp);
    }
    return s;
}

wgml_status wgml_gguf_get_u64(const wgml_gguf *f, const char *key, uint64_t *out) {
    wgml_gguf_value v;
    wgml_status s = lookup(f, key, &v);
    return s ? s : keyed(f, key, wgml_gguf_value_u64(f, v, out));
}

wgml_status wgml_gguf_get_u32(const wgml_gguf *f, const char *key, uint32_t *out) {
    uint64_t x = 0;
    wgml_status s = wgml_gguf_get_u64(f, key, &x);
    if (s) return s;
    if (x > UINT32_MAX) return ferr(f, WGML_ERR_FORMAT, "gguf: %s: key '%s': value %llu does not fit in u32", f->path, key, (unsigned long long)x);
    *out = (uint32_t)x;
    return WGML_OK;
}

wgml_status wgml_gguf_get_i64(const wgml_gguf *f, const char *key, int64_t *out) {
    wgml_gguf_value v;
    wgml_status s = lookup(f, key, &v);
    return s ? s : keyed(f, key, wgml_gguf_value_i64(f, v, out));
}

wgml_status wgml_gguf_get_f32(const wgml_gguf *f, const char *key, float *out) {
    wgml_gguf_value v;
    double d;
    wgml_status s = lookup(f, key, &v);
    if (!s) s = keyed(f, key, wgml_gguf_value_f64(f, v, &d));
    if (!s) *out = (float)d;
    return s;
}

wgml_status wgml_gguf_get_bool(const wgml_gguf *f, const char *key, int *out) {
    wgml_gguf_value v = {0};
    wgml_status s = lookup(f, key, &v);
    if (s) return s;
    if (v.type != WGML_GGUF_BOOL) return ferr(f, WGML_ERR_FORMAT, "gguf: %s: key '%s' has type %s, expected bool", f->path, key, wgml_gguf_type_name(v.type));
    *out = f->map[v.offset] != 0;
    return WGML_OK;
}

wgml_status wgml_gguf_get_string(const wgml_gguf *f, const char *key, const char **str, size_t *len) {
    wgml_gguf_value v;
    wgml_status s = lookup(f, key, &v);
    return s ? s : keyed(f, key, wgml_gguf_value_string(f, v, str, len));
}

wgml_status wgml_gguf_get_array(const wgml_gguf *f, const char *key, wgml_gguf_value *arr) {
    wgml_status s = lookup(f, key, arr);
    if (s) return s;
    if (arr->type != WGML_GGUF_ARRAY) return ferr(f, WGML_ERR_FORMAT, "gguf: %s: key '%s' has type %s, expected array", f->path, key, wgml_gguf_type_name(arr->type));
    return WGML_OK;
}

int64_t wgml_gguf_tensor_count(const wgml_gguf *f) { return f ? f->n_tensors : 0; }

const wgml_gguf_tensor *wgml_gguf_tensor_at(const wgml_gguf *f, int64_t i) {
    return f && i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

int64_t wgml_gguf_find_tensor(const wgml_gguf *f, const char *name) {
    if (!f || !name) return -1;
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return i;
    return -1;
}

wgml_status wgml_gguf_tensor_data(const wgml_gguf *f, int64_t i, const void **data, size_t *nbytes) {
    if (!f || !data || !nbytes) return ferr(f, WGML_ERR_ARG, "gguf: NULL argument");
    if (i < 0 || i >= f->n_tensors)
        return ferr(f, WGML_ERR_ARG, "gguf: %s: tensor index %lld out of range (%lld tensors)", f->path, (long long)i, (long long)f->n_tensors);
    const wgml_gguf_tensor *t = &f->tensors[i];
    if (!wgml_ggml_type_size(t->type, NULL, NULL))
        return ferr(f, WGML_ERR_FORMAT, "gguf: %s: unsupported tensor type %u (%s) of tensor '%s' (data at offset %llu)",
                    f->path, t->type, wgml_ggml_type_name(t->type), t->name,
                    (unsigned long long)(f->data_offset + t->offset));
    /* bounds were checked at open */
    *data = f->map + f->data_offset + t->offset;
    *nbytes = (size_t)t->nbytes;
    return WGML_OK;
}
