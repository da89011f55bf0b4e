// attn_kv_append: cache[b, h, pos + s, :] = new[b, h, s, :] for the rows with
// 0 <= pos + s < Smax; other rows are skipped (never written). pos is read from a tensor.
// Workgroup: 256 threads; each thread owns one element of new.
struct Params { n: u32, D: u32, Snew: u32, Smax: u32 }

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> pos: array<i32>;
@group(0) @binding(2) var<storage, read_write> cache: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (idx >= p.n) { return; }
    let d = idx % p.D;
    let rs = idx / p.D;          // bh * Snew + s
    let s = rs % p.Snew;
    let bh = rs / p.Snew;
    let dst = dest_row(pos[0], s);
    if (dst < 0 || dst >= i32(p.Smax)) { return; }
    cache[(bh * p.Smax + u32(dst)) * p.D + d] = src[idx];
}

// pos + s without wrapping for positions far outside the cache
fn dest_row(position: i32, s: u32) -> i32 {
    if (position >= i32(p.Smax)) { return i32(p.Smax); }
    if (position < -i32(p.Snew)) { return -1; }
    return position + i32(s);
}
