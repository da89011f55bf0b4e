// qw_mm_i8: the forward product O[m, n] = sum_k x[m, k]·w[n, k] (+ bias[n]) with the activations
// quantised per block to int8 (qw_quant_x.wgsl: x ≈ x̂ = d·q, s = d·Σq) and the weight's integer
// codes c (w = c·a + b per group), multiplied four at a time by the integer dot product
// (dot4I8Packed: exact in i32):
//   O[m, n] = sum over blocks β of  a[n, β]·d[m, β]·(sum_{k in β} q[m, k]·c[n, k]) + b[n, β]·s[m, β],
// which is x̂·wᵀ: the product of the quantised activations with the exact weights.
// A block is QB = 32 k (16 for G = 16) and lies in one group of the weight. Every kind whose
// codes fit an int8 runs here: 4-bit codes 0..15, GGUF 8-bit signed codes, unsigned codes of up
// to 7 bits (qw_mm.c checks); f32 weights do not.
// Tile (prelude BM BC TM TC as qw_mm.wgsl): a workgroup computes a BM x BC block of O with
// (BM/TM)·(BC/TC) threads, each a TM x TC register tile of rows and columns in groups of 4
// strided by the thread grid (qw_mm_head's store_tile). Per stage of SB blocks (prelude), one
// pair of barriers, the threads stage each block's X rows (QB/4 words each) with d and s, and
// W's BC rows unpacked to QB/4 int8 words with (a, b), all as vec4 over 4 rows/columns; then per
// block each thread sums TM·TC·QB/4 dot products into i32 and folds them into its f32 tile with
// d·a and s·b (read as f32 through qw_cvt). Split-K slices (r_chunk a multiple of 32) as qw_mm;
// a stage's blocks at or past the slice's end count as zero.
//!include qw_mm_head
//!include qw_cvt

const QW: u32 = QB / 4u; // packed words of a block
// SB blocks a stage (prelude; one pair of barriers and one round of loads per stage)
var<workgroup> Xs: array<vec4<u32>, SB * QW * BM4>; // [b][j][m]
var<workgroup> Xd: array<vec4<f32>, SB * BM4>;
var<workgroup> Xsum: array<vec4<f32>, SB * BM4>;
var<workgroup> Ws: array<vec4<u32>, SB * QW * BC4>; // [b][j][c]
var<workgroup> Wa: array<vec4<f32>, SB * BC4>;
var<workgroup> Wb: array<vec4<f32>, SB * BC4>;

// X's SB blocks from k = r0 for rows m0..m0+BM: words, then d and s (rows past M and blocks at
// or past re give 0)
fn load_x(m0: u32, r0: u32, re: u32, lid: u32) {
    let rs = p.Kp / 4u + 2u * (p.Kp / QB);
    for (var e = lid; e < SB * BM * QW; e += THREADS) {
        let b = e / (BM * QW);
        let m = (e / QW) % BM;
        let j = e % QW;
        var v = 0u;
        if (m0 + m < p.M && r0 + b * QB < re) { v = A[(m0 + m) * rs + (r0 + b * QB) / 4u + j]; }
        Xs[(b * QW + j) * BM4 + m / 4u][m % 4u] = v;
    }
    for (var e = lid; e < SB * BM; e += THREADS) {
        let b = e / BM;
        let m = e % BM;
        var d = 0.0;
        var s = 0.0;
        if (m0 + m < p.M && r0 + b * QB < re) {
            let o = (m0 + m) * rs + p.Kp / 4u + (r0 + b * QB) / QB;
            d = bitcast<f32>(A[o]);
            s = bitcast<f32>(A[o + p.Kp / QB]);
        }
        Xd[b * BM4 + m / 4u][m % 4u] = d;
        Xsum[b * BM4 + m / 4u][m % 4u] = s;
    }
}

