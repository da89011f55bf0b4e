/* The op registry's logical reductions and scans: any and all (over every element, one dim or
 * a list of dims) and cumsum. The Vulkan and WebGPU partitioners leave them to portable
 * kernels (the decomposed scaled_dot_product_attention asks whether a row of its mask has any
 * entry left; transformers' position ids are a cumsum of the attention mask), so they come as
 * glue kernels of the method: "aten::any.out" is any.dim's out variant (OUTS below). */
#include "program/ops_args.h"

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

static const prog_op_entry OPS[] = {
    {"aten.any.default", op_any},
    {"aten.any.dim", op_any_dim},
    {"aten.any.dims", op_any_dims},
    {"aten.all.default", op_all},
    {"aten.all.dim", op_all_dim},
    {"aten.all.dims", op_all_dims},
    {"aten.cumsum.default", op_cumsum},
};

/* PyTorch names the out variant of any.dim "any.out" and that of any(self) "any.all_out". */
static const prog_op_out OUTS[] = {
    {"aten.any.out", "aten.any.dim"},
    {"aten.any.all_out", "aten.any.default"},
    {"aten.all.out", "aten.all.dim"},
    {"aten.all.all_out", "aten.all.default"},
};

const prog_op_table prog_ops_reduce = {OPS, sizeof OPS / sizeof OPS[0], OUTS, sizeof OUTS / sizeof OUTS[0]};
