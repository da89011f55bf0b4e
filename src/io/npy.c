/* .npy files: NumPy's array format, read and written for the program runner's inputs and
 * outputs (`wgml run`), and the program dtypes (ExecuTorch's ScalarType numbers) that type
 * them; declared in wgml-io.h.
 *
 * Layout: the magic "\x93NUMPY", a major and minor version byte, the header length (u16 LE for
 * version 1, u32 LE for versions 2 and 3), then the header: a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a newline;
 * then the data. The parser reads exactly that dict (the three keys, in any order, each once)
 * and checks every length against the file: an outside format, so nothing is trusted. */
#include "wgml-io.h"

#include "gpu/gpu.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- program dtypes ------------------------------------------------------------------------ */

const char *wgml_program_dtype_name(int dtype) {
    switch (dtype) {
    case WGML_PROG_U8: return "uint8";
    case WGML_PROG_I8: return "int8";
    case WGML_PROG_I16: return "int16";
    case WGML_PROG_I32: return "int32";
    case WGML_PROG_I64: return "int64";
    case WGML_PROG_F16: return "float16";
    case WGML_PROG_F32: return "float32";
    case WGML_PROG_F64: return "float64";
    case WGML_PROG_BOOL: return "bool";
    default: return "unknown";
    }
}

size_t wgml_program_dtype_size(int dtype) {
    switch (dtype) {
    case WGML_PROG_U8: case WGML_PROG_I8: case WGML_PROG_BOOL: return 1;
    case WGML_PROG_I16: case WGML_PROG_F16: return 2;
    case WGML_PROG_I32: case WGML_PROG_F32: return 4;
    case WGML_PROG_I64: case WGML_PROG_F64: return 8;
    default: return 0;
    }
}

/* ---- .npy ----------------------------------------------------------------------------------- */

static wgml_status bad(size_t off, const char *what) {
    return wgml_set_error(NULL, WGML_ERR_FORMAT, "npy: %s at byte %zu", what, off);
}

typedef struct npy_cur {
    const char *s;
    size_t n, i, base; /* base: the header's offset in the file, for messages */
} npy_cur;

static void skip_ws(npy_cur *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t')) c->i++;
}

static int eat(npy_cur *c, char ch) {
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == ch) {
        c->i++;
        return 1;
    }
    return 0;
}

/* A quoted string (no escapes) into out (at most cap-1 chars). */
static int quoted(npy_cur *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->i >= c->n || (c->s[c->i] != '\'' && c->s[c->i] != '"')) return 0;
    char q = c->s[c->i++];
    size_t k = 0;
    while (c->i < c->n && c->s[c->i] != q) {
        if (k + 1 >= cap) return 0;
        out[k++] = c->s[c->i++];
    }
    if (c->i >= c->n) return 0;
    c->i++;
    out[k] = 0;
    return 1;
}

static int word(npy_cur *c, const char *w) {
    skip_ws(c);
    size_t l = strlen(w);
    if (c->n - c->i >= l && !memcmp(c->s + c->i, w, l)) {
        c->i += l;
        return 1;
    }
    return 0;
}

static wgml_status parse_descr(const char *d, wgml_program_dtype *dt, size_t off) {
    static const struct {
        const char *s;
        wgml_program_dtype t;
    } k[] = {{"|b1", WGML_PROG_BOOL}, {"|u1", WGML_PROG_U8}, {"|i1", WGML_PROG_I8}, {"<i2", WGML_PROG_I16},
             {"<i4", WGML_PROG_I32},  {"<i8", WGML_PROG_I64}, {"<f2", WGML_PROG_F16}, {"<f4", WGML_PROG_F32},
             {"<f8", WGML_PROG_F64},  {"<u1", WGML_PROG_U8}, {"<i1", WGML_PROG_I8}, {"<b1", WGML_PROG_BOOL}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(d, k[i].s)) {
            *dt = k[i].t;
            return WGML_OK;
        }
    return wgml_set_error(NULL, WGML_ERR_UNSUPPORTED, "npy: dtype '%s' is not supported (header at byte %zu)", d, off);
}

