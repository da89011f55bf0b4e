// adamw_clear: zeroes the flat gradient buffer (its used part, n4 vec4s) after an AdamW
// step that ran or was skipped as non-finite (state[3] = 0 or 1), and leaves it when the step
// was held (state[3] = 2: the gradients keep accumulating over micro-batches).
// Workgroup: 256 threads; a thread owns one vec4 (2-D fold).
struct Params { n4: u32 }

@group(0) @binding(0) var<storage, read> state: array<u32>;
@group(0) @binding(1) var<storage, read_write> grads: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (i >= p.n4 || state[3] == 2u) { return; }
    grads[i] = vec4<f32>(0.0);
}
