// norm_layer: y = (x - mean) * rstd * w + b over the last dim (rows of length d), with
// rstd = rsqrt(var + eps) (biased variance); also writes mean[row] and rstd[row].
// Workgroup: WG threads (prelude, power of two 32..256); one workgroup owns one row
// (norm_row.wgsl's entry point). Thread t accumulates sum(x - K) and sum((x - K)^2) over
// elements t, t+WG, ... where K is the row's first element (a shift that keeps the one-pass
// variance free of cancellation when the mean is large against the spread); the pairs are added
// with a tree in workgroup memory (fixed order, deterministic), then each thread reads its
// elements again and writes them.
// Rows are read as V (vec4 when d % 4 == 0). HAS_W / HAS_B (prelude): w / b are bound;
// without them w is ones and b zeros.
struct Params { n_rows: u32, d: u32, eps: f32 }

//!bindings read(x: array<V>, w: array<V>, b: array<V>)
//!bindings write(out: array<V>, mean_out: array<f32>, rstd_out: array<f32>) uniform(p: Params)

alias WR = vec2<f32>; // sum(x - K), sum((x - K)^2)
//!include norm_row

var<private> shift: V; // K in every lane

fn row_begin(row: u32, base: u32) {
    shift = V(comp(x[base], 0u));
}

fn row_term(base: u32, j: u32) -> vec2<f32> {
    let v = x[base + j] - shift;
    return vec2<f32>(hsum(v), hsum(v * v));
}

fn row_end(row: u32, base: u32, cnt: u32, lid: u32, sums: vec2<f32>) {
    let inv_d = 1.0 / f32(p.d);
    let ms = sums.x * inv_d;
    let vr = max(sums.y * inv_d - ms * ms, 0.0);
    let mean = comp(shift, 0u) + ms;
    let rstd = inverseSqrt(vr + p.eps);
    for (var j = lid; j < cnt; j += WG) {
        // (x - K) is exact for x near K; subtracting the small mean shift next keeps the
        // output free of the rounding of mean itself (which matters when |mean| >> spread)
        var y = times_w(j, ((x[base + j] - shift) - V(ms)) * rstd);
        if (HAS_B) { y = y + b[j]; }
        out[base + j] = y;
    }
    if (lid == 0u) {
        mean_out[row] = mean;
        rstd_out[row] = rstd;
    }
}
