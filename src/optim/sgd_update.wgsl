// sgd_update: the SGD update of every parameter in the flat buffers at once, exactly
// torch.optim.SGD (dampening 0, not Nesterov) in its order of operations:
//   g <- g·coef + wd·p; buf <- momentum·buf + g; p <- p - lr·buf
// with lr, wd and momentum from hyper ([0], [1], [11]) and the clip coefficient from state
// (adamw_finish). The momentum buffer is the flat m buffer; it starts at zero, so the first
// step's buf is g, as torch's first step sets it (momentum 0: buf is g every step). A skipped
// step (state[3] = 1) or a held one (2: gradient accumulation) writes nothing.
// Workgroup: 256 threads; a thread owns one vec4 of the flat buffers (n4 vec4s; 2-D fold).
struct Params { n4: u32 }

@group(0) @binding(0) var<storage, read> grads: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> hyper: array<f32>;
@group(0) @binding(2) var<storage, read> state: array<u32>;
@group(0) @binding(3) var<storage, read_write> params: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> m1: array<vec4<f32>>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (i >= p.n4 || state[3] != 0u) { return; }
    let coef = bitcast<f32>(state[4]);
    let lr = hyper[0];
    let wd = hyper[1];
    let momentum = hyper[11];
    let x = params[i];
    let g = grads[i] * coef + wd * x;
    let buf = momentum * m1[i] + g;
    m1[i] = buf;
    params[i] = x - lr * buf;
}