// W's SB blocks from k = r0 for rows (output columns) c0..c0+BC: a 4-bit code word (8 codes)
// gives its even and odd nibbles as two int8 words, an 8-bit one itself; (a, b) of each block's
// group (rows past C and blocks at or past re give 0)
fn load_w(c0: u32, r0: u32, re: u32, lid: u32) {
    for (var e = lid; e < SB * BC * (QB / CPW); e += THREADS) {
        let b = e / (BC * (QB / CPW));
        let c = (e / (QB / CPW)) % BC;
        let wi = e % (QB / CPW);
        var w = 0u;
        if (c0 + c < p.C && r0 + b * QB < re) { w = CODES[(c0 + c) * p.wpr + (r0 + b * QB) / CPW + wi]; }
        if (CPW == 8u) {
            Ws[(b * QW + 2u * wi) * BC4 + c / 4u][c % 4u] = w & 0x0F0F0F0Fu;
            Ws[(b * QW + 2u * wi + 1u) * BC4 + c / 4u][c % 4u] = (w >> 4u) & 0x0F0F0F0Fu;
        } else {
            Ws[(b * QW + wi) * BC4 + c / 4u][c % 4u] = w;
        }
    }
    for (var e = lid; e < SB * BC; e += THREADS) {
        let b = e / BC;
        let c = e % BC;
        var ab = vec2<f32>(0.0);
        if (c0 + c < p.C && r0 + b * QB < re) { ab = group_ab((c0 + c) * p.ng + (r0 + b * QB) / G); }
        Wa[b * BC4 + c / 4u][c % 4u] = ab.x;
        Wb[b * BC4 + c / 4u][c % 4u] = ab.y;
    }
}

//!include tile_main
fn run_tile(t: Tile, lid: u32) {
    let rb = min(p.R, t.s * p.r_chunk);
    let re = min(p.R, rb + p.r_chunk);
    let tx = lid % WX;
    let ty = lid / WX;

    var acc: array<array<vec4<f32>, TC4>, TM>;
    for (var r0 = rb; r0 < re; r0 += SB * QB) {
        load_x(t.m0, r0, re, lid);
        load_w(t.c0, r0, re, lid);
        workgroupBarrier();
        for (var b = 0u; b < SB; b++) {
            // initialised explicitly: naga hoists a loop body's `var` to the function's entry, so
            // an implicit zero would be given once, not per block. The sums start at qw_cvt's
            // CVT_I0 (|sum| <= 32·127·128 < 2^22), so cvt_acc reads them as f32 without a
            // conversion instruction each.
            var isum: array<array<vec4<i32>, TC4>, TM>;
            for (var i = 0u; i < TM; i++) {
                for (var h = 0u; h < TC4; h++) { isum[i][h] = vec4<i32>(CVT_I0); }
            }
            for (var j = 0u; j < QW; j++) {
                var xv: array<vec4<u32>, TM4>;
                var wv: array<vec4<u32>, TC4>;
                for (var i = 0u; i < TM4; i++) { xv[i] = Xs[(b * QW + j) * BM4 + i * WY + ty]; }
                for (var h = 0u; h < TC4; h++) { wv[h] = Ws[(b * QW + j) * BC4 + h * WX + tx]; }
                for (var i = 0u; i < TM; i++) {
                    let x = xv[i / 4u][i % 4u];
                    for (var h = 0u; h < TC4; h++) {
                        isum[i][h] += vec4<i32>(dot4I8Packed(x, wv[h].x), dot4I8Packed(x, wv[h].y),
                                                dot4I8Packed(x, wv[h].z), dot4I8Packed(x, wv[h].w));
                    }
                }
            }
            for (var i = 0u; i < TM; i++) {
                let d = Xd[b * BM4 + (i / 4u) * WY + ty][i % 4u];
                let s = Xsum[b * BM4 + (i / 4u) * WY + ty][i % 4u];
                for (var h = 0u; h < TC4; h++) {
                    let a = Wa[b * BC4 + h * WX + tx];
                    let bb = Wb[b * BC4 + h * WX + tx];
                    acc[i][h] = fma(cvt_acc(isum[i][h]), d * a, fma(vec4<f32>(s), bb, acc[i][h]));
                }
            }
        }
        workgroupBarrier();
    }

    store_tile(t, lid, &acc);
}
