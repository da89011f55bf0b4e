// shape_strided_head: the Params and bindings of the two strided copies, shape_strided (4-byte
// elements) and shape_strided_bool (bytes), which shape.c's copy_view fills as one struct
// (strided_params): the index space `shape` with the input's and output's strides (elements for
// 4-byte data, bytes for bool) in rank <= 8 dims, n elements, the bases, and the box
// [rlo, rlo + rlen) along rdim (read by the bool copy). With shape_walk for the coordinates.
// The includer (or its prelude) defines UNIT, the type of the bound arrays' elements. Not a kernel.
//!include shape_walk
struct Params {
    shape: array<vec4<u32>, 2>,
    istr: array<vec4<u32>, 2>,
    ostr: array<vec4<u32>, 2>,
    n: u32, rank: u32, in_base: u32, out_base: u32,
    rdim: u32, rlo: u32, rlen: u32, pad: u32,
}

//!bindings read(inp: array<UNIT>) write(out: array<UNIT>) uniform(p: Params)
