/* Elementwise ops: binary arithmetic with NumPy broadcasting (and tensor-scalar forms), unary
 * functions, comparisons and logical ops giving bool tensors, and where.
 *
 * Four kernels: ew_binary (f32 out), ew_unary, ew_bool (bool out, one thread per u32 word of four
 * bools) and ew_where. Each one has a contiguous fast path (every operand has the output's shape,
 * is a one-element tensor, or is a uniform scalar: vec4 when the element count is a multiple of
 * 4, several vectors per thread) and, for the multi-operand kernels, a broadcast path that
 * computes each operand's offset from the output index with shapes/strides from the uniform.
 * Before that the dimensions are coalesced (size-1 dims dropped, neighbours merged when every
 * operand is contiguous or broadcast across both), so [A, B, C] + [C] runs as rank 2.
 *
 * The operands' binding types and loaders (array<vec4<f32>> / array<f32> / bool words, splats of
 * one-element tensors and of the uniform scalar) come from a prelude generated here, so each
 * kernel body is written once. */
#include "graph/graph.h"
#include "ops/elementwise/elementwise_grad.h"
#include "ops/elementwise/ew_ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define EW_WG 256 /* threads per workgroup in every elementwise kernel */
#define EW_PT 4   /* vectors per thread on the fast paths */

/* ------------------------------------------------------------------ operand preludes */

typedef enum opnd_kind {
    OPND_FULL,    /* the output's shape: read in step with the output */
    OPND_ONE,     /* a one-element tensor: splat */
    OPND_SCALAR,  /* a number from the uniform (p.scalar): splat; its binding is GRAPH_UNUSED */
    OPND_STRIDED, /* broadcast: read at an offset computed from the output index */
} opnd_kind;

typedef struct opnd {
    const char *name; /* WGSL suffix: ld_<name>, el_<name>; the binding is named <name> */
    wgml_tensor *t;   /* bound tensor (NULL for OPND_SCALAR: its slot is GRAPH_UNUSED) */
    wgml_dtype dtype; /* F32, BOOL, or I32 (the integer binary kernel) */
    opnd_kind kind;
    bool unit;        /* broadcast path: stride 1 in the innermost (coalesced) dimension */
} opnd;

typedef struct text {
    char buf[4096];
    size_t len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (t->len < sizeof t->buf) {
        int k = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
        if (k > 0) t->len += (size_t)k;
    }
    va_end(ap);
}

/* How ld_<x>(j) reads its V (see emit_operand). */
typedef enum lanes {
    LANES_ONE,    /* V is f32 (or a splat): the element at j */
    LANES_VECTOR, /* fast path, V = vec4: vector j, elements 4j..4j+3 */
    LANES_OFFSET, /* broadcast path, V = vec4: the 4 elements from element offset j (a multiple
                     of 4) when the operand is contiguous in the innermost dim, else a splat of
                     the element at j */
} lanes;

/* Emits operand o's binding and two loaders:
 *   ld_<x>(j) -> V   as `mode` says;
 *   el_<x>(o) -> f32 the element at offset o.
 * vec_ok: the element count is a multiple of 4 (a FULL f32 operand may bind as vec4 on the fast
 * path). Bools load as 0.0 / 1.0. */
