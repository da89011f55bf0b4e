// norm_rms: y = x * rsqrt(mean(x^2) + eps) * w over the last dim (rows of length d).
// Workgroup: WG threads (prelude, power of two 32..256); one workgroup owns one row. Thread t
// sums the squares of elements t, t+WG, ... (read as V: vec4 when d % 4 == 0), the workgroup
// adds the WG partial sums with a tree in workgroup memory (fixed order, deterministic), then
// each thread reads its elements again and writes them scaled. HAS_W (prelude): w is bound;
// without it w is taken as ones.
struct Params { n_rows: u32, d: u32, eps: f32 }

@group(0) @binding(0) var<storage, read> x: array<V>;
@group(0) @binding(1) var<storage, read> w: array<V>;
@group(0) @binding(2) var<storage, read_write> out: array<V>;
@group(0) @binding(3) var<uniform> p: Params;

alias WR = f32;
fn wr_op(a: f32, b: f32) -> f32 { return a + b; }
//!include wg_reduce

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; }
    let cnt = p.d / VW;
    let base = row * cnt;
    var s = 0.0;
    for (var j = lid; j < cnt; j += WG) {
        let v = x[base + j];
        s += hsum(v * v);
    }
    let r = inverseSqrt(wg_reduce(lid, s) / f32(p.d) + p.eps);
    for (var j = lid; j < cnt; j += WG) {
        var y = x[base + j] * r;
        if (HAS_W) { y = y * w[j]; }
        out[base + j] = y;
    }
}
