/* The op registry's windowed operators: convolution (1-D, 2-D and 3-D, plain or transposed;
 * et_vk.conv_with_clamp), pooling (max with indices, average, adaptive; 2-D and 3-D) and
 * upsampling (nearest and bilinear, 2-D). */
#include "program/ops_args.h"

#include <math.h>

/* Convolutions are wgml_conv (src/ops/conv); pools wgml_pool (one dispatch, no gathered copy);
 * nearest upsampling one gather with a host-built index; bilinear upsampling two matmuls. The
 * builders here read the arguments and check them against the serialised output. */

#define WIN_MAX ((int64_t)1 << 26) /* the most gathered elements (and host index entries) */
#define WIN_ARG ((int64_t)1 << 20) /* the largest kernel, stride, padding or dilation taken */

/* a·b, or WIN_MAX + 1 when it exceeds WIN_MAX (both operands >= 0). */
static int64_t cap_mul(int64_t a, int64_t b) { return a && b > WIN_MAX / a ? WIN_MAX + 1 : a * b; }

/* PyTorch's pooled extent: (in + 2·pd − dl·(k−1) − 1) / st + 1 rounded down, or up with
 * ceil_mode (a last window that would start in the right padding dropped); -1 when no window
 * fits. */
static int64_t pool_extent(int64_t in, int64_t k, int64_t st, int64_t pd, int64_t dl, int ceil_mode) {
    int64_t span = in + 2 * pd - dl * (k - 1) - 1;
    if (span < 0) return -1;
    int64_t o = (ceil_mode ? span + st - 1 : span) / st + 1;
    if (ceil_mode && (o - 1) * st >= in + pd) o--;
    return o;
}

/* nd ints from a list of 1 or nd (one entry applies to every dim); def for each when empty or
 * Null; each must lie in [lo, WIN_ARG]. -1 with an error otherwise. */
static int wlist(pbuild *b, const int32_t *args, int i, int nd, int64_t def, int64_t lo, int64_t out[3]) {
    int64_t l[WGML_MAX_RANK];
    int n = ilist(b, args, i, l, WGML_MAX_RANK);
    if (n < 0) return -1;
    if (n != 0 && n != 1 && n != nd) {
        fail(b, WGML_ERR_ARG, "expected one value or one per window dim", i);
        return -1;
    }
    for (int d = 0; d < nd; d++) {
        out[d] = n == 0 ? def : l[n == 1 ? 0 : d];
        if (out[d] < lo || out[d] > WIN_ARG) {
            fail(b, WGML_ERR_ARG, lo ? "values must be positive" : "values must not be negative", i);
            return -1;
        }
    }
    return n;
}

/* The window input x [..., in...] (f32, rank nd+1 or nd+2 when pool, nd+2 otherwise): its
 * window extents into in[] and the product of the leading dims into *planes. */
static wgml_status win_input(pbuild *b, wgml_tensor *x, int nd, int pool, int64_t in[3], int64_t *planes) {
    int r = wgml_tensor_rank(x);
    if (wgml_tensor_dtype(x) != WGML_F32 || (r != nd + 2 && !(pool && r == nd + 1))) {
        char m[96];
        snprintf(m, sizeof m, "expected an f32 %s input with %d window dims", pool ? "[N,] C, ..." : "[N, C, ...]", nd);
        return fail(b, WGML_ERR_UNSUPPORTED, m, 0);
    }
    int64_t p = 1;
    for (int d = 0; d < nd; d++) in[d] = wgml_tensor_dim(x, r - nd + d), p *= in[d];
    *planes = wgml_tensor_numel(x) / p;
    return WGML_OK;
}

/* The error of a public op called for the operator being built, prefixed with it. */
static wgml_status op_failed(pbuild *b) {
    char m[512]; /* a copy: the message is formatted into the buffer it is read from */
    snprintf(m, sizeof m, "%s", wgml_last_error(b->ctx));
    return wgml_set_error(b->ctx, wgml_last_status(b->ctx), "program: %s: %s", b->op, m);
}

/* convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding,
 * groups): wgml_conv, whose arguments these are (lists of one value apply to every dim). */
