/* Reductions: sum, mean, amax, argmax over any set of dims, and softmax / log_softmax over
 * any dim. Kernels (all deterministic, no atomics):
 *   reduce_rows.wgsl         one workgroup per output element, tree merge in workgroup memory
 *                            (trailing contiguous block: vec4 rows; otherwise index decomposition
 *                            through kept/reduced shapes and strides in the uniform);
 *   reduce_pairs.wgsl        second stage of a split reduction (few outputs, long reductions);
 *   reduce_cols.wgsl         one thread per output of an [outer, red, inner] view;
 *   reduce_softmax.wgsl      T threads per row (a workgroup per long row, several short rows per
 *                            workgroup), online (max, sum) pairs merged in a tree;
 *   reduce_softmax_cols.wgsl one thread per row, for strided rows and very short rows. */
#include "graph/graph.h"
#include "ops/reduce/reduce_grad.h"
#include "ops/reduce/wg_reduce.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { OP_SUM = 0, OP_MAX = 1, OP_ARGMAX = 2 };

/* Rows at most this long (trailing contiguous) go to the thread-per-row kernels. */
#define SHORT_ROW 16
/* Split reductions: at least this many elements per chunk; aim for this many workgroups. */
#define SPLIT_MIN 2048
/* Threads of a softmax workgroup (shared by 256 / T rows of T threads each). */
#define SOFTMAX_WG 256
#define SPLIT_TARGET 512

/* Prelude lines for a kernel reading rows as V (vec4 when vw = 4). */
static void vec_prelude(char *buf, size_t n, uint32_t wg, int vw, const char *extra) {
    if (vw == 4)
        snprintf(buf, n,
                 "const WG: u32 = %uu; const VW: u32 = 4u; alias V = vec4<f32>;\n"
                 "fn comp(v: V, c: u32) -> f32 { return v[c]; }\n"
                 "fn hsum(v: V) -> f32 { return dot(v, V(1.0)); }\n"
                 "fn hmax(v: V) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }\n%s",
                 wg, extra);
    else
        snprintf(buf, n,
                 "const WG: u32 = %uu; const VW: u32 = 1u; alias V = f32;\n"
                 "fn comp(v: V, c: u32) -> f32 { return v; }\n"
                 "fn hsum(v: V) -> f32 { return v; }\n"
                 "fn hmax(v: V) -> f32 { return v; }\n%s",
                 wg, extra);
}

static const char *dims_str(char *buf, size_t n, const int *dims, int n_dims) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < n_dims && used < n; i++) used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? ", " : "", dims[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

/* Common checks: x present, f32, fits 32-bit indexing. */
static bool check_x(wgml_ctx *ctx, const char *op, wgml_tensor *x) {
    if (check_tensor(ctx, op, "x", x) || check_dtype(ctx, op, "x", x, WGML_F32)) return false;
    if ((uint64_t)x->numel >= 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s has too many elements for 32-bit indexing", op, tshape(x));
        return false;
    }
    return true;
}

static float neg_inf(void) { return -INFINITY; }

/* The dims to reduce as flags over x's dims (all of them when n_dims = 0); false with the
 * error set for a bad list. */
static bool reduced_dims(wgml_ctx *ctx, const char *op, const wgml_tensor *x, const int *dims, int n_dims,
                         bool red[WGML_MAX_RANK]) {
    char db[160];
    if (n_dims < 0 || n_dims > WGML_MAX_RANK || (n_dims > 0 && !dims)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: %d dims given (%s) for x %s", op, n_dims, dims ? "a list" : "NULL",
                       tshape(x));
        return false;
    }
    for (int i = 0; i < WGML_MAX_RANK; i++) red[i] = false;
    for (int i = 0; i < n_dims; i++) {
        int d = dims[i] < 0 ? dims[i] + x->rank : dims[i];
        if (d < 0 || d >= x->rank) {
            wgml_set_error(ctx, WGML_ERR_ARG, "%s: dim %d is out of range for x %s (dims %s)", op, dims[i], tshape(x),
                           dims_str(db, sizeof db, dims, n_dims));
            return false;
        }
        if (red[d]) {
            wgml_set_error(ctx, WGML_ERR_ARG, "%s: dim %d appears twice in dims %s for x %s", op, dims[i],
                           dims_str(db, sizeof db, dims, n_dims), tshape(x));
            return false;
        }
        red[d] = true;
    }
    if (n_dims == 0)
        for (int d = 0; d < x->rank; d++) red[d] = true;
    return true;
}

