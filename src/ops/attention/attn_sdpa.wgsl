// attn_sdpa: out = softmax(q·kᵀ·scale + mask)·v with grouped-query heads, flash-attention
// style (online softmax; scores never leave the workgroup).
//
// One workgroup per (b, kv head, block of BQ query rows). The rows of a kv head are the
// G = Hq/Hkv query heads that share it times the Sq queries (row = g * Sq + i), so the query
// heads of a group share every K/V load (decode: one workgroup serves the whole group).
// WX x WY threads. Keys stream through workgroup memory in blocks of BK = WX*TN rows. Thread
// (tx, ty) owns the rows ty + i*WY (i < TM), strided like the matmul kernel's register tile:
//   scores: the TM x TN tile of rows x keys tx + j*WX, accumulated over d from Qs and Ks
//           (both stored d-major, so a step of d reads TM + TN values for TM*TN products);
//   row max: per-thread partial maxima meet in `red`; every thread of a row derives the same
//           new max m, turns its scores into probabilities exp2(s - m) (0 where masked) and
//           writes them to Ps; it keeps its own partial row sum l, summed over tx at the end;
//   output: the TM x TD tile of rows x dims tx + c*WX (c < TD), rescaled by exp2(m_old - m)
//           and accumulated from Ps and Vs.
// Scores are in log2 units (q is pre-scaled by scale·log2(e)), so exp2 is used.
// Wide heads (DC < D): Qs and Ks hold DC of the D dims at a time, the scores summed over D/DC
// chunks, each chunk of q read again per key block, so that a tile of Gemma 3's D = 256 fits the
// workgroup memory; with DC = D the q block is read once and stays.
// Split keys (p.n_split > 1, where there are few row blocks: decode, one sequence's prefill): the
// keys are cut into chunks (of p.chunk, or of the filled length's n_split-th) and the workgroups
// of one row block take one chunk each; each writes its unnormalised output, its max and its sum
// to `out` as a partial row of D + 2 floats, and attn_combine.wgsl merges the chunks.
// Causal masking and splitting are uniform flags (one compiled kernel serves both); so is
// p.rows_out, which writes the output as [B, Sq, Hq, D] (the rows the o projection reads,
// attn_rows.wgsl) instead of [B, Hq, Sq, D] (with split keys attn_combine does that). A sliding
// window (p.window > 0, causal only) also masks the keys at or before qpos - window, so a query
// sees the last `window` keys up to its own position; the key loop starts at the first key any
// row of the block sees.
// The filled length is a uniform flag too: with p.has_len, len_buf[0] (a tensor: the KV cache's
// length), else p.Skv; len_buf is bound either way (to a spare range without a length), so
// prefill and the cached forms share one kernel (on lavapipe each form is seconds of compile).
// The prelude supplies WX WY TM TN D DC TD KW VT vt_at and k, v with k_get, v_get.
struct Params {
    B: u32, Hkv: u32, G: u32, Sq: u32,
    Skv: u32, n_blocks: u32, scale_log2: f32, n_split: u32,
    chunk: u32, causal: u32, window: u32, rows_out: u32,
    has_len: u32, pad0: u32, pad1: u32, pad2: u32,
}

// q, k, v are read as vec4 (KW = 4) when D % 4 == 0, else as f32 (KW = 1); the prelude
// supplies q's element type VT and its component reader vt_at, and k and v's bindings with their
// readers k_get(i), v_get(i) (unit i of KW elements in a vec4; k and v a KV cache in either form,
// kv_cache.h, or plain f32 tensors, the f32 form).
//!bindings read(q: array<VT>) write(out: array<f32>) uniform(p: Params)
//!bindings read(len_buf: array<i32>)

fn read_len() -> i32 {
    if (p.has_len != 0u) { return len_buf[0]; }
    return i32(p.Skv);
}

const NT: u32 = WX * WY;
const BQ: u32 = WY * TM;
const BK: u32 = WX * TN;
const MASKED: f32 = -3.0e38;

var<workgroup> Qs: array<f32, BQ * DC>;  // [d][row], dims d0 .. d0 + DC - 1
var<workgroup> Ks: array<f32, BK * DC>;  // [d][key], the same dims
var<workgroup> Vs: array<f32, BK * D>;   // [key][d]
var<workgroup> Ps: array<f32, BK * BQ>;  // [key][row]
var<workgroup> red: array<f32, BQ * WX>; // [row][tx]
var<workgroup> len_wg: u32;

