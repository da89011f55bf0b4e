/* The op registry's rearranging copies that exports leave behind: as_strided_copy (a view of
 * the input's storage by sizes and strides, what the exporter makes of some reshapes of
 * permuted tensors: torchvision's ConvNeXt and Swin Transformer), diagonal_copy and
 * unfold_copy (Tensor.unfold: sliding windows; a Vulkan graph operator too), all three one
 * strided gather; and constant_pad_nd (F.pad with a constant: Swin pads its feature maps to
 * whole windows; the Vulkan partitioner takes it into its graphs, the WebGPU one leaves it to a
 * portable kernel). */
#include "program/ops_args.h"

#include <math.h>

/* The most elements a strided copy gathers (its host-built index is as many int32s). */
#define GATHER_MAX ((int64_t)1 << 26)

/* out[i0, i1, ..] = storage[off + Σ i_d·stride_d] for sizes size[0..n), the storage being x's
 * elements in order (program tensors are contiguous): one gather (index_select of the
 * flattened x with a host-built index), or a view when the index is the identity. Any dtype.
 * The sizes, strides and offset are checked against the storage (arguments 1, 2, 3 of the op
 * in the messages). NULL with an error set on failure. */
static wgml_tensor *strided_copy(pbuild *b, wgml_tensor *x, int n, const int64_t *size, const int64_t *stride, int64_t off) {
    int64_t numel = 1, last = off, storage = wgml_tensor_numel(x);
    if (off < 0) return fail(b, WGML_ERR_ARG, "negative storage_offset", 3), NULL;
    if (storage > INT32_MAX) return fail(b, WGML_ERR_UNSUPPORTED, "a storage of more than 2^31 elements", 0), NULL;
    for (int d = 0; d < n; d++) {
        if (size[d] < 1) return fail(b, WGML_ERR_UNSUPPORTED, "a size below 1", 1), NULL;
        if (stride[d] < 0) return fail(b, WGML_ERR_ARG, "a stride below 0", 2), NULL;
        if (size[d] > 1 && stride[d] >= storage) { /* past the storage (and no overflow below) */
            wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: stride %lld of a storage of %lld is out of bounds", b->op,
                           (long long)stride[d], (long long)storage);
            return NULL;
        }
        if (numel > GATHER_MAX / size[d]) {
            wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: more than 2^26 elements to gather", b->op);
            return NULL;
        }
        numel *= size[d], last += (size[d] - 1) * stride[d];
    }
    if (last >= storage) {
        wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: element %lld of a storage of %lld is out of bounds", b->op,
                       (long long)last, (long long)storage);
        return NULL;
    }
    int32_t *idx = malloc((size_t)numel * sizeof *idx);
    if (!idx) return wgml_set_error(b->ctx, WGML_ERR_OOM, "program: out of host memory"), NULL;
    int identity = numel == storage;
    for (int64_t i = 0; i < numel; i++) {
        int64_t r = i, at = off;
        for (int d = n - 1; d >= 0; d--) at += (r % size[d]) * stride[d], r /= size[d];
        idx[i] = (int32_t)at;
        identity &= at == i;
    }
    wgml_tensor *flat = wgml_reshape(b->g, x, 1, &storage), *y = flat;
    if (!identity && flat) {
        wgml_tensor *it = host_tensor(b, WGML_I32, 1, &numel, idx, (size_t)numel * sizeof *idx);
        y = it ? wgml_index_select(b->g, flat, 0, it) : NULL;
    }
    free(idx);
    return y && n ? wgml_reshape(b->g, y, n, size) : y;
}

/* Row-major strides of x. */
static void strides_of(wgml_tensor *x, int64_t *st) {
    int64_t s = 1;
    for (int i = wgml_tensor_rank(x) - 1; i >= 0; i--) st[i] = s, s *= wgml_tensor_dim(x, i);
}

/* as_strided_copy(self, size, stride, storage_offset?) */
static wgml_status op_as_strided(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int64_t size[WGML_MAX_RANK], stride[WGML_MAX_RANK];
    int ok = 1, n = ilist(b, args, 1, size, WGML_MAX_RANK), ns = n < 0 ? 0 : ilist(b, args, 2, stride, WGML_MAX_RANK);
    int64_t off = inum(b, args, 3, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || n < 0 || ns < 0 || !ok) return WGML_ERR_ARG;
    if (ns != n) return fail(b, WGML_ERR_ARG, "stride and size differ in length", 2);
    wgml_tensor *y = strided_copy(b, x, n, size, stride, off);
    return y ? put(b, OUT(0), y, 1) : wgml_last_status(b->ctx);
}

/* diagonal_copy(self, offset, dim1, dim2): the diagonal of the (dim1, dim2) planes (offset > 0
 * above the main one, < 0 below) as a last dim, the other dims kept in order: a strided copy
 * with stride(dim1) + stride(dim2) along it. */
static wgml_status op_diagonal(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0);
    int64_t off = inum(b, args, 1, 0, &ok);
    int r = x ? wgml_tensor_rank(x) : 0, d1 = ndim(b, inum(b, args, 2, 0, &ok), r, 2, &ok), d2 = ndim(b, inum(b, args, 3, 1, &ok), r, 3, &ok);
    if (!x || !ok) return WGML_ERR_ARG;
    if (r < 2 || d1 == d2) return fail(b, WGML_ERR_ARG, "dim1 and dim2 must be two dims of x", 3);
    int64_t st[WGML_MAX_RANK], size[WGML_MAX_RANK], stride[WGML_MAX_RANK], n1 = wgml_tensor_dim(x, d1), n2 = wgml_tensor_dim(x, d2);
    strides_of(x, st);
    int64_t len = off >= 0 ? (n1 < n2 - off ? n1 : n2 - off) : (n1 + off < n2 ? n1 + off : n2);
    if (len < 1) return fail(b, WGML_ERR_UNSUPPORTED, "an empty diagonal", 1);
    int k = 0;
    for (int i = 0; i < r; i++)
        if (i != d1 && i != d2) size[k] = wgml_tensor_dim(x, i), stride[k++] = st[i];
    size[k] = len, stride[k++] = st[d1] + st[d2];
    wgml_tensor *y = strided_copy(b, x, k, size, stride, off >= 0 ? off * st[d2] : -off * st[d1]);
    return y ? put(b, OUT(0), y, 1) : wgml_last_status(b->ctx);
}

