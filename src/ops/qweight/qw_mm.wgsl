// qw_mm: tiled products with a 4-bit (or 8-bit) weight W[N, K], dequantised into workgroup
// memory one tile at a time.
//   forward (TRANS = false): O[m, n] = sum_k A[m, k] * W[n, k] (+ bias[n]); R = K, C = N.
//   input gradient (TRANS = true): O[m, k] = sum_n A[m, n] * W[n, k];          R = N, C = K.
// Tile (prelude constants BM BC BR TM TC): a workgroup computes a BM x BC block of O[M, C],
// stepping the reduction R by BR (16 or 32; each code word's group is its own: G = 16
// (Q6_K) splits a step). Variants: 64 x 64, BR 32, 4 x 4 registers; 128 x 64, BR 16, 8 x 4;
// 128 x 128, BR 16, 8 x 8. 16 x 16 threads; each owns a TM x TC register tile made of groups
// of 4 rows and 4 columns strided by the thread grid, read from vec4 workgroup tiles (as in
// matmul.wgsl: conflict-free vec4 reads, coalesced stores). Per step the threads load the A tile (vec4 when R % 4 == 0) and dequantise the W
// tile: one u32 code word (8 or 4 codes) per thread per pass, with its group's (a, b).
// The epilogue's flags are prelude constants (each combination its own pipeline): QW_BIAS adds
// the bias, QW_ACC reads the output and adds to it (O += the product; qw_mm_into).
// With splits > 1, workgroup slice s covers R in [s*r_chunk, min(R, (s+1)*r_chunk)) and writes
// its raw partial into P[s, M, C] (slice 0 adds the bias); matmul_splitk.wgsl sums the slices
// (and adds O with ACC). r_chunk is a multiple of BR (R when not split).
// LORA (prelude, qw_mm.c): slice 0 takes ceil(lr / BR) more steps after its reduction, over a
// LoRA term's operands instead of A and W (load_lora): O += s·L·Rᵀ with L [M, lr] (H = x·Aᵀ
// forward, dH = s·dy·B for the input gradient) and R the adapter's up matrix B [C, lr] forward
// or its A [lr, C] with TRANS, so that the adapter's up-projection costs a few steps of the
// base product instead of a pass over O of its own (qw_mm_lora.wgsl gives lora_a, lora_w).
// The prelude gives KIND CPW G BPG ABT group_ab code_f deq (qweight.c), and (qw_mm.c) TRANS, VA, SEG, AV,
// a_at, LORA, lora_a, lora_w and the tile constants.
//!include qw_mm_head

// k-major tiles held as vec4 so that a thread reads 4 rows (or columns) in one access
var<workgroup> As: array<vec4<f32>, BR * BM4>; // [r][m]
var<workgroup> Bs: array<vec4<f32>, BR * BC4>; // [r][c]: W dequantised

fn put_a(r: u32, m: u32, v: f32) { As[(r * BM + m) / 4u][m % 4u] = v; }
fn put_w(r: u32, c: u32, v: f32) { Bs[(r * BC + c) / 4u][c % 4u] = v; }

// no slot swizzle: the tile is read as it was stored (matmul_fma reads slot i ^ sw(k))
fn sw(k: u32) -> u32 { return 0u; }

fn load_a(m0: u32, r0: u32, re: u32, lid: u32) {
    for (var e = lid; e < BM * BR / VA; e += THREADS) {
        let rm = a_slot(e);
        let v = a_get(m0, r0, re, rm);
        for (var c = 0u; c < VA; c++) { put_a(rm.x + c, rm.y, a_at(v, c)); }
    }
}

// The W tile dequantised: one code word per thread per pass. Forward: W rows are the output
// columns (tile row = a column of O), a word holds CPW consecutive k (scalar stores down a
// column); TRANS: W rows are the reduction index (tile row = a step of r), a word holds CPW
// consecutive output columns, stored as whole vec4 slots (as qw_mm_db.wgsl does).
fn load_w(c0: u32, r0: u32, re: u32, lid: u32) {
    for (var e = lid; e < BC * BR / CPW; e += THREADS) {
        let rowi = e / WPT;
        let wi = e % WPT;
        let x = word_at(c0, r0, re, rowi, wi);
        if (!TRANS) {
            for (var i = 0u; i < CPW; i++) { put_w(wi * CPW + i, rowi, deq(code_f(x.w, i), x.ab)); }
        } else if (CPW < 4u) { // the float kind: one value per word
            for (var i = 0u; i < CPW; i++) { put_w(rowi, wi * CPW + i, deq(code_f(x.w, i), x.ab)); }
        } else { // CPW consecutive columns of one row: CPW / 4 whole vec4 slots
            let base = (rowi * BC + wi * CPW) / 4u;
            for (var q = 0u; q < CPW / 4u; q++) {
                let j = q * 4u;
                Bs[base + q] = vec4<f32>(deq(code_f(x.w, j), x.ab), deq(code_f(x.w, j + 1u), x.ab),
                                         deq(code_f(x.w, j + 2u), x.ab), deq(code_f(x.w, j + 3u), x.ab));
            }
        }
    }
}

// The LoRA step at rank index j0 (LORA): the A tile from lora_a (L [M, lr], scaled), the W tile
// from lora_w (R as the product reads it); zeros past M, C or lr. Each pass reads along its
// operand's rows: L and the forward's B [C, lr] along j, TRANS's A [lr, C] along c.
fn load_lora(m0: u32, c0: u32, j0: u32, lid: u32) {
    for (var e = lid; e < BM * BR; e += THREADS) {
        let m = e / BR;
        let j = e % BR;
        var v = 0.0;
        if (m0 + m < p.M && j0 + j < p.lr) { v = lora_a(m0 + m, j0 + j); }
        put_a(j, m, v);
    }
    for (var e = lid; e < BC * BR; e += THREADS) {
        var c = e / BR;
        var j = e % BR;
        if (TRANS) {
            c = e % BC;
            j = e / BC;
        }
        var v = 0.0;
        if (c0 + c < p.C && j0 + j < p.lr) { v = lora_w(j0 + j, c0 + c); }
        put_w(j, c, v);
    }
}

//!include tile_main
fn run_tile(t: Tile, lid: u32) {
    let m0 = t.m0;
    let c0 = t.c0;
    let rb = min(p.R, t.s * p.r_chunk);
    let re = min(p.R, rb + p.r_chunk);
    let tx = lid % WX;
    let ty = lid / WX;
    // with LORA, slice 0's steps past its reduction (from rl, re rounded up to a step) are the
    // LoRA term's; without, the loop is the plain one
    var rl = re;
    var end = re;
    if (LORA && t.s == 0u) {
        rl = rb + (re - rb + BR - 1u) / BR * BR;
        end = rl + (p.lr + BR - 1u) / BR * BR;
    }

    var acc: array<array<vec4<f32>, TC4>, TM>;
    for (var r0 = rb; r0 < end; r0 += BR) {
        if (!LORA || r0 < re) {
            load_a(m0, r0, re, lid);
            load_w(c0, r0, re, lid);
        } else {
            load_lora(m0, c0, r0 - rl, lid);
        }
        workgroupBarrier();
        const cur = 0u; // one buffer
//!include matmul_fma
        workgroupBarrier();
    }

    store_tile(t, lid, &acc);
}
