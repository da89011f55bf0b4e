// matmul, double-buffered: O[b] = alpha * op(A[b]) * op(B[b]) + beta * C, or with SPLITK the
// raw partial product of one K slice into P[s, b, m, n] (summed by matmul_splitk_reduce).
//
// Tile: each workgroup computes a BM x BN block of O (e.g. 128x128 with 256 threads, each
// thread owning an 8x8 register tile; 128x64 with 8x4). K advances by BK per step through two
// workgroup buffers per operand: while the FMAs run on buffer t%2, each thread already holds
// its part of the next k-tile in registers (global loads in flight), stores it into buffer
// (t+1)%2 after the FMAs, and one barrier per k-step separates the steps.
// Workgroup layout: k-major rows of BM/4 (BN/4) vec4 slots; the vec4 slot of row k is XORed
// with sw(k) (constant per k-group of 4), so the scalar stores of a [M, K]-contiguous operand
// (four k rows from one vec4 load) hit distinct banks while the vec4 reads of the FMA loop
// stay contiguous within each 16-slot group (no padding: 128x128 at BK 16 is exactly 32 KiB).
// Thread (tx, ty) owns rows (g*WY + ty)*4 + r (g < TM/4, r < 4) and columns
// (h*WX + tx)*4 + c: vec4 workgroup reads, coalesced global writes.
// The prelude supplies BM BN BK TM TN VA VB TRANS_A TRANS_B HAS_C C_IS_OUT SPLITK, the aliases
// AV/BV and their component readers a_at/b_at, and matmul_flags_init(), called first (the flags
// runtime on CPU adapters, as in matmul.wgsl; the band mode is unused here). Each K slice s covers
// [s*k_chunk, min(K, (s+1)*k_chunk)); k_chunk is a multiple of BK (the whole K when splits = 1).
//!include matmul_tile

// loads per thread per k-tile (rounded up; the tail is guarded)
const NA: u32 = (BM * BK / VA + THREADS - 1u) / THREADS;
const NB: u32 = (BN * BK / VB + THREADS - 1u) / THREADS;

var<workgroup> As: array<vec4<f32>, 2u * BK * BM4>;
var<workgroup> Bs: array<vec4<f32>, 2u * BK * BN4>;

// slot swizzle of k row k: the k-groups of 4 spread over the 8 bank groups of 4 words
fn sw(k: u32) -> u32 { return (k / 4u) * (32u / BK) % 8u; }

// Global -> registers: element e = lid + i*THREADS of the k-tile at k0 (bounds and the slice
// end ke checked; outside reads give zeros).
fn fetch_a(a_base: u32, m0: u32, k0: u32, ke: u32, lid: u32, i: u32) -> AV {
    let e = lid + i * THREADS;
    var v = AV();
    if (e < BM * BK / VA) { v = a_get(a_base, m0, k0, ke, a_slot(e)); }
    return v;
}

fn fetch_b(b_base: u32, n0: u32, k0: u32, ke: u32, lid: u32, i: u32) -> BV {
    let e = lid + i * THREADS;
    var v = BV();
    if (e < BN * BK / VB) { v = b_get(b_base, n0, k0, ke, b_slot(e)); }
    return v;
}

// Registers -> workgroup buffer `buf` (0 or 1), k-major with the slot swizzle.
fn put_a(buf: u32, k: u32, m: u32, x: f32) { As[(buf * BK + k) * BM4 + ((m / 4u) ^ sw(k))][m % 4u] = x; }
fn put_b(buf: u32, k: u32, n: u32, x: f32) { Bs[(buf * BK + k) * BN4 + ((n / 4u) ^ sw(k))][n % 4u] = x; }

fn store_a(buf: u32, lid: u32, i: u32, v: AV) {
    let e = lid + i * THREADS;
    if (e >= BM * BK / VA) { return; }
    let km = a_slot(e);
    let k = km.x;
    let m = km.y;
    if (TRANS_A) {
        if (VA == 4u) {
            As[(buf * BK + k) * BM4 + ((m / 4u) ^ sw(k))] = vec4<f32>(a_at(v, 0u), a_at(v, 1u), a_at(v, 2u), a_at(v, 3u));
        } else {
            put_a(buf, k, m, a_at(v, 0u));
        }
    } else {
        for (var c = 0u; c < VA; c++) { put_a(buf, k + c, m, a_at(v, c)); }
    }
}

fn store_b(buf: u32, lid: u32, i: u32, v: BV) {
    let e = lid + i * THREADS;
    if (e >= BN * BK / VB) { return; }
    let kn = b_slot(e);
    let k = kn.x;
    let n = kn.y;
    if (TRANS_B) {
        for (var c = 0u; c < VB; c++) { put_b(buf, k + c, n, b_at(v, c)); }
    } else {
        if (VB == 4u) {
            Bs[(buf * BK + k) * BN4 + ((n / 4u) ^ sw(k))] = vec4<f32>(b_at(v, 0u), b_at(v, 1u), b_at(v, 2u), b_at(v, 3u));
        } else {
            put_b(buf, k, n, b_at(v, 0u));
        }
    }
}

//!include tile_main
fn run_tile(t: Tile, lid: u32) {
    matmul_flags_init();
    let m0 = t.m0;
    let n0 = t.n0;
    let tx = lid % WX;
    let ty = lid / WX;
    let a_base = t.b * p.a_bs;
    let b_base = t.b * p.b_bs;
    let kb = min(p.K, t.s * p.k_chunk);
    let ke = min(p.K, kb + p.k_chunk);
    let nt = (ke - kb + BK - 1u) / BK;

    var ra: array<AV, NA>;
    var rb: array<BV, NB>;
    for (var i = 0u; i < NA; i++) { ra[i] = fetch_a(a_base, m0, kb, ke, lid, i); }
    for (var i = 0u; i < NB; i++) { rb[i] = fetch_b(b_base, n0, kb, ke, lid, i); }
    for (var i = 0u; i < NA; i++) { store_a(0u, lid, i, ra[i]); }
    for (var i = 0u; i < NB; i++) { store_b(0u, lid, i, rb[i]); }
    workgroupBarrier();

    var acc: array<array<vec4<f32>, TN4>, TM>;
    for (var st = 0u; st < nt; st++) {
        let cur = st & 1u;
        let more = st + 1u < nt;
        if (more) {
            let k1 = kb + (st + 1u) * BK;
            for (var i = 0u; i < NA; i++) { ra[i] = fetch_a(a_base, m0, k1, ke, lid, i); }
            for (var i = 0u; i < NB; i++) { rb[i] = fetch_b(b_base, n0, k1, ke, lid, i); }
        }
//!include matmul_fma
        if (more) {
            for (var i = 0u; i < NA; i++) { store_a(cur ^ 1u, lid, i, ra[i]); }
            for (var i = 0u; i < NB; i++) { store_b(cur ^ 1u, lid, i, rb[i]); }
        }
        workgroupBarrier();
    }

    store_tile(t, lid, &acc);
}
