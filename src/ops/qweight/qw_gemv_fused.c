/* The fused GEMV for inference graphs (qw_gemv_fused.h): its argument checks, the rules for
 * where each fusion fits (the chunks' merge, the norm prologue, the norm handed over) and the
 * entry point, which records through qw_gemv.c's plan, or the public ops where the fused kernel
 * does not apply. */
#include "ops/qweight/qw_gemv_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool shape_is(const wgml_tensor *t, int rank, const int64_t *shape) {
    return t->rank == rank && memcmp(t->shape, shape, sizeof(int64_t) * (size_t)rank) == 0;
}

/* The checks of qw_gemv_fused's merge prologue: x the partials [heads, chunks, dim + 2] (dim a
 * multiple of 4) of one row of K = heads * dim, and n weights of that K. */
static wgml_status merge_args(wgml_graph *g, wgml_ctx *ctx, const char *op, wgml_tensor *x,
                              const wgml_qweight *const *ws, int n, const qw_gemv_fuse *f) {
    if (n < 1 || n > WGML_QLINEAR_MULTI_MAX)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %d weights; 1 to %d can share x", op, n, WGML_QLINEAR_MULTI_MAX);
    if (!ws) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: weights is NULL", op);
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 3, 3)) return wgml_last_status(ctx);
    int64_t want[3] = {f->merge_heads, f->merge_chunks, f->merge_dim + 2};
    if (f->merge_heads <= 0 || f->merge_dim <= 0 || f->merge_dim % 4 || !shape_is(x, 3, want))
        return wgml_set_error(ctx, WGML_ERR_SHAPE,
                              "%s: x %s must be the chunks' partials [heads %lld, chunks %lld, dim %lld + 2] (dim a "
                              "multiple of 4)",
                              op, tshape(x), (long long)f->merge_heads, (long long)f->merge_chunks,
                              (long long)f->merge_dim);
    for (int i = 0; i < n; i++) {
        char arg[32];
        snprintf(arg, sizeof arg, "weights[%d]", i);
        if (!qw_weight_valid(ctx, op, arg, ws[i])) return wgml_last_status(ctx);
        if (ws[i]->codes->graph != g || ws[i]->k != f->merge_heads * f->merge_dim)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s [%lld, %lld] must be of x's graph with K = %lld", op, arg,
                                  (long long)ws[i]->n, (long long)ws[i]->k, (long long)(f->merge_heads * f->merge_dim));
    }
    return WGML_OK;
}

/* The checks of qw_gemv_fused's handoff: next_norm with a residual epilogue, f32 [N]; ssq
 * instead of a norm prologue (and of the merge), f32 [m, P]. */
static wgml_status handoff_args(wgml_graph *g, wgml_ctx *ctx, const char *op, wgml_tensor *x,
                                const wgml_qweight *const *ws, int n, int64_t m, const qw_gemv_fuse *f) {
    if (f->next_norm) {
        int64_t want[1] = {ws[0]->n};
        if (f->epi != QW_EPI_RESIDUAL || n != 1)
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: next_norm goes with a residual epilogue over one weight", op);
        if (check_operand(ctx, g, op, "next_norm", f->next_norm, WGML_F32, 1, 1)) return wgml_last_status(ctx);
        if (!shape_is(f->next_norm, 1, want))
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: next_norm %s must be [N = %lld]", op, tshape(f->next_norm),
                                  (long long)ws[0]->n);
    }
    if (f->ssq) {
        if (f->norm_w || fuse_merge(f))
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: ssq is a prologue of its own: no norm_w, no merge", op);
        if (check_operand(ctx, g, op, "ssq", f->ssq, WGML_F32, 2, 2)) return wgml_last_status(ctx);
        if (f->ssq->shape[0] != m || f->ssq->shape[1] < 1 || f->ssq->shape[1] > UINT32_MAX / 8)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: ssq %s must be [rows of x %lld, P] (x %s)", op,
                                  tshape(f->ssq), (long long)m, tshape(x));
    }
    return WGML_OK;
}

