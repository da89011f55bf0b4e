/* Backward rule of wgml_sdpa, composed from matmul and softmax: the probabilities are
 * recomputed (materialised [B·Hq, Sq, Skv], so meant for short sequences until the dedicated
 * kernel wgml_sdpa_backward replaces sdpa_backward below). */
#include "ops/attention/attention_grad.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sdpa_attrs {
    int causal;
    float scale;
} sdpa_attrs;

/* k or v [B, Hkv, S, D] repeated to [B·Hq, S, D] (query head h uses kv head h / (Hq/Hkv)). */
static wgml_tensor *repeat_kv(wgml_graph *g, wgml_tensor *t, int64_t hq) {
    int64_t B = t->shape[0], H = t->shape[1], S = t->shape[2], D = t->shape[3], G = hq / H;
    int64_t s5[5] = {B, H, 1, S, D}, e5[5] = {B, H, G, S, D}, s3[3] = {B * hq, S, D};
    wgml_tensor *r = wgml_reshape(g, t, 5, s5);
    if (G > 1) r = wgml_expand_copy(g, r, 5, e5);
    return wgml_reshape(g, r, 3, s3);
}

/* [B·Hq, S, D] summed over the query heads of each kv head back to [B, Hkv, S, D]. */
static wgml_tensor *sum_groups(wgml_graph *g, wgml_tensor *t, const wgml_tensor *like) {
    int64_t B = like->shape[0], H = like->shape[1], S = like->shape[2], D = like->shape[3];
    int64_t G = t->shape[0] / (B * H), s5[5] = {B, H, G, S, D};
    if (G == 1) return wgml_reshape(g, t, 4, like->shape);
    int dim = 2;
    return wgml_sum(g, wgml_reshape(g, t, 5, s5), &dim, 1, 0);
}

/* P = softmax(q·kᵀ·scale + mask); dv = Pᵀ·dout; dP = dout·vᵀ; dS = P·(dP − Σ dP·P)·scale;
 * dq = dS·k; dk = dSᵀ·q (GQA: summed over each kv head's query heads). A composition; the
 * dedicated kernel wgml_sdpa_backward(g, q, k, v, out, dout, causal, scale, &dq, &dk, &dv)
 * replaces it. */
static void sdpa_backward(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *dout, int causal,
                          float scale, wgml_tensor **dq, wgml_tensor **dk, wgml_tensor **dv) {
    int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2], D = q->shape[3], Skv = k->shape[2];
    if (scale <= 0) scale = (float)(1.0 / sqrt((double)D));
    int64_t s3[3] = {B * Hq, Sq, D};
    wgml_tensor *q3 = wgml_reshape(g, q, 3, s3), *do3 = wgml_reshape(g, dout, 3, s3);
    wgml_tensor *k3 = repeat_kv(g, k, Hq), *v3 = repeat_kv(g, v, Hq);
    wgml_tensor *s = wgml_mul_scalar(g, wgml_matmul(g, q3, k3, 0, 1), scale);
    if (causal) { /* additive mask, aligned to the end: query i sees keys 0 .. Skv − Sq + i */
        int64_t ms[2] = {Sq, Skv};
        wgml_tensor *mask = wgml_tensor_new(g, WGML_F32, 2, ms);
        float *h = malloc(sizeof(float) * (size_t)(Sq * Skv));
        if (mask && h) {
            for (int64_t i = 0; i < Sq; i++)
                for (int64_t j = 0; j < Skv; j++) h[i * Skv + j] = j <= Skv - Sq + i ? 0.0f : -INFINITY;
            if (wgml_tensor_write(mask, h, sizeof(float) * (size_t)(Sq * Skv))) mask = NULL;
        } else {
            mask = NULL;
        }
        free(h);
        s = mask ? wgml_add(g, s, mask, 1.0f) : NULL;
    }
    wgml_tensor *p = wgml_softmax(g, s, -1);
    if (dv) *dv = sum_groups(g, wgml_matmul(g, p, do3, 1, 0), v);
    if (dq || dk) {
        int last = -1;
        wgml_tensor *dp = wgml_matmul(g, do3, v3, 0, 1);
        wgml_tensor *ds = wgml_mul(g, p, wgml_sub(g, dp, wgml_sum(g, wgml_mul(g, dp, p), &last, 1, 1), 1.0f));
        ds = wgml_mul_scalar(g, ds, scale);
        if (dq) *dq = wgml_reshape(g, wgml_matmul(g, ds, k3, 0, 0), 4, q->shape);
        if (dk) *dk = sum_groups(g, wgml_matmul(g, ds, q3, 1, 0), k);
    }
}

static wgml_status sdpa_op_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const sdpa_attrs *at = (const sdpa_attrs *)op->attrs;
    sdpa_backward(g, op->in[0], op->in[1], op->in[2], dy, at->causal, at->scale, graph_op_wants(op, 0) ? &dx[0] : NULL,
                  graph_op_wants(op, 1) ? &dx[1] : NULL, graph_op_wants(op, 2) ? &dx[2] : NULL);
    return grad_result(g, op, dx);
}

wgml_tensor *sdpa_grad_record(wgml_graph *g, wgml_tensor *out, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, int causal,
                              float scale) {
    graph_op op = {.name = "sdpa", .backward = sdpa_op_backward, .n_in = 3, .in = {q, k, v}, .out = out};
    sdpa_attrs at = {causal != 0, scale};
    memcpy(op.attrs, &at, sizeof at);
    return graph_record_op(g, &op);
}