static void emit_operand(text *t, const opnd *o, lanes mode, bool vec_ok) {
    const char *x = o->name;
    bool is_bool = o->dtype == WGML_BOOL;
    const char *et = o->dtype == WGML_I32 ? "i32" : "f32"; /* the element type el_ returns */
    bool one = o->kind == OPND_ONE || o->kind == OPND_SCALAR;
    bool vec_bind = !is_bool && !one &&
                    ((mode == LANES_VECTOR && o->kind == OPND_FULL && vec_ok) || (mode == LANES_OFFSET && o->unit));
    put(t, "//!bindings read(%s: array<%s>)\n", x,
        is_bool ? "u32" : vec_bind ? (o->dtype == WGML_I32 ? "vec4<i32>" : "vec4<f32>") : et);
    /* one element at an offset expression, as f32 */
    char e0[64], ej[64], eo[64];
    if (is_bool) {
        put(t, "fn byte_%s(o: u32) -> f32 { return select(0.0, 1.0, ((%s[o >> 2u] >> ((o & 3u) * 8u)) & 255u) != 0u); }\n",
            x, x);
        put(t, "fn word_%s(w: u32) -> vec4<f32> { let v = (vec4<u32>(%s[w]) >> vec4<u32>(0u, 8u, 16u, 24u)) & "
               "vec4<u32>(255u); return select(vec4<f32>(0.0), vec4<f32>(1.0), v != vec4<u32>(0u)); }\n", x, x);
        snprintf(e0, sizeof e0, "byte_%s(0u)", x);
        snprintf(ej, sizeof ej, "byte_%s(j)", x);
        snprintf(eo, sizeof eo, "byte_%s(o)", x);
    } else if (vec_bind) {
        snprintf(e0, sizeof e0, "%s[0u].x", x);
        snprintf(ej, sizeof ej, "%s[j >> 2u][j & 3u]", x);
        snprintf(eo, sizeof eo, "%s[o >> 2u][o & 3u]", x);
    } else {
        snprintf(e0, sizeof e0, "%s[0u]", x);
        snprintf(ej, sizeof ej, "%s[j]", x);
        snprintf(eo, sizeof eo, "%s[o]", x);
    }
    if (o->kind == OPND_SCALAR) { /* an integer kernel's scalar is an integer held as f32 */
        put(t, "fn ld_%s(j: u32) -> V { return V(%s(p.scalar)); }\n", x, et);
        put(t, "fn el_%s(o: u32) -> %s { return %s(p.scalar); }\n", x, et, et);
        return;
    }
    if (o->kind == OPND_ONE) {
        put(t, "fn ld_%s(j: u32) -> V { return V(%s); }\n", x, e0);
        put(t, "fn el_%s(o: u32) -> %s { return %s; }\n", x, et, e0);
        return;
    }
    if (mode == LANES_ONE || (mode == LANES_OFFSET && !o->unit))
        put(t, "fn ld_%s(j: u32) -> V { return V(%s); }\n", x, ej);
    else if (mode == LANES_OFFSET) /* contiguous in the innermost dim, j a multiple of 4 */
        put(t, is_bool ? "fn ld_%s(j: u32) -> V { return word_%s(j >> 2u); }\n"
                       : "fn ld_%s(j: u32) -> V { return %s[j >> 2u]; }\n", x, x);
    else if (is_bool)
        put(t, "fn ld_%s(j: u32) -> V { return word_%s(j); }\n", x, x);
    else if (vec_bind)
        put(t, "fn ld_%s(j: u32) -> V { return %s[j]; }\n", x, x);
    else /* four elements of a tensor whose count is not a multiple of 4 (bool outputs) */
        put(t, "fn ld_%s(j: u32) -> V { let m = p.n - 1u; return V(%s[min(4u * j, m)], %s[min(4u * j + 1u, m)], "
               "%s[min(4u * j + 2u, m)], %s[min(4u * j + 3u, m)]); }\n", x, x, x, x, x);
    put(t, "fn el_%s(o: u32) -> %s { return %s; }\n", x, et, eo);
}

/* ------------------------------------------------------------------ broadcast layout */

#define EW_MAX_IN 3

/* The output shape and each operand's element strides over it (0 where it broadcasts), with
 * size-1 dims dropped and neighbouring dims merged where every operand allows. */
typedef struct layout {
    int rank;
    int64_t shape[WGML_MAX_RANK];
    int64_t st[EW_MAX_IN][WGML_MAX_RANK];
} layout;

