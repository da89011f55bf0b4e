// qw_xq_block: one block of x quantised to int8 in qw_quant_x's row format (qw_quant_x.wgsl says
// the format: d = max|x| / 127, q = round_half_even(x / d) in -127..127, s = d·Σq, the bytes in
// the order the weight's code words unpack). Not a kernel: qw_quant_x (a dispatch of its own),
// norm_add_rms (the normed row quantised for the integer-dot products that read it, where it is
// made) and qw_gemv (XQSTAGE: its staged x quantised once per workgroup) include it
// ("//!include qw_xq_block") and define
//   fn xq_src(i: u32) -> f32           x's element i (a flat index into the includer's x)
//   fn xq_put(f: u32, i: u32, v: u32)  word i of output f (the includer's outputs, 0 ..)
// xq_block(f, qb, pair, xb, kn, o, b, kp): block b (k = b·qb ..) of a row into output f: x's
// block starts at element xb, kn of its qb k lie inside K (past them x counts as 0), the output
// row starts at word o and kp is the row's padded K; qb and pair are qw_quant_x's QB and PAIR.

// the k (within the block) of byte c of packed word w
fn xq_elem(pair: bool, w: u32, c: u32) -> u32 {
    if (pair) { return (w / 2u) * 8u + 2u * c + w % 2u; }
    return w * 4u + c;
}

fn xq_block(f: u32, qb: u32, pair: bool, xb: u32, kn: u32, o: u32, b: u32, kp: u32) {
    let nb = kp / qb;
    var amax = 0.0;
    for (var j = 0u; j < kn; j++) { amax = max(amax, abs(xq_src(xb + j))); }
    var qsum = 0;
    let inv = select(0.0, 127.0 / amax, amax > 0.0);
    for (var w = 0u; w < qb / 4u; w++) {
        var word = 0u;
        for (var c = 0u; c < 4u; c++) {
            let j = xq_elem(pair, w, c);
            var q = 0;
            if (j < kn) { q = i32(clamp(round(xq_src(xb + j) * inv), -127.0, 127.0)); }
            qsum += q;
            word |= (bitcast<u32>(q) & 255u) << (8u * c);
        }
        xq_put(f, o + b * (qb / 4u) + w, word);
    }
    let d = amax / 127.0;
    xq_put(f, o + kp / 4u + b, bitcast<u32>(d));
    xq_put(f, o + kp / 4u + nb + b, bitcast<u32>(d * f32(qsum)));
}
