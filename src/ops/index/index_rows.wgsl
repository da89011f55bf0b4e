// index_rows: index_select and embedding on 4-byte data, by rows. x is viewed as
// [outer, size, inner] and out as [outer, nsel, inner] (inner counted in units: the prelude
// sets `alias UNIT = vec4<u32>;` when inner is a multiple of 4 elements, else `alias UNIT = u32;`).
// out[o, j, :] = x[o, fix_index(idx[j], size), :] (index_fix: wrapped, clamped into [0, size)).
// Workgroup: 256 threads; each thread moves PER units, 256 apart (coalesced).
//!include index_fix
struct Params { n: u32, inner: u32, nsel: u32, size: u32 }

//!bindings read(x: array<UNIT>, idx: array<i32>) write(out: array<UNIT>) uniform(p: Params)

const PER: u32 = 4u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let base = (wid.x + wid.y * nwg.x) * (256u * PER) + lid;
    let s = i32(p.size);
    for (var k = 0u; k < PER; k++) {
        let u = base + k * 256u;
        if (u >= p.n) {
            return;
        }
        let r = u / p.inner;
        let col = u - r * p.inner;
        let o = r / p.nsel;
        let j = r - o * p.nsel;
        let row = fix_index(idx[j], s);
        out[u] = x[(o * p.size + row) * p.inner + col];
    }
}
