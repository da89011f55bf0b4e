// ew_map: the entry point of the elementwise kernels with one f32 or i32 output element per input
// position (ew_binary and ew_binary_int through ew_binary_body, ew_where), which
// "//!include ew_map" after their bindings `out` and `p` and define
//   fn value(o: vec4<u32>) -> V   the output vector from operand offsets o.y, o.z, o.w (ew_walk's
//                                 locate; on the fast path all three are the vector index j).
// The prelude supplies BCAST, PT, VW, V and the operands' loaders (elementwise.c).
//
// Workgroup: 256 threads. Fast path: one workgroup owns 256*PT consecutive vectors; thread t owns
// vectors base + t + 256*k (k < PT), so each load/store instruction is coalesced across the
// workgroup. Broadcast path: one thread owns PT consecutive vectors; it computes each operand's
// offset for the first from the output index with the shapes/strides in the uniform, then steps
// along the innermost dimension, recomputing only when it wraps.
//!include ew_walk

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (BCAST) {
        let j0 = (wg * 256u + lid) * PT;
        if (j0 >= p.nv) {
            return;
        }
        let last = p.rank - 1u;
        let s0 = p.shape[last / 4u][last % 4u];
        let step = VW * inner_step();
        var loc = locate(j0 * VW);
        for (var e = 0u; e < PT; e++) {
            let j = j0 + e;
            if (j >= p.nv) {
                break;
            }
            out[j] = value(loc);
            loc += step;
            if (loc.x == s0) {
                loc = locate((j + 1u) * VW);
            }
        }
    } else {
        let base = wg * (256u * PT) + lid;
        for (var k = 0u; k < PT; k++) {
            let j = base + k * 256u;
            if (j < p.nv) {
                out[j] = value(vec4<u32>(j));
            }
        }
    }
}
