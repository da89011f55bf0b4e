// index_gbwd: gather backward, dx[o] = sum of dy[c] over the positions c of index with
// c[k] == o[k] for every k != dim and index[c] == o[dim] (a negative index wrapped by +size,
// then clamped into [0, size - 1]), added in increasing c[dim]; 0 where nothing lands.
// Without atomics: each output element scans the index.shape[dim] entries of its line.
// Workgroup: 256 threads; one thread owns one element of dx (row-major order of x's shape).
struct Params {
    xs: array<vec4<u32>, 2>,  // x's shape
    is: array<vec4<u32>, 2>,  // index's (and dy's) shape
    ist: array<vec4<u32>, 2>, // index's contiguous strides
    n: u32,    // elements of dx
    rank: u32,
    dim: u32,
    pad: u32,
}

@group(0) @binding(0) var<storage, read> index: array<i32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn at(v: array<vec4<u32>, 2>, i: u32) -> u32 { return v[i / 4u][i % 4u]; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (t >= p.n) { return; }
    var r = t;
    var base = 0u;
    var inside = true;
    var od = 0u;
    for (var k = i32(p.rank) - 1; k >= 0; k--) {
        let ku = u32(k);
        let sz = at(p.xs, ku);
        let c = r % sz;
        r = r / sz;
        if (ku == p.dim) {
            od = c;
        } else {
            if (c >= at(p.is, ku)) { inside = false; }
            base += c * at(p.ist, ku);
        }
    }
    var acc = 0.0;
    if (inside) {
        let size = i32(at(p.xs, p.dim));
        let m = at(p.is, p.dim);
        let st = at(p.ist, p.dim);
        var off = base;
        for (var j = 0u; j < m; j++) {
            var id = index[off];
            if (id < 0) { id += size; }
            if (u32(clamp(id, 0, size - 1)) == od) { acc += dy[off]; }
            off += st;
        }
    }
    dx[t] = acc;
}
