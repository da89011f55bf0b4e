// qw_gemv: out_w[m, n] = sum_k x[m, k] * W_w[n, k] (+ bias_w[n]) for the few rows m < MR (decode,
// M <= 4, 8 on a CPU adapter) and NW weights W_0..W_{NW-1} (1 to 3, one kind and group size, one K) that read the same
// x, in one pass over each weight and one dispatch for all of them.
// Bandwidth-bound: every code byte is read once, as vec4<u32> loads (32 codes of 4 bits, 16
// codes of 8 bits, or 4 f32 values (the float kind), per load) plus one (a, b) per group and
// block.
// Workgroup: WG threads = (WG / TPR) row groups x TPR threads along K. A row group owns RPT
// consecutive output rows of one weight; a thread owns the 32-code blocks t, t + TPR, ... of
// those rows. The workgroups are laid out weight after weight: weight w owns the workgroups
// [rg_end[w - 1], rg_end[w]) (a workgroup never mixes weights, so every branch on w is uniform).
// Per block it loads the 32 x values once (8 vec4, kept in registers) and uses them for all
// RPT rows, so x traffic per code byte falls by RPT (with one row per thread, loading x was
// eight times the code traffic and the kernel was bound by L1, not by memory). Per block and
// row it accumulates a * dot(x, c) + b * sum(x) (w = c * a + b, one group per block; with
// G = 16, 8-bit codes only, one group per half block, that is per vec4<u32> load).
// Final reduction of the TPR partial sums of each (row, m):
//   SUBGROUP = false: a tree in workgroup memory (log2(TPR) barriers);
//   SUBGROUP = true: subgroupAdd (whole subgroups inside one row's TPR lanes) or a
//   subgroupShuffleXor butterfly (TPR lanes inside one subgroup), then, unless the subgroup is
//   known to hold all TPR lanes (SG >= TPR), the TPR / subgroup-size partials of a row through
//   workgroup memory with one barrier. This assumes subgroups are runs of consecutive
//   local_invocation_index (so a run of TPR lanes starting at a multiple of TPR is whole
//   subgroups or lies inside one), as on every Vulkan driver we know of for 1-D workgroups.
// Fused forms (qw_gemv_fused, for inference graphs), chosen by the prelude:
//   prologue (XSTAGE): before the loop the workgroup copies its MR rows of x into workgroup
//   memory (xsh, zero past K) and, with NORM, RMSNorms each: x * rsqrt(mean(x^2) + eps) * nw
//   (a tree over the WG partial sums of squares in nred, fixed order, as norm_rms); every
//   workgroup does this for itself, which costs one pass over x (K <= a few thousand) and saves
//   the norm's own dispatch. With MERGE (MR = 1) X is instead attention's key-chunk partials
//   [MH, MC, MD + 2] of a decode step (attn_decode.wgsl's layout) and the staged row is their
//   merge (merge_table, x_merged: each chunk weighted by 2^(m - M) / sum l 2^(m - M), as
//   attn_combine.wgsl), which saves the merge's dispatch. Without XSTAGE x is read from X as it is.
//   epilogue (EPI): 0 stores the sums (+ bias); 1 adds the residual R at the same index;
//   2 and 3 are a gated FFN's activation over a pair of weights (PAIR: W_0 the gate, W_1 the
//   up projection, one N): the RPT accumulators of a thread alternate gate and up rows, so a
//   thread holds both halves of its RP = RPT / 2 outputs and stores act(gate) * up, act = silu
//   (2) or tanh-GELU (3); there is one output, O0.
//   The norm handed over (the next projection's RMSNorm without a dispatch or a staged x, where
//   staging costs more than the norm's dispatch: qw_gemv_fused.h):
//   SSQ_OUT (EPI 1, one weight): besides the sum o = r + x·Wᵀ, the epilogue stores o * NN[n] (the
//   next norm's weight) and, per workgroup and row mm, the sum of o^2 over the workgroup's rows
//   (ssq_part at mm * row_groups + workgroup; its row groups' sums through ssw, fixed order).
//   SSQ_IN: x is such an o * nw, and every output is scaled by rsqrt(Σ SQ[mm, :] / K + eps)
//   before its bias (the norm's scale is one number per row, so it commutes with the products):
//   with subgroups each subgroup sums the SSQ_N partials for itself at the start (no barrier),
//   without them each storing thread sums them before it stores.
// The prelude gives KIND CPW G BPG GPB ABT code_f deq (qweight.c), and (qw_gemv.c) XT (vec4<f32> when K % 4 == 0,
// else f32), x_load(mm, i) (x[mm, 4i..4i+3] from X, zero past K), x4(mm, k) (x[mm, k..k+3]: from
// xsh when XSTAGE, else x_load), nw4(i) (the norm weight's 4i..4i+3, zero past K), resid(i),
// I8X with quant_block, idot and qsum (qw_gemv_i8.wgsl; stubs without I8X), XQIN (I8X reads x
// quantised once, qw_quant_x's rows, through xq4(i) and xqw(i): binding XQ's vec4 i and word i,
// or with XQSTAGE xqsh's, which the workgroup fills from its staged x after the prologue, with
// xq_src and xq_put for qw_xq_block; XQS_LEN its length),
// XSTAGE, NORM, MERGE, MH, MC, MD, xf(i) (X's element i), KP4 (vec4s per staged row; 0 without
// XSTAGE), XSH_LEN, NRED_LEN, EPI, PAIR, RP, SSQ_IN with ssq_in(i) (SQ's element i), SSQ_OUT
// with ssq_store(i, n, o) (O1[i] = o * NN[n]) and ssq_part(i, v) (O2[i] = v), SSW_LEN, WG, TPR,
// RPT, MR, BPI (blocks
// whose loads are issued together), NW, SUBGROUP, SG (a known lower bound of the subgroup
// size, 0 if unknown), DIRECT (SUBGROUP and SG >= TPR), RED_LEN (the workgroup array's
// length), SgIn and SgLane (the entry point's subgroup builtins: the size, the lane) with
// sg_size(SgIn), sg_lane(SgLane) and sg_sum(v, seg,
// sgs) (the sum of v over the run of seg lanes, seg a power of two, that holds this lane:
// subgroupAdd when seg is the subgroup size sgs, else a subgroupShuffleXor butterfly), the
// bindings (X, NRM with NORM, SQ with SSQ_IN, per weight C_w, AB_w and BIAS_w when it has one,
// R with EPI 1, NN with SSQ_OUT, then the outputs O_w (SSQ_OUT: O0, O1, O2), then the uniform p)
// and their readers c_at(w, i), ab_at(w, i) (the (a, b) pair), bias_at(w, n) (0 without a
// bias) and store(w, i, v).
struct Params {
    nrow: vec4<u32>,   // N of each weight
    rg_end: vec4<u32>, // end of each weight's workgroups (cumulative)
    M: u32, K: u32, vpr: u32, ng: u32, nblk: u32, row_groups: u32, eps: f32,
    ssq_n: u32, // SSQ_IN: the partial sums of squares per row of x (the producer's workgroups)
}

