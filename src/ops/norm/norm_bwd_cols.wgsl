// norm_bwd_cols: per-chunk column sums for the weight / bias gradients of the norms:
// pw[c, j] = sum over rows r of chunk c (rows c*chunk .. c*chunk + chunk - 1, in order) of
// dy[r, j] * (x[r, j] - mean[r]) * rstd[r] (mean taken as 0 when LAYER is false: rms_norm), and
// pb[c, j] = sum of dy[r, j] over the same rows (when HAS_DB). The chunks are then added in
// order by wgml_sum over dim 0, so the whole reduction is deterministic.
// Workgroup: 256 threads; one thread owns one (chunk, column) pair; neighbouring threads own
// neighbouring columns, so every row step is a coalesced read.
struct Params { n_rows: u32, d: u32, chunk: u32, n_out: u32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> mean: array<f32>;
@group(0) @binding(3) var<storage, read> rstd: array<f32>;
@group(0) @binding(4) var<storage, read_write> pw: array<f32>;
@group(0) @binding(5) var<storage, read_write> pb: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (t >= p.n_out) { return; }
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
