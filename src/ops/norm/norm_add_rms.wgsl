// norm_add_rms: a residual add fused with the RMSNorm that follows it (norm_add_rms in
// norm_fused.c, for inference graphs: one dispatch where add + rms_norm take two):
// sum = x + y, out = sum * rsqrt(mean(sum^2) + eps) * w, over rows of length d (d % 4 == 0).
// With PRE (norm_add_rms_post: a post-norm architecture's block output) y is RMSNormed first,
// sum = x + rms_norm(y) * wy: one dispatch where rms_norm + add + rms_norm take three.
// Workgroup: WG threads (prelude, power of two); one workgroup owns one row. With PRE the
// threads first sum the squares of their y elements (a first wg_reduce gives y's scale). Thread t
// adds the vec4 elements t, t+WG, ... (writing sum) and sums their squares; the workgroup adds
// the WG partial sums with a tree in workgroup memory (fixed order); then each thread
// scales its own elements again (read back from sum, which only it wrote).
// With NY > 1 (norm_add_rms_parts) y is the NY split-K slices of a product, [NY, n_rows, d],
// summed in order as they are read (y_at), where a reduction dispatch would sum them first.
// With outputs XQ0 (XQ1) the normed row is also written quantised to int8 in one (two) of
// qw_quant_x's row formats (qw_xq_block: block b by thread b % WG, read back from out once every
// thread's elements are in it), the input of the integer-dot products after it (qw_xq.h): their
// quantisers' dispatch, or each GEMV row group quantising for itself, goes.
// The prelude gives WG, PRE, NY, the bindings x, y, wy (with PRE), w, sum, out, XQ0, XQ1 (with
// the quantised rows), p, and xq_row(row, lid) (nothing, or a storageBarrier and xq_fmt for each
// format) and xq_put(f, i, v) (word i of XQf).
struct Params { n_rows: u32, d: u32, eps: f32 }

alias WR = f32;
fn wr_op(a: f32, b: f32) -> f32 { return a + b; }
//!include wg_reduce

fn xq_src(i: u32) -> f32 { return out[i / 4u][i % 4u]; }
//!include qw_xq_block

// the row's blocks in format f (qb k a block, pair, padded K kp), block b by thread b % WG
fn xq_fmt(f: u32, qb: u32, pair: bool, kp: u32, row: u32, lid: u32) {
    let nb = kp / qb;
    for (var b = lid; b < nb; b += WG) {
        let k0 = b * qb;
        xq_block(f, qb, pair, row * p.d + k0, min(qb, max(p.d, k0) - k0), row * (kp / 4u + 2u * nb), b, kp);
    }
}

// y's vec4 i: the sum of its NY slices, slice 0 first
fn y_at(i: u32) -> vec4<f32> {
    var u = y[i];
    for (var s = 1u; s < NY; s++) { u += y[s * p.n_rows * (p.d / 4u) + i]; }
    return u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; }
    let cnt = p.d / 4u;
    let base = row * cnt;
    var ry = 1.0; // y's RMSNorm scale (PRE)
    if (PRE) {
        var sy = 0.0;
        for (var j = lid; j < cnt; j += WG) {
            let u = y_at(base + j);
            sy += dot(u, u);
        }
        ry = inverseSqrt(wg_reduce(lid, sy) / f32(p.d) + p.eps);
        workgroupBarrier(); // the tree's result read by all before it is reused
    }
    var s = 0.0;
    for (var j = lid; j < cnt; j += WG) {
        var u = y_at(base + j);
        if (PRE) { u = u * ry * wy_at(j); }
        let v = x[base + j] + u;
        sum[base + j] = v;
        s += dot(v, v);
    }
    let r = inverseSqrt(wg_reduce(lid, s) / f32(p.d) + p.eps);
    for (var j = lid; j < cnt; j += WG) {
        out[base + j] = sum[base + j] * r * w[j];
    }
    xq_row(row, lid);
}