static void layout_make(layout *L, int rank, const int64_t *shape, wgml_tensor *const *ts, int n) {
    int64_t st[EW_MAX_IN][WGML_MAX_RANK];
    for (int k = 0; k < n; k++) {
        const wgml_tensor *t = ts[k];
        int64_t stride = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int td = d - (rank - t->rank);
            if (td < 0 || t->shape[td] == 1) {
                st[k][d] = 0;
            } else {
                st[k][d] = stride;
                stride *= t->shape[td];
            }
        }
    }
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (shape[d] == 1) continue;
        bool merge = r > 0;
        for (int k = 0; k < n && merge; k++) merge = L->st[k][r - 1] == st[k][d] * shape[d];
        if (merge) {
            L->shape[r - 1] *= shape[d];
            for (int k = 0; k < n; k++) L->st[k][r - 1] = st[k][d];
        } else {
            L->shape[r] = shape[d];
            for (int k = 0; k < n; k++) L->st[k][r] = st[k][d];
            r++;
        }
    }
    L->rank = r;
}

/* ------------------------------------------------------------------ recording */

typedef enum ew_kernel { K_BINARY, K_BOOL, K_WHERE, K_BINARY_INT } ew_kernel;
static const char *const KERNEL_FILE[] = {"ew_binary", "ew_bool", "ew_where", "ew_binary_int"};
/* the op constants each kernel's switch names (ew_ops.h) */
static const char *const KERNEL_OPS[] = {EW_WGSL_BINARY, EW_WGSL_BOOL, "", EW_WGSL_BINARY};

/* Output shape of a broadcast of n tensors; on failure an error naming every shape. */
static wgml_status broadcast_all(wgml_ctx *ctx, const char *op, wgml_tensor *const *ts, const char *const *names,
                                 int n, int *rank, int64_t *shape) {
    *rank = ts[0]->rank;
    memcpy(shape, ts[0]->shape, sizeof(int64_t) * (size_t)ts[0]->rank);
    for (int k = 1; k < n; k++) {
        int64_t next[WGML_MAX_RANK];
        if (broadcast_shapes(*rank, shape, ts[k]->rank, ts[k]->shape, rank, next)) {
            if (n == 2)
                return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s and %s %s do not broadcast", op, names[0],
                                      tshape(ts[0]), names[1], tshape(ts[1]));
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s, %s %s and %s %s do not broadcast", op, names[0],
                                  tshape(ts[0]), names[1], tshape(ts[1]), names[2], tshape(ts[2]));
        }
        memcpy(shape, next, sizeof next);
    }
    return WGML_OK;
}

/* Records one dispatch of a multi-operand kernel. ops[0..n) in binding order (an OPND_SCALAR
 * operand's slot is GRAPH_UNUSED); the output has out_shape. */
