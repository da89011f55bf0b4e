/* Fused cross-entropy: loss and dlogits of logits [..., V] against i32 labels [...] in one
 * pass over the logits. Three dispatches, all deterministic (no atomics):
 *   train_ce_count.wgsl  one workgroup: n_valid, out-of-range labels (count, first row);
 *   train_ce_rows.wgsl   one workgroup per row: online (max, sum), per-row loss, dlogits;
 *   train_ce_sum.wgsl    one workgroup: the per-row losses summed in a fixed order / n_valid. */
#include "graph/graph.h"
#include "train/train_ce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Threads of the workgroup that owns one row: at least ~8 loads per thread, 32..256. */
static uint32_t ce_workgroup(uint64_t loads) {
    uint32_t wg = 32;
    while (wg < 256 && (uint64_t)wg * 8 <= loads) wg *= 2;
    return wg;
}

static void ce_prelude(char *buf, size_t n, uint32_t wg, int vw, bool has_d, bool has_scale) {
    const char *hd = has_d ? "true" : "false", *hs = has_scale ? "true" : "false";
    if (vw == 4)
        snprintf(buf, n,
                 "const WG: u32 = %uu; const VW: u32 = 4u; alias V = vec4<f32>;\n"
                 "const HAS_D: bool = %s; const HAS_SCALE: bool = %s;\n"
                 "fn comp(v: V, c: u32) -> f32 { return v[c]; }\n"
                 "fn hsum(v: V) -> f32 { return dot(v, V(1.0)); }\n"
                 "fn hmax(v: V) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }\n"
                 "fn onehot(j: u32, k: u32) -> V {\n"
                 "  return select(V(0.0), V(1.0), vec4<u32>(j * 4u) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(k));\n"
                 "}\n",
                 wg, hd, hs);
    else
        snprintf(buf, n,
                 "const WG: u32 = %uu; const VW: u32 = 1u; alias V = f32;\n"
                 "const HAS_D: bool = %s; const HAS_SCALE: bool = %s;\n"
                 "fn comp(v: V, c: u32) -> f32 { return v; }\n"
                 "fn hsum(v: V) -> f32 { return v; }\n"
                 "fn hmax(v: V) -> f32 { return v; }\n"
                 "fn onehot(j: u32, k: u32) -> V { return select(0.0, 1.0, j == k); }\n",
                 wg, hd, hs);
}

bool train_ce_check_options(wgml_ctx *ctx, const char *op, wgml_tensor *like, wgml_tensor *scale, wgml_tensor *status) {
    if (scale) {
        if (check_tensor(ctx, op, "grad_scale", scale) || check_dtype(ctx, op, "grad_scale", scale, WGML_F32) ||
            check_same_graph(ctx, op, like, scale))
            return false;
        if (scale->numel != 1) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: grad_scale %s must hold one element", op, tshape(scale));
            return false;
        }
    }
    if (status) {
        if (check_tensor(ctx, op, "status", status) || check_dtype(ctx, op, "status", status, WGML_I32) ||
            check_same_graph(ctx, op, like, status))
            return false;
        if (status->numel != 3) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: status %s must be i32 [3]", op, tshape(status));
            return false;
        }
    }
    return true;
}

bool train_ce_check_labels(wgml_ctx *ctx, const char *op, wgml_tensor *labels, int64_t vocab) {
    int32_t *h = malloc((size_t)labels->nbytes ? (size_t)labels->nbytes : 1);
    if (!h) {
        wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", op);
        return false;
    }
    if (wgml_tensor_read(labels, h, (size_t)labels->nbytes)) {
        free(h);
        return false;
    }
    for (int64_t i = 0; i < labels->numel; i++)
        if (h[i] >= vocab) {
            wgml_set_error(ctx, WGML_ERR_ARG,
                           "%s: labels[%lld] (row %lld of logits) is %d, out of range for vocab %lld (ignored rows "
                           "use a negative label such as -100)",
                           op, (long long)i, (long long)i, (int)h[i], (long long)vocab);
            free(h);
            return false;
        }
    free(h);
    return true;
}

