// ew_walk2: the uniform and the broadcast walk of the two-operand elementwise kernels (ew_binary,
// ew_binary_int through ew_binary_body, and ew_bool), which "//!include ew_walk2": the coalesced
// output shape with a's and b's element strides (0 where broadcast), the counts, and locate().
struct Params {
    shape: array<vec4<u32>, 2>,
    sa: array<vec4<u32>, 2>,
    sb: array<vec4<u32>, 2>,
    n: u32,       // output elements
    nv: u32,      // output vectors or words
    alpha: f32,
    scalar: f32,  // b when it is a uniform scalar
    rank: u32,    // rank of the coalesced shape (broadcast path)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

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
