// attn_kv_append: cache[b, h, pos + s, :] = new[b, h, s, :] for the rows with
// 0 <= pos + s < Smax; other rows are skipped (never written). pos is read from a tensor.
// Workgroup: 256 threads; each thread owns one unit of W elements of new (W = 1 for an f32
// cache, 2 for the f16 form: one word), written through the prelude's cache_put (kv_cache.h).
// p.n counts the units of new, p.D the units of a row.
struct Params { n: u32, D: u32, Snew: u32, Smax: u32 }

//!bindings read(src: array<f32>, pos: array<i32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(idx: u32) {
    let d = idx % p.D;
    let rs = idx / p.D;          // bh * Snew + s
    let s = rs % p.Snew;
    let bh = rs / p.Snew;
    let dst = dest_row(pos[0], s);
    if (dst < 0 || dst >= i32(p.Smax)) { return; }
    var x = vec4<f32>();
    for (var c = 0u; c < W; c++) { x[c] = src[idx * W + c]; }
    cache_put((bh * p.Smax + u32(dst)) * p.D + d, x);
}

// pos + s without wrapping for positions far outside the cache
fn dest_row(position: i32, s: u32) -> i32 {
    if (position >= i32(p.Smax)) { return i32(p.Smax); }
    if (position < -i32(p.Snew)) { return -1; }
    return position + i32(s);
}
