/* Fused forms of the norm family for inference graphs: one dispatch where the plain ops take
 * two. They record no autograd rule, so with an input that needs a gradient they record the
 * plain ops instead. */
#include "ops/norm/norm_fused.h"

#include <stdio.h>
#include <string.h>

/* norm_add_rms (wy NULL) and norm_add_rms_post in one: *sum = x + (wy ? rms_norm(y) * wy : y),
 * y given as ny slices [ny, x's shape] to sum when ny > 1 (norm_add_rms_parts). */
static wgml_tensor *add_rms(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *y, int ny, wgml_tensor *wy,
                            wgml_tensor *w, float eps, wgml_tensor **sum) {
    *sum = NULL;
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) ||
        check_operand(ctx, g, op, "y", y, WGML_F32, 1, WGML_MAX_RANK) || check_operand(ctx, g, op, "w", w, WGML_F32, 1, 1) ||
        (wy && check_operand(ctx, g, op, "wy", wy, WGML_F32, 1, 1)))
        return NULL;
    int yr = ny > 1 ? 1 : 0; /* y's leading slice dim */
    if (ny < 1 || (ny > 1 && (y->rank != x->rank + 1 || y->shape[0] != ny))) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: y %s must be %d slices of x's shape %s", op, tshape(y), ny, tshape(x));
        return NULL;
    }
    int64_t d = w->shape[0];
    wgml_tensor *in[4] = {x, y, w, wy};
    bool fits = d % 4 == 0 && x->rank == y->rank - yr && x->shape[x->rank - 1] == d &&
                (uint64_t)y->numel < 0xFFFFFFFFull && !memcmp(x->shape, y->shape + yr, sizeof(int64_t) * (size_t)x->rank) &&
                eps >= 0.0f && (!wy || wy->shape[0] == d);
    if (!fits || graph_grad_enabled(g, in, wy ? 4 : 3)) {
        if (ny > 1) { /* the plain ops: the slices summed first */
            int dim0 = 0;
            if (!(y = wgml_sum(g, y, &dim0, 1, 0))) return NULL;
        }
        wgml_tensor *yn = wy ? wgml_rms_norm(g, y, wy, eps) : y;
        wgml_tensor *s = yn ? wgml_add(g, x, yn, 1.0f) : NULL;
        wgml_tensor *h = wgml_rms_norm(g, s, w, eps);
        if (h) *sum = s;
        return h;
    }
    int64_t rows = x->numel / d;
    wgml_tensor *s = graph_output(g, op, WGML_F32, x->rank, x->shape);
    wgml_tensor *h = s ? graph_output(g, op, WGML_F32, x->rank, x->shape) : NULL;
    if (!h) {
        wgml_tensor_free(s);
        return NULL;
    }
    /* one workgroup per row: the largest of 64, 128, 256 threads that still has a vec4 each */
    uint32_t wg = d / 4 >= 256 ? 256 : d / 4 >= 128 ? 128 : 64;
    char prelude[768];
    int len = snprintf(prelude, sizeof prelude,
                       "const WG: u32 = %uu; const PRE: bool = %s; const NY: u32 = %du;\n"
                       "//!bindings read(x: array<vec4<f32>>, y: array<vec4<f32>>)\n",
                       wg, wy ? "true" : "false", ny);
    if (wy)
        len += snprintf(prelude + len, sizeof prelude - (size_t)len,
                        "//!bindings read(wy: array<vec4<f32>>)\n"
                        "fn wy_at(j: u32) -> vec4<f32> { return wy[j]; }\n");
    else
        len += snprintf(prelude + len, sizeof prelude - (size_t)len, "fn wy_at(j: u32) -> vec4<f32> { return vec4<f32>(1.0); }\n");
    snprintf(prelude + len, sizeof prelude - (size_t)len,
             "//!bindings read(w: array<vec4<f32>>) write(sum: array<vec4<f32>>, out: array<vec4<f32>>)\n"
             "//!bindings uniform(p: Params)\n");
    struct { uint32_t n_rows, d; float eps; } p = {.n_rows = (uint32_t)rows, .d = (uint32_t)d, .eps = eps};
    /* bindings: x, y, (wy,) w */
    wgml_tensor *ro[4] = {x, y, wy ? wy : w, w}, *rw[2] = {s, h};
    if (graph_dispatch(g, op, "norm_add_rms", prelude, ro, wy ? 4 : 3, rw, 2, &p, sizeof p, (uint64_t)rows)) {
        wgml_tensor_free(h);
        wgml_tensor_free(s);
        return NULL;
    }
    *sum = s;
    return h;
}

wgml_tensor *norm_add_rms(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *w, float eps, wgml_tensor **sum) {
    return add_rms(g, "add_rms_norm", x, y, 1, NULL, w, eps, sum);
}

wgml_tensor *norm_add_rms_parts(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, int ny, wgml_tensor *wy, wgml_tensor *w,
                                float eps, wgml_tensor **sum) {
    return add_rms(g, wy ? "add_rms_norm_post" : "add_rms_norm", x, y, ny, wy, w, eps, sum);
}

wgml_tensor *norm_add_rms_post(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *wy, wgml_tensor *w, float eps,
                               wgml_tensor **sum) {
    if (!wy) {
        if (sum) *sum = NULL;
        return g ? (wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "add_rms_norm_post: wy is NULL"), NULL) : NULL;
    }
    return add_rms(g, "add_rms_norm_post", x, y, 1, wy, w, eps, sum);
}
