/* The argument readers and the output check that every file of the op registry (ops_*.c)
 * shares: a builder reads its arguments from the value slots by position, checks their
 * kinds and stores what it made in the output slot through put(), which checks the serialised
 * shape and dtype. Static inline: each registry file gets its own copy of the few it uses. */
#ifndef WGML_PROGRAM_OPS_ARGS_H
#define WGML_PROGRAM_OPS_ARGS_H

#include "gpu/gpu.h"
#include "program/program.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- argument readers ---------------------------------------------------------------------- */

static inline wgml_status fail(pbuild *b, wgml_status s, const char *what, int arg) {
    return wgml_set_error(b->ctx, s, "program: %s: argument %d: %s", b->op, arg, what);
}

static inline const pv *val(pbuild *b, const int32_t *args, int i) {
    return &b->v[args[i]]; /* ids were range-checked before the builder runs */
}

/* The tensor of argument i, or NULL (an error set) when it is not a built tensor. */
static inline wgml_tensor *T(pbuild *b, const int32_t *args, int i) {
    const pv *x = val(b, args, i);
    if (x->kind != PV_TENSOR || !x->t) {
        fail(b, x->unsupported ? WGML_ERR_UNSUPPORTED : WGML_ERR_ARG,
             x->kind != PV_TENSOR ? "expected a tensor"
             : x->unsupported     ? "a tensor with a zero-size dimension, rank over 8 or too many elements"
                                  : "tensor used before it is computed",
             i);
        return NULL;
    }
    return x->t;
}

static inline int is_null(pbuild *b, const int32_t *args, int i) { return val(b, args, i)->kind == PV_NULL; }
static inline int is_tensor(pbuild *b, const int32_t *args, int i) { return val(b, args, i)->kind == PV_TENSOR; }

/* A number argument (Int, Bool, SymInt or Double); def when Null. *ok cleared on a wrong kind. */
static inline double num(pbuild *b, const int32_t *args, int i, double def, int *ok) {
    const pv *x = val(b, args, i);
    switch (x->kind) {
    case PV_NULL: return def;
    case PV_INT: case PV_BOOL: case PV_SYMINT: return (double)x->i;
    case PV_DOUBLE: return x->d;
    default:
        if (*ok) fail(b, WGML_ERR_ARG, "expected a number", i);
        *ok = 0;
        return def;
    }
}

/* Whether value x is an integer, into *out: an Int, Bool or SymInt, or a Double of an integral
 * value. The Vulkan serialiser makes one value of equal scalars (vulkan_graph_builder.py keys
 * them by value, and 0 == 0.0 in Python), so an integer argument can be a Double that another
 * argument needed (Swin's select_copy(x, 0.0, 0.0)); ExecuTorch's extract_scalar converts it. */
static inline int as_integer(const pv *x, int64_t *out) {
    if (x->kind == PV_INT || x->kind == PV_BOOL || x->kind == PV_SYMINT) return *out = x->i, 1;
    if (x->kind == PV_DOUBLE && x->d == floor(x->d) && fabs(x->d) <= 9007199254740992.0) return *out = (int64_t)x->d, 1;
    return 0;
}

/* An integer argument, exactly (a number through double would lose INT64_MAX, the "to the
 * end" of slices); def when Null. */
static inline int64_t inum(pbuild *b, const int32_t *args, int i, int64_t def, int *ok) {
    const pv *x = val(b, args, i);
    int64_t v;
    if (as_integer(x, &v)) return v;
    if (x->kind == PV_NULL) return def;
    if (*ok) fail(b, WGML_ERR_ARG, "expected an integer", i);
    *ok = 0;
    return def;
}

/* inum clamped into int's range (dims, flags): a wild value stays wild but defined. */
static inline int iarg(pbuild *b, const int32_t *args, int i, int64_t def, int *ok) {
    int64_t v = inum(b, args, i, def, ok);
    return v < -1000000000 ? -1000000000 : v > 1000000000 ? 1000000000 : (int)v;
}

/* An int list argument copied into out[0..max); an Int is a list of one. -1 on a wrong kind. */
static inline int ilist(pbuild *b, const int32_t *args, int i, int64_t *out, int max) {
    const pv *x = val(b, args, i);
    if (x->kind != PV_BOOL && as_integer(x, &out[0])) return 1;
    if (x->kind == PV_NULL) return 0;
    if (x->kind != PV_INTLIST || x->n > (size_t)max) {
        fail(b, WGML_ERR_ARG, x->kind == PV_INTLIST ? "int list too long" : "expected an int list", i);
        return -1;
    }
    for (size_t k = 0; k < x->n; k++) out[k] = x->list64[k];
    return (int)x->n;
}

