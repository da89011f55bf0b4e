// shape_strided: the general copy of 4-byte elements (f32, i32, u32 move as bits): permute,
// transpose, expand, slice with a step, cat along an inner dimension.
// Iterates over an index space `shape` (rank <= 8, n elements); the element at coordinate c is
// read from inp[in_base + sum c_i*istr_i] and written to out[out_base + sum c_i*ostr_i]
// (strides in elements; a zero stride repeats, as expand needs).
// Workgroup: 256 threads; each thread owns PER consecutive elements: it splits its first index
// into coordinates once (the divisions), then steps the coordinates with carries.
// The prelude gives UNIT and PER: u32 and 4, or vec4<u32> and 1 where the last dim moves whole
// runs of 4 (shape.c's vec4_walk: both last strides 1, every other stride, the bases and the
// last extent multiples of 4, all counted in vec4s), so that a warp's lanes move 16 contiguous
// bytes each instead of 4 bytes at a 16-byte stride (a permute of [8, 512, 9, 64] to heads first
// took 20.5 us on an H100 where its bytes take 6.4 at the copy's rate).
//!include shape_strided_head

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return ceil_div(p.n, PER); }

fn item(t: u32) {
    let e0 = t * PER;
    var c = coords_of(e0);
    for (var k = 0u; k < PER; k++) {
        if (e0 + k >= p.n) {
            break;
        }
        var io = p.in_base;
        var oo = p.out_base;
        for (var i = 0u; i < p.rank; i++) {
            io += c[i] * p.istr[i >> 2u][i & 3u];
            oo += c[i] * p.ostr[i >> 2u][i & 3u];
        }
        out[oo] = inp[io];
        coords_step(&c);
    }
}
