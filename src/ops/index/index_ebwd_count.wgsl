// index_ebwd_count: embedding backward, pass 1 of 5: cnt[v] = how many positions have row v.
// The row of an id: a negative id is wrapped by +V, then clamped into [0, V - 1] (the eager
// graph has already rejected ids out of range). Integer atomics: the counts are exact, so the
// result does not depend on the order in which threads run.
// Workgroup: 256 threads; one thread owns one position.
struct Params { n: u32, v: u32, d: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> idx: array<i32>;
@group(0) @binding(1) var<storage, read_write> cnt: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (t >= p.n) { return; }
    var id = idx[t];
    if (id < 0) { id += i32(p.v); }
    let row = u32(clamp(id, 0, i32(p.v) - 1));
    atomicAdd(&cnt[row], 1u);
}
