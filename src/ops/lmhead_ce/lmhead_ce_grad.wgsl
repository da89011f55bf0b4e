// lmhead_ce_grad: one vocabulary chunk of the fused LM-head cross-entropy when d_h is wanted:
// the forward statistics of lmhead_ce_fwd plus, in one pass (as flash attention keeps its
// output accumulator), the unnormalised gradient accumulator A [R, D]:
//   m' = max(m, chunk max); alpha = exp(m - m'); l' = l*alpha + sum_j exp(x_j - m');
//   x_j <- P_j = exp(x_j - m') in place (the handler then adds P · W_chunk into A);
//   A[r, :] *= alpha (skipped for the first chunk, whose product overwrites A).
// After the last chunk A = sum_j exp(z_j - m) W_j with the row's final m, and
// lmhead_ce_dh forms d_h = (A / l - W[label]) * scale / n_valid.
// state[r] = (m, l, target logit, lse) as in lmhead_ce_fwd; the last chunk writes lse and row_loss.
// Workgroup: WG threads (prelude; 32..256 from cols) own one row: each thread an online
// (max, sum) over elements t, t+WG, ... (V: vec4 when cols % 4 == 0), a tree in workgroup
// memory merges them, thread 0 updates the state and shares (m', alpha) through workgroup
// memory; then every thread rewrites its elements as P and scales its part of A's row.
// The prelude supplies WG, VW, alias V, hmax(), hsum(), comp().
struct Params { n_rows: u32, cols: u32, c0: u32, vocab: u32, d: u32, ninf: f32 }

//!bindings read(labels: array<i32>)
//!bindings write(state: array<vec4<f32>>, row_loss: array<f32>, x: array<V>, acc: array<f32>) uniform(p: Params)

//!include lmhead_ce_row

var<workgroup> s_new: vec2<f32>; // (m', alpha)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; } // the same for the whole workgroup
    let cnt = p.cols / VW;
    let base = row * cnt;
    let ml = chunk_row_lse(base, cnt, lid);
    if (lid == 0u) {
        let m_old = chunk_state(row, base, ml);
        let mx = max(m_old, ml.x);
        let alpha = select(1.0, exp(m_old - mx), mx > p.ninf); // the rescale of A's row
        s_new = vec2<f32>(mx, alpha);
    }
    workgroupBarrier();
    let nm = s_new.x;
    let live = nm > p.ninf; // all -inf so far: P = 0
    for (var j = lid; j < cnt; j += WG) {
        x[base + j] = select(V(0.0), exp(x[base + j] - V(nm)), live);
    }
    if (!first_chunk()) {
        let alpha = s_new.y;
        let ab = row * p.d;
        for (var k = lid; k < p.d; k += WG) {
            acc[ab + k] *= alpha;
        }
    }
}