/* x's dims coalesced: size-1 dims dropped, neighbours of the same kind (reduced or kept)
 * merged into groups; n_red and n_out are the elements per reduction and the outputs. */
typedef struct red_groups {
    int n, n_reduced; /* groups, reduced groups */
    int64_t size[WGML_MAX_RANK];
    bool red[WGML_MAX_RANK];
    int64_t n_red, n_out;
} red_groups;

static red_groups coalesce(const wgml_tensor *x, const bool *red) {
    red_groups gr = {.n_red = 1, .n_out = 1};
    for (int d = 0; d < x->rank; d++) {
        if (x->shape[d] == 1) continue;
        if (gr.n > 0 && gr.red[gr.n - 1] == red[d]) gr.size[gr.n - 1] *= x->shape[d];
        else { gr.size[gr.n] = x->shape[d]; gr.red[gr.n] = red[d]; gr.n++; }
    }
    for (int i = 0; i < gr.n; i++) {
        if (gr.red[i]) { gr.n_red *= gr.size[i]; gr.n_reduced++; }
        else gr.n_out *= gr.size[i];
    }
    return gr;
}

/* One thread per output over the [outer, n_red, inner] view (reduce_cols.wgsl: n = n_red, n_rows = n_out). */
static wgml_status reduce_by_thread(wgml_graph *g, const char *op, int kind, wgml_tensor *x, wgml_tensor *out,
                                    int64_t outer, const red_groups *gr, int64_t inner, float scale) {
    char prelude[64];
    struct { uint32_t outer, n, inner, n_rows; float scale, ninf; } p = {
        (uint32_t)outer, (uint32_t)gr->n_red, (uint32_t)inner, (uint32_t)gr->n_out, scale, neg_inf()};
    snprintf(prelude, sizeof prelude, "const OP: u32 = %du;\n", kind);
    return graph_dispatch(g, op, "reduce_cols", prelude, &x, 1, &out, 1, &p, sizeof p,
                          ((uint64_t)gr->n_out + 255) / 256);
}

/* One workgroup per output (reduce_rows.wgsl): contiguous rows, or the groups with their
 * strides. Few outputs with long reductions: each reduction is cut into chunks of >= SPLIT_MIN
 * elements so that about SPLIT_TARGET workgroups share the work, and the per-chunk pairs are
 * merged by a second dispatch (reduce_pairs.wgsl; fixed order: still deterministic). */