/* The merge prologue's reads: every workgroup merges all of attention's chunk partials for
 * itself, so they grow with the workgroups times the chunks (the context). The budget lies
 * between the measured cases on the H200 (bench/NOTES.md, 2026-12-03): Gemma-3-270M's o
 * projection at 769 positions of context reads 8.6 MB so, and the merge made its decode 2%
 * faster (SmolLM2's, 4.4 MB, also 2%); Llama-3.2-1B's at 641 positions read 48 MB, and decoding
 * without the merge was 18% faster (Llama-3.1-8B's at 4,113 positions: 550 MB, 4.8x faster). */
#define MERGE_READ_BUDGET (16u << 20)

bool qw_gemv_merge_fits(wgml_ctx *ctx, const wgml_qweight *w, const qw_gemv_fuse *f) {
    gemv_cfg c;
    const char *e = getenv("WGML_QW_GEMV_MERGE"); /* 0: off, for A/B runs */
    if (e && !strcmp(e, "0")) return false;
    if (!(ctx && w && fuse_merge(f) && !f->norm_w && !fuse_pair(f) && f->merge_dim % 4 == 0 &&
          w->k == f->merge_heads * f->merge_dim && gemv_config(ctx, &w, 1, 1, f, &c)))
        return false;
    int64_t rows = gemv_wg_rows(&c), wgs = (w->n + rows - 1) / rows;
    return (uint64_t)wgs * (uint64_t)merge_table_len(f) * (uint64_t)(f->merge_dim + 2) * 4u <= MERGE_READ_BUDGET;
}


/* The norm prologue's reads: every workgroup reads x and the norm weight (K floats each) and
 * RMSNorms x for itself before its products, so they grow with the workgroups, which grow with
 * N (4 to 16 output rows a workgroup). On a small model the dispatch it saves costs more than
 * those reads; on a large one the reads, and the barriers before the first weight load, cost
 * more. The budget lies between the measured cases (H200, bench/NOTES.md, 2026-12-03, decode
 * at 512 positions with the prologue on / off): SmolLM2-135M's shapes stage 1.1 MB (q/k/v) and
 * 1.8 MB (gate/up), and the prologue made decode 15% faster (913 / 796 tokens/s); Llama-3.2-1B's
 * 16.8 MB each, 11% slower (729 / 810); Llama-3.1-8B's 50 and 59 MB, 38% slower (143 / 230).
 * $WGML_QW_GEMV_NORM_BUDGET (bytes) overrides it for A/B runs. */
#define NORM_READ_BUDGET (8u << 20)

/* x's reads of weight w's workgroups under config c */
static uint64_t norm_reads(const wgml_qweight *w, const gemv_cfg *c) {
    int64_t rows = gemv_wg_rows(c), wgs = (w->n + rows - 1) / rows;
    return (uint64_t)wgs * (uint64_t)w->kp * 8u;
}

bool qw_gemv_norm_fits(wgml_ctx *ctx, const wgml_qweight *const *ws, int n, const qw_gemv_fuse *f) {
    if (!(ctx && ws && n >= 1 && f && f->norm_w)) return false;
    uint64_t budget = (uint64_t)gemv_env_long("WGML_QW_GEMV_NORM_BUDGET", 0, LONG_MAX, NORM_READ_BUDGET), bytes = 0;
    /* the dispatches qw_gemv_fused records: a gated pair's one, whose workgroups hold a gate row
     * and its up row (count the gate's), else gemv_plan_make's groups, each with its config */
    if (fuse_pair(f)) {
        gemv_cfg c;
        if (n != 2 || !gemv_config(ctx, ws, 2, 1, f, &c)) return false;
        bytes = norm_reads(ws[0], &c);
    } else {
        gemv_plan p;
        if (gemv_plan_make(ctx, ws, n, 1, f, &p) != PLAN_OK) return false;
        for (int k = 0; k < p.n_grp; k++)
            for (int j = 0; j < p.ng[k]; j++) bytes += norm_reads(ws[p.idx[k][j]], &p.c[k]);
    }
    return bytes <= budget;
}

