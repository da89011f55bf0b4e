// matmul, skinny products (one side of the output at most 32 wide, e.g. LoRA's rank 16):
// O[b] = alpha * op(A[b]) * op(B[b]) + beta * C, computed as a "tall" product
// O'[p, q] = sum_k X[p, k] * Y[k, q] with P the long side of the output and Q <= QP the short
// one. Without SWAP, X = op(A) (P = M) and Y = op(B) (Q = N); with SWAP the roles turn
// (X = op(B)ᵀ read from the second binding, Y = op(A)ᵀ from the first, P = N, Q = M) and the output is
// written transposed back into O[m, n] = O'[n, m]. The C code binds X first and Y second.
//
// Workgroup: 256 threads = S slots x KT k-threads (S = 256 / KT). Workgroup (b, slice s,
// p-block, q-block) owns ROWS = S * R rows of P and QP columns of Q; slot i owns rows
// p-block * ROWS + i * R .. + R - 1 and all QP columns; k-thread j of a slot reduces
// k = kb + 4 j + 4 KT t (t = 0, 1, ...) over the slice's K range [kb, ke), four k at a time:
// R x 4 values of X (one vec4 per row when X is stored [P, K]; one vec4 over four rows per k
// when stored [K, P]) meet 4 x QP values of Y (vec4 loads; Y is small and stays in the
// caches), loaded one q (Y stored [Q, K]: a dot over the four k) or one k (Y stored [K, Q]: a
// row of QP, vec4 FMAs) at a time to keep registers for the R * QP accumulators; U such steps
// (k, k + 4 KT, ...) a pass, their X loads issued together. Consecutive threads differ in the
// slot (at one k): where X is stored [K, P] the slots read contiguous rows of one k; stored
// [P, K], a lane reads 16 bytes of its own rows and the k-threads of the same slots (other
// warps of the workgroup, the same L1) the rest of each line, and the lanes of a warp read Y
// at one address per k-thread among them. Consecutive threads along k instead (a row's
// k-threads reading one run) took 3x as long at [65536, 576] x [576, 16] with Y read a k at a time (347 against 118
// us on an H100) and as long with Y read a q at a time (bench/NOTES.md, thirteenth session).
// The KT partial sums of each output are then added in a fixed order (k-thread 0, 1, ...)
// through workgroup memory, JR outputs per slot per pass. With SPLITK, slice s covers K range
// [s * k_chunk, min(K, (s + 1) * k_chunk)) and its raw sums go to P[s, b, m, n] (bound as O),
// summed in a fixed order by matmul_splitk: deterministic, no atomics.
// The prelude supplies R KT QP JR U VX VY TX TY SWAP HAS_C C_IS_OUT SPLITK, the aliases
// XV / YV, their component readers x_at / y_at, y_vec (a YV as a vec4) and matmul_flags_init(),
// called first: on CPU adapters HAS_C C_IS_OUT SPLITK are private variables it sets from
// p.flags (bits 2-4, as matmul_params.wgsl's; only the epilogue reads them, under no barrier),
// on GPUs constants and it is empty. TX TY SWAP U shape the k loop and stay constants.
// TX: X stored [K, P]; TY: Y stored [Q, K].
// VX = 4: X read as vec4 (along k without TX, along p with TX, then R = 4 and P % 4 = 0);
// VY = 4: Y read as vec4 (along k with TY, along q without).
struct Params {
    P: u32, Q: u32, K: u32, batch: u32,
    x_bs: u32, y_bs: u32, c_bs: u32, c_sm: u32,
    c_sn: u32, tiles_p: u32, tiles_q: u32, alpha: f32,
    beta: f32, k_chunk: u32, splits: u32, N: u32,
    flags: u32,
}

//!bindings read(X: array<XV>, Y: array<YV>, C: array<f32>) write(O: array<f32>) uniform(p: Params)

const S: u32 = 256u / KT;
const ROWS: u32 = S * R;
const Q4: u32 = QP / 4u;

var<workgroup> red: array<f32, JR * 256u>;

// X[p0 + r, k + c] for r < R, c < 4 (zero outside [0, P) x [kb, ke))
fn load_x(xb: u32, p0: u32, k: u32, ke: u32) -> array<vec4<f32>, R> {
    var a: array<vec4<f32>, R>;
    if (TX) { // stored [K, P]: contiguous along p
        for (var c = 0u; c < 4u; c++) {
            if (k + c >= ke) { break; }
            let row = xb + (k + c) * p.P + p0;
            if (VX == 4u) {
                if (p0 < p.P) {
                    let v = X[row / 4u];
                    for (var r = 0u; r < R; r++) { a[r][c] = x_at(v, r); }
                }
            } else {
                for (var r = 0u; r < R; r++) {
                    if (p0 + r < p.P) { a[r][c] = x_at(X[row + r], 0u); }
                }
            }
        }
    } else { // stored [P, K]: contiguous along k
        for (var r = 0u; r < R; r++) {
            if (p0 + r >= p.P) { break; }
            let at = xb + (p0 + r) * p.K + k;
            if (VX == 4u) {
                let v = X[at / 4u]; // K % 4 = 0: k .. k + 3 all inside [kb, ke)
                for (var c = 0u; c < 4u; c++) { a[r][c] = x_at(v, c); }
            } else {
                for (var c = 0u; c < 4u; c++) {
                    if (k + c < ke) { a[r][c] = x_at(X[at + c], 0u); }
                }
            }
        }
    }
    return a;
}

