/* The op registry's reductions, statistics and scans.
 *
 * The partitioners take into their graphs sum and mean (over a list of dims), amax and amin
 * (−amax(−x)), argmax and argmin (argmax(−x)), the mean of every element and median (of every
 * element, and along a dim with its indices); sums, amax and amin of ints and bools are taken
 * through f32 (exact up to 2^24) and converted to the output's dtype.
 *
 * Exports leave to portable kernels any and all (over every element, one dim or a list of
 * dims), max and min with their indices (max.dim, min.dim) and of every element, var and
 * var_mean (any correction), the batch norm of the batch's own statistics
 * (_native_batch_norm_legit.no_stats: instance norm's decomposition) and cumsum. The
 * partitioners leave them as glue (the decomposed scaled_dot_product_attention asks whether a
 * row of its mask has any entry left; transformers' position ids are a cumsum of the attention
 * mask; std is a var), so they come as the method's kernels: "aten::any.out" is any.dim's out
 * variant, "aten::max.dim_max" max.dim's (OUTS below). */
#include "program/ops_args.h"

/* sum.dim_IntList / mean.dim (self, dim?, keepdim, dtype?) and amax (self, dim, keepdim). */
static wgml_status reduce_common(pbuild *b, const int32_t *args, int nargs, int kind) {
    NEED(kind == 2 ? 4 : 5);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    int64_t d64[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d64, WGML_MAX_RANK), ok = 1;
    if (n < 0) return WGML_ERR_ARG;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!ok) return WGML_ERR_ARG;
    /* mean(int tensor, dtype=float): the mean of the values converted to f32 */
    if (kind == 1 && !is_null(b, args, 3) && wgml_tensor_dtype(x) != WGML_F32 && !(x = as_f32(b, x)))
        return wgml_last_status(b->ctx);
    int dims[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) dims[i] = (int)d64[i];
    /* a sum of bools or integers (a count, e.g. cross-entropy's valid labels) is summed in f32
     * (exact up to 2^24) and converted to the output's integer dtype */
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype);
    if (kind != 1) x = as_f32(b, x); /* amax of ints and bools likewise, exact up to 2^24 */
    wgml_tensor *r = kind == 0   ? wgml_sum(b->g, x, dims, n, keep)
                     : kind == 1 ? wgml_mean(b->g, x, dims, n, keep)
                                 : wgml_amax(b->g, x, dims, n, keep);
    if (r && kind != 1 && dt >= 0 && dt != WGML_F32) r = wgml_cast(b->g, r, (wgml_dtype)dt);
    return put(b, OUT(0), r, 0);
}
static wgml_status op_sum(pbuild *b, const int32_t *a, int n) { return reduce_common(b, a, n, 0); }
static wgml_status op_mean(pbuild *b, const int32_t *a, int n) { return reduce_common(b, a, n, 1); }
static wgml_status op_amax(pbuild *b, const int32_t *a, int n) { return reduce_common(b, a, n, 2); }

/* mean.dtype / mean.default (self, dtype?): the mean of every element, rank 0 */
static wgml_status op_mean_all(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_mean(b->g, x, NULL, 0, 0), 1);
}

/* argmax(self, dim?, keepdim): dim None flattens first. */
static wgml_status op_argmax(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = as_f32(b, T(b, args, 0)); /* int and bool values through f32 (exact to 2^24) */
    int ok = 1;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!x || !ok) return WGML_ERR_ARG;
    if (is_null(b, args, 1)) {
        int64_t n = wgml_tensor_numel(x);
        x = wgml_reshape(b->g, x, 1, &n);
        return put(b, OUT(0), wgml_argmax(b->g, x, 0, 0), 1);
    }
    int dim = iarg(b, args, 1, 0, &ok);
    return ok ? put(b, OUT(0), wgml_argmax(b->g, x, dim, keep), 0) : WGML_ERR_ARG;
}

