// reduce_softmax_bwd_cols: softmax / log_softmax backward for short rows or rows at a stride
// (the rows of an [outer, n, inner] view are the n elements at stride inner). Same formulas
// as reduce_softmax_bwd_rows (LOG from the prelude).
// Workgroup: 256 threads; one thread owns one row (o, i) (col_walk.wgsl's entry point): a pass
// for the sum, a pass that writes dx. With inner > 1 neighbouring threads read neighbouring addresses (coalesced).
struct Params { n_rows: u32, n: u32, inner: u32, pad: u32 }

//!bindings read(y: array<f32>, dy: array<f32>) write(dx: array<f32>) uniform(p: Params)

//!include col_walk

fn walk_row(row: u32, base: u32) {
    var s = 0.0;
    var k = base;
    for (var j = 0u; j < p.n; j++) {
        if (LOG) { s += dy[k]; } else { s += dy[k] * y[k]; }
        k += p.inner;
    }
    k = base;
    for (var j = 0u; j < p.n; j++) {
        let yv = y[k];
        if (LOG) { dx[k] = dy[k] - exp(yv) * s; } else { dx[k] = yv * (dy[k] - s); }
        k += p.inner;
    }
}
