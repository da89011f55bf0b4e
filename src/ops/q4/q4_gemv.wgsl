// q4_gemv: out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for the few rows m < MR (decode,
// M <= 4) in one pass over the weight.
// Bandwidth-bound: each code byte is read once, as vec4<u32> loads (32 codes of 4 bits, or
// 16 codes of 8 bits, per load) plus one (a, b) per group; x is small and stays in cache.
// Workgroup: 256 threads = ROWS output rows x TPR threads (TPR = 64, 32 or 16, chosen from K
// so that short rows do not leave threads idle). A thread owns the 32-code blocks
// t, t + TPR, ... of its row: per block and per x row it accumulates dot(x, c) and sum(x)
// and adds a * dot + b * sum (w = c * a + b, one group per block). The TPR partial sums of a
// row are then reduced with a tree in workgroup memory (one tree per x row).
// The prelude gives KIND CPW G BPG ABT group_ab code_f deq (see q4.c), HAS_BIAS, XT (vec4<f32>
// when K % 4 == 0, else f32), x4(xb, k) (x[k..k+3] from offset xb, zero past K), ROWS, TPR, MR.
struct Params { M: u32, N: u32, K: u32, vpr: u32, ng: u32, nblk: u32, row_groups: u32 }

@group(0) @binding(0) var<storage, read> X: array<XT>;
@group(0) @binding(1) var<storage, read> C: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> AB: array<ABT>;
@group(0) @binding(3) var<storage, read> BIAS: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

const VPB: u32 = 32u / (CPW * 4u); // vec4<u32> loads per 32-code block: 1 (4-bit) or 2 (8-bit)

var<workgroup> red: array<f32, 256 * MR>;

// (dot(x, codes), sum(x)) over the CPW codes of one word starting at k
fn word_dot(word: u32, xb: u32, k: u32) -> vec2<f32> {
    if (CPW == 8u) {
        let x0 = x4(xb, k);
        let x1 = x4(xb, k + 4u);
        let c0 = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u));
        let c1 = vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u));
        return vec2<f32>(dot(x0, c0) + dot(x1, c1), dot(x0 + x1, vec4<f32>(1.0)));
    } else {
        let x0 = x4(xb, k);
        let c0 = vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(word) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
        return vec2<f32>(dot(x0, c0), 0.0);
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.row_groups) { return; } // uniform across the workgroup
    let r = lid / TPR;
    let t = lid % TPR;
    let n = wg * ROWS + r;
    var acc: array<f32, MR>;
    if (n < p.N) {
        let cb = n * p.vpr;
        let gb = n * p.ng;
        for (var b = t; b < p.nblk; b += TPR) {
            let ab = group_ab(gb + b / BPG);
            for (var v = 0u; v < VPB; v++) {
                let cw = C[cb + b * VPB + v];
                let k0 = b * 32u + v * 4u * CPW;
                for (var mm = 0u; mm < MR; mm++) {
                    let xb = mm * p.K;
                    let s = word_dot(cw.x, xb, k0) + word_dot(cw.y, xb, k0 + CPW) +
                            word_dot(cw.z, xb, k0 + 2u * CPW) + word_dot(cw.w, xb, k0 + 3u * CPW);
                    acc[mm] += ab.x * s.x + ab.y * s.y;
                }
            }
        }
    }
    for (var mm = 0u; mm < MR; mm++) { red[mm * 256u + lid] = acc[mm]; }
    workgroupBarrier();
    for (var h = TPR / 2u; h > 0u; h = h / 2u) {
        if (t < h) {
            for (var mm = 0u; mm < MR; mm++) { red[mm * 256u + lid] += red[mm * 256u + lid + h]; }
        }
        workgroupBarrier();
    }
    if (t == 0u && n < p.N) {
        for (var mm = 0u; mm < MR; mm++) {
            var o = red[mm * 256u + lid];
            if (HAS_BIAS) { o += BIAS[n]; }
            O[mm * p.N + n] = o;
        }
    }
}
