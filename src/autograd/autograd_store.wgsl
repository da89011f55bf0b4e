// autograd_store: delivers a gradient into a caller's persistent tensor: dst = src, or
// dst += src when accumulating (micro-batches).
// Workgroup: 256 threads; each thread owns 4 consecutive elements.
struct Params { n: u32, accumulate: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let base = ((wid.x + wid.y * nwg.x) * 256u + lid) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i < p.n) {
            var v = src[i];
            if (p.accumulate != 0u) { v += dst[i]; }
            dst[i] = v;
        }
    }
}
