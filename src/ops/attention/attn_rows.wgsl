// The row layout of attention's output, shared by attn_sdpa and attn_combine ("//!include
// attn_rows" after a uniform p with fields Hkv, G and Sq): query row r (= g * Sq + i) of kv head
// bh (= b * Hkv + hkv), row bh * G * Sq + r of the head-first layout [B, Hq, Sq, D], is row
// (b * Sq + i) * Hq + hkv * G + g of [B, Sq, Hq, D], the rows the o projection reads.
fn row_major(bh: u32, r: u32) -> u32 {
    let b = bh / p.Hkv;
    let h = (bh % p.Hkv) * p.G + r / p.Sq;
    return (b * p.Sq + r % p.Sq) * p.Hkv * p.G + h;
}
