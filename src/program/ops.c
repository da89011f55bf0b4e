/* The op registry: each operator name the WebGPU and Vulkan partitioners emit, mapped onto
 * wgml's public ops. Arguments come in schema order with the defaults present and the output
 * id(s) last; every builder checks the kinds it reads and the output's serialised shape and
 * dtype, so a graph that means something else than wgml computes fails at load, naming the op. */
#include "program/program.h"
#include "program/ops_args.h"

#include "gpu/gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- elementwise --------------------------------------------------------------------------- */

/* a (op) b where b is a tensor or a number; alpha at args[2] when has_alpha. A tensor that is
 * a one-element constant is not special: it broadcasts like any other. */
static wgml_status binary_common(pbuild *b, const int32_t *args, int nargs, wgml_binary_op op, int has_alpha) {
    NEED(has_alpha ? 4 : 3);
    int ok = 1;
    float alpha = has_alpha ? (float)num(b, args, 2, 1.0, &ok) : 1.0f;
    if (!ok) return WGML_ERR_ARG;
    wgml_tensor *a = T(b, args, 0);
    if (!a) return WGML_ERR_ARG;
    if (is_tensor(b, args, 1)) {
        wgml_tensor *y = T(b, args, 1);
        return y ? put(b, OUT(0), wgml_binary(b->g, op, a, y, alpha), 0) : WGML_ERR_ARG;
    }
    float s = (float)num(b, args, 1, 0.0, &ok);
    if (!ok) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_binary_scalar(b->g, op, a, s, alpha), 0);
}
static wgml_status op_add(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_ADD, 1); }
static wgml_status op_sub(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_SUB, 1); }
static wgml_status op_mul(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_MUL, 0); }
static wgml_status op_div(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_DIV, 0); }
static wgml_status op_minimum(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_MINIMUM, 0); }
static wgml_status op_maximum(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_MAXIMUM, 0); }
static wgml_status op_pow(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_POW, 0); }

/* div.Tensor_mode / div.Scalar_mode (a, b, rounding_mode): None (true division), "trunc" or
 * "floor" (float tensors; wgml's division is f32 only, so an int tensor is refused by it). */
static wgml_status op_div_mode(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    const pv *m = val(b, args, 2);
    wgml_binary_op op = WGML_BIN_DIV;
    if (m->kind == PV_STRING && m->s && !strcmp(m->s, "trunc")) op = WGML_BIN_DIV_TRUNC;
    else if (m->kind == PV_STRING && m->s && !strcmp(m->s, "floor")) op = WGML_BIN_DIV_FLOOR;
    else if (m->kind != PV_NULL) return fail(b, WGML_ERR_ARG, "rounding_mode must be None, \"trunc\" or \"floor\"", 2);
    int32_t a2[3] = {args[0], args[1], args[3]};
    return binary_common(b, a2, 3, op, 0);
}
/* floor_divide(a, b): division with rounding_mode "floor" */
static wgml_status op_floor_divide(pbuild *b, const int32_t *a, int n) { return binary_common(b, a, n, WGML_BIN_DIV_FLOOR, 0); }

/* rsub.Scalar(self, other, alpha) = other − alpha·self */
static wgml_status op_rsub(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    float s = (float)num(b, args, 1, 0.0, &ok), alpha = (float)num(b, args, 2, 1.0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    wgml_tensor *y = wgml_mul_scalar(b->g, x, -alpha);
    return put(b, OUT(0), wgml_add_scalar(b->g, y, s, 1.0f), 0);
}

/* neg and abs of an i32 tensor (the index arithmetic of reflect/replicate padding) through the
 * integer binary kernel: −x = x·(−1), |x| = max(x, −x); a dedicated integer unary kernel would
 * save a dispatch on what are small index tensors. */
static wgml_tensor *int_unary(pbuild *b, wgml_unary_op op, wgml_tensor *x) {
    wgml_tensor *n = wgml_binary_scalar(b->g, WGML_BIN_MUL, x, -1.0f, 1.0f);
    return op == WGML_UN_NEG ? n : wgml_maximum(b->g, x, n);
}

static wgml_status unary_common(pbuild *b, const int32_t *args, int nargs, wgml_unary_op op, int n) {
    NEED(n);
    wgml_tensor *x = T(b, args, 0);
    if (x && wgml_tensor_dtype(x) == WGML_I32 && (op == WGML_UN_NEG || op == WGML_UN_ABS))
        return put(b, OUT(0), int_unary(b, op, x), 0);
    return x ? put(b, OUT(0), wgml_unary(b->g, op, x), 0) : WGML_ERR_ARG;
}
#define UNARY(name, op)                                                                                     \
    static wgml_status name(pbuild *b, const int32_t *a, int n) { return unary_common(b, a, n, op, 2); }
UNARY(op_relu, WGML_UN_RELU)
UNARY(op_sigmoid, WGML_UN_SIGMOID)
UNARY(op_silu, WGML_UN_SILU)
UNARY(op_exp, WGML_UN_EXP)
UNARY(op_log, WGML_UN_LOG)
UNARY(op_neg, WGML_UN_NEG)
UNARY(op_abs, WGML_UN_ABS)
UNARY(op_sqrt, WGML_UN_SQRT)
UNARY(op_rsqrt, WGML_UN_RSQRT)
UNARY(op_tanh, WGML_UN_TANH)
UNARY(op_floor, WGML_UN_FLOOR)
UNARY(op_ceil, WGML_UN_CEIL)
UNARY(op_trunc, WGML_UN_TRUNC)
UNARY(op_round, WGML_UN_ROUND)
UNARY(op_sin, WGML_UN_SIN)
UNARY(op_cos, WGML_UN_COS)

/* round.decimals(self, decimals) */
static wgml_status op_round_decimals(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int ok = 1;
    int d = iarg(b, args, 1, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    if (d < -38 || d > 38) return fail(b, WGML_ERR_UNSUPPORTED, "decimals outside [-38, 38]", 1);
    return put(b, OUT(0), wgml_round_decimals(b->g, x, d), 0);
}

/* gelu(self, approximate: "none" | "tanh") */
static wgml_status op_gelu(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    const pv *m = val(b, args, 1);
    int tanh_form = 0;
    if (m->kind == PV_STRING && m->s && !strcmp(m->s, "tanh")) tanh_form = 1;
    else if (!(m->kind == PV_NULL || (m->kind == PV_STRING && m->s && !strcmp(m->s, "none"))))
        return fail(b, WGML_ERR_ARG, "approximate must be \"none\" or \"tanh\"", 1);
    wgml_tensor *x = T(b, args, 0);
    return x ? put(b, OUT(0), wgml_gelu(b->g, x, tanh_form), 0) : WGML_ERR_ARG;
}

/* clamp(self, min?, max?), hardtanh(self, min_val, max_val), relu6 through hardtanh's bounds. */
static wgml_status op_clamp(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    float lo = (float)num(b, args, 1, -INFINITY, &ok), hi = (float)num(b, args, 2, INFINITY, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    if (wgml_tensor_dtype(x) == WGML_I32) { /* integer bounds through the integer kernel: min(max(x, lo), hi) */
        if (!is_null(b, args, 1)) x = wgml_binary_scalar(b->g, WGML_BIN_MAXIMUM, x, lo, 1.0f);
        if (x && !is_null(b, args, 2)) x = wgml_binary_scalar(b->g, WGML_BIN_MINIMUM, x, hi, 1.0f);
        return put(b, OUT(0), x, 0);
    }
    return put(b, OUT(0), wgml_clamp(b->g, x, lo, hi), 0);
}

static wgml_status compare_common(pbuild *b, const int32_t *args, int nargs, wgml_compare_op op) {
    NEED(3);
    wgml_tensor *a = as_f32(b, T(b, args, 0));
    if (!a) return WGML_ERR_ARG;
    if (is_tensor(b, args, 1)) {
        wgml_tensor *y = as_f32(b, T(b, args, 1));
        return y ? put(b, OUT(0), wgml_compare(b->g, op, a, y), 0) : WGML_ERR_ARG;
    }
    int ok = 1;
    float s = (float)num(b, args, 1, 0.0, &ok);
    return ok ? put(b, OUT(0), wgml_compare_scalar(b->g, op, a, s), 0) : WGML_ERR_ARG;
}
#define COMPARE(name, op)                                                                                   \
    static wgml_status name(pbuild *b, const int32_t *a, int n) { return compare_common(b, a, n, op); }
COMPARE(op_eq, WGML_CMP_EQ)
COMPARE(op_ne, WGML_CMP_NE)
COMPARE(op_lt, WGML_CMP_LT)
COMPARE(op_le, WGML_CMP_LE)
COMPARE(op_gt, WGML_CMP_GT)
COMPARE(op_ge, WGML_CMP_GE)

static wgml_status op_logical_not(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = T(b, args, 0);
    return x ? put(b, OUT(0), wgml_logical_not(b->g, x), 0) : WGML_ERR_ARG;
}
static wgml_status logical2(pbuild *b, const int32_t *args, int nargs, int is_or) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *y = x ? T(b, args, 1) : NULL;
    if (!y) return WGML_ERR_ARG;
    return put(b, OUT(0), is_or ? wgml_logical_or(b->g, x, y) : wgml_logical_and(b->g, x, y), 0);
}
static wgml_status op_logical_and(pbuild *b, const int32_t *a, int n) { return logical2(b, a, n, 0); }
static wgml_status op_logical_or(pbuild *b, const int32_t *a, int n) { return logical2(b, a, n, 1); }

/* where(cond, x, y): f32 x and y directly; i32 ones (int64 labels) through f32 and back, the
 * output's dtype saying which (exact up to 2^24, see as_f32). */
static wgml_status op_where(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *c = T(b, args, 0), *x = c ? T(b, args, 1) : NULL, *y = x ? T(b, args, 2) : NULL;
    if (!y) return WGML_ERR_ARG;
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype);
    wgml_tensor *r = wgml_where(b->g, c, as_f32(b, x), as_f32(b, y));
    if (r && dt >= 0 && dt != WGML_F32) r = wgml_cast(b->g, r, (wgml_dtype)dt);
    return put(b, OUT(0), r, 0);
}

/* ---- matmul -------------------------------------------------------------------------------- */

static wgml_status op_mm(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *y = x ? T(b, args, 1) : NULL;
    return y ? put(b, OUT(0), wgml_mm(b->g, x, y), 0) : WGML_ERR_ARG;
}
static wgml_status op_bmm(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *y = x ? T(b, args, 1) : NULL;
    return y ? put(b, OUT(0), wgml_bmm(b->g, x, y), 0) : WGML_ERR_ARG;
}
/* linear(input, weight, bias?) */
static wgml_status op_linear(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = T(b, args, 0), *w = x ? T(b, args, 1) : NULL, *bias = NULL;
    if (!w) return WGML_ERR_ARG;
    if (!is_null(b, args, 2) && !(bias = T(b, args, 2))) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_linear(b->g, x, w, bias), 0);
}
/* addmm(self, mat1, mat2, beta, alpha) */
static wgml_status op_addmm(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    int ok = 1;
    float beta = (float)num(b, args, 3, 1.0, &ok), alpha = (float)num(b, args, 4, 1.0, &ok);
    wgml_tensor *c = T(b, args, 0), *x = c ? T(b, args, 1) : NULL, *y = x ? T(b, args, 2) : NULL;
    if (!ok || !y) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_addmm(b->g, c, x, y, beta, alpha), 0);
}

/* ---- reductions and softmax ---------------------------------------------------------------- */

