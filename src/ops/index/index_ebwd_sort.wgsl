// index_ebwd_sort: embedding backward, pass 4 of 5: orders every bucket by position. The entry
// at slot e (position list[e], row v) goes to slot off[v] + (number of entries of its bucket with
// a smaller position); positions are distinct, so this is a permutation and the result is the
// same on every run. Cost: the sum over rows of count^2 comparisons.
// Workgroup: 256 threads; one thread owns one slot.
//!include index_fix
struct Params { n: u32, v: u32, d: u32, pad: u32 }

//!bindings read(idx: array<i32>, off: array<u32>, list: array<u32>)
//!bindings write(sorted: array<u32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(e: u32) {
    let pos = list[e];
    let row = fix_index(idx[pos], i32(p.v));
    let a = off[row];
    let b = off[row + 1u];
    var rank = 0u;
    for (var f = a; f < b; f++) {
        if (list[f] < pos) { rank += 1u; }
    }
    sorted[a + rank] = pos;
}
