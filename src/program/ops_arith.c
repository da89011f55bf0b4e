/* The op registry's arithmetic and logic forms that exports leave to portable kernels:
 * the remainders fmod (the sign of the dividend, C's fmod) and remainder (the sign of the
 * divisor, Python's %), each with a tensor or a number as divisor (torch.roll decomposes into
 * an index arithmetic (arange + shift) fmod n: torchvision's Swin Transformer shifts its windows
 * so); reciprocal, a number to a tensor's power (pow.Scalar: 10000 ** (arange / d) of a rotary
 * table made in forward), clamp with tensor bounds, sign, erf (hand-written GELUs); exclusive
 * or, and the bitwise forms of bool tensors (integer bitwise operations are refused: wgml has
 * no integer bit kernel).
 *
 * The remainders are a − b·q with q the quotient rounded toward zero (fmod) or −∞ (remainder),
 * through wgml's rounding divisions: on int tensors with PyTorch's integer semantics (exact),
 * on float tensors from the f32 quotient (exact for integer-valued operands below 2^22, as the
 * index arithmetic is; otherwise within f32 rounding of a, and a quotient within rounding of an
 * integer can give a remainder off by b). A zero divisor gives NaN for floats, as PyTorch; a
 * zero number divisor of an int tensor is refused (PyTorch raises), a zero element of an int
 * divisor tensor gives a. */
#include "program/ops_args.h"

#include <math.h>

/* fmod / remainder .Tensor and .Scalar (self, other): computed in the output's dtype (an int
 * tensor with a float divisor promotes to float). */
static wgml_status rem_common(pbuild *b, const int32_t *args, int nargs, int floor_mode) {
    NEED(3);
    wgml_tensor *a = T(b, args, 0), *y = NULL;
    if (!a) return WGML_ERR_ARG;
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype), ok = 1;
    if (dt != WGML_F32 && dt != WGML_I32) return fail(b, WGML_ERR_DTYPE, "the output must be a float or an int tensor", nargs - 1);
    double s = 0;
    if (is_tensor(b, args, 1)) {
        if (!(y = T(b, args, 1))) return WGML_ERR_ARG;
    } else {
        s = num(b, args, 1, 0, &ok);
        if (!ok) return WGML_ERR_ARG;
        if (dt == WGML_I32 && (s != floor(s) || fabs(s) > 16777216.0))
            return fail(b, WGML_ERR_ARG, "an int tensor's divisor must be an integer of magnitude <= 2^24", 1);
        if (dt == WGML_I32 && s == 0) return fail(b, WGML_ERR_ARG, "integer division by zero", 1);
    }
    if (dt == WGML_F32) {
        a = as_f32(b, a);
        y = y ? as_f32(b, y) : NULL;
    } else if (wgml_tensor_dtype(a) != WGML_I32 || (y && wgml_tensor_dtype(y) != WGML_I32)) {
        return fail(b, WGML_ERR_DTYPE, "an int result needs int operands", y ? 1 : 0);
    }
    wgml_binary_op op = floor_mode ? WGML_BIN_DIV_FLOOR : WGML_BIN_DIV_TRUNC;
    wgml_tensor *q = y ? wgml_binary(b->g, op, a, y, 1.0f) : wgml_binary_scalar(b->g, op, a, (float)s, 1.0f);
    wgml_tensor *qb = !q ? NULL : y ? wgml_binary(b->g, WGML_BIN_MUL, q, y, 1.0f) : wgml_binary_scalar(b->g, WGML_BIN_MUL, q, (float)s, 1.0f);
    return put(b, OUT(0), qb ? wgml_binary(b->g, WGML_BIN_SUB, a, qb, 1.0f) : NULL, 0);
}
static wgml_status op_fmod(pbuild *b, const int32_t *a, int n) { return rem_common(b, a, n, 0); }
static wgml_status op_remainder(pbuild *b, const int32_t *a, int n) { return rem_common(b, a, n, 1); }

/* A one-element f32 tensor holding v (broadcasts against anything). */
static wgml_tensor *number(pbuild *b, double v) {
    int64_t one = 1;
    return wgml_full(b->g, WGML_F32, 1, &one, v);
}

