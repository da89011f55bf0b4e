/* The training step of a Llama model: one built graph holding forward, backward and AdamW, so
 * a step is one submit plus the 4-byte loss readback.
 *
 * Graphs:
 *   train graph g   ids, labels, positions (persistent) -> decoder_forward_train_hidden (weights
 *                   shared from the model; LoRA A/B are views of the optimizer's flat params
 *                   buffer) -> the fused LM head + cross-entropy (decoder_lmhead_ce: vocabulary
 *                   chunks through one [T, 8192] scratch, no [T, V] logits or dlogits) ->
 *                   wgml_backward of the loss (the fused op's rule recomputes each chunk's
 *                   logits and gives d_h; the head weight is frozen) -> AdamW step over the
 *                   flat buffers. Gradients land in the optimizer's flat grads buffer
 *                   (wgml_tensor_set_grad). With grad_accum > 1 they are added there (loss
 *                   scale 1 / grad_accum), the step is held on all but every grad_accum-th
 *                   run (wgml_adamw_set_apply) and clears them when it runs.
 *   eval graph ge   the same forward with the adapters shared from g, then the loss and the
 *                   cross-entropy status (n_valid).
 * The loss tensor of g is kept (readable after the run); everything else stays on the GPU.
 *
 * Straight-through mode (WGML_TRAIN_STE): instead of adapters, every targeted linear whose
 * weight is 4-bit (Q4_0 / Q4_1; Q8_0 and float weights stay frozen) gets an fp32 latent [N, K]
 * in the optimizer's buffers, initialised to the dequantised weight. The forward still uses
 * the 4-bit codes; the weight gradient goes to the latent (qw_ste_linear, an op of the qweight
 * family, through the model's training forward); after AdamW the same run rewrites the codes
 * from the latents at the frozen scales (wgml_qweight_requant), so the model's own weights change
 * and every other graph of the model (eval, generation) sees them. */
#include "wgml-model.h"
#include "wgml-train.h"

#include "graph/graph.h"
#include "model/decoder.h"
#include "train/checkpoint.h"
#include "ops/qweight/qw_share.h"
#include "tensor/splitmix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tparam {
    char name[64];
    int64_t layer;
    int target;
    int64_t shape[2];
    int64_t offset;            /* element offset in the optimizer's flat buffers */
    wgml_tensor *p, *m, *v;    /* views of the flat params, m and v buffers */
    bool stacked;              /* a LoRA A the train graph reads through its group's stacked view */
} tparam;

struct wgml_trainer {
    wgml_model *model;
    wgml_ctx *ctx;
    wgml_train_config cfg;
    int64_t T; /* tokens per step */
    wgml_graph *g, *ge;
    wgml_optimizer *opt;
    tparam *params;
    int n;
    wgml_lora *lora, *elora;       /* [n_layer * DECODER_N_TARGETS] structs (train graph, eval graph) */
    wgml_lora **lora_p, **elora_p; /* the same as pointer tables, NULL where no adapter */
    wgml_tensor **cat_p, **ecat_p; /* [n_layer * DECODER_N_TARGETS] stacked A's (decoder_adapters.lora_cat) */
    wgml_tensor **latent_p;        /* STE: [n_layer * DECODER_N_TARGETS] latents (train graph) or NULL */
    wgml_graph *gr;                /* STE: the requant of every latent alone (after write_state) */
    wgml_tensor *ids, *labels, *positions, *loss;
    wgml_tensor *e_ids, *e_labels, *e_positions, *e_loss, *e_status;
    uint64_t submits;
    int pending; /* micro-batches accumulated since the last optimizer step */
};

wgml_model *train_model(wgml_trainer *t) { return t->model; }

wgml_train_config wgml_train_defaults(void) {
    return (wgml_train_config){.mode = WGML_TRAIN_LORA,
                               .lora_rank = 8,
                               .lora_alpha = 16.0f,
                               .targets = WGML_TARGET_Q | WGML_TARGET_V,
                               .batch = 1,
                               .seq_len = 64,
                               .lr = 2e-4f,
                               .weight_decay = 0.01f,
                               .beta1 = 0.9f,
                               .beta2 = 0.999f,
                               .eps = 1e-8f,
                               .clip_norm = 1.0f,
                               .seed = 0,
                               .grad_accum = 1};
}

