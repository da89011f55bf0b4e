/* LoRA adapters on a linear or a 4-bit linear: y = base(x) + scale·(x·Aᵀ)·Bᵀ with
 * A [r, K], B [N, r], scale = alpha / r. The base stays frozen; A and B are trainable.
 * Init as PEFT's default (which is PyTorch's nn.Linear init for A): A ~ U(−1/√K, 1/√K)
 * (kaiming_uniform with a = √5), B = 0, so the adapted layer starts equal to the base. */
#include "ops/lora/lora.h"

#include "gpu/gpu.h"
#include "ops/matmul/matmul_into.h"
#include "ops/qweight/qw_internal.h"
#include "tensor/splitmix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    wgml_tensor *y = h ? matmul_add_linear(g, "lora_apply", base_out, h, l->b, l->scale) : NULL;
    wgml_tensor_free(h); /* eager: the recorded dispatches hold its range; built graph: no-op */
    return y;
}

/* The adapter over a base product recorded here (freed alike once the adapter has read it). */
static wgml_tensor *apply_to_base(wgml_graph *g, wgml_tensor *x, wgml_tensor *base, const wgml_lora *l) {
    wgml_tensor *y = wgml_lora_apply(g, x, base, l);
    wgml_tensor_free(base);
    return y;
}

wgml_tensor *wgml_lora_linear(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias, const wgml_lora *l) {
    return apply_to_base(g, x, wgml_linear(g, x, w, bias), l);
}

/* ---- an adapter folded into its 4-bit base's product (the default; $WGML_LORA_FOLD=0: not) ----
 * y = x·Wᵀ + s·H·Bᵀ with H = x·Aᵀ [M, r] first: the base's tiled product adds s·H·Bᵀ as a few
 * more steps of its reduction (qw_lora_term), so the up-projection makes no pass over y of its
 * own. Backward (op "lora_qlinear"; inputs x, A, B and H, which takes no gradient):
 *   dH = s·dy·B;  dB = s·dyᵀ·H;  dA = dHᵀ·x;  dx = dy·W + dH·A,
 * the last the input gradient's tiled product with dH·A folded in alike. On by default: the
 * SmolLM2 8 x 512 r16 step 157.1 -> 149.5 ms and Llama-3.2-1B's 785.6 -> 775.7 on an H100
 * (docs/PERFORMANCE.md, train_step); $WGML_LORA_FOLD=0 keeps the separate products. */

typedef struct lora_q_attrs {
    wgml_qweight w;
    float scale;
} lora_q_attrs;
_Static_assert(sizeof(lora_q_attrs) <= GRAPH_OP_ATTR_BYTES, "the folded adapter's attributes must fit");

static bool lora_fold_on(void) {
    const char *e = getenv("WGML_LORA_FOLD");
    return !(e && !strcmp(e, "0"));
}

static wgml_status lora_qlinear_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    lora_q_attrs at;
    memcpy(&at, op->attrs, sizeof at);
    wgml_tensor *x = op->in[0], *a = op->in[1], *b = op->in[2], *h = op->in[3];
    int64_t n = at.w.n, k = at.w.k, r = h->shape[1], m = x->numel / k, dy2[2] = {m, n};
    wgml_tensor *dyf = wgml_reshape(g, dy, 2, dy2), *dh = NULL;
    bool want_x = graph_op_wants(op, 0), want_a = graph_op_wants(op, 1);
    if (dyf && (want_x || want_a)) dh = matmul_scaled(g, "lora_dx", dyf, b, 0, 0, m, r, n, at.scale, NULL, false);
    if (graph_op_wants(op, 2) && dyf) { /* straight into the caller's gradient tensors when they can */
        bool acc = false;
        wgml_tensor *db = graph_grad_sink(op, 2, &acc);
        if (!db) db = graph_output(g, "lora_dw", WGML_F32, 2, b->shape);
        dx[2] = db && matmul_scaled(g, "lora_dw", dyf, h, 1, 0, n, r, m, at.scale, db, acc) ? db : NULL;
    }
    if (want_a && dh) {
        bool acc = false;
        wgml_tensor *da = graph_grad_sink(op, 1, &acc);
        if (!da) da = graph_output(g, "linear_dw", WGML_F32, 2, a->shape);
        dx[1] = da && !wgml_linear_dw(g, dh, x, da, acc) ? da : NULL;
    }
    if (want_x && dh) {
        qw_lora_term lt = {.l = dh, .r = a, .rank = r, .scale = 1.0f};
        qw_mm_dest d = {.lora = &lt};
        dx[0] = qw_record_mm(g, "qlinear_dx", dyf, &at.w, 1, m, x->rank, x->shape, &d);
    }
    return grad_result(g, op, dx);
}

