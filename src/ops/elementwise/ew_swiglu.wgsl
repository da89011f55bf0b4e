// ew_swiglu: out = silu(gate) * up elementwise (a gated FFN's activation; ew_swiglu in
// elementwise_fused.c, for inference graphs: one dispatch where silu + mul take two),
// n elements with n % 4 == 0. Workgroups of 64 threads; one thread owns one vec4.
struct Params { n4: u32 }

@group(0) @binding(0) var<storage, read> gate: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> up: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.n4) { return; }
    let g = gate[i];
    out[i] = g / (vec4<f32>(1.0) + exp(-g)) * up[i];
}