void wgml_trainer_free(wgml_trainer *t) {
    if (!t) return;
    wgml_adamw_free(t->opt);
    wgml_graph_free(t->gr);
    wgml_graph_free(t->ge); /* holds views of g's tensors: first */
    wgml_graph_free(t->g);
    free(t->params);
    free(t->lora);
    free(t->elora);
    free(t->lora_p);
    free(t->elora_p);
    free(t->cat_p);
    free(t->ecat_p);
    free(t->latent_p);
    free(t);
}

static wgml_status check_config(wgml_ctx *ctx, const wgml_train_config *c) {
    const char *op = "trainer_new";
    if (!c) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: config is NULL", op);
    if (c->mode != WGML_TRAIN_LORA && c->mode != WGML_TRAIN_STE) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: unknown mode %d", op, (int)c->mode);
    if (c->mode == WGML_TRAIN_LORA && (c->lora_rank < 1 || !(c->lora_alpha > 0) || !isfinite(c->lora_alpha)))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: lora_rank %d and lora_alpha %g must be positive", op, c->lora_rank,
                              (double)c->lora_alpha);
    if (!(c->targets & WGML_TARGET_ALL) || (c->targets & ~(unsigned)WGML_TARGET_ALL))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: targets 0x%x must be a non-empty set of WGML_TARGET_* bits", op,
                              c->targets);
    if (c->batch < 1 || c->seq_len < 1 || (int64_t)c->batch * c->seq_len > (1 << 24))
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: batch %d x seq_len %d must be positive (at most 2^24 tokens)", op,
                              c->batch, c->seq_len);
    if (c->grad_accum < 1 || c->grad_accum > 4096)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: grad_accum %d must be 1 .. 4096 micro-batches per step", op,
                              c->grad_accum);
    return WGML_OK;
}

/* Writes the dequantised weight w into the latent param (a small graph run once). */
static wgml_status latent_init(wgml_trainer *t, const wgml_qweight *w, wgml_tensor *param) {
    wgml_graph *g0 = wgml_graph_new(t->ctx);
    if (!g0) return wgml_last_status(t->ctx);
    wgml_qweight q;
    wgml_tensor *d = qw_weight_share(g0, w, &q) ? NULL : wgml_qweight_dequantize(g0, &q);
    float *h = malloc(wgml_tensor_nbytes(param));
    wgml_status s = !h ? wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_new: out of host memory") : WGML_OK;
    if (!s && (!d || wgml_graph_keep(g0, d) || wgml_graph_compile(g0) || wgml_graph_run(g0) ||
               wgml_tensor_read(d, h, wgml_tensor_nbytes(param))))
        s = wgml_last_status(t->ctx);
    if (!s) s = wgml_tensor_write(param, h, wgml_tensor_nbytes(param));
    free(h);
    wgml_graph_free(g0);
    return s;
}

/* The parameter list: LoRA A and B per targeted linear, or (STE) a latent per targeted 4-bit
 * linear. */
static wgml_status list_params(wgml_trainer *t, int64_t *capacity) {
    const wgml_llama_config *mc = wgml_model_config(t->model);
    const wgml_train_config *c = &t->cfg;
    int ste = c->mode == WGML_TRAIN_STE;
    t->params = calloc((size_t)(mc->n_layer * DECODER_N_TARGETS * 2), sizeof *t->params);
    if (!t->params) return wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_new: out of host memory");
    *capacity = 0;
    t->n = 0;
    for (int64_t l = 0; l < mc->n_layer; l++)
        for (int k = 0; k < DECODER_N_TARGETS; k++) {
            if (!((c->targets >> k) & 1)) continue;
            int64_t N, K;
            decoder_target_dims(t->model, k, &N, &K);
            if (ste) {
                const wgml_qweight *q = decoder_target_qw(t->model, l, k);
                int ty = decoder_target_gguf_type(t->model, l, k);
                /* straight-through trains the weights the GGUF export can write back (Q4_0,
                 * Q4_1); requant itself runs for every quantised kind */
                if (!q || (ty != WGML_GGML_Q4_0 && ty != WGML_GGML_Q4_1)) continue;
            }
            for (int ab = 0; ab < (ste ? 1 : 2); ab++) {
                tparam *p = &t->params[t->n++];
                p->layer = l;
                p->target = k;
                if (ste)
                    snprintf(p->name, sizeof p->name, "blk.%lld.%s.latent", (long long)l, decoder_target_names[k]);
                else
                    snprintf(p->name, sizeof p->name, "blk.%lld.%s.lora_%c", (long long)l, decoder_target_names[k],
                             ab ? 'b' : 'a');
                p->shape[0] = ste ? N : ab ? N : c->lora_rank;
                p->shape[1] = ste ? K : ab ? c->lora_rank : K;
                *capacity += wgml_adamw_padded(p->shape[0] * p->shape[1]);
            }
        }
    if (t->n == 0)
        return wgml_set_error(t->ctx, WGML_ERR_ARG,
                              "trainer_new: no trainable tensor (straight-through training needs 4-bit Q4_0/Q4_1 weights "
                              "among the targets 0x%x)",
                              c->targets);
    return WGML_OK;
}

