// attn_combine: merges the key chunks of split attention (attn_sdpa.wgsl with p.n_split > 1). part
// holds, per output row and chunk, D unnormalised outputs, the chunk's max m (log2 units)
// and its sum l; the merge itself is attn_merge.wgsl's.
// Workgroup: 64 threads; each thread owns one output element (row, d).
struct Params { n: u32, D: u32, n_split: u32, _p: u32 }

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

fn part_at(i: u32) -> f32 { return part[i]; }
//!include attn_merge

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (idx >= p.n) { return; }
    out[idx] = attn_merge(idx / p.D, idx % p.D, p.D, p.n_split, p.n_split);
}
