// attn_combine: merges the key chunks of split attention (attn_sdpa.wgsl with p.n_split > 1). part
// holds, per output row and chunk, D unnormalised outputs, the chunk's max m (log2 units)
// and its sum l. out[row, d] = Σ acc·2^(m - M) / Σ l·2^(m - M) with M the max over chunks;
// a row whose chunks saw no key gets 0. p.rows_out: the output rows in the row layout of
// attn_rows.wgsl (partial rows are head-first), else in part's order.
// Workgroup: 64 threads; each thread owns one output element (row, d).
struct Params { n: u32, D: u32, n_split: u32, rows_out: u32, Hkv: u32, G: u32, Sq: u32, _p: u32 }

//!bindings read(part: array<f32>) write(out: array<f32>) uniform(p: Params)

//!include attn_rows

//!include flat_main
const FLAT_WG: u32 = 64u;
fn items() -> u32 { return p.n; }

fn item(idx: u32) {
    let d = idx % p.D;
    let row = idx / p.D;
    let stride = p.D + 2u;
    let base = row * p.n_split * stride;
    var mx = -3.0e38;
    for (var s = 0u; s < p.n_split; s++) { mx = max(mx, part[base + s * stride + p.D]); }
    var num = 0.0;
    var den = 0.0;
    for (var s = 0u; s < p.n_split; s++) {
        let o = base + s * stride;
        let w = exp2(part[o + p.D] - mx);
        num += part[o + d] * w;
        den += part[o + p.D + 1u] * w;
    }
    var orow = row;
    if (p.rows_out != 0u) { orow = row_major(row / (p.G * p.Sq), row % (p.G * p.Sq)); }
    out[orow * p.D + d] = select(num / den, 0.0, den == 0.0);
}
