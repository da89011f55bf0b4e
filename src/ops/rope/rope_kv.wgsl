// rope_kv: the attention inputs of one decode step (S = 1; rope_kv_step in rope_kv.c, for
// inference graphs) in one dispatch: RoPE (pair i of a head is elements (2i, 2i+1) when
// p.style is 1, interleaved, or (i, i + hd/2) when it is 0, half; angle pos * theta^(-2i/hd))
// of q's H heads into q_out, of k's Hk heads into k_cache row pos, and
// v's Hk heads copied into v_cache row pos (caches [Hk, smax, hd]; rows outside 0..smax-1 are
// not written). The angle is rope_apply.wgsl's (the shared rope_angle), so results equal the
// plain rope op bit for bit.
// Workgroup: 64 threads; each thread owns one pair: q pairs, then k pairs, then v pairs.
struct Params { nq: u32, nk: u32, half: u32, smax: u32, style: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<i32>;
@group(0) @binding(4) var<storage, read> tab: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

//!include rope_angle

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (idx >= p.nq + 2u * p.nk) { return; }
    let position = pos[0];
    let in_cache = position >= 0 && position < i32(p.smax);
    if (idx >= p.nq + p.nk) { // v: a copy
        let j = idx - p.nq - p.nk;
        let head = j / p.half;
        let src = 2u * j;
        if (in_cache) {
            let dst = (head * p.smax + u32(position)) * 2u * p.half + 2u * (j % p.half);
            v_cache[dst] = v[src];
            v_cache[dst + 1u] = v[src + 1u];
        }
        return;
    }
    let is_q = idx < p.nq;
    var j = idx;
    if (!is_q) { j = idx - p.nq; }
    let i = j % p.half;
    let ang = rope_angle(position, tab[i]);
    let c = cos(ang);
    let sn = sin(ang);
    // the pair's two elements within the head, and the head's first element
    var e0 = 2u * i;
    var e1 = e0 + 1u;
    if (p.style == 0u) {
        e0 = i;
        e1 = i + p.half;
    }
    let head0 = (j / p.half) * 2u * p.half;
    if (is_q) {
        let a = q[head0 + e0];
        let b = q[head0 + e1];
        q_out[head0 + e0] = a * c - b * sn;
        q_out[head0 + e1] = a * sn + b * c;
    } else if (in_cache) {
        let a = k[head0 + e0];
        let b = k[head0 + e1];
        let dst = ((j / p.half) * p.smax + u32(position)) * 2u * p.half;
        k_cache[dst + e0] = a * c - b * sn;
        k_cache[dst + e1] = a * sn + b * c;
    }
}
