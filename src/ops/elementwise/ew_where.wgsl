// ew_where: out = cond ? a : b, cond bool, a and b f32, three-way NumPy broadcasting.
//
// The prelude (elementwise.c) supplies:
//   const BCAST: bool   general broadcast path (else contiguous operands or one-element tensors)
//   const PT: u32       vectors per thread (broadcast path: 4 when the innermost coalesced dim
//                       has >= 4 elements, else 1)
//   const VW: u32       lanes of V
//   alias V             vec4<f32> or f32 (vec4: fast path when numel % 4 == 0; broadcast path
//                       when the innermost dim is a multiple of 4)
//   the read bindings c (cond), a, b and loaders ld_c/ld_a/ld_b(j) -> V (cond as 0.0 / 1.0):
//   on the fast path vector j (one word of cond per vec4); on the broadcast path the VW
//   elements from element offset j (a splat when broadcast along the innermost dim).
//
// Workgroup and thread layout: ew_map.
//!bindings write(out: array<V>) uniform(p: Params)

fn value(o: vec4<u32>) -> V {
    return select(ld_b(o.w), ld_a(o.z), ld_c(o.y) != V(0.0));
}

//!include ew_map
