// col_walk: the entry point of the kernels where one thread owns one row of an
// [outer, n, inner] view, the n elements at stride inner (reduce_cols, reduce_softmax_cols,
// reduce_softmax_bwd_cols; "//!include col_walk"). Not a kernel. Workgroup: 256 threads;
// thread g (the graph layer's 2-D fold) owns row g = o * inner + i, whose element r is at
// base + r * inner, base = o * n * inner + i. Neighbouring threads read neighbouring addresses
// at every step when inner > 1 (coalesced). The includer defines Params with n_rows (outer *
// inner), n and inner, and fn walk_row(g: u32, base: u32): the thread's work on its row.
//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n_rows; }

fn item(g: u32) {
    let o = g / p.inner;
    walk_row(g, o * p.n * p.inner + (g - o * p.inner));
}