wgml_tensor *wgml_lora_qlinear(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, const wgml_lora *l) {
    if (!g) return NULL;
    if (!lora_fold_on() || !l) return apply_to_base(g, x, wgml_qlinear(g, x, w), l);
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "lora_qlinear";
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK) || !qw_weight_valid(ctx, op, "w", w))
        return NULL;
    if (l->k != w->k || l->n != w->n || x->shape[x->rank - 1] != w->k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: x %s, the weight [%lld, %lld] and the adapter (n %lld, k %lld) must agree",
                       op, tshape(x), (long long)w->n, (long long)w->k, (long long)l->n, (long long)l->k);
        return NULL;
    }
    int64_t m = x->numel / w->k;
    wgml_tensor *h = matmul_scaled(g, "lora_h", x, l->a, 0, 1, m, l->r, w->k, 1.0f, NULL, false);
    qw_lora_term lt = {.l = h, .r = l->b, .rank = l->r, .scale = l->scale};
    wgml_tensor *y = h ? qw_linear_product_ex(g, "qlinear", x, w, &lt) : NULL;
    graph_op rec = {.name = op, .backward = lora_qlinear_backward, .n_in = 4, .in = {x, l->a, l->b, h}, .out = y};
    lora_q_attrs at = {.w = *w, .scale = l->scale}; /* the struct's tensors belong to the graph */
    memcpy(rec.attrs, &at, sizeof at);
    y = y ? graph_record_op(g, &rec) : NULL;
    wgml_tensor_free(h); /* eager (no rule keeps it): freed once read; built graph: no-op */
    return y;
}

/* ---- adapters sharing an input ----
 * Forward: H = [x·A_0ᵀ; ..; x·A_{n-1}ᵀ] as [n, M, r], one batched product (x read by every
 * batch, A_i at rows i·r of A_cat), so that adapter i's H_i [M, r] is a contiguous view; then
 * y_i = base_i + s_i·H_i·B_iᵀ, one product each with base_i added in its epilogue (the
 * orientations of wgml_lora_apply's products).
 * Backward of y_i (op "lora_up"): dbase_i = dy_i; dB_i = s_i·dy_iᵀ·H_i; and dH_i = s_i·dy_i·B_i,
 * written in place into block i of one [n, M, r] tensor that becomes H's gradient: the first up
 * rule to run (rules run in reverse record order, and every consumer of the y's was recorded
 * after them) creates it and returns it as its H gradient, zero-filled when some y carries no
 * gradient; the later ones write their block into H's running sum and return none, so no
 * [n, M, r] partial sums are added.
 * Backward of H (op "lora_h"): dA_i = dH_iᵀ·x for every i as one batched product straight into
 * A_cat's gradient ([n, r, K] is [n·r, K]), and dx = Σ_i dH_i·A_i as one batched product into
 * n slices summed in order by the matmul family's split-K reduction: two dispatches where
 * separate adapters take n products and n - 1 adds. */

typedef struct lora_up_attrs {
    int i, n;
    int64_t r, m;
    float scale;
    wgml_tensor *outs[LORA_GROUP_MAX]; /* every y of the group (is one without a gradient?) */
} lora_up_attrs;

/* Block i of a [n, m, r] tensor as a [m, r] view. */
static wgml_tensor *block(wgml_graph *g, wgml_tensor *t, int64_t i, int64_t m, int64_t r) {
    int64_t shape[2] = {m, r};
    return graph_view(g, t, "lora_h", (uint64_t)(i * m * r) * sizeof(float), 2, shape);
}

/* Block i of H's gradient [n, M, r] for the rule of the group's output i (outs: every output
 * of the group): the first rule to run creates the gradient (zero-filled when some output carries
 * none) and gets it in *first_dh, to return as H's; a later one gets NULL there and writes its
 * block into the running sum. NULL on failure. */
