// adamw_clear: zeroes the flat gradient buffer (its used part, n4 vec4s) after an AdamW
// step that ran or was skipped as non-finite (state[3] = 0 or 1), and leaves it when the step
// was held (state[3] = 2: the gradients keep accumulating over micro-batches).
// Workgroup: 256 threads; a thread owns one vec4 (2-D fold).
struct Params { n4: u32 }

//!bindings read(state: array<u32>) write(grads: array<vec4<f32>>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n4; }

fn item(i: u32) {
    if (state[3] != 2u) { grads[i] = vec4<f32>(0.0); }
}
