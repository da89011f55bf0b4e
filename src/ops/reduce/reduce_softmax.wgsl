// reduce_softmax: softmax / log_softmax of each row of an [outer, n, inner] view (the row is
// the n elements at stride inner), max-stable with an online max and sum.
// Workgroup: WG threads (prelude) in R = WG / T segments of T threads (T a power of two,
// 4..256, chosen from the row length); one segment owns one row, so a workgroup owns R
// consecutive rows (R = 1 for long rows; short rows share a workgroup instead of idling most
// of one). Lane t of a segment keeps a running (max m, sum l) over elements t, t+T, ...: on a
// new maximum v > m, l <- l*exp(m - v) + 1 and m <- v, else l += exp(v - m). The T pairs are
// merged by a tree in workgroup memory inside the segment (m = max(ma, mb),
// l = la*exp(ma - m) + lb*exp(mb - m)), then every lane reads its elements again and writes
// exp(v - m) / l (or v - m - log(l)). Two reads of x and one write per element. When
// inner = 1 and n % 4 == 0 the row is read and written as vec4 (VW = 4; a vec4 step takes its
// own maximum first, then one rescale).
// The prelude supplies WG, T, TSHIFT (log2 T), VW, alias V, hmax(), hsum(), LOG.
struct Params { n_rows: u32, n: u32, inner: u32, ninf: f32 }

//!bindings read(x: array<V>) write(out: array<V>) uniform(p: Params)

//!include reduce_lse
alias WR = vec2<f32>;
fn wr_op(a: WR, b: WR) -> WR { return lse_merge(a, b, p.ninf); }
//!include wg_reduce

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    const R: u32 = WG / T;
    let wg = wid.x + wid.y * nwg.x;
    if (wg * R >= p.n_rows) { return; } // the same for the whole workgroup
    let lane = lid & (T - 1u);
    let seg = lid >> TSHIFT;
    let row = wg * R + seg;
    let cnt = select(0u, p.n / VW, row < p.n_rows); // a segment past the last row idles
    let o = row / p.inner;
    let i = row - o * p.inner;
    let base = (o * p.n * p.inner + i) / VW;
    let stride = p.inner;
    let ml = wg_reduce_seg(lid, T, lse_walk(base, stride, lane, T, cnt, p.ninf)); // the segment's pair
    let rm = ml.x;
    let rl = ml.y;
    if (LOG) {
        let shift = rm + log(rl);
        for (var j = lane; j < cnt; j += T) {
            let k = base + j * stride;
            out[k] = x[k] - V(shift);
        }
    } else {
        let inv = 1.0 / rl;
        for (var j = lane; j < cnt; j += T) {
            let k = base + j * stride;
            out[k] = exp(x[k] - V(rm)) * inv;
        }
    }
}
