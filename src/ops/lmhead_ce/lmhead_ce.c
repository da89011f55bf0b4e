/* Fused LM head + cross-entropy: loss = CE(h · Wᵀ, labels) and d_h without the [R, V] logits.
 * The vocabulary is cut into chunks of C columns; one [R, C] scratch holds one chunk's logits
 * at a time. Per chunk:
 *   scratch = h · W[c0 : c0 + C]ᵀ   (matmul / qw_mm through their record functions; the chunk
 *                                    of W is a view of its rows)
 *   loss only: lmhead_ce_fwd merges the chunk's online (max, sum-exp) and the target logit into
 *              a per-row state; the last chunk writes logsumexp and the row losses.
 *   with d_h:  lmhead_ce_grad does the same, turns the scratch into P = exp(z − m') with the
 *              running max m', rescales the accumulator A[R, D] by exp(m − m') (as flash
 *              attention rescales its output), then A += P · W_chunk (the input-gradient GEMM
 *              with accumulation). One pass: two GEMMs for forward + backward, as unfused.
 * Then ce_sum (the label statistics: n_valid, out-of-range labels; and the fixed-order
 * sum of the row losses / n_valid), the last kernel of wgml_cross_entropy, and for d_h
 * lmhead_ce_dh:
 *   d_h = (A / l − W[label]) · scale / n_valid   (0 for ignored rows).
 * W is frozen: no weight gradient is formed. d_h is finished in the call when the caller asks
 * for it, else by the op's autograd rule in wgml_backward (scale = d(loss)); the chunk loop
 * that accumulates A runs in the forward either way. */
#include "graph/graph.h"
#include "ops/matmul/matmul_into.h"
#include "ops/qweight/qw_internal.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/reduce/wg_reduce.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LMCE_DEFAULT_CHUNK 8192

/* The head weight [V, D]: f32 or quantised. */
typedef struct lm_weight {
    wgml_tensor *f;
    wgml_qweight q;
    bool is_q;
} lm_weight;

typedef struct lm_attrs {
    lm_weight w;
} lm_attrs;
_Static_assert(sizeof(lm_attrs) <= GRAPH_OP_ATTR_BYTES, "lmhead_ce attributes must fit the op record");

static int64_t w_rows(const lm_weight *w) { return w->is_q ? w->q.n : w->f->shape[0]; }
static int64_t w_cols(const lm_weight *w) { return w->is_q ? w->q.k : w->f->shape[1]; }

/* Rows [c0, c0 + n) of the weight as views (the whole weight when that is all of it). The
 * views are tensors of g: free them with chunk_free. */
static bool chunk_take(const lm_weight *w, int64_t c0, int64_t n, lm_weight *out) {
    *out = *w;
    if (c0 == 0 && n == w_rows(w)) return true;
    if (!w->is_q) {
        int64_t s[2] = {n, w->f->shape[1]};
        out->f = wgml_tensor_view(w->f, c0 * s[1], 2, s);
        return out->f != NULL;
    }
    const wgml_qweight *q = &w->q;
    int64_t wpr = wgml_tensor_numel(q->codes) / q->n, abr = wgml_tensor_numel(q->ab) / q->n;
    int64_t cs[2] = {n, wpr}, as[WGML_MAX_RANK];
    for (int i = 0; i < q->ab->rank; i++) as[i] = q->ab->shape[i]; /* [N, ...] in any ab form */
    as[0] = n;
    out->q.n = n;
    out->q.codes = wgml_tensor_view(q->codes, c0 * wpr, 2, cs);
    out->q.ab = out->q.codes ? wgml_tensor_view(q->ab, c0 * abr, q->ab->rank, as) : NULL;
    out->q.bias = q->bias && out->q.ab ? wgml_tensor_view(q->bias, c0, 1, &n) : NULL;
    if (!out->q.codes || !out->q.ab || (q->bias && !out->q.bias)) {
        wgml_tensor_free(out->q.codes);
        wgml_tensor_free(out->q.ab);
        return false;
    }
    return true;
}

