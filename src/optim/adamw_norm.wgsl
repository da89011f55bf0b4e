// adamw_norm: first stage of the global gradient norm and the finiteness check of an
// AdamW step over the flat gradient buffer (n4 vec4s; every parameter slot is padded with zeros
// to 64 elements, so the buffer is always whole vec4s).
// Workgroup: 256 threads own one contiguous chunk of `chunk` vec4s; thread t sums g·g over
// vec4s t, t+256, ... of the chunk and notes any non-finite element (exponent bits all ones:
// inf or NaN, tested on the bits so that no fast-math assumption can drop it). A tree in
// workgroup memory merges the 256 sums; part[2w] = the chunk's sum of squares and
// part[2w+1] = 1.0 when it holds a non-finite element. adamw_finish merges the chunks.
struct Params { n4: u32, chunk: u32, n_chunks: u32 }

//!bindings read(grads: array<vec4<f32>>) write(part: array<f32>) uniform(p: Params)

// wg_reduce's tree over (sum of squares, any non-finite)
const WG: u32 = 256u;
struct Part { s: f32, bad: u32 }
alias WR = Part;
fn wr_op(a: Part, b: Part) -> Part { return Part(a.s + b.s, a.bad | b.bad); }
//!include wg_reduce

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let w = wid.x + wid.y * nwg.x;
    if (w >= p.n_chunks) { return; }
    let lo = w * p.chunk;
    let hi = min(lo + p.chunk, p.n4);
    var s = 0.0;
    var bad = vec4<u32>(0u);
    for (var i = lo + lid; i < hi; i += 256u) {
        let g = grads[i];
        s += dot(g, g);
        bad |= vec4<u32>((bitcast<vec4<u32>>(g) & vec4<u32>(0x7F800000u)) == vec4<u32>(0x7F800000u));
    }
    let r = wg_reduce(lid, Part(s, bad.x | bad.y | bad.z | bad.w));
    if (lid == 0u) {
        part[2u * w] = r.s;
        part[2u * w + 1u] = f32(r.bad);
    }
}
