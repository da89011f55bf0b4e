// index_ebwd_sum: embedding backward, pass 5 of 5: dw[v, c] = sum of dy[pos, c] over the
// positions of row v's bucket, in increasing position (0 for an empty bucket).
// Workgroup: 256 threads; one thread owns one V (prelude: vec4 when D % 4 == 0, else f32) of
// dw, columns c*VW .. c*VW + VW - 1 of row v; neighbouring threads own neighbouring columns of
// one row, so their dy reads are coalesced. p.d counts Vs per row here (D / VW).
struct Params { n: u32, v: u32, d: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> dy: array<V>;
@group(0) @binding(1) var<storage, read> off: array<u32>;
@group(0) @binding(2) var<storage, read> sorted: array<u32>;
@group(0) @binding(3) var<storage, read_write> dw: array<V>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (t >= p.v * p.d) { return; }
    let row = t / p.d;
    let c = t - row * p.d;
    var acc = V(0.0);
    for (var e = off[row]; e < off[row + 1u]; e++) {
        acc += dy[sorted[e] * p.d + c];
    }
    dw[t] = acc;
}
