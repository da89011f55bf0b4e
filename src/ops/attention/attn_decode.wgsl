// attn_decode: one decode step's attention in one dispatch (attn_decode_step in attn_decode.c,
// inference graphs only): RoPE of q and k at position pos (the pair style p.style as rope_kv.wgsl:
// 1 interleaved (2i, 2i+1), 0 half (i, i + D/2); the angle is the shared rope_angle), k and v
// written into row pos of the caches k_cache, v_cache [Hk, smax, D] (nothing when pos is outside
// 0..smax-1), and each query head attending to the cache rows [lo, L) with L = min(len, smax)
// and lo = L - window for a windowed layer (else 0), scores scaled by p.scale2 (the scale in
// log2 units).
// The keys [0, L) are cut into the n_chunk chunks evenly: chunk length CL = L / n_chunk rounded
// up to a multiple of 64, at least 64 and at most CH = 64 * KPT (n_chunk * CH >= smax >= L).
// The output per query head and chunk is the D unnormalised sums of 2^(s - m) v, the chunk's
// max score m and its sum of 2^(s - m): attn_combine.wgsl's layout, which merges the chunks (an
// empty chunk gives m = -3e38, 0, 0). With FINAL (one chunk) the kernel writes the normalised
// output [Hq, D] itself and there is nothing to merge.
// Workgroup: WG = 256 threads for one kv head (its G query heads) and one chunk, in four
// layouts. Rotation: the HALF pairs' cos and sin once (csw), then one element of the G query
// heads a thread; it took each head's 4 elements a thread and their pairs' sin and cos each
// (2 G times per pair), 64 busy threads of 256 at G D = 256 (H100, 2026-12-07: Llama-3.2-1B
// decode at 577 positions 771.5 / 773.7 -> 783.7 / 783.6 tok/s, the step's attention alone
// 10.46 -> 9.89 us, `wgml bench attention --decode`). Scores: 64 keys at a time, LPK = 4
// lanes per key, each lane the vec4s i4 = lane, lane + 4, ... of the key's row against the G rotated query rows (in workgroup memory), the
// lanes' partial dot products added through workgroup memory; KPT such passes, the scores kept
// in workgroup memory. Values: thread (slice sl, vec4 d4) of NS = WG / D4 slices takes the keys
// sl, sl + NS, ... of its vec4 column for the G heads with the slice's own softmax (its max
// score, its sum of 2^(s - m)), and the NS slices are merged at the end as attn_combine merges
// chunks: no tree over the whole workgroup (the two trees of 8 barriers each it replaced: H100,
// 8B decode at 4,096 positions 188.3 -> 191.4 tok/s, SmolLM2's shape at 512 901 -> 936), and
// the loads in flight per thread are few and independent.
// The workgroup whose chunk holds row pos writes the new k and v row first and makes it visible
// to itself with storageBarrier; no other workgroup reads that row.
// With QKN (architectures with q/k norms) each head of q and k is RMSNormed over D with the
// weights qn, kn (x * rsqrt(mean(x^2) + eps) * w, as rms_norm) before its rotation; the G + 1
// heads' sums of squares go through one tree.
// The prelude gives WG, D, D4 (D / 4, a power of two dividing WG), HALF, G, KPT, CH, LPK, NS,
// FINAL, QKN, and the bindings: q [Hk * G * D], k and v [Hk * D], pos and len [1], tab, (qn, kn
// [D] with QKN,) part [Hk * G, n_chunk, D + 2] (FINAL: [Hk * G, D]), the uniform p, the caches
// k_cache and v_cache (either form, kv_cache.h) with their accessors over vec4s (k_cache_get(i),
// k_cache_put(i, x), ...); qn_at(e), kn_at(e) (1 without QKN).
struct Params { Hk: u32, smax: u32, n_chunk: u32, window: u32, style: u32, scale2: f32, eps: f32, _p1: u32 }

//!include rope_angle

const KL: u32 = (D4 + LPK - 1u) / LPK; // vec4s of a key a lane of the scores
const VB: u32 = 4u; // values loaded together by a thread of the weighted sums

var<workgroup> qs: array<vec4<f32>, G * D4>; // the G heads' rotated q
var<workgroup> ss: array<f32, G * CH>;      // the chunk's scores (-3e38 outside [lo, L))
var<workgroup> red: array<f32, (G + 1u) * WG>; // the lanes' partial dot products; QKN's tree
var<workgroup> ov: array<vec4<f32>, G * WG>; // the value slices' partial sums
var<workgroup> sml: array<vec2<f32>, G * NS>; // the slices' max score and sum of 2^(s - m)
var<workgroup> len_wg: i32;
var<workgroup> pos_wg: i32;

