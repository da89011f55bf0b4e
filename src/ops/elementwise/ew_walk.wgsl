// ew_walk: the uniform and the broadcast walk of the elementwise kernels of two or three operands
// (ew_binary and ew_binary_int through ew_map, ew_where through ew_map, ew_bool), which
// "//!include ew_walk": the coalesced output shape with each operand's element strides (0 where
// broadcast; s2 is zero for two operands), the counts, and locate().
struct Params {
    shape: array<vec4<u32>, 2>,
    s0: array<vec4<u32>, 2>,  // operand 0 (a; where's cond)
    s1: array<vec4<u32>, 2>,  // operand 1 (b; where's a)
    s2: array<vec4<u32>, 2>,  // operand 2 (where's b)
    n: u32,       // output elements
    nv: u32,      // output vectors or words
    alpha: f32,
    scalar: f32,  // b when it is a uniform scalar
    rank: u32,    // rank of the coalesced shape (broadcast path)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

// Output element i's coordinate in the innermost dimension (x) and its offsets in operands 0, 1
// and 2 (y, z, w).
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
        r += q * vec4<u32>(0u, p.s0[k / 4u][k % 4u], p.s1[k / 4u][k % 4u], p.s2[k / 4u][k % 4u]);
    }
    return r;
}

// The step of locate's result along the innermost dimension, per element.
fn inner_step() -> vec4<u32> {
    let last = p.rank - 1u;
    return vec4<u32>(1u, p.s0[last / 4u][last % 4u], p.s1[last / 4u][last % 4u], p.s2[last / 4u][last % 4u]);
}
