/* Rotary position embedding (rope) and its backward, through one kernel (rope_apply.wgsl).
 *
 * x is [B, S, H, D] (row-major, D fastest: batch, sequence, head, head dimension) or, with
 * wgml_rope_ex, [B, H, S, D] (the layout attention takes, so no transpose copy), positions
 * an i32 tensor [S] (shared by every batch entry) or [B, S]. Positions live in a tensor so a
 * built decode graph can be replayed with new positions. The per-pair frequency table is made
 * in double precision on the host and uploaded as a small tensor of the graph (see the kernel
 * for how it keeps the angle exact at long positions); rope_kv.c's fused decode step shares
 * the table and the angle. */
#include "graph/graph.h"
#include "ops/rope/rope_fused.h"
#include "ops/rope/rope_grad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROPE_TWO_PI 6.283185307179586476925

/* frexp-based truncation of v to `bits` significant bits (exact in f32 for bits <= 24) */
static double trunc_bits(double v, int bits) {
    if (v == 0) return 0;
    int e;
    double m = frexp(v, &e);
    return ldexp(floor(ldexp(m, bits)), e - bits);
}

wgml_tensor *rope_freq_table(wgml_graph *g, const char *op, int64_t D, float theta, const float *factors) {
    int64_t half = D / 2, ts[2] = {half, 4};
    float *tab = malloc(sizeof(float) * (size_t)(half * 4));
    if (!tab) {
        wgml_set_error(graph_ctx(g), WGML_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    for (int64_t i = 0; i < half; i++) { /* g = theta^(-2i/D) / f_i / 2pi = g1 + g2 + g3 */
        double gi = exp(-(double)(2 * i) / (double)D * log((double)theta)) / ROPE_TWO_PI;
        if (factors) gi /= (double)factors[i];
        double g1 = trunc_bits(gi, 12), g2 = trunc_bits(gi - g1, 12);
        tab[4 * i] = (float)g1;
        tab[4 * i + 1] = (float)g2;
        tab[4 * i + 2] = (float)(gi - g1 - g2);
        tab[4 * i + 3] = 0;
    }
    wgml_tensor *table = wgml_tensor_new(g, WGML_F32, 2, ts);
    if (table && wgml_tensor_write(table, tab, sizeof(float) * (size_t)(half * 4))) {
        wgml_tensor_free(table);
        table = NULL;
    }
    free(tab);
    return table;
}

/* The operands' checks after the layout's, in the order the errors are reported; xn names x
 * ("x", or "dy" backward) and hf says the layout is [B, H, S, D]. */
static bool rope_check(wgml_ctx *ctx, wgml_graph *g, const char *op, const char *xn, wgml_tensor *x,
                       wgml_tensor *positions, float theta, wgml_rope_style style, bool hf) {
    if (check_tensor(ctx, op, xn, x) || check_tensor(ctx, op, "positions", positions) ||
        check_dtype(ctx, op, xn, x, WGML_F32) || check_dtype(ctx, op, "positions", positions, WGML_I32) ||
        check_rank(ctx, op, xn, x, 4, 4) || check_rank(ctx, op, "positions", positions, 1, 2) ||
        check_same_graph(ctx, op, x, positions))
        return false;
    if (check_graph(ctx, g, op, xn, x)) return false;
    int64_t B = x->shape[0], S = hf ? x->shape[2] : x->shape[1], D = x->shape[3];
    if (D % 2 != 0) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s %s: the head dimension D = %lld must be even", op, xn, tshape(x),
                       (long long)D);
        return false;
    }
    bool per_batch = positions->rank == 2;
    if ((per_batch && (positions->shape[0] != B || positions->shape[1] != S)) ||
        (!per_batch && positions->shape[0] != S)) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: positions %s must be [%lld] or [%lld, %lld] for %s %s (%s)", op,
                       tshape(positions), (long long)S, (long long)B, (long long)S, xn, tshape(x),
                       hf ? "[B, H, S, D]" : "[B, S, H, D]");
        return false;
    }
    if (!(theta > 0) || !isfinite(theta)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: theta must be positive and finite, got %g", op, (double)theta);
        return false;
    }
    if (style != WGML_ROPE_HALF && style != WGML_ROPE_INTERLEAVED) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: unknown style %d", op, (int)style);
        return false;
    }
    int64_t n_pairs = x->numel / 2;
    if (n_pairs > 0xFFFFFFFFll) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %s %s has too many elements", op, xn, tshape(x));
        return false;
    }
    return true;
}

