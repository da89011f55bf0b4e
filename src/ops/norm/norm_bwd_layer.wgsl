// norm_bwd_layer: layer_norm backward over the last dim (rows of length d), from the forward's
// per-row mean and rstd. With xh = (x - mean) * rstd and g = w * dy:
// dx = rstd * (g - mean(g) - xh * mean(g * xh)).
// Workgroup: WG threads (prelude, power of two 32..256); one workgroup owns one row. Thread t
// accumulates sum(g) and sum(g*xh) over elements t, t+WG, ...; a tree in workgroup memory adds
// the partials (fixed order, deterministic); then each thread writes its elements of dx.
// Rows are read as V (prelude: vec4 when d % 4 == 0, else f32). HAS_W (prelude): w is bound;
// without it w is ones.
struct Params { n_rows: u32, d: u32 }

@group(0) @binding(0) var<storage, read> x: array<V>;
@group(0) @binding(1) var<storage, read> w: array<V>;
@group(0) @binding(2) var<storage, read> mean: array<f32>;
@group(0) @binding(3) var<storage, read> rstd: array<f32>;
@group(0) @binding(4) var<storage, read> dy: array<V>;
@group(0) @binding(5) var<storage, read_write> dx: array<V>;
@group(0) @binding(6) var<uniform> p: Params;

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
    let m = mean[row];
    let r = rstd[row];
    var ab = vec2<f32>(0.0); // sum(g), sum(g * xh)
    for (var j = lid; j < cnt; j += WG) {
        let gv = gw(j, dy[base + j]);
        ab += vec2<f32>(hsum(gv), hsum(gv * ((x[base + j] - V(m)) * r)));
    }
    let means = wg_reduce(lid, ab) * (1.0 / f32(p.d)); // mean(g), mean(g * xh)
    let mg = means.x;
    let mgx = means.y;
    for (var j = lid; j < cnt; j += WG) {
        let xh = (x[base + j] - V(m)) * r;
        dx[base + j] = r * (gw(j, dy[base + j]) - V(mg) - xh * mgx);
    }
}
