// reduce_pairs: second stage of a split reduction. in holds, for each output, `parts` pairs
// (value bits, index) written by reduce_rows in SPLIT mode, in chunk order.
// Workgroup: WG threads (prelude); one workgroup owns one output. Thread t merges pairs t,
// t+WG, ... then a tree in workgroup memory merges the WG results (fixed order: deterministic;
// max ties keep the lower index). The prelude supplies WG and OP (0 sum, 1 max, 2 argmax).
struct Params { n_out: u32, parts: u32, scale: f32, ninf: f32 }

@group(0) @binding(0) var<storage, read> pin: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const NONE: u32 = 0xffffffffu;
var<workgroup> sv: array<f32, WG>;
var<workgroup> si: array<u32, WG>;

// NaN tested on the bits (a compiler may assume a == a for floats)
fn is_nan(a: f32) -> bool { return (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u; }
fn gt(a: f32, b: f32) -> bool { return a > b || (is_nan(a) && !is_nan(b)); }

fn better(av: f32, ai: u32, bv: f32, bi: u32) -> bool {
    if (bi == NONE) { return false; }
    if (ai == NONE) { return true; }
    return gt(bv, av) || (!gt(av, bv) && bi < ai);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = wid.x + wid.y * nwg.x;
    if (o >= p.n_out) { return; }
    var a = 0.0;
    if (OP != 0u) { a = p.ninf; }
    var ai = NONE;
    for (var j = lid; j < p.parts; j += WG) {
        let k = 2u * (o * p.parts + j);
        let v = bitcast<f32>(pin[k]);
        let i = pin[k + 1u];
        if (OP == 0u) { a += v; } else if (better(a, ai, v, i)) { a = v; ai = i; }
    }
    sv[lid] = a;
    si[lid] = ai;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            if (OP == 0u) {
                sv[lid] = sv[lid] + sv[lid + s];
            } else if (better(sv[lid], si[lid], sv[lid + s], si[lid + s])) {
                sv[lid] = sv[lid + s];
                si[lid] = si[lid + s];
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        if (OP == 2u) { out[o] = si[0]; } else { out[o] = bitcast<u32>(sv[0] * p.scale); }
    }
}