static wgml_tensor *ew_record(wgml_graph *g, const char *op, ew_kernel kernel, int code, opnd *ops, int n,
                              float alpha, float scalar, int out_rank, const int64_t *out_shape) {
    wgml_ctx *ctx = graph_ctx(g);
    int64_t numel = shape_numel(out_rank, out_shape);
    if (numel >= ((int64_t)1 << 31)) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %lld output elements is more than the kernel indexes", op,
                       (long long)numel);
        return NULL;
    }
    bool bcast = false;
    for (int k = 0; k < n; k++) {
        if (ops[k].kind == OPND_SCALAR) continue;
        ops[k].kind = ops[k].t->numel == numel ? OPND_FULL : ops[k].t->numel == 1 ? OPND_ONE : OPND_STRIDED;
        if (ops[k].kind == OPND_STRIDED) bcast = true;
    }
    bool vec_ok = numel % 4 == 0;

    /* uniform (ew_walk's Params): shape, three stride arrays (zero for an absent third operand),
     * then n, nv, alpha, scalar, rank, 3 pads */
    uint32_t u[8 + 8 * EW_MAX_IN + 8];
    memset(u, 0, sizeof u);
    layout L = {0};
    if (bcast) {
        wgml_tensor *ts[EW_MAX_IN];
        for (int k = 0; k < n; k++) ts[k] = ops[k].kind == OPND_SCALAR ? ops[0].t : ops[k].t;
        layout_make(&L, out_rank, out_shape, ts, n);
        for (int d = 0; d < L.rank; d++) {
            u[d] = (uint32_t)L.shape[d];
            for (int k = 0; k < n; k++) u[8 + 8 * k + d] = ops[k].kind == OPND_SCALAR ? 0 : (uint32_t)L.st[k][d];
        }
        for (int k = 0; k < n; k++) ops[k].unit = ops[k].kind != OPND_SCALAR && L.st[k][L.rank - 1] == 1;
    }
    int64_t inner = bcast ? L.shape[L.rank - 1] : 0;
    /* lanes of V: the fast path uses vec4 when the count is a multiple of 4; the broadcast path
     * of the f32-output kernels when the innermost dim is (so a vec4 never crosses a row); the
     * bool kernel always packs 4 elements (one output word) per thread */
    int vw = kernel == K_BOOL ? 4 : !bcast ? (vec_ok ? 4 : 1) : (inner % 4 == 0 ? 4 : 1);
    lanes mode = vw == 1 ? LANES_ONE : !bcast ? LANES_VECTOR : kernel == K_BOOL ? LANES_ONE : LANES_OFFSET;
    uint64_t nv = kernel == K_BOOL ? (uint64_t)(numel + 3) / 4 : (uint64_t)numel / (uint64_t)vw;
    uint32_t *tail = u + 8 + 8 * EW_MAX_IN;
    tail[0] = (uint32_t)numel;
    tail[1] = (uint32_t)nv;
    memcpy(&tail[2], &alpha, 4);
    memcpy(&tail[3], &scalar, 4);
    tail[4] = bcast ? (uint32_t)L.rank : 0;
    size_t ubytes = sizeof u;

    text pre = {.len = 0};
    /* broadcast path: 4 consecutive elements per thread when the innermost dimension is long
     * enough for the step-and-wrap walk to save index arithmetic, else 1 */
    int pt = !bcast ? EW_PT : inner >= 4 ? 4 : 1;
    put(&pre, "const OP: u32 = %du;\nconst BCAST: bool = %s;\nconst PT: u32 = %du;\nconst VW: u32 = %du;\n%s", code,
        bcast ? "true" : "false", pt, vw, KERNEL_OPS[kernel]);
    const char *vt = kernel == K_BINARY_INT ? (vw == 4 ? "vec4<i32>" : "i32") : vw == 4 ? "vec4<f32>" : "f32";
    put(&pre, "alias V = %s;\nalias VU = %s;\nalias VB = %s;\n", vt,
        vw == 4 ? "vec4<u32>" : "u32", vw == 4 ? "vec4<bool>" : "bool");
    for (int k = 0; k < n; k++) emit_operand(&pre, &ops[k], mode, vec_ok);
    if (pre.len >= sizeof pre.buf) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: kernel prelude too long", op);
        return NULL;
    }

    uint64_t groups = kernel == K_BOOL ? (nv + EW_WG - 1) / EW_WG : (nv + (uint64_t)(EW_WG * pt) - 1) / (uint64_t)(EW_WG * pt);
    wgml_tensor *out = graph_output(g, op, kernel == K_BOOL ? WGML_BOOL : kernel == K_BINARY_INT ? WGML_I32 : WGML_F32,
                                    out_rank, out_shape);
    if (!out) return NULL;
    wgml_tensor *ro[EW_MAX_IN];
    for (int k = 0; k < n; k++) ro[k] = ops[k].kind == OPND_SCALAR ? GRAPH_UNUSED : ops[k].t;
    if (graph_dispatch(g, op, KERNEL_FILE[kernel], pre.buf, ro, n, &out, 1, u, ubytes, groups)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

/* Shared argument checks: present, of dtype want, recorded in g. */
static bool bad_operand(wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t, wgml_dtype want) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, arg, t) || check_dtype(ctx, op, arg, t, want)) return true;
    return check_graph(ctx, g, op, arg, t) != WGML_OK;
}

/* Two tensor operands of dtype dt (checked, broadcast together) through kernel with op code. */
static wgml_tensor *record_pair(wgml_graph *g, const char *op, ew_kernel kernel, int code, wgml_tensor *a,
                                wgml_tensor *b, wgml_dtype dt, float alpha) {
    if (bad_operand(g, op, "a", a, dt) || bad_operand(g, op, "b", b, dt)) return NULL;
    int rank;
    int64_t shape[WGML_MAX_RANK];
    wgml_tensor *ts[2] = {a, b};
    static const char *const names[2] = {"a", "b"};
    if (broadcast_all(graph_ctx(g), op, ts, names, 2, &rank, shape)) return NULL;
    opnd ops[2] = {{"a", a, dt, OPND_FULL, false}, {"b", b, dt, OPND_FULL, false}};
    return ew_record(g, op, kernel, code, ops, 2, alpha, 0.0f, rank, shape);
}

