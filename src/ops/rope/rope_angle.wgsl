// rope_angle: the rotary angle of one pair and the rotation of one element, shared by
// rope_apply.wgsl, rope_kv.wgsl and attn_decode.wgsl ("//!include rope_angle"). Not a kernel.
//
// Precision: the angle is reduced modulo one turn exactly. The table (rope_freq_table in
// rope.c) holds, per pair, the frequency in turns g = theta^(-2i/D) / 2pi split into g1 + g2
// (12 significant bits each) + g3 (the rest), computed in double on the host. The position is
// split into ph * 4096 + pl (both below 4096 when |pos| < 2^24), so each product ph*4096*g1,
// ph*4096*g2, pl*g1, pl*g2 is exact in f32 and its fractional part is exact; the g3 products
// are tiny. The sum of the fractional parts is reduced once more to [-1/2, 1/2] turn, so the
// angle handed to sin/cos lies in [-pi, pi] with an error near 1e-7 rad at any position.
fn turn_frac(v: f32) -> f32 { return v - round(v); }

fn rope_angle(position: i32, g: vec4<f32>) -> f32 {
    let ph = f32(position >> 12u) * 4096.0;
    let pl = f32(position & 4095);
    var t = turn_frac(ph * g.x) + turn_frac(ph * g.y) + turn_frac(pl * g.x) + turn_frac(pl * g.y);
    t = t + turn_frac(ph * g.z) + pl * g.z;
    return turn_frac(t) * 6.283185307179586;
}

// Element e of a head of 2 * half elements: its pair partner (interleaved pairs (2i, 2i+1), else
// (i, i + half)), its pair's index, and its value rotated from x_e (e itself) and x_o (the
// partner) with the pair's table entry g: the pair (e0, e1) becomes (x0 c - x1 s, x0 s + x1 c),
// rope_apply.wgsl's expressions, so a thread that owns one element matches it bit for bit.
fn rope_partner(e: u32, half: u32, interleaved: bool) -> u32 {
    if (interleaved) { return e ^ 1u; }
    return select(e - half, e + half, e < half);
}
fn rope_pair_index(e: u32, half: u32, interleaved: bool) -> u32 { return select(e % half, e / 2u, interleaved); }
fn rope_rotated(x_e: f32, x_o: f32, e: u32, half: u32, interleaved: bool, position: i32, g: vec4<f32>) -> f32 {
    let ang = rope_angle(position, g);
    return rope_rotated_cs(x_e, x_o, e, half, interleaved, vec2<f32>(sc_cos(ang), sc_sin(ang)));
}
// the same from the pair's cos and sin (cs), for a caller that shares them between elements
fn rope_rotated_cs(x_e: f32, x_o: f32, e: u32, half: u32, interleaved: bool, cs: vec2<f32>) -> f32 {
    let first = select(e < half, e % 2u == 0u, interleaved);
    return select(x_o * cs.y + x_e * cs.x, x_e * cs.x - x_o * cs.y, first);
}

// sin and cos of such an angle: sincos.wgsl's (WGSL's builtins may be off by 2^-11)
alias SC = f32;
//!include sincos
