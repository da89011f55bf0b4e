/* AdamW (and SGD, wgml_sgd_step: the same buffers, norm and finish, its own update kernel
 * sgd_update.wgsl) over many parameters at once. Every trainable tensor is a view into four flat
 * persistent buffers (params, grads, m, v), so one step is three dispatches whatever the
 * number of tensors:
 *   adamw_norm.wgsl    chunks of the gradient buffer: sums of squares, non-finite flags;
 *   adamw_finish.wgsl  one workgroup: global norm, skip decision, t, bias corrections,
 *                            clip coefficient (all on the GPU: no host round trip per step);
 *   adamw_update.wgsl  one thread per vec4 of the flat buffers: the update itself.
 * The learning rate and weight decay live in a small persistent tensor (hyper) that the host
 * rewrites between runs, so a built graph follows a schedule without being rebuilt; so does
 * the apply flag of gradient accumulation (0: finish marks the step held, state[3] = 2, and
 * the update and adamw_clear.wgsl leave everything; 1: step, then clear the grads). */
#include "graph/graph.h"
#include "wgml-optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Chunks of the norm's first stage: at most this many (one workgroup of finish merges them). */
#define NORM_CHUNKS_MAX 256
/* At least this many vec4s per chunk (four per thread). */
#define NORM_CHUNK_MIN 1024

/* hyper: the f32 numbers the kernels read; 1 - beta and ln beta are computed here in double
 * (1 - beta2 from an f32 beta2 would be off by ~1e-5 relative) */
enum { HY_LR, HY_WD, HY_B1, HY_B2, HY_EPS, HY_MAX_NORM, HY_LN_B1, HY_LN_B2, HY_OMB1, HY_OMB2, HY_APPLY, HY_MOMENTUM, HY_N };
enum { ST_T, ST_SKIPPED, ST_NORM, ST_SKIP, ST_COEF, ST_STEP, ST_SQRT_BC2, ST_DECAY, ST_N };

struct wgml_optimizer {
    wgml_graph *g;
    wgml_adamw_config cfg;
    int64_t capacity, used, slot; /* elements; slot: the alignment of a parameter's start */
    wgml_tensor *flat[4];         /* params, grads, m, v */
    wgml_tensor *hyper, *state;
    wgml_tensor **params, **grads;
    int n, cap;
    bool hold; /* wgml_adamw_set_apply(0): the recorded steps accumulate only */
};

wgml_adamw_config wgml_adamw_defaults(void) {
    wgml_adamw_config c;
    memset(&c, 0, sizeof c);
    c.lr = 1e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = 1e-2;
    c.max_grad_norm = 0;
    c.capacity = 0;
    return c;
}

int64_t wgml_adamw_padded(int64_t numel) { return (numel + 63) / 64 * 64; }

static wgml_status write_hyper(wgml_optimizer *o) {
    float h[HY_N] = {(float)o->cfg.lr,          (float)o->cfg.weight_decay,  (float)o->cfg.beta1,
                     (float)o->cfg.beta2,       (float)o->cfg.eps,           (float)o->cfg.max_grad_norm,
                     (float)log(o->cfg.beta1),  (float)log(o->cfg.beta2),     (float)(1.0 - o->cfg.beta1),
                     (float)(1.0 - o->cfg.beta2), o->hold ? 0.0f : 1.0f, (float)o->cfg.momentum};
    return wgml_tensor_write(o->hyper, h, sizeof h);
}

static bool check_config(wgml_ctx *ctx, const wgml_adamw_config *c) {
    const char *op = "adamw_new";
    if (!c) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: config is NULL", op), false;
    if (!(c->lr >= 0 && isfinite(c->lr)))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: lr %g must be finite and >= 0", op, c->lr), false;
    if (!(c->beta1 > 0 && c->beta1 < 1) || !(c->beta2 > 0 && c->beta2 < 1))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: betas (%g, %g) must lie in (0, 1)", op, c->beta1, c->beta2),
               false;
    if (!(c->eps > 0 && isfinite(c->eps)))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: eps %g must be finite and > 0", op, c->eps), false;
    if (!(c->weight_decay >= 0 && isfinite(c->weight_decay)))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: weight_decay %g must be finite and >= 0", op, c->weight_decay),
               false;
    if (!(c->max_grad_norm >= 0 && isfinite(c->max_grad_norm)))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: max_grad_norm %g must be finite and >= 0 (0: no clipping)", op,
                              c->max_grad_norm),
               false;
    if (!(c->momentum >= 0 && isfinite(c->momentum)))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: momentum %g must be finite and >= 0", op, c->momentum), false;
    if (c->capacity <= 0 || c->capacity > ((int64_t)1 << 32))
        return wgml_set_error(ctx, WGML_ERR_ARG,
                              "%s: capacity %lld must be 1 .. 2^32 elements (the sum of wgml_adamw_padded(numel) "
                              "over the parameters)",
                              op, (long long)c->capacity),
               false;
    return true;
}

