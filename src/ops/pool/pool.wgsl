// pool: max or average over an N-D window (up to 3 window dims; fewer are padded with extent-1
// dims by the host). x is [planes, in.x, in.y, in.z], out and idx are [planes, out.x, out.y,
// out.z]. Output position o reads, per dim, the coordinates lo, lo + step, ... below hi:
// lo = o·stride − padding, step = dilation, hi = lo + (kernel − 1)·dilation + 1; or, adaptive,
// [floor(o·in/out), ceil((o+1)·in/out)) with step 1. Coordinates outside [0, in) are padding:
// skipped (so padding never wins a maximum). Max: the largest value and its offset within the
// plane (row-major over the window dims), the first of equal maxima, a NaN wins over any number
// and a later NaN over an earlier one (PyTorch's scan). Average: the sum over the elements
// inside, divided by `divisor` when > 0, else by the window clipped to the padded input
// (count_include_pad) or by the elements inside.
// One thread per output element; workgroups of 256, the grid folded into x and y.
struct Params {
    inp: vec4<i32>,  // in extents (x, y, z), w unused
    outp: vec4<i32>, // out extents
    k: vec4<i32>,
    st: vec4<i32>,
    pd: vec4<i32>,
    dl: vec4<i32>,
    n: u32,          // output elements
    mode: u32,       // bit 0: max; bit 1: adaptive; bit 2: count_include_pad
    divisor: i32,
    has_idx: u32,
}

//!bindings read(x: array<f32>) write(out: array<f32>, idx: array<i32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(i: u32) {
    let o_ext = vec3<u32>(p.outp.xyz);
    var r = i;
    let oz = i32(r % o_ext.z);
    r = r / o_ext.z;
    let oy = i32(r % o_ext.y);
    r = r / o_ext.y;
    let ox = i32(r % o_ext.x);
    let plane = r / o_ext.x;
    let o = vec3<i32>(ox, oy, oz);
    let inn = p.inp.xyz;
    let is_max = (p.mode & 1u) != 0u;
    var lo: vec3<i32>;
    var hi: vec3<i32>;
    var step: vec3<i32>;
    var pool = 1;
    if ((p.mode & 2u) != 0u) {
        lo = (o * inn) / p.outp.xyz;
        hi = ((o + vec3<i32>(1)) * inn + p.outp.xyz - vec3<i32>(1)) / p.outp.xyz;
        step = vec3<i32>(1);
    } else {
        lo = o * p.st.xyz - p.pd.xyz;
        hi = lo + (p.k.xyz - vec3<i32>(1)) * p.dl.xyz + vec3<i32>(1);
        step = p.dl.xyz;
        let e = min(lo + p.k.xyz, inn + p.pd.xyz);
        pool = (e.x - lo.x) * (e.y - lo.y) * (e.z - lo.z);
    }
    let base = plane * u32(inn.x * inn.y * inn.z);
    // -inf, the output of a window with no element: a runtime value (0u * i), because WGSL
    // forbids a constant expression whose value is not finite (Tint refuses it; naga lets it by)
    var best = bitcast<f32>(0xff800000u + 0u * i);
    var arg = -1;
    var sum = 0.0;
    var cnt = 0;
    for (var a = lo.x; a < hi.x; a += step.x) {
        if (a < 0 || a >= inn.x) { continue; }
        for (var b = lo.y; b < hi.y; b += step.y) {
            if (b < 0 || b >= inn.y) { continue; }
            for (var c = lo.z; c < hi.z; c += step.z) {
                if (c < 0 || c >= inn.z) { continue; }
                let off = (a * inn.y + b) * inn.z + c;
                let v = x[base + u32(off)];
                if (is_max) {
                    // NaN by its bits: a compiler may fold v != v away
                    let nan = (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
                    if (v > best || nan || arg < 0) {
                        best = v;
                        arg = off;
                    }
                } else {
                    sum += v;
                    cnt += 1;
                }
            }
        }
    }
    if (is_max) {
        out[i] = best;
        if (p.has_idx != 0u) {
            idx[i] = arg;
        }
    } else {
        var div = cnt;
        if (p.divisor > 0) {
            div = p.divisor;
        } else if ((p.mode & 4u) != 0u && (p.mode & 2u) == 0u) {
            div = pool;
        }
        out[i] = sum / f32(div);
    }
}
