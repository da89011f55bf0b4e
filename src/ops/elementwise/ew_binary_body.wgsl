// ew_binary_body: the shared part of the binary kernels ew_binary (f32) and ew_binary_int (i32),
// which include it and define apply(x: V, y: V) -> V: the uniform, the output binding, the
// broadcast walk and the entry point. See ew_binary.wgsl for the prelude and the thread layout.
struct Params {
    shape: array<vec4<u32>, 2>,
    sa: array<vec4<u32>, 2>,
    sb: array<vec4<u32>, 2>,
    n: u32,       // output elements
    nv: u32,      // output vectors (n / VW)
    alpha: f32,
    scalar: f32,
    rank: u32,    // rank of the coalesced shape (broadcast path)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(2) var<storage, read_write> out: array<V>;
@group(0) @binding(3) var<uniform> p: Params;

// Output element i's coordinate in the innermost dimension and its offsets in a and b.
fn locate(i: u32) -> vec3<u32> {
    var rem = i;
    var r = vec3<u32>(0u);
    for (var d = p.rank; d > 0u; d--) {
        let k = d - 1u;
        let s = p.shape[k / 4u][k % 4u];
        let q = rem % s;
        rem = rem / s;
        if (d == p.rank) {
            r.x = q;
        }
        r.y += q * p.sa[k / 4u][k % 4u];
        r.z += q * p.sb[k / 4u][k % 4u];
    }
    return r;
}

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