/* ------------------------------------------------------------------ binary */

/* the op names (error messages, graph records) from the table: a and s forms */
#define BIN_NAME_(NAME, name, value, i32) [value] = #name,
#define BIN_SCALAR_NAME_(NAME, name, value, i32) [value] = #name "_scalar",
static const char *const BINARY_NAME[] = {WGML_BINARY_OPS(BIN_NAME_)};
static const char *const BINARY_SCALAR_NAME[] = {WGML_BINARY_OPS(BIN_SCALAR_NAME_)};
#define N_BINARY EW_N_BINARY

/* The ops ew_binary_int computes on i32 operands, the table's i32 column: true division and
 * pow give floats in PyTorch, so they stay f32-only. The refusal lists the column's ops. */
static bool int_binary_ok(wgml_graph *g, const char *op, wgml_binary_op opc) {
    if (ew_binary_int_ok((int)opc)) return true;
    text ok = {.len = 0};
    for (int c = 0; c < N_BINARY; c++)
        if (ew_binary_int_ok(c)) put(&ok, "%s%s", ok.len ? ", " : "", BINARY_NAME[c]);
    wgml_set_error(graph_ctx(g), WGML_ERR_DTYPE, "%s: i32 operands only for %s", op, ok.buf);
    return false;
}

wgml_tensor *wgml_binary(wgml_graph *g, wgml_binary_op opc, wgml_tensor *a, wgml_tensor *b, float alpha) {
    if (!g) return NULL;
    if ((unsigned)opc >= (unsigned)N_BINARY) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "binary: unknown op %d", (int)opc);
        return NULL;
    }
    const char *op = BINARY_NAME[opc];
    /* two i32 operands: the integer kernel (no gradient: integers are not trainable) */
    bool ints = a && b && a->dtype == WGML_I32 && b->dtype == WGML_I32;
    if (ints && !int_binary_ok(g, op, opc)) return NULL;
    if (ints) return record_pair(g, op, K_BINARY_INT, (int)opc, a, b, WGML_I32, alpha);
    return ew_grad_binary(g, record_pair(g, op, K_BINARY, (int)opc, a, b, WGML_F32, alpha), (int)opc, a, b, alpha);
}

wgml_tensor *wgml_binary_scalar(wgml_graph *g, wgml_binary_op opc, wgml_tensor *a, float s, float alpha) {
    if (!g) return NULL;
    if ((unsigned)opc >= (unsigned)N_BINARY) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "binary_scalar: unknown op %d", (int)opc);
        return NULL;
    }
    const char *op = BINARY_SCALAR_NAME[opc];
    if (a && a->dtype == WGML_I32) { /* the integer kernel: s and alpha must be integers */
        if (!int_binary_ok(g, op, opc)) return NULL;
        if (s != nearbyintf(s) || alpha != nearbyintf(alpha) || fabsf(s) > 16777216.0f || fabsf(alpha) > 16777216.0f) {
            wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "%s: an i32 tensor needs an integer scalar and alpha below 2^24 (got %g, %g)",
                           op, (double)s, (double)alpha);
            return NULL;
        }
        if (bad_operand(g, op, "a", a, WGML_I32)) return NULL;
        opnd iops[2] = {{"a", a, WGML_I32, OPND_FULL, false}, {"b", NULL, WGML_I32, OPND_SCALAR, false}};
        return ew_record(g, op, K_BINARY_INT, (int)opc, iops, 2, alpha, s, a->rank, a->shape);
    }
    if (bad_operand(g, op, "a", a, WGML_F32)) return NULL;
    opnd ops[2] = {{"a", a, WGML_F32, OPND_FULL, false}, {"b", NULL, WGML_F32, OPND_SCALAR, false}};
    return ew_grad_binary_scalar(g, ew_record(g, op, K_BINARY, (int)opc, ops, 2, alpha, s, a->rank, a->shape), (int)opc, a,
                                 s, alpha);
}