/* Whether the decode graphs hand the norms over where they can (qw_gemv_handoff_fits): no. It
 * takes two dispatches a layer out of a 1B's or 8B's decode step (the add + RMSNorms, 2.2 us
 * each in the 1B's pipelined step) for a longer epilogue in o and down and the partial sums'
 * loads in q/k/v and gate/up, and it decoded the 1B 20% slower on the H100 (623 against 785
 * tokens/s, docs/PERFORMANCE.md, 2026-12-07), when those loads were one an iteration; so it
 * stays behind $WGML_QW_GEMV_HANDOFF=1 until a run with the loads issued together decides. */
#define HANDOFF_DEFAULT false

bool qw_gemv_handoff_fits(wgml_ctx *ctx, const wgml_qweight *const *ws, int n, const qw_gemv_fuse *f) {
    if (!gemv_env_long("WGML_QW_GEMV_HANDOFF", 0, 1, HANDOFF_DEFAULT) ||
        !(ctx && ws && n >= 1 && f && (f->next_norm || f->ssq)) || f->norm_w)
        return false;
    if (fuse_pair(f)) {
        gemv_cfg c;
        return n == 2 && pair_fits(ctx, ws, 1, f, &c);
    }
    gemv_plan p;
    return (!f->next_norm || (n == 1 && f->epi == QW_EPI_RESIDUAL)) && gemv_plan_make(ctx, ws, n, 1, f, &p) == PLAN_OK;
}

/* The same result from the public ops, where the fused kernel does not apply. */
static wgml_status gemv_fused_plain(wgml_graph *g, wgml_tensor *x, const wgml_qweight *const *ws, int n,
                                    const qw_gemv_fuse *f, wgml_tensor **outs) {
    wgml_ctx *ctx = graph_ctx(g);
    wgml_tensor *h = f->norm_w ? wgml_rms_norm(g, x, f->norm_w, f->eps) : x, *y[WGML_QLINEAR_MULTI_MAX];
    if (!h) return wgml_last_status(ctx);
    wgml_status s = wgml_qlinear_multi(g, h, ws, n, y);
    if (s) return s;
    switch (f->epi) {
    case QW_EPI_RESIDUAL: outs[0] = wgml_add(g, f->residual, y[0], 1.0f); break;
    case QW_EPI_SWIGLU: outs[0] = wgml_mul(g, wgml_silu(g, y[0]), y[1]); break;
    case QW_EPI_GEGLU: outs[0] = wgml_mul(g, wgml_gelu(g, y[0], 1), y[1]); break;
    default:
        for (int i = 0; i < n; i++) outs[i] = y[i];
        return WGML_OK;
    }
    return outs[0] ? WGML_OK : wgml_last_status(ctx);
}

