// train_ce_count: the label statistics of a fused cross-entropy, counted before the rows pass
// needs them: stats[0] = rows whose label is >= vocab (out of range: treated as ignored),
// stats[1] = the first such row (-1 when none), stats[2] = n_valid (rows with 0 <= label < V).
// Workgroup: one workgroup of 256 threads for the whole call; thread t owns labels t, t+256, ...
// and the three counts are merged by a tree in workgroup memory (fixed order, no atomics).
struct Params { n_rows: u32, vocab: u32 }

@group(0) @binding(0) var<storage, read> labels: array<i32>;
@group(0) @binding(1) var<storage, read_write> stats: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> s_valid: array<u32, 256>;
var<workgroup> s_bad: array<u32, 256>;
var<workgroup> s_first: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var valid = 0u;
    var bad = 0u;
    var first = 0xFFFFFFFFu;
    for (var i = lid; i < p.n_rows; i += 256u) {
        let lab = labels[i];
        if (lab >= 0) {
            if (u32(lab) < p.vocab) {
                valid += 1u;
            } else {
                bad += 1u;
                first = min(first, i);
            }
        }
    }
    s_valid[lid] = valid;
    s_bad[lid] = bad;
    s_first[lid] = first;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            s_valid[lid] += s_valid[lid + s];
            s_bad[lid] += s_bad[lid + s];
            s_first[lid] = min(s_first[lid], s_first[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        stats[0] = i32(s_bad[0]);
        stats[1] = select(i32(s_first[0]), -1, s_bad[0] == 0u);
        stats[2] = i32(s_valid[0]);
    }
}
