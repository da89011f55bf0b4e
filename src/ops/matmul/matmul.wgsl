// matmul: O[b] = alpha * op(A[b]) * op(B[b]) + beta * C  (C broadcast through strides; bias is
// C with a zero row stride). op() transposes when TRANS_A / TRANS_B.
//
// Tile: each workgroup computes a BM x BN block of O, stepping K by BK through workgroup
// memory (As, Bs stored k-major as vec4). (BM/TM) x (BN/TN) threads; each thread owns a
// TM x TN register tile made of groups of 4 rows and 4 columns strided by the thread grid
// (see main): vec4 workgroup reads without bank conflicts, coalesced global writes.
// TM and TN are multiples of 4.
// Loads are vec4 (VA/VB = 4) when the operand's contiguous dimension is a multiple of 4.
// The prelude supplies BM BN BK TM TN VA VB TRANS_A TRANS_B HAS_C C_IS_OUT SPLITK, the aliases
// AV/BV and their component readers a_at/b_at, band_mode() (the causal band's mode, below) and
// matmul_flags_init(), which run_tile calls first. On GPUs the flags and the mode are constants
// (matmul_flags_init is empty): each combination its own pipeline, the untaken branches compiled
// out. On CPU adapters, where compiling a pipeline costs seconds, TRANS_A TRANS_B HAS_C C_IS_OUT
// SPLITK are private variables that matmul_flags_init sets from p.flags, and band_mode() reads
// p.flags itself (a uniform value: it bounds the k loop around the barriers, which private
// variables may not), so one pipeline serves every orientation, epilogue and band (matmul.c,
// append_flags). The flags are tested only in branches without a barrier. With C_IS_OUT the output
// is read as C before it is overwritten (accumulation in place: each element is read and written by
// one thread). With SPLITK, workgroup slice s covers K range [s*k_chunk, min(K, (s+1)*k_chunk)) and
// writes its raw partial product to P[s, b, m, n] (bound as O), summed in a fixed order by
// matmul_splitk_reduce.
// Causal band (attention's backward products; mode 0 everywhere else, which on GPUs compiles it
// out): the terms of the product vanish wherever key > query + band_off, the query being an
// index taken modulo band_sq (the query rows of several heads follow each other). Mode 1: rows
// are queries, columns keys (q·kᵀ): a tile whose first key lies past the band of its last
// query is left zero without reading anything. Mode 2: rows are queries, K runs over keys
// (dS·k): K stops after the last query's band. Mode 3: rows are keys, K runs over queries
// (dSᵀ·q, Pᵀ·dout): in each query segment the k-tiles wholly before the tile's first key's band
// are skipped (band_sq is a multiple of BK). The skipped terms are exact zeros in the operands
// (the masked part of P and dS), so the result equals the full product. band_mode() is the mode
// (the prelude's constant BAND on GPUs); band_sq and band_off are parameters.
//!include matmul_tile

// k-major tiles held as vec4 so that a thread reads 4 rows (or columns) in one access
var<workgroup> As: array<vec4<f32>, BK * BM4>;
var<workgroup> Bs: array<vec4<f32>, BK * BN4>;

fn put_a(k: u32, m: u32, v: f32) { As[(k * BM + m) / 4u][m % 4u] = v; }
fn put_b(k: u32, n: u32, v: f32) { Bs[(k * BN + n) / 4u][n % 4u] = v; }

// no slot swizzle: the tile is read as it was stored (matmul_fma reads slot i ^ sw(k))
fn sw(k: u32) -> u32 { return 0u; }

// The last query among rows [x0, x1) of a band-1/2 product (x1 > x0).
fn last_query(x0: u32, x1: u32) -> u32 {
    if (x0 / p.band_sq != (x1 - 1u) / p.band_sq) { return p.band_sq - 1u; }
    return (x1 - 1u) % p.band_sq;
}

// Where the K loop of the tile at (m0, n0) ends, given the slice's [kb, ke).
fn band_end(m0: u32, n0: u32, kb: u32, ke: u32) -> u32 {
    let band = band_mode();
    if (band == 1u || band == 2u) {
        let lq = last_query(m0, min(m0 + BM, p.M)) + p.band_off;
        if (band == 1u) { return select(ke, kb, n0 > lq); }
        return min(ke, lq + 1u);
    }
    return ke;
}

// The first k-tile at or after k (a multiple of BK) that the tile whose first row is m0 needs.
fn band_next(m0: u32, k: u32) -> u32 {
    if (band_mode() != 3u || m0 <= p.band_off) { return k; }
    let start = (m0 - p.band_off) / BK * BK;
    let within = k % p.band_sq;
    return select(k - within + start, k, within >= start);
}

fn load_a(a_base: u32, m0: u32, k0: u32, ke: u32, lid: u32) {
    for (var e = lid; e < BM * BK / VA; e += THREADS) {
        let km = a_slot(e);
        let v = a_get(a_base, m0, k0, ke, km);
        if (TRANS_A) {
            for (var c = 0u; c < VA; c++) { put_a(km.x, km.y + c, a_at(v, c)); }
        } else {
            for (var c = 0u; c < VA; c++) { put_a(km.x + c, km.y, a_at(v, c)); }
        }
    }
}

fn load_b(b_base: u32, n0: u32, k0: u32, ke: u32, lid: u32) {
    for (var e = lid; e < BN * BK / VB; e += THREADS) {
        let kn = b_slot(e);
        let v = b_get(b_base, n0, k0, ke, kn);
        if (TRANS_B) {
            for (var c = 0u; c < VB; c++) { put_b(kn.x + c, kn.y, b_at(v, c)); }
        } else {
            for (var c = 0u; c < VB; c++) { put_b(kn.x, kn.y + c, b_at(v, c)); }
        }
    }
}

// Thread (tx, ty) owns rows (g*WY + ty)*4 + r for g < TM/4, r < 4 and columns
// (h*WX + tx)*4 + c for h < TN/4, c < 4: groups of four, strided by the thread grid, so each
// workgroup-memory read is one vec4 and neighbouring threads read neighbouring vec4s.
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
    let ke = band_end(m0, n0, kb, min(p.K, kb + p.k_chunk));

    var acc: array<array<vec4<f32>, TN4>, TM>;
    for (var k0 = band_next(m0, kb); k0 < ke; k0 = band_next(m0, k0 + BK)) {
        load_a(a_base, m0, k0, ke, lid);
        load_b(b_base, n0, k0, ke, lid);
        workgroupBarrier();
        const cur = 0u; // one buffer
//!include matmul_fma
        workgroupBarrier();
    }

    store_tile(t, lid, &acc);
}
