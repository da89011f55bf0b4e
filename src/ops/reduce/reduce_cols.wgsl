// reduce_cols: sum / mean / amax / argmax over the middle dim of an [outer, red, inner] view.
// Workgroup: 256 threads; one thread owns one output element (o, i) and walks its red
// elements o*red*inner + r*inner + i in order. Neighbouring threads read neighbouring
// addresses at every step (coalesced). Used when the reduced dims form one block with kept
// dims after it, or for short trailing rows (inner = 1) where a workgroup per row would idle.
// The prelude supplies OP (0 sum, 1 max, 2 argmax).
struct Params { outer: u32, red: u32, inner: u32, n_out: u32, scale: f32, ninf: f32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

//!include reduce_pick

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (g >= p.n_out) { return; }
    let o = g / p.inner;
    let i = g - o * p.inner;
    var off = o * p.red * p.inner + i;
    var a = x[off];
    var ai = 0u;
    for (var r = 1u; r < p.red; r++) {
        off += p.inner;
        let e = x[off];
        if (OP == 0u) { a += e; } else if (gt(e, a)) { a = e; ai = r; }
    }
    if (OP == 2u) { out[g] = ai; } else { out[g] = bitcast<u32>(a * p.scale); }
}