static wgml_tensor *h_grad_block(wgml_graph *g, wgml_tensor *h, wgml_tensor *const *outs, int n, int i,
                                 wgml_tensor **first_dh) {
    wgml_tensor *dh = h->grad_sum;
    *first_dh = NULL;
    if (!dh) {
        if (!(dh = graph_output(g, "lora_dx", WGML_F32, 3, h->shape))) return NULL;
        bool all = true;
        for (int j = 0; j < n; j++) all = all && (j == i || outs[j]->grad_sum);
        if (!all && wgml_fill(g, dh, 0.0)) return NULL;
        *first_dh = dh;
    }
    return block(g, dh, i, h->shape[1], h->shape[2]);
}

static wgml_status lora_up_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    const lora_up_attrs *a = (const lora_up_attrs *)op->attrs;
    wgml_tensor *h = op->in[1], *b = op->in[2];
    int64_t r = a->r, m = a->m, nn = b->shape[0], d2[2] = {m, nn};
    wgml_tensor *dyf = wgml_reshape(g, dy, 2, d2);
    if (!dyf) return wgml_last_status(graph_ctx(g));
    if (graph_op_wants(op, 0)) dx[0] = dy;
    if (graph_op_wants(op, 2)) { /* straight into the caller's gradient tensor when it can */
        bool acc = false;
        wgml_tensor *db = graph_grad_sink(op, 2, &acc), *hi = block(g, h, a->i, m, r);
        if (!db) db = graph_output(g, "lora_dw", WGML_F32, 2, b->shape);
        if (!hi || !db || !matmul_scaled(g, "lora_dw", dyf, hi, 1, 0, nn, r, m, a->scale, db, acc))
            return wgml_last_status(graph_ctx(g));
        dx[2] = db;
    }
    if (graph_op_wants(op, 1)) {
        wgml_tensor *dh = NULL, *blk = h_grad_block(g, h, a->outs, a->n, a->i, &dh);
        if (!blk || !matmul_scaled(g, "lora_dx", dyf, b, 0, 0, m, r, nn, a->scale, blk, false))
            return wgml_last_status(graph_ctx(g));
        dx[1] = dh; /* later blocks land in the running sum itself */
    }
    return WGML_OK;
}

/* Op "lora_h": its attributes hold x flattened [M, K]; in[0] is x too unless the group is
 * folded (lora_qlinear_shared), where each adapter's dH_i·A_i is in its 4-bit input gradient's
 * product and this rule gives dA alone. */
typedef struct lora_h_attrs {
    wgml_tensor *xf;
} lora_h_attrs;

static wgml_status lora_h_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dh, wgml_tensor **dx) {
    lora_h_attrs at;
    memcpy(&at, op->attrs, sizeof at);
    wgml_tensor *x = at.xf, *acat = op->in[1];
    int64_t n = dh->shape[0], m = dh->shape[1], r = dh->shape[2], k = acat->shape[1];
    if (graph_op_wants(op, 1)) {
        bool acc = false;
        wgml_tensor *da = graph_grad_sink(op, 1, &acc);
        if (!da) da = graph_output(g, "lora_dw", WGML_F32, 2, acat->shape);
        dx[1] = da && matmul_batched(g, "lora_dw", dh, x, 1, 0, n, m * r, 0, r, k, m, 1.0f, da, acc) ? da : NULL;
    }
    if (graph_op_wants(op, 0)) {
        int64_t pn = n * m * k;
        wgml_tensor *part = graph_output(g, "lora_dx", WGML_F32, 1, &pn);
        wgml_tensor *d = part ? graph_output(g, "lora_dx", WGML_F32, x->rank, x->shape) : NULL;
        bool ok = d && matmul_batched(g, "lora_dx", dh, acat, 0, 0, n, m * r, r * k, m, k, r, 1.0f, part, false) &&
                  !matmul_splitk_record(g, "lora_dx", part, (int)n, m * k, m * k, k, NULL, 0, 0, 0, 1.0f, 0.0f, false, d);
        dx[0] = ok ? d : NULL;
    }
    return grad_result(g, op, dx);
}

/* H = [x·A_0ᵀ; ..; x·A_{n-1}ᵀ] as [n, M, r] (one batched product, x read by every batch), recorded
 * as op "lora_h"; x_grad: whether its rule gives x's gradient too. */
