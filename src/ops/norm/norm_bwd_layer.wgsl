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

var<workgroup> s1: array<f32, WG>;
var<workgroup> s2: array<f32, WG>;

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
    var a = 0.0;
    var b = 0.0;
    for (var j = lid; j < cnt; j += WG) {
        let gv = gw(j, dy[base + j]);
        a += hsum(gv);
        b += hsum(gv * ((x[base + j] - V(m)) * r));
    }
    s1[lid] = a;
    s2[lid] = b;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k = k >> 1u) {
        if (lid < k) {
            s1[lid] = s1[lid] + s1[lid + k];
            s2[lid] = s2[lid] + s2[lid + k];
        }
        workgroupBarrier();
    }
    let inv_d = 1.0 / f32(p.d);
    let mg = s1[0] * inv_d;
    let mgx = s2[0] * inv_d;
    for (var j = lid; j < cnt; j += WG) {
        let xh = (x[base + j] - V(m)) * r;
        dx[base + j] = r * (gw(j, dy[base + j]) - V(mg) - xh * mgx);
    }
}
