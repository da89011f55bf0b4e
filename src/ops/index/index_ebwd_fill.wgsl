// index_ebwd_fill: embedding backward, pass 3 of 5: each position drops itself into a free slot
// of its row's bucket, list[off[v] .. off[v + 1]). The slot comes from an integer atomic that
// counts cnt[v] down to 0, so the order inside a bucket varies between runs; pass 4 restores
// the order of positions.
// Workgroup: 256 threads; one thread owns one position.
//!include index_fix
struct Params { n: u32, v: u32, d: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> idx: array<i32>;
@group(0) @binding(1) var<storage, read> off: array<u32>;
@group(0) @binding(2) var<storage, read_write> cnt: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> list: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (t >= p.n) { return; }
    let row = fix_index(idx[t], i32(p.v));
    let k = atomicSub(&cnt[row], 1u) - 1u;
    list[off[row] + k] = t;
}