wgml_tensor *wgml_add(wgml_graph *g, wgml_tensor *a, wgml_tensor *b, float alpha) { return wgml_binary(g, WGML_BIN_ADD, a, b, alpha); }
wgml_tensor *wgml_sub(wgml_graph *g, wgml_tensor *a, wgml_tensor *b, float alpha) { return wgml_binary(g, WGML_BIN_SUB, a, b, alpha); }
wgml_tensor *wgml_mul(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_binary(g, WGML_BIN_MUL, a, b, 1.0f); }
wgml_tensor *wgml_div(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_binary(g, WGML_BIN_DIV, a, b, 1.0f); }
wgml_tensor *wgml_minimum(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_binary(g, WGML_BIN_MINIMUM, a, b, 1.0f); }
wgml_tensor *wgml_maximum(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_binary(g, WGML_BIN_MAXIMUM, a, b, 1.0f); }
wgml_tensor *wgml_pow(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_binary(g, WGML_BIN_POW, a, b, 1.0f); }
wgml_tensor *wgml_div_trunc(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_binary(g, WGML_BIN_DIV_TRUNC, a, b, 1.0f); }
wgml_tensor *wgml_div_floor(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_binary(g, WGML_BIN_DIV_FLOOR, a, b, 1.0f); }

wgml_tensor *wgml_add_scalar(wgml_graph *g, wgml_tensor *a, float s, float alpha) { return wgml_binary_scalar(g, WGML_BIN_ADD, a, s, alpha); }
wgml_tensor *wgml_sub_scalar(wgml_graph *g, wgml_tensor *a, float s, float alpha) { return wgml_binary_scalar(g, WGML_BIN_SUB, a, s, alpha); }
wgml_tensor *wgml_mul_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_binary_scalar(g, WGML_BIN_MUL, a, s, 1.0f); }
wgml_tensor *wgml_div_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_binary_scalar(g, WGML_BIN_DIV, a, s, 1.0f); }
wgml_tensor *wgml_minimum_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_binary_scalar(g, WGML_BIN_MINIMUM, a, s, 1.0f); }
wgml_tensor *wgml_maximum_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_binary_scalar(g, WGML_BIN_MAXIMUM, a, s, 1.0f); }
wgml_tensor *wgml_pow_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_binary_scalar(g, WGML_BIN_POW, a, s, 1.0f); }

/* ------------------------------------------------------------------ unary */

/* code: a row of the unary table (ew_ops.h), public or kernel-only (EW_UN_CLAMP, EW_UN_ROUND_DEC) */
static wgml_tensor *ew_unary(wgml_graph *g, int code, wgml_tensor *x, float lo, float hi) {
    const char *op = ew_unary_name(code);
    if (bad_operand(g, op, "x", x, WGML_F32)) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (x->numel >= ((int64_t)1 << 31)) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %lld elements is more than the kernel indexes", op,
                       (long long)x->numel);
        return NULL;
    }
    int vw = x->numel % 4 == 0 ? 4 : 1;
    uint64_t nv = (uint64_t)x->numel / (uint64_t)vw;
    struct {
        uint32_t n, nv;
        float lo, hi;
    } params = {(uint32_t)x->numel, (uint32_t)nv, lo, hi};
    char pre[1024];
    snprintf(pre, sizeof pre, "const OP: u32 = %du;\nconst PT: u32 = %du;\nalias V = %s;\nalias VU = %s;\nalias VB = %s;\n%s",
             code, EW_PT, vw == 4 ? "vec4<f32>" : "f32", vw == 4 ? "vec4<u32>" : "u32", vw == 4 ? "vec4<bool>" : "bool",
             EW_WGSL_UNARY);
    wgml_tensor *out = graph_output(g, op, WGML_F32, x->rank, x->shape);
    if (!out) return NULL;
    if (graph_dispatch(g, op, "ew_unary", pre, &x, 1, &out, 1, &params, sizeof params,
                       (nv + EW_WG * EW_PT - 1) / (EW_WG * EW_PT))) {
        wgml_tensor_free(out);
        return NULL;
    }
    return ew_grad_unary(g, out, code, x, lo, hi);
}

