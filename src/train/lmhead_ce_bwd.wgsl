// lmhead_ce_bwd: one vocabulary chunk of the fused LM-head cross-entropy backward, in place on
// the chunk's recomputed logits x [R, cols] (columns c0 .. c0 + cols):
//   x[r, j] <- (exp(x - m) / l - [c0 + j == label]) * scale / n_valid   (0 for ignored rows)
// with (m, l) from the forward's state[r] (the whole row's max and sum of exp), n_valid from
// stats[2] and scale = sa[0] * sb[0] (each when HAS_SA / HAS_SB, else 1): the same formula as
// train_ce_rows. The result is the chunk's block of d(loss)/d(logits) that the handler then
// multiplies into d_h.
// Workgroup: WG threads (prelude) own one row; thread t writes elements t, t+WG, ... (V: vec4
// when cols % 4 == 0). Each element is read and written once.
// The prelude supplies WG, VW, alias V, onehot(), HAS_SA, HAS_SB.
struct Params { n_rows: u32, cols: u32, c0: u32, vocab: u32 }

@group(0) @binding(0) var<storage, read> labels: array<i32>;
@group(0) @binding(1) var<storage, read> stats: array<i32>;
@group(0) @binding(2) var<storage, read> state: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> sa: array<f32>;
@group(0) @binding(4) var<storage, read> sb: array<f32>;
@group(0) @binding(5) var<storage, read_write> x: array<V>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.n_rows) { return; }
    let cnt = p.cols / VW;
    let base = row * cnt;
    let lab = labels[row];
    let valid = lab >= 0 && u32(lab) < p.vocab;
    let st = state[row];
    let n_valid = stats[2];
    var scale = 1.0;
    if (HAS_SA) { scale *= sa[0]; }
    if (HAS_SB) { scale *= sb[0]; }
    let fac = select(0.0, scale / f32(n_valid), n_valid > 0 && valid);
    let inv = 1.0 / st.y;
    let inside = valid && u32(lab) >= p.c0 && u32(lab) - p.c0 < p.cols;
    let k = select(0xFFFFFFFFu, u32(lab) - p.c0, inside);
    for (var j = lid; j < cnt; j += WG) {
        let d = (exp(x[base + j] - V(st.x)) * inv - onehot(j, k)) * fac;
        x[base + j] = select(d, V(0.0), !valid);
    }
}
