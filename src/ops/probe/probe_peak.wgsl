// probe_peak: a device's peak rate for one kind of instruction (wgml bench peak), the floor that
// kernels' accounts measure against (docs/PERFORMANCE.md). Not an op. One thread per item; each
// runs p.iters iterations of CH = 16 independent chains of the prelude's KIND, so that latency is
// hidden within the thread, with operands that differ per chain and per iteration (no common
// subexpressions) and come from the uniform (no constant folding):
//   0 fma:      x = fma(x, a, b), f32, a = 1, b = 1 (x counts up exactly);
//   1 dot4i8:   x = dot4I8Packed(x, b) + x, i32 (the bytes of x against b's, wrapping; the
//               prelude's dot_step, a stub where the adapter lacks the integer dot product);
//   2 cvt:      x = x + f32((bits(x) >> b) & a), f32, a = 15: an int-to-float conversion a step;
//   3 cvt_bits: the same through the mantissa of 2^23 (qw_cvt's cvt_u2f) instead of a
//               conversion;
//   4 fma_f16:  x = fma(x, a, b) in f16 (the prelude's h_run, where shader-f16 is enabled), a = 1,
//               b = 1: x counts up exactly to 2048, where it stays (2049 rounds to it, a tie).
// Chain c of thread t starts at (t % 61) + c. The thread writes the sum of its chains (f32
// kinds: exact, every value an integer under 2^24 for iters <= 32768) as bits to O[t].
struct Params { n: u32, iters: u32, a: u32, b: u32 }

//!bindings write(O: array<u32>) uniform(p: Params)

//!include qw_cvt
//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(t: u32) {
    let s0 = f32(t % 61u);
    var xf = array<vec4<f32>, 4>();
    var xi = array<vec4<i32>, 4>();
    for (var v = 0u; v < 4u; v++) {
        xf[v] = vec4<f32>(s0) + vec4<f32>(f32(4u * v), f32(4u * v + 1u), f32(4u * v + 2u), f32(4u * v + 3u));
        xi[v] = vec4<i32>(xf[v]);
    }
    let af = bitcast<f32>(p.a);
    let bf = bitcast<f32>(p.b);
    if (KIND == 4u) {
        O[t] = bitcast<u32>(h_run(s0, p.iters, af, bf));
        return;
    }
    let m = vec4<u32>(p.a);
    let sh = vec4<u32>(p.b);
    for (var i = 0u; i < p.iters; i++) {
        for (var v = 0u; v < 4u; v++) {
            if (KIND == 0u) {
                xf[v] = fma(xf[v], vec4<f32>(af), vec4<f32>(bf));
            } else if (KIND == 1u) {
                xi[v] = dot_step(xi[v], p.b);
            } else if (KIND == 2u) {
                xf[v] += vec4<f32>((bitcast<vec4<u32>>(xf[v]) >> sh) & m);
            } else {
                xf[v] += cvt_u2f((bitcast<vec4<u32>>(xf[v]) >> sh) & m);
            }
        }
    }
    if (KIND == 1u) {
        let s = xi[0] + xi[1] + xi[2] + xi[3];
        O[t] = bitcast<u32>(s.x + s.y + s.z + s.w);
    } else {
        let s = xf[0] + xf[1] + xf[2] + xf[3];
        O[t] = bitcast<u32>(s.x + s.y + s.z + s.w);
    }
}
