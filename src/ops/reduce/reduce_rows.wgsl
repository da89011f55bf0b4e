// reduce_rows: sum / mean / amax / argmax of each output element over its reduced elements.
// Workgroup: WG threads (prelude, a power of two 32..256); one workgroup owns one output
// element. Thread t folds reduced elements t, t+WG, t+2*WG, ... into a private accumulator
// (in increasing index order), then the workgroup merges the WG accumulators with a tree in
// workgroup memory: a fixed order, so results are deterministic (no atomics).
// CONTIG (the reduced dims are the trailing contiguous block): the row starts at o * n_red and
// is read as V (vec4 when VW = 4, i.e. n_red % 4 == 0). Otherwise (VW = 1) the output index
// is decomposed through the kept shape/strides and each reduced index through the reduced
// shape/strides (the uniform holds both, innermost last).
// SPLIT (a long reduction into few outputs): each output's reduced range is cut into
// `parts` chunks of `chunk` elements, one workgroup per chunk, and workgroup k writes the
// pair (value bits, index) to out[2k], out[2k + 1]; reduce_pairs.wgsl merges the pairs.
// The prelude supplies WG, OP (0 sum, 1 max, 2 argmax), CONTIG, SPLIT, VW, alias V, comp().
struct Params {
    kshape: array<vec4<u32>, 2>, kstride: array<vec4<u32>, 2>,
    rshape: array<vec4<u32>, 2>, rstride: array<vec4<u32>, 2>,
    n_out: u32, n_red: u32, nk: u32, nr: u32,
    scale: f32, ninf: f32, chunk: u32, parts: u32,
}

//!bindings read(x: array<V>) write(out: array<u32>) uniform(p: Params)

//!include reduce_pick
//!include wg_reduce

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.n_out * p.parts) { return; }
    let o = wg / p.parts;
    let start = (wg - o * p.parts) * p.chunk;
    let end = min(start + p.chunk, p.n_red);
    var a = 0.0;
    if (OP != 0u) { a = p.ninf; }
    var ai = NONE;
    if (CONTIG) {
        let base = o * (p.n_red / VW);
        for (var j = start / VW + lid; j < end / VW; j += WG) {
            let v = x[base + j];
            for (var c = 0u; c < VW; c++) {
                let e = comp(v, c);
                if (OP == 0u) { a += e; } else if (ai == NONE || gt(e, a)) { a = e; ai = j * VW + c; }
            }
        }
    } else {
        var base = 0u;
        var t = o;
        for (var d = p.nk; d > 0u; d--) {
            let n = p.kshape[(d - 1u) / 4u][(d - 1u) % 4u];
            base += (t % n) * p.kstride[(d - 1u) / 4u][(d - 1u) % 4u];
            t /= n;
        }
        let stride0 = p.rstride[0].x;
        for (var j = start + lid; j < end; j += WG) {
            var off = base;
            if (p.nr == 1u) { // one reduced block: no index decomposition
                off += j * stride0;
            } else {
                var r = j;
                for (var d = p.nr; d > 0u; d--) {
                    let n = p.rshape[(d - 1u) / 4u][(d - 1u) % 4u];
                    off += (r % n) * p.rstride[(d - 1u) / 4u][(d - 1u) % 4u];
                    r /= n;
                }
            }
            let e = comp(x[off], 0u);
            if (OP == 0u) { a += e; } else if (ai == NONE || gt(e, a)) { a = e; ai = j; }
        }
    }
    let r = wg_reduce(lid, Pick(a, ai));
    if (lid == 0u) {
        if (SPLIT) {
            out[2u * wg] = bitcast<u32>(r.v);
            out[2u * wg + 1u] = r.i;
        } else if (OP == 2u) {
            out[o] = r.i;
        } else {
            out[o] = bitcast<u32>(r.v * p.scale);
        }
    }
}
