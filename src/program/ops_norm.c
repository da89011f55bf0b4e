/* The op registry's softmax and norms: _softmax and _log_softmax, native_layer_norm (over any
 * number of trailing dims, as one row), et_vk.rms_norm, native_group_norm (a layer norm per
 * group, then the per-channel affine) and the batch norm of inference
 * (_native_batch_norm_legit_no_training: a per-channel scale and shift from the running
 * statistics). The batch norm of the batch's own statistics is in ops_reduce.c, beside the
 * variance it is made of. */
#include "program/ops_args.h"

/* _softmax / _log_softmax (self, dim, half_to_float) */
static wgml_status softmax_common(pbuild *b, const int32_t *args, int nargs, int log) {
    NEED(4);
    int ok = 1;
    int dim = iarg(b, args, 1, -1, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || !ok) return WGML_ERR_ARG;
    return put(b, OUT(0), log ? wgml_log_softmax(b->g, x, dim) : wgml_softmax(b->g, x, dim), 0);
}
static wgml_status op_softmax(pbuild *b, const int32_t *a, int n) { return softmax_common(b, a, n, 0); }
static wgml_status op_log_softmax(pbuild *b, const int32_t *a, int n) { return softmax_common(b, a, n, 1); }

/* The (out, mean, rstd) outputs of a layer or group norm, the value list at args[i]; NULL with
 * an error when it is not a list of three. */
static const int32_t *norm_outputs(pbuild *b, const int32_t *args, int i) {
    size_t no;
    const int32_t *outs = vlist(b, args, i, &no);
    if (outs && no != 3) {
        fail(b, WGML_ERR_ARG, "expected 3 outputs", i);
        return NULL;
    }
    return outs;
}

/* Stores y (reshaped to the serialised shape when `reshape`), and mean and rstd where the
 * program keeps them (an exporter leaves unused statistics without a tensor). */
static wgml_status put_norm(pbuild *b, const int32_t *outs, wgml_tensor *y, int reshape, wgml_tensor *mean, wgml_tensor *rstd) {
    wgml_status s = put(b, outs[0], y, reshape);
    if (!s && b->v[outs[1]].kind == PV_TENSOR) s = put(b, outs[1], mean, 1);
    if (!s && b->v[outs[2]].kind == PV_TENSOR) s = put(b, outs[2], rstd, 1);
    return s;
}

/* native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd): over
 * the trailing dims normalized_shape names, as one row (x viewed as [..., Π normalized_shape],
 * weight and bias as [Π normalized_shape]; mean and rstd keep the normalised dims as 1s). */
static wgml_status op_layer_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    int64_t ns[WGML_MAX_RANK];
    int n = ilist(b, args, 1, ns, WGML_MAX_RANK), ok = 1;
    float eps = (float)num(b, args, 4, 1e-5, &ok);
    wgml_tensor *x = T(b, args, 0), *w, *bias;
    if (n < 0 || !ok || !x || opt_tensor(b, args, 2, &w) || opt_tensor(b, args, 3, &bias)) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x);
    int64_t row = 1, view[WGML_MAX_RANK];
    for (int i = 0; i < n; i++) {
        if (n > r || ns[i] != wgml_tensor_dim(x, r - n + i)) return fail(b, WGML_ERR_SHAPE, "normalized_shape is not x's trailing dims", 1);
        row *= ns[i];
    }
    if (n < 1) return fail(b, WGML_ERR_ARG, "an empty normalized_shape", 1);
    if (n > 1) { /* the normalised dims as one row */
        if ((w && wgml_tensor_numel(w) != row) || (bias && wgml_tensor_numel(bias) != row))
            return fail(b, WGML_ERR_SHAPE, "weight or bias of another size than normalized_shape", w && wgml_tensor_numel(w) != row ? 2 : 3);
        for (int i = 0; i < r - n; i++) view[i] = wgml_tensor_dim(x, i);
        view[r - n] = row;
        int had_w = w != NULL, had_b = bias != NULL;
        x = wgml_reshape(b->g, x, r - n + 1, view);
        if (had_w) w = wgml_reshape(b->g, w, 1, &row);
        if (had_b) bias = wgml_reshape(b->g, bias, 1, &row);
        if (!x || (had_w && !w) || (had_b && !bias)) return wgml_last_status(b->ctx);
    }
    const int32_t *outs = norm_outputs(b, args, 5);
    if (!outs) return wgml_last_status(b->ctx);
    wgml_tensor *mean = NULL, *rstd = NULL;
    wgml_tensor *y = wgml_layer_norm(b->g, x, w, bias, eps, &mean, &rstd);
    return put_norm(b, outs, y, n > 1, mean, rstd);
}

