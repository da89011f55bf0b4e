// autograd_store: delivers a gradient into a caller's persistent tensor: dst = src, or
// dst += src when accumulating (micro-batches).
// Workgroup: 256 threads; each thread owns 4 consecutive elements.
struct Params { n: u32, accumulate: u32, pad0: u32, pad1: u32 }

//!bindings read(src: array<f32>) write(dst: array<f32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return ceil_div(p.n, 4u); }

fn item(t: u32) {
    let base = t * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i < p.n) {
            var v = src[i];
            if (p.accumulate != 0u) { v += dst[i]; }
            dst[i] = v;
        }
    }
}
