/* A 4-bit weight of one graph used in another (its tensors shared: views, no copies), and rows
 * of a weight as a weight of their own (views of its tensors). */
#include "ops/qweight/qw_share.h"

#include "gpu/gpu.h"
#include "ops/qweight/qw_internal.h"

#include <stdlib.h>

wgml_status qw_weight_share(wgml_graph *g, const wgml_qweight *w, wgml_qweight *out) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "qw_weight_share: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    if (!w || !out) return wgml_set_error(ctx, WGML_ERR_ARG, "qw_weight_share: weight or out is NULL");
    *out = *w;
    out->codes = wgml_tensor_share(g, w->codes);
    out->ab = out->codes ? wgml_tensor_share(g, w->ab) : NULL;
    out->bias = w->bias && out->ab ? wgml_tensor_share(g, w->bias) : NULL;
    if (out->ab && (!w->bias || out->bias)) return WGML_OK;
    out->codes = out->ab = out->bias = NULL;
    return wgml_last_status(ctx) ? wgml_last_status(ctx) : wgml_set_error(ctx, WGML_ERR_ARG, "qw_weight_share: a share failed");
}

/* Elements of one row of t [rows, ...]. */
static int64_t row_elems(const wgml_tensor *t, int64_t rows) { return wgml_tensor_numel(t) / rows; }

/* Whether rows starting at r0 of tensors whose rows take row_bytes[0..n) bytes start at offsets
 * the device can bind. */
static bool rows_aligned(wgml_ctx *ctx, int64_t r0, const uint64_t *row_bytes, int n) {
    uint64_t align = gpu_get_caps(ctx)->storage_align;
    for (int i = 0; i < n; i++)
        if (((uint64_t)r0 * row_bytes[i]) % align) return false;
    return true;
}

bool qw_weight_rows_fit(wgml_ctx *ctx, const wgml_qweight *w, int64_t r0, int64_t n) {
    if (!ctx || !w || !w->codes || !w->ab || r0 < 0 || n <= 0 || r0 + n > w->n) return false;
    const wgml_tensor *ts[3] = {w->codes, w->ab, w->bias};
    uint64_t rb[3];
    int nt = 0;
    for (int i = 0; i < 3; i++)
        if (ts[i]) rb[nt++] = (uint64_t)row_elems(ts[i], w->n) * wgml_dtype_size(ts[i]->dtype);
    return rows_aligned(ctx, r0, rb, nt);
}

bool qw_gguf_rows_fit(wgml_ctx *ctx, int type, int64_t k, int64_t r0) {
    int group, bits;
    if (!ctx || k <= 0 || r0 < 0 || !qw_gguf_gpu(type, NULL, &group, &bits)) return false;
    /* wgml_qweight_upload_gguf's layout (include/wgml-quant.h): u32 words of 8 codes (4-bit), 4
     * (wider codes, held as bytes) or 1 (f32 values), and per group a scale (and a minimum) in f32,
     * or per 256 codes the K types' super-block entry */
    int64_t kp = (k + group - 1) / group * group, cpw = bits == 4 ? 8 : bits == 32 ? 1 : 4;
    uint64_t rb[2] = {(uint64_t)(kp / cpw) * 4,
                      (uint64_t)qw_ab_row_words(qw_gguf_ab_form(type), kp, group, qw_gguf_has_min(type)) * 4};
    return rows_aligned(ctx, r0, rb, 2);
}

/* A view of rows [r0, r0 + n) of t [rows, ...]. */
static wgml_tensor *rows_view(wgml_tensor *t, int64_t rows, int64_t r0, int64_t n) {
    int64_t shape[WGML_MAX_RANK];
    for (int i = 0; i < t->rank; i++) shape[i] = t->shape[i];
    shape[0] = n;
    return wgml_tensor_view(t, r0 * row_elems(t, rows), t->rank, shape);
}

wgml_qweight *qw_weight_rows(const wgml_qweight *w, int64_t r0, int64_t n) {
    wgml_ctx *ctx = w && w->codes ? graph_ctx(w->codes->graph) : NULL;
    if (!qw_weight_rows_fit(ctx, w, r0, n)) {
        wgml_set_error(ctx, WGML_ERR_ARG,
                       "qw_weight_rows: rows [%lld, %lld) of the weight [%lld, %lld] are outside it or not at "
                       "storage-aligned offsets",
                       (long long)r0, (long long)(r0 + n), (long long)(w ? w->n : 0), (long long)(w ? w->k : 0));
        return NULL;
    }
    wgml_qweight *v = calloc(1, sizeof *v);
    if (!v) {
        wgml_set_error(ctx, WGML_ERR_OOM, "qw_weight_rows: out of host memory");
        return NULL;
    }
    *v = *w;
    v->n = n;
    v->codes = rows_view(w->codes, w->n, r0, n);
    v->ab = v->codes ? rows_view(w->ab, w->n, r0, n) : NULL;
    v->bias = w->bias && v->ab ? rows_view(w->bias, w->n, r0, n) : NULL;
    if (!v->ab || (w->bias && !v->bias)) {
        wgml_qweight_free(v);
        return NULL;
    }
    return v;
}
