// norm_bwd_cols: per-chunk column sums for the weight / bias gradients of the norms:
// pw[c, j] = sum over rows r of chunk c (rows c*chunk .. c*chunk + chunk - 1, in order) of
// dy[r, j] * (x[r, j] - mean[r]) * rstd[r] (mean taken as 0 when LAYER is false: rms_norm), and
// pb[c, j] = sum of dy[r, j] over the same rows (when HAS_DB). The chunks are then added in
// order by wgml_sum over dim 0, so the whole reduction is deterministic.
// Workgroup: 256 threads; one thread owns one (chunk, column) pair; neighbouring threads own
// neighbouring columns, so every row step is a coalesced read.
struct Params { n_rows: u32, d: u32, chunk: u32, n_out: u32 }

//!bindings read(x: array<f32>, dy: array<f32>, mean: array<f32>, rstd: array<f32>)
//!bindings write(pw: array<f32>, pb: array<f32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n_out; }

fn item(t: u32) {
    let c = t / p.d;
    let j = t - c * p.d;
    let r0 = c * p.chunk;
    let r1 = min(r0 + p.chunk, p.n_rows);
    var aw = 0.0;
    var ab = 0.0;
    for (var r = r0; r < r1; r++) {
        let g = dy[r * p.d + j];
        var xv = x[r * p.d + j];
        if (LAYER) { xv -= mean[r]; }
        aw += g * xv * rstd[r];
        ab += g;
    }
    if (HAS_DW) { pw[t] = aw; }
    if (HAS_DB) { pb[t] = ab; }
}
