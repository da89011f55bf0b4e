// attn_bwd_soft: the row-wise middle of sdpa backward. The rows are the query rows of a kv-head
// group, r = (g, hh, i) with q's row-major layout [B*Hkv, rep*Sq, D]; s = q·kᵀ and dp = dout·vᵀ
// ([rows, Skv], from matmul). With the end-aligned causal mask (key j visible when
// j <= Skv - Sq + i; with a sliding window also j > Skv - Sq + i - window) and delta = dout_r · out_r it writes, for each key j, in place
//   s[r, j]  <- P = softmax_j(scale * s[r, j])          (0 for masked keys)
//   dp[r, j] <- dS = scale * P * (dp[r, j] - delta)     (the gradient of the unscaled scores)
// Each element is read and rewritten by the same thread, so in place is safe.
// Workgroup: WG threads (prelude, power of two 32..256); one workgroup owns one row; thread t
// owns keys t, t+WG, ... and columns t, t+WG, ... of D for delta. Max, sum and delta use trees
// in workgroup memory (fixed order, deterministic).
struct Params { n_rows: u32, sq: u32, skv: u32, d: u32, causal: u32, scale: f32, window: u32 }

//!bindings read(o: array<f32>, dout: array<f32>)
//!bindings write(s: array<f32>, dp: array<f32>) uniform(p: Params)

// wg_reduce's tree over (max, sum) pairs: the scores' max with delta, then (m, sum of exp)
alias WR = vec2<f32>;
fn wr_op(a: WR, b: WR) -> WR { return vec2<f32>(max(a.x, b.x), a.y + b.y); }
//!include wg_reduce

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.n_rows) { return; }
    let i = r % p.sq;
    let sb = r * p.skv;
    let ob = r * p.d;
    var nk = p.skv;
    if (p.causal != 0u) { nk = p.skv - p.sq + i + 1u; }
    var k0 = 0u;                                   // visible keys: k0 .. nk - 1
    if (p.causal != 0u && p.window > 0u && nk > p.window) { k0 = nk - p.window; }
    var m = -3.0e38;
    for (var j = k0 + lid; j < nk; j += WG) { m = max(m, s[sb + j] * p.scale); }
    var dl = 0.0;
    for (var c = lid; c < p.d; c += WG) { dl += dout[ob + c] * o[ob + c]; }
    let md = wg_reduce(lid, vec2<f32>(m, dl));
    m = md.x;
    let delta = md.y;
    workgroupBarrier(); // the first result read by all before the second tree
    var l = 0.0;
    for (var j = k0 + lid; j < nk; j += WG) { l += exp(s[sb + j] * p.scale - m); }
    let inv = 1.0 / wg_reduce(lid, vec2<f32>(m, l)).y; // m is the same in every thread
    for (var j = lid; j < p.skv; j += WG) {
        var pv = 0.0;
        var g = 0.0;
        if (j >= k0 && j < nk) {
            pv = exp(s[sb + j] * p.scale - m) * inv;
            g = p.scale * pv * (dp[sb + j] - delta);
        }
        s[sb + j] = pv;
        dp[sb + j] = g;
    }
}
