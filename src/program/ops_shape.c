/* The op registry's shape changes, views and copies: the view-like copies (view_copy,
 * _unsafe_view, squeeze, unsqueeze, alias, clone, the dim-order copies, et_vk.prepack: views of
 * a contiguous tensor, or a dtype conversion), permute, transpose, slice, select, cat, split,
 * split_with_sizes, expand_copy, repeat, flip (a gather per flipped dim), pixel_shuffle (a
 * view, a permute, a view), and the copies fully partitioned programs keep around padded
 * convolutions (copy, slice_scatter). The strided copies and constant_pad_nd are in
 * ops_copy.c. */
#include "program/ops_args.h"

/* Ops whose output is the input's elements in the output's serialised shape: view_copy,
 * _unsafe_view, squeeze/unsqueeze, alias, clone, the dim-order copies of a contiguous tensor.
 * All tensors here are contiguous, so these are views (no copy); a dtype change is refused. */
static double host_elem(const uint8_t *p, int vk, int64_t i) {
    switch (vk) {
    case VK_BOOL: case VK_UINT8: return p[i];
    case VK_INT8: return (int8_t)p[i];
    case VK_INT32: { int32_t x; memcpy(&x, p + 4 * i, 4); return x; }
    case VK_INT64: { int64_t x; memcpy(&x, p + 8 * i, 8); return (double)x; }
    case VK_FLOAT32: { float x; memcpy(&x, p + 4 * i, 4); return x; }
    case VK_FLOAT64: { double x; memcpy(&x, p + 8 * i, 8); return x; }
    default: return 0;
    }
}

/* A dtype conversion of a constant, done on the host: a new constant of the output's dtype. */
static wgml_status convert_constant(pbuild *b, const pv *x, int32_t out) {
    const pv *o = &b->v[out];
    int dt = prog_vk_to_wgml(o->vk_dtype);
    int64_t n = wgml_tensor_numel(x->t);
    if (dt < 0 || x->host_vk == VK_FLOAT16) return fail(b, WGML_ERR_UNSUPPORTED, "unsupported conversion", 0);
    size_t es = wgml_dtype_size((wgml_dtype)dt);
    uint8_t *buf = malloc((size_t)n * es + 1);
    if (!buf) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t i = 0; i < n; i++) {
        double v = host_elem(x->host, x->host_vk, i);
        if (dt == WGML_F32) { float f = (float)v; memcpy(buf + 4 * i, &f, 4); }
        else if (dt == WGML_I32) { int32_t k = (int32_t)v; memcpy(buf + 4 * i, &k, 4); }
        else buf[i] = v != 0;
    }
    wgml_tensor *t = wgml_tensor_new(b->g, (wgml_dtype)dt, o->rank, o->dims);
    wgml_status s = t ? wgml_tensor_write(t, buf, (size_t)n * es) : wgml_last_status(b->ctx);
    free(buf);
    return s ? s : put(b, out, t, 0);
}

static wgml_status op_view(pbuild *b, const int32_t *args, int nargs) {
    if (nargs < 2) return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: %d arguments", b->op, nargs);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    const pv *in = val(b, args, 0);
    pv *o = &b->v[OUT(0)];
    if (o->kind == PV_TENSOR && prog_vk_to_wgml(o->vk_dtype) != (int)wgml_tensor_dtype(x)) {
        if (in->host) return convert_constant(b, in, OUT(0));
        /* a computed tensor: converted on the GPU (f32, i32, bool; wgml_cast refuses others) */
        int dt = prog_vk_to_wgml(o->vk_dtype);
        if (dt < 0)
            return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: dtype conversion %s -> %s is not supported",
                                  b->op, wgml_dtype_name(wgml_tensor_dtype(x)), prog_vk_dtype_name(o->vk_dtype));
        return put(b, OUT(0), wgml_cast(b->g, x, (wgml_dtype)dt), 1);
    }
    wgml_status s = put(b, OUT(0), x, 1);
    if (!s && in->host) o->host = in->host, o->host_vk = in->host_vk; /* still the constant's elements */
    return s;
}

