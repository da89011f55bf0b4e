// attn_sdpa: out = softmax(q·kᵀ·scale + mask)·v with grouped-query heads, flash-attention
// style (online softmax; the score matrix never leaves workgroup memory).
//
// One workgroup per (b, kv head, block of BQ query rows). The rows of a kv head are the
// G = Hq/Hkv query heads that share it times the Sq queries (row = g * Sq + i), so the query
// heads of a group share every K/V load (decode: one workgroup serves all of them).
// 64 threads = BQ rows x TPQ threads per row. Keys are streamed in blocks of BK rows through
// workgroup memory (Ks, Vs). Per block a thread computes the scores of keys c, c + TPQ, ..
// of its row (c = its lane in the row), then every thread of the row takes the row's new
// maximum, turns its own scores into probabilities, and updates the output dimensions it
// owns (d = c, c + TPQ, ..; DPT of them, kept in registers) with the running max m and sum l
// kept identically by the TPQ threads of a row. Scores are in log2 units (q is pre-scaled by
// scale·log2(e)) so exp2 is used. A masked score is MASKED and contributes exactly 0.
// The prelude supplies BQ TPQ BK D DPT CAUSAL, the bindings from 3 on (len buffer when the
// length comes from a tensor, out, p) and read_len().
struct Params {
    B: u32, Hkv: u32, G: u32, Sq: u32,
    Skv: u32, n_blocks: u32, scale_log2: f32, _pad: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;

const NT: u32 = 64u;
const MASKED: f32 = -3.0e38;

var<workgroup> Qs: array<f32, BQ * D>;
var<workgroup> Ks: array<f32, BK * D>;
var<workgroup> Vs: array<f32, BK * D>;
var<workgroup> Ps: array<f32, BQ * BK>;
var<workgroup> Es: array<f32, BQ * BK>;
var<workgroup> len_wg: u32;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.B * p.Hkv * p.n_blocks) { return; }
    if (lid == 0u) {
        len_wg = u32(clamp(read_len(), 0, i32(p.Skv)));
    }
    let kvalid = workgroupUniformLoad(&len_wg);   // keys 0 .. kvalid - 1 exist
    let blk = wg % p.n_blocks;
    let bh = wg / p.n_blocks;                     // b * Hkv + hkv
    let hkv = bh % p.Hkv;
    let b = bh / p.Hkv;
    let rows = p.G * p.Sq;
    let first = blk * BQ;
    let last = min(rows, first + BQ) - 1u;
    // keys any row of this block may see (uniform across the workgroup)
    var kend = kvalid;
    if (CAUSAL) {
        var imax = last % p.Sq;
        if (first / p.Sq != last / p.Sq) { imax = p.Sq - 1u; }
        let vis = i32(kvalid) - i32(p.Sq) + i32(imax) + 1;
        kend = u32(clamp(vis, 0, i32(kvalid)));
    }

    let r = lid / TPQ;
    let c = lid % TPQ;
    let row = first + r;
    let valid_row = row < rows;
    let gq = row / p.Sq;
    let iq = row % p.Sq;
    let qpos = i32(kvalid) - i32(p.Sq) + i32(iq);   // causal: this row sees keys 0 ..= qpos
    let hq_base = (b * p.Hkv + hkv) * p.G;          // first query head of the group

    // Q block into workgroup memory, pre-scaled
    for (var e = lid; e < BQ * D; e += NT) {
        let rr = first + e / D;
        var val = 0.0;
        if (rr < rows) {
            let qrow = (hq_base + rr / p.Sq) * p.Sq + rr % p.Sq;
            val = q[qrow * D + e % D] * p.scale_log2;
        }
        Qs[e] = val;
    }

    var m = MASKED;
    var l = 0.0;
    var acc: array<f32, DPT>;
    for (var t = 0u; t < DPT; t++) { acc[t] = 0.0; }
    let kv_base = bh * p.Skv * D;

    for (var kb = 0u; kb < kend; kb += BK) {
        workgroupBarrier();
        for (var e = lid; e < BK * D; e += NT) {
            let j = kb + e / D;
            var kx = 0.0;
            var vx = 0.0;
            if (j < kend) {
                kx = k[kv_base + kb * D + e];
                vx = v[kv_base + kb * D + e];
            }
            Ks[e] = kx;
            Vs[e] = vx;
        }
        workgroupBarrier();
        for (var jj = c; jj < BK; jj += TPQ) {
            let j = kb + jj;
            var s = MASKED;
            if (valid_row && j < kend && (!CAUSAL || i32(j) <= qpos)) {
                var dot = 0.0;
                for (var d = 0u; d < D; d++) { dot += Qs[r * D + d] * Ks[jj * D + d]; }
                s = dot;
            }
            Ps[r * BK + jj] = s;
        }
        workgroupBarrier();
        var mb = m;
        for (var jj = 0u; jj < BK; jj++) { mb = max(mb, Ps[r * BK + jj]); }
        for (var jj = c; jj < BK; jj += TPQ) {
            let s = Ps[r * BK + jj];
            Es[r * BK + jj] = select(exp2(s - mb), 0.0, s <= MASKED);
        }
        let corr = exp2(m - mb);
        m = mb;
        workgroupBarrier();
        l *= corr;
        for (var t = 0u; t < DPT; t++) { acc[t] *= corr; }
        for (var jj = 0u; jj < BK; jj++) {
            let pj = Es[r * BK + jj];
            l += pj;
            for (var t = 0u; t < DPT; t++) {
                let d = c + t * TPQ;
                if (d < D) { acc[t] += pj * Vs[jj * D + d]; }
            }
        }
    }

    if (valid_row) {
        let orow = (hq_base + gq) * p.Sq + iq;
        let inv = select(1.0 / l, 0.0, l == 0.0);
        for (var t = 0u; t < DPT; t++) {
            let d = c + t * TPQ;
            if (d < D) { out[orow * D + d] = acc[t] * inv; }
        }
    }
}
