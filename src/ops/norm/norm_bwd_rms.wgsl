// norm_bwd_rms: rms_norm backward over the last dim (rows of length d). With r = rsqrt(mean(x^2)
// + eps) and g = w * dy: dx = r * g - x * r^3 * sum(g * x) / d; also writes r per row (rs), which
// the dw pass (norm_bwd_cols) uses.
// Workgroup: WG threads (prelude, power of two 32..256); one workgroup owns one row. Thread t
// accumulates sum(x^2) and sum(g*x) over elements t, t+WG, ...; a tree in workgroup memory adds
// the partials (fixed order, deterministic); then each thread writes its elements of dx.
// Rows are read as V (prelude: vec4 when d % 4 == 0, else f32). HAS_W (prelude): w is bound;
// without it w is ones.
struct Params { n_rows: u32, d: u32, eps: f32 }

@group(0) @binding(0) var<storage, read> x: array<V>;
@group(0) @binding(1) var<storage, read> w: array<V>;
@group(0) @binding(2) var<storage, read> dy: array<V>;
@group(0) @binding(3) var<storage, read_write> dx: array<V>;
@group(0) @binding(4) var<storage, read_write> rs: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

// the row's two sums, one tree
alias WR = vec2<f32>;
fn wr_op(a: WR, b: WR) -> WR { return a + b; }
//!include wg_reduce

fn gw(j: u32, v: V) -> V {
    if (HAS_W) { return v * w[j]; }
    return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; }
    let cnt = p.d / VW;
    let base = row * cnt;
    var ab = vec2<f32>(0.0); // sum(x^2), sum(g * x)
    for (var j = lid; j < cnt; j += WG) {
        let xv = x[base + j];
        ab += vec2<f32>(hsum(xv * xv), hsum(gw(j, dy[base + j]) * xv));
    }
    let sums = wg_reduce(lid, ab);
    let inv_d = 1.0 / f32(p.d);
    let r = inverseSqrt(sums.x * inv_d + p.eps);
    let c = r * r * r * sums.y * inv_d;
    for (var j = lid; j < cnt; j += WG) {
        dx[base + j] = r * gw(j, dy[base + j]) - x[base + j] * c;
    }
    if (lid == 0u) { rs[row] = r; }
}