static wgml_status op_conv(pbuild *b, const int32_t *args, int nargs) {
    NEED(10);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0), *w = x ? T(b, args, 1) : NULL, *bias;
    if (!w || opt_tensor(b, args, 2, &bias)) return WGML_ERR_ARG;
    int nd = wgml_tensor_rank(w) - 2, tr = inum(b, args, 6, 0, &ok) != 0;
    int64_t groups = inum(b, args, 8, 1, &ok), st[3], pd[3], dl[3], op[3];
    if (!ok) return WGML_ERR_ARG;
    if (nd < 1 || nd > 3 || wgml_tensor_rank(x) != nd + 2 || wgml_tensor_dtype(x) != WGML_F32 || wgml_tensor_dtype(w) != WGML_F32)
        return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: only f32 1-D, 2-D and 3-D convolutions", b->op);
    if (wlist(b, args, 3, nd, 1, 1, st) < 0 || wlist(b, args, 4, nd, 0, 0, pd) < 0 || wlist(b, args, 5, nd, 1, 1, dl) < 0 ||
        wlist(b, args, 7, nd, 0, 0, op) < 0)
        return WGML_ERR_ARG;
    wgml_tensor *y = wgml_conv(b->g, x, w, bias, nd, st, pd, dl, tr, op, groups);
    return y ? put(b, OUT(0), y, 1) : op_failed(b);
}

/* et_vk.conv_with_clamp(input, weight, bias?, stride, padding, dilation, transposed,
 * output_padding, groups, output_min?, output_max?): the Vulkan partitioner's fusion of a
 * convolution and a clamp (ReLU6, hardtanh), built as the two. */
static wgml_status op_conv_with_clamp(pbuild *b, const int32_t *args, int nargs) {
    NEED(12);
    int ok = 1;
    float lo = (float)num(b, args, 9, -INFINITY, &ok), hi = (float)num(b, args, 10, INFINITY, &ok);
    if (!ok) return WGML_ERR_ARG;
    int32_t a[10];
    memcpy(a, args, 9 * sizeof *a);
    a[9] = args[11];
    wgml_status s = op_conv(b, a, 10);
    return s ? s : put(b, args[11], wgml_clamp(b->g, b->v[args[11]].t, lo, hi), 0);
}

/* Pools are one wgml_pool dispatch (src/ops/pool): max with PyTorch's indices, average with
 * its divisor rules, adaptive windows. The builders read the arguments into a wgml_pool_desc
 * and give the output extents (PyTorch's floor / ceil_mode rule, pool_extent). */

/* Runs the pool of desc over x into value `out` and, when the program has one, `indices`. */
static wgml_status pool_put(pbuild *b, wgml_tensor *x, const wgml_pool_desc *d, int32_t out, int32_t indices) {
    wgml_tensor *ix = NULL;
    int want = indices >= 0 && b->v[indices].kind == PV_TENSOR;
    wgml_tensor *y = wgml_pool(b->g, x, d, want ? &ix : NULL);
    if (!y) return op_failed(b);
    wgml_status s = put(b, out, y, 1);
    return s || !want ? s : put(b, indices, ix, 1);
}

/* The f32 input [N,] C, in... of a pool with nd window dims. */
static wgml_tensor *pool_input(pbuild *b, const int32_t *args, int nd) {
    wgml_tensor *x = T(b, args, 0);
    int64_t in[3], planes;
    return x && !win_input(b, x, nd, 1, in, &planes) ? x : NULL;
}

/* The window of a kernel/stride/padding[/dilation]/ceil_mode operator at args[1..] into d. */
static wgml_status pool_window(pbuild *b, const int32_t *args, wgml_tensor *x, int nd, int dil_arg, int ceil_arg,
                               wgml_pool_desc *d) {
    int64_t ks[3], st[3], pd[3], dl[3] = {1, 1, 1};
    int ok = 1;
    int sn = wlist(b, args, 2, nd, 0, 0, st);
    if (wlist(b, args, 1, nd, 1, 1, ks) < 0 || sn < 0 || wlist(b, args, 3, nd, 0, 0, pd) < 0 ||
        (dil_arg >= 0 && wlist(b, args, dil_arg, nd, 1, 1, dl) < 0))
        return WGML_ERR_ARG;
    int ceil_mode = inum(b, args, ceil_arg, 0, &ok) != 0;
    if (!ok) return WGML_ERR_ARG;
    d->nd = nd;
    for (int i = 0; i < nd; i++) {
        if (sn == 0 || st[i] == 0) st[i] = ks[i]; /* an empty stride is the kernel size */
        if (2 * pd[i] > dl[i] * (ks[i] - 1) + 1) return fail(b, WGML_ERR_ARG, "padding over half the (dilated) window", 3);
        d->kernel[i] = ks[i], d->stride[i] = st[i], d->padding[i] = pd[i], d->dilation[i] = dl[i];
        d->out[i] = pool_extent(wgml_tensor_dim(x, i - nd), ks[i], st[i], pd[i], dl[i], ceil_mode);
        if (d->out[i] < 1) return fail(b, WGML_ERR_SHAPE, "the window is larger than the (padded) input", 1);
    }
    return WGML_OK;
}