static wgml_status op_permute(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int64_t d[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d, WGML_MAX_RANK), ok = 1;
    wgml_tensor *x = T(b, args, 0);
    if (n < 0 || !x) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x), dims[WGML_MAX_RANK];
    if (n != r) return fail(b, WGML_ERR_ARG, "permutation of the wrong length", 1);
    for (int i = 0; i < n; i++) dims[i] = ndim(b, d[i], r, 1, &ok);
    return ok ? put(b, OUT(0), wgml_permute(b->g, x, dims), 0) : WGML_ERR_ARG;
}

/* transpose_copy.int(self, dim0, dim1) */
static wgml_status op_transpose(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    int d0 = iarg(b, args, 1, 0, &ok), d1 = iarg(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    return ok && x ? put(b, OUT(0), wgml_transpose(b->g, x, d0, d1), 0) : WGML_ERR_ARG;
}

/* slice_copy.Tensor(self, dim, start?, end?, step) */
static wgml_status op_slice(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    int ok = 1;
    int64_t dim = inum(b, args, 1, 0, &ok);
    int64_t start = inum(b, args, 2, 0, &ok), end = inum(b, args, 3, INT64_MAX, &ok);
    int64_t step = inum(b, args, 4, 1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_slice(b->g, x, (int)dim, start, end, step), 0);
}

/* select_copy.int(self, dim, index): a slice of one, the dim dropped. */
static wgml_status op_select(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    int64_t dim = inum(b, args, 1, 0, &ok), idx = inum(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    int d = ndim(b, dim, wgml_tensor_rank(x), 1, &ok);
    if (!ok) return WGML_ERR_ARG;
    int64_t size = wgml_tensor_dim(x, d);
    if (idx < -size || idx >= size) return fail(b, WGML_ERR_ARG, "index out of range", 2);
    if (idx < 0) idx += size;
    return put(b, OUT(0), wgml_slice(b->g, x, d, idx, idx + 1, 1), 1);
}

/* cat(tensors, dim) */
static wgml_status op_cat(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    size_t n;
    const int32_t *ids = vlist(b, args, 0, &n);
    int ok = 1;
    int dim = iarg(b, args, 1, 0, &ok);
    if (!ids || !ok) return WGML_ERR_ARG;
    if (n == 0 || n > 64) return fail(b, WGML_ERR_ARG, "between 1 and 64 tensors", 0);
    wgml_tensor *ts[64];
    for (size_t i = 0; i < n; i++) {
        const pv *x = &b->v[ids[i]];
        if (x->kind != PV_TENSOR || !x->t) return fail(b, WGML_ERR_ARG, "a list element is not a computed tensor", 0);
        ts[i] = x->t;
    }
    return put(b, OUT(0), wgml_cat(b->g, ts, (int)n, dim), 0);
}

/* split_with_sizes_copy(self, split_sizes, dim) -> ValueList; split_copy.Tensor(self, size, dim). */
static wgml_status split_common(pbuild *b, const int32_t *args, int nargs, int equal) {
    NEED(4);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0);
    int64_t sizes[64];
    int n = ilist(b, args, 1, sizes, 64);
    int64_t dim = inum(b, args, 2, 0, &ok);
    size_t no;
    const int32_t *outs = vlist(b, args, 3, &no);
    if (!x || n < 0 || !ok || !outs) return WGML_ERR_ARG;
    int d = ndim(b, dim, wgml_tensor_rank(x), 2, &ok);
    if (!ok) return WGML_ERR_ARG;
    int64_t off = 0, size = wgml_tensor_dim(x, d);
    for (size_t i = 0; i < no; i++) {
        int64_t len = equal ? (n == 1 ? sizes[0] : 0) : ((int)i < n ? sizes[i] : 0);
        if (len <= 0 || off + len > size + (equal ? len : 0)) return fail(b, WGML_ERR_ARG, "split sizes do not fit", 1);
        int64_t end = off + len > size ? size : off + len;
        wgml_status s = put(b, outs[i], wgml_slice(b->g, x, d, off, end, 1), 0);
        if (s) return s;
        off = end;
    }
    if (off != size) return fail(b, WGML_ERR_ARG, "split sizes do not cover the dimension", 1);
    return WGML_OK;
}
static wgml_status op_split_with_sizes(pbuild *b, const int32_t *a, int n) { return split_common(b, a, n, 0); }
static wgml_status op_split(pbuild *b, const int32_t *a, int n) { return split_common(b, a, n, 1); }

/* expand_copy(self, size, implicit) */
static wgml_status op_expand(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int64_t s[WGML_MAX_RANK];
    int n = ilist(b, args, 1, s, WGML_MAX_RANK);
    wgml_tensor *x = T(b, args, 0);
    if (n < 0 || !x) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_expand_copy(b->g, x, n, s), 0);
}

