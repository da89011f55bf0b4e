// q4_mm: tiled products with a 4-bit (or 8-bit) weight W[N, K], dequantised into workgroup
// memory one tile at a time.
//   forward (TRANS = false): O[m, n] = sum_k A[m, k] * W[n, k] (+ bias[n]); R = K, C = N.
//   input gradient (TRANS = true): O[m, k] = sum_n A[m, n] * W[n, k];          R = N, C = K.
// Tile (prelude constants BM BC BR TM TC): a workgroup computes a BM x BC block of O[M, C],
// stepping the reduction R by BR (16 or 32; a step never straddles two groups, since G is a
// multiple of 32). Variants: 64 x 64, BR 32, 4 x 4 registers; 128 x 128, BR 16, 8 x 8
// registers (large M and C). 16 x 16 threads; each owns a TM x TC register tile at rows
// ty + i*16 and columns tx + j*16 (strided ownership: conflict-free workgroup reads, coalesced
// stores). Per step the threads load the A tile (vec4 when R % 4 == 0) and dequantise the W
// tile: one u32 code word (8 or 4 codes) per thread per pass, with its group's (a, b).
// The prelude gives KIND CPW G BPG ABT group_ab code_f deq (q4.c), TRANS, HAS_BIAS, VA, AV,
// a_at and the tile constants.
struct Params { M: u32, R: u32, C: u32, wpr: u32, ng: u32, tiles_c: u32, tiles_m: u32, Kp: u32 }

@group(0) @binding(0) var<storage, read> A: array<AV>;
@group(0) @binding(1) var<storage, read> CODES: array<u32>;
@group(0) @binding(2) var<storage, read> AB: array<ABT>;
@group(0) @binding(3) var<storage, read> BIAS: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

const WX: u32 = BC / TC;
const WY: u32 = BM / TM;
const THREADS: u32 = WX * WY;

var<workgroup> As: array<f32, BR * BM>; // [r][m]
var<workgroup> Ws: array<f32, BR * BC>; // [r][c]

fn load_a(m0: u32, r0: u32, lid: u32) {
    for (var e = lid; e < BM * BR / VA; e += THREADS) {
        let row = e / (BR / VA);
        let rv = (e % (BR / VA)) * VA;
        let gm = m0 + row;
        let gr = r0 + rv;
        var v = AV();
        if (gm < p.M && gr < p.R) { v = A[(gm * p.R + gr) / VA]; }
        for (var c = 0u; c < VA; c++) { As[(rv + c) * BM + row] = a_at(v, c); }
    }
}

fn load_w(c0: u32, r0: u32, lid: u32) {
    if (!TRANS) {
        // W rows are the output columns n; the tile covers k in [r0, r0 + 32): one group
        const WPT: u32 = BR / CPW; // words per tile row
        for (var e = lid; e < BC * WPT; e += THREADS) {
            let cl = e / WPT;
            let wi = e % WPT;
            let n = c0 + cl;
            if (n < p.C) {
                let word = CODES[n * p.wpr + r0 / CPW + wi];
                let ab = group_ab(n * p.ng + r0 / G);
                for (var i = 0u; i < CPW; i++) { Ws[(wi * CPW + i) * BC + cl] = deq(code_f(word, i), ab); }
            } else {
                for (var i = 0u; i < CPW; i++) { Ws[(wi * CPW + i) * BC + cl] = 0.0; }
            }
        }
    } else {
        // W rows are the reduction index n in [r0, r0 + 32); columns k in [c0, c0 + 64)
        const WPT: u32 = BC / CPW;
        for (var e = lid; e < BR * WPT; e += THREADS) {
            let rl = e / WPT;
            let wi = e % WPT;
            let n = r0 + rl;
            let kb = c0 + wi * CPW;
            if (n < p.R && kb < p.Kp) {
                let word = CODES[n * p.wpr + kb / CPW];
                let ab = group_ab(n * p.ng + kb / G);
                for (var i = 0u; i < CPW; i++) { Ws[rl * BC + wi * CPW + i] = deq(code_f(word, i), ab); }
            } else {
                for (var i = 0u; i < CPW; i++) { Ws[rl * BC + wi * CPW + i] = 0.0; }
            }
        }
    }
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.tiles_c * p.tiles_m) { return; }
    let m0 = (wg / p.tiles_c) * BM;
    let c0 = (wg % p.tiles_c) * BC;
    let tx = lid % WX;
    let ty = lid / WX;

    var acc: array<array<f32, TC>, TM>;
    for (var r0 = 0u; r0 < p.R; r0 += BR) {
        load_a(m0, r0, lid);
        load_w(c0, r0, lid);
        workgroupBarrier();
        for (var kk = 0u; kk < BR; kk++) {
            var av: array<f32, TM>;
            var bv: array<f32, TC>;
            for (var i = 0u; i < TM; i++) { av[i] = As[kk * BM + ty + i * WY]; }
            for (var j = 0u; j < TC; j++) { bv[j] = Ws[kk * BC + tx + j * WX]; }
            for (var i = 0u; i < TM; i++) {
                for (var j = 0u; j < TC; j++) { acc[i][j] = fma(av[i], bv[j], acc[i][j]); }
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < TM; i++) {
        let gm = m0 + ty + i * WY;
        if (gm >= p.M) { continue; }
        for (var j = 0u; j < TC; j++) {
            let gc = c0 + tx + j * WX;
            if (gc >= p.C) { continue; }
            var v = acc[i][j];
            if (HAS_BIAS) { v += BIAS[gc]; }
            O[gm * p.C + gc] = v;
        }
    }
}
