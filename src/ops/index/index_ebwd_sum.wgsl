// index_ebwd_sum: embedding backward, pass 5 of 5: dw[v, c] = sum of dy[pos, c] over the
// positions of row v's bucket, in increasing position (0 for an empty bucket).
// Workgroup: 256 threads; one thread owns one V (prelude: vec4 when D % 4 == 0, else f32) of
// dw, columns c*VW .. c*VW + VW - 1 of row v; neighbouring threads own neighbouring columns of
// one row, so their dy reads are coalesced. p.d counts Vs per row here (D / VW).
struct Params { n: u32, v: u32, d: u32, pad: u32 }

//!bindings read(dy: array<V>, off: array<u32>, sorted: array<u32>)
//!bindings write(dw: array<V>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.v * p.d; }

fn item(t: u32) {
    let row = t / p.d;
    let c = t - row * p.d;
    var acc = V(0.0);
    for (var e = off[row]; e < off[row + 1u]; e++) {
        acc += dy[sorted[e] * p.d + c];
    }
    dw[t] = acc;
}