static wgml_status reduce_by_workgroup(wgml_graph *g, const char *op, int kind, wgml_tensor *x, wgml_tensor *out,
                                       const red_groups *gr, bool contig, float scale) {
    char prelude[768], extra[160];
    int64_t n_red = gr->n_red, n_out = gr->n_out;
    struct {
        uint32_t kshape[8], kstride[8], rshape[8], rstride[8];
        uint32_t n_out, n_red, nk, nr;
        float scale, ninf;
        uint32_t chunk, parts;
    } p;
    memset(&p, 0, sizeof p);
    p.n_out = (uint32_t)n_out;
    p.n_red = (uint32_t)n_red;
    p.scale = scale;
    p.ninf = neg_inf();
    if (!contig) { /* groups with their strides, innermost last */
        int64_t stride = 1;
        uint32_t ks[8], kst[8], rs[8], rst[8];
        int nk = 0, nr = 0;
        for (int i = gr->n - 1; i >= 0; i--) {
            if (gr->red[i]) { rs[nr] = (uint32_t)gr->size[i]; rst[nr++] = (uint32_t)stride; }
            else { ks[nk] = (uint32_t)gr->size[i]; kst[nk++] = (uint32_t)stride; }
            stride *= gr->size[i];
        }
        for (int i = 0; i < nk; i++) { p.kshape[i] = ks[nk - 1 - i]; p.kstride[i] = kst[nk - 1 - i]; }
        for (int i = 0; i < nr; i++) { p.rshape[i] = rs[nr - 1 - i]; p.rstride[i] = rst[nr - 1 - i]; }
        p.nk = (uint32_t)nk;
        p.nr = (uint32_t)nr;
    }
    int vw = contig && n_red % 4 == 0 ? 4 : 1;
    uint64_t chunk = (uint64_t)n_red, parts = 1;
    if (n_out < SPLIT_TARGET && n_red >= 2 * SPLIT_MIN) {
        uint64_t want = (SPLIT_TARGET + (uint64_t)n_out - 1) / (uint64_t)n_out;
        chunk = ((uint64_t)n_red + want - 1) / want;
        if (chunk < SPLIT_MIN) chunk = SPLIT_MIN;
        chunk = (chunk + 3) & ~3ull; /* whole vec4s */
        parts = ((uint64_t)n_red + chunk - 1) / chunk;
    }
    p.chunk = (uint32_t)chunk;
    p.parts = (uint32_t)parts;
    snprintf(extra, sizeof extra, "const OP: u32 = %du; const CONTIG: bool = %s; const SPLIT: bool = %s;\n", kind,
             contig ? "true" : "false", parts > 1 ? "true" : "false");
    vec_prelude(prelude, sizeof prelude, row_workgroup(chunk / (uint64_t)vw), vw, extra);
    if (parts == 1) return graph_dispatch(g, op, "reduce_rows", prelude, &x, 1, &out, 1, &p, sizeof p, (uint64_t)n_out);
    int64_t pshape[1] = {2 * n_out * (int64_t)parts};
    wgml_tensor *pairs = graph_output(g, op, WGML_U32, 1, pshape);
    wgml_status s = pairs ? graph_dispatch(g, op, "reduce_rows", prelude, &x, 1, &pairs, 1, &p, sizeof p,
                                           (uint64_t)n_out * parts)
                          : wgml_last_status(graph_ctx(g));
    if (!s) {
        struct { uint32_t n_out, parts; float scale, ninf; } q = {(uint32_t)n_out, (uint32_t)parts, scale, neg_inf()};
        snprintf(prelude, sizeof prelude, "const WG: u32 = %uu; const OP: u32 = %du;\n", row_workgroup(parts), kind);
        s = graph_dispatch(g, op, "reduce_pairs", prelude, &pairs, 1, &out, 1, &q, sizeof q, (uint64_t)n_out);
    }
    wgml_tensor_free(pairs); /* eager: released after the recorded dispatches */
    return s;
}

static wgml_tensor *reduce_impl(wgml_graph *g, const char *op, int kind, bool mean, wgml_tensor *x, const int *dims,
                                int n_dims, int keepdim) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (!check_x(ctx, op, x) || check_graph(ctx, g, op, "x", x)) return NULL;
    bool red[WGML_MAX_RANK];
    if (!reduced_dims(ctx, op, x, dims, n_dims, red)) return NULL;
    int orank = 0;
    int64_t oshape[WGML_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        if (!red[d]) oshape[orank++] = x->shape[d];
        else if (keepdim) oshape[orank++] = 1;
    }
    red_groups gr = coalesce(x, red);
    wgml_tensor *out = graph_output(g, op, kind == OP_ARGMAX ? WGML_I32 : WGML_F32, orank, oshape);
    if (!out) return NULL;
    float scale = mean ? (float)(1.0 / (double)gr.n_red) : 1.0f;
    /* the [outer, red, inner] view when the reduced dims form one block */
    int64_t outer = 1, inner = 1;
    bool one_block = gr.n_reduced <= 1;
    if (one_block) {
        bool after = false;
        for (int i = 0; i < gr.n; i++) {
            if (gr.red[i]) after = true;
            else if (after) inner *= gr.size[i];
            else outer *= gr.size[i];
        }
    }
    bool contig = one_block && inner == 1;
    wgml_status s;
    if (one_block && (gr.n_red <= SHORT_ROW || (!contig && (gr.n_out >= 1024 || gr.n_red <= 64))))
        s = reduce_by_thread(g, op, kind, x, out, outer, &gr, inner, scale);
    else
        s = reduce_by_workgroup(g, op, kind, x, out, &gr, contig, scale);
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

