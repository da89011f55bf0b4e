// shape_strided: the general copy of 4-byte elements (f32, i32, u32 move as bits): permute,
// transpose, expand, slice with a step, cat along an inner dimension.
// Iterates over an index space `shape` (rank <= 8, n elements); the element at coordinate c is
// read from inp[in_base + sum c_i*istr_i] and written to out[out_base + sum c_i*ostr_i]
// (strides in elements; a zero stride repeats, as expand needs).
// Workgroup: 256 threads; each thread owns PER consecutive elements: it splits its first index
// into coordinates once (the divisions), then steps the coordinates with carries.
struct Params {
    shape: array<vec4<u32>, 2>,
    istr: array<vec4<u32>, 2>,
    ostr: array<vec4<u32>, 2>,
    n: u32, rank: u32, in_base: u32, out_base: u32,
    rdim: u32, rlo: u32, rlen: u32, pad: u32,
}

@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const PER: u32 = 4u;

fn dim_of(i: u32) -> u32 { return p.shape[i >> 2u][i & 3u]; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e0 = ((wid.x + wid.y * nwg.x) * 256u + lid) * PER;
    if (e0 >= p.n) {
        return;
    }
    var c: array<u32, 8>;
    var rem = e0;
    for (var i = i32(p.rank) - 1; i >= 0; i--) {
        let s = dim_of(u32(i));
        let q = rem / s;
        c[i] = rem - q * s;
        rem = q;
    }
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
        var j = i32(p.rank) - 1;
        loop {
            if (j < 0) { break; }
            c[j] += 1u;
            if (c[j] < dim_of(u32(j))) { break; }
            c[j] = 0u;
            j--;
        }
    }
}