/* r converted to the output's dtype (f32 results of int operands: exact up to 2^24). */
static wgml_status put_as_out(pbuild *b, int32_t out, wgml_tensor *r) {
    int dt = prog_vk_to_wgml(b->v[out].vk_dtype);
    if (r && dt >= 0 && dt != (int)wgml_tensor_dtype(r)) r = wgml_cast(b->g, r, (wgml_dtype)dt);
    return put(b, out, r, 0);
}

/* reciprocal(self) = 1 / x (an int tensor gives float) */
static wgml_status op_reciprocal(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = as_f32(b, T(b, args, 0)), *one = x ? number(b, 1.0) : NULL;
    return one ? put(b, OUT(0), wgml_div(b->g, one, x), 0) : WGML_ERR_ARG;
}

/* pow.Scalar(self: number, exponent: tensor) = self ** exponent, through wgml's pow of a
 * broadcast one-element base (a negative base with an integral exponent gives the real power);
 * an int result (an int base and exponent) through f32, exact up to 2^24. */
static wgml_status op_pow_scalar(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int ok = 1;
    double base = num(b, args, 0, 0, &ok);
    wgml_tensor *e = ok ? as_f32(b, T(b, args, 1)) : NULL, *bt = e ? number(b, base) : NULL;
    return bt ? put_as_out(b, OUT(0), wgml_pow(b->g, bt, e)) : WGML_ERR_ARG;
}

/* clamp.Tensor(self, min?, max?) = minimum(maximum(x, min), max), broadcasting, in the output's
 * dtype (int tensors through the integer kernel; NaN bounds or elements give NaN). */
static wgml_status op_clamp_tensor(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = T(b, args, 0), *lo, *hi;
    if (!x || opt_tensor(b, args, 1, &lo) || opt_tensor(b, args, 2, &hi)) return WGML_ERR_ARG;
    if (!lo && !hi) return fail(b, WGML_ERR_ARG, "clamp needs at least one bound", 1);
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype);
    if (dt == WGML_F32) x = as_f32(b, x), lo = lo ? as_f32(b, lo) : NULL, hi = hi ? as_f32(b, hi) : NULL;
    else if (dt != WGML_I32 || wgml_tensor_dtype(x) != WGML_I32 || (lo && wgml_tensor_dtype(lo) != WGML_I32) ||
             (hi && wgml_tensor_dtype(hi) != WGML_I32))
        return fail(b, WGML_ERR_DTYPE, "an int clamp needs int operands and output", 0);
    if (x && lo) x = wgml_maximum(b->g, x, lo);
    if (x && hi) x = wgml_minimum(b->g, x, hi);
    return put(b, OUT(0), x, 0);
}

/* sign(x) = (x > 0) − (x < 0), through f32 (a NaN gives 0, as PyTorch's sign), in the output's
 * dtype. */
static wgml_status op_sign(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    if (!x) return WGML_ERR_ARG;
    wgml_tensor *pos = as_f32(b, wgml_gt_scalar(b->g, x, 0.0f)), *neg = pos ? as_f32(b, wgml_lt_scalar(b->g, x, 0.0f)) : NULL;
    return neg ? put_as_out(b, OUT(0), wgml_sub(b->g, pos, neg, 1.0f)) : wgml_last_status(b->ctx);
}

/* erf(x) = 2·Φ(√2·x) − 1, Φ(v) = gelu(v) / v from wgml's gelu (erf form: Φ to ~1.4e-7, so erf
 * to ~3e-7 absolute; custom GELUs write x·(1 + erf(x/√2))/2). x is clamped to ±6 first (erf is
 * ±1 in f32 from |x| ~ 3.9, and gelu(v)/v stays finite); x == 0 gives x (±0). */
static wgml_status op_erf(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    if (!x) return WGML_ERR_ARG;
    wgml_tensor *c = wgml_clamp(b->g, x, -6.0f, 6.0f), *v = c ? wgml_mul_scalar(b->g, c, (float)sqrt(2.0)) : NULL;
    wgml_tensor *phi = v ? wgml_div(b->g, wgml_gelu(b->g, v, 0), v) : NULL;
    wgml_tensor *e = phi ? wgml_add_scalar(b->g, wgml_mul_scalar(b->g, phi, 2.0f), -1.0f, 1.0f) : NULL;
    wgml_tensor *zero = e ? wgml_eq_scalar(b->g, c, 0.0f) : NULL;
    return zero ? put(b, OUT(0), wgml_where(b->g, zero, c, e), 0) : wgml_last_status(b->ctx);
}

