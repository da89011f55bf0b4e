/* Backward of the normalisations: wgml_rms_norm_backward and wgml_layer_norm_backward.
 * dx: one workgroup per row, vec4 loads when D % 4 == 0 (norm_bwd_rms.wgsl, norm_bwd_layer.wgsl).
 * dw / db: per-chunk column sums (norm_bwd_cols.wgsl, one thread per (chunk of rows, column)),
 * then wgml_sum over the chunks; every sum runs in a fixed order, so the gradients are deterministic. */
#include "graph/graph.h"
#include "ops/reduce/wg_reduce.h"

#include <stdio.h>
#include <string.h>

#define COLS_CHUNK 64 /* rows per partial sum of dw / db */

/* Row kernels read V = vec4 when d % 4 == 0 (else f32); WG from the number of loads. */
static void bwd_prelude(char *buf, size_t n, int64_t d, bool has_w) {
    bool v4 = d % 4 == 0;
    snprintf(buf, n,
             "const WG: u32 = %uu; const VW: u32 = %du; alias V = %s; const HAS_W: bool = %s;\n"
             "fn hsum(v: V) -> f32 { return %s; }\n",
             row_workgroup((uint64_t)(v4 ? d / 4 : d)), v4 ? 4 : 1, v4 ? "vec4<f32>" : "f32", has_w ? "true" : "false",
             v4 ? "dot(v, V(1.0))" : "v");
}

/* x: f32, rank >= 1, of graph g, small enough for 32-bit indexing. */
static bool check_x(wgml_graph *g, const char *op, wgml_tensor *x) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK)) return false;
    if ((uint64_t)x->numel >= 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s has too many elements for 32-bit indexing", op, tshape(x));
        return false;
    }
    return true;
}

/* t: f32 of x's graph with x's shape (same_shape) or with `numel` elements (per-row stats). */
static bool check_like(wgml_graph *g, const char *op, const char *arg, wgml_tensor *x, wgml_tensor *t, bool same_shape,
                       int64_t numel) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, arg, t) || check_dtype(ctx, op, arg, t, WGML_F32) || check_same_graph(ctx, op, x, t))
        return false;
    bool ok = same_shape ? t->rank == x->rank && memcmp(t->shape, x->shape, sizeof(int64_t) * (size_t)x->rank) == 0
                         : t->numel == numel;
    if (!ok) {
        if (same_shape)
            wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s must have x's shape %s", op, arg, tshape(t), tshape(x));
        else
            wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s must hold %lld elements (one per row of x %s)", op, arg,
                           tshape(t), (long long)numel, tshape(x));
    }
    return ok;
}

static bool check_w(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *w) {
    if (!w) return true;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_dtype(ctx, op, "w", w, WGML_F32) || check_same_graph(ctx, op, x, w)) return false;
    int64_t d = x->shape[x->rank - 1];
    if (w->rank != 1 || w->shape[0] != d) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: w %s must be [%lld] for x %s", op, tshape(w), (long long)d, tshape(x));
        return false;
    }
    return true;
}

/* dw (and db) from the column-sum pass: partials [chunks, d], then summed over dim 0. */
static wgml_status col_grads(wgml_graph *g, const char *op, bool layer, wgml_tensor *x, wgml_tensor *dy,
                             wgml_tensor *mean, wgml_tensor *rstd, wgml_tensor **dw, wgml_tensor **db) {
    int64_t d = x->shape[x->rank - 1], rows = x->numel / d;
    int64_t chunks = (rows + COLS_CHUNK - 1) / COLS_CHUNK;
    int64_t pshape[2] = {chunks, d};
    wgml_tensor *pw = dw ? graph_output(g, op, WGML_F32, 2, pshape) : NULL;
    wgml_tensor *pb = db ? graph_output(g, op, WGML_F32, 2, pshape) : NULL;
    if ((dw && !pw) || (db && !pb)) {
        wgml_tensor_free(pw);
        wgml_tensor_free(pb);
        return wgml_last_status(graph_ctx(g));
    }
    char prelude[160];
    snprintf(prelude, sizeof prelude, "const LAYER: bool = %s; const HAS_DW: bool = %s; const HAS_DB: bool = %s;\n",
             layer ? "true" : "false", pw ? "true" : "false", pb ? "true" : "false");
    struct { uint32_t n_rows, d, chunk, n_out; } p = {(uint32_t)rows, (uint32_t)d, COLS_CHUNK, (uint32_t)(chunks * d)};
    wgml_tensor *ro[4] = {x, dy, mean, rstd};
    /* an output not asked for is an unused slot (the kernel never writes it) */
    wgml_tensor *rw[2] = {pw ? pw : GRAPH_UNUSED, pb ? pb : GRAPH_UNUSED};
    wgml_status s = graph_dispatch(g, op, "norm_bwd_cols", prelude, ro, 4, rw, 2, &p, sizeof p,
                                   ((uint64_t)(chunks * d) + 255) / 256);
    int dim0 = 0;
    if (!s && pw && !(*dw = wgml_sum(g, pw, &dim0, 1, 0))) s = wgml_last_status(graph_ctx(g));
    if (!s && pb && !(*db = wgml_sum(g, pb, &dim0, 1, 0))) s = wgml_last_status(graph_ctx(g));
    wgml_tensor_free(pw);
    wgml_tensor_free(pb);
    return s;
}