/* sum.dim_IntList / mean.dim (self, dim?, keepdim, dtype?) and amax (self, dim, keepdim). */
static wgml_status reduce_common(pbuild *b, const int32_t *args, int nargs, int kind) {
    NEED(kind == 2 ? 4 : 5);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    int64_t d64[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d64, WGML_MAX_RANK), ok = 1;
    if (n < 0) return WGML_ERR_ARG;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!ok) return WGML_ERR_ARG;
    /* mean(int tensor, dtype=float): the mean of the values converted to f32 */
    if (kind == 1 && !is_null(b, args, 3) && wgml_tensor_dtype(x) != WGML_F32 && !(x = as_f32(b, x)))
        return wgml_last_status(b->ctx);
    int dims[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) dims[i] = (int)d64[i];
    /* a sum of bools or integers (a count, e.g. cross-entropy's valid labels) is summed in f32
     * (exact up to 2^24) and converted to the output's integer dtype */
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype);
    if (kind != 1) x = as_f32(b, x); /* amax of ints and bools likewise, exact up to 2^24 */
    wgml_tensor *r = kind == 0   ? wgml_sum(b->g, x, dims, n, keep)
                     : kind == 1 ? wgml_mean(b->g, x, dims, n, keep)
                                 : wgml_amax(b->g, x, dims, n, keep);
    if (r && kind != 1 && dt >= 0 && dt != WGML_F32) r = wgml_cast(b->g, r, (wgml_dtype)dt);
    return put(b, OUT(0), r, 0);
}
static wgml_status op_sum(pbuild *b, const int32_t *a, int n) { return reduce_common(b, a, n, 0); }
static wgml_status op_mean(pbuild *b, const int32_t *a, int n) { return reduce_common(b, a, n, 1); }
static wgml_status op_amax(pbuild *b, const int32_t *a, int n) { return reduce_common(b, a, n, 2); }

/* mean.dtype / mean.default (self, dtype?): the mean of every element, rank 0 */
static wgml_status op_mean_all(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_mean(b->g, x, NULL, 0, 0), 1);
}

/* argmax(self, dim?, keepdim): dim None flattens first. */
static wgml_status op_argmax(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = as_f32(b, T(b, args, 0)); /* int and bool values through f32 (exact to 2^24) */
    int ok = 1;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!x || !ok) return WGML_ERR_ARG;
    if (is_null(b, args, 1)) {
        int64_t n = wgml_tensor_numel(x);
        x = wgml_reshape(b->g, x, 1, &n);
        return put(b, OUT(0), wgml_argmax(b->g, x, 0, 0), 1);
    }
    int dim = iarg(b, args, 1, 0, &ok);
    return ok ? put(b, OUT(0), wgml_argmax(b->g, x, dim, keep), 0) : WGML_ERR_ARG;
}

/* _softmax / _log_softmax (self, dim, half_to_float) */
static wgml_status softmax_common(pbuild *b, const int32_t *args, int nargs, int log) {
    NEED(4);
    int ok = 1;
    int dim = iarg(b, args, 1, -1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    return put(b, OUT(0), log ? wgml_log_softmax(b->g, x, dim) : wgml_softmax(b->g, x, dim), 0);
}
static wgml_status op_softmax(pbuild *b, const int32_t *a, int n) { return softmax_common(b, a, n, 0); }
static wgml_status op_log_softmax(pbuild *b, const int32_t *a, int n) { return softmax_common(b, a, n, 1); }

/* ---- norms --------------------------------------------------------------------------------- */

/* median.default (self): the lower median of every element (rank 0); median.dim / the out
 * variant median.dim_values (self, dim, keepdim) -> (values, indices). */
static wgml_status op_median_all(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    int64_t n = wgml_tensor_numel(x);
    return put(b, OUT(0), wgml_median(b->g, wgml_reshape(b->g, x, 1, &n), 0, 0, NULL), 1);
}
static wgml_status op_median_dim(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    int dim = iarg(b, args, 1, 0, &ok), keep = iarg(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    size_t no;
    const int32_t *outs = vlist(b, args, 3, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 2) return fail(b, WGML_ERR_ARG, "expected 2 outputs", 3);
    wgml_tensor *idx = NULL;
    wgml_tensor *v = wgml_median(b->g, x, dim, keep, &idx);
    wgml_status s = put(b, outs[0], v, 0);
    if (!s && b->v[outs[1]].kind == PV_TENSOR) s = put(b, outs[1], idx, 0);
    return s;
}

/* native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd): over
 * the trailing dims normalized_shape names, as one row (x viewed as [..., Π normalized_shape],
 * weight and bias as [Π normalized_shape]; mean and rstd keep the normalised dims as 1s). */
static wgml_status op_layer_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    int64_t ns[WGML_MAX_RANK];
    int n = ilist(b, args, 1, ns, WGML_MAX_RANK), ok = 1;
    float eps = (float)num(b, args, 4, 1e-5, &ok);
    wgml_tensor *x = T(b, args, 0), *w, *bias;
    if (n < 0 || !ok || !x || opt_tensor(b, args, 2, &w) || opt_tensor(b, args, 3, &bias)) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x);
    int64_t row = 1, view[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) {
        if (n > r || ns[i] != wgml_tensor_dim(x, r - n + i)) return fail(b, WGML_ERR_SHAPE, "normalized_shape is not x's trailing dims", 1);
        row *= ns[i];
    }
    if (n < 1) return fail(b, WGML_ERR_ARG, "an empty normalized_shape", 1);
    if (n > 1) { /* the normalised dims as one row */
        if ((w && wgml_tensor_numel(w) != row) || (bias && wgml_tensor_numel(bias) != row))
            return fail(b, WGML_ERR_SHAPE, "weight or bias of another size than normalized_shape", w && wgml_tensor_numel(w) != row ? 2 : 3);
        for (int i = 0; i < r - n; i++) view[i] = wgml_tensor_dim(x, i);
        view[r - n] = row;
        int had_w = w != NULL, had_b = bias != NULL;
        x = wgml_reshape(b->g, x, r - n + 1, view);
        if (had_w) w = wgml_reshape(b->g, w, 1, &row);
        if (had_b) bias = wgml_reshape(b->g, bias, 1, &row);
        if (!x || (had_w && !w) || (had_b && !bias)) return wgml_last_status(b->ctx);
    }
    size_t no;
    const int32_t *outs = vlist(b, args, 5, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 3) return fail(b, WGML_ERR_ARG, "expected 3 outputs", 5);
    wgml_tensor *mean = NULL, *rstd = NULL;
    wgml_tensor *y = wgml_layer_norm(b->g, x, w, bias, eps, &mean, &rstd);
    wgml_status s = put(b, outs[0], y, n > 1);
    if (!s && b->v[outs[1]].kind == PV_TENSOR) s = put(b, outs[1], mean, 1);
    if (!s && b->v[outs[2]].kind == PV_TENSOR) s = put(b, outs[2], rstd, 1);
    return s;
}

/* et_vk.rms_norm(x, weight, eps) */
static wgml_status op_rms_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    float eps = (float)num(b, args, 2, 1e-6, &ok);
    wgml_tensor *x = T(b, args, 0), *w;
    if (!ok || !x || opt_tensor(b, args, 1, &w)) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_rms_norm(b->g, x, w, eps), 0);
}

/* ---- shape, copies, views ------------------------------------------------------------------ */

/* Ops whose output is the input's elements in the output's serialised shape: view_copy,
 * _unsafe_view, squeeze/unsqueeze, alias, clone, the dim-order copies of a contiguous tensor.
 * All tensors here are contiguous, so these are views (no copy); a dtype change is refused. */
static double host_elem(const uint8_t *p, int vk, int64_t i) {
    switch (vk) {
    case VK_BOOL: case VK_UINT8: return p[i];
    case VK_INT8: return (int8_t)p[i];
    case VK_INT32: { int32_t x; memcpy(&x, p + 4 * i, 4); return x; }
    case VK_INT64: { int64_t x; memcpy(&x, p + 8 * i, 8); return (double)x; }
    case VK_FLOAT32: { float x; memcpy(&x, p + 4 * i, 4); return x; }
    case VK_FLOAT64: { double x; memcpy(&x, p + 8 * i, 8); return x; }
    default: return 0;
    }
}

/* A dtype conversion of a constant, done on the host: a new constant of the output's dtype. */
static wgml_status convert_constant(pbuild *b, const pv *x, int32_t out) {
    const pv *o = &b->v[out];
    int dt = prog_vk_to_wgml(o->vk_dtype);
    int64_t n = wgml_tensor_numel(x->t);
    if (dt < 0 || x->host_vk == VK_FLOAT16) return fail(b, WGML_ERR_UNSUPPORTED, "unsupported conversion", 0);
    size_t es = wgml_dtype_size((wgml_dtype)dt);
    uint8_t *buf = malloc((size_t)n * es + 1);
    if (!buf) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t i = 0; i < n; i++) {
        double v = host_elem(x->host, x->host_vk, i);
        if (dt == WGML_F32) { float f = (float)v; memcpy(buf + 4 * i, &f, 4); }
        else if (dt == WGML_I32) { int32_t k = (int32_t)v; memcpy(buf + 4 * i, &k, 4); }
        else buf[i] = v != 0;
    }
    wgml_tensor *t = wgml_tensor_new(b->g, (wgml_dtype)dt, o->rank, o->dims);
    wgml_status s = t ? wgml_tensor_write(t, buf, (size_t)n * es) : wgml_last_status(b->ctx);
    free(buf);
    return s ? s : put(b, out, t, 0);
}

static wgml_status op_view(pbuild *b, const int32_t *args, int nargs) {
    if (nargs < 2) return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: %d arguments", b->op, nargs);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    const pv *in = val(b, args, 0);
    pv *o = &b->v[OUT(0)];
    if (o->kind == PV_TENSOR && prog_vk_to_wgml(o->vk_dtype) != (int)wgml_tensor_dtype(x)) {
        if (in->host) return convert_constant(b, in, OUT(0));
        /* a computed tensor: converted on the GPU (f32, i32, bool; wgml_cast refuses others) */
        int dt = prog_vk_to_wgml(o->vk_dtype);
        if (dt < 0)
            return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: dtype conversion %s -> %s is not supported",
                                  b->op, wgml_dtype_name(wgml_tensor_dtype(x)), prog_vk_dtype_name(o->vk_dtype));
        return put(b, OUT(0), wgml_cast(b->g, x, (wgml_dtype)dt), 1);
    }
    wgml_status s = put(b, OUT(0), x, 1);
    if (!s && in->host) o->host = in->host, o->host_vk = in->host_vk; /* still the constant's elements */
    return s;
}

static wgml_status op_permute(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int64_t d[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d, WGML_MAX_RANK), ok = 1;
    wgml_tensor *x = T(b, args, 0);
    if (n < 0 || !x) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x), dims[WGML_MAX_RANK];
    if (n != r) return fail(b, WGML_ERR_ARG, "permutation of the wrong length", 1);
    for (int i = 0; i < n; i++) dims[i] = ndim(b, d[i], r, 1, &ok);
    return ok ? put(b, OUT(0), wgml_permute(b->g, x, dims), 0) : WGML_ERR_ARG;
}

