// attn_combine: merges the key chunks of split attention (attn_sdpa.wgsl with p.n_split > 1,
// attn_decode.wgsl with n_chunk > 1). part holds, per output row and chunk, D unnormalised
// outputs, the chunk's max m (log2 units) and its sum l. out[row, d] = Σ acc·2^(m - M) /
// Σ l·2^(m - M) with M the max over chunks; a row whose chunks saw no key gets 0. p.rows_out:
// the output rows in the row layout of attn_rows.wgsl (partial rows are head-first), else in
// part's order.
// Workgroup: WG = EW * SL threads for EW consecutive output elements (row, d); the SL threads of
// an element (slice sl = lid / EW) take its chunks sl, sl + SL, ... (an online merge: the
// running max, and both sums rescaled when it grows), and slice 0 merges the SL partial results
// through workgroup memory. So a thread walks n_split / SL chunks: with one thread walking all
// of an element's chunks (65 in a decode step at 4,096 positions) the merge was bound by the
// latency of that chain of loads.
struct Params { n: u32, D: u32, n_split: u32, rows_out: u32, Hkv: u32, G: u32, Sq: u32, _p: u32 }

//!bindings read(part: array<f32>) write(out: array<f32>) uniform(p: Params)

//!include attn_rows

const EW: u32 = 32u;
const SL: u32 = 8u;
const WG: u32 = EW * SL;

var<workgroup> partial: array<vec4<f32>, EW * SL>; // a slice's (m, Σ acc 2^(m'-m), Σ l 2^(m'-m))

// the merge (m, num, den) with one more term (ms, vs, ls): M = max(m, ms), both rescaled to it
// (an empty chunk, m = -3e38 and sums 0, adds nothing)
fn merged(a: vec4<f32>, ms: f32, vs: f32, ls: f32) -> vec4<f32> {
    let mx = max(a.x, ms);
    let wa = exp2(a.x - mx);
    let wb = exp2(ms - mx);
    return vec4<f32>(mx, a.y * wa + vs * wb, a.z * wa + ls * wb, 0.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = lid % EW;
    let sl = lid / EW;
    let idx = (wid.x + wid.y * nwg.x) * EW + e;
    let d = idx % p.D;
    let row = idx / p.D;
    let stride = p.D + 2u;
    let base = row * p.n_split * stride;
    var a = vec4<f32>(-3.0e38, 0.0, 0.0, 0.0);
    if (idx < p.n) {
        for (var s = sl; s < p.n_split; s += SL) {
            let o = base + s * stride;
            a = merged(a, part[o + p.D], part[o + d], part[o + p.D + 1u]);
        }
    }
    partial[lid] = a;
    workgroupBarrier();
    if (idx < p.n && sl == 0u) {
        for (var k = 1u; k < SL; k++) {
            let b = partial[k * EW + e];
            a = merged(a, b.x, b.y, b.z);
        }
        var orow = row;
        if (p.rows_out != 0u) { orow = row_major(row / (p.G * p.Sq), row % (p.G * p.Sq)); }
        out[orow * p.D + d] = select(a.y / a.z, 0.0, a.z == 0.0);
    }
}
