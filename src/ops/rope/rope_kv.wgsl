// rope_kv: the attention inputs of S rows (rope_kv_step in rope_kv.c, for inference graphs: one
// decode step, or a prefill through the KV cache) in one dispatch: RoPE (pair i of a head is
// elements (2i, 2i+1) when p.style is 1, interleaved, or (i, i + hd/2) when it is 0, half;
// angle pos[s] * theta^(-2i/hd)) of q's H heads into q_out in the heads-first layout attention
// takes, of k's Hk heads into k_cache row pos[s], and v's Hk heads copied into v_cache row pos[s]
// (caches [Hk, smax, hd]; rows outside 0..smax-1 are not written). The angle is rope_apply.wgsl's
// (the shared rope_angle), so results equal the plain rope op bit for bit.
// Workgroup: 64 threads; each thread owns one pair of one row: per row the q pairs, then the k
// pairs, then the v pairs.
struct Params { nq: u32, nk: u32, half: u32, smax: u32, style: u32, S: u32, _p1: u32, _p2: u32 }

//!bindings read(q: array<f32>, k: array<f32>, v: array<f32>, pos: array<i32>, tab: array<vec4<f32>>)
//!bindings write(q_out: array<f32>, k_cache: array<f32>, v_cache: array<f32>) uniform(p: Params)

//!include rope_angle

//!include flat_main
const FLAT_WG: u32 = 64u;
fn items() -> u32 { return p.S * (p.nq + 2u * p.nk); } // the pairs of every row

fn item(flat: u32) {
    let per_row = p.nq + 2u * p.nk;                 // pairs of one row
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
            let dst = (head * p.smax + u32(position)) * hd + 2u * (j % p.half);
            v_cache[dst] = v[src];
            v_cache[dst + 1u] = v[src + 1u];
        }
        return;
    }
    let is_q = idx < p.nq;
    var j = idx;
    if (!is_q) { j = idx - p.nq; }
    let i = j % p.half;
    let head = j / p.half;
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
    if (is_q) {
        let src = row * 2u * p.nq + head * hd;       // q [S, H, hd]
        let dst = (head * p.S + row) * hd;           // q_out [H, S, hd]
        let a = q[src + e0];
        let b = q[src + e1];
        q_out[dst + e0] = a * c - b * sn;
        q_out[dst + e1] = a * sn + b * c;
    } else if (in_cache) {
        let src = row * 2u * p.nk + head * hd;
        let a = k[src + e0];
        let b = k[src + e1];
        let dst = (head * p.smax + u32(position)) * hd;
        k_cache[dst + e0] = a * c - b * sn;
        k_cache[dst + e1] = a * sn + b * c;
    }
}
