/* Helpers shared by test_shape.c and test_index.c: random data of every dtype, upload and
 * read-back of raw bytes, exact byte comparison, coordinate arithmetic for references. */
#ifndef WGML_TEST_COPY_UTIL_H
#define WGML_TEST_COPY_UTIL_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

/* n random elements of dt: f32 in [-10, 10), i32 in [-1e6, 1e6), u32 any, bool 0/1. */
static inline void *cu_random(wgml_dtype dt, int64_t n) {
    size_t es = wgml_dtype_size(dt);
    unsigned char *p = malloc((size_t)n * es + 4);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case WGML_F32: ((float *)p)[i] = (float)th_uniform(-10, 10); break;
        case WGML_I32: ((int32_t *)p)[i] = (int32_t)th_uniform(-1e6, 1e6); break;
        case WGML_U32: ((uint32_t *)p)[i] = (uint32_t)th_uniform(0, 4294967295.0); break;
        case WGML_BOOL: p[i] = th_uniform(0, 1) < 0.5 ? 0 : 1; break;
        }
    }
    return p;
}

static inline wgml_tensor *cu_upload(wgml_graph *g, wgml_dtype dt, int rank, const int64_t *shape, const void *data) {
    wgml_tensor *t = wgml_tensor_new(g, dt, rank, shape);
    if (t && data && wgml_tensor_write(t, data, wgml_tensor_nbytes(t))) {
        th_check(false, "upload: %s", wgml_last_error(T.ctx));
        return NULL;
    }
    return t;
}

/* Reads t back (NULL and a failure when t is NULL or the read fails). */
static inline void *cu_read(wgml_tensor *t) {
    if (!t) {
        th_check(false, "read: tensor is NULL (%s)", wgml_last_error(T.ctx));
        return NULL;
    }
    size_t n = wgml_tensor_nbytes(t);
    void *p = malloc(n + 4);
    if (wgml_tensor_read(t, p, n)) {
        th_check(false, "read: %s", wgml_last_error(T.ctx));
        free(p);
        return NULL;
    }
    return p;
}

/* Exact comparison of n elements of size es; reports the first mismatch. */
static inline bool cu_same(const char *name, const void *got, const void *ref, int64_t n, size_t es) {
    if (!got) return th_check(false, "%s: no result", name);
    const unsigned char *a = got, *b = ref;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i * es, b + i * es, es)) {
            if (first < 0) first = i;
            bad++;
        }
    if (bad == 0) printf("  ok %-60s (%lld elements exact)\n", name, (long long)n);
    return th_check(bad == 0, "%s: %lld of %lld elements differ, first at %lld", name, (long long)bad, (long long)n,
                    (long long)first);
}

/* Reads t, checks its shape and compares it exactly with ref; frees what it read. */
static inline bool cu_check(const char *name, wgml_tensor *t, int rank, const int64_t *shape, const void *ref) {
    if (!t) return th_check(false, "%s: op failed: %s", name, wgml_last_error(T.ctx));
    bool shape_ok = wgml_tensor_rank(t) == rank;
    for (int i = 0; shape_ok && i < rank; i++) shape_ok = wgml_tensor_dim(t, i) == shape[i];
    if (!th_check(shape_ok, "%s: output shape", name)) return false;
    void *got = cu_read(t);
    bool ok = cu_same(name, got, ref, wgml_tensor_numel(t), wgml_dtype_size(wgml_tensor_dtype(t)));
    free(got);
    return ok;
}

static inline int64_t cu_numel(int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

static inline void cu_unravel(int64_t i, int rank, const int64_t *shape, int64_t *c) {
    for (int d = rank - 1; d >= 0; d--) {
        c[d] = i % shape[d];
        i /= shape[d];
    }
}

static inline int64_t cu_ravel(int rank, const int64_t *shape, const int64_t *c) {
    int64_t i = 0;
    for (int d = 0; d < rank; d++) i = i * shape[d] + c[d];
    return i;
}

/* "[2, 3]" into b (64 bytes). */
static inline char *tshape_host(char *b, int rank, const int64_t *shape) {
    int u = snprintf(b, 64, "[");
    for (int i = 0; i < rank && u < 60; i++) u += snprintf(b + u, (size_t)(64 - u), "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(b + u, (size_t)(64 - u), "]");
    return b;
}

static const wgml_dtype CU_DTYPES[4] = {WGML_F32, WGML_I32, WGML_U32, WGML_BOOL};

#endif
