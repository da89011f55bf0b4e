/* The op registry's remainders: fmod (the sign of the dividend, C's fmod) and remainder (the
 * sign of the divisor, Python's %), each with a tensor or a number as divisor. Exports leave
 * them as portable kernels: torch.roll decomposes into an index arithmetic (arange + shift)
 * fmod n (torchvision's Swin Transformer shifts its windows so).
 *
 * Both are a − b·q with q the quotient rounded toward zero (fmod) or −∞ (remainder), through
 * wgml's rounding divisions: on int tensors with PyTorch's integer semantics (exact), on float
 * tensors from the f32 quotient (exact for integer-valued operands below 2^22, as the index
 * arithmetic is; otherwise within f32 rounding of a, and a quotient within rounding of an
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

static const prog_op_entry OPS[] = {
    {"aten.fmod.Tensor", op_fmod},
    {"aten.fmod.Scalar", op_fmod},
    {"aten.remainder.Tensor", op_remainder},
    {"aten.remainder.Scalar", op_remainder},
};

const prog_op_table prog_ops_arith = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