/* amin(self, dim, keepdim) = −amax(−x) */
static wgml_status op_amin(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    int64_t d64[WGML_MAX_RANK];
    int n = ilist(b, args, 1, d64, WGML_MAX_RANK), ok = 1;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!x || n < 0 || !ok) return WGML_ERR_ARG;
    int dims[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) dims[i] = (int)d64[i];
    wgml_tensor *y = wgml_amax(b->g, wgml_neg(b->g, x), dims, n, keep);
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype);
    y = y ? wgml_neg(b->g, y) : NULL;
    return put(b, OUT(0), y && dt >= 0 && dt != WGML_F32 ? wgml_cast(b->g, y, (wgml_dtype)dt) : y, 0);
}

/* argmin(self, dim?, keepdim) = argmax(−x) (ties: the first index either way) */
static wgml_status op_argmin(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    int ok = 1;
    int keep = iarg(b, args, 2, 0, &ok);
    if (!x || !ok) return WGML_ERR_ARG;
    x = wgml_neg(b->g, x);
    if (is_null(b, args, 1)) {
        int64_t n = wgml_tensor_numel(x);
        return put(b, OUT(0), wgml_argmax(b->g, wgml_reshape(b->g, x, 1, &n), 0, 0), 1);
    }
    int dim = iarg(b, args, 1, 0, &ok);
    return ok ? put(b, OUT(0), wgml_argmax(b->g, x, dim, keep), 0) : WGML_ERR_ARG;
}

/* median.default (self): the lower median of every element (rank 0); median.dim / the out
 * variant median.dim_values (self, dim, keepdim) -> (values, indices). */
static wgml_status op_median_all(pbuild *b, const int32_t *args, int nargs) {
    NEED(2);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    int64_t n = wgml_tensor_numel(x);
    return put(b, OUT(0), wgml_median(b->g, wgml_reshape(b->g, x, 1, &n), 0, 0, NULL), 1);
}
static wgml_status op_median_dim(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    int dim = iarg(b, args, 1, 0, &ok), keep = iarg(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!ok || !x) return WGML_ERR_ARG;
    size_t no;
    const int32_t *outs = vlist(b, args, 3, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 2) return fail(b, WGML_ERR_ARG, "expected 2 outputs", 3);
    wgml_tensor *idx = NULL;
    wgml_tensor *v = wgml_median(b->g, x, dim, keep, &idx);
    wgml_status s = put(b, outs[0], v, 0);
    if (!s && b->v[outs[1]].kind == PV_TENSOR) s = put(b, outs[1], idx, 0);
    return s;
}

/* The dims an any/all reduces: argument i is an int (one dim), an int list (those dims; an empty
 * list reduces none, as PyTorch's any.dims) or None (every dim, *all set). dims[] are
 * normalised to [0, rank); rank 0 takes dim 0 or -1 and reduces nothing. WGML_OK or an error
 * naming the argument (out of range, repeated). */
static wgml_status reduce_dims(pbuild *b, const int32_t *args, int i, int rank, int *dims, int *n, int *all) {
    int64_t d64[WGML_MAX_RANK];
    const pv *x = val(b, args, i);
    *all = x->kind == PV_NULL, *n = 0;
    if (*all) return WGML_OK;
    int k = ilist(b, args, i, d64, WGML_MAX_RANK), ok = 1;
    if (k < 0) return WGML_ERR_ARG;
    for (int j = 0; j < k; j++) {
        int d = ndim(b, d64[j], rank, i, &ok);
        if (!ok) return WGML_ERR_ARG;
        for (int m = 0; m < *n; m++)
            if (dims[m] == d) return fail(b, WGML_ERR_ARG, "a dim appears twice", i);
        if (rank) dims[(*n)++] = d;
    }
    return WGML_OK;
}

/* any(x) over dims[0..n) (every dim when all): x != 0 as bool (NaN is true), as 0/1 in f32,
 * its amax, back to bool; all(x) = not any(not x). A rank-0 result is reshaped to the
 * serialised shape by put. */
