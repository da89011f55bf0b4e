// reduce_lse: the online log-sum-exp of the row kernels (reduce_softmax, ce_rows, and
// lmhead_ce_fwd / lmhead_ce_grad through lmhead_ce_row include it with "//!include
// reduce_lse"). A running pair (m, l) is a maximum m and a sum l of exp(v - m); pairs are
// merged without overflow by rescaling to the larger maximum. Elements and maxima at or below
// ninf (-inf, passed by the kernel's Params) add nothing, so a row that is all -inf keeps
// (ninf, 0). Not a kernel: the including kernel has the row binding x (array<V>) and its
// prelude supplies the alias V and hmax(), hsum() over one V. The kernels merge the threads'
// pairs with wg_reduce's tree (their wr_op calls lse_merge).

// (m, l) after one more V step v: on a new maximum mv > m, l <- l*exp(m - mv) and m <- mv;
// then l += sum exp(v - m). A step of a vec4 takes its own maximum first, then one rescale.
fn lse_step(ml: vec2<f32>, v: V, ninf: f32) -> vec2<f32> {
    let mv = hmax(v);
    if (!(mv > ninf)) { return ml; } // an all -inf step adds nothing
    var m = ml.x;
    var l = ml.y;
    if (mv > m) {
        l = l * exp(m - mv);
        m = mv;
    }
    l += hsum(exp(v - V(m)));
    return vec2<f32>(m, l);
}

// Two pairs merged: m = max(ma, mb), l = la*exp(ma - m) + lb*exp(mb - m) (a unchanged when
// both maxima are -inf).
fn lse_merge(a: vec2<f32>, b: vec2<f32>, ninf: f32) -> vec2<f32> {
    let mx = max(a.x, b.x);
    if (mx > ninf) { return vec2<f32>(mx, a.y * exp(a.x - mx) + b.y * exp(b.x - mx)); }
    return a;
}

// A thread's pair over the row of x at base: its V-elements first, first + step, ... below
// cnt, stride V-elements apart (1 for a contiguous row).
fn lse_walk(base: u32, stride: u32, first: u32, step: u32, cnt: u32, ninf: f32) -> vec2<f32> {
    var ml = vec2<f32>(ninf, 0.0);
    for (var j = first; j < cnt; j += step) {
        ml = lse_step(ml, x[base + j * stride], ninf);
    }
    return ml;
}
