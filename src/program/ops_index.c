/* The op registry's indexing: embedding, gather and index_select (one wgml op each),
 * _embedding_bag (its output only), index.Tensor and index_put (index tensors on the leading
 * dims; index.Tensor also one at any dim) and scatter.value in its one-hot form (what the
 * exporter's cross-entropy backward writes: a compare with a host-built iota, then a where). */
#include "program/ops_args.h"

/* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse) */
static wgml_status op_embedding(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    return put_op2(b, args, nargs, wgml_embedding);
}

/* fn(self, dim, index): the output of gather or index_select (reshaped to the serialised
 * shape when `reshape`). */
static wgml_status dim_index_common(pbuild *b, const int32_t *args, int nargs,
                                    wgml_tensor *(*fn)(wgml_graph *, wgml_tensor *, int, wgml_tensor *), int reshape) {
    int ok = 1;
    int dim = iarg(b, args, 1, 0, &ok);
    wgml_tensor *x = T(b, args, 0), *idx = x ? T(b, args, 2) : NULL;
    return ok && idx ? put(b, OUT(0), fn(b->g, x, dim, idx), reshape) : WGML_ERR_ARG;
}
/* gather(self, dim, index, sparse_grad) */
static wgml_status op_gather(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    return dim_index_common(b, args, nargs, wgml_gather, 0);
}
/* index_select(self, dim, index) */
static wgml_status op_index_select(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    return dim_index_common(b, args, nargs, wgml_index_select, 1);
}

/* scatter.value(self, dim, index, value): out = self with out[.., index[..], ..] = value along
 * dim. Composite, for the one-hot form the exporter's cross-entropy backward writes (index has
 * size 1 along dim and self's sizes elsewhere): a host-built iota along dim compared with the
 * index (both f32, exact up to 2^24) gives the mask, and where(mask, value, self) the result:
 * four small dispatches (cast, compare, fill, where). Other index shapes are refused. */
static wgml_status op_scatter_value(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0), *idx = x ? T(b, args, 2) : NULL;
    if (!idx) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x);
    int dim = ndim(b, inum(b, args, 1, 0, &ok), rank, 1, &ok);
    float value = (float)num(b, args, 3, 0, &ok);
    if (!ok) return WGML_ERR_ARG;
    if (wgml_tensor_dtype(x) != WGML_F32 || wgml_tensor_dtype(idx) != WGML_I32)
        return fail(b, WGML_ERR_DTYPE, "self must be float32 and index int64", 2);
    int64_t ishape[WGML_MAX_RANK], iota_shape[WGML_MAX_RANK];
    int same = wgml_tensor_rank(idx) == rank;
    for (int d = 0; d < rank; d++) {
        ishape[d] = same ? wgml_tensor_dim(idx, d) : 0;
        if (same && ishape[d] != (d == dim ? 1 : wgml_tensor_dim(x, d))) same = 0;
        iota_shape[d] = d == dim ? wgml_tensor_dim(x, d) : 1;
    }
    if (!same) return fail(b, WGML_ERR_UNSUPPORTED, "only an index of size 1 along dim and self's sizes elsewhere", 2);
    int64_t n = wgml_tensor_dim(x, dim), one = 1;
    float *iota = malloc((size_t)n * sizeof *iota);
    if (!iota) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (int64_t k = 0; k < n; k++) iota[k] = (float)k;
    wgml_tensor *it = host_tensor(b, WGML_F32, rank, iota_shape, iota, (size_t)n * sizeof *iota);
    free(iota);
    wgml_tensor *mask = it ? wgml_compare(b->g, WGML_CMP_EQ, it, as_f32(b, idx)) : NULL;
    wgml_tensor *v = mask ? wgml_full(b->g, WGML_F32, 1, &one, value) : NULL;
    return put(b, OUT(0), v ? wgml_where(b->g, mask, v, x) : NULL, 0);
}

/* The index tensors of a Tensor?[] argument (i32, computed) into idx[], their dims into dims[];
 * the count, or -1 with an error. */
static int index_list(pbuild *b, const int32_t *args, int i, int rank, wgml_tensor **idx, int *dims) {
    const pv *l = val(b, args, i);
    if (l->kind != PV_OPT_TENSOR_LIST && l->kind != PV_VALUELIST) return fail(b, WGML_ERR_ARG, "expected a tensor list", i), -1;
    if (l->n > (size_t)rank) return fail(b, WGML_ERR_ARG, "more indices than dims", i), -1;
    int k = 0;
    for (size_t j = 0; j < l->n; j++) {
        if (l->ids[j] < 0 || (size_t)l->ids[j] >= b->nv || b->v[l->ids[j]].kind == PV_NULL) continue;
        const pv *iv = &b->v[l->ids[j]];
        if (iv->kind != PV_TENSOR || !iv->t) return fail(b, WGML_ERR_ARG, "an index is not a computed tensor", i), -1;
        if (wgml_tensor_dtype(iv->t) != WGML_I32) return fail(b, WGML_ERR_UNSUPPORTED, "only integer index tensors", i), -1;
        idx[k] = iv->t, dims[k++] = (int)j;
    }
    if (!k) return fail(b, WGML_ERR_UNSUPPORTED, "no index tensor", i), -1;
    return k;
}

