/* safetensors reader/writer, SHA-256, FNV-1a and atomic writes (see safetensors.h). */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors.h"

#include "io/errbuf.h"
#include "io/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
              {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},   {"BOOL", 1}};

size_t st_dtype_size(const char *dtype) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtypes[i].name, dtype)) return dtypes[i].size;
    return 0;
}

static int numel_of(int rank, const int64_t *shape, int64_t *out) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && n > INT64_MAX / 16 / shape[i])) return 1;
        n *= shape[i];
    }
    *out = n;
    return 0;
}

wgml_status st_build(const st_write_tensor *t, int n, const char *const *meta_keys, const char *const *meta_vals, int n_meta,
                     uint8_t **out, size_t *out_len, char *err, size_t errlen) {
    *out = NULL;
    *out_len = 0;
    if (n < 0 || n_meta < 0 || (n && !t)) return errbuf_set(err, errlen, WGML_ERR_ARG, "safetensors: bad argument");
    char *h = NULL;
    size_t hl = 0, hc = 0;
    int bad = json_put_raw(&h, &hl, &hc, "{");
    if (n_meta) {
        bad |= json_put_raw(&h, &hl, &hc, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) bad |= json_put_raw(&h, &hl, &hc, ",");
            bad |= json_put_string(&h, &hl, &hc, meta_keys[i], strlen(meta_keys[i]));
            bad |= json_put_raw(&h, &hl, &hc, ":");
            bad |= json_put_string(&h, &hl, &hc, meta_vals[i], strlen(meta_vals[i]));
        }
        bad |= json_put_raw(&h, &hl, &hc, "}");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t es = st_dtype_size(t[i].dtype);
        int64_t numel;
        if (!t[i].name || !es || t[i].rank < 0 || t[i].rank > 8 || numel_of(t[i].rank, t[i].shape, &numel) ||
            (numel && !t[i].data) || !strcmp(t[i].name, "__metadata__")) {
            free(h);
            return errbuf_set(err, errlen, WGML_ERR_ARG,
                              "safetensors: tensor %d (%s): bad name, dtype, rank, shape or data", i,
                              t[i].name ? t[i].name : "NULL");
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(t[j].name, t[i].name)) {
                free(h);
                return errbuf_set(err, errlen, WGML_ERR_ARG, "safetensors: tensor name '%s' given twice", t[i].name);
            }
        uint64_t nb = (uint64_t)numel * es;
        char num[64];
        if (n_meta || i) bad |= json_put_raw(&h, &hl, &hc, ",");
        bad |= json_put_string(&h, &hl, &hc, t[i].name, strlen(t[i].name));
        bad |= json_put_raw(&h, &hl, &hc, ":{\"dtype\":");
        bad |= json_put_string(&h, &hl, &hc, t[i].dtype, strlen(t[i].dtype));
        bad |= json_put_raw(&h, &hl, &hc, ",\"shape\":[");
        for (int d = 0; d < t[i].rank; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
            bad |= json_put_raw(&h, &hl, &hc, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + nb));
        bad |= json_put_raw(&h, &hl, &hc, num);
        off += nb;
    }
    bad |= json_put_raw(&h, &hl, &hc, "}");
    while (!bad && hl % 8) bad |= json_put_raw(&h, &hl, &hc, " ");
    size_t total = 8 + hl + (size_t)off;
    uint8_t *b = bad ? NULL : malloc(total ? total : 1);
    if (!b) {
        free(h);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "safetensors: out of memory");
    }
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, h, hl);
    free(h);
    size_t p = 8 + hl;
    for (int i = 0; i < n; i++) {
        int64_t numel = 0;
        numel_of(t[i].rank, t[i].shape, &numel);
        size_t nb = (size_t)numel * st_dtype_size(t[i].dtype);
        if (nb) memcpy(b + p, t[i].data, nb);
        p += nb;
    }
    *out = b;
    *out_len = total;
    return WGML_OK;
}

void st_free(st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_keys[i]), free(f->meta_vals[i]);
    free(f->t);
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