static void chunk_free(const lm_weight *w, lm_weight *c) {
    if (!w->is_q) {
        if (c->f != w->f) wgml_tensor_free(c->f);
    } else if (c->q.codes != w->q.codes) {
        wgml_tensor_free(c->q.codes);
        wgml_tensor_free(c->q.ab);
        wgml_tensor_free(c->q.bias);
    }
}

/* The row kernels' prelude: the workgroup size and the chunk's read width vw (4: vec4). */
static void vec_prelude(char *buf, size_t cap, uint32_t wg, int vw) {
    if (vw == 4)
        snprintf(buf, cap,
                 "const WG: u32 = %uu; const VW: u32 = 4u; alias V = vec4<f32>;\n"
                 "fn comp(v: V, c: u32) -> f32 { return v[c]; }\n"
                 "fn hsum(v: V) -> f32 { return dot(v, V(1.0)); }\n"
                 "fn hmax(v: V) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }\n"
                 "fn onehot(j: u32, k: u32) -> V {\n"
                 "  return select(V(0.0), V(1.0), vec4<u32>(j * 4u) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(k));\n"
                 "}\n",
                 wg);
    else
        snprintf(buf, cap,
                 "const WG: u32 = %uu; const VW: u32 = 1u; alias V = f32;\n"
                 "fn comp(v: V, c: u32) -> f32 { return v; }\n"
                 "fn hsum(v: V) -> f32 { return v; }\n"
                 "fn hmax(v: V) -> f32 { return v; }\n"
                 "fn onehot(j: u32, k: u32) -> V { return select(0.0, 1.0, j == k); }\n",
                 wg);
}

/* scratch[R, n] = h · W_chunkᵀ for the chunk [c0, c0 + n). */
static wgml_status chunk_logits(wgml_graph *g, const char *op, wgml_tensor *h, const lm_weight *cw, int64_t rows,
                                wgml_tensor *scratch) {
    if (cw->is_q) return qw_mm_into(g, op, h, &cw->q, 0, rows, scratch, false);
    return matmul_record_into(g, op, h, cw->f, 1, rows, scratch->shape[1], cw->f->shape[1], scratch, false);
}

/* A [rows, n] window at the start of the scratch (the scratch itself when n is its width). */
static wgml_tensor *scratch_window(wgml_tensor *scratch, int64_t rows, int64_t n) {
    if (n == scratch->shape[1]) return scratch;
    int64_t s[2] = {rows, n};
    return wgml_tensor_view(scratch, 0, 2, s);
}

/* The chunk loop: scratch = h · W_chunkᵀ, then per row the online statistics (lmhead_ce_fwd);
 * with acc (d_h wanted) lmhead_ce_grad also turns the scratch into P = exp(z − m') and rescales
 * acc, and acc (+)= P · W_chunk. */