static wgml_status fill_adapter_tables(wgml_trainer *t);

/* The parameters' places in the optimizer's buffers, layer by layer: LoRA's A's of a layer first
 * (in target order), then its B's, so that the A's of targets sharing an input are adjacent
 * (stack_groups). */
static wgml_status alloc_params(wgml_trainer *t) {
    int ste = t->cfg.mode == WGML_TRAIN_STE;
    for (int i0 = 0, i1; i0 < t->n; i0 = i1) {
        for (i1 = i0; i1 < t->n && t->params[i1].layer == t->params[i0].layer;) i1++;
        for (int pass = 0; pass < (ste ? 1 : 2); pass++)
            for (int i = i0; i < i1; i++) {
                tparam *p = &t->params[i];
                if (!ste && (i & 1) != pass) continue; /* LoRA: a and b alternate in the list */
                p->offset = wgml_adamw_used(t->opt);
                if (!(p->p = wgml_adamw_param(t->opt, 2, p->shape))) return wgml_last_status(t->ctx);
            }
    }
    return WGML_OK;
}

/* The shared-input groups below are the default ($WGML_LORA_SHARED=0 keeps the adapters one by
 * one): their down-projections and A gradients are one product a group, and over 4-bit bases
 * the up-projections stay folded into the bases' products (lora_qlinear_shared). H100, 8 x 512,
 * r16 on all seven: SmolLM2's step 147.4 -> 145.1 ms, Llama-3.2-1B's shape 763.1 -> 759.1
 * (bench/NOTES.md, 2026-12-06 fifteenth session); lavapipe 8-17% a step. */
static bool lora_shared_on(void) {
    const char *e = getenv("WGML_LORA_SHARED");
    return !e || strcmp(e, "0");
}

/* LoRA: for each layer's q/k/v and gate/up, when two or more of them are adapted and their A's
 * lie back to back, one trainable [n·r, K] view over those A's (and its gradient over theirs):
 * the train graph reads the A's through it alone (lora_apply_shared), the A's themselves are
 * not marked trainable, and AdamW updates the same memory. */
static wgml_status stack_groups(wgml_trainer *t) {
    static const int first[2] = {0 /* T_Q */, 4 /* T_GATE */}, count[2] = {3, 2};
    wgml_tensor *fp = wgml_adamw_buffer(t->opt, WGML_ADAMW_PARAMS), *fg = wgml_adamw_buffer(t->opt, WGML_ADAMW_GRADS);
    for (int i0 = 0, i1; i0 < t->n; i0 = i1) {
        for (i1 = i0; i1 < t->n && t->params[i1].layer == t->params[i0].layer;) i1++;
        for (int gi = 0; gi < 2; gi++) {
            int idx[3], k = 0;
            for (int i = i0; i < i1; i += 2) /* the A's (even entries) of this group's targets */
                if (t->params[i].target >= first[gi] && t->params[i].target < first[gi] + count[gi]) idx[k++] = i;
            bool adjacent = k >= 2;
            for (int j = 1; j < k && adjacent; j++) {
                const tparam *a = &t->params[idx[j - 1]], *b = &t->params[idx[j]];
                adjacent = b->offset == a->offset + a->shape[0] * a->shape[1] && b->shape[1] == a->shape[1];
            }
            if (!adjacent) continue;
            const tparam *p0 = &t->params[idx[0]];
            int64_t shape[2] = {k * p0->shape[0], p0->shape[1]};
            wgml_tensor *cat = wgml_tensor_view(fp, p0->offset, 2, shape), *gv = wgml_tensor_view(fg, p0->offset, 2, shape);
            if (!cat || !gv || wgml_tensor_set_trainable(cat, 1) || wgml_tensor_set_grad(cat, gv, t->cfg.grad_accum > 1))
                return wgml_last_status(t->ctx);
            int64_t e = p0->layer * DECODER_N_TARGETS + first[gi];
            t->cat_p[e] = cat;
            if (!(t->ecat_p[e] = wgml_tensor_share(t->ge, cat))) return wgml_last_status(t->ctx);
            for (int j = 0; j < k; j++) t->params[idx[j]].stacked = true;
        }
    }
    return WGML_OK;
}

