// flat_main: the entry point of the kernels with one thread per item (an element, a vector, a
// word, a row: the includer's unit), which "//!include flat_main" and define
//   const FLAT_WG: u32        threads a workgroup;
//   fn items() -> u32         how many items there are;
//   fn item(t: u32)           the work of item t (called for t < items() only).
// Workgroup k of the grid graph_dispatch folds into two dimensions (k = wid.x + wid.y * nwg.x)
// owns items k * FLAT_WG ... + FLAT_WG - 1, one a thread, so loads and stores of consecutive
// items are coalesced across the workgroup. ceil_div(n, k): the items of n elements, k an item.
@compute @workgroup_size(FLAT_WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * FLAT_WG + lid;
    if (t < items()) {
        item(t);
    }
}

fn ceil_div(n: u32, k: u32) -> u32 { return n / k + select(0u, 1u, n % k != 0u); }
