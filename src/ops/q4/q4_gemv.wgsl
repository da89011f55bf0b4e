// q4_gemv: out_w[m, n] = sum_k x[m, k] * W_w[n, k] (+ bias_w[n]) for the few rows m < MR (decode,
// M <= 4) and NW weights W_0..W_{NW-1} (1 to 3, one kind and group size, one K) that read the same
// x, in one pass over each weight and one dispatch for all of them.
// Bandwidth-bound: every code byte is read once, as vec4<u32> loads (32 codes of 4 bits, or
// 16 codes of 8 bits, per load) plus one (a, b) per group and block.
// Workgroup: WG threads = (WG / TPR) row groups x TPR threads along K. A row group owns RPT
// consecutive output rows of one weight; a thread owns the 32-code blocks t, t + TPR, ... of
// those rows. The workgroups are laid out weight after weight: weight w owns the workgroups
// [rg_end[w - 1], rg_end[w]) (a workgroup never mixes weights, so every branch on w is uniform).
// Per block it loads the 32 x values once (8 vec4, kept in registers) and uses them for all
// RPT rows, so x traffic per code byte falls by RPT (with one row per thread, loading x was
// eight times the code traffic and the kernel was bound by L1, not by memory). Per block and
// row it accumulates a * dot(x, c) + b * sum(x) (w = c * a + b, one group per block).
// Final reduction of the TPR partial sums of each (row, m):
//   SUBGROUP = false: a tree in workgroup memory (log2(TPR) barriers);
//   SUBGROUP = true: subgroupAdd (whole subgroups inside one row's TPR lanes) or a
//   subgroupShuffleXor butterfly (TPR lanes inside one subgroup), then, unless the subgroup is
//   known to hold all TPR lanes (SG >= TPR), the TPR / subgroup-size partials of a row through
//   workgroup memory with one barrier. This assumes subgroups are runs of consecutive
//   local_invocation_index (so a run of TPR lanes starting at a multiple of TPR is whole
//   subgroups or lies inside one), as on every Vulkan driver we know of for 1-D workgroups.
// The prelude gives KIND CPW G BPG ABT code_f deq (see q4.c), XT (vec4<f32> when K % 4 == 0,
// else f32), x4(xb, k) (x[k..k+3] from offset xb, zero past K), WG, TPR, RPT, MR, BPI (blocks
// whose loads are issued together), NW, SUBGROUP, SG (a known lower bound of the subgroup
// size, 0 if unknown), DIRECT (SUBGROUP and SG >= TPR), RED_LEN (the workgroup array's
// length), SgIn (the entry point's subgroup builtins) with sg_size(SgIn) and sg_sum(v, seg,
// sgs) (the sum of v over the run of seg lanes, seg a power of two, that holds this lane:
// subgroupAdd when seg is the subgroup size sgs, else a subgroupShuffleXor butterfly), the
// bindings (X, per weight C_w, AB_w and BIAS_w when it has one, then O_w, then the uniform p)
// and their readers c_at(w, i), ab_at(w, i) (the (a, b) pair), bias_at(w, n) (0 without a
// bias) and store(w, i, v).
struct Params {
    nrow: vec4<u32>,   // N of each weight
    rg_end: vec4<u32>, // end of each weight's workgroups (cumulative)
    M: u32, K: u32, vpr: u32, ng: u32, nblk: u32, row_groups: u32, pad0: u32, pad1: u32,
}

const VPB: u32 = 32u / (CPW * 4u); // vec4<u32> loads per 32-code block: 1 (4-bit) or 2 (8-bit)
const RG: u32 = WG / TPR;          // row groups per workgroup

var<workgroup> red: array<f32, RED_LEN>; // WG * RPT * MR (1 when the subgroup sums are final)

// dot(x, codes) over the 8 (4-bit) or 4 (8-bit) codes of one word; xa, xb hold its x values
fn word_dot(word: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
    if (CPW == 8u) {
        let c0 = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u));
        let c1 = vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u));
        return dot(xa, c0) + dot(xb, c1);
    } else {
        let c0 = vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(word) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
        return dot(xa, c0);
    }
}

// dot(x, codes) over the 32 codes of one block (VPB vec4<u32> words in cw)
fn block_dot(cw0: vec4<u32>, cw1: vec4<u32>, xs: array<vec4<f32>, 8>) -> f32 {
    if (CPW == 8u) {
        return word_dot(cw0.x, xs[0], xs[1]) + word_dot(cw0.y, xs[2], xs[3]) +
               word_dot(cw0.z, xs[4], xs[5]) + word_dot(cw0.w, xs[6], xs[7]);
    }
    return word_dot(cw0.x, xs[0], xs[0]) + word_dot(cw0.y, xs[1], xs[1]) + word_dot(cw0.z, xs[2], xs[2]) +
           word_dot(cw0.w, xs[3], xs[3]) + word_dot(cw1.x, xs[4], xs[4]) + word_dot(cw1.y, xs[5], xs[5]) +
           word_dot(cw1.z, xs[6], xs[6]) + word_dot(cw1.w, xs[7], xs[7]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, sgi: SgIn) {
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
    let n0 = (wg * RG + rg) * RPT;
    var acc: array<array<f32, MR>, RPT>;
    // BPI blocks (b0, b0 + TPR, ...) per iteration: all their codes and (a, b) are loaded before
    // any is used, so BPI x RPT loads are in flight per thread
    for (var b0 = t; b0 < p.nblk; b0 += TPR * BPI) {
        var cw: array<array<array<vec4<u32>, 2>, RPT>, BPI>;
        var ab: array<array<vec2<f32>, RPT>, BPI>;
        for (var u = 0u; u < BPI; u++) {
            let b = min(b0 + u * TPR, p.nblk - 1u); // past the end: a copy of the last, unused
            for (var r = 0u; r < RPT; r++) {
                let n = min(n0 + r, N - 1u); // rows past N compute a copy of the last, never stored
                cw[u][r][0] = c_at(w, n * p.vpr + b * VPB);
                if (VPB == 2u) { cw[u][r][1] = c_at(w, n * p.vpr + b * VPB + 1u); }
                ab[u][r] = ab_at(w, n * p.ng + b / BPG);
            }
        }
        for (var u = 0u; u < BPI; u++) {
            let b = b0 + u * TPR;
            if (b >= p.nblk) { break; }
            for (var mm = 0u; mm < MR; mm++) {
                var xs: array<vec4<f32>, 8>;
                var sx = vec4<f32>(0.0);
                for (var i = 0u; i < 8u; i++) {
                    xs[i] = x4(mm * p.K, b * 32u + i * 4u);
                    sx += xs[i];
                }
                let sum_x = dot(sx, vec4<f32>(1.0));
                for (var r = 0u; r < RPT; r++) {
                    acc[r][mm] += ab[u][r].x * block_dot(cw[u][r][0], cw[u][r][1], xs) + ab[u][r].y * sum_x;
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
    if (t == 0u) {
        for (var r = 0u; r < RPT; r++) {
            let n = n0 + r;
            if (n >= N) { break; }
            for (var mm = 0u; mm < MR; mm++) {
                var o = acc[r][mm];
                if (!DIRECT) { o = red[(r * MR + mm) * WG + lid]; }
                store(w, mm * N + n, o + bias_at(w, n));
            }
        }
    }
}
