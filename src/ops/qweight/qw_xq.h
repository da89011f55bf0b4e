/* x quantised to int8 once, by the op that makes x, for the integer-dot GEMVs that read it
 * (inference graphs). The integer form of the GEMV (qw_gemv.wgsl's I8X) otherwise quantises in
 * every row group the blocks of x it reads, which at a 1B model's launch shapes cost up to
 * 0.22 ms of a 1.27 ms decode step (bench/gemv_variants.py's xq bound: docs/PERFORMANCE.md,
 * 2026-12-07); the prefill's integer GEMM (qw_mm_i8) quantises x in a qw_quant_x dispatch of its
 * own. The producer (norm_add_rms) writes x in qw_quant_x's row format for each format its
 * consumers read, records it with qw_xq_attach, and the GEMVs and GEMMs recorded after it take
 * it (qw_xq_given) instead of quantising: no dispatch of its own. */
#ifndef WGML_QW_XQ_H
#define WGML_QW_XQ_H

#include "graph/graph.h"

#define QW_XQ_MAX 2 /* formats one producer writes (a Q4_K_M q/k/v group: Q4_K's and Q6_K's) */

/* One row format of qw_quant_x.wgsl's output: qb k a block (32, or 16 for a weight with G = 16),
 * the bytes in the 4-bit codes' even/odd order (pair) or in order, kp the weight's padded K. */
typedef struct qw_xq_fmt {
    uint32_t qb;
    bool pair;
    int64_t kp;
} qw_xq_fmt;

/* $WGML_QW_GEMV_XQ: 0 (the default until timed in a model) never; 1 one qw_quant_x dispatch
 * before each integer-form GEMV group; 2 the producers', and that dispatch where x has none; 3
 * the producers' only. With 2 and 3 a GEMV that stages x in workgroup memory also quantises it
 * there once per workgroup (qw_gemv.c's gemv_xq_stage). */
int qw_xq_mode(void);

/* w's format. */
qw_xq_fmt qw_xq_format(const wgml_qweight *w);

/* The words of a row in format f: kp/4 + 2·kp/qb. */
int64_t qw_xq_row(const qw_xq_fmt *f);

/* The distinct formats (at most QW_XQ_MAX, into fmts; returns how many) in which the products
 * of an m-row x with the n weights ws would read x quantised by its producer: qw_xq_mode() >= 2
 * and the weight takes int8 activations in g (qw_x8_applies); for the GEMV's m rows also a row
 * in whole vec4s (the GEMM, qw_mm_i8, reads words). 0: the producer writes none. */
int qw_xq_formats(wgml_graph *g, const wgml_qweight *const *ws, int n, int64_t m, qw_xq_fmt *fmts);

/* Records xq (i32 [rows of x · qw_xq_row(f)], qw_quant_x's rows) as x quantised in format f,
 * for the GEMVs recorded after it (a built graph's graph_derived; nothing in the eager graph). */
void qw_xq_attach(wgml_graph *g, const wgml_tensor *x, const qw_xq_fmt *f, wgml_tensor *xq);

/* x quantised in w's format by its producer (qw_xq_attach), or NULL. */
wgml_tensor *qw_xq_given(const wgml_graph *g, const wgml_tensor *x, const wgml_qweight *w);

#endif
