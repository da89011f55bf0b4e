// rope_apply: rotary position embedding (forward, or backward with sign = -1) of
// x [B, S, H, D] (row-major, D fastest; [B, H, S, D] when the prelude sets HEADS_FIRST) by
// the angle pos[b, s] * theta^(-2i/D) for pair i.
//
// Workgroup: 64 threads; each thread owns one pair (two elements of one head row):
// (i, i + D/2) for the half-split style, (2i, 2i + 1) for the interleaved style (the prelude
// sets INTERLEAVED). Consecutive threads take consecutive pairs of a row, so loads coalesce.
//
// Precision: the angle is reduced modulo one turn exactly (rope_angle.wgsl says how).
struct Params { n_pairs: u32, H: u32, S: u32, half: u32, pos_bstride: u32, sign: f32, _p0: u32, _p1: u32 }

//!bindings read(x: array<f32>, pos: array<i32>, tab: array<vec4<f32>>)
//!bindings write(out: array<f32>) uniform(p: Params)

//!include rope_angle

//!include flat_main
const FLAT_WG: u32 = 64u;
fn items() -> u32 { return p.n_pairs; }

fn item(idx: u32) {
    let i = idx % p.half;
    let row = idx / p.half;          // (b * S + s) * H + h, or (b * H + h) * S + s heads-first
    var s: u32;
    var b: u32;
    if (HEADS_FIRST) {
        s = row % p.S;
        b = row / (p.S * p.H);
    } else {
        let bs = row / p.H;
        s = bs % p.S;
        b = bs / p.S;
    }
    let position = pos[b * p.pos_bstride + s];
    let ang = rope_angle(position, tab[i]);
    let c = sc_cos(ang);
    let sn = sc_sin(ang) * p.sign;
    let base = row * 2u * p.half;
    var ia: u32;
    var ib: u32;
    if (INTERLEAVED) {
        ia = base + 2u * i;
        ib = ia + 1u;
    } else {
        ia = base + i;
        ib = ia + p.half;
    }
    let a = x[ia];
    let bv = x[ib];
    out[ia] = a * c - bv * sn;
    out[ib] = a * sn + bv * c;
}
