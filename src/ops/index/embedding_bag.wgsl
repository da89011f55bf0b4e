// embedding_bag: out[b, d] = the sum, mean or max over the entries i of bag b (offsets[b] up to
// the next bag's offset, or the number of indices for the last bag) of
// weight[indices[i], d] (times per_sample_weights[i] with HAS_W), skipping entries whose index is
// padding_idx. An empty bag gives 0. One thread per output element, the entries in order
// (deterministic).
//
// Runtime indices and offsets are not trusted: offsets are clamped into [0, n_idx] (a bag ends no
// earlier than it starts) and an index is fixed by index_fix (a negative one wrapped, then clamped
// into [0, rows - 1]), so nothing is read outside a tensor.
//
// The prelude supplies MODE (0 sum, 1 mean, 2 max) and HAS_W (per_sample_weights bound).
//!include index_fix
struct Params {
    n: u32,       // bags * dim
    dim: u32,
    bags: u32,
    n_idx: u32,
    rows: u32,
    n_off: u32,   // entries in offsets
    pad_idx: i32, // padding_idx, or -2^31 for none
    pad: u32,
}

//!bindings read(weight: array<f32>, indices: array<i32>, offsets: array<i32>, psw: array<f32>)
//!bindings write(out: array<f32>) uniform(p: Params)

fn bound(b: u32) -> u32 {
    if (b >= p.n_off) {
        return p.n_idx;
    }
    return u32(clamp(offsets[b], 0, i32(p.n_idx)));
}

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(t: u32) {
    let b = t / p.dim;
    let d = t % p.dim;
    let start = bound(b);
    let end = max(bound(b + 1u), start);
    var acc = 0.0;
    var count = 0u;
    for (var i = start; i < end; i++) {
        let raw = indices[i];
        if (raw == p.pad_idx) {
            continue;
        }
        let r = fix_index(raw, i32(p.rows));
        var v = weight[r * p.dim + d];
        if (HAS_W) {
            v *= psw[i];
        }
        if (MODE == 2u) {
            acc = select(max(acc, v), v, count == 0u);
        } else {
            acc += v;
        }
        count++;
    }
    // PyTorch (eager CPU) counts the last bag of an include_last_offset call to the end of the
    // indices for its mean, though it sums only to the last offset: the same here
    if (MODE == 1u && p.n_off == p.bags + 1u && b + 1u == p.bags) {
        count += p.n_idx - end;
    }
    if (MODE == 1u && count > 0u) {
        acc /= f32(count);
    }
    out[t] = acc;
}