wgml_status qw_gemv_fused(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int n,
                          const qw_gemv_fuse *f, wgml_tensor **outs) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: graph is NULL", op);
    wgml_ctx *ctx = graph_ctx(g);
    if (!outs || !f) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s is NULL", op, outs ? "the fusion" : "outs");
    bool pair = fuse_pair(f), merge = fuse_merge(f), hand = fuse_ssq_out(f) || fuse_ssq_in(f);
    int n_out = fuse_ssq_out(f) ? 3 : pair || f->epi == QW_EPI_RESIDUAL ? 1 : n; /* the entries of outs */
    for (int i = 0; i < n_out && i < WGML_QLINEAR_MULTI_MAX; i++) outs[i] = NULL;
    if (merge ? merge_args(g, ctx, op, x, ws, n, f) : gemv_multi_args(g, ctx, op, x, ws, n)) return wgml_last_status(ctx);
    /* x's logical shape: [1, K] when it is attention's chunks to merge */
    int64_t lshape[WGML_MAX_RANK] = {1, merge ? f->merge_heads * f->merge_dim : 0};
    int lrank = merge ? 2 : x->rank;
    if (!merge) memcpy(lshape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    int64_t k = lshape[lrank - 1], m = merge ? 1 : x->numel / k;
    if ((int)f->epi < QW_EPI_STORE || f->epi > QW_EPI_GEGLU)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: unknown epilogue %d", op, (int)f->epi);
    if (merge && (f->norm_w || pair))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: the chunks' merge is a prologue of its own: no norm, no gated pair",
                              op);
    if (f->norm_w) {
        int64_t want[1] = {k};
        if (check_operand(ctx, g, op, "norm_w", f->norm_w, WGML_F32, 1, 1)) return wgml_last_status(ctx);
        if (!shape_is(f->norm_w, 1, want))
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: norm_w %s must be [%lld] for x %s", op, tshape(f->norm_w),
                                  (long long)k, tshape(x));
    }
    if (hand && handoff_args(g, ctx, op, x, ws, n, m, f)) return wgml_last_status(ctx);
    if (pair && (n != 2 || ws[0]->n != ws[1]->n))
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: a gated epilogue takes two weights of one N (gate, up); got %d%s",
                              op, n, n == 2 ? " of different N" : "");
    if (f->epi == QW_EPI_RESIDUAL) {
        if (n != 1) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: a residual epilogue takes one weight, got %d", op, n);
        int64_t want[WGML_MAX_RANK];
        memcpy(want, lshape, sizeof(int64_t) * (size_t)lrank);
        want[lrank - 1] = ws[0]->n;
        if (check_operand(ctx, g, op, "residual", f->residual, WGML_F32, lrank, lrank)) return wgml_last_status(ctx);
        if (!shape_is(f->residual, lrank, want))
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: residual %s must have the output's shape (x %s, N = %lld)", op,
                                  tshape(f->residual), tshape(x), (long long)ws[0]->n);
    }
    wgml_tensor *in[3] = {x, f->norm_w, f->residual};
    /* fused where the kernel fits the workgroup memory in the dispatches it records: the pair's
     * one, else gemv_plan_make's groups */
    bool fused = m <= qw_gemv_max_m(ctx) && !graph_grad_enabled(g, in, 3);
    gemv_cfg pc;
    gemv_plan plan;
    plan_result r = PLAN_OK;
    if (fused && pair) fused = pair_fits(ctx, ws, m, f, &pc);
    else if (fused) fused = (r = gemv_plan_make(ctx, ws, n, m, f, &plan)) != PLAN_MEMORY;
    if (merge && !fused)
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: the chunks' merge (x %s) needs the fused GEMV: no gradient, workgroup memory for "
                              "K = %lld and the %lld x %lld weight table",
                              op, tshape(x), (long long)k, (long long)f->merge_heads, (long long)f->merge_chunks);
    if (hand && !(fused && r == PLAN_OK))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED,
                              "%s: the norm handed over (x %s) needs the fused GEMV: at most %d rows, no gradient, "
                              "one layout for a gated pair, the device's bindings and workgroup memory",
                              op, tshape(x), qw_gemv_max_m(ctx));
    if (pair && fused) return record_gemv_cfg(g, op, x, ws, 2, m, &pc, outs);
    if (fuse_ssq_out(f)) /* one weight, whose dispatch has three outputs */
        return record_gemv_cfg(g, op, x, ws, 1, m, &plan.c[0], outs);
    wgml_status s = fused ? gemv_plan_record(g, op, x, ws, m, &plan, r, outs) : gemv_fused_plain(g, x, ws, n, f, outs);
    if (s)
        for (int i = 0; i < n_out; i++) {
            wgml_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}
