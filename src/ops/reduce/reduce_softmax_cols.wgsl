// reduce_softmax_cols: softmax / log_softmax for short rows or rows at a stride. The rows of
// an [outer, n, inner] view are the n elements at stride inner.
// Workgroup: 256 threads; one thread owns one row (o, i) (col_walk.wgsl's entry point): an
// online (max, sum) pass over its n elements, then a second pass that writes them. With inner > 1 neighbouring threads read
// neighbouring addresses at every step (coalesced); with inner = 1 it is used only for rows
// of at most a few elements, where a workgroup per row would mostly idle.
// The prelude supplies LOG.
struct Params { n_rows: u32, n: u32, inner: u32, ninf: f32 }

//!bindings read(x: array<f32>) write(out: array<f32>) uniform(p: Params)

//!include col_walk

fn walk_row(row: u32, base: u32) {
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
