// qw_gemv's integer forms (I8X), included by its prelude only where the adapter has WGSL's
// packed_4x8_integer_dot_product (without it the prelude gives stubs that are never called).
// I8X: the block's x quantised to int8 (q = round(x / d), d = max|x| / 127) and packed in the
// codes' byte order: 4-bit words split into even codes (low nibbles) and odd (high), 8-bit words
// as they are; then four codes per dot4I8Packed, exact in i32, and no int-to-float conversion
// per code (the f32 form's bound on the H200: every kind ran at about the same weights per
// second, whatever its bytes, bench/NOTES.md 2026-12-05).
// (G = 16: each half block has its own d, inv_lo for x[0..15] and inv_hi for x[16..31], as
// qw_quant_x's 16-k blocks; else inv_lo = inv_hi). q = round(x / d) clamped to -127..127, as
// qw_quant_x, so a decode step's products equal the prefill GEMM's; rounded and packed through
// qw_cvt (no float-to-int conversion instruction: 32 a block for every thread were as many as
// the f32 form's one per code over 8 rows would be).
//!include qw_cvt
fn qpack(v: vec4<f32>, inv: f32) -> u32 { return cvt_round_pack(clamp(v * inv, vec4<f32>(-127.0), vec4<f32>(127.0))); }

fn quant_block(xs: array<vec4<f32>, 8>, inv_lo: f32, inv_hi: f32) -> array<u32, 8> {
    var q: array<u32, 8>;
    for (var j = 0u; j < 4u; j++) {
        let lo = xs[2u * j];
        let hi = xs[2u * j + 1u];
        if (CPW == 8u) {
            q[2u * j] = qpack(vec4<f32>(lo.x, lo.z, hi.x, hi.z), inv_lo);
            q[2u * j + 1u] = qpack(vec4<f32>(lo.y, lo.w, hi.y, hi.w), inv_lo);
        } else {
            let inv = select(inv_hi, inv_lo, j < 2u);
            q[2u * j] = qpack(lo, inv);
            q[2u * j + 1u] = qpack(hi, inv);
        }
    }
    return q;
}

// I8X: sum of code times q over the words [h, h + 4) of a block (8-bit: one vec4<u32> load;
// 4-bit: the whole block, h = 0)
fn idot(cw: vec4<u32>, q: array<u32, 8>, h: u32) -> i32 {
    if (CPW == 8u) {
        let m = 0x0F0F0F0Fu;
        return dot4I8Packed(cw.x & m, q[0]) + dot4I8Packed((cw.x >> 4u) & m, q[1]) +
               dot4I8Packed(cw.y & m, q[2]) + dot4I8Packed((cw.y >> 4u) & m, q[3]) +
               dot4I8Packed(cw.z & m, q[4]) + dot4I8Packed((cw.z >> 4u) & m, q[5]) +
               dot4I8Packed(cw.w & m, q[6]) + dot4I8Packed((cw.w >> 4u) & m, q[7]);
    }
    return dot4I8Packed(cw.x, q[h]) + dot4I8Packed(cw.y, q[h + 1u]) + dot4I8Packed(cw.z, q[h + 2u]) +
           dot4I8Packed(cw.w, q[h + 3u]);
}

// I8X: the sum of the codes q in the words [h, h + 4) (the block's first or second half of x)
fn qsum(q: array<u32, 8>, h: u32) -> i32 {
    let ones = 0x01010101u;
    return dot4I8Packed(q[h], ones) + dot4I8Packed(q[h + 1u], ones) + dot4I8Packed(q[h + 2u], ones) +
           dot4I8Packed(q[h + 3u], ones);
}
