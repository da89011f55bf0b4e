// reduce_cols: sum / mean / amax / argmax over the middle dim of an [outer, n, inner] view.
// Workgroup: 256 threads; one thread owns one output element (o, i) and walks its n
// elements o*n*inner + r*inner + i in order (col_walk.wgsl's entry point). Neighbouring threads
// read neighbouring addresses at every step (coalesced). Used when the reduced dims form one
// block with kept dims after it, or for short trailing rows (inner = 1) where a workgroup per
// row would idle. The prelude supplies OP (0 sum, 1 max, 2 argmax).
struct Params { outer: u32, n: u32, inner: u32, n_rows: u32, scale: f32, ninf: f32 }

//!bindings read(x: array<f32>) write(out: array<u32>) uniform(p: Params)

//!include reduce_pick
//!include col_walk

fn walk_row(g: u32, base: u32) {
    var off = base;
    var a = x[off];
    var ai = 0u;
    for (var r = 1u; r < p.n; r++) {
        off += p.inner;
        let e = x[off];
        if (OP == 0u) { a += e; } else if (gt(e, a)) { a = e; ai = r; }
    }
    if (OP == 2u) { out[g] = ai; } else { out[g] = bitcast<u32>(a * p.scale); }
}
