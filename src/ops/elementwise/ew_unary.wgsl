// ew_unary: out = f(x) for a contiguous f32 tensor.
//
// The prelude (elementwise.c) supplies:
//   const OP: u32    which function: a code of the unary table (ew_ops.h), named by the table's
//                    constants, which the prelude also supplies (const UN_RELU: u32 = 0u; ...
//                    the public rows of include/wgml.h, then UN_CLAMP and UN_ROUND_DEC)
//   const PT: u32    vectors per thread
//   alias V          vec4<f32> when numel % 4 == 0, else f32; VU, VB: the same shape of u32 and bool
//
// Workgroup and thread layout: ew_unary_main.
struct Params {
    n: u32,    // elements
    nv: u32,   // vectors (n / width of V)
    lo: f32,   // clamp bounds; round to decimals: 10^|decimals|, and hi = 1 when decimals < 0
    hi: f32,
}

//!include ew_trig

//!bindings read(x: array<V>) write(out: array<V>) uniform(p: Params)

// NaN test on the bits (a float comparison v != v may be folded away by the driver's compiler).
fn ew_isnan(v: V) -> VB {
    return (bitcast<VU>(v) & VU(0x7fffffffu)) > VU(0x7f800000u);
}

// A rounding result r of v with v's sign bit: a zero result keeps the sign of its input
// (floor(-0.0), ceil(-0.4), round(-0.5) are -0, as in C and PyTorch), which a driver's builtins
// may lose; a non-zero r already has v's sign.
fn ew_keep_sign(r: V, v: V) -> V {
    return bitcast<V>(bitcast<VU>(r) | (bitcast<VU>(v) & VU(0x80000000u)));
}

//!include ew_act

// tanh without the overflow of exp(2v) for large |v|: an odd polynomial (least-squares fit of
// tanh(v)/v in v^2, relative error < 1e-7 in f32) below |v| = 0.55, (1 - t) / (1 + t) with
// t = exp(-2|v|) above.
fn ew_tanh(v: V) -> V {
    let a = abs(v);
    let u = v * v;
    let small = v * (1.0 + u * (-3.333331645e-01 + u * (1.333257407e-01 + u * (-5.385217816e-02
                + u * (2.107303217e-02 + u * -6.277513690e-03)))));
    let t = exp(-2.0 * a);
    let big = (1.0 - t) / (1.0 + t);
    return select(select(-big, big, v >= V(0.0)), small, a < V(0.55));
}

// erf(z) for 0 <= z < 0.9: z * P(z^2) (least-squares fit, absolute error ~1.4e-7 in f32).
fn ew_erf_small(z: V) -> V {
    let u = z * z;
    return z * (1.128379226 + u * (-3.761263490e-01 + u * (1.128372550e-01 + u * (-2.686097100e-02
                + u * (5.204854067e-03 + u * (-8.185760817e-04 + u * 8.552368672e-05))))));
}

// erfc(z) for z >= 0.9: exp(-z^2) * t * S(t), t = 1/z, S a least-squares fit on z in [0.9, 10]
// (relative error ~4e-6 in f32, mostly the rounding of z^2; it underflows to 0 past z ~ 9.4).
fn ew_erfc_big(z: V) -> V {
    let t = 1.0 / z;
    let s = 5.642180443e-01 + t * (-9.730567108e-04 + t * (-2.681861222e-01 + t * (-1.093816757e-01
            + t * (9.424096346e-01 + t * (-1.501073956 + t * (1.285932422 + t * (-6.154070497e-01
            + t * (1.228111982e-01 + t * (1.572649926e-02 + t * -8.492366411e-03)))))))));
    return exp(-z * z) * t * s;
}

// gelu(v) = v * Phi(v), Phi(v) = (1 + erf(v / sqrt 2)) / 2. For |v| / sqrt 2 >= 0.9 Phi comes from
// erfc, so the negative tail keeps its relative accuracy instead of cancelling in 1 + erf.
fn ew_gelu(v: V) -> V {
    let z = abs(v) * 0.7071067811865476;
    let zs = min(z, V(0.9));
    let zb = max(z, V(0.9));
    let e = ew_erf_small(zs);
    let c = ew_erfc_big(zb);
    let pos = v >= V(0.0);
    let phi_small = 0.5 + 0.5 * select(-e, e, pos);
    let phi_big = select(0.5 * c, 1.0 - 0.5 * c, pos);
    return v * select(phi_big, phi_small, z < V(0.9));
}

// e^v - 1: a Taylor series for |v| < 0.5 (terms to v^10 / 10!, relative error < 1e-9 before
// rounding), where exp(v) - 1 would cancel; exp(v) - 1 beyond, where |e^v - 1| >= 0.39. NaN is
// passed through by its bits (SwiftShader's exp(NaN) is inf).
fn ew_expm1(v: V) -> V {
    var r = V(1.0);
    for (var k = 10; k >= 2; k--) {
        r = 1.0 + v * r / f32(k);
    }
    return select(select(exp(v) - 1.0, v * r, abs(v) < V(0.5)), v, ew_isnan(v));
}

fn f(v: V) -> V {
    switch (OP) {
        case UN_RELU: { return select(v, V(0.0), v < V(0.0)); } // NaN passes through
        case UN_SIGMOID: { return ew_sigmoid(v); }
        case UN_SILU: { return v * ew_sigmoid(v); }
        case UN_GELU: { return ew_gelu(v); }
        case UN_GELU_TANH: { return ew_gelu_tanh(v); }
        case UN_EXP: { return exp(v); }
        case UN_LOG: { return log(v); }
        case UN_NEG: { return -v; }
        case UN_ABS: { return abs(v); }
        case UN_SQRT: { return sqrt(v); }
        case UN_RSQRT: { return inverseSqrt(v); }
        case UN_TANH: { return ew_tanh(v); }
        case UN_FLOOR: { return ew_keep_sign(floor(v), v); }
        case UN_CEIL: { return ew_keep_sign(ceil(v), v); }
        case UN_TRUNC: { return ew_keep_sign(trunc(v), v); }
        case UN_ROUND: { return ew_keep_sign(round(v), v); } // WGSL's round takes halves to even
        case UN_SIN: { return ew_sin(v); }
        case UN_COS: { return ew_cos(v); }
        case UN_EXPM1: { return ew_expm1(v); }
        case UN_CLAMP: { return select(min(max(v, V(p.lo)), V(p.hi)), v, ew_isnan(v)); } // NaN passes through
        // round to decimals, PyTorch's f32 form: round(v * 10^d) / 10^d, or for d < 0
        // round(v / 10^-d) * 10^-d
        case UN_ROUND_DEC: { return select(round(v * p.lo) / p.lo, round(v / p.lo) * p.lo, p.hi != 0.0); }
        default: { return V(0.0); } // no code: tests/py/test_op_table.py checks every row has its case
    }
}

fn item(j: u32) {
    out[j] = f(x[j]);
}

//!include ew_unary_main