/* Creates the parameters (views of the optimizer's buffers) with their initial values. */
static wgml_status make_params(wgml_trainer *t) {
    const wgml_llama_config *mc = wgml_model_config(t->model);
    const wgml_train_config *c = &t->cfg;
    int ste = c->mode == WGML_TRAIN_STE;
    int64_t slots = mc->n_layer * DECODER_N_TARGETS, capacity = 0;
    wgml_status s = list_params(t, &capacity);
    if (s) return s;
    t->lora = calloc((size_t)slots, sizeof *t->lora);
    t->elora = calloc((size_t)slots, sizeof *t->elora);
    t->lora_p = calloc((size_t)slots, sizeof *t->lora_p);
    t->elora_p = calloc((size_t)slots, sizeof *t->elora_p);
    t->latent_p = calloc((size_t)slots, sizeof *t->latent_p);
    t->cat_p = calloc((size_t)slots, sizeof *t->cat_p);
    t->ecat_p = calloc((size_t)slots, sizeof *t->ecat_p);
    if (!t->lora || !t->elora || !t->lora_p || !t->elora_p || !t->latent_p || !t->cat_p || !t->ecat_p)
        return wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_new: out of host memory");
    wgml_adamw_config ac = {.lr = c->lr,
                            .beta1 = c->beta1,
                            .beta2 = c->beta2,
                            .eps = c->eps,
                            .weight_decay = c->weight_decay,
                            .max_grad_norm = c->clip_norm > 0 ? c->clip_norm : 0,
                            .capacity = capacity};
    if (!(t->opt = wgml_adamw_new(t->g, &ac))) return wgml_last_status(t->ctx);
    wgml_tensor *fm = wgml_adamw_buffer(t->opt, WGML_ADAMW_M), *fv = wgml_adamw_buffer(t->opt, WGML_ADAMW_V);
    int64_t maxn = 0;
    for (int i = 0; i < t->n; i++)
        if (t->params[i].shape[0] * t->params[i].shape[1] > maxn) maxn = t->params[i].shape[0] * t->params[i].shape[1];
    float *h = ste ? NULL : malloc(sizeof(float) * (size_t)maxn);
    if (!ste && !h) return wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_new: out of host memory");
    uint64_t rng = c->seed;
    s = alloc_params(t);
    if (!s && !ste && lora_shared_on()) s = stack_groups(t);
    for (int i = 0; i < t->n && !s; i++) {
        tparam *p = &t->params[i];
        int64_t numel = p->shape[0] * p->shape[1];
        wgml_tensor *gv = wgml_adamw_grad(t->opt, p->p);
        p->m = gv ? wgml_tensor_view(fm, p->offset, 2, p->shape) : NULL;
        p->v = p->m ? wgml_tensor_view(fv, p->offset, 2, p->shape) : NULL;
        /* with gradient accumulation the backward adds into the grads; the step clears them */
        if (!p->v || (!p->stacked && (wgml_tensor_set_trainable(p->p, 1) ||
                                      wgml_tensor_set_grad(p->p, gv, c->grad_accum > 1)))) {
            s = wgml_last_status(t->ctx);
            break;
        }
        if (ste) {
            t->latent_p[p->layer * DECODER_N_TARGETS + p->target] = p->p;
            s = latent_init(t, decoder_target_qw(t->model, p->layer, p->target), p->p);
            continue;
        }
        int is_b = (i & 1) != 0;
        double bound = 1.0 / sqrt((double)p->shape[1]);
        for (int64_t j = 0; j < numel; j++)
            h[j] = is_b ? 0.0f : (float)((2.0 * (double)(splitmix64(&rng) >> 11) * 0x1p-53 - 1.0) * bound);
        s = wgml_tensor_write(p->p, h, sizeof(float) * (size_t)numel);
    }
    free(h);
    return s || ste ? s : fill_adapter_tables(t);
}

