// ew_glu: out = act(gate) * up elementwise (a gated FFN's activation; ew_glu in
// elementwise_fused.c, for inference graphs: one dispatch where the activation and mul take two),
// act silu (ACT 0) or the tanh form of gelu (ACT 1, ew_act's, the plain gelu op's function),
// n elements with n % 4 == 0. The prelude supplies ACT. Workgroups of 64 threads; one thread owns
// one vec4.
struct Params { n4: u32 }

@group(0) @binding(0) var<storage, read> gate: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> up: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: Params;

alias V = vec4<f32>;
//!include ew_act

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.n4) { return; }
    let g = gate[i];
    if (ACT == 0u) {
        out[i] = g / (V(1.0) + exp(-g)) * up[i];
    } else {
        out[i] = ew_gelu_tanh(g) * up[i];
    }
}
