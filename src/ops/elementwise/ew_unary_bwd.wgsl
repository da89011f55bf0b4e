// ew_unary_bwd: dx = f'(x) * dy for the unary ops (and clamp), contiguous f32 tensors.
//
// The prelude (unary_backward.c) supplies:
//   const OP: u32   the wgml_unary_op value; 18 is clamp (EW_UNARY_CLAMP)
//   const PT: u32   vectors per thread
//   alias V, VB     vec4<f32> / vec4<bool> when numel % 4 == 0, else f32 / bool
//
// Workgroup: 256 threads; one workgroup owns 256*PT consecutive vectors; thread t owns vectors
// base + t + 256*k (k < PT), so every load and store instruction is coalesced.
//!include ew_trig

struct Params {
    nv: u32,   // vectors
    pad: u32,
    lo: f32,   // clamp bounds
    hi: f32,
}

@group(0) @binding(0) var<storage, read> x: array<V>;
@group(0) @binding(1) var<storage, read> dy: array<V>;
@group(0) @binding(2) var<storage, read_write> dx: array<V>;
@group(0) @binding(3) var<uniform> p: Params;

// sigmoid(v) and 1 - sigmoid(v), each without cancellation or overflow (exp of -|v| only).
fn bw_sig(v: V) -> V {
    let e = exp(-abs(v));
    let r = 1.0 / (1.0 + e);
    return select(e * r, r, v >= V(0.0));
}
fn bw_sig_c(v: V) -> V {
    let e = exp(-abs(v));
    let r = 1.0 / (1.0 + e);
    return select(r, e * r, v >= V(0.0));
}

// Phi(v), the normal CDF, from erfc(|v|/sqrt 2) = t * P(t) * exp(-z^2), t = 1 / (1 + 0.3275911 z)
// (a rational fit with absolute error below 1.5e-7); the tail v < 0 keeps its relative accuracy.
fn bw_phi(v: V) -> V {
    let z = abs(v) * 0.7071067811865476;
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let c = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
            * exp(-z * z);
    return select(0.5 * c, 1.0 - 0.5 * c, v >= V(0.0));
}

fn df(v: V, g: V) -> V {
    switch (OP) {
        case 0u: { return select(g, V(0.0), v <= V(0.0)); } // relu (NaN passes the gradient, as PyTorch)
        case 1u: { return g * bw_sig(v) * bw_sig_c(v); } // sigmoid
        case 2u: { let s = bw_sig(v); return g * s * (1.0 + v * bw_sig_c(v)); } // silu
        case 3u: { return g * (bw_phi(v) + v * exp(-0.5 * v * v) * 0.3989422804014327); } // gelu (erf)
        case 4u: { // gelu, tanh form: y = v * s(2u), u = c (v + a v^3)
            let u2 = 1.5957691216057308 * (v + 0.044715 * v * v * v);
            let s = bw_sig(u2);
            return g * (s + v * s * bw_sig_c(u2) * 1.5957691216057308 * (1.0 + 0.134145 * v * v));
        }
        case 5u: { return g * exp(v); }
        case 6u: { return g / v; } // log
        case 7u: { return -g; }
        case 8u: { return g * sign(v); } // abs (0 at 0)
        case 9u: { return g * 0.5 * inverseSqrt(v); } // sqrt
        case 10u: { let r = inverseSqrt(v); return -0.5 * g * r * r * r; } // rsqrt
        case 11u: { return g * 4.0 * bw_sig(2.0 * v) * bw_sig_c(2.0 * v); } // tanh: 1 - tanh^2
        case 12u, 13u, 14u, 15u: { return V(0.0); } // floor, ceil, trunc, round: piecewise constant
        case 16u: { return g * ew_cos(v); } // sin
        case 17u: { return -g * ew_sin(v); } // cos
        default: { return select(V(0.0), g, (v >= V(p.lo)) & (v <= V(p.hi))); } // clamp
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let base = (wid.x + wid.y * nwg.x) * (256u * PT) + lid;
    for (var k = 0u; k < PT; k++) {
        let j = base + k * 256u;
        if (j < p.nv) {
            dx[j] = df(x[j], dy[j]);
        }
    }
}