void wgml_adamw_free(wgml_optimizer *o) {
    if (!o) return;
    if (graph_is_eager(o->g)) { /* views first, then the buffers they share */
        for (int i = 0; i < o->n; i++) {
            wgml_tensor_free(o->params[i]);
            wgml_tensor_free(o->grads[i]);
        }
        for (int i = 0; i < 4; i++) wgml_tensor_free(o->flat[i]);
        wgml_tensor_free(o->hyper);
        wgml_tensor_free(o->state);
    }
    free(o->params);
    free(o->grads);
    free(o);
}

wgml_optimizer *wgml_adamw_new(wgml_graph *g, const wgml_adamw_config *cfg) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (!check_config(ctx, cfg)) return NULL;
    wgml_optimizer *o = calloc(1, sizeof *o);
    if (!o) {
        wgml_set_error(ctx, WGML_ERR_OOM, "adamw_new: out of host memory");
        return NULL;
    }
    o->g = g;
    o->cfg = *cfg;
    /* a parameter starts at a multiple of 64 elements (256 bytes, a multiple of every storage
     * offset alignment WebGPU allows); the buffers are whole slots */
    o->slot = 64;
    uint64_t align = gpu_get_caps(ctx)->storage_align;
    if ((int64_t)align / 4 > o->slot) o->slot = (int64_t)align / 4;
    o->capacity = (cfg->capacity + o->slot - 1) / o->slot * o->slot;
    int64_t hy = HY_N, st = ST_N;
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++) ok = (o->flat[i] = wgml_tensor_new(g, WGML_F32, 1, &o->capacity)) != NULL;
    ok = ok && (o->hyper = wgml_tensor_new(g, WGML_F32, 1, &hy)) && (o->state = wgml_tensor_new(g, WGML_U32, 1, &st));
    /* everything starts at zero (padding included: it takes part in the norm and the update) */
    void *zeros = ok ? calloc((size_t)o->capacity, sizeof(float)) : NULL;
    if (ok && !zeros) {
        wgml_set_error(ctx, WGML_ERR_OOM, "adamw_new: out of host memory");
        ok = false;
    }
    for (int i = 0; i < 4 && ok; i++) ok = !wgml_tensor_write(o->flat[i], zeros, (size_t)o->capacity * sizeof(float));
    ok = ok && !wgml_tensor_write(o->state, zeros, ST_N * sizeof(uint32_t)) && !write_hyper(o);
    free(zeros);
    if (!ok) {
        wgml_adamw_free(o);
        return NULL;
    }
    return o;
}

wgml_tensor *wgml_adamw_param(wgml_optimizer *o, int rank, const int64_t *shape) {
    if (!o) return NULL;
    wgml_ctx *ctx = graph_ctx(o->g);
    if (check_shape(ctx, "adamw_param", rank, shape)) return NULL;
    int64_t numel = shape_numel(rank, shape), need = (numel + o->slot - 1) / o->slot * o->slot;
    if (need > o->capacity - o->used) {
        char b[SHAPE_STR_LEN];
        wgml_set_error(ctx, WGML_ERR_LIMIT,
                       "adamw_param: a parameter %s needs %lld elements; %lld of the capacity %lld are left",
                       shape_str(b, sizeof b, rank, shape), (long long)need, (long long)(o->capacity - o->used),
                       (long long)o->capacity);
        return NULL;
    }
    if (o->n == o->cap) {
        int cap = o->cap ? o->cap * 2 : 16;
        wgml_tensor **p = realloc(o->params, sizeof *p * (size_t)cap);
        if (p) o->params = p;
        wgml_tensor **q = p ? realloc(o->grads, sizeof *q * (size_t)cap) : NULL;
        if (q) o->grads = q;
        if (!p || !q) {
            wgml_set_error(ctx, WGML_ERR_OOM, "adamw_param: out of host memory");
            return NULL;
        }
        o->cap = cap;
    }
    wgml_tensor *pv = wgml_tensor_view(o->flat[0], o->used, rank, shape);
    wgml_tensor *gv = pv ? wgml_tensor_view(o->flat[1], o->used, rank, shape) : NULL;
    if (!gv) {
        wgml_tensor_free(pv);
        return NULL;
    }
    o->params[o->n] = pv;
    o->grads[o->n] = gv;
    o->n++;
    o->used += need;
    return pv;
}

