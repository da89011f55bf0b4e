// attn_decode: one decode step's attention in one dispatch (attn_decode_step in attn_decode.c,
// inference graphs only): RoPE of q and k at position pos (the pair style p.style as rope_kv.wgsl:
// 1 interleaved (2i, 2i+1), 0 half (i, i + D/2); the angle is the shared rope_angle, so the
// rotated values equal rope_kv's bit for bit), k and v written into row pos of the caches
// k_cache, v_cache [Hk, smax, D] (nothing when pos is outside 0..smax-1), and each query head
// attending to the cache rows [lo, L) with L = min(len, smax) and lo = L - window for a windowed
// layer (else 0), scores scaled by p.scale2 (the scale in log2 units).
// The keys [0, L) are cut into the n_chunk chunks evenly: chunk length CL = L / n_chunk rounded
// up to a multiple of WG, at least WG and at most CH = WG * KPT (n_chunk * CH >= smax >= L).
// The output per query head and chunk is the D unnormalised sums of 2^(s - m) v, the chunk's
// max score m and its sum of 2^(s - m): attn_combine.wgsl's layout, which merges the chunks (an
// empty chunk gives m = -3e38, 0, 0). With FINAL (one chunk) the kernel writes the normalised
// output [Hq, D] itself and there is nothing to merge.
// Workgroup: WG threads for one kv head (its G query heads) and one chunk. Thread t owns the
// chunk's keys t, t + WG, ... (KPT of them) for the scores, and the output elements d = t,
// t + WG, ... for the weighted sum of values (a loop over the chunk's keys, coalesced across
// threads). The maxima and sums of the G heads go through trees in workgroup memory. The
// workgroup whose chunk holds row pos writes the new k and v row first and makes it visible to
// itself with storageBarrier; no other workgroup reads that row.
// The prelude gives WG, D, HALF (D / 2), G, KPT, CH, FINAL.
struct Params { Hk: u32, smax: u32, n_chunk: u32, window: u32, style: u32, scale2: f32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> q: array<f32>;   // [Hk * G * D]
@group(0) @binding(1) var<storage, read> k: array<f32>;   // [Hk * D]
@group(0) @binding(2) var<storage, read> v: array<f32>;   // [Hk * D]
@group(0) @binding(3) var<storage, read> pos: array<i32>; // [1]
@group(0) @binding(4) var<storage, read> len: array<i32>; // [1]
@group(0) @binding(5) var<storage, read> tab: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(8) var<storage, read_write> part: array<f32>; // [Hk * G, n_chunk, D + 2]
@group(0) @binding(9) var<uniform> p: Params;

//!include rope_angle

var<workgroup> qs: array<f32, G * D>;   // the G heads' rotated q
var<workgroup> ps: array<f32, G * CH>;  // 2^(s - m) of the chunk's keys (0 outside [lo, L))
var<workgroup> red: array<f32, G * WG>; // the trees' partial maxima and sums
var<workgroup> len_wg: i32;
var<workgroup> pos_wg: i32;

// the two elements of pair i within a head
fn pair_e0(i: u32) -> u32 { return select(i, 2u * i, p.style == 1u); }
fn pair_e1(i: u32) -> u32 { return select(i + HALF, 2u * i + 1u, p.style == 1u); }

// the tree over red[g * WG ..] for each head g: max (is_max) or sum, result in red[g * WG]
fn tree(lid: u32, is_max: bool) {
    for (var h = WG / 2u; h > 0u; h = h / 2u) {
        if (lid < h) {
            for (var g = 0u; g < G; g++) {
                let a = red[g * WG + lid];
                let b = red[g * WG + lid + h];
                red[g * WG + lid] = select(a + b, max(a, b), is_max);
            }
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg_all = wid.x + wid.y * nwg.x;
    if (wg_all >= p.Hk * p.n_chunk) { return; } // uniform across the workgroup
    let kh = wg_all / p.n_chunk;
    let c = wg_all % p.n_chunk;
    if (lid == 0u) {
        len_wg = len[0];
        pos_wg = pos[0];
    }
    let L = min(workgroupUniformLoad(&len_wg), i32(p.smax));
    let position = workgroupUniformLoad(&pos_wg);
    var lo = 0;
    if (p.window > 0u) { lo = max(L - i32(p.window), 0); }
    let cl = min(max((u32(max(L, 1)) + p.n_chunk * WG - 1u) / (p.n_chunk * WG), 1u) * WG, CH);
    let c0 = i32(c * cl);
    let k0 = max(c0, lo);
    let k1 = min(c0 + i32(cl), L);
    // the G query heads, rotated
    for (var e = lid; e < G * HALF; e += WG) {
        let g = e / HALF;
        let i = e % HALF;
        let ang = rope_angle(position, tab[i]);
        let cs = cos(ang);
        let sn = sin(ang);
        let src = (kh * G + g) * D;
        let a = q[src + pair_e0(i)];
        let b = q[src + pair_e1(i)];
        qs[g * D + pair_e0(i)] = a * cs - b * sn;
        qs[g * D + pair_e1(i)] = a * sn + b * cs;
    }
    // the new row, by the workgroup whose chunk holds it
    // (the last chunk's when pos lies past the chunks, as it may when pos >= len)
    if (position >= 0 && position < i32(p.smax) && min(u32(position) / cl, p.n_chunk - 1u) == c) {
        let row = (kh * p.smax + u32(position)) * D;
        for (var i = lid; i < HALF; i += WG) {
            let ang = rope_angle(position, tab[i]);
            let cs = cos(ang);
            let sn = sin(ang);
            let a = k[kh * D + pair_e0(i)];
            let b = k[kh * D + pair_e1(i)];
            k_cache[row + pair_e0(i)] = a * cs - b * sn;
            k_cache[row + pair_e1(i)] = a * sn + b * cs;
        }
        for (var d = lid; d < D; d += WG) { v_cache[row + d] = v[kh * D + d]; }
        storageBarrier();
    }
    workgroupBarrier(); // qs complete
    // scores of this thread's keys
    var s: array<array<f32, KPT>, G>;
    var m: array<f32, G>;
    for (var g = 0u; g < G; g++) { m[g] = -3.0e38; }
    for (var u = 0u; u < KPT; u++) {
        let j = c0 + i32(u * WG + lid);
        var acc: array<f32, G>;
        // zeroed here, not by the declaration: a declaration inside a loop is hoisted to the
        // function's start by the compiler (naga), so its zero initialisation happens once
        for (var g = 0u; g < G; g++) { acc[g] = 0.0; }
        if (j >= k0 && j < k1) {
            let kb = (kh * p.smax + u32(j)) * D;
            for (var d = 0u; d < D; d += 4u) {
                let kv = vec4<f32>(k_cache[kb + d], k_cache[kb + d + 1u], k_cache[kb + d + 2u], k_cache[kb + d + 3u]);
                for (var g = 0u; g < G; g++) {
                    acc[g] += dot(kv, vec4<f32>(qs[g * D + d], qs[g * D + d + 1u], qs[g * D + d + 2u], qs[g * D + d + 3u]));
                }
            }
            for (var g = 0u; g < G; g++) {
                s[g][u] = acc[g] * p.scale2;
                m[g] = max(m[g], s[g][u]);
            }
        } else {
            for (var g = 0u; g < G; g++) { s[g][u] = -3.0e38; }
        }
    }
    for (var g = 0u; g < G; g++) { red[g * WG + lid] = m[g]; }
    workgroupBarrier();
    tree(lid, true);
    for (var g = 0u; g < G; g++) { m[g] = red[g * WG]; }
    workgroupBarrier(); // the maxima read before red is reused
    var l: array<f32, G>;
    for (var g = 0u; g < G; g++) { l[g] = 0.0; }
    for (var u = 0u; u < KPT; u++) {
        let j = c0 + i32(u * WG + lid);
        let ok = j >= k0 && j < k1;
        for (var g = 0u; g < G; g++) {
            let e = select(0.0, exp2(s[g][u] - m[g]), ok);
            ps[g * CH + u * WG + lid] = e;
            l[g] += e;
        }
    }
    for (var g = 0u; g < G; g++) { red[g * WG + lid] = l[g]; }
    workgroupBarrier();
    tree(lid, false); // also orders the ps writes before the reads below
    // the weighted sums of the values
    let jlo = max(k0 - c0, 0);
    let jhi = max(k1 - c0, 0);
    for (var d = lid; d < D; d += WG) {
        var o: array<f32, G>;
        for (var g = 0u; g < G; g++) { o[g] = 0.0; } // (as acc above)
        for (var jj = jlo; jj < jhi; jj++) {
            let val = v_cache[(kh * p.smax + u32(c0 + jj)) * D + d];
            for (var g = 0u; g < G; g++) { o[g] += ps[g * CH + u32(jj)] * val; }
        }
        for (var g = 0u; g < G; g++) {
            if (FINAL) {
                let lg = red[g * WG];
                part[(kh * G + g) * D + d] = select(0.0, o[g] / lg, lg > 0.0);
            } else {
                part[((kh * G + g) * p.n_chunk + c) * (D + 2u) + d] = o[g];
            }
        }
    }
    if (!FINAL && lid == 0u) {
        for (var g = 0u; g < G; g++) {
            let b = ((kh * G + g) * p.n_chunk + c) * (D + 2u);
            part[b + D] = m[g];
            part[b + D + 1u] = red[g * WG];
        }
    }
}
