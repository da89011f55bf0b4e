// norm_add_rms: a residual add fused with the RMSNorm that follows it (norm_add_rms in
// norm_fused.c, for inference graphs: one dispatch where add + rms_norm take two):
// sum = x + y, out = sum * rsqrt(mean(sum^2) + eps) * w, over rows of length d (d % 4 == 0).
// Workgroup: WG threads (prelude, power of two); one workgroup owns one row. Thread t adds
// the vec4 elements t, t+WG, ... (writing sum) and sums their squares; the workgroup adds
// the WG partial sums with a tree in workgroup memory (fixed order); then each thread
// scales its own elements again (read back from sum, which only it wrote).
struct Params { n_rows: u32, d: u32, eps: f32 }

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> y: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> sum: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> ss: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; }
    let cnt = p.d / 4u;
    let base = row * cnt;
    var s = 0.0;
    for (var j = lid; j < cnt; j += WG) {
        let v = x[base + j] + y[base + j];
        sum[base + j] = v;
        s += dot(v, v);
    }
    ss[lid] = s;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k = k >> 1u) {
        if (lid < k) { ss[lid] = ss[lid] + ss[lid + k]; }
        workgroupBarrier();
    }
    let r = inverseSqrt(ss[0] / f32(p.d) + p.eps);
    for (var j = lid; j < cnt; j += WG) {
        out[base + j] = sum[base + j] * r * w[j];
    }
}