wgml_tensor *wgml_unary(wgml_graph *g, wgml_unary_op opc, wgml_tensor *x) {
    if (!g) return NULL;
    if ((unsigned)opc >= (unsigned)EW_N_UNARY) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "unary: unknown op %d", (int)opc);
        return NULL;
    }
    return ew_unary(g, (int)opc, x, 0.0f, 0.0f);
}

wgml_tensor *wgml_relu(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_RELU, x); }
wgml_tensor *wgml_sigmoid(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_SIGMOID, x); }
wgml_tensor *wgml_silu(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_SILU, x); }
wgml_tensor *wgml_gelu(wgml_graph *g, wgml_tensor *x, int tanh_form) {
    return wgml_unary(g, tanh_form ? WGML_UN_GELU_TANH : WGML_UN_GELU, x);
}
wgml_tensor *wgml_exp(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_EXP, x); }
wgml_tensor *wgml_log(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_LOG, x); }
wgml_tensor *wgml_neg(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_NEG, x); }
wgml_tensor *wgml_abs(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_ABS, x); }
wgml_tensor *wgml_sqrt(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_SQRT, x); }
wgml_tensor *wgml_rsqrt(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_RSQRT, x); }
wgml_tensor *wgml_tanh(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_TANH, x); }
wgml_tensor *wgml_floor(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_FLOOR, x); }
wgml_tensor *wgml_ceil(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_CEIL, x); }
wgml_tensor *wgml_trunc(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_TRUNC, x); }
wgml_tensor *wgml_round(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_ROUND, x); }
wgml_tensor *wgml_sin(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_SIN, x); }
wgml_tensor *wgml_cos(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_COS, x); }
wgml_tensor *wgml_expm1(wgml_graph *g, wgml_tensor *x) { return wgml_unary(g, WGML_UN_EXPM1, x); }
wgml_tensor *wgml_round_decimals(wgml_graph *g, wgml_tensor *x, int decimals) {
    if (!g) return NULL;
    /* 10^|d| must be a finite f32 */
    if (decimals < -38 || decimals > 38) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "round_decimals: decimals %d is outside [-38, 38]", decimals);
        return NULL;
    }
    float ten = 1.0f;
    for (int i = 0; i < (decimals < 0 ? -decimals : decimals); i++) ten *= 10.0f;
    return ew_unary(g, EW_UN_ROUND_DEC, x, ten, decimals < 0 ? 1.0f : 0.0f);
}
wgml_tensor *wgml_clamp(wgml_graph *g, wgml_tensor *x, float lo, float hi) {
    if (!g) return NULL;
    return ew_unary(g, EW_UN_CLAMP, x, lo, hi);
}

/* ------------------------------------------------------------------ bool results */

/* Kernel op codes (ew_bool.wgsl's switch): the comparisons' table, then the kernel-only logical
 * and, or, not (EW_BOOL_AND, ...; ew_ops.h). */
#define CMP_SCALAR_NAME_(NAME, name, value) [value] = #name "_scalar",
static const char *const COMPARE_SCALAR_NAME[] = {WGML_COMPARE_OPS(CMP_SCALAR_NAME_)};
#define N_COMPARE EW_N_COMPARE

wgml_tensor *wgml_compare(wgml_graph *g, wgml_compare_op opc, wgml_tensor *a, wgml_tensor *b) {
    if (!g) return NULL;
    if ((unsigned)opc >= N_COMPARE) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "compare: unknown op %d", (int)opc);
        return NULL;
    }
    return record_pair(g, ew_bool_name((int)opc), K_BOOL, (int)opc, a, b, WGML_F32, 1.0f);
}

