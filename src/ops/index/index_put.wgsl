// index_put: out = x with entries put into (or, accumulating, added to) its rows.
//
// x is viewed as [R, inner] (the indexed leading dims flattened into R), row[P] holds each
// entry's flat row, vals is [P, inner]. One thread per element (r, j) of out: it starts from
// x[r, j] and walks the P entries in order, taking vals[p, j] (accumulate: adding it) for each p
// whose row is r. So the last of several entries for one row wins without accumulate, and sums
// run in entry order: deterministic, without atomics, at P reads per element (entry lists are
// short in practice). Rows come wrapped into [0, R) (index_put.c); one outside would match no
// element, so nothing is ever written or read outside a tensor.
//
// The prelude supplies alias E: the element type (f32 or i32).
struct Params {
    n: u32,      // elements of out (R * inner)
    inner: u32,
    entries: u32, // P
    acc: u32,    // 1: accumulate
}

//!bindings read(x: array<E>, row: array<i32>, vals: array<E>)
//!bindings write(out: array<E>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(i: u32) {
    let r = i32(i / p.inner);
    let j = i % p.inner;
    var v = x[i];
    for (var e = 0u; e < p.entries; e++) {
        if (row[e] == r) {
            let w = vals[e * p.inner + j];
            v = select(w, v + w, p.acc != 0u);
        }
    }
    out[i] = v;
}