/* x as a bool tensor (x != 0; NaN is true) */
static wgml_tensor *as_bool(pbuild *b, wgml_tensor *x) {
    return x && wgml_tensor_dtype(x) != WGML_BOOL ? wgml_cast(b->g, x, WGML_BOOL) : x;
}

/* logical_xor(a, b) of any dtypes = bool(a) != bool(b); bitwise_xor.Tensor of bools is the
 * same (of ints it is refused). */
static wgml_status xor_common(pbuild *b, const int32_t *args, int nargs, int bitwise) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *y = x ? T(b, args, 1) : NULL;
    if (!y) return WGML_ERR_ARG;
    if (bitwise && (wgml_tensor_dtype(x) != WGML_BOOL || wgml_tensor_dtype(y) != WGML_BOOL))
        return fail(b, WGML_ERR_UNSUPPORTED, "integer bitwise operations are not supported (bool tensors are)",
                    wgml_tensor_dtype(x) != WGML_BOOL ? 0 : 1);
    wgml_tensor *fx = as_f32(b, as_bool(b, x)), *fy = fx ? as_f32(b, as_bool(b, y)) : NULL;
    return fy ? put(b, OUT(0), wgml_compare(b->g, WGML_CMP_NE, fx, fy), 0) : wgml_last_status(b->ctx);
}
static wgml_status op_logical_xor(pbuild *b, const int32_t *a, int n) { return xor_common(b, a, n, 0); }
static wgml_status op_bitwise_xor(pbuild *b, const int32_t *a, int n) { return xor_common(b, a, n, 1); }

/* bitwise_and/or/xor.Scalar (self, other) of a bool tensor: with other true, x & 1 = x,
 * x | 1 = all true, x ^ 1 = not x; with other false, all false, x, x. */
static wgml_status bool_scalar_common(pbuild *b, const int32_t *args, int nargs, int op) {
    NEED(3);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0);
    int s = num(b, args, 1, 0, &ok) != 0;
    if (!x || !ok) return WGML_ERR_ARG;
    if (wgml_tensor_dtype(x) != WGML_BOOL)
        return fail(b, WGML_ERR_UNSUPPORTED, "integer bitwise operations are not supported (bool tensors are)", 0);
    int64_t shape[WGML_MAX_RANK];
    int r = wgml_tensor_rank(x);
    for (int i = 0; i < r; i++) shape[i] = wgml_tensor_dim(x, i);
    wgml_tensor *y = op == 0 ? (s ? x : wgml_full(b->g, WGML_BOOL, r, shape, 0))
                     : op == 1 ? (s ? wgml_full(b->g, WGML_BOOL, r, shape, 1) : x)
                               : (s ? wgml_logical_not(b->g, x) : x);
    return put(b, OUT(0), y, 0);
}
static wgml_status op_bitand_scalar(pbuild *b, const int32_t *a, int n) { return bool_scalar_common(b, a, n, 0); }
static wgml_status op_bitor_scalar(pbuild *b, const int32_t *a, int n) { return bool_scalar_common(b, a, n, 1); }
static wgml_status op_bitxor_scalar(pbuild *b, const int32_t *a, int n) { return bool_scalar_common(b, a, n, 2); }

static const prog_op_entry OPS[] = {
    {"aten.fmod.Tensor", op_fmod},
    {"aten.fmod.Scalar", op_fmod},
    {"aten.remainder.Tensor", op_remainder},
    {"aten.remainder.Scalar", op_remainder},
    {"aten.reciprocal.default", op_reciprocal},
    {"aten.pow.Scalar", op_pow_scalar},
    {"aten.clamp.Tensor", op_clamp_tensor},
    {"aten.sign.default", op_sign},
    {"aten.erf.default", op_erf},
    {"aten.logical_xor.default", op_logical_xor},
    {"aten.bitwise_xor.Tensor", op_bitwise_xor},
    {"aten.bitwise_and.Scalar", op_bitand_scalar},
    {"aten.bitwise_or.Scalar", op_bitor_scalar},
    {"aten.bitwise_xor.Scalar", op_bitxor_scalar},
};

const prog_op_table prog_ops_arith = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
