// adamw_update: the AdamW update of every parameter in the flat buffers at once, exactly
// torch.optim.AdamW's order of operations:
//   p <- p·(1 - lr·wd); g <- g·coef; m <- b1·m + (1 - b1)·g; v <- b2·v + (1 - b2)·g²;
//   p <- p - (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps)
// with coef, lr / bc1, sqrt(bc2) and 1 - lr·wd from state (adamw_finish), betas, 1 - betas
// (hyper[8], hyper[9]; computed in double on the host) and eps from hyper. A skipped step
// (state[3] = 1) or a held one (2: gradient accumulation) writes nothing. The gradients themselves stay unscaled.
// Workgroup: 256 threads; a thread owns one vec4 of the flat buffers (n4 vec4s; 2-D fold).
struct Params { n4: u32 }

@group(0) @binding(0) var<storage, read> grads: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> hyper: array<f32>;
@group(0) @binding(2) var<storage, read> state: array<u32>;
@group(0) @binding(3) var<storage, read_write> params: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> m1: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> m2: array<vec4<f32>>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (i >= p.n4 || state[3] != 0u) { return; }
    let coef = bitcast<f32>(state[4]);
    let step_size = bitcast<f32>(state[5]);
    let sqrt_bc2 = bitcast<f32>(state[6]);
    let decay = bitcast<f32>(state[7]);
    let b1 = hyper[2];
    let b2 = hyper[3];
    let eps = hyper[4];
    let g = grads[i] * coef;
    let m = b1 * m1[i] + hyper[8] * g;
    let v = b2 * m2[i] + hyper[9] * g * g;
    m1[i] = m;
    m2[i] = v;
    params[i] = params[i] * decay - step_size * (m / (sqrt(v) / sqrt_bc2 + vec4<f32>(eps)));
}
