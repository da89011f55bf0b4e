// qw_quant_x: the activations X[M, K] (f32) quantised per block of QB (32, or 16 for a weight
// with G = 16) consecutive k to int8 for the integer-dot GEMM (qw_mm_i8.wgsl):
//   d = max |x| / 127 over the block, q = round_half_even(x / d) in -127..127 (0 when d = 0),
// kept with s = d·Σq, the sum of the quantised block (the product's offset term b·Σx̂ uses it,
// so that the product is exactly that of x̂ = d·q with the weight: an error of at most
// d/2·Σ|w| per block; the exact Σx there would leave a·Σ(x̂ - x)·c, larger for the codes with
// an offset, e.g. c - 8). Past K (the weight's padding to whole groups) x counts as 0. One
// thread per (row, block); a block's work is qw_xq_block's, which norm_add_rms shares.
// XQ row m (RS = Kp/4 + 2·Kp/QB words): the Kp/4 words of packed codes (4 int8 per u32, byte c
// = bits 8c..8c+7), then the Kp/QB scales d, then the Kp/QB sums s (f32 bits). The bytes are
// ordered as qw_mm_i8 unpacks the weight's code words: with 4-bit codes (PAIR) a word of 8
// codes splits into its even (c0 c2 c4 c6) and odd (c1 c3 c5 c7) nibbles, so each 8 k of X go
// out as the words (x0 x2 x4 x6) and (x1 x3 x5 x7); with 8-bit codes (4 per word) in order.
// The prelude gives QB and PAIR.
struct Params { M: u32, K: u32, Kp: u32, NB: u32, RS: u32, pad0: u32, pad1: u32, pad2: u32 }

//!bindings read(X: array<f32>) write(XQ: array<u32>) uniform(p: Params)

fn xq_src(i: u32) -> f32 { return X[i]; }
fn xq_put(f: u32, i: u32, v: u32) { XQ[i] = v; }
//!include qw_xq_block

//!include flat_main
const FLAT_WG: u32 = 64u;
fn items() -> u32 { return p.M * p.NB; }

fn item(i: u32) {
    let m = i / p.NB;
    let b = i % p.NB;
    let k0 = b * QB;
    let kn = min(QB, max(p.K, k0) - k0); // the block's k inside K
    xq_block(0u, QB, PAIR, m * p.K + k0, kn, m * p.RS, b, p.Kp);
}
