// ew_where: out = cond ? a : b, cond bool, a and b f32, three-way NumPy broadcasting.
//
// The prelude (elementwise.c) supplies:
//   const BCAST: bool   general broadcast path (else contiguous operands or one-element tensors)
//   const PT: u32       vectors per thread (broadcast path: 4 when the innermost coalesced dim
//                       has >= 4 elements, else 1)
//   const VW: u32       lanes of V
//   alias V             vec4<f32> or f32 (vec4: fast path when numel % 4 == 0; broadcast path
//                       when the innermost dim is a multiple of 4)
//   bindings 0 (c = cond), 1 (a), 2 (b) and loaders ld_c/ld_a/ld_b(j) -> V (cond as 0.0 / 1.0):
//   on the fast path vector j (one word of cond per vec4); on the broadcast path the VW
//   elements from element offset j (a splat when broadcast along the innermost dim).
//
// Workgroup: 256 threads. Fast path: one workgroup owns 256*PT consecutive vectors, thread t owns
// vectors base + t + 256*k (k < PT). Broadcast path: one thread owns PT consecutive vectors; it
// computes the three operand offsets of the first from the output index, then steps along the
// innermost dimension, recomputing only when it wraps.
struct Params {
    shape: array<vec4<u32>, 2>,
    sc: array<vec4<u32>, 2>,
    sa: array<vec4<u32>, 2>,
    sb: array<vec4<u32>, 2>,
    n: u32,       // output elements
    nv: u32,      // output vectors
    alpha: f32,   // unused
    scalar: f32,  // unused
    rank: u32,    // rank of the coalesced shape (broadcast path)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(3) var<storage, read_write> out: array<V>;
@group(0) @binding(4) var<uniform> p: Params;

// Output element i's coordinate in the innermost dimension and its offsets in c, a and b.
fn locate(i: u32) -> vec4<u32> {
    var rem = i;
    var r = vec4<u32>(0u);
    for (var d = p.rank; d > 0u; d--) {
        let k = d - 1u;
        let s = p.shape[k / 4u][k % 4u];
        let q = rem % s;
        rem = rem / s;
        if (d == p.rank) {
            r.x = q;
        }
        r.y += q * p.sc[k / 4u][k % 4u];
        r.z += q * p.sa[k / 4u][k % 4u];
        r.w += q * p.sb[k / 4u][k % 4u];
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
        let step = VW * vec4<u32>(1u, p.sc[last / 4u][last % 4u], p.sa[last / 4u][last % 4u], p.sb[last / 4u][last % 4u]);
        var loc = locate(j0 * VW);
        for (var e = 0u; e < PT; e++) {
            let j = j0 + e;
            if (j >= p.nv) {
                break;
            }
            out[j] = select(ld_b(loc.w), ld_a(loc.z), ld_c(loc.y) != V(0.0));
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
                out[j] = select(ld_b(j), ld_a(j), ld_c(j) != V(0.0));
            }
        }
    }
}