const VPB: u32 = 32u / (CPW * 4u); // vec4<u32> loads per 32-code block: 1 (4-bit), 2 (8-bit), 8 (f32)
const RG: u32 = WG / TPR;          // row groups per workgroup

var<workgroup> red: array<f32, RED_LEN>; // WG * RPT * MR (1 when the subgroup sums are final)
var<workgroup> xsh: array<vec4<f32>, XSH_LEN>; // MR * KP4 with XSTAGE, else 1 (unused)
var<workgroup> nred: array<f32, NRED_LEN>;    // WG with NORM, else 1 (unused)
var<workgroup> mwt: array<f32, MH * MC>;      // MERGE: each (head, chunk)'s weight
var<workgroup> mrange: array<u32, 2>;         // MERGE: the chunks that saw keys, [first, end)
var<workgroup> ssw: array<f32, SSW_LEN>;      // SSQ_OUT: each row group's sums of squares (RG * MR)
var<workgroup> xqsh: array<vec4<u32>, XQS_LEN>; // XQSTAGE: the staged rows quantised (qw_quant_x's rows)

// XQIN: the words of one row of x quantised once (qw_quant_x's rows): Kp / 4 + 2 Kp / QB
fn xq_row_words() -> u32 { return p.nblk * 8u + 2u * p.nblk * GPB; }

