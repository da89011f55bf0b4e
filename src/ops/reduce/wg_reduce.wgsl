// wg_reduce: the workgroup tree reduction that the one-workgroup-per-row kernels share (the
// norms and their backward, reduce_rows / reduce_pairs, softmax backward, attention backward,
// ce_sum / ce_count, the optimizer's norm; "//!include wg_reduce"). Not a kernel. The includer
// defines WG (the workgroup size, a power of two: prelude or module const), alias WR (the type
// reduced: f32, u32, vec2<f32>, a struct) and fn wr_op(a: WR, b: WR) -> WR, the combine. The
// tree's order is fixed, so a result is the same bits on every run (no atomics).
var<workgroup> wg_red: array<WR, WG>;

// Every thread's v combined over segments of n threads (n a power of two dividing WG; n = WG
// for the whole workgroup): slot i takes slot i + k for k = n/2, ..., 1, each step behind a
// barrier, and each thread gets its segment's first slot. Every thread calls it, in uniform
// control flow (it has barriers). A kernel that calls it again puts a workgroupBarrier()
// between reading this result and the next call (slot 0 is read by all before it is rewritten).
fn wg_reduce_seg(lid: u32, n: u32, v: WR) -> WR {
    let lane = lid & (n - 1u);
    wg_red[lid] = v;
    workgroupBarrier();
    for (var k = n / 2u; k > 0u; k = k >> 1u) {
        if (lane < k) { wg_red[lid] = wr_op(wg_red[lid], wg_red[lid + k]); }
        workgroupBarrier();
    }
    return wg_red[lid - lane];
}

// The whole workgroup's v combined (as wg_reduce_seg with one segment).
fn wg_reduce(lid: u32, v: WR) -> WR {
    return wg_reduce_seg(lid, WG, v);
}
