// index_ebwd_sort: embedding backward, pass 4 of 5: orders every bucket by position. The entry
// at slot e (position list[e], row v) goes to slot off[v] + (number of entries of its bucket with
// a smaller position); positions are distinct, so this is a permutation and the result is the
// same on every run. Cost: the sum over rows of count^2 comparisons.
// Workgroup: 256 threads; one thread owns one slot.
//!include index_fix
struct Params { n: u32, v: u32, d: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> idx: array<i32>;
@group(0) @binding(1) var<storage, read> off: array<u32>;
@group(0) @binding(2) var<storage, read> list: array<u32>;
@group(0) @binding(3) var<storage, read_write> sorted: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (e >= p.n) { return; }
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