static wgml_tensor *shared_h(wgml_graph *g, wgml_tensor *xf, wgml_tensor *a_cat, int64_t n, int64_t r, bool x_grad) {
    int64_t m = xf->shape[0], k = xf->shape[1];
    wgml_tensor *h = matmul_batched(g, "lora_h", xf, a_cat, 0, 1, n, 0, r * k, m, r, k, 1.0f, NULL, false);
    graph_op hop = {.name = "lora_h", .backward = lora_h_backward, .n_in = 2, .in = {x_grad ? xf : NULL, a_cat}, .out = h};
    lora_h_attrs at = {.xf = xf};
    memcpy(hop.attrs, &at, sizeof at);
    return h && graph_record_op(g, &hop) ? h : NULL;
}

static wgml_status check_shared(wgml_ctx *ctx, wgml_tensor *x, wgml_tensor *a_cat, int n, wgml_tensor *const *base,
                                const wgml_lora *const *l) {
    const char *op = "lora_apply_shared";
    if (n < 1 || n > LORA_GROUP_MAX || !base || !l)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: n %d must be 1 .. %d with base and l given", op, n, LORA_GROUP_MAX);
    wgml_status s = check_tensor(ctx, op, "x", x);
    if (!s) s = check_tensor(ctx, op, "a_cat", a_cat);
    if (s) return s;
    int64_t k = x->shape[x->rank - 1], rows = x->numel / k;
    for (int i = 0; i < n; i++) {
        if (!l[i]) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: adapter %d is NULL", op, i);
        if ((s = check_tensor(ctx, op, "base", base[i]))) return s;
        if (l[i]->r != l[0]->r || l[i]->k != k || base[i]->shape[base[i]->rank - 1] != l[i]->n ||
            base[i]->numel != rows * l[i]->n)
            return wgml_set_error(ctx, WGML_ERR_SHAPE,
                                  "%s: adapter %d (r %lld, k %lld, n %lld) does not fit x %s, base %s and adapter 0's r %lld",
                                  op, i, (long long)l[i]->r, (long long)l[i]->k, (long long)l[i]->n, tshape(x),
                                  tshape(base[i]), (long long)l[0]->r);
    }
    if (a_cat->rank != 2 || a_cat->shape[0] != n * l[0]->r || a_cat->shape[1] != k)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: a_cat %s must be [%lld, %lld] (%d adapters of rank %lld)", op,
                              tshape(a_cat), (long long)(n * l[0]->r), (long long)k, n, (long long)l[0]->r);
    return WGML_OK;
}

/* Each adapter alone on its rows of a_cat (a differentiable slice: a view's offset may not
 * meet the storage alignment): after its base base[i] (wgml_lora_apply), or with base NULL
 * folded into 4-bit weight w[i]'s product (wgml_lora_qlinear). */
static wgml_status apply_each(wgml_graph *g, wgml_tensor *x, wgml_tensor *a_cat, int n, wgml_tensor *const *base,
                              const wgml_qweight *const *w, const wgml_lora *const *l, wgml_tensor **out) {
    for (int i = 0; i < n; i++) {
        wgml_lora li = *l[i];
        li.a = n == 1 ? a_cat : wgml_slice(g, a_cat, 0, i * l[i]->r, (i + 1) * l[i]->r, 1);
        if (li.a) out[i] = base ? wgml_lora_apply(g, x, base[i], &li) : wgml_lora_qlinear(g, x, w[i], &li);
        if (!li.a || !out[i]) return wgml_last_status(graph_ctx(g));
    }
    return WGML_OK;
}

/* Whether a view at an offset of `floats` f32 elements can be bound (the device's storage
 * offset alignment): the group's blocks of H (r·M) and of A_cat (r·K). */
static bool floats_bindable(wgml_ctx *ctx, int64_t floats) {
    const gpu_caps *caps = gpu_get_caps(ctx);
    return !caps || (uint64_t)floats * sizeof(float) % caps->storage_align == 0;
}