static int is_uint(const json_value *v, uint64_t max, uint64_t *out) {
    if (!v || v->kind != JSON_NUMBER || v->number < 0 || v->number > (double)max || v->number != (double)(uint64_t)v->number)
        return 0;
    *out = (uint64_t)v->number;
    return 1;
}

typedef struct span {
    uint64_t a, b;
    int i;
} span;

static int span_cmp(const void *x, const void *y) {
    const span *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a ? 1 : (p->b > q->b) - (p->b < q->b);
}

/* The "__metadata__" object v: every value a string, copied into f; notes where the
 * "checksum" value's digits lie in the file. */
static wgml_status parse_metadata(st_file *f, const json_value *v, char *err, size_t errlen) {
    if (v->kind != JSON_OBJECT)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: __metadata__ is not an object");
    f->meta_keys = calloc(v->n ? v->n : 1, sizeof(char *));
    f->meta_vals = calloc(v->n ? v->n : 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals) return errbuf_set(err, errlen, WGML_ERR_OOM, "safetensors: out of memory");
    for (size_t j = 0; j < v->n; j++) {
        if (v->items[j].kind != JSON_STRING)
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: __metadata__ value '%s' is not a string",
                              v->keys[j]);
        f->meta_keys[f->n_meta] = strdup(v->keys[j]);
        f->meta_vals[f->n_meta] = strdup(v->items[j].str);
        f->n_meta++;
        if (!f->meta_keys[f->n_meta - 1] || !f->meta_vals[f->n_meta - 1])
            return errbuf_set(err, errlen, WGML_ERR_OOM, "safetensors: out of memory");
        if (!strcmp(v->keys[j], "checksum")) f->checksum_off = 8 + v->items[j].src_off + 1;
    }
    return WGML_OK;
}

/* Tensor entry key: v (exactly dtype, shape and data_offsets[2]) becomes f->t[f->n], its
 * bytes data[a, b) (inside the data_len-byte data and matching the shape and dtype) noted in
 * sp[f->n] for the tiling check. */
static wgml_status parse_tensor_entry(st_file *f, const char *key, const json_value *v, const uint8_t *data,
                                      uint64_t data_len, span *sp, char *err, size_t errlen) {
    const json_value *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *of = json_get(v, "data_offsets");
    if (v->kind != JSON_OBJECT || !dt || dt->kind != JSON_STRING || !sh || sh->kind != JSON_ARRAY || !of ||
        of->kind != JSON_ARRAY || of->n != 2 || v->n != 3)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "safetensors: tensor '%s' needs exactly dtype, shape and data_offsets[2]", key);
    st_tensor *t = &f->t[f->n];
    size_t es = st_dtype_size(dt->str);
    if (!es)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: tensor '%s' has unknown dtype '%s'", key,
                          dt->str);
    if (sh->n > 8)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: tensor '%s' has rank %zu (8 max)", key, sh->n);
    t->rank = (int)sh->n;
    for (size_t d = 0; d < sh->n; d++) {
        uint64_t x;
        if (!is_uint(&sh->items[d], (uint64_t)1 << 40, &x))
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: tensor '%s' has a bad shape entry %zu", key,
                              d);
        t->shape[d] = (int64_t)x;
    }
    uint64_t a, b;
    if (!is_uint(&of->items[0], (uint64_t)1 << 53, &a) || !is_uint(&of->items[1], (uint64_t)1 << 53, &b) || b < a ||
        b > data_len)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "safetensors: tensor '%s' has data_offsets outside the %llu-byte data", key,
                          (unsigned long long)data_len);
    if (numel_of(t->rank, t->shape, &t->numel))
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "safetensors: tensor '%s' has a shape whose element count overflows", key);
    if ((uint64_t)t->numel * es != b - a)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: tensor '%s': %llu bytes for %lld elements of %s",
                          key, (unsigned long long)(b - a), (long long)t->numel, dt->str);
    t->name = strdup(key);
    if (!t->name) return errbuf_set(err, errlen, WGML_ERR_OOM, "safetensors: out of memory");
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->str);
    t->elem_size = es;
    t->data = data + a;
    t->nbytes = (size_t)(b - a);
    sp[f->n] = (span){a, b, f->n};
    f->n++;
    return WGML_OK;
}