// SSQ_IN: the norm's scale of x's row mm from the sum of the producer's partial sums of squares
fn ssq_scale(s: f32) -> f32 { return inverseSqrt(s / f32(p.K) + p.eps); }

// SSQ_IN: the partials of row mm that lane l of n lanes adds, l, l + n, ..., SSQ_U loads issued
// together (a loop of one load an iteration waited out each load's latency in turn: 16 a lane
// for the 1B's o projection's 512 partials)
const SSQ_U: u32 = 8u;
fn ssq_lanes(mm: u32, l: u32, n: u32) -> f32 {
    var s = 0.0;
    for (var i = l; i < p.ssq_n; i += SSQ_U * n) {
        var v: array<f32, SSQ_U>;
        for (var u = 0u; u < SSQ_U; u++) {
            let j = i + u * n;
            v[u] = select(0.0, ssq_in(mm * p.ssq_n + min(j, p.ssq_n - 1u)), j < p.ssq_n);
        }
        for (var u = 0u; u < SSQ_U; u++) { s += v[u]; }
    }
    return s;
}

// SSQ_IN with subgroups: the subgroup's lanes share row mm's partials and the subgroup's sum is
// the row's, in every lane of every subgroup (uniform control flow only)
fn ssq_sum_sg(mm: u32, sgi: SgIn, sgl: SgLane) -> f32 {
    return sg_sum(ssq_lanes(mm, sg_lane(sgl), sg_size(sgi)), sg_size(sgi), sg_size(sgi));
}

// SSQ_IN without subgroups: the storing thread adds row mm's partials itself
fn ssq_sum(mm: u32) -> f32 { return ssq_lanes(mm, 0u, 1u); }

// MERGE: the weight of each chunk c of head h in the merged row, 2^(m_c - M) / sum_c' l_c'
// 2^(m_c' - M) with M the head's largest m (attn_combine.wgsl's merge; 0 for a chunk that saw
// no key, and for every chunk of a head whose chunks saw none), one thread per head; and the
// range of chunks with keys (the same for every head: one filled length and window), which
// x_merged reads. Then a barrier. Without MERGE nothing.
fn merge_table(lid: u32) {
    if (!MERGE) { return; }
    for (var h = lid; h < MH; h += WG) {
        var mx = -3.0e38;
        for (var c = 0u; c < MC; c++) { mx = max(mx, xf((h * MC + c) * (MD + 2u) + MD)); }
        var l = 0.0;
        for (var c = 0u; c < MC; c++) {
            let o = (h * MC + c) * (MD + 2u) + MD;
            let e = exp2(xf(o) - mx);
            mwt[h * MC + c] = e;
            l += e * xf(o + 1u);
        }
        for (var c = 0u; c < MC; c++) { mwt[h * MC + c] = select(0.0, mwt[h * MC + c] / l, l > 0.0); }
    }
    if (lid == 0u) {
        var c0 = MC;
        var c1 = 0u;
        for (var c = 0u; c < MC; c++) {
            if (xf(c * (MD + 2u) + MD + 1u) > 0.0) {
                c0 = min(c0, c);
                c1 = c + 1u;
            }
        }
        mrange[0] = c0;
        mrange[1] = c1;
    }
    workgroupBarrier();
}

// MERGE: x's vec4 i (elements 4i .. 4i + 3 of head 4i / MD) merged from the chunks' partials
fn x_merged(i: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    let e = i * 4u;
    if (e >= p.K) { return v; }
    let h = e / MD;
    for (var c = mrange[0]; c < mrange[1]; c++) {
        let b = (h * MC + c) * (MD + 2u) + e % MD;
        v += mwt[h * MC + c] * vec4<f32>(xf(b), xf(b + 1u), xf(b + 2u), xf(b + 3u));
    }
    return v;
}

