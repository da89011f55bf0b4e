// shape_block: the contiguous fast path of every copy (clone, cat, slice of whole rows).
// Copies `rows` rows of `row_len` units from inp to out; row r starts at in_base + r*in_stride
// in inp and at out_base + r*out_stride in out (all counted in units). The prelude sets
// `alias UNIT = vec4<u32>;` (16-byte units, when every quantity is a multiple of 16 bytes) or
// `alias UNIT = u32;` (4-byte units). Works for any dtype: the handler only takes this path
// when every row starts and ends on a word boundary, so each thread owns whole words.
// Workgroup: 256 threads; each thread moves PER units, 256 apart (coalesced).
struct Params { n: u32, row_len: u32, in_stride: u32, out_stride: u32, in_base: u32, out_base: u32, p0: u32, p1: u32 }

//!bindings read(inp: array<UNIT>) write(out: array<UNIT>) uniform(p: Params)

const PER: u32 = 4u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let base = (wid.x + wid.y * nwg.x) * (256u * PER) + lid;
    let one_row = p.row_len == p.n;
    for (var k = 0u; k < PER; k++) {
        let u = base + k * 256u;
        if (u >= p.n) {
            return;
        }
        var r = 0u;
        var c = u;
        if (!one_row) {
            r = u / p.row_len;
            c = u - r * p.row_len;
        }
        out[p.out_base + r * p.out_stride + c] = inp[p.in_base + r * p.in_stride + c];
    }
}