/* The shape tuple: (), (n,), (a, b), ... */
static wgml_status parse_shape(npy_cur *c, wgml_npy *o) {
    if (!eat(c, '(')) return bad(c->base + c->i, "expected '(' for the shape");
    o->rank = 0;
    for (;;) {
        if (eat(c, ')')) return WGML_OK;
        skip_ws(c);
        if (c->i >= c->n || !isdigit((unsigned char)c->s[c->i])) return bad(c->base + c->i, "expected a dimension");
        int64_t v = 0;
        while (c->i < c->n && isdigit((unsigned char)c->s[c->i])) {
            if (v > (INT64_MAX - 9) / 10) return bad(c->base + c->i, "dimension too large");
            v = v * 10 + (c->s[c->i++] - '0');
        }
        if (o->rank >= WGML_MAX_RANK) return bad(c->base + c->i, "more than 8 dimensions");
        o->shape[o->rank++] = v;
        if (!eat(c, ',')) {
            if (eat(c, ')')) return WGML_OK;
            return bad(c->base + c->i, "expected ',' or ')' in the shape");
        }
    }
}

static wgml_status parse_header(npy_cur *c, wgml_npy *o) {
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!eat(c, '{')) return bad(c->base + c->i, "expected '{'");
    for (;;) {
        if (eat(c, '}')) break;
        char key[32], val[32];
        if (!quoted(c, key, sizeof key)) return bad(c->base + c->i, "expected a quoted key");
        if (!eat(c, ':')) return bad(c->base + c->i, "expected ':'");
        if (!strcmp(key, "descr") && !have_descr) {
            if (!quoted(c, val, sizeof val)) return bad(c->base + c->i, "expected a quoted descr");
            wgml_status s = parse_descr(val, &o->dtype, c->base);
            if (s) return s;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order") && !have_order) {
            if (word(c, "True")) return wgml_set_error(NULL, WGML_ERR_UNSUPPORTED, "npy: Fortran order is not supported");
            if (!word(c, "False")) return bad(c->base + c->i, "expected True or False");
            have_order = 1;
        } else if (!strcmp(key, "shape") && !have_shape) {
            wgml_status s = parse_shape(c, o);
            if (s) return s;
            have_shape = 1;
        } else {
            return bad(c->base + c->i, "unknown or repeated key");
        }
        if (!eat(c, ',')) {
            if (eat(c, '}')) break;
            return bad(c->base + c->i, "expected ',' or '}'");
        }
    }
    if (!have_descr || !have_order || !have_shape) return bad(c->base, "header lacks descr, fortran_order or shape");
    while (c->i < c->n) {
        char ch = c->s[c->i];
        if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') return bad(c->base + c->i, "text after the header");
        c->i++;
    }
    return WGML_OK;
}

