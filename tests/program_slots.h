/* Value slots for tests that call the program layer's op registry (src/program) directly, as
 * the program runner does: argument values in schema order, the output id(s) last, the
 * output's serialised shape and dtype set beforehand. Header-only, for the tests/test_program_*.c
 * files (which link the harness: its context poisons outputs with NaN). */
#ifndef WGML_TEST_PROGRAM_SLOTS_H
#define WGML_TEST_PROGRAM_SLOTS_H

#include "program/program.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS_MAX 32

typedef struct slots {
    wgml_ctx *ctx;
    wgml_graph *g;
    pv v[SLOTS_MAX];
    int n;
    int64_t lists[SLOTS_MAX][WGML_MAX_RANK];
    int32_t ids[SLOTS_MAX][4];
} slots;

static inline void s_init(slots *s, wgml_ctx *ctx, wgml_graph *g) {
    memset(s, 0, sizeof *s);
    s->ctx = ctx, s->g = g;
}

static inline int32_t s_new(slots *s, pv_kind k) {
    pv *p = &s->v[s->n];
    memset(p, 0, sizeof *p);
    p->kind = k, p->constant_id = -1;
    return s->n++;
}
static inline int32_t s_int(slots *s, int64_t i) {
    int32_t id = s_new(s, PV_INT);
    s->v[id].i = i;
    return id;
}
static inline int32_t s_bool(slots *s, int b) {
    int32_t id = s_new(s, PV_BOOL);
    s->v[id].i = b != 0;
    return id;
}
static inline int32_t s_double(slots *s, double d) {
    int32_t id = s_new(s, PV_DOUBLE);
    s->v[id].d = d;
    return id;
}
static inline int32_t s_null(slots *s) { return s_new(s, PV_NULL); }
static inline int32_t s_list(slots *s, int n, const int64_t *l) {
    int32_t id = s_new(s, PV_INTLIST);
    if (n) memcpy(s->lists[id], l, (size_t)n * sizeof *l);
    s->v[id].list64 = s->lists[id], s->v[id].n = (size_t)n;
    return id;
}
static inline int32_t s_vlist(slots *s, int n, const int32_t *ids) {
    int32_t id = s_new(s, PV_VALUELIST);
    memcpy(s->ids[id], ids, (size_t)n * sizeof *ids);
    s->v[id].ids = s->ids[id], s->v[id].n = (size_t)n;
    return id;
}

/* The wgml element size of a delegate dtype (int64 is computed as i32, float64 as f32). */
static inline size_t s_elem(int vk) { return vk == VK_BOOL ? 1 : 4; }

/* A tensor slot of the delegate dtype vk and dims; with data (in wgml's layout: f32, i32 or a
 * byte per bool), a built tensor holding it, else an output to be computed. */
static inline int32_t s_tensor(slots *s, int vk, int rank, const int64_t *dims, const void *data) {
    int32_t id = s_new(s, PV_TENSOR);
    pv *p = &s->v[id];
    p->vk_dtype = vk, p->rank = rank;
    if (rank) memcpy(p->dims, dims, (size_t)rank * sizeof *dims);
    if (data) {
        int64_t n = 1;
        for (int i = 0; i < rank; i++) n *= dims[i];
        p->t = wgml_tensor_new(s->g, (wgml_dtype)prog_vk_to_wgml(vk), rank, dims);
        if (p->t) wgml_tensor_write(p->t, data, (size_t)n * s_elem(vk));
    }
    return id;
}

/* Builds op over the slots (args as the runner passes them); the builder's status. */
static inline wgml_status s_call(slots *s, const char *op, const int32_t *args, int nargs) {
    prog_op_fn fn = prog_op_find(op);
    if (!fn) {
        fprintf(stderr, "test: %s is not registered\n", op);
        return WGML_ERR_UNSUPPORTED;
    }
    pbuild b = {.ctx = s->ctx, .g = s->g, .v = s->v, .nv = SLOTS_MAX, .op = op};
    return fn(&b, args, nargs);
}

static inline int64_t s_numel(const slots *s, int32_t id) {
    int64_t n = 1;
    for (int i = 0; i < s->v[id].rank; i++) n *= s->v[id].dims[i];
    return n;
}

/* The computed tensor of slot id read back as doubles (malloc'ed), NULL when it is not there. */
static inline double *s_read(slots *s, int32_t id) {
    const pv *p = &s->v[id];
    if (!p->t) return NULL;
    int64_t n = wgml_tensor_numel(p->t);
    wgml_dtype dt = wgml_tensor_dtype(p->t);
    size_t es = wgml_dtype_size(dt);
    unsigned char *raw = malloc((size_t)n * es + 1);
    double *out = malloc((size_t)n * sizeof *out + 1);
    if (!raw || !out || wgml_tensor_read(p->t, raw, (size_t)n * es)) {
        free(raw), free(out);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (dt == WGML_F32) { float f; memcpy(&f, raw + 4 * i, 4); out[i] = f; }
        else if (dt == WGML_I32) { int32_t k; memcpy(&k, raw + 4 * i, 4); out[i] = k; }
        else out[i] = raw[i];
    }
    free(raw);
    return out;
}

#endif
