// ce_rows: per-row loss and dlogits of a fused cross-entropy over logits [R, V].
// Workgroup: WG threads (prelude; 32..256 from V) own RPW consecutive rows (prelude; 1 unless
// $WGML_CE_COUNT asks for more, see cross_entropy.c), one after the other. Thread t keeps a running
// (max m, sum l) over elements t, t+WG, ... of the row (read as V: vec4 when V % 4 == 0): on a
// new maximum v > m, l <- l*exp(m - v), m <- v; then l += exp(v - m). The WG pairs are merged by
// a tree in workgroup memory: m = max(ma, mb), l = la*exp(ma - m) + lb*exp(mb - m).
// lse = m + log(l); row_loss[r] = lse - x[label] for a valid row (0 <= label < vocab), else 0.
// With HAS_D every thread then reads its elements again and writes
// dlogits = (exp(x - m) / l - onehot(label)) * scale / n_valid (0 for ignored rows), scale from
// grad_scale[0] when HAS_SCALE (else 1). n_valid comes from the binding `cnt`:
//   COUNT 0: cnt is the stats tensor of ce_count, n_valid = cnt[2];
//   COUNT 1 / 4: cnt is the labels again (as i32 / vec4<i32>, p.n_cnt elements) and every
//   workgroup counts the valid labels itself, once for its RPW rows: thread t counts elements
//   t, t+WG, ... and the counts ride the first row's (m, l) tree in workgroup memory (no extra
//   barrier: struct Acc), so no count dispatch runs before this one. The label array is small next to a row (the handler picks this mode
//   when R <= V / 4) and every workgroup reads the same words, so they come from cache.
// Two reads of the row and one write per element; the per-row losses are summed by
// ce_sum in a fixed order.
// The prelude supplies WG, RPW, VW, alias V, hmax(), hsum(), comp(), onehot(), HAS_D, HAS_SCALE,
// COUNT, alias LV (i32, or vec4<i32> for COUNT 4), n_ok() (valid labels in one LV) and
// stat() (an LV as i32, for COUNT 0).
struct Params { n_rows: u32, vocab: u32, ninf: f32, n_cnt: u32 }

//!bindings read(x: array<V>, labels: array<i32>, cnt: array<LV>, grad_scale: array<f32>)
//!bindings write(row_loss: array<f32>, dx: array<V>) uniform(p: Params)

//!include reduce_lse

// A thread's part of a row for wg_reduce's tree: its online pair (m, l) and, in the first row
// when the workgroup counts, its count of valid labels (the count rides the row's tree).
struct Acc { ml: vec2<f32>, c: u32 }
alias WR = Acc;
fn wr_op(a: Acc, b: Acc) -> Acc { return Acc(lse_merge(a.ml, b.ml, p.ninf), a.c + b.c); }
//!include wg_reduce

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row0 = (wid.x + wid.y * nwg.x) * RPW;
    if (row0 >= p.n_rows) { return; } // the same for the whole workgroup
    let cnt_row = p.vocab / VW;
    let count_here = HAS_D && COUNT != 0u;
    var c = 0u; // this thread's valid labels, then (after the first row's tree) the workgroup's
    if (count_here) {
        let vocab = i32(p.vocab);
        for (var i = lid; i < p.n_cnt; i += WG) {
            c += n_ok(cnt[i], vocab);
        }
    }
    for (var rr = 0u; rr < RPW; rr++) {
        let row = row0 + rr;
        if (row >= p.n_rows) { break; } // uniform: the same for the whole workgroup
        let base = row * cnt_row;
        let lab = labels[row];
        let valid = lab >= 0 && u32(lab) < p.vocab; // out-of-range labels are never used as an index
        let r = wg_reduce(lid, Acc(lse_walk(base, 1u, lid, WG, cnt_row, p.ninf), select(0u, c, rr == 0u)));
        if (rr == 0u) { c = r.c; }
        let rm = r.ml.x;
        let rl = r.ml.y;
        if (lid == 0u) {
            var loss = 0.0;
            if (valid) {
                let k = u32(lab);
                loss = rm + log(rl) - comp(x[base + k / VW], k % VW);
            }
            row_loss[row] = loss;
        }
        if (HAS_D) {
            var n_valid = 0u;
            if (COUNT == 0u) {
                n_valid = u32(max(stat(cnt[2]), 0));
            } else {
                n_valid = c;
            }
            var scale = 1.0;
            if (HAS_SCALE) { scale = grad_scale[0]; }
            let fac = select(0.0, scale / f32(n_valid), n_valid > 0u && valid);
            let inv = 1.0 / rl;
            let k = select(0xFFFFFFFFu, u32(lab), valid);
            for (var j = lid; j < cnt_row; j += WG) {
                let d = (exp(x[base + j] - V(rm)) * inv - onehot(j, k)) * fac;
                dx[base + j] = select(d, V(0.0), !valid);
            }
        }
        if (RPW > 1u) { workgroupBarrier(); } // the tree's result read by all before the next row
    }
}