static wgml_tensor *any_all(pbuild *b, wgml_tensor *x, const int *dims, int n, int all, int keep, int is_all) {
    wgml_tensor *t = wgml_tensor_dtype(x) == WGML_BOOL ? x : wgml_cast(b->g, x, WGML_BOOL);
    if (t && is_all) t = wgml_logical_not(b->g, t);
    if (t && (all || n) && wgml_tensor_rank(t)) {
        t = wgml_cast(b->g, t, WGML_F32);
        t = t ? wgml_amax(b->g, t, dims, all ? 0 : n, keep) : NULL;
        t = t ? wgml_cast(b->g, t, WGML_BOOL) : NULL;
    }
    if (t && is_all) t = wgml_logical_not(b->g, t);
    return t;
}

/* any.default / all.default (self); any.dim / all.dim (self, dim, keepdim); any.dims /
 * all.dims (self, dim: int[]?, keepdim). */
static wgml_status any_common(pbuild *b, const int32_t *args, int nargs, int form, int is_all) {
    NEED(form == 0 ? 2 : 4);
    wgml_tensor *x = T(b, args, 0);
    if (!x) return WGML_ERR_ARG;
    int dims[WGML_MAX_RANK], n = 0, all = 1, keep = 0, ok = 1;
    if (form) {
        int64_t d1;
        if (form == 1 && !as_integer(val(b, args, 1), &d1))
            return fail(b, WGML_ERR_ARG, "expected an integer dim", 1);
        if (reduce_dims(b, args, 1, wgml_tensor_rank(x), dims, &n, &all)) return WGML_ERR_ARG;
        keep = iarg(b, args, 2, 0, &ok);
        if (!ok) return WGML_ERR_ARG;
    }
    return put(b, OUT(0), any_all(b, x, dims, n, all, keep, is_all), 1);
}
static wgml_status op_any(pbuild *b, const int32_t *a, int n) { return any_common(b, a, n, 0, 0); }
static wgml_status op_any_dim(pbuild *b, const int32_t *a, int n) { return any_common(b, a, n, 1, 0); }
static wgml_status op_any_dims(pbuild *b, const int32_t *a, int n) { return any_common(b, a, n, 2, 0); }
static wgml_status op_all(pbuild *b, const int32_t *a, int n) { return any_common(b, a, n, 0, 1); }
static wgml_status op_all_dim(pbuild *b, const int32_t *a, int n) { return any_common(b, a, n, 1, 1); }
static wgml_status op_all_dims(pbuild *b, const int32_t *a, int n) { return any_common(b, a, n, 2, 1); }

/* The longest dim cumsum takes: its [n, n] triangle is n² floats on the GPU. */
#define CUMSUM_MAX 4096

/* cumsum(self, dim, dtype?): the running sum along dim, as one product with a host-built
 * upper-triangular matrix of ones (y[.., j] = Σ_{i <= j} x[.., i]) after moving dim last. Int
 * and bool inputs (a cumsum of an attention mask) sum in f32, exact up to 2^24, and convert to
 * the output's dtype. */
static wgml_status op_cumsum(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    int64_t dim = inum(b, args, 1, 0, &ok);
    if (!x || !ok) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x), d = ndim(b, dim, rank, 1, &ok);
    if (!ok) return WGML_ERR_ARG;
    int64_t n = rank ? wgml_tensor_dim(x, d) : 1, m = wgml_tensor_numel(x) / n;
    if (n > CUMSUM_MAX) return fail(b, WGML_ERR_UNSUPPORTED, "cumsum along a dim longer than 4096", 1);
    int perm[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) perm[i] = i == d ? rank - 1 : i == rank - 1 ? d : i;
    wgml_tensor *y = x;
    if (n > 1) {
        float *u = calloc((size_t)(n * n), sizeof *u);
        if (!u) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = i; j < n; j++) u[i * n + j] = 1.0f;
        int64_t us[2] = {n, n}, rows[2] = {m, n};
        wgml_tensor *ut = host_tensor(b, WGML_F32, 2, us, u, (size_t)(n * n) * sizeof *u);
        free(u);
        if (!ut) return wgml_last_status(b->ctx);
        wgml_tensor *xt = d == rank - 1 ? x : wgml_permute(b->g, x, perm);
        y = xt ? wgml_matmul(b->g, wgml_reshape(b->g, xt, 2, rows), ut, 0, 0) : NULL;
        int64_t ts[WGML_MAX_RANK];
        for (int i = 0; i < rank; i++) ts[i] = wgml_tensor_dim(x, perm[i]);
        y = y ? wgml_reshape(b->g, y, rank, ts) : NULL;
        if (y && d != rank - 1) y = wgml_permute(b->g, y, perm); /* the swap is its own inverse */
    }
    int dt = prog_vk_to_wgml(b->v[OUT(0)].vk_dtype);
    if (y && dt >= 0 && dt != WGML_F32) y = wgml_cast(b->g, y, (wgml_dtype)dt);
    return put(b, OUT(0), y, 1);
}