/* The rope of x at positions with frequency table tab (a rope_freq_table of the head dimension,
 * kept by the caller), or, tab NULL, a table of theta made here for this dispatch. */
static wgml_tensor *rope_record(wgml_graph *g, const char *op, wgml_tensor *x, wgml_tensor *positions, float theta,
                                wgml_tensor *tab, wgml_rope_style style, wgml_rope_layout layout, float sign) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (layout != WGML_ROPE_BSHD && layout != WGML_ROPE_BHSD) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: unknown layout %d", op, (int)layout);
        return NULL;
    }
    bool hf = layout == WGML_ROPE_BHSD;
    const char *xn = sign > 0 ? "x" : "dy";
    if (!rope_check(ctx, g, op, xn, x, positions, theta, style, hf)) return NULL;
    int64_t S = hf ? x->shape[2] : x->shape[1], H = hf ? x->shape[1] : x->shape[2], D = x->shape[3];
    bool per_batch = positions->rank == 2;
    int64_t half = D / 2, n_pairs = x->numel / 2;
    if (tab && (check_tensor(ctx, op, "table", tab) || check_dtype(ctx, op, "table", tab, WGML_F32) ||
                check_same_graph(ctx, op, x, tab)))
        return NULL;
    if (tab && (tab->rank != 2 || tab->shape[0] != half || tab->shape[1] != 4)) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: frequency table %s must be [%lld, 4] for %s %s", op, tshape(tab),
                       (long long)half, xn, tshape(x));
        return NULL;
    }
    wgml_tensor *table = tab ? tab : rope_freq_table(g, op, D, theta, NULL);
    if (!table) return NULL;
    wgml_tensor *out = graph_output(g, op, WGML_F32, 4, x->shape);
    if (!out) {
        if (!tab) wgml_tensor_free(table);
        return NULL;
    }
    struct {
        uint32_t n_pairs, H, S, half, pos_bstride;
        float sign;
        uint32_t pad[2];
    } params = {(uint32_t)n_pairs, (uint32_t)H, (uint32_t)S, (uint32_t)half, per_batch ? (uint32_t)S : 0u, sign, {0, 0}};
    char prelude[128];
    snprintf(prelude, sizeof prelude, "const INTERLEAVED: bool = %s;\nconst HEADS_FIRST: bool = %s;\n",
             style == WGML_ROPE_INTERLEAVED ? "true" : "false", hf ? "true" : "false");
    wgml_tensor *ro[3] = {x, positions, table};
    wgml_status s = graph_dispatch(g, op, "rope_apply", prelude, ro, 3, &out, 1, &params, sizeof params,
                                   ((uint64_t)n_pairs + 63) / 64);
    /* eager: the recorded dispatch holds the table's buffer range; later work cannot reuse it
     * before this runs. Built graph: the table lives as long as the graph. */
    if (!tab) wgml_tensor_free(table);
    if (s) {
        wgml_tensor_free(out);
        return NULL;
    }
    return rope_grad_record(g, out, x, positions, theta, tab, style, layout, sign < 0);
}

wgml_tensor *wgml_rope(wgml_graph *g, wgml_tensor *x, wgml_tensor *positions, float theta, wgml_rope_style style) {
    return rope_record(g, "rope", x, positions, theta, NULL, style, WGML_ROPE_BSHD, 1.0f);
}

wgml_tensor *wgml_rope_backward(wgml_graph *g, wgml_tensor *dy, wgml_tensor *positions, float theta,
                                wgml_rope_style style) {
    return rope_record(g, "rope_backward", dy, positions, theta, NULL, style, WGML_ROPE_BSHD, -1.0f);
}

wgml_tensor *wgml_rope_ex(wgml_graph *g, wgml_tensor *x, wgml_tensor *positions, float theta, wgml_rope_style style,
                          wgml_rope_layout layout, int backward) {
    return rope_record(g, backward ? "rope_backward" : "rope", x, positions, theta, NULL, style, layout,
                       backward ? -1.0f : 1.0f);
}

wgml_tensor *rope_tab(wgml_graph *g, wgml_tensor *x, wgml_tensor *positions, wgml_tensor *tab, wgml_rope_style style,
                      wgml_rope_layout layout, int backward) {
    if (!tab) {
        wgml_set_error(g ? graph_ctx(g) : NULL, WGML_ERR_ARG, "rope: the frequency table is NULL");
        return NULL;
    }
    return rope_record(g, backward ? "rope_backward" : "rope", x, positions, 1.0f, tab, style, layout,
                       backward ? -1.0f : 1.0f);
}