/* max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) ->
 * (out, indices), and max_pool{2,3}d(...) -> out. */
static wgml_status max_pool_common(pbuild *b, const int32_t *args, int nargs, int nd) {
    NEED(7);
    wgml_pool_desc d = {.max = 1};
    wgml_tensor *x = pool_input(b, args, nd);
    if (!x || pool_window(b, args, x, nd, 4, 5, &d)) return wgml_last_status(b->ctx);
    if (is_tensor(b, args, 6)) return pool_put(b, x, &d, OUT(0), -1);
    size_t no;
    const int32_t *outs = vlist(b, args, 6, &no);
    if (!outs || no < 1 || no > 2) return outs ? fail(b, WGML_ERR_ARG, "expected 1 or 2 outputs", 6) : WGML_ERR_ARG;
    return pool_put(b, x, &d, outs[0], no > 1 ? outs[1] : -1);
}
static wgml_status op_max_pool2d(pbuild *b, const int32_t *a, int n) { return max_pool_common(b, a, n, 2); }
static wgml_status op_max_pool3d(pbuild *b, const int32_t *a, int n) { return max_pool_common(b, a, n, 3); }

/* adaptive_max_pool{2,3}d(self, output_size) -> (out, indices) and
 * _adaptive_avg_pool{2,3}d(self, output_size) -> out. */
static wgml_status adaptive_common(pbuild *b, const int32_t *args, int nargs, int nd, int max) {
    NEED(3);
    wgml_pool_desc d = {.nd = nd, .max = max, .adaptive = 1};
    wgml_tensor *x = pool_input(b, args, nd);
    if (!x || wlist(b, args, 1, nd, 1, 1, d.out) < 0) return wgml_last_status(b->ctx);
    if (!max) return pool_put(b, x, &d, OUT(0), -1);
    size_t no;
    const int32_t *outs = vlist(b, args, 2, &no);
    if (!outs || no < 1 || no > 2) return outs ? fail(b, WGML_ERR_ARG, "expected 1 or 2 outputs", 2) : WGML_ERR_ARG;
    return pool_put(b, x, &d, outs[0], no > 1 ? outs[1] : -1);
}
static wgml_status op_adaptive_max_pool2d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 2, 1); }
static wgml_status op_adaptive_max_pool3d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 3, 1); }
static wgml_status op_adaptive_avg_pool2d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 2, 0); }
static wgml_status op_adaptive_avg_pool3d(pbuild *b, const int32_t *a, int n) { return adaptive_common(b, a, n, 3, 0); }

/* avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
 * divisor_override?) */