static wgml_status chunk_loop(wgml_graph *g, const char *op, wgml_tensor *h, const lm_weight *w, wgml_tensor *labels,
                              int64_t chunk, wgml_tensor *state, wgml_tensor *row_loss, wgml_tensor *acc) {
    wgml_ctx *ctx = graph_ctx(g);
    int64_t V = w_rows(w), D = w_cols(w), rows = h->numel / D, cc = chunk < V ? chunk : V, ss[2] = {rows, cc};
    wgml_tensor *scratch = graph_output(g, op, WGML_F32, 2, ss);
    wgml_status s = scratch ? WGML_OK : wgml_last_status(ctx);
    for (int64_t c0 = 0; !s && c0 < V; c0 += cc) {
        int64_t n = V - c0 < cc ? V - c0 : cc;
        lm_weight cw;
        if (!chunk_take(w, c0, n, &cw)) {
            s = wgml_last_status(ctx);
            break;
        }
        wgml_tensor *x = scratch_window(scratch, rows, n);
        s = x ? chunk_logits(g, op, h, &cw, rows, x) : wgml_last_status(ctx);
        if (!s) {
            int vw = n % 4 == 0 ? 4 : 1;
            char prelude[1024];
            vec_prelude(prelude, sizeof prelude, row_workgroup((uint64_t)(n / vw)), vw);
            if (!acc) {
                struct { uint32_t n_rows, cols, c0, vocab; float ninf; } p = {(uint32_t)rows, (uint32_t)n,
                                                                            (uint32_t)c0, (uint32_t)V, -INFINITY};
                wgml_tensor *ro[2] = {x, labels}, *rw[2] = {state, row_loss};
                s = graph_dispatch(g, op, "lmhead_ce_fwd", prelude, ro, 2, rw, 2, &p, sizeof p, (uint64_t)rows);
            } else {
                struct { uint32_t n_rows, cols, c0, vocab, d; float ninf; } p = {
                    (uint32_t)rows, (uint32_t)n, (uint32_t)c0, (uint32_t)V, (uint32_t)D, -INFINITY};
                wgml_tensor *rw[4] = {state, row_loss, x, acc};
                s = graph_dispatch(g, op, "lmhead_ce_grad", prelude, &labels, 1, rw, 4, &p, sizeof p, (uint64_t)rows);
                /* acc (+)= P[R, n] · W_chunk[n, D] */
                if (!s && cw.is_q) s = qw_mm_into(g, op, x, &cw.q, 1, rows, acc, c0 > 0);
                else if (!s) s = matmul_record_into(g, op, x, cw.f, 0, rows, D, n, acc, c0 > 0);
            }
        }
        if (x && x != scratch) wgml_tensor_free(x);
        chunk_free(w, &cw);
    }
    wgml_tensor_free(scratch);
    return s;
}

/* d_h = (acc / l − W[label]) · sa[0] · sb[0] / n_valid, in place in acc (either scale may be
 * NULL: 1). Returns acc, or NULL. */
static wgml_tensor *finish_dh(wgml_graph *g, const char *op, const lm_weight *w, wgml_tensor *labels,
                              wgml_tensor *stats, wgml_tensor *state, wgml_tensor *acc, wgml_tensor *sa,
                              wgml_tensor *sb) {
    int64_t V = w_rows(w), D = w_cols(w);
    wgml_tensor *wl = w->is_q ? wgml_qembedding(g, &w->q, labels) : w->f;
    if (!wl) return NULL;
    char prelude[160];
    snprintf(prelude, sizeof prelude, "const HAS_SA: bool = %s; const HAS_SB: bool = %s; const GATHER: bool = %s;\n",
             sa ? "true" : "false", sb ? "true" : "false", w->is_q ? "false" : "true");
    struct { uint32_t n, d, vocab; } p = {(uint32_t)acc->numel, (uint32_t)D, (uint32_t)V};
    wgml_tensor *ro[6] = {labels, stats, state, wl, sa ? sa : GRAPH_UNUSED, sb ? sb : GRAPH_UNUSED};
    wgml_status s = graph_dispatch(g, op, "lmhead_ce_dh", prelude, ro, 6, &acc, 1, &p, sizeof p,
                                   ((uint64_t)acc->numel + 255) / 256);
    if (w->is_q) wgml_tensor_free(wl);
    return s ? NULL : acc;
}

static wgml_status lmhead_ce_rule(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    lm_attrs a;
    memcpy(&a, op->attrs, sizeof a);
    dx[0] = finish_dh(g, "lmhead_ce_backward", &a.w, op->in[1], op->in[2], op->in[3], op->in[4], dy, op->in[5]);
    return grad_result(g, op, dx);
}

/* The operands' checks, in the order the errors are reported. Returns the vocabulary chunk the
 * loop uses (chunk, 0 meaning LMCE_DEFAULT_CHUNK, capped at V), or -1 with the error set. */
