/* STE GGUF output: requantised 4-bit codes written into a copy of the input file. */
#define _POSIX_C_SOURCE 200809L
#include "io/gguf_write.h"
#include "wgml-io.h"

#include "gpu/bytebuf.h"
#include "io/errbuf.h"
#include "io/safetensors.h"
#include "ops/qweight/qw_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wgml_status gguf_requant_blocks(uint32_t type, const float *latent, int64_t n, int64_t k, uint8_t *blocks, size_t bytes,
                                char *err, size_t errlen) {
    if (type != WGML_GGML_Q4_0 && type != WGML_GGML_Q4_1)
        return errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED, "requant: type %s is not a 4-bit GGUF type (Q4_0, Q4_1)",
                          wgml_ggml_type_name(type));
    size_t bb = type == WGML_GGML_Q4_0 ? 18 : 20;
    if (n < 1 || k < 32 || k % 32 || bytes != (size_t)n * (size_t)(k / 32) * bb)
        return errbuf_set(err, errlen, WGML_ERR_SHAPE,
                          "requant: %lld x %lld elements do not fit %zu bytes of %s blocks", (long long)n, (long long)k,
                          bytes, wgml_ggml_type_name(type));
    size_t nb = (size_t)n * (size_t)(k / 32);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = blocks + b * bb;
        const float *x = latent + b * 32;
        float d = qw_half_to_float((uint16_t)(blk[0] | blk[1] << 8)), m = 0;
        if (type == WGML_GGML_Q4_1) m = qw_half_to_float((uint16_t)(blk[2] | blk[3] << 8));
        uint8_t *qs = blk + (type == WGML_GGML_Q4_0 ? 2 : 4);
        uint8_t code[32];
        for (int j = 0; j < 32; j++) {
            float c;
            if (type == WGML_GGML_Q4_0) {
                c = d == 0 ? 0.0f : nearbyintf(x[j] / d);
                c = c < -8 ? -8 : c > 7 ? 7 : c;
                c += 8;
            } else {
                c = d == 0 ? 0.0f : nearbyintf((x[j] - m) / d);
                c = c < 0 ? 0 : c > 15 ? 15 : c;
            }
            if (c != c) c = type == WGML_GGML_Q4_0 ? 8 : 0; /* NaN latent */
            code[j] = (uint8_t)c;
        }
        /* byte j: element j in the low nibble, element j + 16 in the high nibble */
        for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(code[j] | code[j + 16] << 4);
    }
    return WGML_OK;
}

wgml_status gguf_write_ste(const char *in_path, const char *out_path, int n, const char *const *names, const float *const *latent,
                           char *err, size_t errlen) {
    wgml_gguf *g = NULL;
    char e2[400];
    wgml_status s = wgml_gguf_open(in_path, &g, e2, sizeof e2);
    if (s) return errbuf_set(err, errlen, s, "%s", e2);
    uint8_t *buf = NULL;
    size_t len = 0;
    s = file_read_all(in_path, &buf, &len, err, errlen);
    if (!s && len != wgml_gguf_file_size(g))
        s = errbuf_set(err, errlen, WGML_ERR_IO, "%s changed while being read", in_path);
    for (int i = 0; i < n && !s; i++) {
        int64_t ti = wgml_gguf_find_tensor(g, names[i]);
        if (ti < 0) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s has no tensor '%s'", in_path, names[i]);
            break;
        }
        const wgml_gguf_tensor *t = wgml_gguf_tensor_at(g, ti);
        uint64_t off = wgml_gguf_data_offset(g) + t->offset;
        if (t->n_dims != 2 || off + t->nbytes > len) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "tensor '%s' is not a 2-D weight inside the file", names[i]);
            break;
        }
        s = gguf_requant_blocks(t->type, latent[i], t->dims[1], t->dims[0], buf + off, (size_t)t->nbytes, e2, sizeof e2);
        if (s) errbuf_set(err, errlen, s, "tensor '%s': %s", names[i], e2);
    }
    if (!s) {
        const void *parts[1] = {buf};
        size_t sizes[1] = {len};
        s = file_write_atomic(out_path, parts, sizes, 1, SIZE_MAX, err, errlen);
    }
    free(buf);
    wgml_gguf_close(g);
    return s;
}

/* ---- new files of F32 tensors ---- */

static void put_u32(bytebuf *b, uint32_t v) { bytebuf_put(b, &v, 4); } /* GGUF is little-endian, as wgml's hosts */
static void put_u64(bytebuf *b, uint64_t v) { bytebuf_put(b, &v, 8); }
static void put_str(bytebuf *b, const char *s) {
    put_u64(b, strlen(s));
    bytebuf_put(b, s, strlen(s));
}
static void pad_to(bytebuf *b, size_t align) {
    static const uint8_t zero[32];
    while (b->n % align && !b->oom) bytebuf_put(b, zero, align - b->n % align < 32 ? align - b->n % align : 32);
}

wgml_status gguf_build_f32(const gguf_kv_write *kv, int n_kv, const gguf_tensor_write *t, int n, uint8_t **out, size_t *len,
                           char *err, size_t errlen) {
    *out = NULL;
    *len = 0;
    bytebuf b = {0};
    bytebuf_put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, (uint64_t)n);
    put_u64(&b, (uint64_t)n_kv);
    for (int i = 0; i < n_kv; i++) {
        put_str(&b, kv[i].key);
        put_u32(&b, kv[i].str ? 8u : 6u); /* GGUF value types: 8 string, 6 float32 */
        if (kv[i].str) put_str(&b, kv[i].str);
        else bytebuf_put(&b, &kv[i].f32, 4);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t numel = 1;
        if (t[i].n_dims < 1 || t[i].n_dims > 4) return errbuf_set(err, errlen, WGML_ERR_ARG, "gguf: tensor %s has %d dims", t[i].name, t[i].n_dims);
        put_str(&b, t[i].name);
        put_u32(&b, (uint32_t)t[i].n_dims);
        for (int d = 0; d < t[i].n_dims; d++) put_u64(&b, (uint64_t)t[i].dims[d]), numel *= t[i].dims[d];
        put_u32(&b, 0); /* F32 */
        put_u64(&b, off);
        off += ((uint64_t)numel * 4 + 31) / 32 * 32;
    }
    pad_to(&b, 32);
    for (int i = 0; i < n; i++) {
        int64_t numel = 1;
        for (int d = 0; d < t[i].n_dims; d++) numel *= t[i].dims[d];
        bytebuf_put(&b, t[i].data, (size_t)numel * 4);
        pad_to(&b, 32);
    }
    if (b.oom) {
        free(b.p);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "gguf: out of memory");
    }
    *out = (uint8_t *)b.p;
    *len = b.n;
    return WGML_OK;
}