// Y stored [Q, K] (TY): Y[q, k .. k + 3] (zero outside [kb, ke) x [0, Q))
fn load_y_q(yb: u32, q: u32, k: u32, ke: u32) -> vec4<f32> {
    var y = vec4<f32>();
    if (q >= p.Q) { return y; }
    let at = yb + q * p.K + k;
    if (VY == 4u) { return y_vec(Y[at / 4u]); } // K % 4 = 0: all four inside
    for (var c = 0u; c < 4u; c++) {
        if (k + c < ke) { y[c] = y_at(Y[at + c], 0u); }
    }
    return y;
}

// Y stored [K, Q] (not TY): Y[k, q0 .. q0 + QP - 1] (zero outside [0, Q); k < ke checked by
// the caller)
fn load_y_k(yb: u32, q0: u32, k: u32) -> array<vec4<f32>, Q4> {
    var y: array<vec4<f32>, Q4>;
    let row = yb + k * p.Q + q0;
    for (var j = 0u; j < Q4; j++) {
        if (q0 + j * 4u >= p.Q) { break; }
        if (VY == 4u) {
            y[j] = y_vec(Y[row / 4u + j]);
        } else {
            for (var e = 0u; e < 4u; e++) {
                if (q0 + j * 4u + e < p.Q) { y[j][e] = y_at(Y[row + j * 4u + e], 0u); }
            }
        }
    }
    return y;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    matmul_flags_init();
    let wg = wid.x + wid.y * nwg.x;
    let tiles = p.tiles_p * p.tiles_q;
    let per_slice = tiles * p.batch;
    if (wg >= per_slice * p.splits) { return; }
    let s = wg / per_slice;
    let bt = wg % per_slice;
    let b = bt / tiles;
    let t = bt % tiles;
    let pblk = t / p.tiles_q;
    let q0 = (t % p.tiles_q) * QP;
    let slot = lid % S;
    let kt = lid / S;
    let p0 = pblk * ROWS + slot * R;
    let xb = b * p.x_bs;
    let yb = b * p.y_bs;
    let kb = min(p.K, s * p.k_chunk);
    let ke = min(p.K, kb + p.k_chunk);

    var acc: array<array<vec4<f32>, Q4>, R>;
    // U steps a pass: their X loads first (zero past the slice), then their products
    for (var k0 = kb + kt * 4u; k0 < ke; k0 += KT * 4u * U) {
        var au: array<array<vec4<f32>, R>, U>;
        for (var u = 0u; u < U; u++) {
            let k = k0 + u * KT * 4u;
            if (k < ke) { au[u] = load_x(xb, p0, k, ke); }
        }
        for (var u = 0u; u < U; u++) {
            let k = k0 + u * KT * 4u;
            if (k >= ke) { break; }
            let a = au[u];
            if (TY) { // one q at a time: four k of Y in one vec4, dotted with each row's four k
                for (var j = 0u; j < QP; j++) {
                    let y = load_y_q(yb, q0 + j, k, ke);
                    for (var r = 0u; r < R; r++) { acc[r][j / 4u][j % 4u] += dot(a[r], y); }
                }
            } else { // one k at a time: a row of Y (QP values) times each row's X at that k
                for (var c = 0u; c < 4u; c++) {
                    if (k + c >= ke) { break; }
                    let y = load_y_k(yb, q0, k + c);
                    for (var r = 0u; r < R; r++) {
                        let av = vec4<f32>(a[r][c]);
                        for (var j = 0u; j < Q4; j++) { acc[r][j] = fma(av, y[j], acc[r][j]); }
                    }
                }
            }
        }
    }

    // the k-threads' partial sums, added in k-thread order; output j = r * QP + q
    let o_base = (s * p.batch + b) * p.P * p.Q;
    for (var j0 = 0u; j0 < R * QP; j0 += JR) {
        for (var jj = 0u; jj < JR; jj++) {
            let j = j0 + jj;
            red[(kt * JR + jj) * S + slot] = acc[j / QP][(j % QP) / 4u][j % 4u];
        }
        workgroupBarrier();
        if (lid < JR * S) {
            var sum = 0.0;
            for (var i = 0u; i < KT; i++) { sum += red[i * JR * S + lid]; }
            let jj = lid / S;
            let sl = lid % S;
            let j = j0 + jj;
            let gp = pblk * ROWS + sl * R + j / QP;
            let gq = q0 + j % QP;
            if (gp < p.P && gq < p.Q) {
                var m = gp;
                var n = gq;
                if (SWAP) { m = gq; n = gp; }
                let at = o_base + m * p.N + n;
                if (SPLITK) {
                    O[at] = sum;
                } else {
                    var v = p.alpha * sum;
                    if (C_IS_OUT) {
                        v += p.beta * O[at];
                    } else if (HAS_C) {
                        v += p.beta * C[b * p.c_bs + m * p.c_sm + n * p.c_sn];
                    }
                    O[at] = v;
                }
            }
        }
        workgroupBarrier();
    }
}
