// qw_mm_lora: the operands of a LoRA term folded into qw_mm.wgsl's reduction (LORA), included by
// the prelude of a folded product (qw_mm.c): L [M, lr] (H = x·Aᵀ in the forward, dH = s·dy·B
// in the input gradient) read scaled by s (p.lscale, an f32's bits), and R: the up matrix
// B [C, lr] forward, A [lr, C] with TRANS. The callers' bounds keep m < M, j < lr, c < C.
//!bindings read(LH: array<f32>, LR: array<f32>)

fn lora_a(m: u32, j: u32) -> f32 { return bitcast<f32>(p.lscale) * LH[m * p.lr + j]; }

fn lora_w(j: u32, c: u32) -> f32 {
    if (TRANS) { return LR[j * p.C + c]; }
    return LR[c * p.lr + j];
}