//!include ew_act

// XQSTAGE: the block quantiser, xq_src reading xsh and xq_put writing xqsh (the prelude's)
//!include qw_xq_block

//!include qw_cvt

// 4-bit codes: x's element i of a word (i < 8) is pre-scaled by 16^-i (X4_LO, X4_HI, applied to
// the block's x in main), so code i times 16^i, the word masked, needs no shift. Both scalings are
// powers of two, so every product and sum is the one of the unscaled form. Masking instead of
// shifting and masking made the large GEMVs 12-18% faster on the H200 (bench/NOTES.md,
// 2026-12-04). The masked codes become floats by a conversion instruction each: the exact 2^23
// form of qw_cvt made this GEMV slower, 1-6% on the H100 at every large shape (2026-12-07; 8-25%
// in 949c609's run, 2026-12-03), and `wgml bench peak` finds the conversion no slower there than
// the integer operations around it.
const X4_LO = vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625);
const X4_HI = vec4<f32>(1.52587890625e-05, 9.5367431640625e-07, 5.9604644775390625e-08, 3.7252902984619140625e-09);

// dot(x, codes) over the 8 (4-bit) or 4 (8-bit) codes of one word; xa, xb hold its x values
// (4-bit: scaled by X4_LO, X4_HI)
fn word_dot(word: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
    if (CPW == 8u) {
        let c0 = vec4<f32>(vec4<u32>(word) & vec4<u32>(0xFu, 0xF0u, 0xF00u, 0xF000u));
        let c1 = vec4<f32>(vec4<u32>(word) & vec4<u32>(0xF0000u, 0xF00000u, 0xF000000u, 0xF0000000u));
        return dot(xa, c0) + dot(xb, c1);
    } else if (KIND == 3u) { // unsigned 8-bit codes (Q8_MIN)
        return dot(xa, vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u)));
    } else { // signed 8-bit codes (Q8)
        return dot(xa, vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(word) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u)));
    }
}

// dot(x, codes) over the 16 codes of one vec4<u32> of 8-bit codes, x from xs[h4 .. h4 + 3]
fn half_dot(cw: vec4<u32>, xs: array<vec4<f32>, 8>, h4: u32) -> f32 {
    return word_dot(cw.x, xs[h4], xs[h4]) + word_dot(cw.y, xs[h4 + 1u], xs[h4 + 1u]) +
           word_dot(cw.z, xs[h4 + 2u], xs[h4 + 2u]) + word_dot(cw.w, xs[h4 + 3u], xs[h4 + 3u]);
}

// dot(x, codes) over the 32 codes of one block (VPB vec4<u32> words in cw; the index VPB / 2
// is the second load of the 8-bit kinds, kept in range for VPB = 1)
fn block_dot(cw: array<vec4<u32>, VPB>, xs: array<vec4<f32>, 8>) -> f32 {
    if (CPW == 8u) {
        let c = cw[0];
        return word_dot(c.x, xs[0], xs[1]) + word_dot(c.y, xs[2], xs[3]) + word_dot(c.z, xs[4], xs[5]) +
               word_dot(c.w, xs[6], xs[7]);
    }
    if (CPW == 4u) { return half_dot(cw[0], xs, 0u) + half_dot(cw[VPB / 2u], xs, 4u); }
    var s = 0.0; // the float kind: the words are the values
    for (var v = 0u; v < VPB; v++) { s += dot(bitcast<vec4<f32>>(cw[v]), xs[v]); }
    return s;
}