/* transpose_copy.int(self, dim0, dim1) */
static wgml_status op_transpose(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    int d0 = iarg(b, args, 1, 0, &ok), d1 = iarg(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    return ok && x ? put(b, OUT(0), wgml_transpose(b->g, x, d0, d1), 0) : WGML_ERR_ARG;
}

/* slice_copy.Tensor(self, dim, start?, end?, step) */
static wgml_status op_slice(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    int ok = 1;
    int64_t dim = inum(b, args, 1, 0, &ok);
    int64_t start = inum(b, args, 2, 0, &ok), end = inum(b, args, 3, INT64_MAX, &ok);
    int64_t step = inum(b, args, 4, 1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_slice(b->g, x, (int)dim, start, end, step), 0);
}

/* select_copy.int(self, dim, index): a slice of one, the dim dropped. */
static wgml_status op_select(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    int64_t dim = inum(b, args, 1, 0, &ok), idx = inum(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    int d = ndim(b, dim, wgml_tensor_rank(x), 1, &ok);
    if (!ok) return WGML_ERR_ARG;
    int64_t size = wgml_tensor_dim(x, d);
    if (idx < -size || idx >= size) return fail(b, WGML_ERR_ARG, "index out of range", 2);
    if (idx < 0) idx += size;
    return put(b, OUT(0), wgml_slice(b->g, x, d, idx, idx + 1, 1), 1);
}

/* cat(tensors, dim) */
static wgml_status op_cat(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    size_t n;
    const int32_t *ids = vlist(b, args, 0, &n);
    int ok = 1;
    int dim = iarg(b, args, 1, 0, &ok);
    if (!ids || !ok) return WGML_ERR_ARG;
    if (n == 0 || n > 64) return fail(b, WGML_ERR_ARG, "between 1 and 64 tensors", 0);
    wgml_tensor *ts[64];
    for (size_t i = 0; i < n; i++) {
        const pv *x = &b->v[ids[i]];
        if (x->kind != PV_TENSOR || !x->t) return fail(b, WGML_ERR_ARG, "a list element is not a computed tensor", 0);
        ts[i] = x->t;
    }
    return put(b, OUT(0), wgml_cat(b->g, ts, (int)n, dim), 0);
}

/* split_with_sizes_copy(self, split_sizes, dim) -> ValueList; split_copy.Tensor(self, size, dim). */
static wgml_status split_common(pbuild *b, const int32_t *args, int nargs, int equal) {
    NEED(4);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0);
    int64_t sizes[64];
    int n = ilist(b, args, 1, sizes, 64);
    int64_t dim = inum(b, args, 2, 0, &ok);
    size_t no;
    const int32_t *outs = vlist(b, args, 3, &no);
    if (!x || n < 0 || !ok || !outs) return WGML_ERR_ARG;
    int d = ndim(b, dim, wgml_tensor_rank(x), 2, &ok);
    if (!ok) return WGML_ERR_ARG;
    int64_t off = 0, size = wgml_tensor_dim(x, d);
    for (size_t i = 0; i < no; i++) {
        int64_t len = equal ? (n == 1 ? sizes[0] : 0) : ((int)i < n ? sizes[i] : 0);
        if (len <= 0 || off + len > size + (equal ? len : 0)) return fail(b, WGML_ERR_ARG, "split sizes do not fit", 1);
        int64_t end = off + len > size ? size : off + len;
        wgml_status s = put(b, outs[i], wgml_slice(b->g, x, d, off, end, 1), 0);
        if (s) return s;
        off = end;
    }
    if (off != size) return fail(b, WGML_ERR_ARG, "split sizes do not cover the dimension", 1);
    return WGML_OK;
}
static wgml_status op_split_with_sizes(pbuild *b, const int32_t *a, int n) { return split_common(b, a, n, 0); }
static wgml_status op_split(pbuild *b, const int32_t *a, int n) { return split_common(b, a, n, 1); }

/* expand_copy(self, size, implicit) */
static wgml_status op_expand(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int64_t s[WGML_MAX_RANK];
    int n = ilist(b, args, 1, s, WGML_MAX_RANK);
    wgml_tensor *x = T(b, args, 0);
    if (n < 0 || !x) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_expand_copy(b->g, x, n, s), 0);
}

/* repeat(self, repeats): x viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...]
 * and read as [r0·s0, r1·s1, ...] (the tiling order of torch.repeat). */
static wgml_status op_repeat(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int64_t r[WGML_MAX_RANK];
    int n = ilist(b, args, 1, r, WGML_MAX_RANK);
    wgml_tensor *x = T(b, args, 0);
    if (n < 0 || !x) return WGML_ERR_ARG;
    int xr = wgml_tensor_rank(x);
    if (n < xr || 2 * n > WGML_MAX_RANK)
        return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: %d repeats of a rank-%d tensor", b->op, n, xr);
    int64_t v[WGML_MAX_RANK], e[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) {
        int64_t si = i - (n - xr) >= 0 ? wgml_tensor_dim(x, i - (n - xr)) : 1;
        v[2 * i] = 1, v[2 * i + 1] = si;
        e[2 * i] = r[i], e[2 * i + 1] = si;
    }
    wgml_tensor *y = wgml_reshape(b->g, x, 2 * n, v);
    y = y ? wgml_expand_copy(b->g, y, 2 * n, e) : NULL;
    return put(b, OUT(0), y, 1);
}

/* ---- indexing ------------------------------------------------------------------------------ */

/* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse) */
static wgml_status op_embedding(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    wgml_tensor *w = T(b, args, 0), *idx = w ? T(b, args, 1) : NULL;
    return idx ? put(b, OUT(0), wgml_embedding(b->g, w, idx), 0) : WGML_ERR_ARG;
}
/* gather(self, dim, index, sparse_grad) */
static wgml_status op_gather(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    int dim = iarg(b, args, 1, 0, &ok);
    wgml_tensor *x = T(b, args, 0), *idx = x ? T(b, args, 2) : NULL;
    return ok && idx ? put(b, OUT(0), wgml_gather(b->g, x, dim, idx), 0) : WGML_ERR_ARG;
}
/* index_select(self, dim, index) */
static wgml_status op_index_select(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    int dim = iarg(b, args, 1, 0, &ok);
    wgml_tensor *x = T(b, args, 0), *idx = x ? T(b, args, 2) : NULL;
    return ok && idx ? put(b, OUT(0), wgml_index_select(b->g, x, dim, idx), 1) : WGML_ERR_ARG;
}

/* ---- creation ------------------------------------------------------------------------------ */

/* full(size, fill_value, dtype, layout, device, pin_memory), full_like(self, fill_value, ...),
 * zeros/ones(size, ...), zeros_like/ones_like(self, ...), scalar_tensor(s, ...): the output's
 * serialised shape and dtype say what to make; the value comes from the op. */
static wgml_status fill_common(pbuild *b, const int32_t *args, int nargs, int value_arg, double value) {
    if (nargs < value_arg + 2)
        return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: %d arguments", b->op, nargs);
    const pv *o = &b->v[OUT(0)];
    if (o->kind != PV_TENSOR) return fail(b, WGML_ERR_ARG, "output is not a tensor", nargs - 1);
    int ok = 1;
    if (value_arg >= 0) value = num(b, args, value_arg, 0, &ok);
    int dt = prog_vk_to_wgml(o->vk_dtype);
    if (!ok) return WGML_ERR_ARG;
    if (dt < 0) return fail(b, WGML_ERR_DTYPE, "unsupported output dtype", nargs - 1);
    return put(b, OUT(0), wgml_full(b->g, (wgml_dtype)dt, o->rank, o->dims, value), 0);
}
static wgml_status op_full(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, 1, 0); }
static wgml_status op_scalar_tensor(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, 0, 0); }
static wgml_status op_zeros(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, -1, 0); }
static wgml_status op_ones(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, -1, 1); }

/* ---- transformer ---------------------------------------------------------------------------- */

/* scaled_dot_product_attention(q, k, v, attn_mask?, dropout_p, is_causal, scale?, enable_gqa):
 * q [B, Hq, S, D], k/v [B, Hkv, S', D]; masks and dropout are not supported. */
static wgml_status op_sdpa(pbuild *b, const int32_t *args, int nargs) {
    if (nargs != 9 && nargs != 8)
        return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: %d arguments", b->op, nargs);
    int ok = 1;
    if (!is_null(b, args, 3)) return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: attention masks are not supported", b->op);
    if (num(b, args, 4, 0, &ok) != 0.0) return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: dropout is not supported", b->op);
    int causal = iarg(b, args, 5, 0, &ok);
    float scale = (float)num(b, args, 6, 0, &ok);
    wgml_tensor *q = T(b, args, 0), *k = q ? T(b, args, 1) : NULL, *v = k ? T(b, args, 2) : NULL;
    if (!ok || !v) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_sdpa(b->g, q, k, v, causal, scale), 0);
}

/* ---- composites: ops made of several wgml ops ------------------------------------------------ */

/* amin(self, dim, keepdim) = −amax(−x) */
static wgml_status op_amin(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    int64_t d64[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d64, WGML_MAX_RANK), ok = 1;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!x || n < 0 || !ok) return WGML_ERR_ARG;
    int dims[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) dims[i] = (int)d64[i];
    wgml_tensor *y = wgml_amax(b->g, wgml_neg(b->g, x), dims, n, keep);
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype);
    y = y ? wgml_neg(b->g, y) : NULL;
    return put(b, OUT(0), y && dt >= 0 && dt != WGML_F32 ? wgml_cast(b->g, y, (wgml_dtype)dt) : y, 0);
}

/* argmin(self, dim?, keepdim) = argmax(−x) (ties: the first index either way) */
static wgml_status op_argmin(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    int ok = 1;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!x || !ok) return WGML_ERR_ARG;
    x = wgml_neg(b->g, x);
    if (is_null(b, args, 1)) {
        int64_t n = wgml_tensor_numel(x);
        return put(b, OUT(0), wgml_argmax(b->g, wgml_reshape(b->g, x, 1, &n), 0, 0), 1);
    }
    int dim = iarg(b, args, 1, 0, &ok);
    return ok ? put(b, OUT(0), wgml_argmax(b->g, x, dim, keep), 0) : WGML_ERR_ARG;
}

/* hardswish(x) = x·clamp(x + 3, 0, 6)/6; hardsigmoid(x) = clamp(x/6 + 1/2, 0, 1) */
static wgml_status op_hardswish(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    wgml_tensor *c = wgml_clamp(b->g, wgml_add_scalar(b->g, x, 3.0f, 1.0f), 0.0f, 6.0f);
    return put(b, OUT(0), wgml_mul(b->g, x, wgml_mul_scalar(b->g, c, 1.0f / 6.0f)), 0);
}
static wgml_status op_hardsigmoid(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    wgml_tensor *y = wgml_add_scalar(b->g, wgml_div_scalar(b->g, x, 6.0f), 0.5f, 1.0f);
    return put(b, OUT(0), wgml_clamp(b->g, y, 0.0f, 1.0f), 0);
}

