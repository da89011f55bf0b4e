/* Shape ops and copies: clone, slice (with a step), cat, permute/transpose (as copies),
 * expand_copy, and the creation wrappers full_like, zeros, ones, scalar_tensor.
 *
 * Every copy goes through one of three kernels:
 *   shape_block.wgsl        rows of whole words (vec4 when 16-byte aligned): clone, cat, slice
 *                           with step 1, for any dtype whose rows start and end on words;
 *   shape_strided.wgsl      any strided view of 4-byte elements (permute, expand, steps);
 *   shape_strided_bool.wgsl the same for bool, one thread per output word;
 * and permutes of 4-byte data that move the last dim (when both tile dims are >= 16) take
 *   shape_transpose.wgsl    32x32 tiles through workgroup memory, coalesced both ways. */
#include "graph/graph.h"
#include "ops/shape/shape_grad.h"

#include <stdio.h>
#include <string.h>

/* The index space and strides that open the Params of shape_strided_head.wgsl and
 * shape_transpose.wgsl (vec4 arrays first, 16-byte aligned). */
typedef struct view_walk {
    uint32_t shape[8], istr[8], ostr[8];
} view_walk;

/* Must match the Params struct of shape_strided_head.wgsl. */
typedef struct strided_params {
    view_walk w;
    uint32_t n, rank, in_base, out_base, rdim, rlo, rlen, pad;
} strided_params;

/* Must match the Params struct of shape_transpose.wgsl. */
typedef struct transpose_params {
    view_walk w;
    uint32_t rank, a, tiles_p, tiles_q, n_groups, p0, p1, p2;
} transpose_params;

/* out's shape and contiguous strides, and the input's strides istr, into w; out's strides
 * into ostr. */
static void view_walk_fill(view_walk *w, const wgml_tensor *out, const int64_t *istr, int64_t *ostr) {
    shape_strides(out->rank, out->shape, ostr);
    for (int i = 0; i < out->rank; i++) {
        w->shape[i] = (uint32_t)out->shape[i];
        w->istr[i] = (uint32_t)istr[i];
        w->ostr[i] = (uint32_t)ostr[i];
    }
}

typedef struct block_params {
    uint32_t n, row_len, in_stride, out_stride, in_base, out_base, p0, p1;
} block_params;

#define STRIDED_PER 4 /* elements per thread in shape_strided.wgsl (PER, its prelude's), 4-byte units */
#define BLOCK_PER 4   /* units per thread in shape_block.wgsl */
#define U32_LIMIT ((int64_t)1 << 31)

/* Offsets are computed in u32 on the GPU: keep every tensor well below 2^31 elements. */
static wgml_status check_size(wgml_ctx *ctx, const char *op, const wgml_tensor *t) {
    if (t->numel >= U32_LIMIT)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %s tensor %s has %lld elements; at most 2^31 are supported",
                              op, wgml_dtype_name(t->dtype), tshape(t), (long long)t->numel);
    return WGML_OK;
}

static wgml_status norm_dim_of(wgml_ctx *ctx, const char *op, const char *arg, const char *tname, const wgml_tensor *t,
                               int dim, int *out) {
    if (dim < -t->rank || dim >= t->rank)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s %d is out of range for %s %s (rank %d)", op, arg, dim, tname,
                              tshape(t), t->rank);
    *out = dim < 0 ? dim + t->rank : dim;
    return WGML_OK;
}

static wgml_status norm_dim(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t, int dim, int *out) {
    return norm_dim_of(ctx, op, arg, "x", t, dim, out);
}

/* Copies rows x row_bytes bytes: row r from in at in_base + r*in_stride to out at
 * out_base + r*out_stride (bytes). Every quantity must be a multiple of 4. */