wgml_status wgml_npy_parse(const void *bytes, size_t size, wgml_npy *out) {
    if (!out) return wgml_set_error(NULL, WGML_ERR_ARG, "npy: out is NULL");
    memset(out, 0, sizeof *out);
    if (!bytes) return wgml_set_error(NULL, WGML_ERR_ARG, "npy: no bytes");
    const uint8_t *b = bytes;
    if (size < 10 || memcmp(b, "\x93NUMPY", 6)) return bad(0, "not an .npy file (magic)");
    int major = b[6];
    size_t hl, hoff;
    if (major == 1) {
        hl = (size_t)b[8] | (size_t)b[9] << 8;
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return bad(size, "truncated header length");
        hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hoff = 12;
    } else {
        return wgml_set_error(NULL, WGML_ERR_UNSUPPORTED, "npy: format version %d is not supported", major);
    }
    if (hl > size - hoff) return bad(hoff, "header longer than the file");
    npy_cur c = {.s = (const char *)b + hoff, .n = hl, .i = 0, .base = hoff};
    wgml_status s = parse_header(&c, out);
    if (s) return s;
    size_t es = wgml_program_dtype_size(out->dtype);
    int64_t numel = 1;
    for (int i = 0; i < out->rank; i++) {
        if (out->shape[i] != 0 && numel > INT64_MAX / out->shape[i]) return bad(hoff, "shape too large");
        numel *= out->shape[i];
    }
    size_t data_off = hoff + hl, avail = size - data_off;
    if ((uint64_t)numel > avail / es || (size_t)numel * es != avail)
        return wgml_set_error(NULL, WGML_ERR_FORMAT, "npy: %lld elements of %zu bytes need %llu data bytes, the file has %zu after byte %zu",
                              (long long)numel, es, (unsigned long long)numel * es, avail, data_off);
    out->numel = numel;
    out->nbytes = (size_t)numel * es;
    out->data = malloc(out->nbytes ? out->nbytes : 1);
    if (!out->data) return wgml_set_error(NULL, WGML_ERR_OOM, "npy: out of host memory");
    memcpy(out->data, b + data_off, out->nbytes);
    return WGML_OK;
}

wgml_status wgml_npy_read(const char *path, wgml_npy *out) {
    if (out) memset(out, 0, sizeof *out);
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return wgml_set_error(NULL, WGML_ERR_IO, "npy: cannot open '%s'", path ? path : "(null)");
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            size_t nc = cap ? 2 * cap : 4096;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) {
                free(buf), fclose(f);
                return wgml_set_error(NULL, WGML_ERR_OOM, "npy: out of host memory reading '%s'", path);
            }
            buf = nb, cap = nc;
        }
        size_t r = fread(buf + size, 1, cap - size, f);
        size += r;
        if (!r) break;
    }
    fclose(f);
    wgml_status s = wgml_npy_parse(buf, size, out);
    free(buf);
    if (s) return wgml_set_error(NULL, s, "%s (in '%s')", wgml_last_error(NULL), path);
    return s;
}

wgml_status wgml_npy_write(const char *path, wgml_program_dtype dtype, int rank, const int64_t *shape,
                           const void *data) {
    static const struct {
        wgml_program_dtype t;
        const char *s;
    } k[] = {{WGML_PROG_BOOL, "|b1"}, {WGML_PROG_U8, "|u1"}, {WGML_PROG_I8, "|i1"}, {WGML_PROG_I16, "<i2"},
             {WGML_PROG_I32, "<i4"},  {WGML_PROG_I64, "<i8"}, {WGML_PROG_F16, "<f2"}, {WGML_PROG_F32, "<f4"},
             {WGML_PROG_F64, "<f8"}};
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].t == dtype) descr = k[i].s;
    if (!descr || rank < 0 || rank > WGML_MAX_RANK || (rank && !shape) || !data || !path)
        return wgml_set_error(NULL, WGML_ERR_ARG, "npy: bad arguments to write '%s'", path ? path : "(null)");
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, rank == 1 ? "%lld," : i ? ", %lld" : "%lld", (long long)shape[i]);
        numel *= shape[i];
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    /* pad so that magic + version + length + header is a multiple of 64, ending in a newline */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return wgml_set_error(NULL, WGML_ERR_IO, "npy: cannot create '%s'", path);
    uint16_t hl = (uint16_t)(n + pad + 1);
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hl & 0xff), (uint8_t)(hl >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n;
    for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    size_t nb = (size_t)numel * wgml_program_dtype_size(dtype);
    ok = ok && fwrite(data, 1, nb, f) == nb;
    ok = fclose(f) == 0 && ok;
    return ok ? WGML_OK : wgml_set_error(NULL, WGML_ERR_IO, "npy: error writing '%s'", path);
}

void wgml_npy_free(wgml_npy *n) {
    if (!n) return;
    free(n->data);
    n->data = NULL;
}
