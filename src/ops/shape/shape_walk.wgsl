// shape_walk: the walk over a contiguous index space of rank <= 8 that the strided copies
// (shape_strided, shape_strided_bool) and gather/index_select (index_take) make, included with
// "//!include shape_walk": dim_of(i), the extent of dim i; coords_of(e), the coordinates of flat
// element e (row-major, the last dim fastest: the divisions, once per thread); coords_step(c),
// the coordinates of the next element (a carry from the last dim: no divisions). Each thread
// splits its first element once and steps through the few it owns. The includer defines its
// Params, bound as `p`, with `shape: array<vec4<u32>, 2>` (the extents) and `rank: u32`.
// Not a kernel.

fn dim_of(i: u32) -> u32 { return p.shape[i >> 2u][i & 3u]; }

fn coords_of(e: u32) -> array<u32, 8> {
    var c: array<u32, 8>;
    var rem = e;
    for (var i = i32(p.rank) - 1; i >= 0; i--) {
        let s = dim_of(u32(i));
        let q = rem / s;
        c[i] = rem - q * s;
        rem = q;
    }
    return c;
}

fn coords_step(c: ptr<function, array<u32, 8>>) {
    var j = i32(p.rank) - 1;
    loop {
        if (j < 0) { break; }
        (*c)[j] += 1u;
        if ((*c)[j] < dim_of(u32(j))) { break; }
        (*c)[j] = 0u;
        j--;
    }
}
