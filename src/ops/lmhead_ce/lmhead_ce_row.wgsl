// lmhead_ce_row: what lmhead_ce_fwd and lmhead_ce_grad do alike for one row of a vocabulary
// chunk (both include it with "//!include lmhead_ce_row"; it includes reduce_lse and
// wg_reduce). Not a kernel: it reads the including kernel's x (the chunk's logits [R, cols] as
// V), labels, state, row_loss and p (n_rows, cols, c0, vocab, ninf), and its prelude's WG, VW,
// V, comp().

// The first and the last chunk of the vocabulary, from the parameters (uniform flags rather than
// prelude constants: one pipeline serves every chunk; on lavapipe each form is a compile).
fn first_chunk() -> bool { return p.c0 == 0u; }
fn last_chunk() -> bool { return p.c0 + p.cols == p.vocab; }

//!include reduce_lse
alias WR = vec2<f32>;
fn wr_op(a: WR, b: WR) -> WR { return lse_merge(a, b, p.ninf); }
//!include wg_reduce

// The chunk row's (max, sum of exp), returned to every thread: thread lid's online pair over
// the elements lid, lid + WG, ... of the row at base (cnt V-elements), then the workgroup
// tree. Called by every thread of the workgroup (it has barriers).
fn chunk_row_lse(base: u32, cnt: u32, lid: u32) -> vec2<f32> {
    return wg_reduce(lid, lse_walk(base, 1u, lid, WG, cnt, p.ninf));
}

// Thread 0's update of state[row] by this chunk; returns the row's max m before it. From the
// state before (the first chunk: (-inf, 0, 0, 0)): (m, l) merged with the chunk's pair ml, the target
// logit taken when the label falls in this chunk, and in the last chunk lse = m + log(l) and
// row_loss[row] = lse - target for a valid row (0 <= label < vocab), else 0.
fn chunk_state(row: u32, base: u32, ml: vec2<f32>) -> f32 {
    var st_in = vec4<f32>(p.ninf, 0.0, 0.0, 0.0);
    if (!first_chunk()) { st_in = state[row]; }
    var st = vec4<f32>(lse_merge(st_in.xy, ml, p.ninf), st_in.zw);
    let lab = labels[row];
    if (lab >= 0 && u32(lab) >= p.c0 && u32(lab) - p.c0 < p.cols) {
        let k = u32(lab) - p.c0;
        st.z = comp(x[base + k / VW], k % VW);
    }
    if (last_chunk()) {
        st.w = st.x + log(st.y);
        let valid = lab >= 0 && u32(lab) < p.vocab;
        row_loss[row] = select(0.0, st.w - st.z, valid);
    }
    state[row] = st;
    return st_in.x;
}
