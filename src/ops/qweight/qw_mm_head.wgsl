// qw_mm_head: what the 4-bit GEMM kernels (qw_mm.wgsl, qw_mm_db.wgsl; qw_mm_cpu.wgsl takes the
// Params, bindings, tiles and o_index) share ("//!include qw_mm_head"): the thread grid of a BM x BC
// tile with TM x TC registers per thread, the tile a workgroup owns, where element e of a step
// of A lies and which code word a W tile row reads (the index math of the loaders), and the
// store of the register tile (the epilogue). Each kernel keeps its own workgroup layout and
// main loop; the FMAs over a staged tile are matmul_fma's. Not a kernel on its own.
struct Params {
    M: u32, R: u32, C: u32, wpr: u32,
    ng: u32, tiles_c: u32, tiles_m: u32, Kp: u32,
    r_chunk: u32, splits: u32, flags: u32, seg1: u32,
    seg2: u32, lr: u32, lscale: u32, pad0: u32,
}

//!bindings read(A: array<AV>, CODES: array<u32>, AB: array<ABT>, BIAS: array<f32>)
//!bindings write(O: array<f32>) uniform(p: Params)

const WX: u32 = BC / TC;
const WY: u32 = BM / TM;
const THREADS: u32 = WX * WY;
const TM4: u32 = TM / 4u;
const TC4: u32 = TC / 4u;
// vec4 slots per k row of the workgroup tiles As (A) and Bs (W, dequantised)
const BM4: u32 = BM / 4u;
const BC4: u32 = BC / 4u;
// the names matmul_fma (the FMAs over a staged tile) reads, in the GEMM's letters: B is W, N
// the output columns C, K the reduction R
const BK: u32 = BR;
const BN4: u32 = BC4;
const TN4: u32 = TC4;
// words per tile row of W: along k (forward) or along the output columns (TRANS)
const WPT: u32 = select(BR / CPW, BC / CPW, TRANS);

// The workgroup's tile: R slice s, first row m0 and column c0 of O (uniform across the
// workgroup; a thread's place in the WX x WY grid, lid % WX and lid / WX, is kept apart, as in
// matmul_tile.wgsl, for Tint's uniformity analysis).
struct Tile { s: u32, m0: u32, c0: u32 }

// Workgroups that own a tile; those past it return at once.
fn tile_count() -> u32 { return p.tiles_c * p.tiles_m * p.splits; }

fn tile_of(wg: u32) -> Tile {
    let tiles = p.tiles_c * p.tiles_m;
    let t = wg % tiles;
    return Tile(wg / tiles, (t / p.tiles_c) * BM, (t % p.tiles_c) * BC);
}

// Element e of A's step (BM x BR, A [M, R] contiguous along r, VA values per element): its
// (r, m) in the tile, and the element at that slot of the step at (m0, r0) (zeros past M or
// the slice end re).
fn a_slot(e: u32) -> vec2<u32> { return vec2<u32>((e % (BR / VA)) * VA, e / (BR / VA)); }

fn a_get(m0: u32, r0: u32, re: u32, rm: vec2<u32>) -> AV {
    let gm = m0 + rm.y;
    let gr = r0 + rm.x;
    var v = AV();
    if (gm < p.M && gr < re) { v = A[(gm * p.R + gr) / VA]; }
    return v;
}

// Code word wi of tile row rowi (W's row: the output column c0 + rowi in the forward form,
// the reduction index r0 + rowi with TRANS) of the step at r0, and its group's (a, b);
// outside the weight (or the slice end re) the word is 0 with (a, b) = 0, which dequantises to
// 0 for every kind.
struct Word { w: u32, ab: vec2<f32> }

fn word_at(c0: u32, r0: u32, re: u32, rowi: u32, wi: u32) -> Word {
    var x = Word(0u, vec2<f32>(0.0));
    if (!TRANS) { // the word covers k in [r0 + wi * CPW, + CPW): within one group
        let n = c0 + rowi;
        if (n < p.C) {
            x.w = CODES[n * p.wpr + r0 / CPW + wi];
            x.ab = group_ab(n * p.ng + (r0 + wi * CPW) / G);
        }
    } else { // columns k in [c0, c0 + BC)
        let n = r0 + rowi;
        let kb = c0 + wi * CPW;
        if (n < re && kb < p.Kp) {
            x.w = CODES[n * p.wpr + kb / CPW];
            x.ab = group_ab(n * p.ng + kb / G);
        }
    }
    return x;
}

// Where O's element (m, c) lies: O is up to three column segments [0, seg1), [seg1, seg2),
// [seg2, C), each stored whole after the one before ([M, seg1] first, then [M, seg2 - seg1],
// ...), so that the products of weights concatenated by rows (qw_linear_concat) come out as
// contiguous parts. seg1 = seg2 = C: one segment, O row-major [M, C]. Used only with SEG.
fn o_index(m: u32, c: u32) -> u32 {
    var cs = 0u;
    var ce = p.seg1;
    if (c >= p.seg2) {
        cs = p.seg2;
        ce = p.C;
    } else if (c >= p.seg1) {
        cs = p.seg1;
        ce = p.seg2;
    }
    return p.M * cs + m * (ce - cs) + c - cs;
}

// The epilogue: the register tile of thread lid into O. Register row i is O's row
// m0 + ((i/4)*WY + ty)*4 + i%4, column (h, c) is c0 + (h*WX + tx)*4 + c, stored at o_index.
// The bias (QW_BIAS) is added by slice 0 only; with ACC (QW_ACC, unsplit) O's value is added; a
// split product writes slice s's raw partial into P[s] in O's layout. QW_BIAS and QW_ACC are
// prelude constants (qw_mm.c): with them read from the Params at run time the 128 x 128 tiles
// (64 accumulators a thread) ran at 1.3-2 TFLOP/s, 15x below their speed with constants, and
// the others lost up to 4% (H100, bench/NOTES.md 2026-12-06). With ACC, whose store reads O, the
// 128 x 128 tiles still collapse; the rules never take them.
fn store_tile(t: Tile, lid: u32, acc: ptr<function, array<array<vec4<f32>, TC4>, TM>>) {
    let tx = lid % WX;
    let ty = lid / WX;
    let o_base = t.s * p.M * p.C;
    let acc_out = QW_ACC && p.splits == 1u;
    for (var i = 0u; i < TM; i++) {
        let gm = t.m0 + ((i / 4u) * WY + ty) * 4u + i % 4u;
        if (gm >= p.M) { continue; }
        for (var h = 0u; h < TC4; h++) {
            let gc0 = t.c0 + (h * WX + tx) * 4u;
            for (var c = 0u; c < 4u; c++) {
                let gc = gc0 + c;
                if (gc >= p.C) { break; }
                var v = (*acc)[i][h][c];
                if (QW_BIAS && t.s == 0u) { v += BIAS[gc]; }
                // SEG (prelude): a segmented output; a constant, so the plain products keep
                // the plain index (the segment's selects in the store made the 128 x 64 tile
                // 14x slower on the H200)
                var oi = gm * p.C + gc;
                if (SEG) { oi = o_index(gm, gc); }
                if (acc_out) { v += O[oi]; }
                O[o_base + oi] = v;
            }
        }
    }
}
