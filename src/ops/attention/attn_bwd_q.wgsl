// attn_bwd_q: the query side of sdpa backward. For one query row r = (b, h, i) it recomputes
// the attention probabilities P[r, j] = softmax_j(scale * q_r . k_j) over the keys the row sees
// (causal: j <= Skv - Sq + i), and with delta = dout_r . out_r writes
//   P[r, j] and dS[r, j] = P[r, j] * (dout_r . v_j - delta)   (0 for masked keys)
//   dq[r, :] = scale * sum_j dS[r, j] * k_j
// P and dS ([B, Hq, Sq, Skv] scratch) are read again by attn_bwd_kv.
// Workgroup: WG threads; one workgroup owns one query row. Thread t owns keys t, t+WG, ... for
// the scores (each a D-long dot product) and, for dq, columns t, t+WG, ... of D. Row max and
// sum use trees in workgroup memory (fixed order); storageBarrier makes the dS row written by
// all threads visible before the dq pass.
struct Params {
    n_rows: u32, hq: u32, hkv: u32, sq: u32,
    skv: u32, d: u32, causal: u32, rep: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> o: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;
@group(0) @binding(5) var<storage, read_write> pm: array<f32>;
@group(0) @binding(6) var<storage, read_write> ds: array<f32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.n_rows) { return; }
    let i = r % p.sq;
    let bh = r / p.sq;
    let h = bh % p.hq;
    let b = bh / p.hq;
    let kvh = b * p.hkv + h / p.rep;
    let kb = kvh * p.skv * p.d;
    let qb = r * p.d;
    let sb = r * p.skv;
    var nk = p.skv;
    if (p.causal != 0u) { nk = p.skv - p.sq + i + 1u; }

    // scores and the row max
    var m = -3.0e38;
    for (var j = lid; j < nk; j += WG) {
        var s = 0.0;
        let kr = kb + j * p.d;
        for (var c = 0u; c < p.d; c++) { s += q[qb + c] * k[kr + c]; }
        s *= p.scale;
        pm[sb + j] = s;
        m = max(m, s);
    }
    red[lid] = m;
    workgroupBarrier();
    for (var t = WG / 2u; t > 0u; t = t >> 1u) {
        if (lid < t) { red[lid] = max(red[lid], red[lid + t]); }
        workgroupBarrier();
    }
    m = red[0];
    workgroupBarrier();
    var l = 0.0;
    for (var j = lid; j < nk; j += WG) {
        let e = exp(pm[sb + j] - m);
        pm[sb + j] = e;
        l += e;
    }
    red[lid] = l;
    workgroupBarrier();
    for (var t = WG / 2u; t > 0u; t = t >> 1u) {
        if (lid < t) { red[lid] = red[lid] + red[lid + t]; }
        workgroupBarrier();
    }
    let inv = 1.0 / red[0];
    var delta = 0.0;
    for (var c = 0u; c < p.d; c++) { delta += dout[qb + c] * o[qb + c]; }
    for (var j = lid; j < p.skv; j += WG) {
        var pv = 0.0;
        var g = 0.0;
        if (j < nk) {
            pv = pm[sb + j] * inv;
            var dp = 0.0;
            let vr = kb + j * p.d;
            for (var c = 0u; c < p.d; c++) { dp += dout[qb + c] * v[vr + c]; }
            g = pv * (dp - delta);
        }
        pm[sb + j] = pv;
        ds[sb + j] = g;
    }
    storageBarrier();
    workgroupBarrier();
    for (var c = lid; c < p.d; c += WG) {
        var acc = 0.0;
        for (var j = 0u; j < nk; j++) { acc += ds[sb + j] * k[kb + j * p.d + c]; }
        dq[qb + c] = p.scale * acc;
    }
}
