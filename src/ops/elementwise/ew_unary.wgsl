// ew_unary: out = f(x) for a contiguous f32 tensor.
//
// The prelude (elementwise.c) supplies:
//   const OP: u32    which function (UNARY_NAME order in elementwise.c: relu, sigmoid, silu, gelu,
//                    gelu_tanh, exp, log, neg, abs, sqrt, rsqrt, tanh, floor, ceil, trunc, round,
//                    sin, cos, clamp, round to decimals)
//   const PT: u32    vectors per thread
//   alias V          vec4<f32> when numel % 4 == 0, else f32; VU, VB: the same shape of u32 and bool
//
// Workgroup: 256 threads; one workgroup owns 256*PT consecutive vectors; thread t owns vectors
// base + t + 256*k (k < PT), so every load and store instruction is coalesced.
struct Params {
    n: u32,    // elements
    nv: u32,   // vectors (n / width of V)
    lo: f32,   // clamp bounds; round to decimals: 10^|decimals|, and hi = 1 when decimals < 0
    hi: f32,
}

//!include ew_trig

@group(0) @binding(0) var<storage, read> x: array<V>;
@group(0) @binding(1) var<storage, read_write> out: array<V>;
@group(0) @binding(2) var<uniform> p: Params;

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

fn f(v: V) -> V {
    switch (OP) {
        case 0u: { return select(v, V(0.0), v < V(0.0)); } // relu (NaN passes through)
        case 1u: { return ew_sigmoid(v); }
        case 2u: { return v * ew_sigmoid(v); }
        case 3u: { return ew_gelu(v); }
        case 4u: { return ew_gelu_tanh(v); }
        case 5u: { return exp(v); }
        case 6u: { return log(v); }
        case 7u: { return -v; }
        case 8u: { return abs(v); }
        case 9u: { return sqrt(v); }
        case 10u: { return inverseSqrt(v); }
        case 11u: { return ew_tanh(v); }
        case 12u: { return ew_keep_sign(floor(v), v); }
        case 13u: { return ew_keep_sign(ceil(v), v); }
        case 14u: { return ew_keep_sign(trunc(v), v); }
        case 15u: { return ew_keep_sign(round(v), v); } // WGSL's round takes halves to even
        case 16u: { return ew_sin(v); }
        case 17u: { return ew_cos(v); }
        // round to decimals, PyTorch's f32 form: round(v * 10^d) / 10^d, or for d < 0
        // round(v / 10^-d) * 10^-d
        case 19u: { return select(round(v * p.lo) / p.lo, round(v / p.lo) * p.lo, p.hi != 0.0); }
        default: { return select(min(max(v, V(p.lo)), V(p.hi)), v, ew_isnan(v)); } // clamp (NaN passes through)
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let base = (wid.x + wid.y * nwg.x) * (256u * PT) + lid;
    for (var k = 0u; k < PT; k++) {
        let j = base + k * 256u;
        if (j < p.nv) {
            out[j] = f(x[j]);
        }
    }
}
