/* Normalisations over the last dim: rms_norm and layer_norm (norm_rms.wgsl, norm_layer.wgsl),
 * one workgroup per row with a tree reduction in workgroup memory. */
#include "graph/graph.h"
#include "ops/norm/norm_grad.h"
#include "ops/reduce/wg_reduce.h"

#include <stdio.h>

static void norm_prelude(char *buf, size_t n, int64_t d, bool has_w, bool has_b) {
    bool v4 = d % 4 == 0;
    snprintf(buf, n,
             "const WG: u32 = %uu; const VW: u32 = %du; alias V = %s;\n"
             "fn hsum(v: V) -> f32 { return %s; }\n"
             "fn comp(v: V, c: u32) -> f32 { return %s; }\n"
             "const HAS_W: bool = %s; const HAS_B: bool = %s;\n",
             row_workgroup((uint64_t)(v4 ? d / 4 : d)), v4 ? 4 : 1, v4 ? "vec4<f32>" : "f32", v4 ? "dot(v, V(1.0))" : "v",
             v4 ? "v[c]" : "v", has_w ? "true" : "false", has_b ? "true" : "false");
}

/* x f32 of rank >= 1 in g; an optional f32 [d] parameter. */
static bool check_args(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *w, const char *wn, float eps) {
    wgml_ctx *ctx = graph_ctx(g);
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK)) return false;
    if ((uint64_t)x->numel >= 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s has too many elements for 32-bit indexing", op, tshape(x));
        return false;
    }
    if (!(eps >= 0.0f)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: eps %g must be >= 0", op, (double)eps);
        return false;
    }
    if (w) {
        if (check_dtype(ctx, op, wn, w, WGML_F32) || check_same_graph(ctx, op, x, w)) return false;
        int64_t d = x->shape[x->rank - 1];
        if (w->rank != 1 || w->shape[0] != d) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s must be [%lld] for x %s", op, wn, tshape(w), (long long)d,
                           tshape(x));
            return false;
        }
    }
    return true;
}

wgml_tensor *wgml_rms_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, float eps) {
    if (!g) return NULL;
    const char *op = "rms_norm";
    if (!check_args(g, op, x, w, "w", eps)) return NULL;
    int64_t d = x->shape[x->rank - 1], rows = x->numel / d;
    wgml_tensor *out = graph_output(g, op, WGML_F32, x->rank, x->shape);
    if (!out) return NULL;
    char prelude[512];
    norm_prelude(prelude, sizeof prelude, d, w != NULL, false);
    struct { uint32_t n_rows, d; float eps; } p = {(uint32_t)rows, (uint32_t)d, eps};
    wgml_tensor *ro[2] = {x, w ? w : GRAPH_UNUSED};
    if (graph_dispatch(g, op, "norm_rms", prelude, ro, 2, &out, 1, &p, sizeof p, (uint64_t)rows)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return rms_norm_grad_record(g, out, x, w, eps);
}

wgml_tensor *wgml_layer_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *b, float eps,
                             wgml_tensor **mean_out, wgml_tensor **rstd_out) {
    if (mean_out) *mean_out = NULL;
    if (rstd_out) *rstd_out = NULL;
    if (!g) return NULL;
    const char *op = "layer_norm";
    if (!check_args(g, op, x, w, "w", eps) || !check_args(g, op, x, b, "b", eps)) return NULL;
    int64_t d = x->shape[x->rank - 1], rows = x->numel / d;
    /* mean and rstd: x's shape without its last dim ([1] for a rank-1 x) */
    int64_t sshape[WGML_MAX_RANK] = {1};
    int srank = x->rank > 1 ? x->rank - 1 : 1;
    for (int i = 0; i + 1 < x->rank; i++) sshape[i] = x->shape[i];
    wgml_tensor *out = graph_output(g, op, WGML_F32, x->rank, x->shape);
    wgml_tensor *mean = out ? graph_output(g, op, WGML_F32, srank, sshape) : NULL;
    wgml_tensor *rstd = mean ? graph_output(g, op, WGML_F32, srank, sshape) : NULL;
    if (!rstd) {
        wgml_tensor_free(out);
        wgml_tensor_free(mean);
        return NULL;
    }
    char prelude[512];
    norm_prelude(prelude, sizeof prelude, d, w != NULL, b != NULL);
    struct { uint32_t n_rows, d; float eps; } p = {(uint32_t)rows, (uint32_t)d, eps};
    wgml_tensor *ro[3] = {x, w ? w : GRAPH_UNUSED, b ? b : GRAPH_UNUSED};
    wgml_tensor *rw[3] = {out, mean, rstd};
    if (graph_dispatch(g, op, "norm_layer", prelude, ro, 3, rw, 3, &p, sizeof p, (uint64_t)rows)) {
        wgml_tensor_free(out);
        wgml_tensor_free(mean);
        wgml_tensor_free(rstd);
        return NULL;
    }
    out = layer_norm_grad_record(g, out, x, w, b, mean, rstd);
    /* statistics the caller does not take are released (eager) or left to the arena (built) */
    if (mean_out) *mean_out = mean;
    else wgml_tensor_free(mean);
    if (rstd_out) *rstd_out = rstd;
    else wgml_tensor_free(rstd);
    return out;
}
