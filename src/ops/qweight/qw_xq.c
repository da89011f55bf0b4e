/* x quantised once by its producer for the integer-dot GEMVs (qw_xq.h). */
#include "ops/qweight/qw_xq.h"

#include "ops/qweight/qw_internal.h"

#include <stdlib.h>
#include <string.h>

int qw_xq_mode(void) {
    const char *e = getenv("WGML_QW_GEMV_XQ");
    return e && e[0] >= '1' && e[0] <= '3' && !e[1] ? e[0] - '0' : 0;
}

qw_xq_fmt qw_xq_format(const wgml_qweight *w) {
    return (qw_xq_fmt){.qb = qw_x8_block(w), .pair = qw_kind_cpw(w->kind) == 8, .kp = w->kp};
}

int64_t qw_xq_row(const qw_xq_fmt *f) { return f->kp / 4 + 2 * (f->kp / f->qb); }

/* graph_derived's key of format f */
static uint64_t xq_key(const qw_xq_fmt *f) {
    return ((uint64_t)f->kp << 16) | ((uint64_t)f->qb << 1) | (f->pair ? 1u : 0u);
}

int qw_xq_formats(wgml_graph *g, const wgml_qweight *const *ws, int n, int64_t m, qw_xq_fmt *fmts) {
    int nf = 0;
    if (!g || qw_xq_mode() < 2 || m < 1) return 0;
    bool gemv = m <= qw_gemv_max_m(graph_ctx(g)); /* the GEMV reads the rows as vec4s; the GEMM as words */
    for (int i = 0; i < n && nf < QW_XQ_MAX; i++) {
        if (!ws[i] || !qw_x8_applies(g, ws[i], 0) || (gemv && qw_quant_x_row(ws[i]) % 4)) continue;
        qw_xq_fmt f = qw_xq_format(ws[i]);
        bool seen = false;
        for (int j = 0; j < nf; j++) seen |= xq_key(&fmts[j]) == xq_key(&f);
        if (!seen) fmts[nf++] = f;
    }
    return nf;
}

void qw_xq_attach(wgml_graph *g, const wgml_tensor *x, const qw_xq_fmt *f, wgml_tensor *xq) {
    graph_derived_set(g, x, xq_key(f), xq); /* out of host memory: the GEMVs quantise for themselves */
}

wgml_tensor *qw_xq_given(const wgml_graph *g, const wgml_tensor *x, const wgml_qweight *w) {
    qw_xq_fmt f = qw_xq_format(w);
    return qw_xq_mode() >= 2 ? graph_derived(g, x, xq_key(&f)) : NULL;
}