/* leaky_relu(x, slope) = relu(x) − slope·relu(−x) */
static wgml_status op_leaky_relu(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int ok = 1;
    float slope = (float)num(b, args, 1, 0.01, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    wgml_tensor *n = wgml_relu(b->g, wgml_neg(b->g, x));
    return put(b, OUT(0), wgml_sub(b->g, wgml_relu(b->g, x), n, slope), 0);
}

/* elu(x, alpha, scale, input_scale) = scale·x for x > 0, else alpha·scale·(exp(x·input_scale) − 1) */
static wgml_status op_elu(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    float alpha = (float)num(b, args, 1, 1, &ok), scale = (float)num(b, args, 2, 1, &ok), in_scale = (float)num(b, args, 3, 1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    wgml_tensor *neg = wgml_exp(b->g, wgml_mul_scalar(b->g, wgml_minimum_scalar(b->g, x, 0.0f), in_scale));
    neg = wgml_mul_scalar(b->g, wgml_add_scalar(b->g, neg, -1.0f, 1.0f), alpha * scale);
    wgml_tensor *pos = wgml_mul_scalar(b->g, wgml_relu(b->g, x), scale);
    return put(b, OUT(0), wgml_add(b->g, pos, neg, 1.0f), 0);
}

/* log10, log2, log1p through the natural log */
static wgml_status log_common(pbuild *b, const int32_t *args, int nargs, float scale, float add) {
    NEED(2);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    if (add != 0.0f) x = wgml_add_scalar(b->g, x, add, 1.0f);
    wgml_tensor *y = wgml_log(b->g, x);
    return put(b, OUT(0), scale != 1.0f ? wgml_mul_scalar(b->g, y, scale) : y, 0);
}
static wgml_status op_log10(pbuild *b, const int32_t *a, int n) { return log_common(b, a, n, (float)(1.0 / log(10.0)), 0); }
static wgml_status op_log2(pbuild *b, const int32_t *a, int n) { return log_common(b, a, n, (float)(1.0 / log(2.0)), 0); }
static wgml_status op_log1p(pbuild *b, const int32_t *a, int n) { return log_common(b, a, n, 1.0f, 1.0f); }

/* threshold(x, threshold, value) = x > threshold ? x : value */
static wgml_status op_threshold(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    float th = (float)num(b, args, 1, 0, &ok), value = (float)num(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    wgml_tensor *c = wgml_gt_scalar(b->g, x, th);
    return put(b, OUT(0), wgml_where(b->g, c, x, wgml_full_like(b->g, x, value)), 0);
}

/* masked_fill.Scalar(x, mask, value) = mask ? value : x */
static wgml_status op_masked_fill(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    float value = (float)num(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0), *m = x ? T(b, args, 1) : NULL;
    if (!m || !ok) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_where(b->g, m, wgml_full_like(b->g, x, value), x), 0);
}

/* glu(x, dim) = a·sigmoid(b), a and b the halves of x along dim */
static wgml_status op_glu(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int ok = 1;
    int dim = iarg(b, args, 1, -1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    int d = ndim(b, dim, wgml_tensor_rank(x), 1, &ok);
    if (!ok) return WGML_ERR_ARG;
    int64_t h = wgml_tensor_dim(x, d) / 2;
    if (wgml_tensor_dim(x, d) % 2) return fail(b, WGML_ERR_SHAPE, "glu needs an even size", 0);
    wgml_tensor *lo = wgml_slice(b->g, x, d, 0, h, 1), *hi = wgml_slice(b->g, x, d, h, 2 * h, 1);
    return put(b, OUT(0), wgml_mul(b->g, lo, wgml_sigmoid(b->g, hi)), 0);
}

/* log_sigmoid_forward(x) -> (out, buffer): log σ(x) = min(x, 0) − log(1 + exp(−|x|)); the
 * buffer (empty on the CPU) is left alone. */
static wgml_status op_log_sigmoid(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = T(b, args, 0);
    size_t no;
    const int32_t *outs = x ? vlist(b, args, 1, &no) : NULL;
    if (!outs) return WGML_ERR_ARG;
    if (no < 1) return fail(b, WGML_ERR_ARG, "expected outputs", 1);
    wgml_tensor *t = wgml_log(b->g, wgml_add_scalar(b->g, wgml_exp(b->g, wgml_neg(b->g, wgml_abs(b->g, x))), 1.0f, 1.0f));
    return put(b, outs[0], wgml_sub(b->g, wgml_minimum_scalar(b->g, x, 0.0f), t, 1.0f), 0);
}

/* _prelu_kernel(x, w) = x > 0 ? x : w·x, w [C] along dim 1 (or one weight) */
static wgml_status op_prelu(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *w = x ? T(b, args, 1) : NULL;
    if (!w) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x);
    int64_t c = wgml_tensor_numel(w), shape[WGML_MAX_RANK];
    if (c != 1) {
        if (r < 2 || wgml_tensor_dim(x, 1) != c) return fail(b, WGML_ERR_SHAPE, "weight does not match dim 1", 1);
        for (int i = 0; i < r - 1; i++) shape[i] = i == 0 ? c : 1;
        w = wgml_reshape(b->g, w, r - 1, shape);
    }
    wgml_tensor *neg = wgml_mul(b->g, wgml_minimum_scalar(b->g, x, 0.0f), w);
    return put(b, OUT(0), wgml_add(b->g, wgml_relu(b->g, x), neg, 1.0f), 0);
}

/* scatter.value(self, dim, index, value): out = self with out[.., index[..], ..] = value along
 * dim. Composite, for the one-hot form the exporter's cross-entropy backward writes (index has
 * size 1 along dim and self's sizes elsewhere): a host-built iota along dim compared with the
 * index (both f32, exact up to 2^24) gives the mask, and where(mask, value, self) the result:
 * four small dispatches (cast, compare, fill, where). Other index shapes are refused. */
static wgml_status op_scatter_value(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0), *idx = x ? T(b, args, 2) : NULL;
    if (!idx) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x);
    int dim = ndim(b, inum(b, args, 1, 0, &ok), rank, 1, &ok);
    float value = (float)num(b, args, 3, 0, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (wgml_tensor_dtype(x) != WGML_F32 || wgml_tensor_dtype(idx) != WGML_I32)
        return fail(b, WGML_ERR_DTYPE, "self must be float32 and index int64", 2);
    int64_t ishape[WGML_MAX_RANK], iota_shape[WGML_MAX_RANK];
    int same = wgml_tensor_rank(idx) == rank;
    for (int d = 0; d < rank; d++) {
        ishape[d] = same ? wgml_tensor_dim(idx, d) : 0;
        if (same && ishape[d] != (d == dim ? 1 : wgml_tensor_dim(x, d))) same = 0;
        iota_shape[d] = d == dim ? wgml_tensor_dim(x, d) : 1;
    }
    if (!same) return fail(b, WGML_ERR_UNSUPPORTED, "only an index of size 1 along dim and self's sizes elsewhere", 2);
    int64_t n = wgml_tensor_dim(x, dim), one = 1;
    float *iota = malloc((size_t)n * sizeof *iota);
    if (!iota) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t k = 0; k < n; k++) iota[k] = (float)k;
    wgml_tensor *it = host_tensor(b, WGML_F32, rank, iota_shape, iota, (size_t)n * sizeof *iota);
    free(iota);
    wgml_tensor *mask = it ? wgml_compare(b->g, WGML_CMP_EQ, it, as_f32(b, idx)) : NULL;
    wgml_tensor *v = mask ? wgml_full(b->g, WGML_F32, 1, &one, value) : NULL;
    return put(b, OUT(0), v ? wgml_where(b->g, mask, v, x) : NULL, 0);
}

/* flip(x, dims): index_select with a reversed index per flipped dim */
static wgml_status op_flip(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int64_t d64[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d64, WGML_MAX_RANK), ok = 1;
    wgml_tensor *x = T(b, args, 0);
    if (!x || n < 0) return WGML_ERR_ARG;
    for (int i = 0; i < n && x; i++) {
        int d = ndim(b, d64[i], wgml_tensor_rank(x), 1, &ok);
        if (!ok) return WGML_ERR_ARG;
        int64_t size = wgml_tensor_dim(x, d);
        int32_t *idx = malloc((size_t)size * sizeof *idx);
        if (!idx) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
        for (int64_t k = 0; k < size; k++) idx[k] = (int32_t)(size - 1 - k);
        wgml_tensor *it = host_tensor(b, WGML_I32, 1, &size, idx, (size_t)size * sizeof *idx);
        free(idx);
        x = it ? wgml_index_select(b->g, x, d, it) : NULL;
    }
    return put(b, OUT(0), x, 0);
}

/* pixel_shuffle(x [.., C·r², H, W], r) -> [.., C, H·r, W·r]: a view, a permute, a view */
static wgml_status op_pixel_shuffle(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int ok = 1;
    int64_t r = inum(b, args, 1, 1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x);
    if (rank != 4 || r < 1 || wgml_tensor_dim(x, 1) % (r * r))
        return fail(b, WGML_ERR_SHAPE, "pixel_shuffle takes [N, C·r², H, W]", 0);
    int64_t n = wgml_tensor_dim(x, 0), c = wgml_tensor_dim(x, 1) / (r * r), h = wgml_tensor_dim(x, 2), w = wgml_tensor_dim(x, 3);
    int64_t v[6] = {n, c, r, r, h, w};
    int perm[6] = {0, 1, 4, 2, 5, 3};
    wgml_tensor *y = wgml_permute(b->g, wgml_reshape(b->g, x, 6, v), perm);
    return put(b, OUT(0), y, 1);
}

/* native_group_norm(x, w?, b?, N, C, HxW, group, eps) -> (out, mean [N, G], rstd [N, G]):
 * a layer norm over each group's C/G·HxW elements, then the per-channel affine. */
static wgml_status op_group_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(9);
    int ok = 1;
    int64_t n = inum(b, args, 3, 0, &ok), c = inum(b, args, 4, 0, &ok), hw = inum(b, args, 5, 0, &ok), g = inum(b, args, 6, 1, &ok);
    float eps = (float)num(b, args, 7, 1e-5, &ok);
    wgml_tensor *x = T(b, args, 0), *w, *bias;
    if (!x || !ok || opt_tensor(b, args, 1, &w) || opt_tensor(b, args, 2, &bias)) return WGML_ERR_ARG;
    if (g < 1 || c % g || n * c * hw != wgml_tensor_numel(x)) return fail(b, WGML_ERR_SHAPE, "N·C·HxW does not match x", 0);
    size_t no;
    const int32_t *outs = vlist(b, args, 8, &no);
    if (!outs || no != 3) return outs ? fail(b, WGML_ERR_ARG, "expected 3 outputs", 8) : WGML_ERR_ARG;
    int64_t gs[3] = {n, g, c / g * hw}, cs[3] = {n, c, hw}, wc[2] = {c, 1};
    wgml_tensor *mean = NULL, *rstd = NULL;
    wgml_tensor *y = wgml_layer_norm(b->g, wgml_reshape(b->g, x, 3, gs), NULL, NULL, eps, &mean, &rstd);
    y = y ? wgml_reshape(b->g, y, 3, cs) : NULL;
    if (y && w) y = wgml_mul(b->g, y, wgml_reshape(b->g, w, 2, wc));
    if (y && bias) y = wgml_add(b->g, y, wgml_reshape(b->g, bias, 2, wc), 1.0f);
    wgml_status s = put(b, outs[0], y, 1);
    if (!s && b->v[outs[1]].kind == PV_TENSOR) s = put(b, outs[1], mean, 1);
    if (!s && b->v[outs[2]].kind == PV_TENSOR) s = put(b, outs[2], rstd, 1);
    return s;
}

/* _native_batch_norm_legit_no_training(x, w?, b?, running_mean, running_var, momentum, eps)
 * -> (out, save_mean, save_invstd): y = x·s + t per channel (dim 1), s = w·rsqrt(var + eps),
 * t = b − mean·s. The saved statistics (empty in inference) are left alone. */
static wgml_status op_batch_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(8);
    int ok = 1;
    float eps = (float)num(b, args, 6, 1e-5, &ok);
    wgml_tensor *x = T(b, args, 0), *w, *bias, *mean = x ? T(b, args, 3) : NULL, *var = mean ? T(b, args, 4) : NULL;
    if (!ok || !var || opt_tensor(b, args, 1, &w) || opt_tensor(b, args, 2, &bias)) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x);
    int64_t c = r >= 2 ? wgml_tensor_dim(x, 1) : 0, shape[WGML_MAX_RANK];
    if (r < 2 || wgml_tensor_numel(mean) != c || wgml_tensor_numel(var) != c) return fail(b, WGML_ERR_SHAPE, "statistics do not match dim 1", 3);
    for (int i = 0; i < r - 1; i++) shape[i] = i == 0 ? c : 1;
    wgml_tensor *sc = wgml_rsqrt(b->g, wgml_add_scalar(b->g, var, eps, 1.0f));
    if (w) sc = wgml_mul(b->g, sc, w);
    wgml_tensor *sh = wgml_neg(b->g, wgml_mul(b->g, mean, sc));
    if (bias) sh = wgml_add(b->g, sh, bias, 1.0f);
    wgml_tensor *y = wgml_add(b->g, wgml_mul(b->g, x, wgml_reshape(b->g, sc, r - 1, shape)), wgml_reshape(b->g, sh, r - 1, shape), 1.0f);
    size_t no;
    const int32_t *outs = vlist(b, args, 7, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no < 1) return fail(b, WGML_ERR_ARG, "expected outputs", 7);
    return put(b, outs[0], y, 0);
}

/* ---- windows: convolution, pooling and upsampling ----------------------------------------- */

/* A convolution is one gather (index_select with a host-built index) of the input with one
 * zero appended for the padding, then a matmul; nearest upsampling one gather. The geometry
 * lives in one place, struct win: window slot j (a multi-index over the nd window dims) of
 * output position o reads, in dim d, the virtual coordinate v = o·st + j·dl + off; the input
 * element there is v/up when v is a multiple of up (up > 1: the stride-dilated input of a
 * transposed convolution) inside [0, in), and padding otherwise. Pools are wgml_pool (one
 * dispatch, no gathered copy); bilinear upsampling is two matmuls. */
typedef struct win {
    int nd;
    int64_t in[3], out[3], k[3], st[3], dl[3], off[3], up[3];
} win;

#define WIN_MAX ((int64_t)1 << 26) /* the most gathered elements (and host index entries) */
#define WIN_ARG ((int64_t)1 << 20) /* the largest kernel, stride, padding or dilation taken */