/* repeat(self, repeats): x viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...]
 * and read as [r0·s0, r1·s1, ...] (the tiling order of torch.repeat). */
static wgml_status op_repeat(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int64_t r[WGML_MAX_RANK];
    int n = ilist(b, args, 1, r, WGML_MAX_RANK);
    wgml_tensor *x = T(b, args, 0);
    if (n < 0 || !x) return WGML_ERR_ARG;
    int xr = wgml_tensor_rank(x);
    if (n < xr || 2 * n > WGML_MAX_RANK)
        return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: %d repeats of a rank-%d tensor", b->op, n, xr);
    int64_t v[WGML_MAX_RANK], e[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) {
        int64_t si = i - (n - xr) >= 0 ? wgml_tensor_dim(x, i - (n - xr)) : 1;
        v[2 * i] = 1, v[2 * i + 1] = si;
        e[2 * i] = r[i], e[2 * i + 1] = si;
    }
    wgml_tensor *y = wgml_reshape(b->g, x, 2 * n, v);
    y = y ? wgml_expand_copy(b->g, y, 2 * n, e) : NULL;
    return put(b, OUT(0), y, 1);
}

/* flip(x, dims): index_select with a reversed index per flipped dim */
static wgml_status op_flip(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int64_t d64[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d64, WGML_MAX_RANK), ok = 1;
    wgml_tensor *x = T(b, args, 0);
    if (!x || n < 0) return WGML_ERR_ARG;
    for (int i = 0; i < n && x; i++) {
        int d = ndim(b, d64[i], wgml_tensor_rank(x), 1, &ok);
        if (!ok) return WGML_ERR_ARG;
        int64_t size = wgml_tensor_dim(x, d);
        int32_t *idx = malloc((size_t)size * sizeof *idx);
        if (!idx) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
        for (int64_t k = 0; k < size; k++) idx[k] = (int32_t)(size - 1 - k);
        wgml_tensor *it = host_tensor(b, WGML_I32, 1, &size, idx, (size_t)size * sizeof *idx);
        free(idx);
        x = it ? wgml_index_select(b->g, x, d, it) : NULL;
    }
    return put(b, OUT(0), x, 0);
}

/* pixel_shuffle(x [.., C·r², H, W], r) -> [.., C, H·r, W·r]: a view, a permute, a view */
static wgml_status op_pixel_shuffle(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    int ok = 1;
    int64_t r = inum(b, args, 1, 1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x);
    if (rank != 4 || r < 1 || wgml_tensor_dim(x, 1) % (r * r))
        return fail(b, WGML_ERR_SHAPE, "pixel_shuffle takes [N, C·r², H, W]", 0);
    int64_t n = wgml_tensor_dim(x, 0), c = wgml_tensor_dim(x, 1) / (r * r), h = wgml_tensor_dim(x, 2), w = wgml_tensor_dim(x, 3);
    int64_t v[6] = {n, c, r, r, h, w};
    int perm[6] = {0, 1, 4, 2, 5, 3};
    wgml_tensor *y = wgml_permute(b->g, wgml_reshape(b->g, x, 6, v), perm);
    return put(b, OUT(0), y, 1);
}

/* copy (self, src, non_blocking): src broadcast to self's shape, in self's dtype (a dtype
 * conversion is refused). */
