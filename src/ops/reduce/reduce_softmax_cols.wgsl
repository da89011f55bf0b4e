// reduce_softmax_cols: softmax / log_softmax for short rows or rows at a stride. The rows of
// an [outer, n, inner] view are the n elements at stride inner.
// Workgroup: 256 threads; one thread owns one row (o, i): an online (max, sum) pass over its
// n elements, then a second pass that writes them. With inner > 1 neighbouring threads read
// neighbouring addresses at every step (coalesced); with inner = 1 it is used only for rows
// of at most a few elements, where a workgroup per row would mostly idle.
// The prelude supplies LOG.
struct Params { n_rows: u32, n: u32, inner: u32, ninf: f32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (row >= p.n_rows) { return; }
    let o = row / p.inner;
    let i = row - o * p.inner;
    let base = o * p.n * p.inner + i;
    var m = p.ninf;
    var l = 0.0;
    var k = base;
    for (var j = 0u; j < p.n; j++) {
        let v = x[k];
        if (v > m) {
            l = l * exp(m - v) + 1.0;
            m = v;
        } else if (v > p.ninf) {
            l += exp(v - m);
        }
        k += p.inner;
    }
    k = base;
    if (LOG) {
        let shift = m + log(l);
        for (var j = 0u; j < p.n; j++) { out[k] = x[k] - shift; k += p.inner; }
    } else {
        let inv = 1.0 / l;
        for (var j = 0u; j < p.n; j++) { out[k] = exp(x[k] - m) * inv; k += p.inner; }
    }
}
