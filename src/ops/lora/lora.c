/* LoRA adapters on a linear or a 4-bit linear: y = base(x) + scale·(x·Aᵀ)·Bᵀ with
 * A [r, K], B [N, r], scale = alpha / r. The base stays frozen; A and B are trainable.
 * Init as PEFT's default (which is PyTorch's nn.Linear init for A): A ~ U(−1/√K, 1/√K)
 * (kaiming_uniform with a = √5), B = 0, so the adapted layer starts equal to the base. */
#include "graph/graph.h"
#include "ops/matmul/matmul_into.h"
#include "tensor/splitmix.h"

#include <math.h>
#include <stdlib.h>

wgml_lora *wgml_lora_new(wgml_graph *g, int64_t n, int64_t k, int r, float alpha, uint64_t seed) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (n < 1 || k < 1 || r < 1) {
        wgml_set_error(ctx, WGML_ERR_ARG, "lora_new: n %lld, k %lld and r %d must be positive", (long long)n, (long long)k,
                       r);
        return NULL;
    }
    wgml_lora *l = calloc(1, sizeof *l);
    int64_t sa[2] = {r, k}, sb[2] = {n, r};
    float *h = malloc(sizeof(float) * (size_t)(r * k > n * r ? r * k : n * r));
    if (!l || !h) {
        free(l);
        free(h);
        wgml_set_error(ctx, WGML_ERR_OOM, "lora_new: out of host memory");
        return NULL;
    }
    l->n = n;
    l->k = k;
    l->r = r;
    l->scale = alpha / (float)r;
    l->a = wgml_tensor_new(g, WGML_F32, 2, sa);
    l->b = l->a ? wgml_tensor_new(g, WGML_F32, 2, sb) : NULL;
    wgml_status s = l->b ? WGML_OK : wgml_last_status(ctx);
    double bound = 1.0 / sqrt((double)k);
    uint64_t st = seed;
    for (int64_t i = 0; i < r * k; i++) h[i] = (float)((2.0 * (double)(splitmix64(&st) >> 11) * 0x1p-53 - 1.0) * bound);
    if (!s) s = wgml_tensor_write(l->a, h, sizeof(float) * (size_t)(r * k));
    for (int64_t i = 0; i < n * r; i++) h[i] = 0.0f;
    if (!s) s = wgml_tensor_write(l->b, h, sizeof(float) * (size_t)(n * r));
    free(h);
    if (!s && !graph_is_eager(g)) {
        s = wgml_tensor_set_trainable(l->a, 1);
        if (!s) s = wgml_tensor_set_trainable(l->b, 1);
    }
    if (s) {
        wgml_lora_free(l);
        return NULL;
    }
    return l;
}

void wgml_lora_free(wgml_lora *l) {
    if (!l) return;
    wgml_tensor_free(l->a);
    wgml_tensor_free(l->b);
    free(l);
}

wgml_tensor *wgml_lora_apply(wgml_graph *g, wgml_tensor *x, wgml_tensor *base_out, const wgml_lora *l) {
    if (!g) return NULL;
    if (!l) {
        wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "lora_apply: adapter is NULL");
        return NULL;
    }
    /* h = x·Aᵀ, then base_out + scale·h·Bᵀ in one product whose epilogue adds base_out (no
     * [..., N] delta tensor, no separate add, and the backward folds the scale into its
     * products) */
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "lora_apply";
    if (check_tensor(ctx, op, "x", x) || check_tensor(ctx, op, "base_out", base_out)) return NULL;
    if (x->shape[x->rank - 1] != l->k || base_out->shape[base_out->rank - 1] != l->n ||
        base_out->numel / l->n != x->numel / l->k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: x %s and base_out %s must be [..., %lld] and [..., %lld] with the same rows",
                       op, tshape(x), tshape(base_out), (long long)l->k, (long long)l->n);
        return NULL;
    }
    wgml_tensor *h = wgml_linear(g, x, l->a, NULL); /* [..., r] */
    return h ? matmul_add_linear(g, "lora_apply", base_out, h, l->b, l->scale) : NULL;
}

wgml_tensor *wgml_lora_linear(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias, const wgml_lora *l) {
    return wgml_lora_apply(g, x, wgml_linear(g, x, w, bias), l);
}

wgml_tensor *wgml_lora_qlinear(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, const wgml_lora *l) {
    return wgml_lora_apply(g, x, wgml_qlinear(g, x, w), l);
}
