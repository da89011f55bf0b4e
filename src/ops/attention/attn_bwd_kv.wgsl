// attn_bwd_kv: the key / value side of sdpa backward, from attn_bwd_q's P and dS:
//   dv[b, g, j, :] = sum over the query heads h of kv head g, then rows i: P[b, h, i, j] * dout[b, h, i, :]
//   dk[b, g, j, :] = scale * (the same sum of dS[b, h, i, j] * q[b, h, i, :])
// in that fixed order (heads, then rows), so the GQA sum is deterministic. Causal: rows that
// cannot see key j (i < j - (Skv - Sq)) are skipped (their P and dS are 0).
// Workgroup: WG threads; one workgroup owns one key row (b, g, j); thread t owns columns
// t, t+WG, ... of D (neighbouring threads read neighbouring q / dout elements).
struct Params {
    n_rows: u32, hq: u32, hkv: u32, sq: u32,
    skv: u32, d: u32, causal: u32, rep: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> dout: array<f32>;
@group(0) @binding(2) var<storage, read> pm: array<f32>;
@group(0) @binding(3) var<storage, read> ds: array<f32>;
@group(0) @binding(4) var<storage, read_write> dk: array<f32>;
@group(0) @binding(5) var<storage, read_write> dv: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.n_rows) { return; }
    let j = r % p.skv;
    let bg = r / p.skv;
    let g = bg % p.hkv;
    let b = bg / p.hkv;
    var i0 = 0u;
    if (p.causal != 0u && j + p.sq > p.skv) { i0 = j + p.sq - p.skv; }
    for (var c = lid; c < p.d; c += WG) {
        var ak = 0.0;
        var av = 0.0;
        for (var hh = 0u; hh < p.rep; hh++) {
            let h = g * p.rep + hh;
            let qr0 = (b * p.hq + h) * p.sq;
            for (var i = i0; i < p.sq; i++) {
                let row = qr0 + i;
                let si = row * p.skv + j;
                av += pm[si] * dout[row * p.d + c];
                ak += ds[si] * q[row * p.d + c];
            }
        }
        dk[r * p.d + c] = p.scale * ak;
        dv[r * p.d + c] = av;
    }
}
