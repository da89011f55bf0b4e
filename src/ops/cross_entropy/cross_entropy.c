/* Fused cross-entropy: loss and dlogits of logits [..., V] against i32 labels [...] in one
 * pass over the logits. Two dispatches (three for many rows with dlogits), all deterministic
 * (no float atomics):
 *   ce_count.wgsl  only with dlogits and R > V / 4: one workgroup counts n_valid first;
 *   ce_rows.wgsl   one workgroup per row: online (max, sum), per-row loss, dlogits; with
 *                        dlogits and R <= V / 4 every workgroup counts n_valid itself (it reads
 *                        all R labels, at most a quarter of what it reads of its row);
 *   ce_sum.wgsl    one workgroup: the label statistics (status) and the per-row losses
 *                        summed in a fixed order / n_valid.
 * The sum stays a dispatch of its own: WGSL cannot make the rows of other workgroups visible to
 * a "last workgroup" (storageBarrier has workgroup memory scope and atomics are relaxed only).
 * $WGML_CE_COUNT=dispatch|inline|inline:N overrides the choice of where n_valid is counted, for
 * measuring (see ce_count_mode).
 * Autograd: when dlogits_out is NULL and logits require a gradient in a built graph, dlogits is
 * formed in the same pass and the op records a rule that gives logits dlogits · d(loss) (as the
 * fused LM head's rule finishes d_h). */
#include "graph/graph.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/reduce/wg_reduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the rows pass gets n_valid (dlogits only): 0: ce_count, a dispatch before it;
 * 1 / 4: every row workgroup counts the labels itself, read as i32 / vec4<i32>. Inline when
 * the R labels are at most a quarter of a row's V logits, so each workgroup's extra reads stay
 * small (they are the same words for every workgroup: cache hits) and the count grows no
 * worse than the rows pass itself; a count dispatch costs about as much as a tiny kernel.
 * $WGML_CE_COUNT (for measuring): "dispatch", "inline", or "inline:N" (inline, each workgroup
 * owning N rows one after the other, 1..64, so the labels are read once per N rows). *rpw
 * receives the rows per workgroup (1 unless asked). */
static int ce_count_mode(int64_t rows, int64_t vocab, uint32_t *rpw) {
    const char *e = getenv("WGML_CE_COUNT");
    bool inl = (uint64_t)rows * 4 <= (uint64_t)vocab;
    *rpw = 1;
    if (e && !strncmp(e, "inline", 6)) {
        inl = true;
        long n = e[6] == ':' ? strtol(e + 7, NULL, 10) : 1;
        *rpw = n >= 1 && n <= 64 ? (uint32_t)n : 1;
    } else if (e && !strcmp(e, "dispatch")) {
        inl = false;
    }
    return !inl ? 0 : rows % 4 == 0 ? 4 : 1;
}

static void ce_prelude(char *buf, size_t n, uint32_t wg, int vw, bool has_d, bool has_scale, int count,
                       uint32_t rpw) {
    const char *hd = has_d ? "true" : "false", *hs = has_scale ? "true" : "false";
    char cnt[600];
    if (count == 4)
        snprintf(cnt, sizeof cnt,
                 "const RPW: u32 = %uu; const COUNT: u32 = 4u; alias LV = vec4<i32>;\n"
                 "fn n_ok(v: LV, vocab: i32) -> u32 {\n"
                 "  let c = select(vec4<u32>(0u), vec4<u32>(1u), (v >= LV(0)) & (v < LV(vocab)));\n"
                 "  return c.x + c.y + c.z + c.w;\n"
                 "}\n"
                 "fn stat(v: LV) -> i32 { return v.x; }\n",
                 rpw);
    else
        snprintf(cnt, sizeof cnt,
                 "const RPW: u32 = %uu; const COUNT: u32 = %du; alias LV = i32;\n"
                 "fn n_ok(v: LV, vocab: i32) -> u32 { return select(0u, 1u, v >= 0 && v < vocab); }\n"
                 "fn stat(v: LV) -> i32 { return v; }\n",
                 rpw, count);
    if (vw == 4)
        snprintf(buf, n,
                 "const WG: u32 = %uu; const VW: u32 = 4u; alias V = vec4<f32>;\n"
                 "const HAS_D: bool = %s; const HAS_SCALE: bool = %s;\n%s"
                 "fn comp(v: V, c: u32) -> f32 { return v[c]; }\n"
                 "fn hsum(v: V) -> f32 { return dot(v, V(1.0)); }\n"
                 "fn hmax(v: V) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }\n"
                 "fn onehot(j: u32, k: u32) -> V {\n"
                 "  return select(V(0.0), V(1.0), vec4<u32>(j * 4u) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(k));\n"
                 "}\n",
                 wg, hd, hs, cnt);
    else
        snprintf(buf, n,
                 "const WG: u32 = %uu; const VW: u32 = 1u; alias V = f32;\n"
                 "const HAS_D: bool = %s; const HAS_SCALE: bool = %s;\n%s"
                 "fn comp(v: V, c: u32) -> f32 { return v; }\n"
                 "fn hsum(v: V) -> f32 { return v; }\n"
                 "fn hmax(v: V) -> f32 { return v; }\n"
                 "fn onehot(j: u32, k: u32) -> V { return select(0.0, 1.0, j == k); }\n",
                 wg, hd, hs, cnt);
}

