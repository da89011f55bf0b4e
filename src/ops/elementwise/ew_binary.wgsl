// ew_binary: out = a (op) b for f32 tensors with NumPy broadcasting; b may be a uniform scalar.
//
// The prelude (elementwise.c) supplies:
//   const OP: u32          which operation: a wgml_binary_op value, named by the binary table's
//                          constants, which the prelude also supplies (const BIN_ADD: u32 = 0u;
//                          ... ew_ops.h)
//   const BCAST: bool      general broadcast path (else the contiguous fast path)
//   const PT: u32          vectors per thread (broadcast path: 4 when the innermost coalesced
//                          dim has >= 4 elements, else 1)
//   const VW: u32          lanes of V
//   alias V                vec4<f32> or f32 (vec4: fast path when numel % 4 == 0; broadcast path
//                          when the innermost dim is a multiple of 4); VU, VB: the same shape of
//                          u32 and bool
//   the read bindings a, b and loaders ld_a/ld_b(j) -> V: on the fast path vector j of the
//   operand; on the broadcast path the VW elements from element offset j (a splat when the
//   operand is broadcast along the innermost dim); a splat for a one-element tensor or a
//   uniform scalar.
//
// Workgroup and thread layout: ew_map (through ew_binary_body).
//!include ew_binary_body

// x ** y with PyTorch's real-valued semantics: a negative base with an integral exponent keeps
// the sign of the odd powers; y == 0 gives 1 for every x.
fn ew_pow(x: V, y: V) -> V {
    let m = exp2(y * log2(abs(x)));
    let integral = floor(y) == y;
    let odd = integral & (abs(y - 2.0 * floor(0.5 * y)) == V(1.0));
    let neg = x < V(0.0);
    var r = select(m, -m, neg & odd);
    // negative base, fractional exponent: no real result (NaN, through the log of a negative)
    r = select(r, exp2(y * log2(x)), neg & !integral);
    return select(r, V(1.0), y == V(0.0));
}

// NaN test on the bits (a float comparison x != x may be folded away by the driver's compiler).
fn ew_isnan(x: V) -> VB {
    return (bitcast<VU>(x) & VU(0x7fffffffu)) > VU(0x7f800000u);
}

fn apply(x: V, y: V) -> V {
    switch (OP) {
        case BIN_ADD: { return x + p.alpha * y; }
        case BIN_SUB: { return x - p.alpha * y; }
        case BIN_MUL: { return x * y; }
        case BIN_DIV: { return x / y; }
        // minimum and maximum propagate NaN (as PyTorch), which the builtins need not do
        case BIN_MINIMUM: { return select(min(x, y), x + y, ew_isnan(x) | ew_isnan(y)); }
        case BIN_MAXIMUM: { return select(max(x, y), x + y, ew_isnan(x) | ew_isnan(y)); }
        case BIN_POW: { return ew_pow(x, y); }
        // PyTorch's rounding modes on the rounded f32 quotient: exact for integer-valued operands
        // below 2^22 (a non-integral quotient is then farther from an integer than the division's
        // error); elsewhere the floor of the exact quotient can differ where the quotient is within
        // a few ulp of an integer. y == 0 gives x / y.
        case BIN_DIV_TRUNC: { return trunc(x / y); }
        case BIN_DIV_FLOOR: { return floor(x / y); }
        default: { return V(0.0); } // no code: tests/py/test_op_table.py checks every row has its case
    }
}

