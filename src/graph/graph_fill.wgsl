// graph_fill: writes one 32-bit pattern into every word of a buffer (graph_fill_bits: fills and
// the NaN poisoning of fresh outputs).
// Workgroup: 256 threads; each thread owns one word. Linear workgroup index folds a 2-D grid.
struct Params { n_words: u32, bits: u32 }

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (i < p.n_words) {
        out[i] = p.bits;
    }
}