static wgml_status op_copy(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *self = T(b, args, 0), *src = self ? T(b, args, 1) : NULL;
    if (!src) return WGML_ERR_ARG;
    if (wgml_tensor_dtype(self) != wgml_tensor_dtype(src))
        return fail(b, WGML_ERR_UNSUPPORTED, "src's dtype differs from self's (no conversion)", 1);
    int rank = wgml_tensor_rank(self);
    int64_t shape[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) shape[i] = wgml_tensor_dim(self, i);
    return put(b, OUT(0), wgml_expand_copy(b->g, src, rank, shape), 0);
}

/* slice_scatter (self, src, dim, start?, end?, step): self with self[start:end:step] along dim
 * replaced by src, as one gather: index_select of cat(self, src) along dim with a host-built
 * index (position i reads src's row (i - start) / step inside the slice, else self's row i). */
static wgml_status op_slice_scatter(pbuild *b, const int32_t *args, int nargs) {
    NEED(7);
    int ok = 1;
    wgml_tensor *self = T(b, args, 0), *src = self ? T(b, args, 1) : NULL;
    if (!src) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(self);
    int dim = ndim(b, inum(b, args, 2, 0, &ok), rank, 2, &ok);
    int64_t size = ok ? wgml_tensor_dim(self, dim) : 0;
    int64_t start = inum(b, args, 3, 0, &ok), end = inum(b, args, 4, INT64_MAX, &ok), step = inum(b, args, 5, 1, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (step < 1) return fail(b, WGML_ERR_ARG, "step must be positive", 5);
    /* Python slice bounds: negative counts from the end, then clamped into [0, size] */
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    int64_t len = (end - start + step - 1) / step;
    int same = wgml_tensor_rank(src) == rank && wgml_tensor_dtype(src) == wgml_tensor_dtype(self);
    for (int i = 0; same && i < rank; i++) same = wgml_tensor_dim(src, i) == (i == dim ? len : wgml_tensor_dim(self, i));
    if (!same) return fail(b, WGML_ERR_SHAPE, "src must have self's dtype and shape with the slice's length at dim", 1);
    if (len == 0) return put(b, OUT(0), self, 0); /* an empty slice: self unchanged */
    int32_t *idx = malloc((size_t)size * sizeof *idx);
    if (!idx) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t i = 0; i < size; i++)
        idx[i] = (int32_t)(i >= start && i < end && (i - start) % step == 0 ? size + (i - start) / step : i);
    wgml_tensor *it = host_tensor(b, WGML_I32, 1, &size, idx, (size_t)size * sizeof *idx);
    free(idx);
    wgml_tensor *parts[2] = {self, src};
    wgml_tensor *both = it ? wgml_cat(b->g, parts, 2, dim) : NULL;
    return put(b, OUT(0), both ? wgml_index_select(b->g, both, dim, it) : NULL, 0);
}

static const prog_op_entry OPS[] = {
    {"aten.view_copy.default", op_view},
    {"aten._unsafe_view.default", op_view},
    {"aten.squeeze_copy.dims", op_view},
    {"aten.squeeze_copy.dim", op_view},
    {"aten.squeeze_copy.default", op_view},
    {"aten.unsqueeze_copy.default", op_view},
    {"aten.alias_copy.default", op_view},
    {"aten.clone.default", op_view},
    {"aten._to_copy.default", op_view},
    {"dim_order_ops._clone_dim_order.default", op_view},
    {"dim_order_ops._to_dim_order_copy.default", op_view},
    {"et_vk.prepack.default", op_view},
    {"aten.permute_copy.default", op_permute},
    {"aten.permute.default", op_permute},
    {"aten.transpose_copy.int", op_transpose},
    {"aten.slice_copy.Tensor", op_slice},
    {"aten.select_copy.int", op_select},
    {"aten.cat.default", op_cat},
    {"aten.split_with_sizes_copy.default", op_split_with_sizes},
    {"aten.split_copy.Tensor", op_split},
    {"aten.expand_copy.default", op_expand},
    {"aten.repeat.default", op_repeat},
    {"aten.flip.default", op_flip},
    {"aten.pixel_shuffle.default", op_pixel_shuffle},
    {"aten.copy.default", op_copy},
    {"aten.slice_scatter.default", op_slice_scatter},
};

const prog_op_table prog_ops_shape = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
