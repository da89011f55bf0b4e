// ew_glu_bwd: the backward of ew_glu (out = act(gate) * up, elementwise_fused.c) in one pass:
//   d_gate = act'(gate) * (dy * up)      (df of ew_unary_df: the unary op's own derivative)
//   d_up   = act(gate) * dy
// act silu (OP = UN_SILU) or the tanh form of gelu (OP = UN_GELU_TANH). The prelude supplies OP,
// the unary table's constants and alias V / VB (vec4: n % 4 == 0, as the forward asks).
// Workgroups of 64 threads; one thread owns one vec4 of each tensor.
struct Params {
    n4: u32,
    pad: u32,
    lo: f32, // unused (df's clamp bounds)
    hi: f32,
}

//!bindings read(gate: array<V>, up: array<V>, dy: array<V>)
//!bindings write(dgate: array<V>, dup: array<V>) uniform(p: Params)

//!include ew_unary_df
//!include ew_act

//!include flat_main
const FLAT_WG: u32 = 64u;
fn items() -> u32 { return p.n4; }

fn item(i: u32) {
    let g = gate[i];
    let d = dy[i];
    dgate[i] = df(g, d * up[i]);
    if (OP == UN_SILU) {
        dup[i] = g * ew_sigmoid(g) * d;
    } else {
        dup[i] = ew_gelu_tanh(g) * d;
    }
}
