/* Fused forms of the norm family for inference graphs: one dispatch where the plain ops take
 * two. They record no autograd rule, so with an input that needs a gradient they record the
 * plain ops instead. */
#include "ops/norm/norm_fused.h"

#include <stdio.h>
#include <string.h>

/* The prelude's part for the quantised rows in the nf formats fmts (norm_add_rms.wgsl: XQ0, XQ1,
 * xq_put, xq_row), at p; returns its length (snprintf's). */
static int xq_prelude(char *p, size_t cap, const qw_xq_fmt *fmts, int nf) {
    if (nf == 0)
        return snprintf(p, cap, "fn xq_put(f: u32, i: u32, v: u32) {}\nfn xq_row(row: u32, lid: u32) {}\n");
    int len = snprintf(p, cap,
                       "//!bindings write(XQ0: array<u32>%s)\n"
                       "fn xq_put(f: u32, i: u32, v: u32) { %s }\n"
                       "fn xq_row(row: u32, lid: u32) {\n    storageBarrier();\n",
                       nf > 1 ? ", XQ1: array<u32>" : "",
                       nf > 1 ? "if (f == 0u) { XQ0[i] = v; } else { XQ1[i] = v; }" : "XQ0[i] = v;");
    for (int i = 0; i < nf && len > 0 && (size_t)len < cap; i++)
        len += snprintf(p + len, cap - (size_t)len, "    xq_fmt(%du, %uu, %s, %uu, row, lid);\n", i, fmts[i].qb,
                        fmts[i].pair ? "true" : "false", (uint32_t)fmts[i].kp);
    if (len > 0 && (size_t)len < cap) len += snprintf(p + len, cap - (size_t)len, "}\n");
    return len;
}

/* norm_add_rms (wy NULL) and norm_add_rms_post in one: *sum = x + (wy ? rms_norm(y) * wy : y),
 * y given as ny slices [ny, x's shape] to sum when ny > 1 (norm_add_rms_parts); with nf > 0 the
 * normed rows also quantised in each of the formats fmts (norm_add_rms_parts). */
static wgml_tensor *add_rms(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *y, int ny, wgml_tensor *wy,
                            wgml_tensor *w, float eps, const qw_xq_fmt *fmts, int nf, wgml_tensor **sum) {
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
    /* the quantised rows: formats of whole blocks over a padded K of d or more, in 32-bit indices */
    nf = nf < 0 || !fmts ? 0 : nf > QW_XQ_MAX ? QW_XQ_MAX : nf;
    for (int i = 0; i < nf; i++)
        if (!fmts[i].qb || fmts[i].qb % 4 || fmts[i].kp < d || fmts[i].kp % fmts[i].qb ||
            rows * qw_xq_row(&fmts[i]) > UINT32_MAX)
            nf = 0;
    wgml_tensor *rw[2 + QW_XQ_MAX] = {NULL};
    rw[0] = graph_output(g, op, WGML_F32, x->rank, x->shape);
    rw[1] = rw[0] ? graph_output(g, op, WGML_F32, x->rank, x->shape) : NULL;
    for (int i = 0; i < nf && rw[1 + i]; i++) {
        int64_t n = rows * qw_xq_row(&fmts[i]);
        rw[2 + i] = graph_output(g, op, WGML_I32, 1, &n);
    }
    if (!rw[1 + nf]) {
        for (int i = 0; i < 2 + nf; i++) wgml_tensor_free(rw[i]);
        return NULL;
    }
    wgml_tensor *s = rw[0], *h = rw[1];
    /* one workgroup per row: the largest of 64, 128, 256 threads that still has a vec4 each */
    uint32_t wg = d / 4 >= 256 ? 256 : d / 4 >= 128 ? 128 : 64;
    char prelude[1536];
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
    len += snprintf(prelude + len, sizeof prelude - (size_t)len,
                    "//!bindings read(w: array<vec4<f32>>) write(sum: array<vec4<f32>>, out: array<vec4<f32>>)\n"
                    "//!bindings uniform(p: Params)\n");
    xq_prelude(prelude + len, sizeof prelude - (size_t)len, fmts, nf);
    struct { uint32_t n_rows, d; float eps; } p = {.n_rows = (uint32_t)rows, .d = (uint32_t)d, .eps = eps};
    /* bindings: x, y, (wy,) w; sum, out, the quantised rows */
    wgml_tensor *ro[4] = {x, y, wy ? wy : w, w};
    if (graph_dispatch(g, op, "norm_add_rms", prelude, ro, wy ? 4 : 3, rw, 2 + nf, &p, sizeof p, (uint64_t)rows)) {
        for (int i = 0; i < 2 + nf; i++) wgml_tensor_free(rw[i]);
        return NULL;
    }
    for (int i = 0; i < nf; i++) {
        qw_xq_attach(g, h, &fmts[i], rw[2 + i]);
        wgml_tensor_free(rw[2 + i]); /* eager: the recorded dispatch holds its range; built graph: no-op */
    }
    *sum = s;
    return h;
}

wgml_tensor *norm_add_rms(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *w, float eps, wgml_tensor **sum) {
    return add_rms(g, "add_rms_norm", x, y, 1, NULL, w, eps, NULL, 0, sum);
}

wgml_tensor *norm_add_rms_parts(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, int ny, wgml_tensor *wy, wgml_tensor *w,
                                float eps, const qw_xq_fmt *fmts, int nf, wgml_tensor **sum) {
    return add_rms(g, wy ? "add_rms_norm_post" : "add_rms_norm", x, y, ny, wy, w, eps, fmts, nf, sum);
}

wgml_tensor *norm_add_rms_post(wgml_graph *g, wgml_tensor *x, wgml_tensor *y, wgml_tensor *wy, wgml_tensor *w, float eps,
                               wgml_tensor **sum) {
    if (!wy) {
        if (sum) *sum = NULL;
        return g ? (wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "add_rms_norm_post: wy is NULL"), NULL) : NULL;
    }
    return add_rms(g, "add_rms_norm_post", x, y, 1, wy, w, eps, NULL, 0, sum);
}