/* a·b, or WIN_MAX + 1 when it exceeds WIN_MAX (both operands >= 0). */
static int64_t cap_mul(int64_t a, int64_t b) { return a && b > WIN_MAX / a ? WIN_MAX + 1 : a * b; }
static int64_t cap_prod(const int64_t *a, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p = cap_mul(p, a[i]);
    return p;
}

/* The input coordinate slot j of position o reads in dim d, or -1 for padding. */
static int64_t win_coord(const win *w, int d, int64_t o, int64_t j) {
    int64_t v = o * w->st[d] + j * w->dl[d] + w->off[d];
    if (v < 0 || v % w->up[d]) return -1;
    v /= w->up[d];
    return v < w->in[d] ? v : -1;
}

/* table[p·kk + j]: the row-major offset over the window dims of the input element that slot j
 * of output position p reads, -1 for padding (positions and slots in row-major order). The
 * caller has checked np·kk <= WIN_MAX. NULL (an error set) when out of host memory. */
static int64_t *win_table(pbuild *b, const win *w) {
    int64_t np = cap_prod(w->out, w->nd), kk = cap_prod(w->k, w->nd);
    int64_t *t = malloc((size_t)(np * kk) * sizeof *t);
    if (!t) {
        wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
        return NULL;
    }
    for (int64_t p = 0; p < np; p++)
        for (int64_t j = 0; j < kk; j++) {
            int64_t off = 0, pr = p, jr = j, o[3], s[3];
            for (int d = w->nd - 1; d >= 0; d--) o[d] = pr % w->out[d], pr /= w->out[d], s[d] = jr % w->k[d], jr /= w->k[d];
            for (int d = 0; d < w->nd && off >= 0; d++) {
                int64_t c = win_coord(w, d, o[d], s[d]);
                off = c < 0 ? -1 : off * w->in[d] + c;
            }
            t[p * kk + j] = off;
        }
    return t;
}

/* PyTorch's pooled extent: (in + 2·pd − dl·(k−1) − 1) / st + 1 rounded down, or up with
 * ceil_mode (a last window that would start in the right padding dropped); -1 when no window
 * fits. */
static int64_t pool_extent(int64_t in, int64_t k, int64_t st, int64_t pd, int64_t dl, int ceil_mode) {
    int64_t span = in + 2 * pd - dl * (k - 1) - 1;
    if (span < 0) return -1;
    int64_t o = (ceil_mode ? span + st - 1 : span) / st + 1;
    if (ceil_mode && (o - 1) * st >= in + pd) o--;
    return o;
}

/* nd ints from a list of 1 or nd (one entry applies to every dim); def for each when empty or
 * Null; each must lie in [lo, WIN_ARG]. -1 with an error otherwise. */
static int wlist(pbuild *b, const int32_t *args, int i, int nd, int64_t def, int64_t lo, int64_t out[3]) {
    int64_t l[WGML_MAX_RANK];
    int n = ilist(b, args, i, l, WGML_MAX_RANK);
    if (n < 0) return -1;
    if (n != 0 && n != 1 && n != nd) {
        fail(b, WGML_ERR_ARG, "expected one value or one per window dim", i);
        return -1;
    }
    for (int d = 0; d < nd; d++) {
        out[d] = n == 0 ? def : l[n == 1 ? 0 : d];
        if (out[d] < lo || out[d] > WIN_ARG) {
            fail(b, WGML_ERR_ARG, lo ? "values must be positive" : "values must not be negative", i);
            return -1;
        }
    }
    return n;
}

/* The window input x [..., in...] (f32, rank nd+1 or nd+2 when pool, nd+2 otherwise); fills
 * w->in and *planes (the product of the leading dims). */
static wgml_status win_input(pbuild *b, wgml_tensor *x, int nd, int pool, win *w, int64_t *planes) {
    int r = wgml_tensor_rank(x);
    if (wgml_tensor_dtype(x) != WGML_F32 || (r != nd + 2 && !(pool && r == nd + 1))) {
        char m[96];
        snprintf(m, sizeof m, "expected an f32 %s input with %d window dims", pool ? "[N,] C, ..." : "[N, C, ...]", nd);
        return fail(b, WGML_ERR_UNSUPPORTED, m, 0);
    }
    w->nd = nd;
    int64_t p = 1;
    for (int d = 0; d < nd; d++) w->in[d] = wgml_tensor_dim(x, r - nd + d), p *= w->in[d];
    *planes = wgml_tensor_numel(x) / p;
    return WGML_OK;
}

/* convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding,
 * groups): 1-D, 2-D and 3-D, plain or transposed. The input is laid out channels first
 * [C, N·in] with one zero appended, and one index_select gathers every group's patches into
 * columns [G, Cin/G·K, N·np] (im2col; K the kernel's elements); one batched matmul with the
 * weight as [G, Cout/G, Cin/G·K] gives every group at once (with one output channel per group,
 * a product and a sum over the columns instead). A transposed convolution is the
 * same gather over the stride-dilated, padded input (win's up, off and a negative dl read the
 * kernel flipped), with the weight [Cin, Cout/G, k...] regrouped to [G, Cout/G, Cin/G·K]. */
static wgml_status op_conv(pbuild *b, const int32_t *args, int nargs) {
    NEED(10);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0), *w = x ? T(b, args, 1) : NULL, *bias;
    if (!w || opt_tensor(b, args, 2, &bias)) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x), nd = r - 2, tr = inum(b, args, 6, 0, &ok) != 0;
    int64_t groups = inum(b, args, 8, 1, &ok), st[3], pd[3], dl[3], op[3];
    if (!ok) return WGML_ERR_ARG;
    if (nd < 1 || nd > 3 || wgml_tensor_rank(w) != r || wgml_tensor_dtype(x) != WGML_F32 || wgml_tensor_dtype(w) != WGML_F32)
        return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: only f32 1-D, 2-D and 3-D convolutions", b->op);
    if (wlist(b, args, 3, nd, 1, 1, st) < 0 || wlist(b, args, 4, nd, 0, 0, pd) < 0 || wlist(b, args, 5, nd, 1, 1, dl) < 0 ||
        wlist(b, args, 7, nd, 0, 0, op) < 0)
        return WGML_ERR_ARG;
    int64_t n = wgml_tensor_dim(x, 0), c = wgml_tensor_dim(x, 1), w0 = wgml_tensor_dim(w, 0), w1 = wgml_tensor_dim(w, 1);
    if (groups < 1 || groups > WIN_ARG || c % groups || (tr ? w0 != c : w0 % groups || w1 * groups != c))
        return fail(b, WGML_ERR_SHAPE, "the weight and groups do not fit the input's channels", 1);
    int64_t cig = c / groups, co = tr ? w1 * groups : w0, cog = co / groups;
    win g = {.nd = nd};
    for (int d = 0; d < nd; d++) {
        g.in[d] = wgml_tensor_dim(x, 2 + d), g.k[d] = wgml_tensor_dim(w, 2 + d);
        if (tr) {
            if (op[d] >= st[d] && op[d] >= dl[d]) return fail(b, WGML_ERR_ARG, "output_padding must be smaller than stride or dilation", 7);
            g.out[d] = (g.in[d] - 1) * st[d] - 2 * pd[d] + dl[d] * (g.k[d] - 1) + op[d] + 1;
            g.st[d] = 1, g.dl[d] = -dl[d], g.off[d] = pd[d], g.up[d] = st[d];
        } else {
            if (op[d]) return fail(b, WGML_ERR_ARG, "output_padding of a convolution that is not transposed", 7);
            g.out[d] = pool_extent(g.in[d], g.k[d], st[d], pd[d], dl[d], 0);
            g.st[d] = st[d], g.dl[d] = dl[d], g.off[d] = -pd[d], g.up[d] = 1;
        }
        if (g.out[d] < 1) return fail(b, WGML_ERR_SHAPE, "the kernel is larger than the (padded) input", 1);
    }
    int64_t kk = cap_prod(g.k, nd), np = cap_prod(g.out, nd), plane = cap_prod(g.in, nd), kc = cap_mul(cig, kk);
    int64_t cols_n = cap_mul(cap_mul(cap_mul(groups, kc), n), np);
    if (cols_n > WIN_MAX || cap_mul(np, kk) > WIN_MAX || cap_mul(cap_mul(c, n), plane) >= WIN_MAX)
        return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: too large for the gather form", b->op);
    int64_t *tab = win_table(b, &g);
    int32_t *idx = tab ? malloc((size_t)cols_n * sizeof *idx) : NULL;
    if (!idx) {
        free(tab);
        return tab ? wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory") : wgml_last_status(b->ctx);
    }
    int64_t padat = c * n * plane, e = 0;
    for (int64_t ch = 0; ch < c; ch++) /* ch = group·Cin/G + ci: rows (group, ci, slot) */
        for (int64_t j = 0; j < kk; j++)
            for (int64_t bi = 0; bi < n; bi++)
                for (int64_t p = 0; p < np; p++) {
                    int64_t t = tab[p * kk + j];
                    idx[e++] = (int32_t)(t < 0 ? padat : (ch * n + bi) * plane + t);
                }
    free(tab);
    int64_t ncp[3] = {n, c, plane}, flat[2] = {1, padat}, one[2] = {1, 1}, c3[3] = {groups, kc, n * np};
    int perm3[3] = {1, 0, 2}, perm4[4] = {0, 2, 1, 3};
    wgml_tensor *xc = wgml_reshape(b->g, x, 3, ncp);
    if (xc && n > 1) xc = wgml_permute(b->g, xc, perm3);
    wgml_tensor *parts[2] = {xc ? wgml_reshape(b->g, xc, 2, flat) : NULL, wgml_zeros(b->g, WGML_F32, 2, one)};
    wgml_tensor *it = parts[0] && parts[1] ? host_tensor(b, WGML_I32, 1, &cols_n, idx, (size_t)cols_n * sizeof *idx) : NULL;
    free(idx);
    wgml_tensor *cols = it ? wgml_reshape(b->g, wgml_index_select(b->g, wgml_cat(b->g, parts, 2, 1), 1, it), 3, c3) : NULL;
    int64_t wg3[3] = {groups, cog, kc}, wg4[4] = {groups, cig, cog, kk};
    wgml_tensor *wg = tr ? wgml_reshape(b->g, wgml_permute(b->g, wgml_reshape(b->g, w, 4, wg4), perm4), 3, wg3)
                         : wgml_reshape(b->g, w, 3, wg3);
    wgml_tensor *y = NULL; /* [G, Cout/G, N·np] */
    if (cols && wg && cog == 1) { /* one output channel per group (depthwise): a matmul of one row per batch would
                                   * waste most of its tiles (~100x slower here); a product and a column sum */
        int64_t wc[3] = {groups, kc, 1};
        int mid = 1;
        y = wgml_sum(b->g, wgml_mul(b->g, cols, wgml_reshape(b->g, wg, 3, wc)), &mid, 1, 1);
    } else if (cols && wg) {
        y = wgml_matmul(b->g, wg, cols, 0, 0);
    }
    int64_t cnp[3] = {co, n, np}, ncop[3] = {n, co, np}, bc[2] = {co, 1};
    if (y && n > 1) y = wgml_permute(b->g, wgml_reshape(b->g, y, 3, cnp), perm3);
    else if (y) y = wgml_reshape(b->g, y, 3, ncop);
    if (y && bias) y = wgml_add(b->g, y, wgml_reshape(b->g, bias, 2, bc), 1.0f);
    return put(b, OUT(0), y, 1);
}

/* et_vk.conv_with_clamp(input, weight, bias?, stride, padding, dilation, transposed,
 * output_padding, groups, output_min?, output_max?): the Vulkan partitioner's fusion of a
 * convolution and a clamp (ReLU6, hardtanh), built as the two. */
static wgml_status op_conv_with_clamp(pbuild *b, const int32_t *args, int nargs) {
    NEED(12);
    int ok = 1;
    float lo = (float)num(b, args, 9, -INFINITY, &ok), hi = (float)num(b, args, 10, INFINITY, &ok);
    if (!ok) return WGML_ERR_ARG;
    int32_t a[10];
    memcpy(a, args, 9 * sizeof *a);
    a[9] = args[11];
    wgml_status s = op_conv(b, a, 10);
    return s ? s : put(b, args[11], wgml_clamp(b->g, b->v[args[11]].t, lo, hi), 0);
}