wgml_tensor *wgml_adamw_grad(wgml_optimizer *o, const wgml_tensor *param) {
    if (!o) return NULL;
    for (int i = 0; i < o->n; i++)
        if (o->params[i] == param) return o->grads[i];
    wgml_set_error(graph_ctx(o->g), WGML_ERR_ARG, "adamw_grad: %s is not a parameter of this optimizer",
                   param ? tshape(param) : "NULL");
    return NULL;
}

wgml_tensor *wgml_adamw_buffer(wgml_optimizer *o, wgml_adamw_buffer_kind which) {
    if (!o) return NULL;
    switch (which) {
    case WGML_ADAMW_PARAMS: return o->flat[0];
    case WGML_ADAMW_GRADS: return o->flat[1];
    case WGML_ADAMW_M: return o->flat[2];
    case WGML_ADAMW_V: return o->flat[3];
    case WGML_ADAMW_STATE: return o->state;
    }
    wgml_set_error(graph_ctx(o->g), WGML_ERR_ARG, "adamw_buffer: unknown buffer %d", (int)which);
    return NULL;
}

int64_t wgml_adamw_used(const wgml_optimizer *o) { return o ? o->used : 0; }

static wgml_status check_opt_graph(wgml_graph *g, wgml_optimizer *o, const char *op) {
    if (!g) return wgml_set_error(o ? graph_ctx(o->g) : NULL, WGML_ERR_ARG, "%s: graph is NULL", op);
    if (!o) return wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "%s: optimizer is NULL", op);
    if (o->g != g) return wgml_set_error(graph_ctx(g), WGML_ERR_ARG, "%s: the optimizer belongs to another graph", op);
    return WGML_OK;
}

/* Records zeroing of the grads' used prefix (the rest of the capacity stays zero from
 * creation): always (a fill), or gated by the step recorded before it (adamw_clear:
 * not when that step was held for gradient accumulation). */
static wgml_status zero_used_grads(wgml_graph *g, wgml_optimizer *o, const char *op, bool gated) {
    wgml_status s = check_opt_graph(g, o, op);
    if (s || o->used == 0) return s;
    wgml_tensor *prefix = wgml_tensor_view(o->flat[1], 0, 1, &o->used);
    if (!prefix) return wgml_last_status(graph_ctx(g));
    uint32_t n4 = (uint32_t)(o->used / 4); /* used is a multiple of 64 */
    s = gated ? graph_dispatch(g, op, "adamw_clear", NULL, &o->state, 1, &prefix, 1, &n4, sizeof n4,
                               (n4 + 255u) / 256u)
              : graph_fill_bits(g, prefix, 0);
    wgml_tensor_free(prefix);
    return s;
}

wgml_status wgml_adamw_zero_grad(wgml_graph *g, wgml_optimizer *o) {
    return zero_used_grads(g, o, "adamw_zero_grad", false);
}

/* One step of either rule: the shared norm and finish dispatches (clip coefficient, skip or
 * hold decision, t), then the rule's update kernel over the flat buffers (reading grads,
 * hyper, state; writing params, m and, for AdamW, v: n_rw of them). */
static wgml_status record_step(wgml_graph *g, wgml_optimizer *o, const char *op, const char *update, int n_rw) {
    wgml_status s = check_opt_graph(g, o, op);
    if (s) return s;
    wgml_ctx *ctx = graph_ctx(g);
    uint64_t n4 = (uint64_t)o->used / 4;
    if (n4 == 0) return wgml_set_error(ctx, WGML_ERR_STATE, "%s: the optimizer has no parameters", op);
    uint64_t n_chunks = (n4 + NORM_CHUNK_MIN - 1) / NORM_CHUNK_MIN;
    if (n_chunks > NORM_CHUNKS_MAX) n_chunks = NORM_CHUNKS_MAX;
    uint64_t chunk = (n4 + n_chunks - 1) / n_chunks;
    n_chunks = (n4 + chunk - 1) / chunk;
    int64_t pn = (int64_t)(2 * n_chunks);
    wgml_tensor *part = graph_output(g, op, WGML_F32, 1, &pn);
    if (!part) return wgml_last_status(ctx);
    struct { uint32_t n4, chunk, n_chunks; } pa = {(uint32_t)n4, (uint32_t)chunk, (uint32_t)n_chunks};
    s = graph_dispatch(g, op, "adamw_norm", NULL, &o->flat[1], 1, &part, 1, &pa, sizeof pa, n_chunks);
    if (!s) {
        uint32_t pf = (uint32_t)n_chunks;
        wgml_tensor *ro[2] = {part, o->hyper};
        s = graph_dispatch(g, op, "adamw_finish", NULL, ro, 2, &o->state, 1, &pf, sizeof pf, 1);
    }
    if (!s) {
        uint32_t pu = (uint32_t)n4;
        wgml_tensor *ro[3] = {o->flat[1], o->hyper, o->state}, *rw[3] = {o->flat[0], o->flat[2], o->flat[3]};
        s = graph_dispatch(g, op, update, NULL, ro, 3, rw, n_rw, &pu, sizeof pu, (n4 + 255) / 256);
    }
    wgml_tensor_free(part);
    return s;
}