wgml_status wgml_rms_norm_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *dy, float eps,
                                   wgml_tensor **dx, wgml_tensor **dw) {
    if (dx) *dx = NULL;
    if (dw) *dw = NULL;
    if (!g) return WGML_ERR_ARG;
    const char *op = "rms_norm_backward";
    wgml_ctx *ctx = graph_ctx(g);
    if (!dx) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: dx (the output pointer) is NULL", op);
    if (!check_x(g, op, x) || !check_w(g, op, x, w) || !check_like(g, op, "dy", x, dy, true, 0))
        return wgml_last_status(ctx);
    if (!(eps >= 0.0f)) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: eps %g must be >= 0", op, (double)eps);
    int64_t d = x->shape[x->rank - 1], rows = x->numel / d;
    wgml_tensor *gx = graph_output(g, op, WGML_F32, x->rank, x->shape);
    wgml_tensor *rs = gx ? graph_output(g, op, WGML_F32, 1, &rows) : NULL;
    if (!rs) {
        wgml_tensor_free(gx);
        return wgml_last_status(ctx);
    }
    char prelude[320];
    bwd_prelude(prelude, sizeof prelude, d, w != NULL);
    struct { uint32_t n_rows, d; float eps; } p = {(uint32_t)rows, (uint32_t)d, eps};
    wgml_tensor *ro[3] = {x, w ? w : GRAPH_UNUSED, dy}, *rw[2] = {gx, rs};
    wgml_status s = graph_dispatch(g, op, "norm_bwd_rms", prelude, ro, 3, rw, 2, &p, sizeof p, (uint64_t)rows);
    if (!s && dw) s = col_grads(g, op, false, x, dy, rs, rs, dw, NULL);
    wgml_tensor_free(rs);
    if (s) {
        wgml_tensor_free(gx);
        if (dw) {
            wgml_tensor_free(*dw);
            *dw = NULL;
        }
        return s;
    }
    *dx = gx;
    return WGML_OK;
}

wgml_status wgml_layer_norm_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *mean,
                                     wgml_tensor *rstd, wgml_tensor *dy, wgml_tensor **dx, wgml_tensor **dw,
                                     wgml_tensor **db) {
    if (dx) *dx = NULL;
    if (dw) *dw = NULL;
    if (db) *db = NULL;
    if (!g) return WGML_ERR_ARG;
    const char *op = "layer_norm_backward";
    wgml_ctx *ctx = graph_ctx(g);
    if (!dx) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: dx (the output pointer) is NULL", op);
    if (!check_x(g, op, x)) return wgml_last_status(ctx);
    int64_t d = x->shape[x->rank - 1], rows = x->numel / d;
    if (!check_w(g, op, x, w) || !check_like(g, op, "mean", x, mean, false, rows) ||
        !check_like(g, op, "rstd", x, rstd, false, rows) || !check_like(g, op, "dy", x, dy, true, 0))
        return wgml_last_status(ctx);
    wgml_tensor *gx = graph_output(g, op, WGML_F32, x->rank, x->shape);
    if (!gx) return wgml_last_status(ctx);
    char prelude[320];
    bwd_prelude(prelude, sizeof prelude, d, w != NULL);
    struct { uint32_t n_rows, d; } p = {(uint32_t)rows, (uint32_t)d};
    wgml_tensor *ro[5] = {x, w ? w : GRAPH_UNUSED, mean, rstd, dy};
    wgml_status s = graph_dispatch(g, op, "norm_bwd_layer", prelude, ro, 5, &gx, 1, &p, sizeof p, (uint64_t)rows);
    if (!s && (dw || db)) s = col_grads(g, op, true, x, dy, mean, rstd, dw, db);
    if (s) {
        wgml_tensor_free(gx);
        if (dw) { wgml_tensor_free(*dw); *dw = NULL; }
        if (db) { wgml_tensor_free(*db); *db = NULL; }
        return s;
    }
    *dx = gx;
    return WGML_OK;
}
