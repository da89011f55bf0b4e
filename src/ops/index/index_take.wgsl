// index_take: gather and index_select in their general form (any rank, 4-byte or bool data).
// The output is contiguous with shape `shape` (n elements). For output coordinate c the index
// is idx[e] (gather, MODE 0: index has the output's shape) or idx[c[dim]] (index_select,
// MODE 1); the element read is x[sum_{i != dim} c_i*xstr_i + fix_index(index, size)*xstr_dim]
// (index_fix: wrapped, then clamped into [0, size), so that no index reads outside x).
// Prelude: `const BOOL: bool = ...;` (1-byte elements) and `const MODE: u32 = ...;`.
// Workgroup: 256 threads. 4-byte data: each thread owns PER consecutive elements. Bool: each
// thread owns one u32 word of the output (4 elements), built from single bytes of x. The
// coordinates: shape_walk's.
//!include shape_walk
//!include index_fix
struct Params {
    shape: array<vec4<u32>, 2>,
    xstr: array<vec4<u32>, 2>,
    n: u32, rank: u32, dim: u32, size: u32,
}

//!bindings read(x: array<u32>, idx: array<i32>) write(out: array<u32>) uniform(p: Params)

const PER: u32 = 4u;

// offset in x (elements) of output element e at coordinate c
fn src(e: u32, c: ptr<function, array<u32, 8>>) -> u32 {
    var pos = e;
    if (MODE == 1u) { pos = (*c)[p.dim]; }
    var o = fix_index(idx[pos], i32(p.size)) * p.xstr[p.dim >> 2u][p.dim & 3u];
    for (var i = 0u; i < p.rank; i++) {
        if (i != p.dim) { o += (*c)[i] * p.xstr[i >> 2u][i & 3u]; }
    }
    return o;
}

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return ceil_div(p.n, PER); } // PER elements, or a word of 4 bools

fn item(t: u32) {
    let e0 = t * PER;
    var c = coords_of(e0);
    if (BOOL) {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            if (e0 + k >= p.n) { break; }
            let o = src(e0 + k, &c);
            word |= ((x[o >> 2u] >> (8u * (o & 3u))) & 0xFFu) << (8u * k);
            coords_step(&c);
        }
        out[t] = word;
    } else {
        for (var k = 0u; k < PER; k++) {
            if (e0 + k >= p.n) { break; }
            out[e0 + k] = x[src(e0 + k, &c)];
            coords_step(&c);
        }
    }
}