/* LoRA: the adapter tables of the train graph (the parameters) and of the eval graph (shared
 * into it): entry l*7 + k; a and b are consecutive parameters. */
static wgml_status fill_adapter_tables(wgml_trainer *t) {
    const wgml_train_config *c = &t->cfg;
    int64_t r = c->lora_rank;
    for (int i = 0; i < t->n; i += 2) {
        int64_t e = t->params[i].layer * DECODER_N_TARGETS + t->params[i].target;
        wgml_lora *lo = &t->lora[e];
        lo->a = t->params[i].p;
        lo->b = t->params[i + 1].p;
        lo->n = t->params[i + 1].shape[0];
        lo->k = t->params[i].shape[1];
        lo->r = r;
        lo->scale = c->lora_alpha / (float)r;
        t->lora_p[e] = lo;
        wgml_lora *el = &t->elora[e];
        *el = *lo;
        el->a = wgml_tensor_share(t->ge, lo->a);
        el->b = el->a ? wgml_tensor_share(t->ge, lo->b) : NULL;
        if (!el->b) return wgml_last_status(t->ctx);
        t->elora_p[e] = el;
    }
    return WGML_OK;
}

/* STE: records the requant of every latent into g (latents: g's own when own, else shared). */
static wgml_status record_requant(wgml_trainer *t, wgml_graph *g, int own) {
    for (int i = 0; i < t->n; i++) {
        tparam *p = &t->params[i];
        wgml_qweight q;
        if (qw_weight_share(g, decoder_target_qw(t->model, p->layer, p->target), &q)) return wgml_last_status(t->ctx);
        wgml_tensor *lat = own ? p->p : wgml_tensor_share(g, p->p);
        if (!lat) return wgml_last_status(t->ctx);
        wgml_status s = wgml_qweight_requant(g, lat, &q);
        if (s) return s;
    }
    return WGML_OK;
}

