// qw_requant: straight-through requant of an fp32 latent L[N, K] at the frozen (a, b), written
// into the codes in the layout the forward reads (in place; CODES is the only writable binding).
// Per element, quant(l, ab) from the kind prelude (qweight.c):
//   symmetric 4-bit (KIND 0): code = clamp(round(l / s), -8, 7) + 8, s == 0 gives 8;
//   with minimum (KIND 1, 3): code = clamp(round((l - b) / a), 0, 2^bits - 1), a == 0 gives 0;
//   signed 8-bit (KIND 2): code = clamp(round(l / a), -2^(bits-1), 2^(bits-1) - 1), a == 0
//   gives 0, stored as its low byte.
// WGSL's round() rounds half to even. Padding codes (k >= K) are PADC (8 or 0), as at upload.
// Workgroup: 256 threads; each thread owns one u32 word (CPW codes) of one row, reading its
// latents as CPW / 4 vec4 loads when K % CPW == 0 (LT = vec4<f32>), else guarded scalar loads.
// A word never straddles two groups (G >= 16, CPW = 4 when G = 16).
// The prelude gives KIND CPW FW G ABT group_ab quant PADC (qweight.c), LT and latw(base, k0).
struct Params { N: u32, K: u32, wpr: u32, ng: u32, total: u32 }

//!bindings read(L: array<LT>, AB: array<ABT>) write(CODES: array<u32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.total; }

fn item(idx: u32) {
    let n = idx / p.wpr;
    let k0 = (idx % p.wpr) * CPW;
    let ab = group_ab(n * p.ng + k0 / G);
    let lv = latw(n * p.K, k0);
    var word = 0u;
    for (var i = 0u; i < CPW; i++) {
        var c = PADC;
        if (k0 + i < p.K) { c = quant(lv[i], ab); }
        word |= c << (FW * i);
    }
    CODES[idx] = word;
}