// I8X: one row's block: a·d·Σ(q·c) + b·s with the block's words q, scales d0, d1 and sums s0, s1
// of x's two halves (G >= 32: d0 = d1 and s0 + s1 the block's sum); 8-bit codes in two loads
// and, with G = 16, one (a, b) per half block
fn i8_row(cw: array<vec4<u32>, VPB>, ab: array<vec2<f32>, GPB>, q: array<u32, 8>, d0: f32, d1: f32, s0: f32,
          s1: f32) -> f32 {
    let ab0 = ab[0];
    if (CPW == 8u) { return ab0.x * d0 * cvt_i2f(idot(cw[0], q, 0u)) + ab0.y * (s0 + s1); }
    let ab1 = ab[GPB - 1u];
    return ab0.x * d0 * cvt_i2f(idot(cw[0], q, 0u)) + ab0.y * s0 + ab1.x * d1 * cvt_i2f(idot(cw[VPB / 2u], q, 4u)) +
           ab1.y * s1;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, sgi: SgIn, sgl: SgLane) {
    let wg_all = wid.x + wid.y * nwg.x;
    if (wg_all >= p.row_groups) { return; } // uniform across the workgroup
    // which weight this workgroup works on (uniform)
    var w = 0u;
    var wg = wg_all;
    for (var i = 1u; i < NW; i++) {
        if (wg_all >= p.rg_end[i - 1u]) {
            w = i;
            wg = wg_all - p.rg_end[i - 1u];
        }
    }
    let N = p.nrow[w];
    let rg = lid / TPR;
    let t = lid % TPR;
    let n0 = (wg * RG + rg) * RP; // this row group's first output row
    if (XSTAGE) {
        merge_table(lid);
        for (var mm = 0u; mm < MR; mm++) {
            var ss = 0.0;
            for (var i = lid; i < KP4; i += WG) {
                let v = x_load(mm, i);
                xsh[mm * KP4 + i] = v;
                ss += dot(v, v);
            }
            if (NORM) {
                nred[lid] = ss;
                workgroupBarrier();
                for (var h = WG / 2u; h > 0u; h = h / 2u) {
                    if (lid < h) { nred[lid] += nred[lid + h]; }
                    workgroupBarrier();
                }
                let rs = inverseSqrt(nred[0] / f32(p.K) + p.eps);
                workgroupBarrier(); // nred[0] read by all before the next row reuses nred
                for (var i = lid; i < KP4; i += WG) { xsh[mm * KP4 + i] *= rs * nw4(i); }
            }
        }
        workgroupBarrier();
        if (XQSTAGE) { // the staged rows quantised once for the workgroup, block b by thread b % WG
            let qb = 32u / GPB;
            let nq = p.nblk * GPB;
            for (var mm = 0u; mm < MR; mm++) {
                for (var b = lid; b < nq; b += WG) {
                    let k0 = b * qb;
                    xq_block(0u, qb, CPW == 8u, mm * KP4 * 4u + k0, min(qb, max(p.K, k0) - k0),
                             mm * xq_row_words(), b, KP4 * 4u);
                }
            }
            workgroupBarrier();
        }
    }
    var scl: array<f32, MR>; // SSQ_IN: each row's norm scale (with subgroups, here)
    for (var mm = 0u; mm < MR; mm++) {
        scl[mm] = 1.0;
        if (SSQ_IN && SUBGROUP) { scl[mm] = ssq_scale(ssq_sum_sg(mm, sgi, sgl)); }
    }
    var acc: array<array<f32, MR>, RPT>;
    // BPI blocks (b0, b0 + TPR, ...) per iteration: all their codes and (a, b) are loaded before
    // any is used, so BPI x RPT loads are in flight per thread
    for (var b0 = t; b0 < p.nblk; b0 += TPR * BPI) {
        var cw: array<array<array<vec4<u32>, VPB>, RPT>, BPI>;
        var ab: array<array<array<vec2<f32>, GPB>, RPT>, BPI>;
        for (var u = 0u; u < BPI; u++) {
            let b = min(b0 + u * TPR, p.nblk - 1u); // past the end: a copy of the last, unused
            for (var r = 0u; r < RPT; r++) {
                // PAIR: accumulator r is row r / 2 of weight r % 2; rows past N compute a copy
                // of the last, never stored
                let wr = select(w, r % 2u, PAIR);
                let n = min(n0 + select(r, r / 2u, PAIR), N - 1u);
                for (var v = 0u; v < VPB; v++) { cw[u][r][v] = c_at(wr, n * p.vpr + b * VPB + v); }
                for (var h = 0u; h < GPB; h++) { ab[u][r][h] = ab_at(wr, n * p.ng + (b / BPG) * GPB + h); }
            }
        }
        for (var u = 0u; u < BPI; u++) {
            let b = b0 + u * TPR;
            if (b >= p.nblk) { break; }
            for (var mm = 0u; mm < MR; mm++) {
                if (XQIN) { // x quantised once (qw_quant_x's rows): the block's words, d and s
                    let rs = xq_row_words();
                    let o4 = (mm * rs + b * 8u) / 4u;
                    let qa = xq4(o4);
                    let qb = xq4(o4 + 1u);
                    let q = array<u32, 8>(qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w);
                    let di = mm * rs + p.nblk * 8u + b * GPB; // d of the block's first QB
                    let si = di + p.nblk * GPB;
                    let d0 = bitcast<f32>(xqw(di));
                    let d1 = bitcast<f32>(xqw(di + GPB - 1u));
                    let s0 = bitcast<f32>(xqw(si));
                    let s1 = select(0.0, bitcast<f32>(xqw(si + GPB - 1u)), GPB == 2u); // G >= 32: s0 is the block's
                    for (var r = 0u; r < RPT; r++) { acc[r][mm] += i8_row(cw[u][r], ab[u][r], q, d0, d1, s0, s1); }
                    continue;
                }
                var xs: array<vec4<f32>, 8>;
                var sx = vec4<f32>(0.0);
                var sx_lo = vec4<f32>(0.0); // the first half's sum (G = 16)
                for (var i = 0u; i < 8u; i++) {
                    xs[i] = x4(mm, b * 32u + i * 4u);
                    sx += xs[i];
                    if (i == 3u) { sx_lo = sx; }
                }
                let sum_x = dot(sx, vec4<f32>(1.0));
                if (I8X) { // d = max|x| / 127 per block (G = 16: per half block), as qw_quant_x
                    var m0 = vec4<f32>(0.0);
                    var m1 = vec4<f32>(0.0);
                    for (var i = 0u; i < 4u; i++) {
                        m0 = max(m0, abs(xs[i]));
                        m1 = max(m1, abs(xs[i + 4u]));
                    }
                    var a0 = max(max(m0.x, m0.y), max(m0.z, m0.w));
                    var a1 = max(max(m1.x, m1.y), max(m1.z, m1.w));
                    if (GPB == 1u) {
                        a0 = max(a0, a1);
                        a1 = a0;
                    }
                    let d0 = a0 / 127.0;
                    let d1 = a1 / 127.0;
                    let q = quant_block(xs, select(0.0, 127.0 / a0, a0 > 0.0), select(0.0, 127.0 / a1, a1 > 0.0));
                    // x's sum as the product's offset term takes it: d·Σq (qw_quant_x's s), per half
                    let s0 = d0 * cvt_i2f(qsum(q, 0u));
                    let s1 = d1 * cvt_i2f(qsum(q, 4u));
                    for (var r = 0u; r < RPT; r++) { acc[r][mm] += i8_row(cw[u][r], ab[u][r], q, d0, d1, s0, s1); }
                    continue;
                }
                if (CPW == 8u) {
                    for (var i = 0u; i < 8u; i += 2u) {
                        xs[i] *= X4_LO;
                        xs[i + 1u] *= X4_HI;
                    }
                }
                for (var r = 0u; r < RPT; r++) {
                    if (GPB == 1u) {
                        acc[r][mm] += ab[u][r][0].x * block_dot(cw[u][r], xs) + ab[u][r][0].y * sum_x;
                    } else { // G = 16: one (a, b) per half block
                        let lo = dot(sx_lo, vec4<f32>(1.0));
                        let ab0 = ab[u][r][0];
                        let ab1 = ab[u][r][GPB - 1u];
                        acc[r][mm] += ab0.x * half_dot(cw[u][r][0], xs, 0u) + ab0.y * lo +
                                      ab1.x * half_dot(cw[u][r][VPB / 2u], xs, 4u) + ab1.y * (sum_x - lo);
                    }
                }
            }
        }
    }
    // DIRECT: the subgroup sums are final in lane t = 0 (acc); else the sums end in red at lid
    if (SUBGROUP) {
        // the subgroup's lanes of each row summed (every lane gets the sum of its run of
        // min(TPR, subgroup size) lanes)
        let sgs = sg_size(sgi);
        let seg = min(TPR, sgs);
        for (var r = 0u; r < RPT; r++) {
            for (var mm = 0u; mm < MR; mm++) { acc[r][mm] = sg_sum(acc[r][mm], seg, sgs); }
        }
        if (!DIRECT) { // the row's TPR lanes may span TPR / seg subgroups: add their sums
            if (t % seg == 0u) {
                for (var r = 0u; r < RPT; r++) {
                    for (var mm = 0u; mm < MR; mm++) { red[(r * MR + mm) * WG + lid] = acc[r][mm]; }
                }
            }
            workgroupBarrier();
            if (t == 0u) {
                for (var j = seg; j < TPR; j += seg) {
                    for (var i = 0u; i < RPT * MR; i++) { red[i * WG + lid] += red[i * WG + lid + j]; }
                }
            }
        }
    } else {
        for (var r = 0u; r < RPT; r++) {
            for (var mm = 0u; mm < MR; mm++) { red[(r * MR + mm) * WG + lid] = acc[r][mm]; }
        }
        workgroupBarrier();
        for (var h = TPR / 2u; h > 0u; h = h / 2u) {
            if (t < h) {
                for (var i = 0u; i < RPT * MR; i++) { red[i * WG + lid] += red[i * WG + lid + h]; }
            }
            workgroupBarrier();
        }
    }
    var ss: array<f32, MR>; // SSQ_OUT: the sums of squares of this thread's stored rows
    if (t == 0u) {
        if (!DIRECT) {
            for (var r = 0u; r < RPT; r++) {
                for (var mm = 0u; mm < MR; mm++) { acc[r][mm] = red[(r * MR + mm) * WG + lid]; }
            }
        }
        if (SSQ_IN && !SUBGROUP) {
            for (var mm = 0u; mm < MR; mm++) { scl[mm] = ssq_scale(ssq_sum(mm)); }
        }
        for (var j = 0u; j < RP; j++) {
            let n = n0 + j;
            if (n >= N) { break; }
            for (var mm = 0u; mm < MR; mm++) {
                let i = mm * N + n;
                if (PAIR) {
                    let gt = acc[2u * j][mm] * scl[mm] + bias_at(0u, n);
                    let up = acc[2u * j + 1u][mm] * scl[mm] + bias_at(1u, n);
                    var a: f32;
                    if (EPI == 2u) { a = gt * ew_sigmoid(gt); } else { a = ew_gelu_tanh(gt); }
                    store(0u, i, a * up);
                } else {
                    var o = acc[j][mm] * scl[mm] + bias_at(w, n);
                    if (EPI == 1u) { o += resid(i); }
                    store(w, i, o);
                    if (SSQ_OUT) {
                        ssq_store(i, n, o);
                        ss[mm] += o * o;
                    }
                }
            }
        }
    }
    if (SSQ_OUT) { // the workgroup's sums of squares, its row groups' in order
        if (RG == 1u) {
            if (lid == 0u) {
                for (var mm = 0u; mm < MR; mm++) { ssq_part(mm * p.row_groups + wg_all, ss[mm]); }
            }
        } else {
            if (t == 0u) {
                for (var mm = 0u; mm < MR; mm++) { ssw[rg * MR + mm] = ss[mm]; }
            }
            workgroupBarrier();
            if (lid == 0u) {
                for (var mm = 0u; mm < MR; mm++) {
                    var s = 0.0;
                    for (var r = 0u; r < RG; r++) { s += ssw[r * MR + mm]; }
                    ssq_part(mm * p.row_groups + wg_all, s);
                }
            }
        }
    }
}
