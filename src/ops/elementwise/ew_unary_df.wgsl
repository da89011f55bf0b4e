// The derivatives of the unary ops: df(v, g) = f'(v) * g for the code OP of the unary table
// (ew_ops.h), shared by ew_unary_bwd (dx = f'(x) * dy) and ew_glu_bwd (the gated FFN's gate).
// Include after the prelude's OP, the table's constants and alias V / VB, and a uniform p with
// lo and hi (clamp's bounds).
//!include ew_trig

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
        case UN_RELU: { return select(g, V(0.0), v <= V(0.0)); } // NaN passes the gradient, as PyTorch
        case UN_SIGMOID: { return g * bw_sig(v) * bw_sig_c(v); }
        case UN_SILU: { let s = bw_sig(v); return g * s * (1.0 + v * bw_sig_c(v)); }
        case UN_GELU: { return g * (bw_phi(v) + v * exp(-0.5 * v * v) * 0.3989422804014327); } // erf form
        case UN_GELU_TANH: { // y = v * s(2u), u = c (v + a v^3)
            let u2 = 1.5957691216057308 * (v + 0.044715 * v * v * v);
            let s = bw_sig(u2);
            return g * (s + v * s * bw_sig_c(u2) * 1.5957691216057308 * (1.0 + 0.134145 * v * v));
        }
        case UN_EXP, UN_EXPM1: { return g * exp(v); } // d(e^v - 1)/dv = e^v too
        case UN_LOG: { return g / v; }
        case UN_NEG: { return -g; }
        case UN_ABS: { return g * sign(v); } // 0 at 0
        case UN_SQRT: { return g * 0.5 * inverseSqrt(v); }
        case UN_RSQRT: { let r = inverseSqrt(v); return -0.5 * g * r * r * r; }
        case UN_TANH: { return g * 4.0 * bw_sig(2.0 * v) * bw_sig_c(2.0 * v); } // 1 - tanh^2
        case UN_FLOOR, UN_CEIL, UN_TRUNC, UN_ROUND: { return V(0.0); } // piecewise constant
        case UN_SIN: { return g * ew_cos(v); }
        case UN_COS: { return -g * ew_sin(v); }
        case UN_CLAMP: { return select(V(0.0), g, (v >= V(p.lo)) & (v <= V(p.hi))); }
        default: { return V(0.0); } // no code: tests/py/test_op_table.py checks every row has its case
    }
}