wgml_status lora_apply_shared(wgml_graph *g, wgml_tensor *x, wgml_tensor *a_cat, int n, wgml_tensor *const *base,
                              const wgml_lora *const *l, wgml_tensor **out) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "lora_apply_shared: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    wgml_status s = check_shared(ctx, x, a_cat, n, base, l);
    if (s) return s;
    int64_t r = l[0]->r, k = a_cat->shape[1], m = x->numel / k, x2[2] = {m, k};
    if (n == 1 || !floats_bindable(ctx, r * m)) return apply_each(g, x, a_cat, n, base, NULL, l, out);
    wgml_tensor *xf = wgml_reshape(g, x, 2, x2);
    wgml_tensor *h = xf ? shared_h(g, xf, a_cat, n, r, true) : NULL;
    if (!h) return wgml_last_status(ctx);
    for (int i = 0; i < n; i++) {
        wgml_tensor *hi = block(g, h, i, m, r);
        out[i] = hi ? matmul_add_product(g, "lora_apply", base[i], hi, l[i]->b, 0, 1, m, l[i]->n, r, l[i]->scale) : NULL;
        if (!out[i]) return wgml_last_status(ctx);
    }
    /* the up rules are recorded once every y exists (each rule looks at all of them) */
    lora_up_attrs at = {.n = n, .r = r, .m = m};
    for (int i = 0; i < n; i++) at.outs[i] = out[i];
    for (int i = 0; i < n; i++) {
        graph_op op = {.name = "lora_up", .backward = lora_up_backward, .n_in = 3, .in = {base[i], h, l[i]->b},
                       .out = out[i]};
        at.i = i;
        at.scale = l[i]->scale;
        memcpy(op.attrs, &at, sizeof at);
        if (!graph_record_op(g, &op)) return wgml_last_status(ctx);
    }
    return WGML_OK;
}

/* ---- adapters sharing an input, folded into their 4-bit bases' products ----
 * Forward: H [n, M, r] as in the shared form (op "lora_h", whose rule gives dA only), then
 * y_i = x·W_iᵀ + s_i·H_i·Bᵀ_i, the base's 4-bit product with the up-projection folded in (as
 * wgml_lora_qlinear). Backward of y_i (op "lora_qup"; inputs x, H, B_i):
 *   dH_i = s_i·dy_i·B_i (into block i of H's gradient, as lora_up);  dB_i = s_i·dy_iᵀ·H_i;
 *   dx_i = dy_i·W_i + dH_i·A_i, the input gradient's product with dH_i·A_i folded in (A_i: rows
 *   i·r of A_cat, bound as a view), added in its epilogue into x's running gradient where the
 *   engine allows it (graph_grad_accum: the group's terms make no adds of their own).
 * So the group's down-projections and A gradients are one product each, and the up-projections
 * and dH·A products make no pass of their own. */
typedef struct lora_qup_attrs {
    wgml_qweight w;
    wgml_tensor *a; /* A_i */
    wgml_tensor *outs[LORA_GROUP_MAX];
    int i, n;
    float scale;
} lora_qup_attrs;
_Static_assert(sizeof(lora_qup_attrs) <= GRAPH_OP_ATTR_BYTES, "the folded group's attributes must fit");

static wgml_status lora_qup_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    lora_qup_attrs at;
    memcpy(&at, op->attrs, sizeof at);
    wgml_tensor *x = op->in[0], *h = op->in[1], *b = op->in[2];
    int64_t n = at.w.n, m = h->shape[1], r = h->shape[2], dy2[2] = {m, n}, hs[2] = {m, r};
    wgml_ctx *ctx = graph_ctx(g);
    wgml_tensor *dyf = wgml_reshape(g, dy, 2, dy2), *dh = NULL, *first = NULL;
    bool want_x = graph_op_wants(op, 0), want_h = graph_op_wants(op, 1);
    if (!dyf) return wgml_last_status(ctx);
    if (want_h) dh = h_grad_block(g, h, at.outs, at.n, at.i, &first);
    else if (want_x) dh = graph_output(g, "lora_dx", WGML_F32, 2, hs);
    if ((want_h || want_x) && (!dh || !matmul_scaled(g, "lora_dx", dyf, b, 0, 0, m, r, n, at.scale, dh, false)))
        return wgml_last_status(ctx);
    if (graph_op_wants(op, 2)) {
        bool acc = false;
        wgml_tensor *db = graph_grad_sink(op, 2, &acc), *hi = block(g, h, at.i, m, r);
        if (!db) db = graph_output(g, "lora_dw", WGML_F32, 2, b->shape);
        if (!hi || !db || !matmul_scaled(g, "lora_dw", dyf, hi, 1, 0, n, r, m, at.scale, db, acc))
            return wgml_last_status(ctx);
        dx[2] = db;
    }
    if (want_x) { /* into x's running sum when the engine allows it (the group's other dx terms) */
        wgml_tensor *into = graph_grad_accum(op, 0);
        qw_lora_term lt = {.l = dh, .r = at.a, .rank = r, .scale = 1.0f};
        qw_mm_dest d = {.lora = &lt, .into = into, .acc = into != NULL};
        if (!(dx[0] = qw_record_mm(g, "qlinear_dx", dyf, &at.w, 1, m, x->rank, x->shape, &d)))
            return wgml_last_status(ctx);
        if (!into) graph_grad_fresh(dx[0]);
    }
    dx[1] = first; /* a later block lands in the running sum itself */
    return WGML_OK;
}

