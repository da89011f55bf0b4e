// shape_strided_bool: the general copy of bool (1-byte) elements.
// The output is contiguous with shape `shape` (n elements); only the box whose coordinate along
// rdim lies in [rlo, rlo + rlen) is written (cat writes each input's part in its own dispatch;
// other ops pass the whole range). The element at output coordinate c (c[rdim] - rlo inside
// the input) is byte in_base + sum c_i*istr_i of inp.
// Workgroup: 256 threads; each thread owns one u32 word of the output (4 elements): it reads
// the word, replaces the bytes of its box, clears bytes past n, and writes the word once.
//!include shape_strided_head
alias UNIT = u32;

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return ceil_div(p.n, 4u); } // words

fn item(w: u32) {
    let e0 = w * 4u;
    var c = coords_of(e0);
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
        coords_step(&c);
    }
    out[w] = word;
}