wgml_tensor *wgml_cross_entropy_ex(wgml_graph *g, wgml_tensor *logits, wgml_tensor *labels,
                                   const wgml_ce_options *opt, wgml_tensor **dlogits_out) {
    if (dlogits_out) *dlogits_out = NULL;
    if (!g) return NULL;
    const char *op = "cross_entropy";
    wgml_ctx *ctx = graph_ctx(g);
    wgml_tensor *scale = opt ? opt->grad_scale : NULL, *status = opt ? opt->status : NULL;
    if (check_tensor(ctx, op, "logits", logits) || check_dtype(ctx, op, "logits", logits, WGML_F32) ||
        check_rank(ctx, op, "logits", logits, 1, WGML_MAX_RANK) || check_tensor(ctx, op, "labels", labels) ||
        check_dtype(ctx, op, "labels", labels, WGML_I32) || check_same_graph(ctx, op, logits, labels))
        return NULL;
    if (logits->graph != g) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: logits belong to another graph", op);
        return NULL;
    }
    int64_t vocab = logits->shape[logits->rank - 1], rows = logits->numel / vocab;
    bool same = labels->rank == logits->rank - 1 || (logits->rank == 1 && labels->rank == 1 && labels->numel == 1);
    for (int i = 0; same && i < logits->rank - 1; i++) same = labels->shape[i] == logits->shape[i];
    if (!same) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: labels %s must be logits %s without its last dim", op, tshape(labels),
                       tshape(logits));
        return NULL;
    }
    if ((uint64_t)logits->numel >= 0xFFFFFFFFull || vocab >= 0x7FFFFFFF) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: logits %s have too many elements for 32-bit indexing", op,
                       tshape(logits));
        return NULL;
    }
    if (!train_ce_check_options(ctx, op, logits, scale, status)) return NULL;
    if (graph_is_eager(g) && !train_ce_check_labels(ctx, op, labels, vocab)) return NULL;

    int64_t one = 1, four = 4;
    wgml_tensor *stats = status ? status : graph_output(g, op, WGML_I32, 1, (int64_t[]){3});
    wgml_tensor *row_loss = stats ? graph_output(g, op, WGML_F32, 1, &rows) : NULL;
    wgml_tensor *loss = row_loss ? graph_output(g, op, WGML_F32, 1, &one) : NULL;
    /* without dlogits the kernel still needs a writable binding: a 4-element placeholder */
    wgml_tensor *dx = loss ? (dlogits_out ? graph_output(g, op, WGML_F32, logits->rank, logits->shape)
                                          : graph_output(g, op, WGML_F32, 1, &four))
                           : NULL;
    wgml_status s = dx ? WGML_OK : wgml_last_status(ctx);
    if (!s) {
        struct { uint32_t n_rows, vocab; } pc = {(uint32_t)rows, (uint32_t)vocab};
        s = graph_dispatch(g, op, "train_ce_count", NULL, &labels, 1, &stats, 1, &pc, sizeof pc, 1);
    }
    if (!s) {
        int vw = vocab % 4 == 0 ? 4 : 1;
        char prelude[1024];
        ce_prelude(prelude, sizeof prelude, ce_workgroup((uint64_t)vocab / (uint64_t)vw), vw, dlogits_out != NULL,
                   scale != NULL);
        struct { uint32_t n_rows, vocab; float ninf; } pr = {(uint32_t)rows, (uint32_t)vocab, -INFINITY};
        wgml_tensor *ro[4] = {logits, labels, stats, scale ? scale : stats}, *rw[2] = {row_loss, dx};
        s = graph_dispatch(g, op, "train_ce_rows", prelude, ro, 4, rw, 2, &pr, sizeof pr, (uint64_t)rows);
    }
    if (!s) {
        uint32_t ps = (uint32_t)rows;
        wgml_tensor *ro[2] = {row_loss, stats};
        s = graph_dispatch(g, op, "train_ce_sum", NULL, ro, 2, &loss, 1, &ps, sizeof ps, 1);
    }
    if (stats != status) wgml_tensor_free(stats);
    wgml_tensor_free(row_loss);
    if (s) {
        wgml_tensor_free(loss);
        wgml_tensor_free(dx);
        return NULL;
    }
    if (dlogits_out) *dlogits_out = dx;
    else wgml_tensor_free(dx);
    return loss;
}

wgml_tensor *wgml_cross_entropy(wgml_graph *g, wgml_tensor *logits, wgml_tensor *labels, wgml_tensor **dlogits_out) {
    return wgml_cross_entropy_ex(g, logits, labels, NULL, dlogits_out);
}