wgml_status lora_qlinear_shared(wgml_graph *g, wgml_tensor *x, wgml_tensor *a_cat, int n, const wgml_qweight *const *w,
                                const wgml_lora *const *l, wgml_tensor **out) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "lora_qlinear_shared: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "lora_qlinear_shared";
    if (n < 1 || n > LORA_GROUP_MAX || !w || !l || !a_cat)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: n %d must be 1 .. %d with w, l and a_cat given", op, n,
                              LORA_GROUP_MAX);
    wgml_status s = check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK);
    if (!s) s = check_tensor(ctx, op, "a_cat", a_cat);
    if (s) return s;
    int64_t k = x->shape[x->rank - 1], m = x->numel / k, r = l[0] ? l[0]->r : 0, x2[2] = {m, k};
    for (int i = 0; i < n; i++) {
        if (!l[i] || !w[i]) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: adapter or weight %d is NULL", op, i);
        if (!qw_weight_valid(ctx, op, "w", w[i])) return wgml_last_status(ctx);
        if (l[i]->r != r || l[i]->k != k || w[i]->k != k || l[i]->n != w[i]->n)
            return wgml_set_error(ctx, WGML_ERR_SHAPE,
                                  "%s: x %s, weight %d [%lld, %lld] and its adapter (n %lld, k %lld, r %lld) must agree "
                                  "with adapter 0's r %lld",
                                  op, tshape(x), i, (long long)w[i]->n, (long long)w[i]->k, (long long)l[i]->n,
                                  (long long)l[i]->k, (long long)l[i]->r, (long long)r);
    }
    if (a_cat->rank != 2 || a_cat->shape[0] != n * r || a_cat->shape[1] != k)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: a_cat %s must be [%lld, %lld] (%d adapters of rank %lld)", op,
                              tshape(a_cat), (long long)(n * r), (long long)k, n, (long long)r);
    if (!lora_fold_on()) { /* the bases' products, then the shared form over them */
        wgml_tensor *base[LORA_GROUP_MAX] = {0};
        for (int i = 0; i < n; i++)
            if (!(base[i] = wgml_qlinear(g, x, w[i]))) return wgml_last_status(ctx);
        return lora_apply_shared(g, x, a_cat, n, base, l, out);
    }
    if (n == 1 || !floats_bindable(ctx, r * m) || !floats_bindable(ctx, r * k))
        return apply_each(g, x, a_cat, n, NULL, w, l, out);
    wgml_tensor *xf = wgml_reshape(g, x, 2, x2), *h = xf ? shared_h(g, xf, a_cat, n, r, false) : NULL;
    if (!h) return wgml_last_status(ctx);
    lora_qup_attrs at = {.n = n};
    for (int i = 0; i < n; i++) {
        wgml_tensor *hi = block(g, h, i, m, r);
        qw_lora_term lt = {.l = hi, .r = l[i]->b, .rank = r, .scale = l[i]->scale};
        if (!hi || !(out[i] = qw_linear_product_ex(g, "qlinear", x, w[i], &lt))) return wgml_last_status(ctx);
        at.outs[i] = out[i];
    }
    /* the rules are recorded once every y exists (each looks at all of them) */
    for (int i = 0; i < n; i++) {
        int64_t as[2] = {r, k};
        at.w = *w[i];
        at.i = i;
        at.scale = l[i]->scale;
        at.a = graph_view(g, a_cat, "lora_qup", (uint64_t)(i * r * k) * sizeof(float), 2, as);
        graph_op rec = {.name = "lora_qup", .backward = lora_qup_backward, .n_in = 3, .in = {x, h, l[i]->b},
                        .out = out[i]};
        memcpy(rec.attrs, &at, sizeof at);
        if (!at.a || !(out[i] = graph_record_op(g, &rec))) return wgml_last_status(ctx);
    }
    return WGML_OK;
}