/* The tensors tile the data exactly: no overlap, no hole (sorts sp). */
static wgml_status check_tiling(const st_file *f, span *sp, uint64_t data_len, char *err, size_t errlen) {
    qsort(sp, (size_t)f->n, sizeof *sp, span_cmp);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        if (sp[i].a != at)
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: tensor '%s' at bytes [%llu, %llu) %s",
                              f->t[sp[i].i].name, (unsigned long long)sp[i].a, (unsigned long long)sp[i].b,
                              sp[i].a < at ? "overlaps another" : "leaves a hole before it");
        at = sp[i].b;
    }
    if (at != data_len)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: %llu bytes after the last tensor",
                          (unsigned long long)(data_len - at));
    return WGML_OK;
}

wgml_status st_parse(uint8_t *buf, size_t size, st_file *f, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->buf = buf;
    f->size = size;
    if (size < 8)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "safetensors: file of %zu bytes is shorter than the 8-byte header length", size);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    if (hl < 2 || hl > size - 8 || hl > (100u << 20))
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "safetensors: header length %llu does not fit the file (%zu bytes)", (unsigned long long)hl,
                          size);
    json_value root;
    char jerr[160];
    if (json_parse((const char *)buf + 8, (size_t)hl, &root, jerr, sizeof jerr))
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: header JSON (from byte 8): %s", jerr);
    wgml_status s = WGML_OK;
    span *sp = NULL;
    if (root.kind != JSON_OBJECT) {
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "safetensors: the header is not a JSON object");
        goto done;
    }
    uint64_t data_len = size - 8 - hl;
    const uint8_t *data = buf + 8 + hl;
    f->t = calloc(root.n ? root.n : 1, sizeof *f->t);
    sp = calloc(root.n ? root.n : 1, sizeof *sp);
    if (!f->t || !sp) {
        s = errbuf_set(err, errlen, WGML_ERR_OOM, "safetensors: out of memory");
        goto done;
    }
    for (size_t i = 0; i < root.n && !s; i++) {
        if (!strcmp(root.keys[i], "__metadata__"))
            s = parse_metadata(f, &root.items[i], err, errlen);
        else
            s = parse_tensor_entry(f, root.keys[i], &root.items[i], data, data_len, sp, err, errlen);
    }
    if (!s) s = check_tiling(f, sp, data_len, err, errlen);
done:
    free(sp);
    json_free(&root);
    return s;
}

wgml_status file_read_all(const char *path, uint8_t **out, size_t *len, char *err, size_t errlen) {
    *out = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return errbuf_set(err, errlen, WGML_ERR_IO, "%s: %s", path, strerror(errno));
    uint8_t *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            uint8_t *q = realloc(b, cap);
            if (!q) {
                free(b);
                fclose(fp);
                return errbuf_set(err, errlen, WGML_ERR_OOM, "%s: out of memory", path);
            }
            b = q;
        }
        size_t k = fread(b + n, 1, 65536, fp);
        n += k;
        if (k < 65536) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(b);
        return errbuf_set(err, errlen, WGML_ERR_IO, "%s: read error", path);
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return WGML_OK;
}

wgml_status st_read(const char *path, st_file *f, char *err, size_t errlen) {
    uint8_t *b;
    size_t n;
    memset(f, 0, sizeof *f);
    wgml_status s = file_read_all(path, &b, &n, err, errlen);
    if (s) return s;
    s = st_parse(b, n, f, err, errlen);
    if (s && err && errlen) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s: %s", path, err);
        snprintf(err, errlen, "%s", tmp);
    }
    return s;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}

