// qw_mm, double-buffered: the products of qw_mm.wgsl with two k-steps in workgroup memory.
//   forward (TRANS = false): O[m, n] = sum_k A[m, k] * W[n, k] (+ bias[n]); R = K, C = N.
//   input gradient (TRANS = true): O[m, k] = sum_n A[m, n] * W[n, k];          R = N, C = K.
// The epilogue's flags are prelude constants (each combination its own pipeline): QW_BIAS adds
// the bias, QW_ACC reads the output and adds to it (O += the product; qw_mm_into).
// With splits > 1, workgroup slice s covers R in [s*r_chunk, min(R, (s+1)*r_chunk)) and writes
// its raw partial into P[s, M, C] (slice 0 adds the bias); matmul_splitk.wgsl sums the slices
// in order (and adds O with ACC). r_chunk is a multiple of BR (R when not split).
// Tile: a workgroup computes a BM x BC block of O (128 x 128 with 256 threads and an 8 x 8
// register tile per thread; 128 x 64 with 8 x 4; 64 x 64 with 4 x 4), stepping R by BR (8 or
// 16; each code word reads its own group's (a, b), so G = 16 may split a step). Per step, while the FMAs
// run on buffer t%2, each thread holds the next step's A values and W code words with their
// group's (a, b) in registers (global loads in flight); after the FMAs it dequantises them into
// buffer (t+1)%2, and one barrier per step separates the steps.
// Workgroup layout as in matmul_db.wgsl: k-major rows of BM/4 (BC/4) vec4 slots, the slot of
// row k XORed with sw(k) so that the scalar stores of A (and of W in the forward form: one code
// word is CPW consecutive k of one column) spread over the banks; the TRANS form stores each
// word as CPW/4 vec4 slots of one row (the float kind, one value per word, as scalars). Thread (tx, ty) owns rows (g*WY + ty)*4 + r and columns
// (h*WX + tx)*4 + c: vec4 workgroup reads, coalesced global writes.
// The prelude gives KIND CPW G BPG ABT group_ab code_f deq (qweight.c) and TRANS, VA, AV, a_at and the tile constants BM BC BR TM TC (qw_mm.c).
//!include qw_mm_head
// loads per thread per step (rounded up; the tail is guarded): A elements and W code words
const NA: u32 = (BM * BR / VA + THREADS - 1u) / THREADS;
const NWORDS: u32 = BC * BR / CPW;
const NW: u32 = (NWORDS + THREADS - 1u) / THREADS;

var<workgroup> As: array<vec4<f32>, 2u * BR * BM4>;
var<workgroup> Bs: array<vec4<f32>, 2u * BR * BC4>; // W dequantised

fn sw(k: u32) -> u32 { return (k / 4u) * (32u / BR) % 8u; }

// Global -> registers: element e = lid + i*THREADS of the step at r0 (zeros outside the slice
// end re and M)
fn fetch_a(m0: u32, r0: u32, re: u32, lid: u32, i: u32) -> AV {
    let e = lid + i * THREADS;
    var v = AV();
    if (e < BM * BR / VA) { v = a_get(m0, r0, re, a_slot(e)); }
    return v;
}

fn put_a(buf: u32, k: u32, m: u32, x: f32) { As[(buf * BR + k) * BM4 + ((m / 4u) ^ sw(k))][m % 4u] = x; }
fn put_w(buf: u32, k: u32, c: u32, x: f32) { Bs[(buf * BR + k) * BC4 + ((c / 4u) ^ sw(k))][c % 4u] = x; }

fn store_a(buf: u32, lid: u32, i: u32, v: AV) {
    let e = lid + i * THREADS;
    if (e >= BM * BR / VA) { return; }
    let rm = a_slot(e);
    for (var c = 0u; c < VA; c++) { put_a(buf, rm.x + c, rm.y, a_at(v, c)); }
}

// Code word e = lid + i*THREADS of the step at r0 and its group's (a, b) (word_at).
fn fetch_w(c0: u32, r0: u32, re: u32, lid: u32, i: u32) -> Word {
    let e = lid + i * THREADS;
    var x = Word(0u, vec2<f32>(0.0));
    if (e < NWORDS && r0 < re) { x = word_at(c0, r0, re, e / WPT, e % WPT); }
    return x;
}

fn store_w(buf: u32, lid: u32, i: u32, x: Word) {
    let e = lid + i * THREADS;
    if (e >= NWORDS) { return; }
    let rowi = e / WPT;
    let wi = e % WPT;
    if (!TRANS) {
        for (var j = 0u; j < CPW; j++) { put_w(buf, wi * CPW + j, rowi, deq(code_f(x.w, j), x.ab)); }
    } else if (CPW < 4u) { // the float kind: one value per word
        for (var j = 0u; j < CPW; j++) { put_w(buf, rowi, wi * CPW + j, deq(code_f(x.w, j), x.ab)); }
    } else {
        let base = (buf * BR + rowi) * BC4;
        for (var q = 0u; q < CPW / 4u; q++) {
            let j = q * 4u;
            Bs[base + (((wi * CPW) / 4u + q) ^ sw(rowi))] =
                vec4<f32>(deq(code_f(x.w, j), x.ab), deq(code_f(x.w, j + 1u), x.ab),
                          deq(code_f(x.w, j + 2u), x.ab), deq(code_f(x.w, j + 3u), x.ab));
        }
    }
}

//!include tile_main
fn run_tile(t: Tile, lid: u32) {
    let m0 = t.m0;
    let c0 = t.c0;
    let tx = lid % WX;
    let ty = lid / WX;
    let rb = min(p.R, t.s * p.r_chunk);
    let re = min(p.R, rb + p.r_chunk);
    let nt = (re - rb + BR - 1u) / BR;

    var ra: array<AV, NA>;
    var rw: array<Word, NW>;
    for (var i = 0u; i < NA; i++) { ra[i] = fetch_a(m0, rb, re, lid, i); }
    for (var i = 0u; i < NW; i++) { rw[i] = fetch_w(c0, rb, re, lid, i); }
    for (var i = 0u; i < NA; i++) { store_a(0u, lid, i, ra[i]); }
    for (var i = 0u; i < NW; i++) { store_w(0u, lid, i, rw[i]); }
    workgroupBarrier();

    var acc: array<array<vec4<f32>, TC4>, TM>;
    for (var st = 0u; st < nt; st++) {
        let cur = st & 1u;
        let more = st + 1u < nt;
        if (more) {
            let r1 = rb + (st + 1u) * BR;
            for (var i = 0u; i < NA; i++) { ra[i] = fetch_a(m0, r1, re, lid, i); }
            for (var i = 0u; i < NW; i++) { rw[i] = fetch_w(c0, r1, re, lid, i); }
        }
//!include matmul_fma
        if (more) {
            for (var i = 0u; i < NA; i++) { store_a(cur ^ 1u, lid, i, ra[i]); }
            for (var i = 0u; i < NW; i++) { store_w(cur ^ 1u, lid, i, rw[i]); }
        }
        workgroupBarrier();
    }

    store_tile(t, lid, &acc);
}
