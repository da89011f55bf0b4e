// train_ce_sum: loss[0] = sum of row_loss[0..R) / n_valid (0 when no row is valid), n_valid
// from stats[2]. Workgroup: one workgroup of 256 threads; thread t sums rows t, t+256, ... in
// order, then a tree in workgroup memory merges the 256 partial sums: a fixed order, so the
// loss is the same bits on every run (no float atomics).
struct Params { n_rows: u32 }

@group(0) @binding(0) var<storage, read> row_loss: array<f32>;
@group(0) @binding(1) var<storage, read> stats: array<i32>;
@group(0) @binding(2) var<storage, read_write> loss: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> ss: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var s = 0.0;
    for (var i = lid; i < p.n_rows; i += 256u) {
        s += row_loss[i];
    }
    ss[lid] = s;
    workgroupBarrier();
    for (var k = 128u; k > 0u; k = k >> 1u) {
        if (lid < k) {
            ss[lid] += ss[lid + k];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let n_valid = stats[2];
        loss[0] = select(0.0, ss[0] / f32(n_valid), n_valid > 0);
    }
}