wgml_tensor *wgml_sum(wgml_graph *g, wgml_tensor *x, const int *dims, int n_dims, int keepdim) {
    return reduce_grad_record(g, reduce_impl(g, "sum", OP_SUM, false, x, dims, n_dims, keepdim), x, REDUCE_GRAD_SUM, dims, n_dims);
}
wgml_tensor *wgml_mean(wgml_graph *g, wgml_tensor *x, const int *dims, int n_dims, int keepdim) {
    return reduce_grad_record(g, reduce_impl(g, "mean", OP_SUM, true, x, dims, n_dims, keepdim), x, REDUCE_GRAD_MEAN, dims, n_dims);
}
wgml_tensor *wgml_amax(wgml_graph *g, wgml_tensor *x, const int *dims, int n_dims, int keepdim) {
    return reduce_grad_record(g, reduce_impl(g, "amax", OP_MAX, false, x, dims, n_dims, keepdim), x, REDUCE_GRAD_AMAX, dims,
                              n_dims);
}
wgml_tensor *wgml_argmax(wgml_graph *g, wgml_tensor *x, int dim, int keepdim) {
    return reduce_impl(g, "argmax", OP_ARGMAX, false, x, &dim, 1, keepdim);
}

static wgml_tensor *softmax_impl(wgml_graph *g, const char *op, bool log_form, wgml_tensor *x, int dim) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (!check_x(ctx, op, x) || check_graph(ctx, g, op, "x", x)) return NULL;
    if (x->rank == 0) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: x must have rank 1 to %d, got shape %s", op, WGML_MAX_RANK, tshape(x));
        return NULL;
    }
    int d = dim < 0 ? dim + x->rank : dim;
    if (d < 0 || d >= x->rank) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: dim %d is out of range for x %s", op, dim, tshape(x));
        return NULL;
    }
    int64_t outer = 1, n = x->shape[d], inner = 1;
    for (int i = 0; i < d; i++) outer *= x->shape[i];
    for (int i = d + 1; i < x->rank; i++) inner *= x->shape[i];
    wgml_tensor *out = graph_output(g, op, WGML_F32, x->rank, x->shape);
    if (!out) return NULL;
    struct { uint32_t n_rows, n, inner; float ninf; } p = {(uint32_t)(outer * inner), (uint32_t)n, (uint32_t)inner,
                                                         neg_inf()};
    char prelude[768], extra[160];
    snprintf(extra, sizeof extra, "const LOG: bool = %s;\n", log_form ? "true" : "false");
    wgml_status s;
    if ((inner == 1 && n <= SHORT_ROW) || (inner > 1 && (n <= 1024 || outer * inner >= 4096))) {
        s = graph_dispatch(g, op, "reduce_softmax_cols", extra, &x, 1, &out, 1, &p, sizeof p,
                           ((uint64_t)(outer * inner) + 255) / 256);
    } else {
        /* T threads per row (at least ~4 loads each), 256 / T rows per workgroup */
        int vw = inner == 1 && n % 4 == 0 ? 4 : 1;
        uint64_t loads = (uint64_t)n / (uint64_t)vw;
        uint32_t t = 4, tshift = 2;
        while (t < 256 && (uint64_t)t * 8 <= loads) { t *= 2; tshift++; }
        uint32_t rows_per_wg = SOFTMAX_WG / t;
        snprintf(extra, sizeof extra, "const LOG: bool = %s; const T: u32 = %uu; const TSHIFT: u32 = %uu;\n",
                 log_form ? "true" : "false", t, tshift);
        vec_prelude(prelude, sizeof prelude, SOFTMAX_WG, vw, extra);
        s = graph_dispatch(g, op, "reduce_softmax", prelude, &x, 1, &out, 1, &p, sizeof p,
                           ((uint64_t)(outer * inner) + rows_per_wg - 1) / rows_per_wg);
    }
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

wgml_tensor *wgml_softmax(wgml_graph *g, wgml_tensor *x, int dim) {
    return softmax_grad_record(g, softmax_impl(g, "softmax", false, x, dim), x, false, dim);
}
wgml_tensor *wgml_log_softmax(wgml_graph *g, wgml_tensor *x, int dim) {
    return softmax_grad_record(g, softmax_impl(g, "log_softmax", true, x, dim), x, true, dim);
}
