// qw_mm_cpu: the 4-bit (and 8-bit, f32) GEMM for CPU adapters (lavapipe, SwiftShader). They run
// a workgroup's invocations a few SIMD lanes at a time and pay for every barrier, and their
// "global" memory sits behind the CPU's caches: so no workgroup memory and no barrier; each
// thread reads its operands straight from memory and keeps its sums in registers. The same
// products, bindings, Params, split-K slices and epilogue flags as qw_mm.wgsl (qw_mm_head):
//   forward (TRANS = false): O[m, n] = sum_k A[m, k] * W[n, k] (+ bias[n]); R = K, C = N. A
//     thread owns RN output columns (RN rows of W) and the BM rows of its workgroup's tile: per
//     step of CPW k it dequantises one code word of each of its rows and loads each A value
//     once for RN rows.
//   input gradient (TRANS = true): O[m, k] = sum_n A[m, n] * W[n, k]; R = N, C = K. A thread
//     owns the CPW output columns of one code word and BM rows: per step n it dequantises that
//     word of W's row n once and uses each weight for BM rows.
// Workgroup: NT = 64 threads along C (neighbouring threads read neighbouring rows, or words, of
// W), owning a BM x (NT * CT) tile of O, CT = RN (forward) or CPW (TRANS). A's reads are the same
// for every thread of a workgroup. Rows past M read row M - 1 and are not stored. A CPU adapter
// loads storage lane by lane (a gather per value), and the loads per FMA set this kernel's
// speed: the forward form reads each W row's group (a, b) once per group, not once per word
// (lavapipe: 1.2-1.5x on SmolLM2's training GEMMs, bench/NOTES.md, 2026-12-04).
// The prelude gives what qw_mm_head needs (BM = TM, BC = NT * CT, BR = 32, TC = 4: the head's
// thread-grid constants are unused here) and the code kind (qweight.c).
//!include qw_mm_head

const NT: u32 = 64u;
const CT: u32 = select(RN, CPW, TRANS); // columns of O per thread

fn a_val(m: u32, r: u32) -> f32 {
    return a_at(A[(m * p.R + r) / VA], r % VA);
}

// A[m, r .. r + 3] (r % 4 == 0, r + 3 < R): one vec4 load when VA = 4. The loads per FMA set
// this kernel's speed on lavapipe, so each loaded value is used in full.
fn a_quad(m: u32, r: u32) -> vec4<f32> {
    let b = m * p.R + r;
    if (VA == 4u) {
        let v = A[b / 4u];
        return vec4<f32>(a_at(v, 0u), a_at(v, 1u), a_at(v, 2u), a_at(v, 3u));
    }
    return vec4<f32>(a_at(A[b], 0u), a_at(A[b + 1u], 0u), a_at(A[b + 2u], 0u), a_at(A[b + 3u], 0u));
}

fn dequant_word(wrd: u32, ab: vec2<f32>) -> array<f32, CPW> {
    var w: array<f32, CPW>;
    for (var i = 0u; i < CPW; i++) { w[i] = deq(code_f(wrd, i), ab); }
    return w;
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= tile_count()) { return; }
    let t = tile_of(wg);
    let rb = min(p.R, t.s * p.r_chunk);
    let re = min(p.R, rb + p.r_chunk);
    let c0 = t.c0 + lid * CT; // this thread's first column of O
    if (c0 >= p.C) { return; }
    var rows: array<u32, BM>;
    for (var j = 0u; j < BM; j++) { rows[j] = min(t.m0 + j, p.M - 1u); }

    var acc: array<array<f32, CT>, BM>;
    if (!TRANS) {
        // W's rows c0 .. c0 + RN - 1 (past N: row N - 1, not stored), words over [rb, re)
        var wrow: array<u32, RN>;
        for (var q = 0u; q < RN; q++) { wrow[q] = min(c0 + q, p.C - 1u); }
        var ab: array<vec2<f32>, RN>;
        for (var r = rb; r < re; r += CPW) {
            if (r == rb || r % G == 0u) { // a word never straddles a group
                for (var q = 0u; q < RN; q++) { ab[q] = group_ab(wrow[q] * p.ng + r / G); }
            }
            var w: array<array<f32, CPW>, RN>;
            for (var q = 0u; q < RN; q++) { w[q] = dequant_word(CODES[wrow[q] * p.wpr + r / CPW], ab[q]); }
            if (CPW % 4u == 0u && r + CPW <= re) {
                for (var j = 0u; j < BM; j++) {
                    for (var i4 = 0u; i4 < CPW / 4u; i4++) {
                        let a = a_quad(rows[j], r + 4u * i4);
                        for (var c = 0u; c < 4u; c++) {
                            for (var q = 0u; q < RN; q++) { acc[j][q] = fma(a[c], w[q][4u * i4 + c], acc[j][q]); }
                        }
                    }
                }
            } else { // a partial last word, or one value per word (f32)
                for (var j = 0u; j < BM; j++) {
                    for (var i = 0u; i < CPW; i++) {
                        if (r + i < re) {
                            let a = a_val(rows[j], r + i);
                            for (var q = 0u; q < RN; q++) { acc[j][q] = fma(a, w[q][i], acc[j][q]); }
                        }
                    }
                }
            }
        }
    } else {
        let word = c0 / CPW;
        let grp = c0 / G;
        // four steps of n at a time (rb is a multiple of BR): one vec4 of A per row, then the rest
        var n = rb;
        for (; n + 4u <= re; n += 4u) {
            var a: array<vec4<f32>, BM>;
            for (var j = 0u; j < BM; j++) { a[j] = a_quad(rows[j], n); }
            for (var d = 0u; d < 4u; d++) {
                let w = dequant_word(CODES[(n + d) * p.wpr + word], group_ab((n + d) * p.ng + grp));
                for (var j = 0u; j < BM; j++) {
                    for (var i = 0u; i < CT; i++) { acc[j][i] = fma(a[j][d], w[i], acc[j][i]); }
                }
            }
        }
        // the rest: none when R % 4 == 0 (VA = 4: slices start at multiples of BR), and then not
        // compiled (a third of the form's compile time on lavapipe). The forward's partial word
        // stays in the code whatever R is: without it the forward ran 1.25x slower on lavapipe
        // (bench/NOTES.md, 2026-12-05, fifth session).
        for (; VA != 4u && n < re; n++) {
            let w = dequant_word(CODES[n * p.wpr + word], group_ab(n * p.ng + grp));
            for (var j = 0u; j < BM; j++) {
                let a = a_val(rows[j], n);
                for (var i = 0u; i < CT; i++) { acc[j][i] = fma(a, w[i], acc[j][i]); }
            }
        }
    }

    // the epilogue, as qw_mm_head's store_tile: bias by slice 0, ACC when unsplit, SEG's index
    let o_base = t.s * p.M * p.C;
    let has_bias = (p.flags & 1u) != 0u && t.s == 0u;
    let acc_out = (p.flags & 2u) != 0u && p.splits == 1u;
    for (var j = 0u; j < BM; j++) {
        let gm = t.m0 + j;
        if (gm >= p.M) { break; }
        for (var i = 0u; i < CT; i++) {
            let gc = c0 + i;
            if (gc >= p.C) { break; }
            var v = acc[j][i];
            if (has_bias) { v += BIAS[gc]; }
            var oi = gm * p.C + gc;
            if (SEG) { oi = o_index(gm, gc); }
            if (acc_out) { v += O[oi]; }
            O[o_base + oi] = v;
        }
    }
}
