"""Timing-only variants of the decode GEMV (src/ops/qweight/qw_gemv.wgsl), for measuring what a
part of its integer form (I8X) costs: each variant removes one part, so its outputs are wrong
and only its time means anything (`wgml bench qw --gemv` prints FAIL beside it).

    python3 bench/gemv_variants.py TREE/src/ops/qweight/qw_gemv.wgsl xq|noab|both

xq: x as if quantised once elsewhere: a block's packed int8 words from two vec4 loads and its
(d0, d1, s0, s1) from one, no per-thread quantisation (an upper bound of quantising x once per
input instead of once per row group); noab: the (a, b) of every group a constant (no scale
loads or unpacking); both: the two together. Build the edited copy of the tree as any other
(bench/gpu_env.sh's gpu_build) and time it beside the unedited one in the same run.
"""
import sys

XQ = """                if (I8X) {
                    let qa = bitcast<vec4<u32>>(x4(mm, b * 8u));
                    let qb = bitcast<vec4<u32>>(x4(mm, b * 8u + 4u));
                    let q = array<u32, 8>(qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w);
                    let dd = x4(mm, (p.K / 2u + b * 4u) % p.K);
                    let d0 = dd.x;
                    let d1 = dd.y;
                    let s0 = dd.z;
                    let s1 = dd.w;
                    for (var r = 0u; r < RPT; r++) { acc[r][mm] += i8_row(cw[u][r], ab[u][r], q, d0, d1, s0, s1); }
                    continue;
                }
"""
XS = "                var xs: array<vec4<f32>, 8>;\n"
AB = "ab[u][r][h] = ab_at(wr, n * p.ng + (b / BPG) * GPB + h);"


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("xq", "noab", "both"):
        sys.exit(__doc__)
    path, var = sys.argv[1], sys.argv[2]
    src = open(path).read()
    out = src
    if var in ("xq", "both"):
        if XS not in out:
            sys.exit("gemv_variants: the block loop's x array is not where it was: edit XS")
        out = out.replace(XS, XQ + XS, 1)
    if var in ("noab", "both"):
        if AB not in out:
            sys.exit("gemv_variants: the (a, b) load is not where it was: edit AB")
        out = out.replace(AB, "ab[u][r][h] = vec2<f32>(1.0 + f32(n & 1u), 0.5);", 1)
    open(path, "w").write(out)


if __name__ == "__main__":
    main()