static inline const char *dims_str(char *buf, size_t n, int rank, const int64_t *d) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)d[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Stores t as value id's tensor; it must have the serialised shape (reshaped to it when
 * `reshape` and the element counts agree) and the dtype the serialised one is computed in. */
static inline wgml_status put(pbuild *b, int32_t id, wgml_tensor *t, int reshape) {
    if (!t) return wgml_last_status(b->ctx) ? wgml_last_status(b->ctx) : WGML_ERR_ARG;
    pv *o = &b->v[id];
    if (o->kind != PV_TENSOR || o->unsupported)
        return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: output value %d is not a tensor", b->op, id);
    int want = prog_vk_to_wgml(o->vk_dtype);
    if (want < 0 || (wgml_dtype)want != wgml_tensor_dtype(t))
        return wgml_set_error(b->ctx, WGML_ERR_DTYPE, "program: %s: output is %s, the program says %s", b->op,
                              wgml_dtype_name(wgml_tensor_dtype(t)), prog_vk_dtype_name(o->vk_dtype));
    int rank = wgml_tensor_rank(t);
    int same = rank == o->rank;
    int64_t shape[WGML_MAX_RANK], numel = 1;
    for (int i = 0; i < rank; i++) {
        shape[i] = wgml_tensor_dim(t, i);
        if (same && shape[i] != o->dims[i]) same = 0;
    }
    for (int i = 0; i < o->rank; i++) numel *= o->dims[i];
    if (!same) {
        if (!reshape || numel != wgml_tensor_numel(t)) {
            char a[160], c[160];
            return wgml_set_error(b->ctx, WGML_ERR_SHAPE, "program: %s: output shape %s, the program says %s", b->op,
                                  dims_str(a, sizeof a, rank, shape), dims_str(c, sizeof c, o->rank, o->dims));
        }
        t = wgml_reshape(b->g, t, o->rank, o->dims);
        if (!t) return wgml_last_status(b->ctx);
    }
    o->t = t;
    return WGML_OK;
}

#define OUT(k) args[nargs - 1 - (k)]
#define NEED(n)                                                                                             \
    do {                                                                                                    \
        if (nargs != (n))                                                                                   \
            return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: %d arguments, expected %d", b->op, nargs, \
                                  (n));                                                                     \
    } while (0)

/* Normalises dim into [0, rank). */
static inline int ndim(pbuild *b, int64_t d, int rank, int arg, int *ok) {
    int r = rank ? rank : 1;
    if (d < -r || d >= r) {
        if (*ok) fail(b, WGML_ERR_ARG, "dim out of range", arg);
        *ok = 0;
        return 0;
    }
    return (int)(d < 0 ? d + r : d);
}

/* An i32 or bool operand of an op that computes in f32 (comparisons, where): converted with
 * wgml_cast, exact for integers up to 2^24 in magnitude (labels, counts, indices: what the
 * exporter's decompositions compare); f32 passes through. */
static inline wgml_tensor *as_f32(pbuild *b, wgml_tensor *t) {
    return t && wgml_tensor_dtype(t) != WGML_F32 ? wgml_cast(b->g, t, WGML_F32) : t;
}

/* An optional tensor argument: NULL when Null; an error when neither. */
static inline wgml_status opt_tensor(pbuild *b, const int32_t *args, int i, wgml_tensor **out) {
    *out = NULL;
    if (is_null(b, args, i)) return WGML_OK;
    *out = T(b, args, i);
    return *out ? WGML_OK : WGML_ERR_ARG;
}

/* The elements of a ValueList argument (its ids), or NULL with an error. */
static inline const int32_t *vlist(pbuild *b, const int32_t *args, int i, size_t *n) {
    const pv *x = val(b, args, i);
    *n = 0;
    if (x->kind != PV_VALUELIST) {
        fail(b, WGML_ERR_ARG, "expected a value list", i);
        return NULL;
    }
    *n = x->n;
    return x->ids;
}

/* The output of fn(g, args[0], args[1]) in the output slot: the registry's operators that are
 * one public op of two tensors (mm, bmm, embedding). */
static inline wgml_status put_op2(pbuild *b, const int32_t *args, int nargs,
                                  wgml_tensor *(*fn)(wgml_graph *, wgml_tensor *, wgml_tensor *)) {
    wgml_tensor *x = T(b, args, 0), *y = x ? T(b, args, 1) : NULL;
    return y ? put(b, OUT(0), fn(b->g, x, y), 0) : WGML_ERR_ARG;
}

/* A persistent tensor holding host data (index tensors the composites make). */
static inline wgml_tensor *host_tensor(pbuild *b, wgml_dtype dt, int rank, const int64_t *shape, const void *data, size_t bytes) {
    wgml_tensor *t = wgml_tensor_new(b->g, dt, rank, shape);
    if (t && wgml_tensor_write(t, data, bytes)) return NULL;
    return t;
}

#endif