/* Pools are one wgml_pool dispatch (src/ops/pool): max with PyTorch's indices, average with
 * its divisor rules, adaptive windows. The builders read the arguments into a wgml_pool_desc
 * and give the output extents (PyTorch's floor / ceil_mode rule, pool_extent). */

/* Runs the pool of desc over x into value `out` and, when the program has one, `indices`. */
static wgml_status pool_put(pbuild *b, wgml_tensor *x, const wgml_pool_desc *d, int32_t out, int32_t indices) {
    wgml_tensor *ix = NULL;
    int want = indices >= 0 && b->v[indices].kind == PV_TENSOR;
    wgml_tensor *y = wgml_pool(b->g, x, d, want ? &ix : NULL);
    if (!y) return wgml_set_error(b->ctx, wgml_last_status(b->ctx), "program: %s: %s", b->op, wgml_last_error(b->ctx));
    wgml_status s = put(b, out, y, 1);
    return s || !want ? s : put(b, indices, ix, 1);
}

/* ---- glue of fully partitioned programs ------------------------------------------------------ */

/* arange.start_step (start, end, step, dtype?, layout?, device?, pin_memory?) and its out
 * variant arange.start_out (start, end, step): a constant, built on the host in the output's
 * dtype (int64 narrowed to int32, as every int tensor). */
static wgml_status op_arange(pbuild *b, const int32_t *args, int nargs) {
    if (nargs != 4 && nargs != 8) NEED(4);
    int ok = 1;
    double start = num(b, args, 0, 0.0, &ok), end = num(b, args, 1, 0.0, &ok), step = num(b, args, 2, 1.0, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (!(step != 0) || !isfinite(start) || !isfinite(end) || !isfinite(step) || (end - start) / step < 0)
        return fail(b, WGML_ERR_ARG, "step must be non-zero, finite and point from start to end", 2);
    double nd = ceil((end - start) / step);
    pv *o = &b->v[OUT(0)];
    if (o->kind != PV_TENSOR || o->unsupported || o->rank != 1 || (double)o->dims[0] != nd)
        return wgml_set_error(b->ctx, WGML_ERR_SHAPE, "program: %s: %g values from %g to %g by %g, the output is not a "
                              "tensor of that many", b->op, nd, start, end, step);
    int dt = prog_vk_to_wgml(o->vk_dtype);
    if (dt != WGML_F32 && dt != WGML_I32)
        return wgml_set_error(b->ctx, WGML_ERR_DTYPE, "program: %s: output dtype %s", b->op, prog_vk_dtype_name(o->vk_dtype));
    int64_t n = o->dims[0];
    void *h = malloc((size_t)n * 4);
    if (!h) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i * step;
        if (dt == WGML_I32) {
            if (v < -2147483648.0 || v > 2147483647.0) {
                free(h);
                return wgml_set_error(b->ctx, WGML_ERR_LIMIT, "program: %s: value %g is outside int32", b->op, v);
            }
            ((int32_t *)h)[i] = (int32_t)v;
        } else {
            ((float *)h)[i] = (float)v;
        }
    }
    wgml_tensor *t = host_tensor(b, (wgml_dtype)dt, 1, &n, h, (size_t)n * 4);
    free(h);
    return put(b, OUT(0), t, 0);
}

/* The index tensors of a Tensor?[] argument (i32, computed) into idx[], their dims into dims[];
 * the count, or -1 with an error. */
static int index_list(pbuild *b, const int32_t *args, int i, int rank, wgml_tensor **idx, int *dims) {
    const pv *l = val(b, args, i);
    if (l->kind != PV_OPT_TENSOR_LIST && l->kind != PV_VALUELIST) return fail(b, WGML_ERR_ARG, "expected a tensor list", i), -1;
    if (l->n > (size_t)rank) return fail(b, WGML_ERR_ARG, "more indices than dims", i), -1;
    int k = 0;
    for (size_t j = 0; j < l->n; j++) {
        if (l->ids[j] < 0 || (size_t)l->ids[j] >= b->nv || b->v[l->ids[j]].kind == PV_NULL) continue;
        const pv *iv = &b->v[l->ids[j]];
        if (iv->kind != PV_TENSOR || !iv->t) return fail(b, WGML_ERR_ARG, "an index is not a computed tensor", i), -1;
        if (wgml_tensor_dtype(iv->t) != WGML_I32) return fail(b, WGML_ERR_UNSUPPORTED, "only integer index tensors", i), -1;
        idx[k] = iv->t, dims[k++] = (int)j;
    }
    if (!k) return fail(b, WGML_ERR_UNSUPPORTED, "no index tensor", i), -1;
    return k;
}

/* index.Tensor (self, indices: Tensor?[]): index tensors on the leading dims (x[i0, i1]), or one
 * index tensor at any dim (x[:, :, i], an index_select with the index's shape replacing the
 * dim). Several index tensors after a None are refused. */
static wgml_status op_index_tensor(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *idx[WGML_MAX_RANK];
    if (!x) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x), dims[WGML_MAX_RANK];
    int k = index_list(b, args, 1, rank, idx, dims);
    if (k < 0) return WGML_ERR_ARG;
    if (dims[k - 1] == k - 1) return put(b, OUT(0), wgml_index_tensor(b->g, x, idx, k), 0);
    if (k > 1) return fail(b, WGML_ERR_UNSUPPORTED, "several index tensors after a None", 1);
    int dim = dims[0], ir = wgml_tensor_rank(idx[0]);
    if (rank - 1 + ir > WGML_MAX_RANK) return fail(b, WGML_ERR_UNSUPPORTED, "result rank over 8", 1);
    int64_t n = wgml_tensor_numel(idx[0]), shape[WGML_MAX_RANK];
    wgml_tensor *y = wgml_index_select(b->g, x, dim, wgml_reshape(b->g, idx[0], 1, &n));
    int r = 0;
    for (int i = 0; i < dim; i++) shape[r++] = wgml_tensor_dim(x, i);
    for (int i = 0; i < ir; i++) shape[r++] = wgml_tensor_dim(idx[0], i);
    for (int i = dim + 1; i < rank; i++) shape[r++] = wgml_tensor_dim(x, i);
    return put(b, OUT(0), y ? wgml_reshape(b->g, y, r, shape) : NULL, 0);
}

/* index_put (self, indices: Tensor?[], values, accumulate): the index tensors must be on the
 * leading dims (Nones after them only). */
static wgml_status op_index_put(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    int acc = iarg(b, args, 3, 0, &ok);
    wgml_tensor *x = T(b, args, 0), *v = x ? T(b, args, 2) : NULL, *idx[WGML_MAX_RANK];
    if (!ok || !v) return WGML_ERR_ARG;
    int dims[WGML_MAX_RANK], k = index_list(b, args, 1, wgml_tensor_rank(x), idx, dims);
    if (k < 0) return WGML_ERR_ARG;
    if (dims[k - 1] != k - 1) return fail(b, WGML_ERR_UNSUPPORTED, "index tensors only on the leading dims (None after them)", 1);
    return put(b, OUT(0), wgml_index_put(b->g, x, idx, k, v, acc), 0);
}

/* _embedding_bag (weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights?,
 * include_last_offset, padding_idx) -> (output, offset2bag, bag_size, max_indices): the output
 * only (the other three are the backward's bookkeeping; a program that reads them fails at load,
 * naming the tensor). */
static wgml_status op_embedding_bag(pbuild *b, const int32_t *args, int nargs) {
    NEED(10);
    int ok = 1;
    int mode = iarg(b, args, 4, 0, &ok), last = iarg(b, args, 7, 0, &ok);
    int64_t pad = inum(b, args, 8, -1, &ok);
    wgml_tensor *w = T(b, args, 0), *idx = w ? T(b, args, 1) : NULL, *off = idx ? T(b, args, 2) : NULL, *psw = NULL;
    if (!ok || !off || opt_tensor(b, args, 6, &psw)) return WGML_ERR_ARG;
    size_t no;
    const int32_t *outs = vlist(b, args, 9, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 4) return fail(b, WGML_ERR_ARG, "expected 4 outputs", 9);
    return put(b, outs[0], wgml_embedding_bag(b->g, w, idx, off, mode, psw, last, pad), 0);
}

/* _empty_dim_order (size, dim_order?) in its out form, or the functional (size, dtype?, layout?,
 * device?, pin_memory?, dim_order?): an uninitialised tensor, here zeros of the output's
 * serialised shape and dtype (contiguous order only). */
static wgml_status op_empty(pbuild *b, const int32_t *args, int nargs) {
    if (nargs != 3 && nargs != 7) NEED(3);
    int64_t sz[WGML_MAX_RANK], order[WGML_MAX_RANK];
    int n = ilist(b, args, 0, sz, WGML_MAX_RANK), no = ilist(b, args, nargs - 2, order, WGML_MAX_RANK);
    if (n < 0 || no < 0) return WGML_ERR_ARG;
    for (int i = 0; i < no; i++)
        if (order[i] != i) return fail(b, WGML_ERR_UNSUPPORTED, "only the contiguous dim order", nargs - 2);
    pv *o = &b->v[OUT(0)];
    int dt = o->kind == PV_TENSOR && !o->unsupported ? prog_vk_to_wgml(o->vk_dtype) : -1;
    if (dt < 0) return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: the output is not a tensor wgml holds", b->op);
    return put(b, OUT(0), wgml_zeros(b->g, (wgml_dtype)dt, n, sz), 0);
}

/* copy (self, src, non_blocking): src broadcast to self's shape, in self's dtype (a dtype
 * conversion is refused). */
static wgml_status op_copy(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *self = T(b, args, 0), *src = self ? T(b, args, 1) : NULL;
    if (!src) return WGML_ERR_ARG;
    if (wgml_tensor_dtype(self) != wgml_tensor_dtype(src))
        return fail(b, WGML_ERR_UNSUPPORTED, "src's dtype differs from self's (no conversion)", 1);
    int rank = wgml_tensor_rank(self);
    int64_t shape[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) shape[i] = wgml_tensor_dim(self, i);
    return put(b, OUT(0), wgml_expand_copy(b->g, src, rank, shape), 0);
}

/* slice_scatter (self, src, dim, start?, end?, step): self with self[start:end:step] along dim
 * replaced by src, as one gather: index_select of cat(self, src) along dim with a host-built
 * index (position i reads src's row (i - start) / step inside the slice, else self's row i). */
static wgml_status op_slice_scatter(pbuild *b, const int32_t *args, int nargs) {
    NEED(7);
    int ok = 1;
    wgml_tensor *self = T(b, args, 0), *src = self ? T(b, args, 1) : NULL;
    if (!src) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(self);
    int dim = ndim(b, inum(b, args, 2, 0, &ok), rank, 2, &ok);
    int64_t size = ok ? wgml_tensor_dim(self, dim) : 0;
    int64_t start = inum(b, args, 3, 0, &ok), end = inum(b, args, 4, INT64_MAX, &ok), step = inum(b, args, 5, 1, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (step < 1) return fail(b, WGML_ERR_ARG, "step must be positive", 5);
    /* Python slice bounds: negative counts from the end, then clamped into [0, size] */
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    int64_t len = (end - start + step - 1) / step;
    int same = wgml_tensor_rank(src) == rank && wgml_tensor_dtype(src) == wgml_tensor_dtype(self);
    for (int i = 0; same && i < rank; i++) same = wgml_tensor_dim(src, i) == (i == dim ? len : wgml_tensor_dim(self, i));
    if (!same) return fail(b, WGML_ERR_SHAPE, "src must have self's dtype and shape with the slice's length at dim", 1);
    if (len == 0) return put(b, OUT(0), self, 0); /* an empty slice: self unchanged */
    int32_t *idx = malloc((size_t)size * sizeof *idx);
    if (!idx) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t i = 0; i < size; i++)
        idx[i] = (int32_t)(i >= start && i < end && (i - start) % step == 0 ? size + (i - start) / step : i);
    wgml_tensor *it = host_tensor(b, WGML_I32, 1, &size, idx, (size_t)size * sizeof *idx);
    free(idx);
    wgml_tensor *parts[2] = {self, src};
    wgml_tensor *both = it ? wgml_cat(b->g, parts, 2, dim) : NULL;
    return put(b, OUT(0), both ? wgml_index_select(b->g, both, dim, it) : NULL, 0);
}