wgml_status train_ce_finish(wgml_graph *g, const char *op, wgml_tensor *row_loss, wgml_tensor *labels, int64_t vocab,
                            wgml_tensor *stats, wgml_tensor *loss) {
    struct { uint32_t n_rows, vocab; } p = {(uint32_t)labels->numel, (uint32_t)vocab};
    wgml_tensor *ro[2] = {row_loss, labels}, *rw[2] = {stats, loss};
    return graph_dispatch(g, op, "ce_sum", NULL, ro, 2, rw, 2, &p, sizeof p, 1);
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

/* The rule: d(logits) = dlogits (in[1], formed in the forward pass) times d(loss). */
static wgml_status ce_rule(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    dx[0] = wgml_mul(g, op->in[1], dy);
    return grad_result(g, op, dx);
}

static wgml_tensor *ce_impl(wgml_graph *g, wgml_tensor *logits, wgml_tensor *labels, const wgml_ce_options *opt,
                            wgml_tensor **dlogits_out);

wgml_tensor *wgml_cross_entropy_ex(wgml_graph *g, wgml_tensor *logits, wgml_tensor *labels,
                                   const wgml_ce_options *opt, wgml_tensor **dlogits_out) {
    if (dlogits_out) *dlogits_out = NULL;
    if (!g || dlogits_out || !logits || !graph_grad_enabled(g, &logits, 1))
        return ce_impl(g, logits, labels, opt, dlogits_out);
    wgml_tensor *d = NULL, *loss = ce_impl(g, logits, labels, opt, &d);
    if (!loss) return NULL;
    graph_op rec = {.name = "cross_entropy", .backward = ce_rule, .n_in = 2, .in = {logits, d}, .out = loss};
    return graph_record_op(g, &rec);
}

static wgml_tensor *ce_impl(wgml_graph *g, wgml_tensor *logits, wgml_tensor *labels, const wgml_ce_options *opt,
                            wgml_tensor **dlogits_out) {
    if (dlogits_out) *dlogits_out = NULL;
    if (!g) return NULL;
    const char *op = "cross_entropy";
    wgml_ctx *ctx = graph_ctx(g);
    wgml_tensor *scale = opt ? opt->grad_scale : NULL, *status = opt ? opt->status : NULL;
    if (check_tensor(ctx, op, "logits", logits) || check_dtype(ctx, op, "logits", logits, WGML_F32) ||
        check_rank(ctx, op, "logits", logits, 1, WGML_MAX_RANK) || check_tensor(ctx, op, "labels", labels) ||
        check_dtype(ctx, op, "labels", labels, WGML_I32) || check_same_graph(ctx, op, logits, labels))
        return NULL;
    if (check_graph(ctx, g, op, "logits", logits)) return NULL;
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
    uint32_t rpw = 1;
    int count = dlogits_out ? ce_count_mode(rows, vocab, &rpw) : 0;
    if (!count) rpw = 1;
    if (!s && dlogits_out && !count) {
        struct { uint32_t n_rows, vocab; } pc = {(uint32_t)rows, (uint32_t)vocab};
        s = graph_dispatch(g, op, "ce_count", NULL, &labels, 1, &stats, 1, &pc, sizeof pc, 1);
    }
    if (!s) {
        int vw = vocab % 4 == 0 ? 4 : 1;
        char prelude[1024];
        ce_prelude(prelude, sizeof prelude, row_workgroup((uint64_t)vocab / (uint64_t)vw), vw, dlogits_out != NULL,
                   scale != NULL, count, rpw);
        struct { uint32_t n_rows, vocab; float ninf; uint32_t n_cnt; } pr = {
            (uint32_t)rows, (uint32_t)vocab, -INFINITY, (uint32_t)(count ? rows / count : 0)};
        /* binding 2: the labels again when the row workgroups count n_valid, else the statistics */
        wgml_tensor *ro[4] = {logits, labels, count ? labels : stats, scale ? scale : GRAPH_UNUSED}, *rw[2] = {row_loss, dx};
        s = graph_dispatch(g, op, "ce_rows", prelude, ro, 4, rw, 2, &pr, sizeof pr,
                           ((uint64_t)rows + rpw - 1) / rpw);
    }
    if (!s) s = train_ce_finish(g, op, row_loss, labels, vocab, stats, loss);
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