/* The dims argument i of a var/max-like op into dims[] (normalised; an Int is one dim; None or
 * an empty list is every dim, *n 0). */
static wgml_status stat_dims(pbuild *b, const int32_t *args, int i, int rank, int *dims, int *n) {
    int all;
    if (reduce_dims(b, args, i, rank, dims, n, &all)) return WGML_ERR_ARG;
    return WGML_OK; /* *n == 0: every dim (wgml's reductions read 0 dims so) */
}

/* The number of elements a reduction over dims[0..n) (every dim when n is 0) takes. */
static int64_t reduced_count(wgml_tensor *x, const int *dims, int n) {
    if (!n) return wgml_tensor_numel(x);
    int64_t c = 1;
    for (int i = 0; i < n; i++) c *= wgml_tensor_dim(x, dims[i]);
    return c;
}

/* var of x over dims: Σ (x − mean)² / max(0, N − correction), two passes (the mean first); a
 * divisor of 0 gives inf, or NaN for a zero sum, as PyTorch. *mean_out (when not NULL) gets
 * the mean, kept as keepdim says. */
static wgml_tensor *variance(pbuild *b, wgml_tensor *x, const int *dims, int n, double correction, int keep,
                             wgml_tensor **mean_out) {
    int64_t count = reduced_count(x, dims, n);
    double div = (double)count - correction;
    wgml_tensor *m = wgml_mean(b->g, x, dims, n, 1), *d = m ? wgml_sub(b->g, x, m, 1.0f) : NULL;
    wgml_tensor *v = d ? wgml_sum(b->g, wgml_mul(b->g, d, d), dims, n, keep) : NULL;
    v = v ? wgml_mul_scalar(b->g, v, (float)(1.0 / (div > 0 ? div : 0.0))) : NULL;
    if (mean_out && v) *mean_out = keep ? m : wgml_mean(b->g, x, dims, n, 0);
    return v;
}

/* var.correction / var_mean.correction (self, dim?, correction?, keepdim) and var.dim (self,
 * dim?, unbiased, keepdim): the correction (default 1; unbiased False is 0). Float input. */