static int64_t lmhead_ce_check(wgml_ctx *ctx, wgml_graph *g, const char *op, wgml_tensor *h, const lm_weight *w,
                               wgml_tensor *labels, int64_t chunk, wgml_tensor *scale, wgml_tensor *status) {
    if (check_tensor(ctx, op, "h", h) || check_dtype(ctx, op, "h", h, WGML_F32) ||
        check_rank(ctx, op, "h", h, 1, WGML_MAX_RANK) || check_tensor(ctx, op, "labels", labels) ||
        check_dtype(ctx, op, "labels", labels, WGML_I32) || check_same_graph(ctx, op, h, labels))
        return -1;
    if (check_graph(ctx, g, op, "h", h)) return -1;
    wgml_tensor *wt = w->is_q ? w->q.codes : w->f;
    if (check_graph(ctx, g, op, "w", wt)) return -1;
    if (!w->is_q && w->f->requires_grad) {
        wgml_set_error(ctx, WGML_ERR_UNSUPPORTED, "%s: w %s requires a gradient; the fused op treats the head as frozen",
                       op, tshape(w->f));
        return -1;
    }
    int64_t V = w_rows(w), D = w_cols(w);
    if (h->shape[h->rank - 1] != D) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: h %s must end in D = %lld for the weight [%lld, %lld]", op, tshape(h),
                       (long long)D, (long long)V, (long long)D);
        return -1;
    }
    int64_t rows = h->numel / D;
    bool same = labels->rank == h->rank - 1 || (h->rank == 1 && labels->rank == 1 && labels->numel == 1);
    for (int i = 0; same && i < h->rank - 1; i++) same = labels->shape[i] == h->shape[i];
    if (!same) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: labels %s must be h %s without its last dim", op, tshape(labels),
                       tshape(h));
        return -1;
    }
    if (chunk == 0) chunk = LMCE_DEFAULT_CHUNK;
    if (chunk < 0 || chunk % 64) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: chunk %lld must be a positive multiple of 64 (0: %d)", op,
                       (long long)chunk, LMCE_DEFAULT_CHUNK);
        return -1;
    }
    int64_t cc = chunk < V ? chunk : V;
    if ((uint64_t)rows * (uint64_t)cc >= 0xFFFFFFFFull || V >= 0x7FFFFFFF || (uint64_t)h->numel >= 0xFFFFFFFFull ||
        (uint64_t)V * (uint64_t)D >= 0xFFFFFFFFull) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %lld rows x chunk %lld are too many elements for 32-bit indexing", op,
                       (long long)rows, (long long)cc);
        return -1;
    }
    if (!train_ce_check_options(ctx, op, h, scale, status)) return -1;
    if (graph_is_eager(g) && !train_ce_check_labels(ctx, op, labels, V)) return -1;
    return cc;
}

/* Records the autograd rule on loss; it keeps labels, stats, state and acc (no gradient of
 * their own) and finishes d_h from acc with d(loss) as the scale. */
static wgml_status lmhead_ce_record_rule(wgml_graph *g, wgml_tensor *h, const lm_weight *w, wgml_tensor *labels,
                                         wgml_tensor *stats, wgml_tensor *state, wgml_tensor *acc, wgml_tensor *scale,
                                         wgml_tensor *loss) {
    graph_op rec = {.name = "lmhead_ce",
                    .backward = lmhead_ce_rule,
                    .n_in = 6,
                    .in = {h, labels, stats, state, acc, scale},
                    .out = loss};
    lm_attrs a = {*w};
    memcpy(rec.attrs, &a, sizeof a);
    return graph_record_op(g, &rec) ? WGML_OK : wgml_last_status(graph_ctx(g));
}

