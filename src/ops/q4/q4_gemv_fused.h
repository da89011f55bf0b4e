/* Internal entry point (inference graphs only, no autograd record): the q4 GEMV with the ops
 * around it folded into its one dispatch. A decode step is a chain of small dependent
 * dispatches whose fixed cost dominates (docs/PERFORMANCE.md, decode), so the RMSNorm before
 * a projection and the residual add or gated activation after it go inside the GEMV
 * (q4_gemv.wgsl's prologue and epilogue) instead of costing a dispatch each. */
#ifndef WGML_Q4_GEMV_FUSED_H
#define WGML_Q4_GEMV_FUSED_H

#include "graph/graph.h"

typedef enum q4_epilogue {
    Q4_EPI_STORE = 0,    /* outs[i] = h · W_iᵀ (+ bias_i) */
    Q4_EPI_RESIDUAL = 1, /* one weight: outs[0] = residual + h · Wᵀ (+ bias) */
    Q4_EPI_SWIGLU = 2,   /* two weights (gate, up) of one N: outs[0] = silu(h · W_0ᵀ) * (h · W_1ᵀ) */
    Q4_EPI_GEGLU = 3,    /* the same with tanh-GELU */
} q4_epilogue;

typedef struct q4_gemv_fuse {
    wgml_tensor *norm_w; /* prologue: h = rms_norm(x) * norm_w over each row (f32 [K]); NULL: h = x */
    float eps;           /* the norm's epsilon */
    q4_epilogue epi;
    wgml_tensor *residual; /* Q4_EPI_RESIDUAL: f32 of the output's shape */
} q4_gemv_fuse;

/* The products of x (f32 [..., K]) with the n (1..WGML_Q4_MULTI_MAX) weights ws as f says, into
 * outs[0..n) for Q4_EPI_STORE, else into outs[0] alone (outs may then hold one entry). Weights that one dispatch cannot take together
 * (different kinds or group sizes, the binding limit) go in several, each doing the prologue;
 * where the fused kernel does not apply (more than 4 rows of x, an input that needs a gradient,
 * x too long for workgroup memory, gate and up of different kinds) the same result is recorded
 * with the public ops (rms_norm, q4_linear_multi, add, silu/gelu, mul). Errors name op. */
wgml_status q4_gemv_fused(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_q4_weight *const *ws, int n,
                          const q4_gemv_fuse *f, wgml_tensor **outs);

#endif