static wgml_status copy_block(wgml_graph *g, const char *op, wgml_tensor *in, wgml_tensor *out, int64_t rows,
                              int64_t row_bytes, int64_t in_stride, int64_t out_stride, int64_t in_base,
                              int64_t out_base) {
    int64_t all = row_bytes | in_stride | out_stride | in_base | out_base;
    if (rows == 1) {
        /* one run (clone, cat along dim 0): vec4 units for the bulk when both starts are
         * 16-byte aligned, then the last 1-3 words in 4-byte units */
        int64_t bulk = row_bytes & ~(int64_t)15;
        if ((in_base | out_base) % 16 == 0 && bulk > 0 && bulk != row_bytes) {
            wgml_status s = copy_block(g, op, in, out, 1, bulk, 0, 0, in_base, out_base);
            return s ? s : copy_block(g, op, in, out, 1, row_bytes - bulk, 0, 0, in_base + bulk, out_base + bulk);
        }
        all = row_bytes | in_base | out_base;
    }
    int64_t unit = all % 16 == 0 ? 16 : 4;
    block_params p = {(uint32_t)(rows * row_bytes / unit), (uint32_t)(row_bytes / unit), (uint32_t)(in_stride / unit),
                      (uint32_t)(out_stride / unit), (uint32_t)(in_base / unit), (uint32_t)(out_base / unit), 0, 0};
    const char *prelude = unit == 16 ? "alias UNIT = vec4<u32>;\n" : "alias UNIT = u32;\n";
    uint64_t groups = ((uint64_t)p.n + 256 * BLOCK_PER - 1) / (256 * BLOCK_PER);
    return graph_dispatch(g, op, "shape_block", prelude, &in, 1, &out, 1, &p, sizeof p, groups);
}

/* Whether the walk p (4-byte elements) moves whole runs of 4 along its last dim: both last
 * strides 1 and every other stride, both bases and the last extent multiples of 4. If so, p is
 * rewritten in vec4 units (shape_strided.wgsl with UNIT = vec4<u32>): the last extent, the other
 * strides, the bases and n divided by 4. */
static bool vec4_walk(strided_params *p) {
    if (p->rank == 0) return false;
    uint32_t last = p->rank - 1, all = p->w.shape[last] | p->in_base | p->out_base;
    if (p->w.istr[last] != 1 || p->w.ostr[last] != 1) return false;
    for (uint32_t i = 0; i < last; i++) all |= p->w.istr[i] | p->w.ostr[i];
    if (all % 4 != 0) return false;
    p->w.shape[last] /= 4;
    for (uint32_t i = 0; i < last; i++) {
        p->w.istr[i] /= 4;
        p->w.ostr[i] /= 4;
    }
    p->in_base /= 4;
    p->out_base /= 4;
    p->n /= 4;
    return true;
}

/* Writes a strided view of `in` into out. The part of out written is the box whose
 * coordinate along rdim is in [lo, lo + len) (the whole tensor when lo = 0 and len is the
 * full size; only cat passes less). The element at output coordinate c comes from
 * in[in_base + sum c'_i istr_i] with c'_rdim = c_rdim - lo (elements). */
static wgml_status copy_view(wgml_graph *g, const char *op, wgml_tensor *in, const int64_t *istr, int64_t in_base,
                             wgml_tensor *out, int rdim, int64_t lo, int64_t len) {
    strided_params p;
    memset(&p, 0, sizeof p);
    int rank = out->rank;
    int64_t ostr[WGML_MAX_RANK];
    view_walk_fill(&p.w, out, istr, ostr);
    p.rank = (uint32_t)rank;
    p.in_base = (uint32_t)in_base;
    if (out->dtype == WGML_BOOL) {
        p.n = (uint32_t)out->numel;
        p.rdim = (uint32_t)rdim;
        p.rlo = (uint32_t)lo;
        p.rlen = (uint32_t)len;
        uint64_t words = (out->numel + 3) / 4;
        return graph_dispatch(g, op, "shape_strided_bool", NULL, &in, 1, &out, 1, &p, sizeof p, (words + 255) / 256);
    }
    /* 4-byte elements: iterate over the box only, writing through out's strides */
    int64_t n = out->numel;
    if (rank > 0) {
        p.w.shape[rdim] = (uint32_t)len;
        p.out_base = (uint32_t)(lo * ostr[rdim]);
        n = n / out->shape[rdim] * len;
    }
    p.n = (uint32_t)n;
    bool v4 = vec4_walk(&p);
    int per = v4 ? 1 : STRIDED_PER;
    char prelude[64];
    snprintf(prelude, sizeof prelude, "alias UNIT = %s;\nconst PER: u32 = %du;\n", v4 ? "vec4<u32>" : "u32", per);
    uint64_t threads = ((uint64_t)p.n + (uint64_t)per - 1) / (uint64_t)per;
    return graph_dispatch(g, op, "shape_strided", prelude, &in, 1, &out, 1, &p, sizeof p, (threads + 255) / 256);
}

