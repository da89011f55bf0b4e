// Exact conversions between small integers and f32 through the mantissa of 2^23 ("//!include
// qw_cvt"; not a kernel): an integer v goes into the mantissa of a power of two whose last
// mantissa bit is worth 1, and that power is subtracted exactly, one bitwise operation (or an
// integer add) and one float add, no rounding anywhere. Where they serve today: the int8 kernels'
// sums (cvt_acc, cvt_i2f: a dot-product sum accumulated onto the bits of 1.5·2^23 is read with
// one subtraction), x rounded to int8 (cvt_round_pack), the kind prelude's code_f (the tiled
// GEMMs' and the embedding's codes) and the peak probe's 2^23 kind. Not the f32 GEMV's codes:
// there a conversion instruction measured faster. These came in on the guess that NVIDIA converts
// at a quarter of its integer rate; `wgml bench peak` on the H100 found a conversion step at about
// the rate of the integer operations around it (bench/NOTES.md, 2026-12-07).

// f32(v) for v < 2^23: 2^23 + v as bits, less 2^23 (cvt_u2f1 one value)
fn cvt_u2f(v: vec4<u32>) -> vec4<f32> { return bitcast<vec4<f32>>(v | vec4<u32>(0x4B000000u)) - vec4<f32>(8388608.0); }
fn cvt_u2f1(v: u32) -> f32 { return bitcast<f32>(v | 0x4B000000u) - 8388608.0; }

// f32 of a signed byte: the low byte b of v, as an int8 c, is c + 128 = b ^ 0x80 in 0..255,
// then less 2^23 + 128
fn cvt_i8(v: u32) -> f32 { return bitcast<f32>(((v & 255u) ^ 0x80u) | 0x4B000000u) - 8388736.0; }

// An i32 accumulator that starts at CVT_I0 (the bits of 1.5·2^23) and to which integers of
// |sum| < 2^22 are added holds the f32 1.5·2^23 + sum: cvt_acc gives the sum back exactly;
// cvt_i2f(v) is f32(v) for |v| < 2^22 the same way
const CVT_I0: i32 = 0x4B400000;
fn cvt_acc(a: vec4<i32>) -> vec4<f32> { return bitcast<vec4<f32>>(a) - vec4<f32>(12582912.0); }
fn cvt_i2f(v: i32) -> f32 { return bitcast<f32>(CVT_I0 + v) - 12582912.0; }

// The int8 of round-half-even(v) for |v| <= 127 (after the caller's clamp), as the low byte of
// the bits of v + 1.5·2^23 (its last mantissa bit is worth 1, so the add rounds to an integer,
// half to even as WGSL's round); the four low bytes packed as one word, element i in byte i
fn cvt_round_pack(v: vec4<f32>) -> u32 {
    let b = bitcast<vec4<u32>>(v + vec4<f32>(12582912.0)) & vec4<u32>(255u);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