/* The f32 input [N,] C, in... of a pool with nd window dims. */
static wgml_tensor *pool_input(pbuild *b, const int32_t *args, int nd) {
    wgml_tensor *x = T(b, args, 0);
    win g;
    int64_t planes;
    return x && !win_input(b, x, nd, 1, &g, &planes) ? x : NULL;
}

/* The window of a kernel/stride/padding[/dilation]/ceil_mode operator at args[1..] into d. */
static wgml_status pool_window(pbuild *b, const int32_t *args, wgml_tensor *x, int nd, int dil_arg, int ceil_arg,
                               wgml_pool_desc *d) {
    int64_t ks[3], st[3], pd[3], dl[3] = {1, 1, 1};
    int ok = 1;
    int sn = wlist(b, args, 2, nd, 0, 0, st);
    if (wlist(b, args, 1, nd, 1, 1, ks) < 0 || sn < 0 || wlist(b, args, 3, nd, 0, 0, pd) < 0 ||
        (dil_arg >= 0 && wlist(b, args, dil_arg, nd, 1, 1, dl) < 0))
        return WGML_ERR_ARG;
    int ceil_mode = inum(b, args, ceil_arg, 0, &ok) != 0;
    if (!ok) return WGML_ERR_ARG;
    d->nd = nd;
    for (int i = 0; i < nd; i++) {
        if (sn == 0 || st[i] == 0) st[i] = ks[i]; /* an empty stride is the kernel size */
        if (2 * pd[i] > dl[i] * (ks[i] - 1) + 1) return fail(b, WGML_ERR_ARG, "padding over half the (dilated) window", 3);
        d->kernel[i] = ks[i], d->stride[i] = st[i], d->padding[i] = pd[i], d->dilation[i] = dl[i];
        d->out[i] = pool_extent(wgml_tensor_dim(x, i - nd), ks[i], st[i], pd[i], dl[i], ceil_mode);
        if (d->out[i] < 1) return fail(b, WGML_ERR_SHAPE, "the window is larger than the (padded) input", 1);
    }
    return WGML_OK;
}

/* max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) ->
 * (out, indices), and max_pool{2,3}d(...) -> out. */
static wgml_status max_pool_common(pbuild *b, const int32_t *args, int nargs, int nd) {
    NEED(7);
    wgml_pool_desc d = {.max = 1};
    wgml_tensor *x = pool_input(b, args, nd);
    if (!x || pool_window(b, args, x, nd, 4, 5, &d)) return wgml_last_status(b->ctx);
    if (is_tensor(b, args, 6)) return pool_put(b, x, &d, OUT(0), -1);
    size_t no;
    const int32_t *outs = vlist(b, args, 6, &no);
    if (!outs || no < 1 || no > 2) return outs ? fail(b, WGML_ERR_ARG, "expected 1 or 2 outputs", 6) : WGML_ERR_ARG;
    return pool_put(b, x, &d, outs[0], no > 1 ? outs[1] : -1);
}
static wgml_status op_max_pool2d(pbuild *b, const int32_t *a, int n) { return max_pool_common(b, a, n, 2); }
static wgml_status op_max_pool3d(pbuild *b, const int32_t *a, int n) { return max_pool_common(b, a, n, 3); }

/* adaptive_max_pool{2,3}d(self, output_size) -> (out, indices) and
 * _adaptive_avg_pool{2,3}d(self, output_size) -> out. */
static wgml_status adaptive_common(pbuild *b, const int32_t *args, int nargs, int nd, int max) {
    NEED(3);
    wgml_pool_desc d = {.nd = nd, .max = max, .adaptive = 1};
    wgml_tensor *x = pool_input(b, args, nd);
    if (!x || wlist(b, args, 1, nd, 1, 1, d.out) < 0) return wgml_last_status(b->ctx);
    if (!max) return pool_put(b, x, &d, OUT(0), -1);
    size_t no;
    const int32_t *outs = vlist(b, args, 2, &no);
    if (!outs || no < 1 || no > 2) return outs ? fail(b, WGML_ERR_ARG, "expected 1 or 2 outputs", 2) : WGML_ERR_ARG;
    return pool_put(b, x, &d, outs[0], no > 1 ? outs[1] : -1);
}
static wgml_status op_adaptive_max_pool2d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 2, 1); }
static wgml_status op_adaptive_max_pool3d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 3, 1); }
static wgml_status op_adaptive_avg_pool2d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 2, 0); }
static wgml_status op_adaptive_avg_pool3d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 3, 0); }

/* avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
 * divisor_override?) */
