// graph_copy: dst = src, word by word. graph_dispatch binds such a copy in place of a read-only
// binding that would overlap another binding of the same dispatch (WebGPU's aliasing rule).
// Workgroup: 256 threads; each thread copies one word. Linear workgroup index folds a 2-D grid.
struct Params { n_words: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (i < p.n_words) {
        dst[i] = src[i];
    }
}
