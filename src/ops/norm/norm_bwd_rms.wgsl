// norm_bwd_rms: rms_norm backward over the last dim (rows of length d). With r = rsqrt(mean(x^2)
// + eps) and g = w * dy: dx = r * g - x * r^3 * sum(g * x) / d; also writes r per row (rs), which
// the dw pass (norm_bwd_cols) uses.
// Workgroup: WG threads (prelude, power of two 32..256); one workgroup owns one row
// (norm_row.wgsl's entry point). Thread t accumulates sum(x^2) and sum(g*x) over elements t,
// t+WG, ...; a tree in workgroup memory adds the partials (fixed order, deterministic); then
// each thread writes its elements of dx.
// Rows are read as V (prelude: vec4 when d % 4 == 0, else f32). HAS_W (prelude): w is bound;
// without it w is ones.
struct Params { n_rows: u32, d: u32, eps: f32 }

//!bindings read(x: array<V>, w: array<V>, dy: array<V>)
//!bindings write(dx: array<V>, rs: array<f32>) uniform(p: Params)

alias WR = vec2<f32>; // sum(x^2), sum(g * x)
//!include norm_row

fn row_begin(row: u32, base: u32) {}

fn row_term(base: u32, j: u32) -> vec2<f32> {
    let xv = x[base + j];
    return vec2<f32>(hsum(xv * xv), hsum(times_w(j, dy[base + j]) * xv));
}

fn row_end(row: u32, base: u32, cnt: u32, lid: u32, sums: vec2<f32>) {
    let inv_d = 1.0 / f32(p.d);
    let r = inverseSqrt(sums.x * inv_d + p.eps);
    let c = r * r * r * sums.y * inv_d;
    for (var j = lid; j < cnt; j += WG) {
        dx[base + j] = r * times_w(j, dy[base + j]) - x[base + j] * c;
    }
    if (lid == 0u) { rs[row] = r; }
}
