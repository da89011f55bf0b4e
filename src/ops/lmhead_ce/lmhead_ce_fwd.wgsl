// lmhead_ce_fwd: one vocabulary chunk of the fused LM-head cross-entropy forward. x is the
// chunk's logits [R, cols] (columns c0 .. c0 + cols of the vocabulary, in the reused scratch);
// state[r] = (m, l, t, lse) is the row's running max, sum of exp(logit - m), target logit and,
// after the last chunk, logsumexp.
// Workgroup: WG threads (prelude; 32..256 from cols) own one row. Thread t keeps an online
// (max, sum) over elements t, t+WG, ... (read as V: vec4 when cols % 4 == 0); a tree in
// workgroup memory merges the WG pairs (m = max(ma, mb), l = la*exp(ma - m) + lb*exp(mb - m));
// thread 0 merges the chunk's pair into state[r] (the first chunk starts it at (-inf, 0, 0, 0)),
// takes the target logit when the label falls in this chunk, and in the last chunk writes
// lse = m + log(l) and row_loss[r] = lse - target for a valid row (0 <= label < vocab), else 0.
// The prelude supplies WG, VW, alias V, hmax(), hsum(), comp().
struct Params { n_rows: u32, cols: u32, c0: u32, vocab: u32, ninf: f32 }

//!bindings read(x: array<V>, labels: array<i32>)
//!bindings write(state: array<vec4<f32>>, row_loss: array<f32>) uniform(p: Params)

//!include lmhead_ce_row

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; } // the same for the whole workgroup
    let cnt = p.cols / VW;
    let base = row * cnt;
    let ml = chunk_row_lse(base, cnt, lid);
    if (lid == 0u) { _ = chunk_state(row, base, ml); }
}
