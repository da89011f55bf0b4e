// ce_sum: the end of a fused cross-entropy (cross_entropy.c, lmhead_ce.c): the label
// statistics and the loss in one dispatch.
//   stats[0] = rows whose label is >= vocab (out of range: treated as ignored),
//   stats[1] = the first such row (-1 when none), stats[2] = n_valid (0 <= label < vocab),
//   loss[0]  = sum of row_loss[0..R) / n_valid (0 when no row is valid).
// Workgroup: one workgroup of 256 threads for the whole call; thread t owns rows t, t+256, ...
// It loads them 16 at a time (16 independent loads in flight per thread, masked past the end:
// a long serial chain of loads would make this one small workgroup latency-bound), then adds
// them in row order; a tree in workgroup memory merges the 256 partial sums and counts. The
// order is fixed, so the loss is the same bits on every run (no float atomics).
struct Params { n_rows: u32, vocab: u32 }

//!bindings read(row_loss: array<f32>, labels: array<i32>)
//!bindings write(stats: array<i32>, loss: array<f32>) uniform(p: Params)

const U: u32 = 16u;

// wg_reduce's tree over (loss sum, valid rows, out-of-range rows, first out-of-range row)
const WG: u32 = 256u;
struct Part { s: f32, valid: u32, bad: u32, first: u32 }
alias WR = Part;
fn wr_op(a: Part, b: Part) -> Part { return Part(a.s + b.s, a.valid + b.valid, a.bad + b.bad, min(a.first, b.first)); }
//!include wg_reduce

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var s = 0.0;
    var valid = 0u;
    var bad = 0u;
    var first = 0xFFFFFFFFu;
    let last = max(p.n_rows, 1u) - 1u;
    for (var i0 = lid; i0 < p.n_rows; i0 += 256u * U) {
        var a: array<f32, U>;
        var b: array<i32, U>;
        for (var u = 0u; u < U; u++) {
            let i = min(i0 + u * 256u, last);
            a[u] = row_loss[i];
            b[u] = labels[i];
        }
        for (var u = 0u; u < U; u++) {
            let i = i0 + u * 256u;
            if (i < p.n_rows) {
                s += a[u];
                let lab = b[u];
                if (lab >= 0) {
                    if (u32(lab) < p.vocab) {
                        valid += 1u;
                    } else {
                        bad += 1u;
                        first = min(first, i);
                    }
                }
            }
        }
    }
    let r = wg_reduce(lid, Part(s, valid, bad, first));
    if (lid == 0u) {
        stats[0] = i32(r.bad);
        stats[1] = select(i32(r.first), -1, r.bad == 0u);
        stats[2] = i32(r.valid);
        loss[0] = select(0.0, r.s / f32(r.valid), r.valid > 0u);
    }
}
