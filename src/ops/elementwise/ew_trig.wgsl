// ew_trig: sin and cos of the elementwise ops and their gradients (included by ew_unary.wgsl
// and ew_unary_bwd.wgsl, which define V): ew_sin / ew_cos, sincos.wgsl's after the reduction
// below.
//
// WGSL specifies sin and cos only on [-pi, pi], so v is first reduced to r = v - 2 pi k,
// k = round(v / 2 pi), with 2 pi split in three (C1 = 6.28125 with 8 significant bits, C2 with
// 12, C3 the rest): k C1 and k C2 are exact products while |k| < 2^12 and v - k C1 is exact
// (the two are within a factor 2), so r keeps its accuracy for |v| up to ~2.5e4 without relying
// on a fused multiply-add (which a driver may split).
fn ew_reduce_2pi(v: V) -> V {
    let k = round(v * 0.15915494309189535);
    return ((v - k * 6.28125) - k * 0.0019354820251464844) - k * -1.7484555314695172e-07;
}

alias SC = V;
//!include sincos
fn ew_sin(v: V) -> V { return sc_sin(ew_reduce_2pi(v)); }
fn ew_cos(v: V) -> V { return sc_cos(ew_reduce_2pi(v)); }
