// ew_cast: out = x converted to another dtype, element by element, as PyTorch's .to(dtype):
//   f32 -> i32: truncation toward zero, saturated to the i32 range, NaN -> 0 (PyTorch leaves
//               out-of-range and NaN undefined; this pins them);
//   i32 -> f32: the nearest f32 (exact up to 2^24 in magnitude);
//   f32 / i32 -> bool: x != 0 (NaN is true, as in PyTorch); bool -> f32 / i32: 0 or 1.
// Every buffer is bound as u32 words: f32 and i32 elements are bitcast, bools are bytes, four
// to a word (element i in bits 8*(i%4)..). The prelude (cast.c) supplies IN and OUT: 0 f32,
// 1 i32, 3 bool (wgml_dtype's numbering).
// Workgroup: 256 threads; a thread owns four consecutive elements (one output word when the
// output is bool, and then it writes the word whole with the bytes past the end zeroed).
struct Params { n: u32, nw: u32, pad0: u32, pad1: u32 }

//!bindings read(x: array<u32>) write(out: array<u32>) uniform(p: Params)

// Bool element i: its byte is non-zero.
fn bool_at(i: u32) -> bool { return ((x[i >> 2u] >> ((i & 3u) * 8u)) & 255u) != 0u; }

// Element i as f32 and as i32 (whichever the conversion needs), and whether it is non-zero.
fn load_f(i: u32) -> f32 {
    if (IN == 0u) { return bitcast<f32>(x[i]); }
    if (IN == 1u) { return f32(bitcast<i32>(x[i])); }
    return select(0.0, 1.0, bool_at(i));
}
fn load_i(i: u32) -> i32 {
    if (IN == 0u) {
        let f = bitcast<f32>(x[i]);
        // NaN by its bits (a comparison f != f may be folded away by the shader compiler)
        if ((x[i] & 0x7fffffffu) > 0x7f800000u) { return 0; }
        if (f >= 2147483648.0) { return 2147483647; }
        if (f < -2147483648.0) { return -2147483647 - 1; }
        return i32(f); // WGSL's f32 -> i32 truncates toward zero
    }
    if (IN == 1u) { return bitcast<i32>(x[i]); }
    return select(0, 1, bool_at(i));
}
fn nonzero(i: u32) -> bool {
    if (IN == 0u) { return (x[i] & 0x7fffffffu) != 0u; } // +-0 are false, NaN is true
    if (IN == 1u) { return x[i] != 0u; }
    return bool_at(i);
}

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.nw; }

fn item(w: u32) {
    if (OUT == 3u) {
        var word = 0u;
        for (var e = 0u; e < 4u; e++) {
            let i = 4u * w + e;
            if (i < p.n && nonzero(i)) { word |= 1u << (8u * e); }
        }
        out[w] = word;
        return;
    }
    for (var e = 0u; e < 4u; e++) {
        let i = 4u * w + e;
        if (i >= p.n) { return; }
        if (OUT == 0u) { out[i] = bitcast<u32>(load_f(i)); } else { out[i] = bitcast<u32>(load_i(i)); }
    }
}