static wgml_status build(wgml_trainer *t) {
    const wgml_train_config *c = &t->cfg;
    int64_t B = c->batch, S = c->seq_len, T = t->T;
    int64_t ce_status_words = 3; /* the eval loss's wgml_ce_options.status: i32 [3] */
    if (!(t->g = wgml_graph_new(t->ctx)) || !(t->ge = wgml_graph_new(t->ctx))) return wgml_last_status(t->ctx);
    wgml_status s = make_params(t);
    if (s) return s;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)S);
    if (!pos) return wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_new: out of host memory");
    for (int64_t i = 0; i < S; i++) pos[i] = (int32_t)i;
    /* train graph */
    wgml_graph *g = t->g;
    t->ids = wgml_tensor_new(g, WGML_I32, 1, &T);
    t->labels = wgml_tensor_new(g, WGML_I32, 1, &T);
    t->positions = wgml_tensor_new(g, WGML_I32, 1, &S);
    t->e_ids = wgml_tensor_new(t->ge, WGML_I32, 1, &T);
    t->e_labels = wgml_tensor_new(t->ge, WGML_I32, 1, &T);
    t->e_positions = wgml_tensor_new(t->ge, WGML_I32, 1, &S);
    t->e_status = wgml_tensor_new(t->ge, WGML_I32, 1, &ce_status_words);
    if (!t->positions || !t->e_positions || !t->e_status || !t->ids || !t->labels || !t->e_ids || !t->e_labels ||
        wgml_tensor_write(t->positions, pos, sizeof(int32_t) * (size_t)S) ||
        wgml_tensor_write(t->e_positions, pos, sizeof(int32_t) * (size_t)S)) {
        free(pos);
        return wgml_last_status(t->ctx);
    }
    free(pos);
    int ste = c->mode == WGML_TRAIN_STE;
    /* the fused head: loss without the [T, V] logits; its autograd rule gives h its gradient */
    decoder_adapters ad = {.lora = ste ? NULL : t->lora_p, .lora_cat = ste ? NULL : t->cat_p,
                           .latent = ste ? t->latent_p : NULL};
    wgml_tensor *h = decoder_forward_train_hidden(t->model, g, t->ids, t->positions, B, S, &ad);
    t->loss = h ? decoder_lmhead_ce(t->model, g, h, t->labels, NULL) : NULL;
    /* grad_accum micro-batches: each loss weighs 1 / grad_accum; the step runs on every
     * grad_accum-th run (wgml_adamw_set_apply) and clears the summed gradients */
    int acc = c->grad_accum > 1;
    if (!t->loss || wgml_graph_keep(g, t->loss) || wgml_backward(g, t->loss, 1.0f / (float)c->grad_accum) ||
        wgml_adamw_step(g, t->opt) || (acc && wgml_adamw_zero_grad_after_step(g, t->opt)) ||
        (ste && record_requant(t, g, 1)) || wgml_graph_compile(g))
        return wgml_last_status(t->ctx);
    if (ste && (!(t->gr = wgml_graph_new(t->ctx)) || record_requant(t, t->gr, 0) || wgml_graph_compile(t->gr)))
        return wgml_last_status(t->ctx);
    /* eval graph */
    wgml_ce_options ce = {.grad_scale = NULL, .status = t->e_status};
    decoder_adapters ead = {.lora = ste ? NULL : t->elora_p, .lora_cat = ste ? NULL : t->ecat_p};
    wgml_tensor *eh = decoder_forward_train_hidden(t->model, t->ge, t->e_ids, t->e_positions, B, S, &ead);
    t->e_loss = eh ? decoder_lmhead_ce(t->model, t->ge, eh, t->e_labels, &ce) : NULL;
    if (!t->e_loss || wgml_graph_keep(t->ge, t->e_loss) || wgml_graph_compile(t->ge)) return wgml_last_status(t->ctx);
    return WGML_OK;
}

wgml_trainer *wgml_trainer_new(wgml_model *m, const wgml_train_config *cfg) {
    wgml_ctx *ctx = decoder_ctx(m);
    if (!m) {
        wgml_set_error(NULL, WGML_ERR_ARG, "trainer_new: model is NULL");
        return NULL;
    }
    if (check_config(ctx, cfg)) return NULL;
    wgml_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        wgml_set_error(ctx, WGML_ERR_OOM, "trainer_new: out of host memory");
        return NULL;
    }
    t->model = m;
    t->ctx = ctx;
    t->cfg = *cfg;
    t->T = (int64_t)cfg->batch * cfg->seq_len;
    if (build(t)) {
        wgml_trainer_free(t);
        return NULL;
    }
    return t;
}

/* Checks tokens and labels and writes them into ids / labels. */
static wgml_status write_batch(wgml_trainer *t, const char *op, const int32_t *tokens, const int32_t *labels,
                               wgml_tensor *ids, wgml_tensor *lab) {
    if (!tokens || !labels) return wgml_set_error(t->ctx, WGML_ERR_ARG, "%s: tokens or labels is NULL", op);
    int64_t V = wgml_model_config(t->model)->n_vocab;
    for (int64_t i = 0; i < t->T; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            return wgml_set_error(t->ctx, WGML_ERR_ARG, "%s: tokens[%lld] = %d is outside the vocabulary [0, %lld)", op,
                                  (long long)i, (int)tokens[i], (long long)V);
        if (labels[i] >= V)
            return wgml_set_error(t->ctx, WGML_ERR_ARG, "%s: labels[%lld] = %d is not below the vocabulary size %lld", op,
                                  (long long)i, (int)labels[i], (long long)V);
    }
    size_t bytes = sizeof(int32_t) * (size_t)t->T;
    wgml_status s = wgml_tensor_write(ids, tokens, bytes);
    return s ? s : wgml_tensor_write(lab, labels, bytes);
}

