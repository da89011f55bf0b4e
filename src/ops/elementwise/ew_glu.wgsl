// ew_glu: out = act(gate) * up elementwise (a gated FFN's activation; ew_glu in
// elementwise_fused.c, for inference graphs: one dispatch where the activation and mul take two),
// act silu (ACT 0) or the tanh form of gelu (ACT 1, ew_act's, the plain gelu op's function),
// n elements with n % 4 == 0. The prelude supplies ACT. Workgroups of 64 threads; one thread owns
// one vec4.
struct Params { n4: u32 }

//!bindings read(gate: array<vec4<f32>>, up: array<vec4<f32>>)
//!bindings write(out: array<vec4<f32>>) uniform(p: Params)

alias V = vec4<f32>;
//!include ew_act

//!include flat_main
const FLAT_WG: u32 = 64u;
fn items() -> u32 { return p.n4; }

fn item(i: u32) {
    let g = gate[i];
    if (ACT == 0u) {
        out[i] = g / (V(1.0) + exp(-g)) * up[i];
    } else {
        out[i] = ew_gelu_tanh(g) * up[i];
    }
}
