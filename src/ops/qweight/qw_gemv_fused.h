/* Internal entry point (inference graphs only, no autograd record): the qweight GEMV with the ops
 * around it folded into its one dispatch. A decode step is a chain of small dependent
 * dispatches whose fixed cost dominates (docs/PERFORMANCE.md, decode), so the RMSNorm before
 * a projection and the residual add or gated activation after it go inside the GEMV
 * (qw_gemv.wgsl's prologue and epilogue) instead of costing a dispatch each. */
#ifndef WGML_QW_GEMV_FUSED_H
#define WGML_QW_GEMV_FUSED_H

#include "graph/graph.h"

typedef enum qw_epilogue {
    QW_EPI_STORE = 0,    /* outs[i] = h · W_iᵀ (+ bias_i) */
    QW_EPI_RESIDUAL = 1, /* one weight: outs[0] = residual + h · Wᵀ (+ bias) */
    QW_EPI_SWIGLU = 2,   /* two weights (gate, up) of one N: outs[0] = silu(h · W_0ᵀ) * (h · W_1ᵀ) */
    QW_EPI_GEGLU = 3,    /* the same with tanh-GELU */
} qw_epilogue;

typedef struct qw_gemv_fuse {
    wgml_tensor *norm_w; /* prologue: h = rms_norm(x) * norm_w over each row (f32 [K]); NULL: h = x */
    float eps;           /* the norm's epsilon */
    qw_epilogue epi;
    wgml_tensor *residual; /* QW_EPI_RESIDUAL: f32 of the output's shape */
    /* prologue instead of the norm (merge_chunks > 0): x is the partials of attention's key
     * chunks, f32 [merge_heads, merge_chunks, merge_dim + 2] (attn_decode_step_parts), merged
     * into the one row [1, K = merge_heads * merge_dim] the products take, as attn_combine.wgsl
     * merges them: the merge's dispatch goes. Only where the fused kernel applies (else
     * WGML_ERR_UNSUPPORTED: qw_gemv_merge_fits says beforehand); the outputs are [1, N]. */
    int64_t merge_heads, merge_chunks, merge_dim;
    /* The norm handed over, for the models whose projections are too large for the norm prologue
     * (qw_gemv_norm_fits) without the norm's own dispatch. Only where the fused kernel applies
     * (else WGML_ERR_UNSUPPORTED: qw_gemv_handoff_fits says beforehand).
     * next_norm (QW_EPI_RESIDUAL, f32 [N]): besides outs[0] = the sum s, outs[1] = s * next_norm
     * (row by row) and outs[2] = partial sums of s^2, f32 [rows of s, P] (P: one per workgroup;
     * their sum over P is the row's sum of squares).
     * ssq (instead of norm_w): x is such an outs[1] and ssq its outs[2]; each output is the
     * product with rms_norm(s) * next_norm, the norm's scale rsqrt(Σ ssq / K + eps) applied to
     * the sums (before the bias and the epilogue). */
    wgml_tensor *next_norm, *ssq;
} qw_gemv_fuse;

/* The products of x (f32 [..., K]) with the n (1..WGML_QLINEAR_MULTI_MAX) weights ws as f says, into
 * outs[0..n) for QW_EPI_STORE, else into outs[0] alone (outs may then hold one entry). Weights that one dispatch cannot take together
 * (different kinds or group sizes, the binding limit) go in several, each doing the prologue;
 * where the fused kernel does not apply (more than 4 rows of x, an input that needs a gradient,
 * x too long for workgroup memory, gate and up of different kinds) the same result is recorded
 * with the public ops (rms_norm, qlinear_multi, add, silu/gelu, mul). Errors name op. */
wgml_status qw_gemv_fused(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int n,
                          const qw_gemv_fuse *f, wgml_tensor **outs);

/* Whether qw_gemv_fused takes the merge prologue of f (merge_* set, no norm) for weight w (one
 * weight, or one of a group of its kind): its workgroup memory fits the device.
 * $WGML_QW_GEMV_MERGE=0 makes it say no (the merge's own dispatch, for A/B measurements). */
bool qw_gemv_merge_fits(wgml_ctx *ctx, const wgml_qweight *w, const qw_gemv_fuse *f);

/* Whether folding f's RMSNorm (norm_w set) into the GEMV over the n weights ws costs less than
 * the norm's own dispatch: every workgroup stages and norms x for itself, which the large
 * projections of a billion-parameter model pay more for than the dispatch saved.
 * $WGML_QW_GEMV_NORM_BUDGET (bytes of staged reads) sets the limit for A/B measurements. */
bool qw_gemv_norm_fits(wgml_ctx *ctx, const wgml_qweight *const *ws, int n, const qw_gemv_fuse *f);

/* Whether qw_gemv_fused takes f's handoff (next_norm or ssq set; ssq's shape is not read) for
 * the n weights ws at one row of x: the fused kernel's bindings and workgroup memory fit the
 * device. $WGML_QW_GEMV_HANDOFF=0 makes it say no (the norm's own dispatch), =1 yes where it
 * fits (A/B runs, tests). */
bool qw_gemv_handoff_fits(wgml_ctx *ctx, const wgml_qweight *const *ws, int n, const qw_gemv_fuse *f);

#endif
