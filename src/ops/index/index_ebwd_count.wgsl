// index_ebwd_count: embedding backward, pass 1 of 5: cnt[v] = how many positions have row v.
// The row of an id: index_fix's (wrapped by +V, clamped into [0, V - 1]). Integer atomics:
// the counts are exact, so the result does not depend on the order in which threads run.
// Workgroup: 256 threads; one thread owns one position.
//!include index_fix
struct Params { n: u32, v: u32, d: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> idx: array<i32>;
@group(0) @binding(1) var<storage, read_write> cnt: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (t >= p.n) { return; }
    let row = fix_index(idx[t], i32(p.v));
    atomicAdd(&cnt[row], 1u);
}
