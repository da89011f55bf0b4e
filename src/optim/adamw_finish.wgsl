// adamw_finish: decides an AdamW step on the GPU and prepares its scalars, so no host
// round trip is needed per step. One workgroup of 256 threads: thread t owns chunk t of
// adamw_norm's partials (n_chunks <= 256); a tree merges them in a fixed order. Then
// thread 0:
//   norm = sqrt(sum of squares); the step is skipped when any gradient is non-finite or the
//   sum overflows (state.skip = 1, skipped += 1; t, params, m, v stay as they are);
//   otherwise t += 1, bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (as -expm1(t·ln beta), accurate
//   for beta near 1), coef = min(1, max_norm / (norm + 1e-6)) when max_norm > 0 (else 1),
//   step_size = lr / bc1, sqrt_bc2 = sqrt(bc2), decay = 1 - lr·wd.
// With apply = 0 (gradient accumulation: wgml_adamw_set_apply) it only writes skip = 2: no
// step, t, norm and the skip count unchanged.
// hyper (f32, written by the host): [lr, wd, beta1, beta2, eps, max_norm, ln beta1, ln beta2,
// 1 - beta1, 1 - beta2, apply].
// state (u32 words; floats as bits): [t, skipped, norm, skip (0 step, 1 skipped as
// non-finite, 2 held), coef, step_size, sqrt_bc2, decay].
struct Params { n_chunks: u32 }

//!bindings read(part: array<f32>, hyper: array<f32>) write(state: array<u32>) uniform(p: Params)

// wg_reduce's tree over (sum of squares, non-finite flag)
const WG: u32 = 256u;
alias WR = vec2<f32>;
fn wr_op(a: WR, b: WR) -> WR { return vec2<f32>(a.x + b.x, max(a.y, b.y)); }
//!include wg_reduce

// 1 - e^x for x <= 0, with small relative error also when x is close to 0: a Taylor series of
// expm1 for |x| < 0.5, exp() beyond (where 1 - e^x >= 0.39 takes no cancellation).
fn one_minus_exp(x: f32) -> f32 {
    if (x > -0.5) {
        var r = 1.0;
        for (var k = 11; k >= 2; k--) {
            r = 1.0 + x * r / f32(k);
        }
        return -x * r;
    }
    return 1.0 - exp(x);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var s = 0.0;
    var b = 0.0;
    if (lid < p.n_chunks) {
        s = part[2u * lid];
        b = part[2u * lid + 1u];
    }
    let r = wg_reduce(lid, vec2<f32>(s, b));
    if (lid != 0u) { return; }
    if (hyper[10] == 0.0) {
        state[3] = 2u;
        return;
    }
    let norm = sqrt(r.x);
    let overflow = (bitcast<u32>(norm) & 0x7F800000u) == 0x7F800000u;
    state[2] = bitcast<u32>(norm);
    if (r.y != 0.0 || overflow) {
        state[1] = state[1] + 1u;
        state[3] = 1u;
        return;
    }
    let t = state[0] + 1u;
    state[0] = t;
    state[3] = 0u;
    let lr = hyper[0];
    let wd = hyper[1];
    let max_norm = hyper[5];
    let bc1 = one_minus_exp(f32(t) * hyper[6]);
    let bc2 = one_minus_exp(f32(t) * hyper[7]);
    var coef = 1.0;
    if (max_norm > 0.0) { coef = min(1.0, max_norm / (norm + 1e-6)); }
    state[4] = bitcast<u32>(coef);
    state[5] = bitcast<u32>(lr / bc1);
    state[6] = bitcast<u32>(sqrt(bc2));
    state[7] = bitcast<u32>(1.0 - lr * wd);
}
