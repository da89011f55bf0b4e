// reduce_softmax_bwd_rows: softmax / log_softmax backward along contiguous rows of length n.
// softmax (LOG false): s = sum(dy * y), dx = y * (dy - s); log_softmax (LOG true): s = sum(dy),
// dx = dy - exp(y) * s (y is the forward output).
// Workgroup: WG threads (prelude, power of two 32..256); one workgroup owns one row; thread t
// sums elements t, t+WG, ...; a tree in workgroup memory adds the partials (fixed order,
// deterministic); then each thread writes its elements of dx.
struct Params { n_rows: u32, n: u32, inner: u32, pad: u32 }

//!bindings read(y: array<f32>, dy: array<f32>) write(dx: array<f32>) uniform(p: Params)

alias WR = f32;
fn wr_op(a: f32, b: f32) -> f32 { return a + b; }
//!include wg_reduce

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; }
    let base = row * p.n;
    var a = 0.0;
    for (var j = lid; j < p.n; j += WG) {
        if (LOG) { a += dy[base + j]; } else { a += dy[base + j] * y[base + j]; }
    }
    let s = wg_reduce(lid, a);
    for (var j = lid; j < p.n; j += WG) {
        let yv = y[base + j];
        if (LOG) { dx[base + j] = dy[base + j] - exp(yv) * s; } else { dx[base + j] = yv * (dy[base + j] - s); }
    }
}