static wgml_status avg_pool_common(pbuild *b, const int32_t *args, int nargs, int nd) {
    NEED(8);
    wgml_pool_desc d = {.max = 0};
    int ok = 1;
    wgml_tensor *x = pool_input(b, args, nd);
    if (!x || pool_window(b, args, x, nd, -1, 4, &d)) return wgml_last_status(b->ctx);
    d.count_include_pad = inum(b, args, 5, 1, &ok) != 0;
    d.divisor = inum(b, args, 6, 0, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (d.divisor < 0 || d.divisor > WIN_MAX) return fail(b, WGML_ERR_ARG, "divisor_override out of range", 6);
    return pool_put(b, x, &d, OUT(0), -1);
}
static wgml_status op_avg_pool2d(pbuild *b, const int32_t *a, int n) { return avg_pool_common(b, a, n, 2); }
static wgml_status op_avg_pool3d(pbuild *b, const int32_t *a, int n) { return avg_pool_common(b, a, n, 3); }

/* The output size and the scale per dim of an upsample_*2d: output_size (args[1], may be
 * Null) or the scale factors (a DoubleList at args[scale_arg] for .vec, two Doubles at
 * args[scale_arg], args[scale_arg + 1] otherwise); scale[d] is the one given (0: none). */
static wgml_status upsample_size(pbuild *b, const int32_t *args, int vec, int scale_arg, const int64_t in[2], int64_t out[2],
                                 double scale[2]) {
    int64_t os[WGML_MAX_RANK];
    int n = ilist(b, args, 1, os, WGML_MAX_RANK), ok = 1;
    if (n < 0) return WGML_ERR_ARG;
    scale[0] = scale[1] = 0;
    if (vec) {
        const pv *s = val(b, args, scale_arg);
        if (s->kind == PV_DOUBLELIST && s->n == 2 && s->dlist) scale[0] = s->dlist[0], scale[1] = s->dlist[1];
        else if (s->kind != PV_NULL) return fail(b, WGML_ERR_ARG, "expected two scale factors", scale_arg);
    } else {
        scale[0] = num(b, args, scale_arg, 0, &ok), scale[1] = num(b, args, scale_arg + 1, 0, &ok);
        if (!ok) return WGML_ERR_ARG;
    }
    for (int d = 0; d < 2; d++) {
        if (!(scale[d] >= 0 && scale[d] < (double)WIN_ARG)) return fail(b, WGML_ERR_ARG, "scale factor out of range", scale_arg);
        out[d] = n == 2 ? os[d] : (int64_t)floor((double)in[d] * scale[d]);
    }
    if (n != 0 && n != 2) return fail(b, WGML_ERR_ARG, "expected two output sizes", 1);
    if (n == 0 && (!scale[0] || !scale[1])) return fail(b, WGML_ERR_ARG, "neither output_size nor scale factors", 1);
    if (out[0] < 1 || out[1] < 1 || out[0] > WIN_ARG || out[1] > WIN_ARG) return fail(b, WGML_ERR_ARG, "output size out of range", 1);
    return WGML_OK;
}

/* PyTorch's source-index scale of an upsample: the given factor's reciprocal, else in/out;
 * align_corners: (in − 1)/(out − 1) (0 for one output). */
static double upsample_scale(int64_t in, int64_t out, double given, int align) {
    if (align) return out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    return given > 0 ? 1.0 / given : (double)in / (double)out;
}

/* upsample_nearest2d.vec(input, output_size?, scale_factors?) and .default(input, output_size,
 * scales_h?, scales_w?): src = min(floor(dst·scale), in − 1) per dim (in float, as PyTorch),
 * one index_select of each plane. */
static wgml_status nearest_common(pbuild *b, const int32_t *args, int nargs, int vec) {
    NEED(vec ? 4 : 5);
    win g = {0};
    int64_t planes, out[2];
    double sc[2];
    wgml_tensor *x = T(b, args, 0);
    if (!x || win_input(b, x, 2, 0, &g, &planes) || upsample_size(b, args, vec, 2, g.in, out, sc)) return wgml_last_status(b->ctx);
    int64_t np = out[0] * out[1], plane = g.in[0] * g.in[1];
    if (cap_mul(planes, np) > WIN_MAX) return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: too large for the gather form", b->op);
    int32_t *idx = malloc((size_t)np * sizeof *idx);
    if (!idx) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    float s0 = sc[0] > 0 ? (float)(1.0 / sc[0]) : (float)g.in[0] / (float)out[0];
    float s1 = sc[1] > 0 ? (float)(1.0 / sc[1]) : (float)g.in[1] / (float)out[1];
    for (int64_t y = 0; y < out[0]; y++)
        for (int64_t z = 0; z < out[1]; z++) {
            int64_t iy = (int64_t)floorf((float)y * s0), iz = (int64_t)floorf((float)z * s1);
            iy = iy < g.in[0] - 1 ? iy : g.in[0] - 1, iz = iz < g.in[1] - 1 ? iz : g.in[1] - 1;
            idx[y * out[1] + z] = (int32_t)(iy * g.in[1] + iz);
        }
    int64_t flat[2] = {planes, plane};
    wgml_tensor *it = host_tensor(b, WGML_I32, 1, &np, idx, (size_t)np * sizeof *idx);
    free(idx);
    return put(b, OUT(0), it ? wgml_index_select(b->g, wgml_reshape(b->g, x, 2, flat), 1, it) : NULL, 1);
}
static wgml_status op_upsample_nearest2d_vec(pbuild *b, const int32_t *a, int n) { return nearest_common(b, a, n, 1); }
static wgml_status op_upsample_nearest2d(pbuild *b, const int32_t *a, int n) { return nearest_common(b, a, n, 0); }

/* The [out, in] linear interpolation matrix of one dim (PyTorch's source index: align_corners
 * or half-pixel centres clamped at 0; neighbours i0 and min(i0 + 1, in − 1)). */
static float *interp_matrix(int64_t in, int64_t out, double given, int align) {
    float *m = calloc((size_t)(in * out), sizeof *m);
    if (!m) return NULL;
    double s = upsample_scale(in, out, given, align);
    for (int64_t o = 0; o < out; o++) {
        double src = align ? s * (double)o : s * ((double)o + 0.5) - 0.5;
        if (src < 0) src = 0;
        int64_t i0 = (int64_t)src, i1 = i0 < in - 1 ? i0 + 1 : i0;
        if (i0 > in - 1) i0 = i1 = in - 1;
        double l1 = src - (double)i0;
        l1 = l1 < 0 ? 0 : l1 > 1 ? 1 : l1;
        m[o * in + i0] += (float)(1.0 - l1);
        m[o * in + i1] += (float)l1;
    }
    return m;
}

/* upsample_bilinear2d.vec(input, output_size?, align_corners, scale_factors?) and
 * .default(input, output_size, align_corners, scales_h?, scales_w?): separable, so two
 * matmuls with host-built interpolation matrices: x·Aᵂᵀ over the rows, then Aᴴ· per plane. */
static wgml_status bilinear_common(pbuild *b, const int32_t *args, int nargs, int vec) {
    NEED(vec ? 5 : 6);
    win g = {0};
    int64_t planes, out[2];
    double sc[2];
    int ok = 1;
    wgml_tensor *x = T(b, args, 0);
    if (!x || win_input(b, x, 2, 0, &g, &planes) || upsample_size(b, args, vec, 3, g.in, out, sc)) return wgml_last_status(b->ctx);
    int align = inum(b, args, 2, 0, &ok) != 0;
    if (!ok) return WGML_ERR_ARG;
    if (cap_mul(cap_mul(planes, out[0]), out[1]) > WIN_MAX || cap_mul(g.in[0], out[0]) > WIN_MAX || cap_mul(g.in[1], out[1]) > WIN_MAX)
        return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: too large", b->op);
    float *ah = interp_matrix(g.in[0], out[0], sc[0], align), *aw = interp_matrix(g.in[1], out[1], sc[1], align);
    int64_t sh[3] = {1, out[0], g.in[0]}, sw[2] = {out[1], g.in[1]}, rows[2] = {planes * g.in[0], g.in[1]};
    int64_t p3[3] = {planes, g.in[0], out[1]};
    wgml_tensor *th = ah && aw ? host_tensor(b, WGML_F32, 3, sh, ah, (size_t)(out[0] * g.in[0]) * sizeof *ah) : NULL;
    wgml_tensor *tw = th ? host_tensor(b, WGML_F32, 2, sw, aw, (size_t)(out[1] * g.in[1]) * sizeof *aw) : NULL;
    free(ah), free(aw);
    if (!tw) return wgml_last_status(b->ctx) ? wgml_last_status(b->ctx) : wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    wgml_tensor *y = wgml_matmul(b->g, wgml_reshape(b->g, x, 2, rows), tw, 0, 1); /* [planes·H, OW] */
    y = y ? wgml_matmul(b->g, th, wgml_reshape(b->g, y, 3, p3), 0, 0) : NULL;   /* [planes, OH, OW] */
    return put(b, OUT(0), y, 1);
}
static wgml_status op_upsample_bilinear2d_vec(pbuild *b, const int32_t *a, int n) { return bilinear_common(b, a, n, 1); }
static wgml_status op_upsample_bilinear2d(pbuild *b, const int32_t *a, int n) { return bilinear_common(b, a, n, 0); }

/* ---- the table ----------------------------------------------------------------------------- */

static const prog_op_entry OPS[] = {
    {"aten.add.Tensor", op_add},
    {"aten.add.Scalar", op_add},
    {"aten.sub.Tensor", op_sub},
    {"aten.sub.Scalar", op_sub},
    {"aten.rsub.Scalar", op_rsub},
    {"aten.mul.Tensor", op_mul},
    {"aten.mul.Scalar", op_mul},
    {"aten.div.Tensor", op_div},
    {"aten.div.Scalar", op_div},
    {"aten.div.Tensor_mode", op_div_mode},
    {"aten.div.Scalar_mode", op_div_mode},
    {"aten.floor_divide.default", op_floor_divide},
    {"aten.floor.default", op_floor},
    {"aten.ceil.default", op_ceil},
    {"aten.trunc.default", op_trunc},
    {"aten.round.default", op_round},
    {"aten.round.decimals", op_round_decimals},
    {"aten.sin.default", op_sin},
    {"aten.cos.default", op_cos},
    {"aten.minimum.default", op_minimum},
    {"aten.maximum.default", op_maximum},
    {"aten.pow.Tensor_Tensor", op_pow},
    {"aten.pow.Tensor_Scalar", op_pow},
    {"aten.relu.default", op_relu},
    {"aten.sigmoid.default", op_sigmoid},
    {"aten.silu.default", op_silu},
    {"aten.gelu.default", op_gelu},
    {"aten.exp.default", op_exp},
    {"aten.log.default", op_log},
    {"aten.neg.default", op_neg},
    {"aten.abs.default", op_abs},
    {"aten.sqrt.default", op_sqrt},
    {"aten.rsqrt.default", op_rsqrt},
    {"aten.tanh.default", op_tanh},
    {"aten.clamp.default", op_clamp},
    {"aten.hardtanh.default", op_clamp},
    {"aten.eq.Scalar", op_eq},
    {"aten.eq.Tensor", op_eq},
    {"aten.ne.Scalar", op_ne},
    {"aten.ne.Tensor", op_ne},
    {"aten.lt.Scalar", op_lt},
    {"aten.lt.Tensor", op_lt},
    {"aten.le.Scalar", op_le},
    {"aten.le.Tensor", op_le},
    {"aten.gt.Scalar", op_gt},
    {"aten.gt.Tensor", op_gt},
    {"aten.ge.Scalar", op_ge},
    {"aten.ge.Tensor", op_ge},
    {"aten.logical_not.default", op_logical_not},
    {"aten.logical_and.default", op_logical_and},
    {"aten.logical_or.default", op_logical_or},
    {"aten.bitwise_not.default", op_logical_not},
    {"aten.bitwise_and.Tensor", op_logical_and},
    {"aten.bitwise_or.Tensor", op_logical_or},
    {"aten.where.self", op_where},
    {"aten.mm.default", op_mm},
    {"aten.bmm.default", op_bmm},
    {"aten.linear.default", op_linear},
    {"aten.addmm.default", op_addmm},
    {"aten.sum.dim_IntList", op_sum},
    {"aten.mean.dim", op_mean},
    {"aten.mean.dtype", op_mean_all},
    {"aten.amax.default", op_amax},
    {"aten.argmax.default", op_argmax},
    {"aten._softmax.default", op_softmax},
    {"aten._log_softmax.default", op_log_softmax},
    {"aten.native_layer_norm.default", op_layer_norm},
    {"et_vk.rms_norm.default", op_rms_norm},
    {"aten.view_copy.default", op_view},
    {"aten._unsafe_view.default", op_view},
    {"aten.squeeze_copy.dims", op_view},
    {"aten.squeeze_copy.dim", op_view},
    {"aten.squeeze_copy.default", op_view},
    {"aten.unsqueeze_copy.default", op_view},
    {"aten.alias_copy.default", op_view},
    {"aten.clone.default", op_view},
    {"aten._to_copy.default", op_view},
    {"dim_order_ops._clone_dim_order.default", op_view},
    {"dim_order_ops._to_dim_order_copy.default", op_view},
    {"et_vk.prepack.default", op_view},
    {"aten.permute_copy.default", op_permute},
    {"aten.permute.default", op_permute},
    {"aten.transpose_copy.int", op_transpose},
    {"aten.slice_copy.Tensor", op_slice},
    {"aten.select_copy.int", op_select},
    {"aten.cat.default", op_cat},
    {"aten.split_with_sizes_copy.default", op_split_with_sizes},
    {"aten.split_copy.Tensor", op_split},
    {"aten.expand_copy.default", op_expand},
    {"aten.repeat.default", op_repeat},
    {"aten.embedding.default", op_embedding},
    {"aten.gather.default", op_gather},
    {"aten.index_select.default", op_index_select},
    {"aten.scatter.value", op_scatter_value},
    {"aten.full.default", op_full},
    {"aten.full_like.default", op_full},
    {"aten.scalar_tensor.default", op_scalar_tensor},
    {"aten.zeros.default", op_zeros},
    {"aten.zeros_like.default", op_zeros},
    {"aten.ones.default", op_ones},
    {"aten.ones_like.default", op_ones},
    {"aten.scaled_dot_product_attention.default", op_sdpa},
    {"aten.amin.default", op_amin},
    {"aten.convolution.default", op_conv},
    {"et_vk.conv_with_clamp.default", op_conv_with_clamp},
    {"aten._adaptive_avg_pool2d.default", op_adaptive_avg_pool2d},
    {"aten._native_batch_norm_legit_no_training.default", op_batch_norm},
    {"aten.avg_pool2d.default", op_avg_pool2d},
    {"aten.avg_pool3d.default", op_avg_pool3d},
    {"aten._adaptive_avg_pool3d.default", op_adaptive_avg_pool3d},
    {"aten.max_pool2d_with_indices.default", op_max_pool2d},
    {"aten.max_pool2d.default", op_max_pool2d},
    {"aten.max_pool3d_with_indices.default", op_max_pool3d},
    {"aten.adaptive_max_pool2d.default", op_adaptive_max_pool2d},
    {"aten.adaptive_max_pool3d.default", op_adaptive_max_pool3d},
    {"aten.upsample_nearest2d.vec", op_upsample_nearest2d_vec},
    {"aten.upsample_nearest2d.default", op_upsample_nearest2d},
    {"aten.upsample_bilinear2d.vec", op_upsample_bilinear2d_vec},
    {"aten.upsample_bilinear2d.default", op_upsample_bilinear2d},
    {"aten.log_sigmoid_forward.default", op_log_sigmoid},
    {"aten._prelu_kernel.default", op_prelu},
    {"aten.argmin.default", op_argmin},
    {"aten.hardswish.default", op_hardswish},
    {"aten.hardsigmoid.default", op_hardsigmoid},
    {"aten.leaky_relu.default", op_leaky_relu},
    {"aten.elu.default", op_elu},
    {"aten.log10.default", op_log10},
    {"aten.log2.default", op_log2},
    {"aten.log1p.default", op_log1p},
    {"aten.threshold.default", op_threshold},
    {"aten.masked_fill.Scalar", op_masked_fill},
    {"aten.glu.default", op_glu},
    {"aten.flip.default", op_flip},
    {"aten.pixel_shuffle.default", op_pixel_shuffle},
    {"aten.native_group_norm.default", op_group_norm},
    {"aten.arange.start_step", op_arange},
    {"aten.arange.start", op_arange},
    {"aten.index.Tensor", op_index_tensor},
    {"dim_order_ops._empty_dim_order.default", op_empty},
    {"aten.copy.default", op_copy},
    {"aten.slice_scatter.default", op_slice_scatter},
    {"aten.index_put.default", op_index_put},
    {"aten.median.default", op_median_all},
    {"aten._embedding_bag.default", op_embedding_bag},
    {"aten.median.dim", op_median_dim},
    {"aten.median.dim_values", op_median_dim},
};

/* Every table of the registry, in lookup order (a name is in one table only; test_program_ops
 * checks that every listed name finds its own builder). */
static const prog_op_table ops_main = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
static const prog_op_table *const TABLES[] = {&ops_main, &prog_ops_reduce, &prog_ops_arith, &prog_ops_copy, &prog_ops_rope};
#define N_TABLES (sizeof TABLES / sizeof TABLES[0])

static const prog_op_entry *find_entry(const char *name) {
    for (size_t t = 0; t < N_TABLES; t++)
        for (size_t i = 0; i < TABLES[t]->n; i++)
            if (!strcmp(TABLES[t]->ops[i].name, name)) return &TABLES[t]->ops[i];
    return NULL;
}

prog_op_fn prog_op_find(const char *name) {
    const prog_op_entry *e = name ? find_entry(name) : NULL;
    return e ? e->fn : NULL;
}

const char *prog_op_find_out(const char *out_name) {
    for (size_t t = 0; out_name && t < N_TABLES; t++)
        for (size_t i = 0; i < TABLES[t]->n_outs; i++)
            if (!strcmp(TABLES[t]->outs[i].out, out_name)) return TABLES[t]->outs[i].name;
    return NULL;
}

#define MAX_NAMES 512
const char *const *prog_op_names(size_t *n) {
    static const char *names[MAX_NAMES];
    size_t k = 0;
    for (size_t t = 0; t < N_TABLES; t++)
        for (size_t i = 0; i < TABLES[t]->n && k < MAX_NAMES; i++) names[k++] = TABLES[t]->ops[i].name;
    *n = k;
    return names;
}

int prog_vk_to_wgml(int vk) {
    switch (vk) {
    case VK_BOOL: return WGML_BOOL;
    case VK_INT32: case VK_INT64: return WGML_I32;
    case VK_FLOAT32: case VK_FLOAT64: return WGML_F32;
    default: return -1;
    }
}

const char *prog_vk_dtype_name(int vk) {
    static const char *n[] = {"bool", "uint8", "int8", "int32", "float16", "float32", "float64", "int64"};
    return vk >= 0 && vk < 8 ? n[vk] : "unknown dtype";
}
