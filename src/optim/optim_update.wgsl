// optim_update: what adamw_update and sgd_update share ("//!include optim_update"): Params, the
// bindings both read (0..4: grads, hyper, state, params and m1, the first moment or the momentum
// buffer; the includer binds its others after them and p last) and the entry point. Not a
// kernel. Workgroup: 256 threads; a thread owns vec4 i of the flat buffers (n4 vec4s; the graph
// layer's 2-D fold). A step skipped as non-finite (state[3] = 1) or held (2: gradient
// accumulation) writes nothing; otherwise the includer's fn update(i: u32, coef: f32) updates
// vec4 i, with coef the clip coefficient from state[4] (adamw_finish).
struct Params { n4: u32 }

@group(0) @binding(0) var<storage, read> grads: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> hyper: array<f32>;
@group(0) @binding(2) var<storage, read> state: array<u32>;
@group(0) @binding(3) var<storage, read_write> params: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> m1: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (i >= p.n4 || state[3] != 0u) { return; }
    update(i, bitcast<f32>(state[4]));
}
