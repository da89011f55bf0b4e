/* Fused forms of the norm family for inference graphs: one dispatch where the plain ops take
 * two. They record no autograd rule, so with an input that needs a gradient they record the
 * plain ops instead. */
#include "ops/norm/norm_fused.h"

#include <stdio.h>
#include <string.h>

wgml_tensor *norm_add_rms(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *w, float eps, wgml_tensor **sum) {
    *sum = NULL;
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "add_rms_norm";
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) ||
        check_operand(ctx, g, op, "y", y, WGML_F32, 1, WGML_MAX_RANK) || check_operand(ctx, g, op, "w", w, WGML_F32, 1, 1))
        return NULL;
    int64_t d = w->shape[0];
    wgml_tensor *in[3] = {x, y, w};
    bool fits = d % 4 == 0 && x->rank == y->rank && x->shape[x->rank - 1] == d && (uint64_t)x->numel < 0xFFFFFFFFull &&
                !memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank) && eps >= 0.0f;
    if (!fits || graph_grad_enabled(g, in, 3)) {
        wgml_tensor *s = wgml_add(g, x, y, 1.0f);
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
    char prelude[64];
    snprintf(prelude, sizeof prelude, "const WG: u32 = %uu;\n", wg);
    struct { uint32_t n_rows, d; float eps; } p = {.n_rows = (uint32_t)rows, .d = (uint32_t)d, .eps = eps};
    wgml_tensor *ro[3] = {x, y, w}, *rw[2] = {s, h};
    if (graph_dispatch(g, op, "norm_add_rms", prelude, ro, 3, rw, 2, &p, sizeof p, (uint64_t)rows)) {
        wgml_tensor_free(h);
        wgml_tensor_free(s);
        return NULL;
    }
    *sum = s;
    return h;
}