wgml_status wgml_trainer_step(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, float lr, float *loss) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "trainer_step: trainer is NULL");
    if (!(lr >= 0) || !isfinite(lr))
        return wgml_set_error(t->ctx, WGML_ERR_ARG, "trainer_step: lr %g must be finite and >= 0", (double)lr);
    uint64_t s0 = wgml_submit_count(t->ctx);
    wgml_status s = write_batch(t, "trainer_step", tokens, labels, t->ids, t->labels);
    if (!s) s = wgml_adamw_set_lr(t->opt, lr);
    bool steps = t->pending + 1 >= t->cfg.grad_accum; /* this micro-batch ends a step */
    if (!s) s = wgml_adamw_set_apply(t->opt, steps);
    if (!s) s = wgml_graph_run(t->g);
    float l = 0;
    if (!s) s = wgml_tensor_read(t->loss, &l, sizeof l);
    if (!s) t->pending = steps ? 0 : t->pending + 1;
    if (!s && loss) *loss = l;
    t->submits = wgml_submit_count(t->ctx) - s0;
    return s;
}

wgml_status wgml_trainer_eval(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, double *loss_sum,
                              int64_t *n_valid) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "trainer_eval: trainer is NULL");
    wgml_status s = write_batch(t, "trainer_eval", tokens, labels, t->e_ids, t->e_labels);
    if (!s) s = wgml_graph_run(t->ge);
    float l = 0;
    int32_t status[3] = {0}; /* rows with a label >= V, the first such row, n_valid */
    if (!s) s = wgml_tensor_read(t->e_loss, &l, sizeof l);
    if (!s) s = wgml_tensor_read(t->e_status, status, sizeof status);
    if (s) return s;
    if (loss_sum) *loss_sum = (double)l * status[2];
    if (n_valid) *n_valid = status[2];
    return WGML_OK;
}

int wgml_trainer_tensor_count(const wgml_trainer *t) { return t ? t->n : 0; }

const char *wgml_trainer_tensor_name(const wgml_trainer *t, int i) {
    return t && i >= 0 && i < t->n ? t->params[i].name : NULL;
}

static wgml_status check_index(wgml_trainer *t, const char *op, int i) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: trainer is NULL", op);
    if (i < 0 || i >= t->n)
        return wgml_set_error(t->ctx, WGML_ERR_ARG, "%s: tensor index %d is outside [0, %d)", op, i, t->n);
    return WGML_OK;
}

wgml_status wgml_trainer_tensor_shape(const wgml_trainer *t, int i, int *rank, int64_t shape[4]) {
    wgml_status s = check_index((wgml_trainer *)t, "trainer_tensor_shape", i);
    if (s) return s;
    if (rank) *rank = 2;
    if (shape) {
        shape[0] = t->params[i].shape[0];
        shape[1] = t->params[i].shape[1];
        shape[2] = shape[3] = 1;
    }
    return WGML_OK;
}

static wgml_tensor *state_tensor(wgml_trainer *t, const char *op, int i, int what) {
    if (check_index(t, op, i)) return NULL;
    if (what < 0 || what > 2) {
        wgml_set_error(t->ctx, WGML_ERR_ARG, "%s: what %d must be 0 (param), 1 (m) or 2 (v)", op, what);
        return NULL;
    }
    return what == 0 ? t->params[i].p : what == 1 ? t->params[i].m : t->params[i].v;
}

wgml_status wgml_trainer_read_state(wgml_trainer *t, int i, int what, float *out) {
    wgml_tensor *x = state_tensor(t, "trainer_read_state", i, what);
    if (!x) return t ? wgml_last_status(t->ctx) : WGML_ERR_ARG;
    return wgml_tensor_read(x, out, wgml_tensor_nbytes(x));
}

wgml_status wgml_trainer_write_state(wgml_trainer *t, int i, int what, const float *in) {
    wgml_tensor *x = state_tensor(t, "trainer_write_state", i, what);
    if (!x) return t ? wgml_last_status(t->ctx) : WGML_ERR_ARG;
    wgml_status s = wgml_tensor_write(x, in, wgml_tensor_nbytes(x));
    /* STE: the model's codes follow the latents at once */
    if (!s && what == 0 && t->gr) s = wgml_graph_run(t->gr);
    return s;
}