static wgml_status avg_pool_common(pbuild *b, const int32_t *args, int nargs, int nd) {
    NEED(8);
    wgml_pool_desc d = {.max = 0};
    int ok = 1;
    wgml_tensor *x = pool_input(b, args, nd);
    if (!x || pool_window(b, args, x, nd, -1, 4, &d)) return wgml_last_status(b->ctx);
    d.count_include_pad = inum(b, args, 5, 1, &ok) != 0;
    d.divisor = inum(b, args, 6, 0, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (d.divisor < 0 || d.divisor > WIN_MAX) return fail(b, WGML_ERR_ARG, "divisor_override out of range", 6);
    return pool_put(b, x, &d, OUT(0), -1);
}
static wgml_status op_avg_pool2d(pbuild *b, const int32_t *a, int n) { return avg_pool_common(b, a, n, 2); }
static wgml_status op_avg_pool3d(pbuild *b, const int32_t *a, int n) { return avg_pool_common(b, a, n, 3); }

/* The output size and the scale per dim of an upsample_*2d: output_size (args[1], may be
 * Null) or the scale factors (a DoubleList at args[scale_arg] for .vec, two Doubles at
 * args[scale_arg], args[scale_arg + 1] otherwise); scale[d] is the one given (0: none). */
static wgml_status upsample_size(pbuild *b, const int32_t *args, int vec, int scale_arg, const int64_t in[2], int64_t out[2],
                                 double scale[2]) {
    int64_t os[WGML_MAX_RANK];
    int n = ilist(b, args, 1, os, WGML_MAX_RANK), ok = 1;
    if (n < 0) return WGML_ERR_ARG;
    scale[0] = scale[1] = 0;
    if (vec) {
        const pv *s = val(b, args, scale_arg);
        if (s->kind == PV_DOUBLELIST && s->n == 2 && s->dlist) scale[0] = s->dlist[0], scale[1] = s->dlist[1];
        else if (s->kind != PV_NULL) return fail(b, WGML_ERR_ARG, "expected two scale factors", scale_arg);
    } else {
        scale[0] = num(b, args, scale_arg, 0, &ok), scale[1] = num(b, args, scale_arg + 1, 0, &ok);
        if (!ok) return WGML_ERR_ARG;
    }
    for (int d = 0; d < 2; d++) {
        if (!(scale[d] >= 0 && scale[d] < (double)WIN_ARG)) return fail(b, WGML_ERR_ARG, "scale factor out of range", scale_arg);
        out[d] = n == 2 ? os[d] : (int64_t)floor((double)in[d] * scale[d]);
    }
    if (n != 0 && n != 2) return fail(b, WGML_ERR_ARG, "expected two output sizes", 1);
    if (n == 0 && (!scale[0] || !scale[1])) return fail(b, WGML_ERR_ARG, "neither output_size nor scale factors", 1);
    if (out[0] < 1 || out[1] < 1 || out[0] > WIN_ARG || out[1] > WIN_ARG) return fail(b, WGML_ERR_ARG, "output size out of range", 1);
    return WGML_OK;
}

/* PyTorch's source-index scale of an upsample: the given factor's reciprocal, else in/out;
 * align_corners: (in − 1)/(out − 1) (0 for one output). */
static double upsample_scale(int64_t in, int64_t out, double given, int align) {
    if (align) return out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    return given > 0 ? 1.0 / given : (double)in / (double)out;
}

/* upsample_nearest2d.vec(input, output_size?, scale_factors?) and .default(input, output_size,
 * scales_h?, scales_w?): src = min(floor(dst·scale), in − 1) per dim (in float, as PyTorch),
 * one index_select of each plane. */
static wgml_status nearest_common(pbuild *b, const int32_t *args, int nargs, int vec) {
    NEED(vec ? 4 : 5);
    int64_t in[3] = {0, 0, 0};
    int64_t planes, out[2];
    double sc[2];
    wgml_tensor *x = T(b, args, 0);
    if (!x || win_input(b, x, 2, 0, in, &planes) || upsample_size(b, args, vec, 2, in, out, sc)) return wgml_last_status(b->ctx);
    int64_t np = out[0] * out[1], plane = in[0] * in[1];
    if (cap_mul(planes, np) > WIN_MAX) return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: too large for the gather form", b->op);
    int32_t *idx = malloc((size_t)np * sizeof *idx);
    if (!idx) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    float s0 = sc[0] > 0 ? (float)(1.0 / sc[0]) : (float)in[0] / (float)out[0];
    float s1 = sc[1] > 0 ? (float)(1.0 / sc[1]) : (float)in[1] / (float)out[1];
    for (int64_t y = 0; y < out[0]; y++)
        for (int64_t z = 0; z < out[1]; z++) {
            int64_t iy = (int64_t)floorf((float)y * s0), iz = (int64_t)floorf((float)z * s1);
            iy = iy < in[0] - 1 ? iy : in[0] - 1, iz = iz < in[1] - 1 ? iz : in[1] - 1;
            idx[y * out[1] + z] = (int32_t)(iy * in[1] + iz);
        }
    int64_t flat[2] = {planes, plane};
    wgml_tensor *it = host_tensor(b, WGML_I32, 1, &np, idx, (size_t)np * sizeof *idx);
    free(idx);
    return put(b, OUT(0), it ? wgml_index_select(b->g, wgml_reshape(b->g, x, 2, flat), 1, it) : NULL, 1);
}
static wgml_status op_upsample_nearest2d_vec(pbuild *b, const int32_t *a, int n) { return nearest_common(b, a, n, 1); }
static wgml_status op_upsample_nearest2d(pbuild *b, const int32_t *a, int n) { return nearest_common(b, a, n, 0); }

/* The [out, in] linear interpolation matrix of one dim (PyTorch's source index: align_corners
 * or half-pixel centres clamped at 0; neighbours i0 and min(i0 + 1, in − 1)). */
static float *interp_matrix(int64_t in, int64_t out, double given, int align) {
    float *m = calloc((size_t)(in * out), sizeof *m);
    if (!m) return NULL;
    double s = upsample_scale(in, out, given, align);
    for (int64_t o = 0; o < out; o++) {
        double src = align ? s * (double)o : s * ((double)o + 0.5) - 0.5;
        if (src < 0) src = 0;
        int64_t i0 = (int64_t)src, i1 = i0 < in - 1 ? i0 + 1 : i0;
        if (i0 > in - 1) i0 = i1 = in - 1;
        double l1 = src - (double)i0;
        l1 = l1 < 0 ? 0 : l1 > 1 ? 1 : l1;
        m[o * in + i0] += (float)(1.0 - l1);
        m[o * in + i1] += (float)l1;
    }
    return m;
}

/* upsample_bilinear2d.vec(input, output_size?, align_corners, scale_factors?) and
 * .default(input, output_size, align_corners, scales_h?, scales_w?): separable, so two
 * matmuls with host-built interpolation matrices: x·Aᵂᵀ over the rows, then Aᴴ· per plane. */
static wgml_status bilinear_common(pbuild *b, const int32_t *args, int nargs, int vec) {
    NEED(vec ? 5 : 6);
    int64_t in[3] = {0, 0, 0};
    int64_t planes, out[2];
    double sc[2];
    int ok = 1;
    wgml_tensor *x = T(b, args, 0);
    if (!x || win_input(b, x, 2, 0, in, &planes) || upsample_size(b, args, vec, 3, in, out, sc)) return wgml_last_status(b->ctx);
    int align = inum(b, args, 2, 0, &ok) != 0;
    if (!ok) return WGML_ERR_ARG;
    if (cap_mul(cap_mul(planes, out[0]), out[1]) > WIN_MAX || cap_mul(in[0], out[0]) > WIN_MAX || cap_mul(in[1], out[1]) > WIN_MAX)
        return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: too large", b->op);
    float *ah = interp_matrix(in[0], out[0], sc[0], align), *aw = interp_matrix(in[1], out[1], sc[1], align);
    int64_t sh[3] = {1, out[0], in[0]}, sw[2] = {out[1], in[1]}, rows[2] = {planes * in[0], in[1]};
    int64_t p3[3] = {planes, in[0], out[1]};
    wgml_tensor *th = ah && aw ? host_tensor(b, WGML_F32, 3, sh, ah, (size_t)(out[0] * in[0]) * sizeof *ah) : NULL;
    wgml_tensor *tw = th ? host_tensor(b, WGML_F32, 2, sw, aw, (size_t)(out[1] * in[1]) * sizeof *aw) : NULL;
    free(ah), free(aw);
    if (!tw) return wgml_last_status(b->ctx) ? wgml_last_status(b->ctx) : wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    wgml_tensor *y = wgml_matmul(b->g, wgml_reshape(b->g, x, 2, rows), tw, 0, 1); /* [planes·H, OW] */
    y = y ? wgml_matmul(b->g, th, wgml_reshape(b->g, y, 3, p3), 0, 0) : NULL;   /* [planes, OH, OW] */
    return put(b, OUT(0), y, 1);
}
static wgml_status op_upsample_bilinear2d_vec(pbuild *b, const int32_t *a, int n) { return bilinear_common(b, a, n, 1); }
static wgml_status op_upsample_bilinear2d(pbuild *b, const int32_t *a, int n) { return bilinear_common(b, a, n, 0); }

static const prog_op_entry OPS[] = {
    {"aten.convolution.default", op_conv},
    {"et_vk.conv_with_clamp.default", op_conv_with_clamp},
    {"aten._adaptive_avg_pool2d.default", op_adaptive_avg_pool2d},
    {"aten.avg_pool2d.default", op_avg_pool2d},
    {"aten.avg_pool3d.default", op_avg_pool3d},
    {"aten._adaptive_avg_pool3d.default", op_adaptive_avg_pool3d},
    {"aten.max_pool2d_with_indices.default", op_max_pool2d},
    {"aten.max_pool2d.default", op_max_pool2d},
    {"aten.max_pool3d_with_indices.default", op_max_pool3d},
    {"aten.adaptive_max_pool2d.default", op_adaptive_max_pool2d},
    {"aten.adaptive_max_pool3d.default", op_adaptive_max_pool3d},
    {"aten.upsample_nearest2d.vec", op_upsample_nearest2d_vec},
    {"aten.upsample_nearest2d.default", op_upsample_nearest2d},
    {"aten.upsample_bilinear2d.vec", op_upsample_bilinear2d_vec},
    {"aten.upsample_bilinear2d.default", op_upsample_bilinear2d},
};

const prog_op_table prog_ops_window = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