static wgml_status var_common(pbuild *b, const int32_t *args, int nargs, int form) {
    NEED(5);
    wgml_tensor *x = T(b, args, 0);
    int dims[WGML_MAX_RANK], n = 0, ok = 1;
    if (!x || stat_dims(b, args, 1, wgml_tensor_rank(x), dims, &n)) return WGML_ERR_ARG;
    double corr = form == 1 ? (inum(b, args, 2, 1, &ok) ? 1.0 : 0.0) : num(b, args, 2, 1.0, &ok);
    int keep = iarg(b, args, 3, 0, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (wgml_tensor_dtype(x) != WGML_F32) return fail(b, WGML_ERR_DTYPE, "var takes a float tensor", 0);
    wgml_tensor *mean = NULL;
    wgml_tensor *v = variance(b, x, dims, n, corr, keep, form == 2 ? &mean : NULL);
    if (form != 2) return put(b, OUT(0), v, 1);
    size_t no;
    const int32_t *outs = vlist(b, args, 4, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 2) return fail(b, WGML_ERR_ARG, "expected 2 outputs", 4);
    wgml_status s = put(b, outs[0], v, 1);
    return s ? s : put(b, outs[1], mean, 1);
}
static wgml_status op_var(pbuild *b, const int32_t *a, int n) { return var_common(b, a, n, 0); }
static wgml_status op_var_dim(pbuild *b, const int32_t *a, int n) { return var_common(b, a, n, 1); }
static wgml_status op_var_mean(pbuild *b, const int32_t *a, int n) { return var_common(b, a, n, 2); }

/* max.dim / min.dim (self, dim, keepdim) -> (values, indices): amax and argmax (of −x for
 * min), ties and NaNs as PyTorch (the first index; a NaN is the maximum); max.default /
 * min.default (self): of every element. Int and bool values go through f32 (exact to 2^24) and
 * back to the output's dtype. */
static wgml_status extreme_common(pbuild *b, const int32_t *args, int nargs, int is_min, int along) {
    NEED(along ? 4 : 2);
    wgml_tensor *x = as_f32(b, T(b, args, 0));
    int ok = 1, keep = along ? iarg(b, args, 2, 0, &ok) : 0, rank = x ? wgml_tensor_rank(x) : 0;
    int dim = along ? ndim(b, inum(b, args, 1, 0, &ok), rank, 1, &ok) : 0;
    if (!x || !ok) return WGML_ERR_ARG;
    size_t no = 1;
    const int32_t *outs = along ? vlist(b, args, 3, &no) : &OUT(0);
    if (!outs) return WGML_ERR_ARG;
    if (no != 2 && along) return fail(b, WGML_ERR_ARG, "expected 2 outputs", 3);
    wgml_tensor *y = is_min ? wgml_neg(b->g, x) : x, *idx = NULL;
    if (!along || !rank) { /* every element (a rank-0 input along dim 0 too) */
        int64_t numel = wgml_tensor_numel(x);
        y = y ? wgml_reshape(b->g, y, 1, &numel) : NULL;
        dim = 0;
    }
    wgml_tensor *v = y ? wgml_amax(b->g, y, &dim, 1, keep) : NULL;
    if (along && y) idx = wgml_argmax(b->g, y, dim, keep);
    if (v && is_min) v = wgml_neg(b->g, v);
    int dt = prog_vk_to_wgml(b->v[outs[0]].vk_dtype);
    if (v && dt >= 0 && dt != WGML_F32) v = wgml_cast(b->g, v, (wgml_dtype)dt);
    wgml_status s = put(b, outs[0], v, 1);
    return s || !along || b->v[outs[1]].kind != PV_TENSOR ? s : put(b, outs[1], idx, 1);
}
static wgml_status op_max_dim(pbuild *b, const int32_t *a, int n) { return extreme_common(b, a, n, 0, 1); }
static wgml_status op_min_dim(pbuild *b, const int32_t *a, int n) { return extreme_common(b, a, n, 1, 1); }
static wgml_status op_max_all(pbuild *b, const int32_t *a, int n) { return extreme_common(b, a, n, 0, 0); }
static wgml_status op_min_all(pbuild *b, const int32_t *a, int n) { return extreme_common(b, a, n, 1, 0); }

/* _native_batch_norm_legit.no_stats(input [N, C, *], weight?, bias?, training, momentum, eps)
 * -> (out, save_mean [C], save_invstd [C]): each channel normalised by its own mean and biased
 * variance over the batch and the spatial dims (instance norm decomposes into this on
 * [1, N·C, *]): the channels moved first, one layer norm of their rows, moved back, then the
 * per-channel affine. */
static wgml_status op_batch_norm_stats(pbuild *b, const int32_t *args, int nargs) {
    NEED(7);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0), *w, *bias;
    int training = iarg(b, args, 3, 1, &ok);
    float eps = (float)num(b, args, 5, 1e-5, &ok);
    if (!x || !ok || opt_tensor(b, args, 1, &w) || opt_tensor(b, args, 2, &bias)) return WGML_ERR_ARG;
    if (!training) return fail(b, WGML_ERR_ARG, "without running statistics the norm needs training", 3);
    int r = wgml_tensor_rank(x), perm[WGML_MAX_RANK];
    if (r < 2 || wgml_tensor_dtype(x) != WGML_F32) return fail(b, WGML_ERR_SHAPE, "input must be float [N, C, ...]", 0);
    int64_t c = wgml_tensor_dim(x, 1), rows[2] = {c, wgml_tensor_numel(x) / c}, moved[WGML_MAX_RANK], wc[WGML_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i == 0 ? 1 : i == 1 ? 0 : i, wc[i] = i == 1 ? c : 1;
    for (int i = 0; i < r; i++) moved[i] = wgml_tensor_dim(x, perm[i]);
    if ((w && wgml_tensor_numel(w) != c) || (bias && wgml_tensor_numel(bias) != c))
        return fail(b, WGML_ERR_SHAPE, "weight and bias must have C elements", w && wgml_tensor_numel(w) != c ? 1 : 2);
    size_t no;
    const int32_t *outs = vlist(b, args, 6, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 3) return fail(b, WGML_ERR_ARG, "expected 3 outputs", 6);
    int one = wgml_tensor_dim(x, 0) == 1; /* [1, C, *] is already channels first */
    wgml_tensor *t = one ? x : wgml_permute(b->g, x, perm), *mean = NULL, *rstd = NULL;
    t = t ? wgml_layer_norm(b->g, wgml_reshape(b->g, t, 2, rows), NULL, NULL, eps, &mean, &rstd) : NULL;
    if (t && one) {
        for (int i = 0; i < r; i++) moved[i] = wgml_tensor_dim(x, i);
        t = wgml_reshape(b->g, t, r, moved);
    } else if (t) {
        t = wgml_reshape(b->g, t, r, moved);
        t = t ? wgml_permute(b->g, t, perm) : NULL; /* the swap is its own inverse */
    }
    if (t && w) t = wgml_mul(b->g, t, wgml_reshape(b->g, w, r, wc));
    if (t && bias) t = wgml_add(b->g, t, wgml_reshape(b->g, bias, r, wc), 1.0f);
    wgml_status s = put(b, outs[0], t, 1);
    if (!s && b->v[outs[1]].kind == PV_TENSOR) s = put(b, outs[1], mean, 1);
    if (!s && b->v[outs[2]].kind == PV_TENSOR) s = put(b, outs[2], rstd, 1);
    return s;
}

static const prog_op_entry OPS[] = {
    {"aten.sum.dim_IntList", op_sum},
    {"aten.mean.dim", op_mean},
    {"aten.mean.dtype", op_mean_all},
    {"aten.amax.default", op_amax},
    {"aten.argmax.default", op_argmax},
    {"aten.amin.default", op_amin},
    {"aten.argmin.default", op_argmin},
    {"aten.median.default", op_median_all},
    {"aten.median.dim", op_median_dim},
    {"aten.median.dim_values", op_median_dim},
    {"aten.any.default", op_any},
    {"aten.any.dim", op_any_dim},
    {"aten.any.dims", op_any_dims},
    {"aten.all.default", op_all},
    {"aten.all.dim", op_all_dim},
    {"aten.all.dims", op_all_dims},
    {"aten.cumsum.default", op_cumsum},
    {"aten.var.correction", op_var},
    {"aten.var.dim", op_var_dim},
    {"aten.var_mean.correction", op_var_mean},
    {"aten.max.dim", op_max_dim},
    {"aten.min.dim", op_min_dim},
    {"aten.max.default", op_max_all},
    {"aten.min.default", op_min_all},
    {"aten._native_batch_norm_legit.no_stats", op_batch_norm_stats},
};

/* Out variants PyTorch names apart from the functional overload: any.out is any.dim's, any.all_out
 * any(self)'s, max.dim_max max.dim's, max.unary_out max(self)'s, var.out var.dim's. */
static const prog_op_out OUTS[] = {
    {"aten.any.out", "aten.any.dim"},
    {"aten.any.all_out", "aten.any.default"},
    {"aten.all.out", "aten.all.dim"},
    {"aten.all.all_out", "aten.all.default"},
    {"aten.max.dim_max", "aten.max.dim"},
    {"aten.min.dim_min", "aten.min.dim"},
    {"aten.max.unary_out", "aten.max.default"},
    {"aten.min.unary_out", "aten.min.default"},
    {"aten.var.out", "aten.var.dim"},
};

const prog_op_table prog_ops_reduce = {OPS, sizeof OPS / sizeof OPS[0], OUTS, sizeof OUTS / sizeof OUTS[0]};