/* index.Tensor (self, indices: Tensor?[]): index tensors on the leading dims (x[i0, i1]), or one
 * index tensor at any dim (x[:, :, i], an index_select with the index's shape replacing the
 * dim). Several index tensors after a None are refused. */
static wgml_status op_index_tensor(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *idx[WGML_MAX_RANK];
    if (!x) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x), dims[WGML_MAX_RANK];
    int k = index_list(b, args, 1, rank, idx, dims);
    if (k < 0) return WGML_ERR_ARG;
    if (dims[k - 1] == k - 1) return put(b, OUT(0), wgml_index_tensor(b->g, x, idx, k), 0);
    if (k > 1) return fail(b, WGML_ERR_UNSUPPORTED, "several index tensors after a None", 1);
    int dim = dims[0], ir = wgml_tensor_rank(idx[0]);
    if (rank - 1 + ir > WGML_MAX_RANK) return fail(b, WGML_ERR_UNSUPPORTED, "result rank over 8", 1);
    int64_t n = wgml_tensor_numel(idx[0]), shape[WGML_MAX_RANK];
    wgml_tensor *y = wgml_index_select(b->g, x, dim, wgml_reshape(b->g, idx[0], 1, &n));
    int r = 0;
    for (int i = 0; i < dim; i++) shape[r++] = wgml_tensor_dim(x, i);
    for (int i = 0; i < ir; i++) shape[r++] = wgml_tensor_dim(idx[0], i);
    for (int i = dim + 1; i < rank; i++) shape[r++] = wgml_tensor_dim(x, i);
    return put(b, OUT(0), y ? wgml_reshape(b->g, y, r, shape) : NULL, 0);
}

/* index_put (self, indices: Tensor?[], values, accumulate): the index tensors must be on the
 * leading dims (Nones after them only). */
static wgml_status op_index_put(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    int acc = iarg(b, args, 3, 0, &ok);
    wgml_tensor *x = T(b, args, 0), *v = x ? T(b, args, 2) : NULL, *idx[WGML_MAX_RANK];
    if (!ok || !v) return WGML_ERR_ARG;
    int dims[WGML_MAX_RANK], k = index_list(b, args, 1, wgml_tensor_rank(x), idx, dims);
    if (k < 0) return WGML_ERR_ARG;
    if (dims[k - 1] != k - 1) return fail(b, WGML_ERR_UNSUPPORTED, "index tensors only on the leading dims (None after them)", 1);
    return put(b, OUT(0), wgml_index_put(b->g, x, idx, k, v, acc), 0);
}

/* _embedding_bag (weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights?,
 * include_last_offset, padding_idx) -> (output, offset2bag, bag_size, max_indices): the output
 * only (the other three are the backward's bookkeeping; a program that reads them fails at load,
 * naming the tensor). */
static wgml_status op_embedding_bag(pbuild *b, const int32_t *args, int nargs) {
    NEED(10);
    int ok = 1;
    int mode = iarg(b, args, 4, 0, &ok), last = iarg(b, args, 7, 0, &ok);
    int64_t pad = inum(b, args, 8, -1, &ok);
    wgml_tensor *w = T(b, args, 0), *idx = w ? T(b, args, 1) : NULL, *off = idx ? T(b, args, 2) : NULL, *psw = NULL;
    if (!ok || !off || opt_tensor(b, args, 6, &psw)) return WGML_ERR_ARG;
    size_t no;
    const int32_t *outs = vlist(b, args, 9, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 4) return fail(b, WGML_ERR_ARG, "expected 4 outputs", 9);
    return put(b, outs[0], wgml_embedding_bag(b->g, w, idx, off, mode, psw, last, pad), 0);
}

static const prog_op_entry OPS[] = {
    {"aten.embedding.default", op_embedding},
    {"aten.gather.default", op_gather},
    {"aten.index_select.default", op_index_select},
    {"aten.scatter.value", op_scatter_value},
    {"aten.index.Tensor", op_index_tensor},
    {"aten.index_put.default", op_index_put},
    {"aten._embedding_bag.default", op_embedding_bag},
};

const prog_op_table prog_ops_index = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
