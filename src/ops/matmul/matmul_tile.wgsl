// matmul_tile: what the two tiled matmul kernels (matmul.wgsl, matmul_db.wgsl) share, included
// by both ("//!include matmul_tile"): the Params and the tile a workgroup owns (matmul_params),
// the bindings, the thread grid of a BM x BN tile with TM x TN registers per thread, where
// element e of an operand's k-tile lies (the index math of the loaders) and the store of the
// register tile (the epilogue). Each kernel keeps its own workgroup layout and main loop; the
// FMAs over a staged tile are matmul_fma's (BK from the prelude, BM4 BN4 TM4 TN4 WX WY from
// here). Not a kernel.
//!include matmul_params

//!bindings read(A: array<AV>, B: array<BV>, C: array<f32>) write(O: array<f32>) uniform(p: Params)

const WX: u32 = BN / TN;
const WY: u32 = BM / TM;
const THREADS: u32 = WX * WY;
const TM4: u32 = TM / 4u;
const TN4: u32 = TN / 4u;
// vec4 slots per k row of the workgroup tiles As and Bs
const BM4: u32 = BM / 4u;
const BN4: u32 = BN / 4u;

// Element e of A's k-tile (BM x BK, VA values per element): its (k, m) in the tile. TRANS_A:
// A stored [K, M], contiguous along m (the element spans m .. m + VA - 1); else A stored
// [M, K], contiguous along k (it spans k .. k + VA - 1).
fn a_slot(e: u32) -> vec2<u32> {
    if (TRANS_A) { return vec2<u32>(e / (BM / VA), (e % (BM / VA)) * VA); }
    return vec2<u32>((e % (BK / VA)) * VA, e / (BK / VA));
}

// The A element at slot km of the k-tile at (m0, k0); zeros past M or the slice end ke.
fn a_get(a_base: u32, m0: u32, k0: u32, ke: u32, km: vec2<u32>) -> AV {
    let gk = k0 + km.x;
    let gm = m0 + km.y;
    var v = AV();
    if (TRANS_A) {
        if (gk < ke && gm < p.M) { v = A[(a_base + gk * p.M + gm) / VA]; }
    } else {
        if (gm < p.M && gk < ke) { v = A[(a_base + gm * p.K + gk) / VA]; }
    }
    return v;
}

// Element e of B's k-tile (BK x BN, VB values per element): its (k, n). TRANS_B: B stored
// [N, K], contiguous along k; else B stored [K, N], contiguous along n.
fn b_slot(e: u32) -> vec2<u32> {
    if (TRANS_B) { return vec2<u32>((e % (BK / VB)) * VB, e / (BK / VB)); }
    return vec2<u32>(e / (BN / VB), (e % (BN / VB)) * VB);
}

// The B element at slot kn of the k-tile at (n0, k0); zeros past N or the slice end ke.
fn b_get(b_base: u32, n0: u32, k0: u32, ke: u32, kn: vec2<u32>) -> BV {
    let gk = k0 + kn.x;
    let gn = n0 + kn.y;
    var v = BV();
    if (TRANS_B) {
        if (gn < p.N && gk < ke) { v = B[(b_base + gn * p.K + gk) / VB]; }
    } else {
        if (gk < ke && gn < p.N) { v = B[(b_base + gk * p.N + gn) / VB]; }
    }
    return v;
}

// The epilogue: the register tile of thread lid into O. Register row i is O's row
// m0 + ((i/4)*WY + ty)*4 + i%4, column (h, c) is n0 + (h*WX + tx)*4 + c. O = alpha * acc +
// beta * C (C read from O itself with C_IS_OUT: each element is read and written by this
// thread only), or with SPLITK the raw partial of slice s into P[s, b, m, n].
fn store_tile(t: Tile, lid: u32, acc: ptr<function, array<array<vec4<f32>, TN4>, TM>>) {
    let tx = lid % WX;
    let ty = lid / WX;
    let o_base = (t.s * p.batch + t.b) * p.M * p.N;
    for (var i = 0u; i < TM; i++) {
        let gm = t.m0 + ((i / 4u) * WY + ty) * 4u + i % 4u;
        if (gm >= p.M) { continue; }
        for (var h = 0u; h < TN4; h++) {
            let gn0 = t.n0 + (h * WX + tx) * 4u;
            for (var c = 0u; c < 4u; c++) {
                let gn = gn0 + c;
                if (gn >= p.N) { break; }
                if (SPLITK) {
                    O[o_base + gm * p.N + gn] = (*acc)[i][h][c];
                    continue;
                }
                var v = p.alpha * (*acc)[i][h][c];
                if (C_IS_OUT) {
                    v += p.beta * O[o_base + gm * p.N + gn];
                } else if (HAS_C) {
                    v += p.beta * C[t.b * p.c_bs + gm * p.c_sm + gn * p.c_sn];
                }
                O[o_base + gm * p.N + gn] = v;
            }
        }
    }
}
