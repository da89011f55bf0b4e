// ew_where: out = cond ? a : b, cond bool, a and b f32, three-way NumPy broadcasting.
//
// The prelude (elementwise.c) supplies:
//   const BCAST: bool   general broadcast path (else contiguous operands or one-element tensors)
//   const PT: u32       vectors per thread on the fast path
//   alias V             vec4<f32> (fast path, numel % 4 == 0) or f32
//   bindings 0 (c = cond), 1 (a), 2 (b) and loaders ld_c/ld_a/ld_b(j) -> V: on the fast path
//   vector j (cond as 0.0 / 1.0; one word of cond per vec4), on the broadcast path the element at
//   offset j.
//
// Workgroup: 256 threads. Fast path: one workgroup owns 256*PT consecutive vectors, thread t owns
// vectors base + t + 256*k (k < PT). Broadcast path: one thread owns one output element and
// computes the three operand offsets from the output index.
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (BCAST) {
        let i = wg * 256u + lid;
        if (i >= p.n) {
            return;
        }
        var rem = i;
        var oc = 0u;
        var oa = 0u;
        var ob = 0u;
        for (var d = p.rank; d > 0u; d--) {
            let k = d - 1u;
            let s = p.shape[k / 4u][k % 4u];
            let q = rem % s;
            rem = rem / s;
            oc += q * p.sc[k / 4u][k % 4u];
            oa += q * p.sa[k / 4u][k % 4u];
            ob += q * p.sb[k / 4u][k % 4u];
        }
        out[i] = select(ld_b(ob), ld_a(oa), ld_c(oc) != V(0.0));
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
