/* The op registry's tensor makers: full, full_like, zeros, ones (and their _like forms),
 * scalar_tensor and _empty_dim_order (zeros here) make a tensor of the output's serialised
 * shape and dtype; arange is a constant built on the host. Fully partitioned programs keep
 * arange and _empty_dim_order as glue around padded convolutions. */
#include "program/ops_args.h"

#include <math.h>

/* full(size, fill_value, dtype, layout, device, pin_memory), full_like(self, fill_value, ...),
 * zeros/ones(size, ...), zeros_like/ones_like(self, ...), scalar_tensor(s, ...): the output's
 * serialised shape and dtype say what to make; the value comes from the op. */
static wgml_status fill_common(pbuild *b, const int32_t *args, int nargs, int value_arg, double value) {
    if (nargs < value_arg + 2)
        return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: %d arguments", b->op, nargs);
    const pv *o = &b->v[OUT(0)];
    if (o->kind != PV_TENSOR) return fail(b, WGML_ERR_ARG, "output is not a tensor", nargs - 1);
    int ok = 1;
    if (value_arg >= 0) value = num(b, args, value_arg, 0, &ok);
    int dt = prog_vk_to_wgml(o->vk_dtype);
    if (!ok) return WGML_ERR_ARG;
    if (dt < 0) return fail(b, WGML_ERR_DTYPE, "unsupported output dtype", nargs - 1);
    return put(b, OUT(0), wgml_full(b->g, (wgml_dtype)dt, o->rank, o->dims, value), 0);
}
static wgml_status op_full(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, 1, 0); }
static wgml_status op_scalar_tensor(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, 0, 0); }
static wgml_status op_zeros(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, -1, 0); }
static wgml_status op_ones(pbuild *b, const int32_t *a, int n) { return fill_common(b, a, n, -1, 1); }

/* arange.start_step (start, end, step, dtype?, layout?, device?, pin_memory?) and its out
 * variant arange.start_out (start, end, step): a constant, built on the host in the output's
 * dtype (int64 narrowed to int32, as every int tensor). */
static wgml_status op_arange(pbuild *b, const int32_t *args, int nargs) {
    if (nargs != 4 && nargs != 8) NEED(4);
    int ok = 1;
    double start = num(b, args, 0, 0.0, &ok), end = num(b, args, 1, 0.0, &ok), step = num(b, args, 2, 1.0, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (!(step != 0) || !isfinite(start) || !isfinite(end) || !isfinite(step) || (end - start) / step < 0)
        return fail(b, WGML_ERR_ARG, "step must be non-zero, finite and point from start to end", 2);
    double nd = ceil((end - start) / step);
    pv *o = &b->v[OUT(0)];
    if (o->kind != PV_TENSOR || o->unsupported || o->rank != 1 || (double)o->dims[0] != nd)
        return wgml_set_error(b->ctx, WGML_ERR_SHAPE, "program: %s: %g values from %g to %g by %g, the output is not a "
                              "tensor of that many", b->op, nd, start, end, step);
    int dt = prog_vk_to_wgml(o->vk_dtype);
    if (dt != WGML_F32 && dt != WGML_I32)
        return wgml_set_error(b->ctx, WGML_ERR_DTYPE, "program: %s: output dtype %s", b->op, prog_vk_dtype_name(o->vk_dtype));
    int64_t n = o->dims[0];
    void *h = malloc((size_t)n * 4);
    if (!h) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i * step;
        if (dt == WGML_I32) {
            if (v < -2147483648.0 || v > 2147483647.0) {
                free(h);
                return wgml_set_error(b->ctx, WGML_ERR_LIMIT, "program: %s: value %g is outside int32", b->op, v);
            }
            ((int32_t *)h)[i] = (int32_t)v;
        } else {
            ((float *)h)[i] = (float)v;
        }
    }
    wgml_tensor *t = host_tensor(b, (wgml_dtype)dt, 1, &n, h, (size_t)n * 4);
    free(h);
    return put(b, OUT(0), t, 0);
}

/* _empty_dim_order (size, dim_order?) in its out form, or the functional (size, dtype?, layout?,
 * device?, pin_memory?, dim_order?): an uninitialised tensor, here zeros of the output's
 * serialised shape and dtype (contiguous order only). */
static wgml_status op_empty(pbuild *b, const int32_t *args, int nargs) {
    if (nargs != 3 && nargs != 7) NEED(3);
    int64_t sz[WGML_MAX_RANK], order[WGML_MAX_RANK];
    int n = ilist(b, args, 0, sz, WGML_MAX_RANK), no = ilist(b, args, nargs - 2, order, WGML_MAX_RANK);
    if (n < 0 || no < 0) return WGML_ERR_ARG;
    for (int i = 0; i < no; i++)
        if (order[i] != i) return fail(b, WGML_ERR_UNSUPPORTED, "only the contiguous dim order", nargs - 2);
    pv *o = &b->v[OUT(0)];
    int dt = o->kind == PV_TENSOR && !o->unsupported ? prog_vk_to_wgml(o->vk_dtype) : -1;
    if (dt < 0) return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: the output is not a tensor wgml holds", b->op);
    return put(b, OUT(0), wgml_zeros(b->g, (wgml_dtype)dt, n, sz), 0);
}

static const prog_op_entry OPS[] = {
    {"aten.full.default", op_full},
    {"aten.full_like.default", op_full},
    {"aten.scalar_tensor.default", op_scalar_tensor},
    {"aten.zeros.default", op_zeros},
    {"aten.zeros_like.default", op_zeros},
    {"aten.ones.default", op_ones},
    {"aten.ones_like.default", op_ones},
    {"aten.arange.start_step", op_arange},
    {"aten.arange.start", op_arange},
    {"dim_order_ops._empty_dim_order.default", op_empty},
};

const prog_op_table prog_ops_create = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
