// shape_transpose: permutes of 4-byte elements that move the input's last dimension, through
// workgroup memory so that both the reads and the writes are contiguous.
// The output (contiguous, shape `shape`, rank >= 2) is cut into 32x32 tiles over two of its
// dims: `a` (the position of the input's last dim, size P; input stride 1) and the last dim
// (size Q; output stride 1); every other output dim is a batch index. istr holds the input's
// strides in output order, ostr the output's.
// Workgroup: 32x8 threads, one 32x32 tile of one batch entry; each thread moves 4 elements:
// it reads 4 input rows (32 consecutive input elements per row of threads), and after a
// barrier writes 4 output rows (32 consecutive output elements per row of threads). The tile
// has 33 columns so that the transposed reads from workgroup memory do not collide.
struct Params {
    shape: array<vec4<u32>, 2>,
    istr: array<vec4<u32>, 2>,
    ostr: array<vec4<u32>, 2>,
    rank: u32, a: u32, tiles_p: u32, tiles_q: u32,
    n_groups: u32, p0: u32, p1: u32, p2: u32,
}

//!bindings read(inp: array<u32>) write(out: array<u32>) uniform(p: Params)

var<workgroup> tile: array<u32, 1056>; // 32 rows (q) x 33 columns (p)

// dim_of: shape_walk's
//!include shape_walk

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let wg = wid.x + wid.y * nwg.x;
    // uniform control flow: every thread of a workgroup takes the same branch
    if (wg >= p.n_groups) {
        return;
    }
    let per_batch = p.tiles_p * p.tiles_q;
    var rem = wg / per_batch;
    let t = wg - rem * per_batch;
    let tp = t / p.tiles_q;
    let p_start = tp * 32u;
    let q_start = (t - tp * p.tiles_q) * 32u;
    let last = p.rank - 1u;
    var ib = 0u;
    var ob = 0u;
    for (var i = i32(last) - 1; i >= 0; i--) {
        let d = u32(i);
        if (d == p.a) { continue; }
        let s = dim_of(d);
        let q = rem / s;
        let c = rem - q * s;
        rem = q;
        ib += c * p.istr[d >> 2u][d & 3u];
        ob += c * p.ostr[d >> 2u][d & 3u];
    }
    let P = dim_of(p.a);
    let Q = dim_of(last);
    let istr_q = p.istr[last >> 2u][last & 3u];
    let ostr_p = p.ostr[p.a >> 2u][p.a & 3u];
    // read: consecutive threads take consecutive p (input stride 1)
    let pc = p_start + lid.x;
    for (var k = 0u; k < 4u; k++) {
        let r = lid.y + 8u * k;
        let qc = q_start + r;
        if (pc < P && qc < Q) {
            tile[r * 33u + lid.x] = inp[ib + pc + qc * istr_q];
        }
    }
    workgroupBarrier();
    // write: consecutive threads take consecutive q (output stride 1)
    let qw = q_start + lid.x;
    for (var k = 0u; k < 4u; k++) {
        let r = lid.y + 8u * k;
        let pw = p_start + r;
        if (pw < P && qw < Q) {
            out[ob + pw * ostr_p + qw] = tile[lid.x * 33u + r];
        }
    }
}
