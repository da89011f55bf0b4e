// ew_binary_body: the shared part of the binary kernels ew_binary (f32) and ew_binary_int (i32),
// which include it and define apply(x: V, y: V) -> V: the output and uniform bindings, the
// broadcast walk (ew_walk2) and the entry point. See ew_binary.wgsl for the prelude and the
// thread layout.
@group(0) @binding(2) var<storage, read_write> out: array<V>;
@group(0) @binding(3) var<uniform> p: Params;

//!include ew_walk2

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
        let step = VW * vec3<u32>(1u, p.sa[last / 4u][last % 4u], p.sb[last / 4u][last % 4u]);
        var loc = locate(j0 * VW);
        for (var e = 0u; e < PT; e++) {
            let j = j0 + e;
            if (j >= p.nv) {
                break;
            }
            out[j] = apply(ld_a(loc.y), ld_b(loc.z));
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
                out[j] = apply(ld_a(j), ld_b(j));
            }
        }
    }
}
