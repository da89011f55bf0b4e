/* Fuzz target: the GGUF reader. The input is a whole file. It is written to an anonymous
 * in-memory file (memfd) and opened through /proc/self/fd, so the real path of
 * wgml_gguf_open (fstat, mmap, parse) runs. An accepted file is then walked through every
 * accessor: each metadata value converted every way, each array element, each tensor's data
 * (and its dequantisation when small), and the tokenizer built from its metadata (which reads
 * tokens, merges and types through the accessors). */
#define _GNU_SOURCE
#include "wgml.h"
#include "wgml-model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static void walk_value(const wgml_gguf *f, wgml_gguf_value v, int depth) {
    uint64_t u;
    int64_t i;
    double d;
    const char *s;
    size_t n;
    volatile size_t sink = 0;
    (void)wgml_gguf_value_u64(f, v, &u);
    (void)wgml_gguf_value_i64(f, v, &i);
    (void)wgml_gguf_value_f64(f, v, &d);
    if (wgml_gguf_value_string(f, v, &s, &n) == WGML_OK)
        for (size_t k = 0; k < n; k++) sink += (unsigned char)s[k]; /* every byte must be readable */
    if (v.type == WGML_GGUF_ARRAY && depth < 4) {
        uint64_t cnt = v.count < 64 ? v.count : 64;
        for (uint64_t k = 0; k < cnt; k++) {
            wgml_gguf_value e;
            if (wgml_gguf_array_elem(f, v, k, &e) == WGML_OK) walk_value(f, e, depth + 1);
        }
        if (v.count) {
            wgml_gguf_value e;
            if (wgml_gguf_array_elem(f, v, v.count - 1, &e) == WGML_OK) walk_value(f, e, depth + 1);
        }
        wgml_gguf_value e;
        (void)wgml_gguf_array_elem(f, v, v.count, &e); /* one past the end: an error */
    }
    (void)sink;
}

/* Runs one input through the reader; shared by the libFuzzer build and the replay test. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("wgml_fuzz_gguf", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t w = 0;
    while (w < size) {
        ssize_t r = write(fd, data + w, size - w);
        if (r <= 0) break;
        w += (size_t)r;
    }
    char path[64], err[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    wgml_gguf *f = NULL;
    wgml_status s = wgml_gguf_open(path, &f, err, sizeof err);
    close(fd);
    if (s != WGML_OK) {
        if (f || !err[0]) abort(); /* a failure must leave no handle and give a message */
        return 0;
    }
    (void)wgml_gguf_version(f);
    (void)wgml_gguf_alignment(f);
    (void)wgml_gguf_data_offset(f);
    (void)wgml_gguf_file_size(f);
    int64_t nkv = wgml_gguf_kv_count(f);
    for (int64_t i = 0; i < nkv; i++) {
        const char *key = wgml_gguf_kv_key(f, i);
        if (!key) abort();
        wgml_gguf_value v = wgml_gguf_kv_value(f, i), v2;
        if (!wgml_gguf_find(f, key, &v2)) abort();
        walk_value(f, v, 0);
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f32;
        int b;
        const char *str;
        size_t len;
        wgml_gguf_value arr;
        (void)wgml_gguf_get_u32(f, key, &u32);
        (void)wgml_gguf_get_u64(f, key, &u64);
        (void)wgml_gguf_get_i64(f, key, &i64);
        (void)wgml_gguf_get_f32(f, key, &f32);
        (void)wgml_gguf_get_bool(f, key, &b);
        (void)wgml_gguf_get_string(f, key, &str, &len);
        (void)wgml_gguf_get_array(f, key, &arr);
    }
    (void)wgml_gguf_kv_key(f, nkv);
    (void)wgml_gguf_kv_value(f, -1);
    int64_t nt = wgml_gguf_tensor_count(f);
    for (int64_t i = 0; i < nt; i++) {
        const wgml_gguf_tensor *t = wgml_gguf_tensor_at(f, i);
        if (!t || wgml_gguf_find_tensor(f, t->name) < 0) abort();
        const void *p;
        size_t nb;
        if (wgml_gguf_tensor_data(f, i, &p, &nb) != WGML_OK) continue;
        volatile uint8_t sink = 0;
        if (nb) sink ^= ((const uint8_t *)p)[0] ^ ((const uint8_t *)p)[nb - 1];
        (void)sink;
        /* dequantise small tensors as the model loader does: k = dims[0], n = the rest */
        int64_t k = t->dims[0], n = t->numel && k ? t->numel / k : 0;
        if (n > 0 && k > 0 && t->numel <= (1 << 16)) {
            float *out = malloc((size_t)t->numel * sizeof(float));
            if (out) (void)wgml_gguf_dequantize((int)t->type, p, nb, n, k, out);
            free(out);
        }
    }
    (void)wgml_gguf_tensor_at(f, nt);
    wgml_tokenizer *tok = NULL;
    if (wgml_tokenizer_from_gguf(f, &tok, err, sizeof err) == WGML_OK) {
        static const char text[] = "Hello, world! 123 <|im_start|>user\n\xc3\xa9\xff";
        int32_t *ids = NULL;
        size_t nid = 0;
        if (wgml_tokenizer_encode(tok, text, sizeof text - 1, WGML_TOK_SPECIAL, &ids, &nid) == WGML_OK) {
            char *out = NULL;
            size_t olen = 0;
            if (wgml_tokenizer_decode(tok, ids, nid, 0, &out, &olen) == WGML_OK) free(out);
            free(ids);
        }
        wgml_chat_msg m = {"user", "hi"};
        char *chat = NULL;
        size_t clen = 0;
        if (wgml_chat_apply(tok, &m, 1, 1, &chat, &clen) == WGML_OK) free(chat);
        wgml_tokenizer_free(tok);
    }
    wgml_gguf_close(f);
    return 0;
}