wgml_status wgml_adamw_step(wgml_graph *g, wgml_optimizer *o) { return record_step(g, o, "adamw_step", "adamw_update", 3); }

wgml_status wgml_sgd_step(wgml_graph *g, wgml_optimizer *o) { return record_step(g, o, "sgd_step", "sgd_update", 2); }

wgml_status wgml_adamw_copy_grad(wgml_graph *g, wgml_optimizer *o, const wgml_tensor *param, wgml_tensor *grad) {
    const char *op = "adamw_copy_grad";
    wgml_status s = check_opt_graph(g, o, op);
    if (s) return s;
    wgml_tensor *dst = wgml_adamw_grad(o, param);
    if (!dst) return wgml_last_status(graph_ctx(g));
    if (!grad || grad->dtype != WGML_F32 || grad->rank != dst->rank ||
        memcmp(grad->shape, dst->shape, sizeof(int64_t) * (size_t)dst->rank)) {
        char a[SHAPE_STR_LEN];
        return wgml_set_error(graph_ctx(g), WGML_ERR_SHAPE, "%s: the gradient %s must be f32 %s like its parameter", op,
                              grad ? tshape(grad) : "NULL", shape_str(a, sizeof a, dst->rank, dst->shape));
    }
    uint64_t words = (uint64_t)wgml_tensor_numel(dst);
    uint32_t pa[4] = {(uint32_t)words, 0, 0, 0}; /* graph_copy.wgsl's uniform */
    return graph_dispatch(g, op, "graph_copy", NULL, &grad, 1, &dst, 1, pa, sizeof pa, (words + 255) / 256);
}

wgml_status wgml_adamw_zero_grad_after_step(wgml_graph *g, wgml_optimizer *o) {
    return zero_used_grads(g, o, "adamw_zero_grad_after_step", true);
}

wgml_status wgml_adamw_set_apply(wgml_optimizer *o, int apply) {
    if (!o) return wgml_set_error(NULL, WGML_ERR_ARG, "adamw_set_apply: optimizer is NULL");
    if (o->hold == !apply) return WGML_OK;
    o->hold = !apply;
    return write_hyper(o);
}

wgml_status wgml_adamw_set_lr(wgml_optimizer *o, double lr) {
    if (!o) return wgml_set_error(NULL, WGML_ERR_ARG, "adamw_set_lr: optimizer is NULL");
    if (!(lr >= 0 && isfinite(lr)))
        return wgml_set_error(graph_ctx(o->g), WGML_ERR_ARG, "adamw_set_lr: lr %g must be finite and >= 0", lr);
    o->cfg.lr = lr;
    return write_hyper(o);
}

wgml_status wgml_adamw_set_weight_decay(wgml_optimizer *o, double weight_decay) {
    if (!o) return wgml_set_error(NULL, WGML_ERR_ARG, "adamw_set_weight_decay: optimizer is NULL");
    if (!(weight_decay >= 0 && isfinite(weight_decay)))
        return wgml_set_error(graph_ctx(o->g), WGML_ERR_ARG,
                              "adamw_set_weight_decay: weight_decay %g must be finite and >= 0", weight_decay);
    o->cfg.weight_decay = weight_decay;
    return write_hyper(o);
}

wgml_status wgml_adamw_stats(wgml_optimizer *o, int64_t *steps_taken, int64_t *steps_skipped, float *last_grad_norm) {
    if (!o) return wgml_set_error(NULL, WGML_ERR_ARG, "adamw_stats: optimizer is NULL");
    uint32_t st[ST_N];
    wgml_status s = wgml_tensor_read(o->state, st, sizeof st);
    if (s) return s;
    if (steps_taken) *steps_taken = st[ST_T];
    if (steps_skipped) *steps_skipped = st[ST_SKIPPED];
    if (last_grad_norm) memcpy(last_grad_norm, &st[ST_NORM], sizeof(float));
    return WGML_OK;
}
