// matmul, short reduction (K <= 32, e.g. LoRA's u·Bᵀ with rank 16): O[b] = alpha * op(A[b]) *
// op(B[b]) + beta * C as a sum of a few outer products; bound by writing O.
//
// Tile: each workgroup computes a BM x 128 block of O (BM = 8 * TM), stepping K by KC = 16
// through workgroup memory (As k-major as f32, Bs k-major as vec4; each operand element is
// read from memory once per workgroup, coalesced). 256 threads = 8 x 32: thread (tx, ty) owns
// rows m0 + ty + 8 i (i < TM) and the four columns n0 + 4 tx .. + 3, so a row of the block is
// written by 32 neighbouring threads as one contiguous 512-byte run (vec4 stores when
// N % 4 = 0: VO = 4; A and B are read as scalars, they are small next to O). The prelude
// supplies TM VO TRANS_A TRANS_B HAS_C C_IS_OUT SPLITK, the alias OV with its component
// reader o_at, o_put4 (a vec4 store at a multiple of 4 when VO = 4) and matmul_flags_init(),
// called first: on CPU adapters the five flags are private variables it sets from p.flags
// (as in matmul.wgsl; none of them guards a barrier), on GPUs constants and it is empty.
// SPLITK as in matmul.wgsl: slice s covers K range [s * k_chunk, ...) and writes raw sums to
// P[s, b, m, n].
//!include matmul_params

const THREADS: u32 = 256u;

//!bindings read(A: array<f32>, B: array<f32>, C: array<f32>) write(O: array<OV>) uniform(p: Params)

const BM: u32 = 8u * TM;
const BN: u32 = 128u;
const KC: u32 = 16u;

var<workgroup> As: array<f32, KC * BM>;
var<workgroup> Bs: array<vec4<f32>, KC * BN / 4u>;

fn load_tiles(a_base: u32, b_base: u32, m0: u32, n0: u32, k0: u32, ke: u32, lid: u32) {
    for (var e = lid; e < BM * KC; e += THREADS) {
        var kk: u32;
        var r: u32;
        var v = 0.0;
        if (TRANS_A) { kk = e / BM; r = e % BM; } else { r = e / KC; kk = e % KC; }
        let gm = m0 + r;
        let gk = k0 + kk;
        if (gm < p.M && gk < ke) {
            var at = a_base + gm * p.K + gk;
            if (TRANS_A) { at = a_base + gk * p.M + gm; }
            v = A[at];
        }
        As[kk * BM + r] = v;
    }
    for (var e = lid; e < BN * KC; e += THREADS) {
        var kk: u32;
        var c: u32;
        var v = 0.0;
        if (TRANS_B) { c = e / KC; kk = e % KC; } else { kk = e / BN; c = e % BN; }
        let gn = n0 + c;
        let gk = k0 + kk;
        if (gn < p.N && gk < ke) {
            var at = b_base + gk * p.N + gn;
            if (TRANS_B) { at = b_base + gn * p.K + gk; }
            v = B[at];
        }
        Bs[(kk * BN + c) / 4u][c % 4u] = v;
    }
}

fn finish(at: u32, b: u32, gm: u32, gn: u32, sum: f32) -> f32 {
    if (SPLITK) { return sum; }
    var v = p.alpha * sum;
    if (C_IS_OUT) {
        v += p.beta * o_get(at);
    } else if (HAS_C) {
        v += p.beta * C[b * p.c_bs + gm * p.c_sm + gn * p.c_sn];
    }
    return v;
}

fn o_get(at: u32) -> f32 {
    if (VO == 4u) { return o_at(O[at / 4u], at % 4u); }
    return o_at(O[at], 0u);
}

//!include tile_main
fn run_tile(t: Tile, lid: u32) {
    matmul_flags_init();
    let s = t.s;
    let b = t.b;
    let m0 = t.m0;
    let n0 = t.n0;
    let tx = lid % 32u;
    let ty = lid / 32u;
    let kb = min(p.K, s * p.k_chunk);
    let ke = min(p.K, kb + p.k_chunk);

    var acc: array<vec4<f32>, TM>;
    for (var k0 = kb; k0 < ke; k0 += KC) {
        load_tiles(b * p.a_bs, b * p.b_bs, m0, n0, k0, ke, lid);
        workgroupBarrier();
        for (var kk = 0u; kk < KC; kk++) {
            let bv = Bs[kk * (BN / 4u) + tx];
            for (var i = 0u; i < TM; i++) { acc[i] = fma(vec4<f32>(As[kk * BM + ty + 8u * i]), bv, acc[i]); }
        }
        workgroupBarrier();
    }

    let o_base = (s * p.batch + b) * p.M * p.N;
    let gn0 = n0 + tx * 4u;
    if (gn0 >= p.N) { return; }
    for (var i = 0u; i < TM; i++) {
        let gm = m0 + ty + 8u * i;
        if (gm >= p.M) { break; }
        let at = o_base + gm * p.N + gn0;
        if (VO == 4u) { // N % 4 = 0: the four columns are all inside
            var v: vec4<f32>;
            for (var c = 0u; c < 4u; c++) { v[c] = finish(at + c, b, gm, gn0 + c, acc[i][c]); }
            o_put4(at, v);
        } else {
            for (var c = 0u; c < 4u; c++) {
                if (gn0 + c >= p.N) { break; }
                O[at + c] = OV(finish(at + c, b, gm, gn0 + c, acc[i][c]));
            }
        }
    }
}
