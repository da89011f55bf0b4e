// rope_kv: the attention inputs of S rows (rope_kv_step in rope_kv.c, for inference graphs: one
// decode step, or a prefill through the KV cache) in one dispatch: RoPE (pair i of a head is
// elements (2i, 2i+1) when p.style is 1, interleaved, or (i, i + hd/2) when it is 0, half;
// angle pos[s] * theta^(-2i/hd)) of q's H heads into q_out in the heads-first layout attention
// takes, of k's Hk heads into k_cache row pos[s], and v's Hk heads copied into v_cache row pos[s]
// (caches [Hk, smax, hd] in either form, kv_cache.h, through the prelude's k_cache_put and
// v_cache_put over units of two elements; rows outside 0..smax-1 are not written). The angle
// and the rotation are rope_apply.wgsl's (the shared rope_angle.wgsl), so results equal the plain
// rope op bit for bit.
// Workgroup: 64 threads; each thread owns one unit of one row: per row q's rotation pairs (the
// elements of a pair, both in q_out), then k's and v's element pairs (2i, 2i + 1) of a head: a
// word of the f16 form, which a thread must write whole (k's two elements then belong to two
// rotation pairs when the pairs are (i, i + hd/2)).
struct Params { nq: u32, nk: u32, half: u32, smax: u32, style: u32, S: u32, _p1: u32, _p2: u32 }

//!bindings read(q: array<f32>, k: array<f32>, v: array<f32>, pos: array<i32>, tab: array<vec4<f32>>)
//!bindings write(q_out: array<f32>) uniform(p: Params)

//!include rope_angle

//!include flat_main
const FLAT_WG: u32 = 64u;
fn items() -> u32 { return p.S * (p.nq + 2u * p.nk); } // the units of every row

fn item(flat: u32) {
    let per_row = p.nq + 2u * p.nk;                 // units of one row
    let row = flat / per_row;
    let idx = flat % per_row;
    let position = pos[row];
    let in_cache = position >= 0 && position < i32(p.smax);
    let hd = 2u * p.half;
    if (idx >= p.nq + p.nk) { // v: a copy
        let j = idx - p.nq - p.nk;
        let head = j / p.half;
        let src = row * 2u * p.nk + 2u * j;
        if (in_cache) {
            v_cache_put((head * p.smax + u32(position)) * p.half + j % p.half, vec4<f32>(v[src], v[src + 1u], 0.0, 0.0));
        }
        return;
    }
    if (idx >= p.nq) { // k: elements 2i, 2i + 1 of a head, each rotated with its partner
        if (!in_cache) { return; }
        let j = idx - p.nq;
        let i = j % p.half;
        let head = j / p.half;
        let src = row * 2u * p.nk + head * hd;
        let il = p.style == 1u;
        var x = vec4<f32>();
        for (var c = 0u; c < 2u; c++) {
            let e = 2u * i + c;
            let o = rope_partner(e, p.half, il);
            x[c] = rope_rotated(k[src + e], k[src + o], e, p.half, il, position, tab[rope_pair_index(e, p.half, il)]);
        }
        k_cache_put((head * p.smax + u32(position)) * p.half + i, x);
        return;
    }
    let i = idx % p.half;
    let head = idx / p.half;
    let ang = rope_angle(position, tab[i]);
    let c = sc_cos(ang);
    let sn = sc_sin(ang);
    // the pair's two elements within the head
    var e0 = 2u * i;
    var e1 = e0 + 1u;
    if (p.style == 0u) {
        e0 = i;
        e1 = i + p.half;
    }
    let src = row * 2u * p.nq + head * hd;           // q [S, H, hd]
    let dst = (head * p.S + row) * hd;               // q_out [H, S, hd]
    let a = q[src + e0];
    let b = q[src + e1];
    q_out[dst + e0] = a * c - b * sn;
    q_out[dst + e1] = a * sn + b * c;
}
