// lmhead_ce_dh: the input gradient of the fused LM-head cross-entropy from the accumulator of
// lmhead_ce_grad, in place: acc[r, k] <- (acc[r, k] / l_r - W[label_r, k]) * scale / n_valid
// for a valid row (0 <= label < vocab), 0 for an ignored one; l_r from state[r].y, n_valid from
// stats[2], scale = sa[0] * sb[0] (each when HAS_SA / HAS_SB). W[label] comes from wl: with
// GATHER the f32 head itself [V, D] (row label), else rows already gathered [R, D] (the
// quantised head through qembedding).
// Workgroup: 256 threads, one element each (R * D elements in all).
struct Params { n: u32, d: u32, vocab: u32 }

//!bindings read(labels: array<i32>, stats: array<i32>, state: array<vec4<f32>>, wl: array<f32>, sa: array<f32>, sb: array<f32>)
//!bindings write(acc: array<f32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(i: u32) {
    let row = i / p.d;
    let k = i - row * p.d;
    let lab = labels[row];
    let valid = lab >= 0 && u32(lab) < p.vocab;
    let n_valid = stats[2];
    var scale = 1.0;
    if (HAS_SA) { scale *= sa[0]; }
    if (HAS_SB) { scale *= sb[0]; }
    var out = 0.0;
    if (valid && n_valid > 0) {
        var w = 0.0;
        if (GATHER) { w = wl[u32(lab) * p.d + k]; } else { w = wl[i]; }
        out = (acc[i] / state[row].y - w) * (scale / f32(n_valid));
    }
    acc[i] = out;
}
