// shape_strided_bool: the general copy of bool (1-byte) elements.
// The output is contiguous with shape `shape` (n elements); only the box whose coordinate along
// rdim lies in [rlo, rlo + rlen) is written (cat writes each input's part in its own dispatch;
// other ops pass the whole range). The element at output coordinate c (c[rdim] - rlo inside
// the input) is byte in_base + sum c_i*istr_i of inp.
// Workgroup: 256 threads; each thread owns one u32 word of the output (4 elements): it reads
// the word, replaces the bytes of its box, clears bytes past n, and writes the word once.
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

fn dim_of(i: u32) -> u32 { return p.shape[i >> 2u][i & 3u]; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let w = (wid.x + wid.y * nwg.x) * 256u + lid;
    let e0 = w * 4u;
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
    var word = out[w];
    for (var k = 0u; k < 4u; k++) {
        let sh = 8u * k;
        if (e0 + k >= p.n) {
            word &= ~(0xFFu << sh);
            continue;
        }
        if (p.rank == 0u || (c[p.rdim] >= p.rlo && c[p.rdim] < p.rlo + p.rlen)) {
            var io = p.in_base;
            for (var i = 0u; i < p.rank; i++) {
                var ci = c[i];
                if (i == p.rdim) { ci -= p.rlo; }
                io += ci * p.istr[i >> 2u][i & 3u];
            }
            let b = (inp[io >> 2u] >> (8u * (io & 3u))) & 0xFFu;
            word = (word & ~(0xFFu << sh)) | (b << sh);
        }
        var j = i32(p.rank) - 1;
        loop {
            if (j < 0) { break; }
            c[j] += 1u;
            if (c[j] < dim_of(u32(j))) { break; }
            c[j] = 0u;
            j--;
        }
    }
    out[w] = word;
}
