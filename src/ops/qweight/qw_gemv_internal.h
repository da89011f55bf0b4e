/* Private to the GEMV's two files: qw_gemv.c (the kernel's launch configuration, prelude and
 * recording, the plan of a group of weights, wgml_qlinear_multi) and qw_gemv_fused.c (the fused
 * entry point qw_gemv_fused and its fit rules), which records through qw_gemv.c. */
#ifndef WGML_QW_GEMV_INTERNAL_H
#define WGML_QW_GEMV_INTERNAL_H

#include "ops/qweight/qw_gemv_fused.h"
#include "ops/qweight/qw_internal.h"

/* The launch settings' override from the environment: $name as a decimal number in [lo, hi],
 * else dflt (unset, empty, not a whole number or out of range). */
long gemv_env_long(const char *name, long lo, long hi, long dflt);

/* The GEMV's launch shape (gemv_shape) and its final reduction (gemv_subgroup). */
typedef struct gemv_cfg {
    int tpr, rpt, wg, bpi;
    bool sg;           /* subgroup reduction */
    uint32_t sg_known; /* the subgroup size known to hold at least (0: unknown) */
    bool direct;       /* the sums are final in the subgroup: no workgroup memory */
    bool i8x;          /* x quantised to int8 per block, codes through dot4I8Packed (qw_x8_applies) */
    wgml_tensor *xq;   /* with i8x: x quantised once (by its producer or qw_quant_x), read instead of quantising (NULL: no) */
    bool xq_stage;     /* with i8x and a staged x: quantised once per workgroup into workgroup memory (XQSTAGE) */
    const qw_gemv_fuse *f; /* the prologue and epilogue (NULL: none) */
} gemv_cfg;

/* Output rows one thread stores: RPT, or RPT / 2 when its accumulators pair gate and up rows. */
static inline bool fuse_pair(const qw_gemv_fuse *f) { return f && (f->epi == QW_EPI_SWIGLU || f->epi == QW_EPI_GEGLU); }
static inline bool fuse_merge(const qw_gemv_fuse *f) { return f && f->merge_chunks > 0; }
/* x staged in workgroup memory: normed, or merged from attention's chunks */
static inline bool fuse_stage(const qw_gemv_fuse *f) { return f && (f->norm_w || fuse_merge(f)); }
static inline int64_t merge_table_len(const qw_gemv_fuse *f) { return fuse_merge(f) ? f->merge_heads * f->merge_chunks : 1; }
/* the norm handed over: stored for the next projection (SSQ_OUT), or taken from the last (SSQ_IN) */
static inline bool fuse_ssq_out(const qw_gemv_fuse *f) { return f && f->next_norm; }
static inline bool fuse_ssq_in(const qw_gemv_fuse *f) { return f && f->ssq; }
/* the outputs of a dispatch over nw weights: one for a gated pair, three for SSQ_OUT (one weight) */
static inline int fuse_outputs(const qw_gemv_fuse *f, int nw) { return fuse_pair(f) ? 1 : fuse_ssq_out(f) ? 3 : nw; }

/* Output rows of one weight a workgroup stores: its row groups times the rows a thread stores
 * (RPT, or RPT / 2 when a thread's accumulators pair gate and up rows). */
static inline int64_t gemv_wg_rows(const gemv_cfg *c) {
    return (int64_t)(c->wg / c->tpr) * (fuse_pair(c->f) ? c->rpt / 2 : c->rpt);
}

/* The dispatches of the GEMVs of x with ws[0..n) (fusion f: NULL, a norm prologue, or
 * QW_EPI_RESIDUAL with n = 1; not the pairs): the weights grouped into as few dispatches as one
 * kind, one group size and the binding limit allow, each group with its launch config. */
typedef struct gemv_plan {
    int n_grp;
    int ng[WGML_QLINEAR_MULTI_MAX];                          /* weights in each group */
    int idx[WGML_QLINEAR_MULTI_MAX][WGML_QLINEAR_MULTI_MAX]; /* their indices in ws */
    gemv_cfg c[WGML_QLINEAR_MULTI_MAX];
} gemv_plan;

typedef enum { PLAN_OK, PLAN_BINDINGS, PLAN_MEMORY } plan_result;

/* The GEMV's launch shape and reduction for one dispatch over the nw weights ws (one K, kind and
 * group size) and fusion f (gemv_shape's rule); false when the kernel's workgroup memory would
 * not fit the device. */
bool gemv_config(wgml_ctx *ctx, const wgml_qweight *const *ws, int nw, int64_t m, const qw_gemv_fuse *f, gemv_cfg *c);

/* outs[i] = x · W_iᵀ (+ bias_i) for the nw (1..3) weights ws in one dispatch configured by c
 * (its fusion: c->f); the outputs are fuse_outputs(c->f, nw). */
wgml_status record_gemv_cfg(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int nw,
                            int64_t m, const gemv_cfg *c, wgml_tensor **outs);

/* Whether a gated pair (gate ws[0], up ws[1]) goes in one fused dispatch (config into *c). */
bool pair_fits(wgml_ctx *ctx, const wgml_qweight *const *ws, int64_t m, const qw_gemv_fuse *f, gemv_cfg *c);

/* The plan for ws (gemv_plan); PLAN_BINDINGS when one weight alone passes the binding limit,
 * PLAN_MEMORY when a group's kernel does not fit the workgroup memory. */
plan_result gemv_plan_make(wgml_ctx *ctx, const wgml_qweight *const *ws, int n, int64_t m, const qw_gemv_fuse *f,
                           gemv_plan *p);

/* Records plan p (made by gemv_plan_make with result r) into outs, or sets r's error. */
wgml_status gemv_plan_record(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int64_t m,
                             const gemv_plan *p, plan_result r, wgml_tensor **outs);

/* The checks shared by wgml_qlinear_multi and qw_gemv_fused: n weights (1..WGML_QLINEAR_MULTI_MAX),
 * each valid, of x's graph, with x's K. */
wgml_status gemv_multi_args(wgml_graph *g, wgml_ctx *ctx, const char *op, wgml_tensor *x,
                            const wgml_qweight *const *weights, int n);

#endif