/* A permute of 4-byte elements that moves the input's last dim to output dim a (a is not the
 * last): 32x32 tiles through workgroup memory over output dims a and last (shape_transpose). */
static wgml_status transpose_tiled(wgml_graph *g, const char *op, wgml_tensor *in, const int64_t *istr,
                                   wgml_tensor *out, int a) {
    transpose_params p;
    memset(&p, 0, sizeof p);
    int rank = out->rank;
    int64_t ostr[WGML_MAX_RANK];
    view_walk_fill(&p.w, out, istr, ostr);
    int64_t P = out->shape[a], Q = out->shape[rank - 1];
    int64_t tp = (P + 31) / 32, tq = (Q + 31) / 32, batch = out->numel / (P * Q);
    p.rank = (uint32_t)rank;
    p.a = (uint32_t)a;
    p.tiles_p = (uint32_t)tp;
    p.tiles_q = (uint32_t)tq;
    p.n_groups = (uint32_t)(batch * tp * tq);
    return graph_dispatch(g, op, "shape_transpose", NULL, &in, 1, &out, 1, &p, sizeof p, (uint64_t)(batch * tp * tq));
}

/* The common start of a unary copy: tensor present, in g, small enough. */
static wgml_status check_input(wgml_graph *g, const char *op, const char *arg, wgml_tensor *x) {
    wgml_ctx *ctx = graph_ctx(g);
    wgml_status s = check_tensor(ctx, op, arg, x);
    if (s) return s;
    if ((s = check_graph(ctx, g, op, arg, x))) return s;
    return check_size(ctx, op, x);
}

static wgml_tensor *finish(wgml_tensor *out, wgml_status s) {
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- clone */

wgml_tensor *wgml_clone(wgml_graph *g, wgml_tensor *x) {
    if (!g || check_input(g, "clone", "x", x)) return NULL;
    wgml_tensor *out = graph_output(g, "clone", x->dtype, x->rank, x->shape);
    if (!out) return NULL;
    /* whole words, the last one's padding bytes included */
    return clone_grad_record(g, finish(out, copy_block(g, "clone", x, out, 1, (int64_t)tensor_binding_size(x), 0, 0, 0, 0)),
                             x);
}

/* ---------------------------------------------------------------- slice */

wgml_tensor *wgml_slice(wgml_graph *g, wgml_tensor *x, int dim, int64_t start, int64_t end, int64_t step) {
    const char *op = "slice";
    if (!g || check_input(g, op, "x", x)) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (x->rank < 1 && check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK)) return NULL;
    int d = 0;
    if (norm_dim(ctx, op, "dim", x, dim, &d)) return NULL;
    if (step <= 0) {
        wgml_set_error(ctx, WGML_ERR_ARG, "slice: step %lld must be >= 1", (long long)step);
        return NULL;
    }
    int64_t size = x->shape[d], s0 = start, e0 = end;
    if (start < 0) start += size;
    if (end < 0) end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < 0 ? 0 : end > size ? size : end;
    if (end <= start) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "slice: start %lld, end %lld on dim %d of x %s gives an empty slice",
                       (long long)s0, (long long)e0, d, tshape(x));
        return NULL;
    }
    int64_t len = (end - start + step - 1) / step;
    int64_t shape[WGML_MAX_RANK], str[WGML_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[d] = len;
    wgml_tensor *out = graph_output(g, op, x->dtype, x->rank, shape);
    if (!out) return NULL;
    shape_strides(x->rank, x->shape, str);
    int64_t es = (int64_t)wgml_dtype_size(x->dtype), inner = str[d];
    int64_t outer = x->numel / (size * inner);
    if (step == 1 && ((len * inner * es) | (size * inner * es) | (start * inner * es)) % 4 == 0)
        return slice_grad_record(g,
                                 finish(out, copy_block(g, op, x, out, outer, len * inner * es, size * inner * es,
                                                        len * inner * es, start * inner * es, 0)),
                                 x, d, start, step);
    int64_t base = start * str[d];
    str[d] *= step;
    return slice_grad_record(g, finish(out, copy_view(g, op, x, str, base, out, 0, 0, out->rank ? out->shape[0] : 1)), x,
                             d, start, step);
}

/* ---------------------------------------------------------------- cat */