/* et_vk.rms_norm(x, weight, eps) */
static wgml_status op_rms_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int ok = 1;
    float eps = (float)num(b, args, 2, 1e-6, &ok);
    wgml_tensor *x = T(b, args, 0), *w;
    if (!ok || !x || opt_tensor(b, args, 1, &w)) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_rms_norm(b->g, x, w, eps), 0);
}

/* native_group_norm(x, w?, b?, N, C, HxW, group, eps) -> (out, mean [N, G], rstd [N, G]):
 * a layer norm over each group's C/G·HxW elements, then the per-channel affine. */
static wgml_status op_group_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(9);
    int ok = 1;
    int64_t n = inum(b, args, 3, 0, &ok), c = inum(b, args, 4, 0, &ok), hw = inum(b, args, 5, 0, &ok), g = inum(b, args, 6, 1, &ok);
    float eps = (float)num(b, args, 7, 1e-5, &ok);
    wgml_tensor *x = T(b, args, 0), *w, *bias;
    if (!x || !ok || opt_tensor(b, args, 1, &w) || opt_tensor(b, args, 2, &bias)) return WGML_ERR_ARG;
    if (g < 1 || c % g || n * c * hw != wgml_tensor_numel(x)) return fail(b, WGML_ERR_SHAPE, "N·C·HxW does not match x", 0);
    const int32_t *outs = norm_outputs(b, args, 8);
    if (!outs) return wgml_last_status(b->ctx);
    int64_t gs[3] = {n, g, c / g * hw}, cs[3] = {n, c, hw}, wc[2] = {c, 1};
    wgml_tensor *mean = NULL, *rstd = NULL;
    wgml_tensor *y = wgml_layer_norm(b->g, wgml_reshape(b->g, x, 3, gs), NULL, NULL, eps, &mean, &rstd);
    y = y ? wgml_reshape(b->g, y, 3, cs) : NULL;
    if (y && w) y = wgml_mul(b->g, y, wgml_reshape(b->g, w, 2, wc));
    if (y && bias) y = wgml_add(b->g, y, wgml_reshape(b->g, bias, 2, wc), 1.0f);
    return put_norm(b, outs, y, 1, mean, rstd);
}

/* _native_batch_norm_legit_no_training(x, w?, b?, running_mean, running_var, momentum, eps)
 * -> (out, save_mean, save_invstd): y = x·s + t per channel (dim 1), s = w·rsqrt(var + eps),
 * t = b − mean·s. The saved statistics (empty in inference) are left alone. */
static wgml_status op_batch_norm(pbuild *b, const int32_t *args, int nargs) {
    NEED(8);
    int ok = 1;
    float eps = (float)num(b, args, 6, 1e-5, &ok);
    wgml_tensor *x = T(b, args, 0), *w, *bias, *mean = x ? T(b, args, 3) : NULL, *var = mean ? T(b, args, 4) : NULL;
    if (!ok || !var || opt_tensor(b, args, 1, &w) || opt_tensor(b, args, 2, &bias)) return WGML_ERR_ARG;
    int r = wgml_tensor_rank(x);
    int64_t c = r >= 2 ? wgml_tensor_dim(x, 1) : 0, shape[WGML_MAX_RANK];
    if (r < 2 || wgml_tensor_numel(mean) != c || wgml_tensor_numel(var) != c) return fail(b, WGML_ERR_SHAPE, "statistics do not match dim 1", 3);
    for (int i = 0; i < r - 1; i++) shape[i] = i == 0 ? c : 1;
    wgml_tensor *sc = wgml_rsqrt(b->g, wgml_add_scalar(b->g, var, eps, 1.0f));
    if (w) sc = wgml_mul(b->g, sc, w);
    wgml_tensor *sh = wgml_neg(b->g, wgml_mul(b->g, mean, sc));
    if (bias) sh = wgml_add(b->g, sh, bias, 1.0f);
    wgml_tensor *y = wgml_add(b->g, wgml_mul(b->g, x, wgml_reshape(b->g, sc, r - 1, shape)), wgml_reshape(b->g, sh, r - 1, shape), 1.0f);
    size_t no;
    const int32_t *outs = vlist(b, args, 7, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no < 1) return fail(b, WGML_ERR_ARG, "expected outputs", 7);
    return put(b, outs[0], y, 0);
}

static const prog_op_entry OPS[] = {
    {"aten._softmax.default", op_softmax},
    {"aten._log_softmax.default", op_log_softmax},
    {"aten.native_layer_norm.default", op_layer_norm},
    {"et_vk.rms_norm.default", op_rms_norm},
    {"aten._native_batch_norm_legit_no_training.default", op_batch_norm},
    {"aten.native_group_norm.default", op_group_norm},
};

const prog_op_table prog_ops_norm = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