wgml_status file_write_atomic(const char *path, const void *const *parts, const size_t *sizes, int n, size_t crash_after,
                              char *err, size_t errlen) {
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 5);
    if (!tmp) return errbuf_set(err, errlen, WGML_ERR_OOM, "out of memory");
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        wgml_status s = errbuf_set(err, errlen, WGML_ERR_IO, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return s;
    }
    size_t written = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *p = parts[i];
        size_t left = sizes[i];
        while (left) {
            size_t k = left;
            if (crash_after != SIZE_MAX && written + k > crash_after) k = crash_after - written;
            if (k == 0) {
                close(fd);
                free(tmp);
                return errbuf_set(err, errlen, WGML_ERR_IO, "simulated crash after %zu bytes", written);
            }
            ssize_t w = write(fd, p, k);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                wgml_status s =
                    errbuf_set(err, errlen, WGML_ERR_IO, "%s: %s", tmp, w < 0 ? strerror(errno) : "short write");
                close(fd);
                unlink(tmp);
                free(tmp);
                return s;
            }
            p += w, left -= (size_t)w, written += (size_t)w;
        }
    }
    if (fsync(fd) || close(fd)) {
        wgml_status s = errbuf_set(err, errlen, WGML_ERR_IO, "%s: %s", tmp, strerror(errno));
        unlink(tmp);
        free(tmp);
        return s;
    }
    if (rename(tmp, path)) {
        wgml_status s = errbuf_set(err, errlen, WGML_ERR_IO, "rename %s -> %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return s;
    }
    free(tmp);
    /* make the rename itself durable */
    char *dir = strdup(path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        if (slash) *(slash == dir ? slash + 1 : slash) = 0;
        else strcpy(dir, ".");
        int dfd = open(dir, O_RDONLY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return WGML_OK;
}

uint64_t fnv1a64(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- SHA-256 (FIPS 180-4) ---- */
typedef struct sha256_ctx {
    uint32_t h[8];
    uint8_t block[64];
    size_t fill;
    uint64_t bits;
} sha256_ctx;

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256_ctx *c, const uint8_t *b) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->h[0], bb = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & bb) ^ (a & cc) ^ (bb & cc));
        h = g, g = f, f = e, e = d + t1, d = cc, cc = bb, bb = a, a = t1 + t2;
    }
    c->h[0] += a, c->h[1] += bb, c->h[2] += cc, c->h[3] += d, c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(sha256_ctx *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->fill = 0;
    c->bits = 0;
}

static void sha256_update(sha256_ctx *c, const uint8_t *p, size_t n) {
    c->bits += (uint64_t)n * 8;
    while (n) {
        size_t k = 64 - c->fill < n ? 64 - c->fill : n;
        memcpy(c->block + c->fill, p, k);
        c->fill += k, p += k, n -= k;
        if (c->fill == 64) {
            sha256_block(c, c->block);
            c->fill = 0;
        }
    }
}

static void sha256_final(sha256_ctx *c, uint8_t out[32]) {
    uint64_t bits = c->bits;
    uint8_t pad = 0x80, zero = 0;
    sha256_update(c, &pad, 1);
    while (c->fill != 56) sha256_update(c, &zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, len, 8);
    for (int i = 0; i < 8; i++)
        out[4 * i] = (uint8_t)(c->h[i] >> 24), out[4 * i + 1] = (uint8_t)(c->h[i] >> 16), out[4 * i + 2] = (uint8_t)(c->h[i] >> 8),
                out[4 * i + 3] = (uint8_t)c->h[i];
}

void sha256_bytes(const void *data, size_t n, uint8_t out[32]) {
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, out);
}

wgml_status sha256_file(const char *path, char out[65], uint64_t *size, char *err, size_t errlen) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return errbuf_set(err, errlen, WGML_ERR_IO, "%s: %s", path, strerror(errno));
    sha256_ctx c;
    sha256_init(&c);
    uint8_t *buf = malloc(1 << 20);
    if (!buf) {
        fclose(fp);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "out of memory");
    }
    uint64_t total = 0;
    size_t k;
    while ((k = fread(buf, 1, 1 << 20, fp)) > 0) {
        sha256_update(&c, buf, k);
        total += k;
    }
    int bad = ferror(fp);
    fclose(fp);
    free(buf);
    if (bad) return errbuf_set(err, errlen, WGML_ERR_IO, "%s: read error", path);
    uint8_t d[32];
    sha256_final(&c, d);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
    if (size) *size = total;
    return WGML_OK;
}
