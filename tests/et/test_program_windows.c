/* The windowed entries of the op registry (src/program/ops_window.c: convolution plain and
 * transposed in 1-D/2-D/3-D, with the Vulkan partitioner's clamp fused, max/avg/adaptive pooling in 2-D/3-D with the argmax indices,
 * nearest and bilinear upsampling) run on the GPU against fp64 references written here from
 * PyTorch's definitions (a transposed convolution as the scatter it is, not as the gather the
 * registry uses), with fresh random shapes, arguments and inputs each run (WGML_SEED repeats
 * one) and NaN-poisoned outputs. Each builder is called as the program runner calls it:
 * argument values in schema order, the output id(s) last, the output's shape serialised. */
#include "harness.h"
#include "program/program.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static int64_t rint_in(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }
static float frand(void) { return (float)((double)(next() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

/* ---- argument slots ----------------------------------------------------------------------- */

#define NS 24
typedef struct slots {
    pv v[NS];
    int n;
    int64_t lists[NS][3];
    double dl[NS][2];
    int32_t ids[NS][2];
} slots;

static int32_t s_new(slots *s, pv_kind k) {
    pv *p = &s->v[s->n];
    memset(p, 0, sizeof *p);
    p->kind = k, p->constant_id = -1;
    return s->n++;
}
static int32_t s_int(slots *s, int64_t i) {
    int32_t id = s_new(s, PV_INT);
    s->v[id].i = i;
    return id;
}
static int32_t s_double(slots *s, double d) {
    int32_t id = s_new(s, PV_DOUBLE);
    s->v[id].d = d;
    return id;
}
static int32_t s_list(slots *s, int n, const int64_t *l) {
    int32_t id = s_new(s, PV_INTLIST);
    memcpy(s->lists[id], l, (size_t)n * sizeof *l);
    s->v[id].list64 = s->lists[id], s->v[id].n = (size_t)n;
    return id;
}
static int32_t s_dlist(slots *s, double a, double b) {
    int32_t id = s_new(s, PV_DOUBLELIST);
    s->dl[id][0] = a, s->dl[id][1] = b;
    s->v[id].dlist = s->dl[id], s->v[id].n = 2;
    return id;
}
static int32_t s_vlist(slots *s, int32_t a, int32_t b) {
    int32_t id = s_new(s, PV_VALUELIST);
    s->ids[id][0] = a, s->ids[id][1] = b;
    s->v[id].ids = s->ids[id], s->v[id].n = 2;
    return id;
}
/* A tensor slot of dims; with data, a built f32 tensor holding it. */
static int32_t s_tensor(slots *s, wgml_graph *g, int vk, int rank, const int64_t *dims, const float *data) {
    int32_t id = s_new(s, PV_TENSOR);
    pv *p = &s->v[id];
    p->vk_dtype = vk, p->rank = rank;
    memcpy(p->dims, dims, (size_t)rank * sizeof *dims);
    if (data) {
        int64_t n = 1;
        for (int i = 0; i < rank; i++) n *= dims[i];
        p->t = wgml_tensor_new(g, WGML_F32, rank, dims);
        if (p->t) wgml_tensor_write(p->t, data, (size_t)n * sizeof *data);
    }
    return id;
}

static float *rand_buf(int64_t n) {
    float *b = malloc((size_t)n * sizeof *b);
    for (int64_t i = 0; b && i < n; i++) b[i] = frand();
    return b;
}
static int64_t prod(const int64_t *d, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

static int failures;

/* One output against its reference: the worst of the errors |got − ref| / (1 + |ref|) (got as
 * f32, or as i32 indices when idx) into *worst and the index of the first element that has it
 * into *at (-1 when every error is 0); returns 1 when the worst is over the tolerance (2e-5;
 * indices exact). The fold is th_max_err's, so a NaN (poison left) is the worst error and no
 * later finite error hides it; main's self-check feeds it a NaN before finite errors. */
static int compare_output(const void *got, int idx, const double *ref, int64_t n, double *worst, int64_t *at) {
    *worst = 0, *at = -1;
    for (int64_t i = 0; i < n; i++) {
        double g = idx ? (double)((const int32_t *)got)[i] : (double)((const float *)got)[i];
        double w = th_max_err(*worst, fabs(g - ref[i]) / (1.0 + fabs(ref[i])));
        if (w > *worst) *worst = w, *at = i;
    }
    return !(*worst <= (idx ? 0.0 : 2e-5));
}

/* Builds op over the slots, reads output id `out` (f32, or i32 indices when `idx`) and
 * compares with ref (n elements, compare_output). */
static void build_and_check(wgml_ctx *ctx, slots *s, const char *op, const int32_t *args, int nargs, const int32_t *outs,
                            const double *const *refs, const int *is_index, int nout, const char *what) {
    pbuild b = {.ctx = ctx, .g = wgml_eager(ctx), .v = s->v, .nv = NS, .op = op};
    wgml_status st = prog_op_find(op)(&b, args, nargs);
    if (st) {
        printf("FAIL %s (%s): %s\n", op, what, wgml_last_error(ctx));
        failures++;
        return;
    }
    for (int k = 0; k < nout; k++) {
        pv *o = &s->v[outs[k]];
        int64_t n = prod(o->dims, o->rank);
        float *got = malloc((size_t)n * sizeof *got);
        if (!got || wgml_tensor_read(o->t, got, (size_t)n * sizeof *got)) {
            printf("FAIL %s (%s): read back: %s\n", op, what, wgml_last_error(ctx));
            failures++;
            free(got);
            return;
        }
        double worst;
        int64_t at;
        int bad = compare_output(got, is_index[k], refs[k], n, &worst, &at);
        printf("%s %s %s%s: %lld elements, max rel err %.2e\n", bad ? "FAIL" : "ok  ", op, what,
               is_index[k] ? " (indices)" : "", (long long)n, worst);
        if (bad) {
            printf("     worst at %lld: got %g, want %g\n", (long long)at,
                   is_index[k] ? (double)((int32_t *)got)[at] : (double)got[at], refs[k][at]);
            failures++;
        }
        free(got);
    }
}

/* ---- convolution ---------------------------------------------------------------------------- */

static void conv_case(wgml_ctx *ctx, int nd, int tr) {
    int64_t n = rint_in(1, 2), groups = rint_in(1, 3), cig = rint_in(1, 3), cog = rint_in(1, 3);
    int64_t c = groups * cig, co = groups * cog, in[3], k[3], st[3], pd[3], dl[3], op[3], out[3];
    for (int d = 0; d < nd; d++) {
        in[d] = rint_in(nd == 3 ? 2 : 3, nd == 1 ? 12 : nd == 2 ? 7 : 5), k[d] = rint_in(1, 3);
        st[d] = rint_in(1, 3), dl[d] = rint_in(1, 2), pd[d] = rint_in(0, tr ? dl[d] * (k[d] - 1) : 2), op[d] = 0;
        if (tr) {
            op[d] = rint_in(0, (st[d] > dl[d] ? st[d] : dl[d]) - 1);
            out[d] = (in[d] - 1) * st[d] - 2 * pd[d] + dl[d] * (k[d] - 1) + op[d] + 1;
        } else {
            while (in[d] + 2 * pd[d] < dl[d] * (k[d] - 1) + 1) pd[d]++;
            out[d] = (in[d] + 2 * pd[d] - dl[d] * (k[d] - 1) - 1) / st[d] + 1;
        }
        if (out[d] < 1) { /* a transposed case whose padding eats the output: draw again */
            conv_case(ctx, nd, tr);
            return;
        }
    }
    int64_t xd[5] = {n, c}, wd[5] = {tr ? c : co, tr ? cog : cig}, yd[5] = {n, co};
    for (int d = 0; d < nd; d++) xd[2 + d] = in[d], wd[2 + d] = k[d], yd[2 + d] = out[d];
    int64_t P = prod(in, nd), K = prod(k, nd), NP = prod(out, nd);
    float *x = rand_buf(n * c * P), *w = rand_buf(wd[0] * wd[1] * K), *bias = rand_buf(co);
    double *ref = calloc((size_t)(n * co * NP), sizeof *ref);
    /* the definition: plain, y[b, o, p] = Σ x[b, ch, p·st − pd + j·dl] w[o, ci, j]; transposed,
     * every x[b, ch, i] w[ch, oc, j] lands on y[b, g·Cout/G + oc, i·st − pd + j·dl]. */
    for (int64_t bi = 0; bi < n; bi++)
        for (int64_t o = 0; o < co; o++)
            for (int64_t p = 0; p < NP; p++) ref[(bi * co + o) * NP + p] = bias[o];
    for (int64_t bi = 0; bi < n; bi++)
        for (int64_t gi = 0; gi < groups; gi++)
            for (int64_t ci = 0; ci < cig; ci++)
                for (int64_t oc = 0; oc < cog; oc++)
                    for (int64_t j = 0; j < K; j++) {
                        int64_t ch = gi * cig + ci, o = gi * cog + oc, jj[3], jr = j;
                        for (int d = nd - 1; d >= 0; d--) jj[d] = jr % k[d], jr /= k[d];
                        double wv = tr ? w[(ch * cog + oc) * K + j] : w[(o * cig + ci) * K + j];
                        int64_t outer = tr ? P : NP; /* input positions (scatter) or output ones (gather) */
                        for (int64_t q = 0; q < outer; q++) {
                            int64_t qq[3], qr = q, src = 0, dst = 0, okp = 1;
                            for (int d = nd - 1; d >= 0; d--) qq[d] = qr % (tr ? in[d] : out[d]), qr /= tr ? in[d] : out[d];
                            for (int d = 0; d < nd; d++) {
                                int64_t v = qq[d] * st[d] - pd[d] + jj[d] * dl[d];
                                int64_t lim = tr ? out[d] : in[d];
                                if (v < 0 || v >= lim) okp = 0;
                                if (tr) src = src * in[d] + qq[d], dst = dst * out[d] + v;
                                else src = src * in[d] + v, dst = dst * out[d] + qq[d];
                            }
                            if (okp) ref[(bi * co + o) * NP + dst] += (double)x[(bi * c + ch) * P + src] * wv;
                        }
                    }
    int clamp = !tr && rint_in(0, 2) == 0; /* et_vk.conv_with_clamp: the convolution clamped to [-0.5, 0.5] */
    for (int64_t i = 0; clamp && i < n * co * NP; i++) ref[i] = ref[i] < -0.5 ? -0.5 : ref[i] > 0.5 ? 0.5 : ref[i];
    slots s = {.n = 0};
    wgml_graph *g = wgml_eager(ctx);
    int32_t a[12];
    a[0] = s_tensor(&s, g, VK_FLOAT32, nd + 2, xd, x);
    a[1] = s_tensor(&s, g, VK_FLOAT32, nd + 2, wd, w);
    a[2] = s_tensor(&s, g, VK_FLOAT32, 1, &co, bias);
    a[3] = s_list(&s, nd, st), a[4] = s_list(&s, nd, pd), a[5] = s_list(&s, nd, dl);
    a[6] = s_int(&s, tr), a[7] = s_list(&s, nd, op), a[8] = s_int(&s, groups);
    if (clamp) a[9] = s_double(&s, -0.5), a[10] = s_double(&s, 0.5);
    a[clamp ? 11 : 9] = s_tensor(&s, g, VK_FLOAT32, nd + 2, yd, NULL);
    char what[160];
    snprintf(what, sizeof what, "%dd%s n%lld groups %lld cin/g %lld cout/g %lld in %lld k %lld st %lld pd %lld dl %lld op %lld", nd,
             tr ? " transposed" : "", (long long)n, (long long)groups, (long long)cig, (long long)cog, (long long)in[0],
             (long long)k[0], (long long)st[0], (long long)pd[0], (long long)dl[0], (long long)op[0]);
    const double *refs[1] = {ref};
    int isi[1] = {0};
    build_and_check(ctx, &s, clamp ? "et_vk.conv_with_clamp.default" : "aten.convolution.default", a, clamp ? 12 : 10,
                    &a[clamp ? 11 : 9], refs, isi, 1, what);
    free(x), free(w), free(bias), free(ref);
}

/* ---- pooling -------------------------------------------------------------------------------- */

/* kind 0 max (with indices), 1 avg, 2 adaptive max (with indices), 3 adaptive avg */
static void pool_case(wgml_ctx *ctx, int nd, int kind) {
    int64_t planes[2] = {rint_in(1, 2), rint_in(1, 3)}, in[3], k[3], st[3], pd[3], dl[3], out[3];
    int ceil_mode = (int)rint_in(0, 1), count_pad = (int)rint_in(0, 1);
    int64_t divisor = kind == 1 && rint_in(0, 3) == 0 ? rint_in(1, 7) : 0;
    int empty_stride = kind < 2 && rint_in(0, 3) == 0; /* an empty stride list: the kernel size */
    for (int d = 0; d < nd; d++) {
        in[d] = rint_in(2, nd == 2 ? 9 : 6);
        if (kind >= 2) {
            out[d] = rint_in(1, in[d] + 2);
            continue;
        }
        k[d] = rint_in(1, 3), dl[d] = kind == 0 ? rint_in(1, 2) : 1;
        int64_t ek = dl[d] * (k[d] - 1) + 1;
        if (ek > in[d]) k[d] = 1, ek = 1;
        st[d] = empty_stride ? k[d] : rint_in(1, 3);
        pd[d] = rint_in(0, (kind == 0 ? ek : k[d]) / 2);
        int64_t span = in[d] + 2 * pd[d] - ek;
        out[d] = (ceil_mode ? span + st[d] - 1 : span) / st[d] + 1;
        if (ceil_mode && (out[d] - 1) * st[d] >= in[d] + pd[d]) out[d]--;
    }
    int64_t P = prod(in, nd), NP = prod(out, nd), NPL = planes[0] * planes[1];
    float *x = rand_buf(NPL * P);
    double *ref = malloc((size_t)(NPL * NP) * sizeof *ref), *refi = malloc((size_t)(NPL * NP) * sizeof *refi);
    for (int64_t pl = 0; pl < NPL; pl++)
        for (int64_t p = 0; p < NP; p++) {
            int64_t o[3], pr = p, lo[3], hi[3], step[3];
            for (int d = nd - 1; d >= 0; d--) o[d] = pr % out[d], pr /= out[d];
            int64_t pool = 1;
            for (int d = 0; d < nd; d++) {
                if (kind >= 2) { /* PyTorch's adaptive window */
                    lo[d] = (int64_t)floor((double)(o[d] * in[d]) / (double)out[d]);
                    hi[d] = (int64_t)ceil((double)((o[d] + 1) * in[d]) / (double)out[d]), step[d] = 1;
                } else {
                    lo[d] = o[d] * st[d] - pd[d], hi[d] = lo[d] + dl[d] * (k[d] - 1) + 1, step[d] = dl[d];
                    int64_t e = lo[d] + k[d] < in[d] + pd[d] ? lo[d] + k[d] : in[d] + pd[d];
                    pool *= e - lo[d];
                }
            }
            double best = -INFINITY, sum = 0;
            int64_t arg = -1, cnt = 0;
            int64_t c[3] = {lo[0], nd > 1 ? lo[1] : 0, nd > 2 ? lo[2] : 0};
            for (;;) { /* every window element inside the input, row-major */
                int inside = 1;
                int64_t off = 0;
                for (int d = 0; d < nd; d++) inside &= c[d] >= 0 && c[d] < in[d], off = off * in[d] + c[d];
                if (inside) {
                    double v = x[pl * P + off];
                    if (v > best) best = v, arg = off;
                    sum += v, cnt++;
                }
                int d = nd - 1;
                while (d >= 0 && (c[d] += step[d]) >= hi[d]) c[d] = lo[d], d--;
                if (d < 0) break;
            }
            int64_t div = divisor ? divisor : kind == 1 && count_pad ? pool : cnt;
            ref[pl * NP + p] = kind == 0 || kind == 2 ? best : sum / (double)div;
            refi[pl * NP + p] = (double)arg;
        }
    slots s = {.n = 0};
    wgml_graph *g = wgml_eager(ctx);
    int64_t xd[5] = {planes[0], planes[1]}, yd[5] = {planes[0], planes[1]};
    for (int d = 0; d < nd; d++) xd[2 + d] = in[d], yd[2 + d] = out[d];
    int32_t a[8], outs[2];
    int na;
    const char *op;
    a[0] = s_tensor(&s, g, VK_FLOAT32, nd + 2, xd, x);
    if (kind >= 2) {
        a[1] = s_list(&s, nd, out);
        na = 3;
    } else {
        a[1] = s_list(&s, nd, k), a[2] = s_list(&s, empty_stride ? 0 : nd, st);
        a[3] = s_list(&s, nd, pd);
        if (kind == 0) a[4] = s_list(&s, nd, dl), a[5] = s_int(&s, ceil_mode), na = 7;
        else a[4] = s_int(&s, ceil_mode), a[5] = s_int(&s, count_pad), a[6] = divisor ? s_int(&s, divisor) : s_new(&s, PV_NULL), na = 8;
    }
    outs[0] = s_tensor(&s, g, VK_FLOAT32, nd + 2, yd, NULL);
    outs[1] = s_tensor(&s, g, VK_INT64, nd + 2, yd, NULL);
    a[na - 1] = kind == 0 || kind == 2 ? s_vlist(&s, outs[0], outs[1]) : outs[0];
    op = kind == 0 ? (nd == 2 ? "aten.max_pool2d_with_indices.default" : "aten.max_pool3d_with_indices.default")
         : kind == 1 ? (nd == 2 ? "aten.avg_pool2d.default" : "aten.avg_pool3d.default")
         : kind == 2 ? (nd == 2 ? "aten.adaptive_max_pool2d.default" : "aten.adaptive_max_pool3d.default")
                     : (nd == 2 ? "aten._adaptive_avg_pool2d.default" : "aten._adaptive_avg_pool3d.default");
    char what[160];
    snprintf(what, sizeof what, "in %lld out %lld k %lld st %lld pd %lld dl %lld ceil %d count_pad %d divisor %lld",
             (long long)in[0], (long long)out[0], kind < 2 ? (long long)k[0] : 0LL, kind < 2 ? (long long)st[0] : 0LL,
             kind < 2 ? (long long)pd[0] : 0LL, kind < 2 ? (long long)dl[0] : 0LL, ceil_mode, count_pad, (long long)divisor);
    const double *refs[2] = {ref, refi};
    int isi[2] = {0, 1};
    build_and_check(ctx, &s, op, a, na, outs, refs, isi, kind == 0 || kind == 2 ? 2 : 1, what);
    free(x), free(ref), free(refi);
}

/* ---- upsampling ----------------------------------------------------------------------------- */

/* PyTorch's source index of output o: align_corners maps the corners, else half-pixel centres
 * clamped at 0; the scale is the given factor's reciprocal, else in/out. */
static double src_index(int64_t o, int64_t in, int64_t out, double factor, int align) {
    if (align) return out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0;
    double s = factor > 0 ? 1.0 / factor : (double)in / (double)out, r = ((double)o + 0.5) * s - 0.5;
    return r < 0 ? 0 : r;
}

static void upsample_case(wgml_ctx *ctx, int bilinear) {
    int64_t n = rint_in(1, 2), c = rint_in(1, 3), in[2] = {rint_in(1, 6), rint_in(1, 6)}, out[2];
    int vec = (int)rint_in(0, 1), by_scale = vec && rint_in(0, 1), align = bilinear ? (int)rint_in(0, 1) : 0;
    static const double factors[] = {0.5, 1.5, 2.0, 3.0, 1.7};
    double f[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        if (by_scale) {
            do f[d] = factors[next() % 5], out[d] = (int64_t)floor((double)in[d] * f[d]);
            while (out[d] < 1);
        } else {
            out[d] = rint_in(1, 9);
        }
    }
    float *x = rand_buf(n * c * in[0] * in[1]);
    int64_t NP = out[0] * out[1];
    double *ref = malloc((size_t)(n * c * NP) * sizeof *ref);
    for (int64_t pl = 0; pl < n * c; pl++)
        for (int64_t y = 0; y < out[0]; y++)
            for (int64_t z = 0; z < out[1]; z++) {
                const float *xp = x + pl * in[0] * in[1];
                double r;
                if (!bilinear) { /* nearest: floor(o·scale) in float, clamped */
                    float sy = f[0] > 0 ? (float)(1.0 / f[0]) : (float)in[0] / (float)out[0];
                    float sz = f[1] > 0 ? (float)(1.0 / f[1]) : (float)in[1] / (float)out[1];
                    int64_t iy = (int64_t)floorf((float)y * sy), iz = (int64_t)floorf((float)z * sz);
                    iy = iy < in[0] - 1 ? iy : in[0] - 1, iz = iz < in[1] - 1 ? iz : in[1] - 1;
                    r = xp[iy * in[1] + iz];
                } else {
                    double ry = src_index(y, in[0], out[0], f[0], align), rz = src_index(z, in[1], out[1], f[1], align);
                    int64_t y0 = (int64_t)ry, z0 = (int64_t)rz, y1 = y0 + (y0 < in[0] - 1), z1 = z0 + (z0 < in[1] - 1);
                    double ly = ry - (double)y0, lz = rz - (double)z0;
                    r = (1 - ly) * ((1 - lz) * xp[y0 * in[1] + z0] + lz * xp[y0 * in[1] + z1]) +
                        ly * ((1 - lz) * xp[y1 * in[1] + z0] + lz * xp[y1 * in[1] + z1]);
                }
                ref[pl * NP + y * out[1] + z] = r;
            }
    slots s = {.n = 0};
    wgml_graph *g = wgml_eager(ctx);
    int64_t xd[4] = {n, c, in[0], in[1]}, yd[4] = {n, c, out[0], out[1]};
    int32_t a[6];
    int na = 0;
    a[na++] = s_tensor(&s, g, VK_FLOAT32, 4, xd, x);
    a[na++] = by_scale ? s_new(&s, PV_NULL) : s_list(&s, 2, out);
    if (bilinear) a[na++] = s_int(&s, align);
    if (vec) a[na++] = by_scale ? s_dlist(&s, f[0], f[1]) : s_new(&s, PV_NULL);
    else a[na++] = s_new(&s, PV_NULL), a[na++] = s_new(&s, PV_NULL); /* scales_h, scales_w */
    a[na++] = s_tensor(&s, g, VK_FLOAT32, 4, yd, NULL);
    const char *op = bilinear ? (vec ? "aten.upsample_bilinear2d.vec" : "aten.upsample_bilinear2d.default")
                              : (vec ? "aten.upsample_nearest2d.vec" : "aten.upsample_nearest2d.default");
    char what[128];
    snprintf(what, sizeof what, "[%lld, %lld] -> [%lld, %lld] %s align_corners %d", (long long)in[0], (long long)in[1],
             (long long)out[0], (long long)out[1], by_scale ? "by scale factors" : "by size", align);
    const double *refs[1] = {ref};
    int isi[1] = {0};
    build_and_check(ctx, &s, op, a, na, &a[na - 1], refs, isi, 1, what);
    free(x), free(ref);
}

/* compare_output on a NaN followed by errors within the tolerance: it must fail, with the NaN
 * as the worst element (a fold that lets a later finite error replace a NaN passes it). */
static void self_check(void) {
    const float got[3] = {NAN, 0.5f, 1.0f};
    const double ref[3] = {0.0, 0.5, 1.0};
    double worst;
    int64_t at;
    int bad = compare_output(got, 0, ref, 3, &worst, &at);
    printf("%s self-check: a NaN then exact elements: %s, worst %g at %lld\n", bad && at == 0 ? "ok  " : "FAIL",
           bad ? "fails" : "passes", worst, (long long)at);
    failures += !(bad && at == 0);
}

int main(void) {
    self_check();
    wgml_ctx *ctx;
    wgml_ctx_options o = {.poison_outputs = 1};
    if (wgml_ctx_create(&o, &ctx)) {
        fprintf(stderr, "no device: %s\n", wgml_create_error());
        return 1;
    }
    const char *seed_env = getenv("WGML_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
    rng ^= seed * 0xBF58476D1CE4E5B9ull;
    printf("seed %llu (WGML_SEED to repeat)\n", (unsigned long long)seed);
    for (int rep = 0; rep < 3; rep++)
        for (int nd = 1; nd <= 3; nd++) {
            conv_case(ctx, nd, 0);
            conv_case(ctx, nd, 1);
        }
    for (int rep = 0; rep < 3; rep++)
        for (int nd = 2; nd <= 3; nd++)
            for (int kind = 0; kind < 4; kind++) pool_case(ctx, nd, kind);
    for (int rep = 0; rep < 4; rep++) upsample_case(ctx, 0), upsample_case(ctx, 1);
    printf("%d failures\n", failures);
    wgml_ctx_destroy(ctx);
    return failures ? 1 : 0;
}
