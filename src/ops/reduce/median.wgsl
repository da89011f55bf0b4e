// median: the lower median of each row of x viewed as [outer, L, inner] (the row runs along the
// middle dim) and its index: the element at position (L - 1) / 2 of the row sorted stably (equal
// values keep their order, so among ties the index is the one that position falls on).
//
// One workgroup per row; thread t takes the candidates i = t, t + 256, ...: a candidate's sorted
// position is #{j : x_j < x_i} + #{j < i : x_j == x_i}, exactly one candidate has position
// (L - 1) / 2, and it writes both outputs. O(L^2 / 256) per thread: meant for the short rows of
// the programs that use it. A row holding a NaN gives NaN and the index of its first NaN (as
// PyTorch's median).
struct Params {
    rows: u32,
    len: u32,
    inner: u32,
    pad: u32,
}

//!bindings read(x: array<f32>) write(vals: array<f32>, idx: array<i32>) uniform(p: Params)

var<workgroup> first_nan: atomic<u32>;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    // uniform control flow up to the barrier: every thread of a workgroup past the end returns
    // together
    if (row >= p.rows) {
        return;
    }
    let o = row / p.inner;
    let base = o * p.len * p.inner + row % p.inner;
    if (lid == 0u) {
        atomicStore(&first_nan, p.len);
    }
    workgroupBarrier();
    for (var i = lid; i < p.len; i += 256u) {
        if (is_nan(x[base + i * p.inner])) {
            atomicMin(&first_nan, i);
        }
    }
    let nan_at = workgroupUniformLoad(&first_nan);
    if (nan_at < p.len) {
        if (lid == 0u) {
            vals[row] = x[base + nan_at * p.inner];
            idx[row] = i32(nan_at);
        }
        return;
    }
    let k = (p.len - 1u) / 2u;
    for (var i = lid; i < p.len; i += 256u) {
        let v = x[base + i * p.inner];
        var pos = 0u;
        for (var j = 0u; j < p.len; j++) {
            let w = x[base + j * p.inner];
            pos += select(0u, 1u, w < v || (w == v && j < i));
        }
        if (pos == k) {
            vals[row] = v;
            idx[row] = i32(i);
        }
    }
}
