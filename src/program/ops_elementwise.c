/* The op registry's elementwise operators. One wgml op each: the arithmetic (add, sub, mul,
 * div with or without a rounding mode, floor_divide, rsub, minimum, maximum, pow; the second
 * operand a tensor or a number), the unary maths (relu, sigmoid, silu, gelu, exp, log, neg,
 * abs, sqrt, rsqrt, tanh, floor, ceil, trunc, round, sin, cos, expm1), clamp and hardtanh, the
 * comparisons, logical not/and/or (the bitwise forms of bools) and where. Composed of several,
 * the activations wgml has no kernel for: hardswish, hardsigmoid, leaky_relu, elu, log10, log2,
 * log1p, threshold, masked_fill, glu, log_sigmoid, prelu. */
#include "program/ops_args.h"

#include <math.h>

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
UNARY(op_expm1, WGML_UN_EXPM1)

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
    {"aten.expm1.default", op_expm1},
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
    {"aten.log_sigmoid_forward.default", op_log_sigmoid},
    {"aten._prelu_kernel.default", op_prelu},
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
};

const prog_op_table prog_ops_elementwise = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