wgml_tensor *wgml_compare_scalar(wgml_graph *g, wgml_compare_op opc, wgml_tensor *a, float s) {
    if (!g) return NULL;
    if ((unsigned)opc >= N_COMPARE) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "compare_scalar: unknown op %d", (int)opc);
        return NULL;
    }
    const char *op = COMPARE_SCALAR_NAME[opc];
    if (bad_operand(g, op, "a", a, WGML_F32)) return NULL;
    opnd ops[2] = {{"a", a, WGML_F32, OPND_FULL, false}, {"b", NULL, WGML_F32, OPND_SCALAR, false}};
    return ew_record(g, op, K_BOOL, (int)opc, ops, 2, 1.0f, s, a->rank, a->shape);
}

wgml_tensor *wgml_eq(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_compare(g, WGML_CMP_EQ, a, b); }
wgml_tensor *wgml_ne(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_compare(g, WGML_CMP_NE, a, b); }
wgml_tensor *wgml_lt(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_compare(g, WGML_CMP_LT, a, b); }
wgml_tensor *wgml_le(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_compare(g, WGML_CMP_LE, a, b); }
wgml_tensor *wgml_gt(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_compare(g, WGML_CMP_GT, a, b); }
wgml_tensor *wgml_ge(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) { return wgml_compare(g, WGML_CMP_GE, a, b); }
wgml_tensor *wgml_eq_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_compare_scalar(g, WGML_CMP_EQ, a, s); }
wgml_tensor *wgml_ne_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_compare_scalar(g, WGML_CMP_NE, a, s); }
wgml_tensor *wgml_lt_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_compare_scalar(g, WGML_CMP_LT, a, s); }
wgml_tensor *wgml_le_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_compare_scalar(g, WGML_CMP_LE, a, s); }
wgml_tensor *wgml_gt_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_compare_scalar(g, WGML_CMP_GT, a, s); }
wgml_tensor *wgml_ge_scalar(wgml_graph *g, wgml_tensor *a, float s) { return wgml_compare_scalar(g, WGML_CMP_GE, a, s); }

wgml_tensor *wgml_logical_and(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) {
    if (!g) return NULL;
    return record_pair(g, ew_bool_name(EW_BOOL_AND), K_BOOL, EW_BOOL_AND, a, b, WGML_BOOL, 1.0f);
}

wgml_tensor *wgml_logical_or(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) {
    if (!g) return NULL;
    return record_pair(g, ew_bool_name(EW_BOOL_OR), K_BOOL, EW_BOOL_OR, a, b, WGML_BOOL, 1.0f);
}

wgml_tensor *wgml_logical_not(wgml_graph *g, wgml_tensor *a) {
    if (!g) return NULL;
    if (bad_operand(g, "logical_not", "a", a, WGML_BOOL)) return NULL;
    opnd ops[2] = {{"a", a, WGML_BOOL, OPND_FULL, false}, {"b", NULL, WGML_F32, OPND_SCALAR, false}};
    return ew_record(g, "logical_not", K_BOOL, EW_BOOL_NOT, ops, 2, 1.0f, 0.0f, a->rank, a->shape);
}

/* ------------------------------------------------------------------ where */

wgml_tensor *wgml_where(wgml_graph *g, wgml_tensor *cond, wgml_tensor *a, wgml_tensor *b) {
    if (!g) return NULL;
    const char *op = "where";
    if (bad_operand(g, op, "cond", cond, WGML_BOOL) || bad_operand(g, op, "a", a, WGML_F32) ||
        bad_operand(g, op, "b", b, WGML_F32))
        return NULL;
    int rank;
    int64_t shape[WGML_MAX_RANK];
    wgml_tensor *ts[3] = {cond, a, b};
    static const char *const names[3] = {"cond", "a", "b"};
    if (broadcast_all(graph_ctx(g), op, ts, names, 3, &rank, shape)) return NULL;
    opnd ops[3] = {{"c", cond, WGML_BOOL, OPND_FULL, false}, {"a", a, WGML_F32, OPND_FULL, false}, {"b", b, WGML_F32, OPND_FULL, false}};
    return ew_grad_where(g, ew_record(g, op, K_WHERE, 0, ops, 3, 1.0f, 0.0f, rank, shape), cond, a, b);
}