/* unfold_copy(self, dimension, size, step): the windows x[.., i·step : i·step + size, ..] along
 * dimension as a new last dim of length size: a strided copy. */
static wgml_status op_unfold(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    int ok = 1;
    wgml_tensor *x = T(b, args, 0);
    int r = x ? wgml_tensor_rank(x) : 0, d = ndim(b, inum(b, args, 1, 0, &ok), r, 1, &ok);
    int64_t win = inum(b, args, 2, 1, &ok), step = inum(b, args, 3, 1, &ok);
    if (!x || !ok) return WGML_ERR_ARG;
    int64_t len = r ? wgml_tensor_dim(x, d) : 1, st[WGML_MAX_RANK] = {1}, size[WGML_MAX_RANK], stride[WGML_MAX_RANK];
    if (win < 1 || win > len) return fail(b, WGML_ERR_ARG, "size must be in [1, the dim's length]", 2);
    if (step < 1) return fail(b, WGML_ERR_ARG, "step must be positive", 3);
    if (r >= WGML_MAX_RANK) return fail(b, WGML_ERR_UNSUPPORTED, "rank 8 has no room for the window dim", 0);
    strides_of(x, st);
    for (int i = 0; i < r; i++) size[i] = wgml_tensor_dim(x, i), stride[i] = st[i];
    if (r) size[d] = (len - win) / step + 1, stride[d] = st[d] * step;
    size[r] = win, stride[r] = r ? st[d] : 1;
    wgml_tensor *y = strided_copy(b, x, r + 1, size, stride, 0);
    return y ? put(b, OUT(0), y, 1) : wgml_last_status(b->ctx);
}

/* x with `before` and `after` elements of value added along dim (a negative count removes as
 * many): the part of x that stays (a slice; nothing when the crops take it all, and the dim is
 * then all value) and the constant blocks, concatenated. */
static wgml_tensor *pad_dim(pbuild *b, wgml_tensor *x, int d, int64_t before, int64_t after, double value) {
    int64_t len = wgml_tensor_dim(x, d), lo = before < 0 ? -before : 0, hi = after < 0 ? len + after : len;
    int64_t shape[WGML_MAX_RANK];
    int rank = wgml_tensor_rank(x);
    wgml_dtype dt = wgml_tensor_dtype(x);
    for (int i = 0; i < rank; i++) shape[i] = wgml_tensor_dim(x, i);
    if (hi <= lo) {
        shape[d] = len + before + after;
        return wgml_full(b->g, dt, rank, shape, value);
    }
    if (lo > 0 || hi < len) x = wgml_slice(b->g, x, d, lo, hi, 1);
    if (!x || (before <= 0 && after <= 0)) return x;
    wgml_tensor *parts[3];
    int np = 0;
    if (before > 0) shape[d] = before, parts[np++] = wgml_full(b->g, dt, rank, shape, value);
    parts[np++] = x;
    if (after > 0) shape[d] = after, parts[np++] = wgml_full(b->g, dt, rank, shape, value);
    for (int i = 0; i < np; i++)
        if (!parts[i]) return NULL;
    return wgml_cat(b->g, parts, np, d);
}

/* constant_pad_nd(self, pad, value): pad[2k], pad[2k+1] elements before and after dim
 * rank−1−k (negative: removed), filled with value (converted to self's dtype: a bool tensor
 * pads with value != 0). Any dtype. */
static wgml_status op_constant_pad(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    int64_t pad[2 * WGML_MAX_RANK];
    int ok = 1, n = ilist(b, args, 1, pad, 2 * WGML_MAX_RANK);
    double value = num(b, args, 2, 0, &ok);
    wgml_tensor *x = T(b, args, 0);
    if (!x || n < 0 || !ok) return WGML_ERR_ARG;
    int rank = wgml_tensor_rank(x);
    if (n % 2 || n / 2 > rank) return fail(b, WGML_ERR_ARG, "pad needs an even length of at most twice the rank", 1);
    for (int k = 0; k < n / 2; k++) {
        int d = rank - 1 - k;
        if (wgml_tensor_dim(x, d) + pad[2 * k] + pad[2 * k + 1] < 1 || pad[2 * k] > (1 << 24) || pad[2 * k + 1] > (1 << 24))
            return fail(b, WGML_ERR_UNSUPPORTED, "a padded size below 1 or a pad over 2^24", 1);
    }
    if (wgml_tensor_dtype(x) == WGML_BOOL) value = value != 0;
    else if (wgml_tensor_dtype(x) == WGML_I32) value = value < 0 ? ceil(value) : floor(value); /* PyTorch's conversion */
    for (int k = 0; k < n / 2 && x; k++) x = pad_dim(b, x, rank - 1 - k, pad[2 * k], pad[2 * k + 1], value);
    return put(b, OUT(0), x, 0);
}

static const prog_op_entry OPS[] = {
    {"aten.as_strided_copy.default", op_as_strided},
    {"aten.constant_pad_nd.default", op_constant_pad},
    {"aten.diagonal_copy.default", op_diagonal},
    {"aten.unfold_copy.default", op_unfold},
};

const prog_op_table prog_ops_copy = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
