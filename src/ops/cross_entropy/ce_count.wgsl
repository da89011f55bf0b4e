// ce_count: n_valid (rows with 0 <= label < vocab) of a fused cross-entropy, counted
// before the rows pass when the rows are too many for every row workgroup to count them
// itself (cross_entropy.c: R > V / 4 with dlogits). Writes stats[2] only; ce_sum writes all
// three statistics at the end of the call.
// Workgroup: one workgroup of 256 threads; thread t owns labels t, t+256, ..., loaded 16 at a
// time (independent loads in flight, masked past the end), and the counts are merged by a tree
// in workgroup memory.
struct Params { n_rows: u32, vocab: u32 }

//!bindings read(labels: array<i32>) write(stats: array<i32>) uniform(p: Params)

const U: u32 = 16u;

const WG: u32 = 256u;
alias WR = u32;
fn wr_op(a: u32, b: u32) -> u32 { return a + b; }
//!include wg_reduce

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var valid = 0u;
    let last = max(p.n_rows, 1u) - 1u;
    for (var i0 = lid; i0 < p.n_rows; i0 += 256u * U) {
        var b: array<i32, U>;
        for (var u = 0u; u < U; u++) {
            b[u] = labels[min(i0 + u * 256u, last)];
        }
        for (var u = 0u; u < U; u++) {
            let lab = b[u];
            if (i0 + u * 256u < p.n_rows && lab >= 0 && u32(lab) < p.vocab) {
                valid += 1u;
            }
        }
    }
    let n_valid = wg_reduce(lid, valid);
    if (lid == 0u) {
        stats[2] = i32(n_valid);
    }
}
