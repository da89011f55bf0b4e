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
// W's BC rows unpacked to QB/4 int8 words with (a, b), all as vec4 over 4 rows/columns (read
// from memory one stage ahead with PF: fetch, commit); then per
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

// One stage's loads as a thread holds them between the global reads (fetch) and the
// workgroup-memory stores (commit): the e = lid + i·THREADS elements of X's words, X's (d, s),
// W's code words and W's (a, b) over SB blocks from k = r0 (rows past M or C and blocks at or
// past re give 0). With PF (prelude) the next stage is fetched right after the barrier that
// publishes this one, so its global reads are in flight while this stage's dot products run;
// without it, after the stage's second barrier, as a plain load-then-compute loop.
const NXW: u32 = (SB * BM * QW + THREADS - 1u) / THREADS;
const NXD: u32 = (SB * BM + THREADS - 1u) / THREADS;
const NWW: u32 = (SB * BC * (QB / CPW) + THREADS - 1u) / THREADS;
const NWA: u32 = (SB * BC + THREADS - 1u) / THREADS;
struct Stage {
    xw: array<u32, NXW>,
    xd: array<vec2<f32>, NXD>,
    ww: array<u32, NWW>,
    wab: array<vec2<f32>, NWA>,
}

fn fetch(st: ptr<function, Stage>, m0: u32, c0: u32, r0: u32, re: u32, lid: u32) {
    let rs = p.Kp / 4u + 2u * (p.Kp / QB);
    for (var i = 0u; i < NXW; i++) {
        let e = lid + i * THREADS;
        let b = e / (BM * QW);
        let m = (e / QW) % BM;
        var v = 0u;
        if (e < SB * BM * QW && m0 + m < p.M && r0 + b * QB < re) {
            v = A[(m0 + m) * rs + (r0 + b * QB) / 4u + e % QW];
        }
        (*st).xw[i] = v;
    }
    for (var i = 0u; i < NXD; i++) {
        let e = lid + i * THREADS;
        let b = e / BM;
        let m = e % BM;
        var ds = vec2<f32>(0.0);
        if (e < SB * BM && m0 + m < p.M && r0 + b * QB < re) {
            let o = (m0 + m) * rs + p.Kp / 4u + (r0 + b * QB) / QB;
            ds = vec2<f32>(bitcast<f32>(A[o]), bitcast<f32>(A[o + p.Kp / QB]));
        }
        (*st).xd[i] = ds;
    }
    for (var i = 0u; i < NWW; i++) {
        let e = lid + i * THREADS;
        let b = e / (BC * (QB / CPW));
        let c = (e / (QB / CPW)) % BC;
        var w = 0u;
        if (e < SB * BC * (QB / CPW) && c0 + c < p.C && r0 + b * QB < re) {
            w = CODES[(c0 + c) * p.wpr + (r0 + b * QB) / CPW + e % (QB / CPW)];
        }
        (*st).ww[i] = w;
    }
    for (var i = 0u; i < NWA; i++) {
        let e = lid + i * THREADS;
        let b = e / BC;
        let c = e % BC;
        var ab = vec2<f32>(0.0);
        if (e < SB * BC && c0 + c < p.C && r0 + b * QB < re) { ab = group_ab((c0 + c) * p.ng + (r0 + b * QB) / G); }
        (*st).wab[i] = ab;
    }
}

// Where element e (block e / rows, row e % rows) of a per-block table of vec4 over 4 rows goes:
// (vec4 index, lane)
fn slot(e: u32, rows: u32, rows4: u32) -> vec2<u32> { return vec2<u32>((e / rows) * rows4 + (e % rows) / 4u, e % 4u); }

// The stage into workgroup memory: X's words [b][j][m], a 4-bit code word (8 codes) as its even
// and odd nibbles' two int8 words, an 8-bit one as itself [b][j][c]; d, s, a, b per block.
fn commit(st: ptr<function, Stage>, lid: u32) {
    for (var i = 0u; i < NXW; i++) {
        let e = lid + i * THREADS;
        if (e < SB * BM * QW) {
            let m = (e / QW) % BM;
            Xs[((e / (BM * QW)) * QW + e % QW) * BM4 + m / 4u][m % 4u] = (*st).xw[i];
        }
    }
    for (var i = 0u; i < NXD; i++) {
        let e = lid + i * THREADS;
        let q = slot(e, BM, BM4);
        if (e < SB * BM) {
            Xd[q.x][q.y] = (*st).xd[i].x;
            Xsum[q.x][q.y] = (*st).xd[i].y;
        }
    }
    for (var i = 0u; i < NWW; i++) {
        let e = lid + i * THREADS;
        if (e < SB * BC * (QB / CPW)) {
            let b = e / (BC * (QB / CPW));
            let c = (e / (QB / CPW)) % BC;
            let wi = e % (QB / CPW);
            let w = (*st).ww[i];
            if (CPW == 8u) {
                Ws[(b * QW + 2u * wi) * BC4 + c / 4u][c % 4u] = w & 0x0F0F0F0Fu;
                Ws[(b * QW + 2u * wi + 1u) * BC4 + c / 4u][c % 4u] = (w >> 4u) & 0x0F0F0F0Fu;
            } else {
                Ws[(b * QW + wi) * BC4 + c / 4u][c % 4u] = w;
            }
        }
    }
    for (var i = 0u; i < NWA; i++) {
        let e = lid + i * THREADS;
        let q = slot(e, BC, BC4);
        if (e < SB * BC) {
            Wa[q.x][q.y] = (*st).wab[i].x;
            Wb[q.x][q.y] = (*st).wab[i].y;
        }
    }
}

//!include tile_main
fn run_tile(t: Tile, lid: u32) {
    let rb = min(p.R, t.s * p.r_chunk);
    let re = min(p.R, rb + p.r_chunk);
    let tx = lid % WX;
    let ty = lid / WX;

    var acc: array<array<vec4<f32>, TC4>, TM>;
    var st: Stage;
    fetch(&st, t.m0, t.c0, rb, re, lid);
    for (var r0 = rb; r0 < re; r0 += SB * QB) {
        commit(&st, lid);
        workgroupBarrier();
        let more = r0 + SB * QB < re; // uniform
        if (PF && more) { fetch(&st, t.m0, t.c0, r0 + SB * QB, re, lid); }
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
        if (!PF && more) { fetch(&st, t.m0, t.c0, r0 + SB * QB, re, lid); }
    }

    store_tile(t, lid, &acc);
}