//!include attn_rows

// Dims d0 .. d0 + DC - 1 of the block's query rows into Qs, pre-scaled, d-major.
fn load_q(first: u32, rows: u32, q_base: u32, d0: u32, lid: u32) {
    for (var e = lid; e < BQ * DC / KW; e += NT) {
        let r = e / (DC / KW);
        let dd = (e % (DC / KW)) * KW;
        var val = VT();
        if (first + r < rows) { val = q[((q_base + first + r) * D + d0 + dd) / KW]; }
        for (var c = 0u; c < KW; c++) { Qs[(dd + c) * BQ + r] = vt_at(val, c) * p.scale_log2; }
    }
}

@compute @workgroup_size(WX * WY)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.B * p.Hkv * p.n_blocks * p.n_split) { return; }
    if (lid == 0u) {
        len_wg = u32(clamp(read_len(), 0, i32(p.Skv)));
    }
    let kvalid = workgroupUniformLoad(&len_wg);   // keys 0 .. kvalid - 1 exist
    let split = wg % p.n_split;
    let blk = (wg / p.n_split) % p.n_blocks;
    let bh = wg / (p.n_split * p.n_blocks);      // b * Hkv + hkv
    let rows = p.G * p.Sq;
    let first = blk * BQ;
    let last = min(rows, first + BQ) - 1u;
    // keys any row of this block may see (uniform across the workgroup)
    let causal = p.causal != 0u;
    let split_out = p.n_split > 1u;
    var kend = kvalid;
    if (causal) {
        var imax = last % p.Sq;
        if (first / p.Sq != last / p.Sq) { imax = p.Sq - 1u; }
        let vis = i32(kvalid) - i32(p.Sq) + i32(imax) + 1;
        kend = u32(clamp(vis, 0, i32(kvalid)));
    }
    // this workgroup's keys: kstart .. kend - 1, a chunk of p.chunk keys, or (p.chunk = 0, with
    // the length from a buffer) of the filled keys cut evenly into whole key blocks
    var chunk = p.chunk;
    if (chunk == 0u) { chunk = ((kvalid + p.n_split - 1u) / p.n_split + BK - 1u) / BK * BK; }
    var kstart = split * chunk;
    kend = min(kend, kstart + chunk);
    if (causal && p.window > 0u) {                // the window of the block's earliest query
        var imin = first % p.Sq;
        if (first / p.Sq != last / p.Sq) { imin = 0u; }
        let lo = i32(kvalid) - i32(p.Sq) + i32(imin) - i32(p.window) + 1;
        kstart = max(kstart, u32(max(lo, 0)));
    }
    let tx = lid % WX;
    let ty = lid / WX;
    let q_base = bh * p.G * p.Sq;                 // first query row (over heads and positions)
    let kv_base = bh * p.Skv * D;

    // per owned row: causal limit (sees keys 0 ..= qpos), validity
    var qpos: array<i32, TM>;
    var qlo: array<i32, TM>;                      // keys at or before qlo are outside the window
    var m: array<f32, TM>;
    var l: array<f32, TM>;
    var corr: array<f32, TM>;
    var acc: array<f32, TM * TD>;
    for (var i = 0u; i < TM; i++) {
        let row = first + ty + i * WY;
        qpos[i] = select(-1, i32(kvalid) - i32(p.Sq) + i32(row % p.Sq), row < rows);
        if (!causal && row < rows) { qpos[i] = i32(kvalid) - 1; }
        qlo[i] = select(-1, qpos[i] - i32(p.window), causal && p.window > 0u);
        m[i] = MASKED;
        l[i] = 0.0;
        for (var c = 0u; c < TD; c++) { acc[i * TD + c] = 0.0; }
    }

    if (DC == D) { load_q(first, rows, q_base, 0u, lid); }

    for (var kb = kstart; kb < kend; kb += BK) {
        workgroupBarrier();
        // the V block, and with DC = D the K block in the same pass
        for (var e = lid; e < BK * D / KW; e += NT) {
            let j = e / (D / KW);
            var vx = vec4<f32>();
            var kx = vec4<f32>();
            if (kb + j < kend) {
                vx = v_get((kv_base + kb * D) / KW + e);
                if (DC == D) { kx = k_get((kv_base + kb * D) / KW + e); }
            }
            for (var c = 0u; c < KW; c++) { Vs[e * KW + c] = vx[c]; }
            if (DC == D) {
                let dd = (e % (D / KW)) * KW;
                for (var c = 0u; c < KW; c++) { Ks[(dd + c) * BK + j] = kx[c]; }
            }
        }
        var s: array<f32, TM * TN>;
        for (var t = 0u; t < TM * TN; t++) { s[t] = 0.0; }
        for (var d0 = 0u; d0 < D; d0 += DC) {
            if (DC < D) { // the chunk's Q and K dims
                if (d0 > 0u) { workgroupBarrier(); }
                load_q(first, rows, q_base, d0, lid);
                for (var e = lid; e < BK * DC / KW; e += NT) {
                    let j = e / (DC / KW);
                    let dd = (e % (DC / KW)) * KW;
                    var kx = vec4<f32>();
                    if (kb + j < kend) { kx = k_get((kv_base + (kb + j) * D + d0 + dd) / KW); }
                    for (var c = 0u; c < KW; c++) { Ks[(dd + c) * BK + j] = kx[c]; }
                }
            }
            workgroupBarrier();
            for (var d = 0u; d < DC; d++) {
                var qv: array<f32, TM>;
                var kv: array<f32, TN>;
                for (var i = 0u; i < TM; i++) { qv[i] = Qs[d * BQ + ty + i * WY]; }
                for (var j = 0u; j < TN; j++) { kv[j] = Ks[d * BK + tx + j * WX]; }
                for (var i = 0u; i < TM; i++) {
                    for (var j = 0u; j < TN; j++) { s[i * TN + j] += qv[i] * kv[j]; }
                }
            }
        }
        for (var i = 0u; i < TM; i++) {
            var pm = MASKED;
            for (var j = 0u; j < TN; j++) {
                let key = i32(kb + tx + j * WX);
                if (key > qpos[i] || key <= qlo[i] || key >= i32(kend)) { s[i * TN + j] = MASKED; }
                pm = max(pm, s[i * TN + j]);
            }
            red[(ty + i * WY) * WX + tx] = pm;
        }
        workgroupBarrier();
        for (var i = 0u; i < TM; i++) {
            var mn = m[i];
            for (var t = 0u; t < WX; t++) { mn = max(mn, red[(ty + i * WY) * WX + t]); }
            corr[i] = exp2(m[i] - mn);
            m[i] = mn;
            var ls = 0.0;
            for (var j = 0u; j < TN; j++) {
                let sv = s[i * TN + j];
                let pv = select(exp2(sv - mn), 0.0, sv <= MASKED);
                ls += pv;
                Ps[(tx + j * WX) * BQ + ty + i * WY] = pv;
            }
            l[i] = l[i] * corr[i] + ls;
        }
        workgroupBarrier();
        for (var i = 0u; i < TM; i++) {
            for (var c = 0u; c < TD; c++) { acc[i * TD + c] *= corr[i]; }
        }
        for (var j = 0u; j < BK; j++) {
            var pv: array<f32, TM>;
            for (var i = 0u; i < TM; i++) { pv[i] = Ps[j * BQ + ty + i * WY]; }
            for (var c = 0u; c < TD; c++) {
                let vv = Vs[j * D + min(tx + c * WX, D - 1u)];
                for (var i = 0u; i < TM; i++) { acc[i * TD + c] += pv[i] * vv; }
            }
        }
    }

    // row sums: partial sums of the WX threads of a row
    workgroupBarrier();
    for (var i = 0u; i < TM; i++) { red[(ty + i * WY) * WX + tx] = l[i]; }
    workgroupBarrier();
    for (var i = 0u; i < TM; i++) {
        let r = first + ty + i * WY;
        if (r >= rows) { continue; }
        var lsum = 0.0;
        for (var t = 0u; t < WX; t++) { lsum += red[(ty + i * WY) * WX + t]; }
        if (split_out) {
            let base = ((q_base + r) * p.n_split + split) * (D + 2u);
            for (var c = 0u; c < TD; c++) {
                let d = tx + c * WX;
                if (d < D) { out[base + d] = acc[i * TD + c]; }
            }
            if (tx == 0u) {
                out[base + D] = m[i];
                out[base + D + 1u] = lsum;
            }
        } else {
            let inv = select(1.0 / lsum, 0.0, lsum == 0.0);
            let orow = select(q_base + r, row_major(bh, r), p.rows_out != 0u);
            for (var c = 0u; c < TD; c++) {
                let d = tx + c * WX;
                if (d < D) { out[orow * D + d] = acc[i * TD + c] * inv; }
            }
        }
    }
}