/* Blob: magic, version, then the optimizer's u32 [8] state words. */
#define OPT_MAGIC 0x54534757u /* "WGST" */
#define OPT_WORDS 8

wgml_status wgml_trainer_read_opt_state(wgml_trainer *t, void *buf, size_t *bytes) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "trainer_read_opt_state: trainer is NULL");
    uint32_t w[2 + OPT_WORDS] = {OPT_MAGIC, 1};
    if (!buf || !bytes || *bytes < sizeof w)
        return wgml_set_error(t->ctx, WGML_ERR_ARG, "trainer_read_opt_state: needs a buffer of %zu bytes", sizeof w);
    wgml_status s = wgml_tensor_read(wgml_adamw_buffer(t->opt, WGML_ADAMW_STATE), w + 2, OPT_WORDS * sizeof(uint32_t));
    if (s) return s;
    memcpy(buf, w, sizeof w);
    *bytes = sizeof w;
    return WGML_OK;
}

wgml_status wgml_trainer_write_opt_state(wgml_trainer *t, const void *buf, size_t bytes) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "trainer_write_opt_state: trainer is NULL");
    uint32_t w[2 + OPT_WORDS];
    if (!buf || bytes != sizeof w)
        return wgml_set_error(t->ctx, WGML_ERR_ARG, "trainer_write_opt_state: %zu bytes given, a state is %zu", bytes,
                              sizeof w);
    memcpy(w, buf, sizeof w);
    if (w[0] != OPT_MAGIC || w[1] != 1)
        return wgml_set_error(t->ctx, WGML_ERR_FORMAT, "trainer_write_opt_state: not an optimizer state (magic/version)");
    wgml_status s = wgml_tensor_write(wgml_adamw_buffer(t->opt, WGML_ADAMW_STATE), w + 2, OPT_WORDS * sizeof(uint32_t));
    /* a restored state is a step boundary: gradients accumulated since the last step go */
    if (!s && t->pending) {
        wgml_tensor *gr = wgml_adamw_buffer(t->opt, WGML_ADAMW_GRADS);
        void *z = calloc(1, wgml_tensor_nbytes(gr));
        s = z ? wgml_tensor_write(gr, z, wgml_tensor_nbytes(gr)) : wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_write_opt_state: out of host memory");
        free(z);
        if (!s) t->pending = 0;
    }
    return s;
}

uint64_t wgml_trainer_submits_per_step(const wgml_trainer *t) { return t ? t->submits : 0; }
int wgml_trainer_pending(const wgml_trainer *t) { return t ? t->pending : 0; }
wgml_train_config wgml_trainer_config(const wgml_trainer *t) { return t ? t->cfg : wgml_train_defaults(); }
wgml_graph *wgml_trainer_graph(wgml_trainer *t) { return t ? t->g : NULL; }

wgml_graph *wgml_trainer_eval_graph(wgml_trainer *t) { return t ? t->ge : NULL; }

wgml_status wgml_trainer_attach_lora(wgml_trainer *t) {
    if (!t) return wgml_set_error(NULL, WGML_ERR_ARG, "trainer_attach_lora: trainer is NULL");
    if (t->cfg.mode == WGML_TRAIN_STE) return WGML_OK; /* the model's own codes are trained */
    const char **names = calloc((size_t)t->n, sizeof *names);
    float **data = calloc((size_t)t->n, sizeof *data);
    wgml_status s = names && data ? WGML_OK : wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_attach_lora: out of host memory");
    for (int i = 0; i < t->n && !s; i++) {
        names[i] = t->params[i].name;
        data[i] = malloc(sizeof(float) * (size_t)(t->params[i].shape[0] * t->params[i].shape[1]));
        if (!data[i]) s = wgml_set_error(t->ctx, WGML_ERR_OOM, "trainer_attach_lora: out of host memory");
        else s = wgml_trainer_read_state(t, i, 0, data[i]);
    }
    if (!s) s = wgml_model_set_lora(t->model, t->cfg.lora_rank, t->cfg.lora_alpha, t->n, names, (const float *const *)data);
    for (int i = 0; data && i < t->n; i++) free(data[i]);
    free(data);
    free(names);
    return s;
}
