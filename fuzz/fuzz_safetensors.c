/* Fuzz target: the safetensors reader and writer (src/io/safetensors.c). The input is a
 * whole file, parsed by st_parse. An accepted file is walked (every tensor's bytes, every
 * metadata pair, st_find / st_meta on each name), then rebuilt with st_build from what was
 * parsed (tensors in header order, metadata in order) and the rebuilt file parsed again: it
 * must be accepted and give the same names, dtypes, shapes and bytes and the same metadata
 * (a real round trip). A rejected file must come with a message. With WGML_FUZZ_VERBOSE set,
 * each rejection is printed (to check what the seeds reach). */
#include "io/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what) {
    fprintf(stderr, "fuzz_safetensors: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    st_file f;
    char err[512] = "";
    if (st_parse(buf, size, &f, err, sizeof err) != WGML_OK) {
        if (getenv("WGML_FUZZ_VERBOSE")) fprintf(stderr, "rejected: %s\n", err);
        if (!err[0]) fail("rejected without a message");
        st_free(&f);
        return 0;
    }
    volatile uint64_t sink = 0;
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.t[i];
        if (!t->name || st_find(&f, t->name) != t) fail("st_find does not find a parsed tensor");
        if (t->elem_size != st_dtype_size(t->dtype) || (size_t)t->numel * t->elem_size != t->nbytes) fail("tensor size");
        if (t->nbytes && (t->data < f.buf || t->data + t->nbytes > f.buf + f.size)) fail("tensor data outside the file");
        sink = fnv1a64(sink, t->data, t->nbytes); /* every byte must be readable */
    }
    for (int i = 0; i < f.n_meta; i++)
        if (st_meta(&f, f.meta_keys[i]) != f.meta_vals[i]) fail("st_meta does not find a parsed key");
    (void)st_find(&f, "");
    (void)st_meta(&f, "");

    /* rebuild and re-parse */
    st_write_tensor *wt = calloc(f.n ? (size_t)f.n : 1, sizeof *wt);
    if (!wt) fail("out of memory");
    for (int i = 0; i < f.n; i++) {
        wt[i].name = f.t[i].name;
        wt[i].dtype = f.t[i].dtype;
        wt[i].rank = f.t[i].rank;
        memcpy(wt[i].shape, f.t[i].shape, sizeof wt[i].shape);
        wt[i].data = f.t[i].data;
    }
    uint8_t *out = NULL;
    size_t out_len = 0;
    if (st_build(wt, f.n, (const char *const *)f.meta_keys, (const char *const *)f.meta_vals, f.n_meta, &out, &out_len, err,
                 sizeof err) != WGML_OK) {
        fprintf(stderr, "st_build: %s\n", err);
        fail("a parsed file could not be rebuilt");
    }
    st_file g;
    if (st_parse(out, out_len, &g, err, sizeof err) != WGML_OK) {
        fprintf(stderr, "re-parse: %s\n", err);
        fail("the rebuilt file is rejected");
    }
    if (g.n != f.n || g.n_meta != f.n_meta) fail("counts differ after the round trip");
    for (int i = 0; i < f.n; i++) {
        const st_tensor *a = &f.t[i], *b = st_find(&g, a->name);
        if (!b || strcmp(a->dtype, b->dtype) || a->rank != b->rank || memcmp(a->shape, b->shape, sizeof a->shape) ||
            a->nbytes != b->nbytes || (a->nbytes && memcmp(a->data, b->data, a->nbytes)))
            fail("a tensor differs after the round trip");
    }
    for (int i = 0; i < f.n_meta; i++) {
        const char *v = st_meta(&g, f.meta_keys[i]);
        if (!v || strcmp(v, f.meta_vals[i])) fail("metadata differs after the round trip");
    }
    /* the writer's output is canonical: building it again gives the same bytes */
    uint8_t *out2 = NULL;
    size_t out2_len = 0;
    for (int i = 0; i < g.n; i++) {
        const st_tensor *b = st_find(&g, f.t[i].name);
        wt[i].data = b->data;
    }
    if (st_build(wt, f.n, (const char *const *)g.meta_keys, (const char *const *)g.meta_vals, g.n_meta, &out2, &out2_len, err,
                 sizeof err) != WGML_OK ||
        out2_len != out_len || memcmp(out2, g.buf, out_len))
        fail("building twice gives different bytes");
    free(out2);
    st_free(&g);
    free(wt);
    st_free(&f);
    (void)sink;
    return 0;
}
