// Activations shared by the elementwise kernels and by fused epilogues of other families
// (qw_gemv's gated-FFN epilogue): "//!include ew_act" after an alias V (f32 or vec4<f32>).

// Logistic function without overflow: exp of -|v| only.
fn ew_sigmoid(v: V) -> V {
    let e = exp(-abs(v));
    let r = 1.0 / (1.0 + e);
    return select(e * r, r, v >= V(0.0));
}

// gelu, tanh form: v/2 (1 + tanh(u)) = v * sigmoid(2u), u = sqrt(2/pi) (v + 0.044715 v^3).
fn ew_gelu_tanh(v: V) -> V {
    let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return v * ew_sigmoid(2.0 * u);
}

