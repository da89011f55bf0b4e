// The K types' super-block scales (include/wgml-quant.h: WGML_AB_K_MIN for Q4_K and Q5_K,
// WGML_AB_K6 for Q6_K): a group's (a, b) from its super-block's entry, exactly as the host
// unpacks the file's blocks (qw_format.c). The kind prelude (qweight.c) includes this file for
// a weight that holds them and writes the readers over its binding (kab_min_pair, kab6_pair).

// The f32 value of the f16 bits in h's low 16 bits: exact for every f16, subnormals included,
// in integer arithmetic so that no implementation's f16 conversion can flush a subnormal.
fn kab_f16(h: u32) -> f32 {
    let e = (h >> 10u) & 31u;
    let m = h & 1023u;
    var v = bitcast<f32>(((e + 112u) << 23u) | (m << 13u));
    if (e == 0u) { v = f32(m) * bitcast<f32>(0x33800000u); } // m · 2^-24
    if (e == 31u) { v = bitcast<f32>(0x7f800000u | (m << 13u)); }
    return select(v, -v, (h & 0x8000u) != 0u);
}

// Group j (0..7) of a Q4_K / Q5_K entry v (x: f16 d and dmin; y, z, w: the 12 scale bytes):
// (d·scale_j, -(dmin·min_j)). Groups 0..3 hold their 6-bit scale and min in the low bits of
// bytes j and j + 4; groups 4..7 take their low 4 bits from the nibbles of byte j + 4 and their
// top 2 from the spare top bits of bytes j - 4 (scale) and j (min).
fn kab_min_pair(v: vec4<u32>, j: u32) -> vec2<f32> {
    let sh = 8u * (j & 3u);
    let b0 = (v.y >> sh) & 255u;
    let b4 = (v.z >> sh) & 255u;
    let b8 = (v.w >> sh) & 255u;
    var sc = b0 & 63u;
    var mn = b4 & 63u;
    if (j >= 4u) {
        sc = (b8 & 15u) | ((b0 >> 6u) << 4u);
        mn = (b8 >> 4u) | ((b4 >> 6u) << 4u);
    }
    return vec2<f32>(kab_f16(v.x) * f32(sc), -(kab_f16(v.x >> 16u) * f32(mn)));
}

// Group j (0..15) of a Q6_K entry: d (the word holding its f32 bits) times the int8 scale in
// byte j % 4 of word sw; no minimum.
fn kab6_pair(d: u32, sw: u32, j: u32) -> vec2<f32> {
    let sc = bitcast<i32>(sw << (24u - 8u * (j & 3u))) >> 24u;
    return vec2<f32>(bitcast<f32>(d) * f32(sc), 0.0);
}