var<workgroup> csw: array<vec2<f32>, HALF>; // each pair's cos and sin at the step's position

// element e of a head rotated at position (rope_angle.wgsl's rope_rotated_cs, the pair style
// p.style, the pair's cos and sin from csw)
fn partner(e: u32) -> u32 { return rope_partner(e, HALF, p.style == 1u); }
fn rotated(x_e: f32, x_o: f32, e: u32) -> f32 {
    let il = p.style == 1u;
    return rope_rotated_cs(x_e, x_o, e, HALF, il, csw[rope_pair_index(e, HALF, il)]);
}

// the sum over red[g * WG ..] for each head g < ng by a tree, result in red[g * WG]
fn tree_sum(lid: u32, ng: u32) {
    for (var h = WG / 2u; h > 0u; h = h / 2u) {
        if (lid < h) {
            for (var g = 0u; g < ng; g++) { red[g * WG + lid] += red[g * WG + lid + h]; }
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
    let cl = min(max((u32(max(L, 1)) + p.n_chunk * 64u - 1u) / (p.n_chunk * 64u), 1u) * 64u, CH);
    let c0 = i32(c * cl);
    let k0 = max(c0, lo);
    let k1 = min(c0 + i32(cl), L);
    // QKN: the norms' scales of the G query heads and the key head (index G)
    var rn: array<f32, G + 1u>;
    for (var g = 0u; g <= G; g++) { rn[g] = 1.0; }
    if (QKN) {
        for (var g = 0u; g <= G; g++) {
            var s2 = 0.0;
            for (var e = lid; e < D; e += WG) {
                var x: f32;
                if (g < G) { x = q[(kh * G + g) * D + e]; } else { x = k[kh * D + e]; }
                s2 += x * x;
            }
            red[g * WG + lid] = s2;
        }
        workgroupBarrier();
        tree_sum(lid, G + 1u);
        for (var g = 0u; g <= G; g++) { rn[g] = inverseSqrt(red[g * WG] / f32(D) + p.eps); }
        workgroupBarrier(); // read by all before red is reused
    }
    // each pair's cos and sin once (rope_angle.wgsl's angle), then the G query heads, (normed
    // and) rotated, one element a thread
    for (var i = lid; i < HALF; i += WG) {
        let ang = rope_angle(position, tab[i]);
        csw[i] = vec2<f32>(sc_cos(ang), sc_sin(ang));
    }
    workgroupBarrier();
    for (var i = lid; i < G * D; i += WG) {
        let base = (kh * G + i / D) * D;
        let e = i % D;
        let o = partner(e);
        let rg = rn[i / D];
        qs[i / 4u][i % 4u] = rotated(q[base + e] * rg * qn_at(e), q[base + o] * rg * qn_at(o), e);
    }
    // the new row, by the workgroup whose chunk holds it (the last chunk's when pos lies past
    // the chunks, as it may when pos >= len)
    if (position >= 0 && position < i32(p.smax) && min(u32(position) / cl, p.n_chunk - 1u) == c) {
        let row4 = (kh * p.smax + u32(position)) * D4;
        for (var i4 = lid; i4 < D4; i4 += WG) {
            var r: vec4<f32>;
            for (var cc = 0u; cc < 4u; cc++) {
                let e = i4 * 4u + cc;
                let o = partner(e);
                r[cc] = rotated(k[kh * D + e] * rn[G] * kn_at(e), k[kh * D + o] * rn[G] * kn_at(o), e);
            }
            k_cache_put(row4 + i4, r);
            let vb = kh * D + i4 * 4u;
            v_cache_put(row4 + i4, vec4<f32>(v[vb], v[vb + 1u], v[vb + 2u], v[vb + 3u]));
        }
        storageBarrier();
    }
    workgroupBarrier(); // qs complete
    // scores, 64 keys a pass
    let ln = lid % LPK;
    for (var u = 0u; u < KPT; u++) {
        let kk = u * 64u + lid / LPK;
        let j = c0 + i32(kk);
        let valid = j >= k0 && j < k1;
        var acc: array<f32, G>;
        // zeroed here, not by the declaration: a declaration inside a loop is hoisted to the
        // function's start by the compiler (naga), so its zero initialisation happens once
        for (var g = 0u; g < G; g++) { acc[g] = 0.0; }
        if (valid) {
            // the lane's KL vec4s of the key (i4 = lane + t * LPK; zeros past D4) loaded before
            // any is used: a count known at compile time, so the loads are issued together
            // instead of one latency each
            let kb = (kh * p.smax + u32(j)) * D4;
            var kv: array<vec4<f32>, KL>;
            for (var t = 0u; t < KL; t++) {
                let i4 = ln + t * LPK;
                kv[t] = select(vec4<f32>(0.0), k_cache_get(kb + min(i4, D4 - 1u)), i4 < D4);
            }
            for (var t = 0u; t < KL; t++) {
                let i4 = min(ln + t * LPK, D4 - 1u);
                for (var g = 0u; g < G; g++) { acc[g] += dot(kv[t], qs[g * D4 + i4]); }
            }
        }
        for (var g = 0u; g < G; g++) { red[g * WG + lid] = acc[g]; }
        workgroupBarrier();
        if (ln == 0u) {
            for (var g = 0u; g < G; g++) {
                var s = 0.0;
                for (var l2 = 0u; l2 < LPK; l2++) { s += red[g * WG + lid + l2]; }
                ss[g * CH + kk] = select(-3.0e38, s * p.scale2, valid);
            }
        }
        workgroupBarrier();
    }
    // the weighted sums of the values, a softmax per slice: thread (sl, d4) takes the keys
    // jlo + sl, jlo + sl + NS, ... < jhi; per head the slice's max score m (a pass over ss), then
    // o = sum 2^(s - m) v and l = sum 2^(s - m) (the slice's threads compute the same m and l)
    let d4 = lid % D4;
    let sl = lid / D4;
    let jlo = max(k0 - c0, 0);
    let jhi = max(k1 - c0, 0);
    var m: array<f32, G>;
    var l: array<f32, G>;
    var o: array<vec4<f32>, G>;
    for (var g = 0u; g < G; g++) { m[g] = -3.0e38; l[g] = 0.0; o[g] = vec4<f32>(0.0); }
    for (var jj = jlo + i32(sl); jj < jhi; jj += i32(NS)) {
        for (var g = 0u; g < G; g++) { m[g] = max(m[g], ss[g * CH + u32(jj)]); }
    }
    // VB keys' values loaded before they are used, then the rest one at a time
    let vrow = kh * p.smax + u32(c0);
    var jj = jlo + i32(sl);
    for (; jj + i32((VB - 1u) * NS) < jhi; jj += i32(VB * NS)) {
        var val: array<vec4<f32>, VB>;
        for (var b = 0u; b < VB; b++) { val[b] = v_cache_get((vrow + u32(jj) + b * NS) * D4 + d4); }
        for (var b = 0u; b < VB; b++) {
            for (var g = 0u; g < G; g++) {
                let e = exp2(ss[g * CH + u32(jj) + b * NS] - m[g]);
                l[g] += e;
                o[g] += e * val[b];
            }
        }
    }
    for (; jj < jhi; jj += i32(NS)) {
        let val = v_cache_get((vrow + u32(jj)) * D4 + d4);
        for (var g = 0u; g < G; g++) {
            let e = exp2(ss[g * CH + u32(jj)] - m[g]);
            l[g] += e;
            o[g] += e * val;
        }
    }
    for (var g = 0u; g < G; g++) { ov[g * WG + lid] = o[g]; }
    if (d4 == 0u) {
        for (var g = 0u; g < G; g++) { sml[g * NS + sl] = vec2<f32>(m[g], l[g]); }
    }
    workgroupBarrier();
    // the NS slices merged: M = the largest slice max, each slice weighted by 2^(m - M) (an
    // empty slice, m = -3e38 and sums 0, adds nothing; an empty chunk gives -3e38, 0, 0)
    if (sl == 0u) {
        for (var g = 0u; g < G; g++) {
            var mx = -3.0e38;
            for (var s2 = 0u; s2 < NS; s2++) { mx = max(mx, sml[g * NS + s2].x); }
            var t = vec4<f32>(0.0);
            var lg = 0.0;
            for (var s2 = 0u; s2 < NS; s2++) {
                let w = exp2(sml[g * NS + s2].x - mx);
                t += ov[g * WG + s2 * D4 + d4] * w;
                lg += sml[g * NS + s2].y * w;
            }
            for (var cc = 0u; cc < 4u; cc++) {
                if (FINAL) {
                    part[(kh * G + g) * D + d4 * 4u + cc] = select(0.0, t[cc] / lg, lg > 0.0);
                } else {
                    part[((kh * G + g) * p.n_chunk + c) * (D + 2u) + d4 * 4u + cc] = t[cc];
                }
            }
            if (!FINAL && d4 == 0u) {
                let b = ((kh * G + g) * p.n_chunk + c) * (D + 2u);
                part[b + D] = mx;
                part[b + D + 1u] = lg;
            }
        }
    }
}
