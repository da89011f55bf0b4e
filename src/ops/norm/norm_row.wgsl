// norm_row: the entry point that norm_rms, norm_layer, norm_bwd_rms and norm_bwd_layer share
// ("//!include norm_row"; it includes wg_reduce). Not a kernel. One workgroup of WG threads owns
// one row (the graph layer's 2-D fold of workgroups) of p.n_rows rows of p.d elements, read as
// V (VW elements each) from base = row * cnt: thread t adds row_term over elements t, t+WG, ...
// in increasing order, wg_reduce's tree sums the WG partials (fixed order, deterministic), and
// row_end writes the row from the sums. The includer defines Params (n_rows, d), the prelude's
// WG, VW, V and HAS_W, the binding w (array<V>, read when HAS_W), alias WR (f32 or vec2<f32>:
// the row's sums) and the kernel's three steps:
//   fn row_begin(row: u32, base: u32): what the row's threads read once (into var<private>);
//   fn row_term(base: u32, j: u32) -> WR: element j's part of the sums;
//   fn row_end(row: u32, base: u32, cnt: u32, lid: u32, sums: WR): the row's writes.
fn wr_op(a: WR, b: WR) -> WR { return a + b; }
//!include wg_reduce

// v times the weight's element j (w taken as ones without HAS_W)
fn times_w(j: u32, v: V) -> V {
    if (HAS_W) { return v * w[j]; }
    return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; } // the same for the whole workgroup
    let cnt = p.d / VW;
    let base = row * cnt;
    row_begin(row, base);
    var a = WR();
    for (var j = lid; j < cnt; j += WG) {
        a += row_term(base, j);
    }
    row_end(row, base, cnt, lid, wg_reduce(lid, a));
}
