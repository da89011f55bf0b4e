// The K types' super-block scales (include/wgml-quant.h: WGML_AB_K_MIN for Q4_K and Q5_K,
// WGML_AB_K6 for Q6_K): a group's (a, b) from its super-block's entry, exactly as the host
// unpacks the file's blocks (qw_format.c, which writes the entries). The kind prelude (qweight.c)
// includes this file for a weight that holds them and writes the readers over its binding. A
// group costs a few integer operations and two multiplies: the d's are held as f32 (exact) and
// the K_MIN scales unpacked to half words, since unpacking the file's f16 and 12-byte packing
// per group made the integer-dot GEMV up to 1.37x slower (bench/NOTES.md).

// Group j (0..7) of a Q4_K / Q5_K entry: d and dmin (the words holding their f32 bits) and the
// word whose half j % 2 holds the group's 6-bit scale (bits 0..5) and min (bits 8..13):
// (d·scale_j, -(dmin·min_j)).
fn kab_min_pair(d: u32, dmin: u32, sw: u32, j: u32) -> vec2<f32> {
    let v = sw >> (16u * (j & 1u));
    return vec2<f32>(bitcast<f32>(d) * f32(v & 63u), -(bitcast<f32>(dmin) * f32((v >> 8u) & 63u)));
}

// Group j (0..15) of a Q6_K entry: d (the word holding its f32 bits) times the int8 scale in
// byte j % 4 of word sw; no minimum.
fn kab6_pair(d: u32, sw: u32, j: u32) -> vec2<f32> {
    let sc = bitcast<i32>(sw << (24u - 8u * (j & 3u))) >> 24u;
    return vec2<f32>(bitcast<f32>(d) * f32(sc), 0.0);
}
