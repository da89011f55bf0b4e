// reduce_pairs: second stage of a split reduction. in holds, for each output, `parts` pairs
// (value bits, index) written by reduce_rows in SPLIT mode, in chunk order.
// Workgroup: WG threads (prelude); one workgroup owns one output. Thread t merges pairs t,
// t+WG, ... then a tree in workgroup memory merges the WG results (fixed order: deterministic;
// max ties keep the lower index). The prelude supplies WG and OP (0 sum, 1 max, 2 argmax).
struct Params { n_out: u32, parts: u32, scale: f32, ninf: f32 }

//!bindings read(pin: array<u32>) write(out: array<u32>) uniform(p: Params)

//!include reduce_pick
//!include wg_reduce

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let o = wid.x + wid.y * nwg.x;
    if (o >= p.n_out) { return; }
    var a = Pick(select(p.ninf, 0.0, OP == 0u), NONE);
    for (var j = lid; j < p.parts; j += WG) {
        let k = 2u * (o * p.parts + j);
        a = wr_op(a, Pick(bitcast<f32>(pin[k]), pin[k + 1u]));
    }
    let r = wg_reduce(lid, a);
    if (lid == 0u) {
        if (OP == 2u) { out[o] = r.i; } else { out[o] = bitcast<u32>(r.v * p.scale); }
    }
}