static wgml_tensor *lmhead_ce_impl(wgml_graph *g, const char *op, wgml_tensor *h, const lm_weight *w,
                                   wgml_tensor *labels, int64_t chunk, const wgml_ce_options *opt,
                                   wgml_tensor **d_h_out) {
    wgml_ctx *ctx = graph_ctx(g);
    wgml_tensor *scale = opt ? opt->grad_scale : NULL, *status = opt ? opt->status : NULL;
    int64_t cc = lmhead_ce_check(ctx, g, op, h, w, labels, chunk, scale, status);
    if (cc < 0) return NULL;
    int64_t V = w_rows(w), rows = h->numel / w_cols(w);

    /* d_h is formed in the chunk loop when the caller asks for it or autograd may (the rule then
     * only finishes it with d(loss) as the scale) */
    bool want = d_h_out || graph_grad_enabled(g, &h, 1);
    int64_t one = 1, s4[2] = {rows, 4};
    wgml_tensor *stats = status ? status : graph_output(g, op, WGML_I32, 1, (int64_t[]){3});
    wgml_tensor *state = stats ? graph_output(g, op, WGML_F32, 2, s4) : NULL;
    wgml_tensor *row_loss = state ? graph_output(g, op, WGML_F32, 1, &rows) : NULL;
    wgml_tensor *loss = row_loss ? graph_output(g, op, WGML_F32, 1, &one) : NULL;
    wgml_tensor *acc = loss && want ? graph_output(g, op, WGML_F32, h->rank, h->shape) : NULL;
    wgml_status s = loss && (acc || !want) ? WGML_OK : wgml_last_status(ctx);
    if (!s) s = chunk_loop(g, op, h, w, labels, cc, state, row_loss, acc);
    if (!s) s = train_ce_finish(g, op, row_loss, labels, V, stats, loss);
    wgml_tensor_free(row_loss);
    wgml_tensor *dh = NULL;
    if (!s && d_h_out) {
        dh = finish_dh(g, op, w, labels, stats, state, acc, scale, NULL);
        if (!dh) s = wgml_last_status(ctx);
        else acc = NULL; /* now dh */
    }
    bool record = !s && !d_h_out && want;
    if (record) s = lmhead_ce_record_rule(g, h, w, labels, stats, state, acc, scale, loss);
    if (!record) {
        if (stats != status) wgml_tensor_free(stats);
        wgml_tensor_free(state);
        wgml_tensor_free(acc);
    }
    if (s) {
        wgml_tensor_free(loss);
        wgml_tensor_free(dh);
        return NULL;
    }
    if (d_h_out) *d_h_out = dh;
    return loss;
}

wgml_tensor *wgml_lmhead_ce(wgml_graph *g, wgml_tensor *h, wgml_tensor *w, wgml_tensor *labels, int64_t chunk,
                            const wgml_ce_options *opt, wgml_tensor **d_h_out) {
    if (d_h_out) *d_h_out = NULL;
    if (!g) return NULL;
    const char *op = "lmhead_ce";
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "w", w) || check_dtype(ctx, op, "w", w, WGML_F32) || check_rank(ctx, op, "w", w, 2, 2))
        return NULL;
    lm_weight lw = {.f = w};
    return lmhead_ce_impl(g, op, h, &lw, labels, chunk, opt, d_h_out);
}

wgml_tensor *wgml_lmhead_ce_qweight(wgml_graph *g, wgml_tensor *h, const wgml_qweight *w, wgml_tensor *labels,
                                    int64_t chunk, const wgml_ce_options *opt, wgml_tensor **d_h_out) {
    if (d_h_out) *d_h_out = NULL;
    if (!g) return NULL;
    const char *op = "lmhead_ce_qweight";
    wgml_ctx *ctx = graph_ctx(g);
    if (!qw_weight_valid(ctx, op, "w", w)) return NULL;
    lm_weight lw = {.q = *w, .is_q = true};
    return lmhead_ce_impl(g, op, h, &lw, labels, chunk, opt, d_h_out);
}
