// rope_angle: the rotary angle of one pair, shared by rope_apply.wgsl and rope_kv.wgsl
// ("//!include rope_angle"). Not a kernel.
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

// sin and cos of such an angle: sincos.wgsl's (WGSL's builtins may be off by 2^-11)
alias SC = f32;
//!include sincos