wgml_tensor *wgml_cat(wgml_graph *g, wgml_tensor *const *tensors, int n, int dim) {
    const char *op = "cat";
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (!tensors || n < 1) {
        wgml_set_error(ctx, WGML_ERR_ARG, "cat: needs at least one tensor (got %d%s)", n, tensors ? "" : ", NULL list");
        return NULL;
    }
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "tensors[%d]", i);
        if (check_input(g, op, name, tensors[i])) return NULL;
    }
    wgml_tensor *t0 = tensors[0];
    if (check_rank(ctx, op, "tensors[0]", t0, 1, WGML_MAX_RANK)) return NULL;
    int d = 0;
    if (norm_dim_of(ctx, op, "dim", "tensors[0]", t0, dim, &d)) return NULL;
    int64_t shape[WGML_MAX_RANK];
    memcpy(shape, t0->shape, sizeof(int64_t) * (size_t)t0->rank);
    shape[d] = 0;
    for (int i = 0; i < n; i++) {
        wgml_tensor *t = tensors[i];
        if (t->dtype != t0->dtype) {
            wgml_set_error(ctx, WGML_ERR_DTYPE, "cat: tensors[%d] %s %s has a different dtype from tensors[0] %s %s", i,
                           wgml_dtype_name(t->dtype), tshape(t), wgml_dtype_name(t0->dtype), tshape(t0));
            return NULL;
        }
        bool same = t->rank == t0->rank;
        for (int j = 0; same && j < t->rank; j++) same = j == d || t->shape[j] == t0->shape[j];
        if (!same) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "cat: tensors[%d] %s does not match tensors[0] %s outside dim %d", i,
                           tshape(t), tshape(t0), d);
            return NULL;
        }
        shape[d] += t->shape[d];
    }
    wgml_tensor *out = graph_output(g, op, t0->dtype, t0->rank, shape);
    if (!out) return NULL;
    if (check_size(ctx, op, out)) return finish(out, WGML_ERR_LIMIT);
    int64_t ostr[WGML_MAX_RANK];
    shape_strides(out->rank, out->shape, ostr);
    int64_t es = (int64_t)wgml_dtype_size(out->dtype), post = ostr[d];
    int64_t outer = out->numel / (shape[d] * post), out_row = shape[d] * post * es;
    int64_t off = 0; /* along dim d */
    for (int i = 0; i < n; i++) {
        wgml_tensor *t = tensors[i];
        int64_t row = t->shape[d] * post * es, base = off * post * es;
        wgml_status s;
        if ((row | out_row | base) % 4 == 0) {
            s = copy_block(g, op, t, out, outer, row, row, out_row, 0, base);
        } else {
            int64_t istr[WGML_MAX_RANK];
            shape_strides(t->rank, t->shape, istr);
            s = copy_view(g, op, t, istr, 0, out, d, off, t->shape[d]);
        }
        if (s) return finish(out, s);
        off += t->shape[d];
    }
    return cat_grad_record(g, out, tensors, n, d);
}

/* ---------------------------------------------------------------- permute, transpose */

wgml_tensor *wgml_permute(wgml_graph *g, wgml_tensor *x, const int *dims) {
    const char *op = "permute";
    if (!g || check_input(g, op, "x", x)) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (!dims && x->rank > 0) {
        wgml_set_error(ctx, WGML_ERR_ARG, "permute: dims is NULL");
        return NULL;
    }
    int64_t str[WGML_MAX_RANK], istr[WGML_MAX_RANK], shape[WGML_MAX_RANK];
    shape_strides(x->rank, x->shape, str);
    bool seen[WGML_MAX_RANK] = {false}, identity = true;
    for (int i = 0; i < x->rank; i++) {
        int d = 0;
        if (norm_dim(ctx, op, "dims entry", x, dims[i], &d)) return NULL;
        if (seen[d]) {
            wgml_set_error(ctx, WGML_ERR_ARG, "permute: dim %d appears twice in dims for x %s", d, tshape(x));
            return NULL;
        }
        seen[d] = true;
        identity = identity && d == i;
        shape[i] = x->shape[d];
        istr[i] = str[d];
    }
    if (identity) return wgml_clone(g, x);
    wgml_tensor *out = graph_output(g, op, x->dtype, x->rank, shape);
    if (!out) return NULL;
    int last = x->rank - 1, a = 0;
    while (dims[a] != last && dims[a] != -1) a++;
    if (x->dtype != WGML_BOOL && a != last && shape[a] >= 16 && shape[last] >= 16)
        return permute_grad_record(g, finish(out, transpose_tiled(g, op, x, istr, out, a)), x, dims);
    return permute_grad_record(g, finish(out, copy_view(g, op, x, istr, 0, out, 0, 0, out->shape[0])), x, dims);
}

