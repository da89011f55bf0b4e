// index_scatter: the backward of gather / index_select / embedding without atomics:
//   dx[p] = Σ_j dy[p with dim := j] over the j whose (wrapped, clamped) index equals p[dim].
// Workgroup: 256 threads; each thread owns one element of dx and loops over the `len`
// index entries along dim (deterministic: the same order every run).
//!include index_fix
struct Params {
    shape: array<vec4<u32>, 2>, // dx's shape
    bound: array<vec4<u32>, 2>, // p outside dim must lie below this (gather: index's shape)
    istr: array<vec4<u32>, 2>,  // strides of idx (index_select: 0 outside dim)
    dstr: array<vec4<u32>, 2>,  // strides of dy
    n: u32, rank: u32, dim: u32, len: u32,
    size: u32, pad0: u32, pad1: u32, pad2: u32,
}

//!bindings read(dy: array<f32>, idx: array<i32>) write(dx: array<f32>) uniform(p: Params)

fn at(v: array<vec4<u32>, 2>, i: u32) -> u32 { return v[i >> 2u][i & 3u]; }

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(i: u32) {
    var rem = i;
    var ioff = 0u;
    var doff = 0u;
    var tgt = 0u;
    var inside = true;
    for (var d = i32(p.rank) - 1; d >= 0; d--) {
        let du = u32(d);
        let s = at(p.shape, du);
        let c = rem % s;
        rem = rem / s;
        if (du == p.dim) {
            tgt = c;
        } else {
            inside = inside && c < at(p.bound, du);
            ioff += c * at(p.istr, du);
            doff += c * at(p.dstr, du);
        }
    }
    var acc = 0.0;
    if (inside) {
        let is = at(p.istr, p.dim);
        let ds = at(p.dstr, p.dim);
        let size = i32(p.size);
        for (var j = 0u; j < p.len; j++) {
            if (fix_index(idx[ioff + j * is], size) == tgt) { acc += dy[doff + j * ds]; }
        }
    }
    dx[i] = acc;
}
