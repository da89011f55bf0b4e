// optim_update: what adamw_update and sgd_update share ("//!include optim_update"): Params, the
// bindings both use (grads, hyper, state read; params and m1, the first moment or the momentum
// buffer, written; the includer declares its others and p) and the entry point. Not a
// kernel. Workgroup: 256 threads; a thread owns vec4 i of the flat buffers (n4 vec4s; the graph
// layer's 2-D fold). A step skipped as non-finite (state[3] = 1) or held (2: gradient
// accumulation) writes nothing; otherwise the includer's fn update(i: u32, coef: f32) updates
// vec4 i, with coef the clip coefficient from state[4] (adamw_finish).
struct Params { n4: u32 }

//!bindings read(grads: array<vec4<f32>>, hyper: array<f32>, state: array<u32>)
//!bindings write(params: array<vec4<f32>>, m1: array<vec4<f32>>)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n4; }

fn item(i: u32) {
    if (state[3] == 0u) { update(i, bitcast<f32>(state[4])); }
}