wgml_tensor *wgml_transpose(wgml_graph *g, wgml_tensor *x, int d0, int d1) {
    const char *op = "transpose";
    if (!g || check_input(g, op, "x", x)) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    int a = 0, b = 0;
    if (norm_dim(ctx, op, "d0", x, d0, &a) || norm_dim(ctx, op, "d1", x, d1, &b)) return NULL;
    int dims[WGML_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i;
    dims[a] = b;
    dims[b] = a;
    return wgml_permute(g, x, dims);
}

/* ---------------------------------------------------------------- expand_copy */

wgml_tensor *wgml_expand_copy(wgml_graph *g, wgml_tensor *x, int rank, const int64_t *shape) {
    const char *op = "expand_copy";
    if (!g || check_input(g, op, "x", x)) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (rank < x->rank || rank > WGML_MAX_RANK) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "expand_copy: rank %d must be between x's rank (%s) and %d", rank,
                       tshape(x), WGML_MAX_RANK);
        return NULL;
    }
    if (!shape && rank > 0) {
        wgml_set_error(ctx, WGML_ERR_ARG, "expand_copy: shape is NULL");
        return NULL;
    }
    int64_t xstr[WGML_MAX_RANK], istr[WGML_MAX_RANK], oshape[WGML_MAX_RANK];
    shape_strides(x->rank, x->shape, xstr);
    int lead = rank - x->rank;
    bool broadcast = lead > 0;
    char b[SHAPE_STR_LEN];
    for (int i = 0; i < rank; i++) {
        int64_t want = shape[i];
        int64_t have = i < lead ? 1 : x->shape[i - lead];
        if (want == -1 && i >= lead) want = have;
        if (want <= 0 || (have != 1 && have != want)) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "expand_copy: x %s cannot be expanded to %s (dim %d)", tshape(x),
                           shape_str(b, sizeof b, rank, shape), i);
            return NULL;
        }
        oshape[i] = want;
        istr[i] = i < lead || (have == 1 && want != 1) ? 0 : xstr[i - lead];
        broadcast = broadcast || want != have;
    }
    wgml_tensor *out = graph_output(g, op, x->dtype, rank, oshape);
    if (!out) return NULL;
    if (check_size(ctx, op, out)) return finish(out, WGML_ERR_LIMIT);
    if (!broadcast)
        return expand_grad_record(g, finish(out, copy_block(g, op, x, out, 1, (int64_t)tensor_binding_size(x), 0, 0, 0, 0)),
                                  x);
    /* x repeated as whole rows (a broadcast over leading dims only, e.g. [D] -> [N, D]): the
     * block kernel with a zero input stride, when the rows are whole words */
    int64_t es = (int64_t)wgml_dtype_size(x->dtype), tail = 1;
    int k = rank;
    while (k > 0 && tail < x->numel) tail *= oshape[--k];
    bool rows_only = tail == x->numel;
    for (int i = k; rows_only && i < rank; i++) rows_only = istr[i] != 0 || oshape[i] == 1;
    if (rows_only && (x->numel * es) % 4 == 0)
        return expand_grad_record(
            g, finish(out, copy_block(g, op, x, out, out->numel / x->numel, x->numel * es, 0, x->numel * es, 0, 0)), x);
    return expand_grad_record(g, finish(out, copy_view(g, op, x, istr, 0, out, 0, 0, rank ? oshape[0] : 1)), x);
}

/* ---------------------------------------------------------------- creation */

wgml_tensor *wgml_full_like(wgml_graph *g, wgml_tensor *x, double value) {
    if (!g || check_input(g, "full_like", "x", x)) return NULL;
    return wgml_full(g, x->dtype, x->rank, x->shape, value);
}

wgml_tensor *wgml_zeros(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape) {
    return wgml_full(g, dtype, rank, shape, 0.0);
}

wgml_tensor *wgml_ones(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape) {
    return wgml_full(g, dtype, rank, shape, 1.0);
}

wgml_tensor *wgml_scalar_tensor(wgml_graph *g, wgml_dtype dtype, double value) {
    return wgml_full(g, dtype, 0, NULL, value);
}
