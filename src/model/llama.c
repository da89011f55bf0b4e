/* Llama forward from a GGUF file: weights in one built graph that is never run (it only owns
 * the persistent tensors: weights and the KV cache), and the graphs that run (one decode graph,
 * prefill graphs per length bucket, the trainer's graphs) use them through wgml_tensor_share.
 * One block builder (forward_hidden) records the model for all of them; a small options
 * struct (fwd_opts) says what differs: the KV cache, adapters or straight-through latents,
 * the fused inference ops. The model calls only ops (fused kernels live in their families). */
#define _POSIX_C_SOURCE 200809L
#include "model/llama.h"
#include "model/arch.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include "gpu/gpu.h"
#include "graph/graph.h"
#include "ops/attention/attn_decode.h"
#include "ops/attention/sdpa_rows.h"
#include "ops/elementwise/elementwise_fused.h"
#include "ops/norm/norm_fused.h"
#include "ops/q4/q4_concat.h"
#include "ops/q4/q4_gemv_fused.h"
#include "ops/q4/q4_parts.h"
#include "ops/q4/q4_share.h"
#include "ops/q4/q4_ste.h"
#include "ops/rope/rope_fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A matrix W[n, k]: quantised (q) or f32 (f, [n, k]), and its bias (f32 [n], or NULL; for q it
 * is also q->bias). */
typedef struct lweight {
    wgml_q4_weight *q;
    wgml_tensor *f, *bias;
    uint32_t type; /* the GGUF type q was uploaded from */
} lweight;

/* A block's tensors; the norms the architecture lacks are NULL (model_arch says which exist). */
typedef struct layer {
    wgml_tensor *attn_norm, *ffn_norm;
    wgml_tensor *q_norm, *k_norm;                   /* [head_dim] (qk_norm) */
    wgml_tensor *post_attn_norm, *post_ffn_norm;    /* [n_embd] (post_norms) */
    lweight wq, wk, wv, wo, gate, up, down;
    /* q, k and v (gate and up) as one weight, their rows concatenated, whose rows wq.q, wk.q and
     * wv.q (gate.q, up.q) are; NULL where they were loaded apart (load_group) */
    wgml_q4_weight *qkv, *gate_up;
    wgml_tensor *k_cache, *v_cache; /* f32 [1, Hkv, n_ctx, head_dim] */
} layer;

/* A vocabulary matrix [V, D] in row parts (load_vocab): part p holds rows row0[p] ..
 * row0[p + 1] - 1. n = 0: absent. */
#define VPARTS_MAX 4
typedef struct vweight {
    lweight part[VPARTS_MAX];
    int64_t row0[VPARTS_MAX + 1];
    int n;
} vweight;

/* One runnable graph for a fixed number of positions S. */
typedef struct step_graph {
    wgml_graph *g;
    int64_t S;
    wgml_tensor *ids;       /* i32 [S] */
    wgml_tensor *positions; /* i32 [S]: pos0 + i */
    wgml_tensor *pos;       /* i32 [1]: pos0 (the positions tensor itself when S = 1) */
    wgml_tensor *len;       /* i32 [1]: pos0 + S */
    wgml_tensor *row;       /* i32 [1]: the row whose logits are wanted (S > 1 only) */
    wgml_tensor *logits;    /* f32 [1, V] (kept) */
    wgml_tensor *argmax;    /* i32 [1] (kept) */
    wgml_tensor *history;   /* decode graph only: i32 [n_ctx], the argmax of the step at each position */
} step_graph;

#define MAX_PREFILL_GRAPHS 32
#define MIN_BUCKET 8
#define MAX_BUCKET 512

struct wgml_model {
    wgml_ctx *ctx;
    wgml_llama_config cfg;
    model_arch arch; /* what the block builder does for this family (arch.c) */
    wgml_gguf *file;
    wgml_tokenizer *tok; /* NULL when the file's tokenizer kind is not supported (tok_err says why) */
    char tok_err[512];
    wgml_graph *wg; /* owns the persistent tensors */
    vweight tok_embd, output;
    wgml_tensor *output_norm;
    layer *layers;
    step_graph decode;
    step_graph prefill[MAX_PREFILL_GRAPHS];
    int n_prefill;
    int64_t pos;
    double last_s;
    int unfused; /* $WGML_LLAMA_UNFUSED at load: plain ops instead of the fused kernels */
    int32_t stop_ids[4];
    int n_stop;
    wgml_lora **lora; /* [n_layer * LLAMA_N_TARGETS] adapters of the inference graphs, or NULL;
                         tensors in wg (wgml_model_set_lora) */
};

/* The targets by index (the WGML_TARGET_* bit order). */
enum { T_Q, T_K, T_V, T_O, T_GATE, T_UP, T_DOWN };

const char *const llama_target_names[LLAMA_N_TARGETS] = {
    [T_Q] = "attn_q",      [T_K] = "attn_k", [T_V] = "attn_v",     [T_O] = "attn_output",
    [T_GATE] = "ffn_gate", [T_UP] = "ffn_up", [T_DOWN] = "ffn_down"};

wgml_ctx *llama_ctx(const wgml_model *m) { return m ? m->ctx : NULL; }
const model_arch *llama_arch(const wgml_model *m) { return &m->arch; }

/* ------------------------------------------------------------------ loading */

static wgml_status ferr(wgml_model *m, const char *path) {
    return wgml_set_error(m->ctx, WGML_ERR_FORMAT, "model_load: %s: %s", path, wgml_gguf_error(m->file));
}

/* Finds tensor name and checks it is the matrix W[n, k] (file dims [k, n]) or, with n = 0,
 * the vector [k]. Returns its index, -1 with the error set. optional: -2 when absent. */
static int64_t find_tensor(wgml_model *m, const char *path, const char *name, int64_t n, int64_t k, int optional) {
    int64_t i = wgml_gguf_find_tensor(m->file, name);
    if (i < 0) {
        if (optional) return -2;
        wgml_set_error(m->ctx, WGML_ERR_FORMAT, "model_load: %s: missing tensor '%s'", path, name);
        return -1;
    }
    const wgml_gguf_tensor *t = wgml_gguf_tensor_at(m->file, i);
    int ok = n ? (t->n_dims == 2 && t->dims[0] == k && t->dims[1] == n) : (t->n_dims == 1 && t->dims[0] == k);
    if (!ok) {
        char want[64];
        if (n) snprintf(want, sizeof want, "[%lld, %lld]", (long long)k, (long long)n);
        else snprintf(want, sizeof want, "[%lld]", (long long)k);
        wgml_set_error(m->ctx, WGML_ERR_FORMAT, "model_load: %s: tensor '%s' has %d dims [%lld, %lld], expected %s (GGUF order)",
                       path, name, t->n_dims, (long long)t->dims[0], (long long)t->dims[1], want);
        return -1;
    }
    return i;
}

/* The tensor's values as f32 on the host (malloc'ed). */
static float *host_f32(wgml_model *m, const char *path, int64_t i, int64_t n, int64_t k) {
    const wgml_gguf_tensor *t = wgml_gguf_tensor_at(m->file, i);
    const void *data;
    size_t bytes;
    if (wgml_gguf_tensor_data(m->file, i, &data, &bytes)) {
        ferr(m, path);
        return NULL;
    }
    float *out = malloc(sizeof(float) * (size_t)(n * k));
    if (!out) {
        wgml_set_error(m->ctx, WGML_ERR_OOM, "model_load: out of host memory");
        return NULL;
    }
    if (wgml_gguf_dequantize((int)t->type, data, bytes, n, k, out)) {
        wgml_set_error(m->ctx, WGML_ERR_UNSUPPORTED, "model_load: %s: tensor '%s': %s", path, t->name,
                       wgml_last_error(NULL));
        free(out);
        return NULL;
    }
    return out;
}

static wgml_tensor *upload_f32(wgml_model *m, const float *x, int rank, const int64_t *shape) {
    wgml_tensor *t = wgml_tensor_new(m->wg, WGML_F32, rank, shape);
    if (t && wgml_tensor_write(t, x, sizeof(float) * (size_t)wgml_tensor_numel(t))) return NULL;
    return t;
}

/* An upload failed (out of device memory, a limit): name the tensor in the error. */
static wgml_status upload_err(wgml_model *m, const char *name) {
    char prev[1024];
    snprintf(prev, sizeof prev, "%s", wgml_last_error(m->ctx));
    return wgml_set_error(m->ctx, wgml_last_status(m->ctx), "model_load: tensor '%s': %s", name, prev);
}

static wgml_status load_vector(wgml_model *m, const char *path, const char *name, int64_t k, wgml_tensor **out) {
    int64_t i = find_tensor(m, path, name, 0, k, 0);
    if (i < 0) return wgml_last_status(m->ctx);
    float *h = host_f32(m, path, i, 1, k);
    if (!h) return wgml_last_status(m->ctx);
    *out = upload_f32(m, h, 1, &k);
    free(h);
    return *out ? WGML_OK : upload_err(m, name);
}

/* Whether a GGUF tensor of `type` with rows of k elements stays quantised on the GPU: every block
 * format the q4 family runs (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q4_K/Q5_K/Q6_K) whose rows are whole blocks;
 * the float types take the plain f32 path. */
static int keep_quantised(uint32_t type, int64_t k) {
    uint64_t be = 0;
    if (type == WGML_GGML_F32 || type == WGML_GGML_F16 || type == WGML_GGML_BF16) return 0;
    return wgml_q4_gguf_on_gpu((int)type) && wgml_ggml_type_size(type, &be, NULL) && be && k % (int64_t)be == 0;
}

/* Loads W[n, k] in row parts of at most `per` rows into w[0..): block formats stay quantised
 * (keep_quantised; each part a quantised weight of its rows' blocks), other types are
 * dequantised to f32.
 * per = n: one part. optional: returns WGML_OK with w untouched when absent. */
static wgml_status load_rows(wgml_model *m, const char *path, const char *name, int64_t n, int64_t k, int64_t per,
                             lweight *w, int optional) {
    int64_t i = find_tensor(m, path, name, n, k, optional);
    if (i == -2) return WGML_OK;
    if (i < 0) return wgml_last_status(m->ctx);
    const wgml_gguf_tensor *t = wgml_gguf_tensor_at(m->file, i);
    if (keep_quantised(t->type, k)) {
        const void *data;
        size_t bytes;
        if (wgml_gguf_tensor_data(m->file, i, &data, &bytes)) return ferr(m, path);
        size_t row = bytes / (size_t)n; /* whole blocks per row */
        for (int64_t r0 = 0, p = 0; r0 < n; r0 += per, p++) {
            int64_t rn = n - r0 < per ? n - r0 : per;
            w[p].q = wgml_q4_upload_gguf(m->wg, (int)t->type, (const char *)data + row * (size_t)r0, row * (size_t)rn,
                                         rn, k);
            w[p].type = t->type;
            if (!w[p].q) return upload_err(m, name);
        }
        return WGML_OK;
    }
    float *h = host_f32(m, path, i, n, k);
    if (!h) return wgml_last_status(m->ctx);
    for (int64_t r0 = 0, p = 0; r0 < n; r0 += per, p++) {
        int64_t shape[2] = {n - r0 < per ? n - r0 : per, k};
        if (!(w[p].f = upload_f32(m, h + r0 * k, 2, shape))) {
            free(h);
            return upload_err(m, name);
        }
    }
    free(h);
    return WGML_OK;
}

static wgml_status load_matrix(wgml_model *m, const char *path, const char *name, int64_t n, int64_t k, lweight *w,
                               int optional) {
    return load_rows(m, path, name, n, k, n, w, optional);
}

/* Loads the cnt weights W_i[ns[i], k] named names[i] that share an input. Where together is
 * allowed and all are of one block type kept quantised with every part's rows at aligned
 * offsets, as one weight with their rows concatenated (*cat), each w[i]->q a weight of its own
 * rows (q4_weight_rows): a prefill takes them in one GEMM (q4_concat.h), every other use sees
 * separate weights. Else each alone (*cat NULL). */
static wgml_status load_group(wgml_model *m, const char *path, const char *const *names, const int64_t *ns, int cnt,
                              int64_t k, bool together, lweight *const *w, wgml_q4_weight **cat) {
    *cat = NULL;
    const void *data[3];
    size_t bytes[3], total = 0;
    int64_t n = 0;
    uint32_t type = 0;
    for (int i = 0; i < cnt && together; i++) {
        int64_t t = find_tensor(m, path, names[i], ns[i], k, 0);
        if (t < 0) return wgml_last_status(m->ctx);
        uint32_t ty = wgml_gguf_tensor_at(m->file, t)->type;
        together = (i == 0 || ty == type) && keep_quantised(ty, k) && q4_gguf_rows_fit(m->ctx, (int)ty, k, n);
        if (together && wgml_gguf_tensor_data(m->file, t, &data[i], &bytes[i])) return ferr(m, path);
        type = ty;
        n += ns[i];
        total += bytes[i];
    }
    if (!together) {
        wgml_status s = WGML_OK;
        for (int i = 0; i < cnt && !s; i++) s = load_matrix(m, path, names[i], ns[i], k, w[i], 0);
        return s;
    }
    char *buf = malloc(total);
    if (!buf) return wgml_set_error(m->ctx, WGML_ERR_OOM, "model_load: out of host memory");
    for (size_t i = 0, at = 0; i < (size_t)cnt; at += bytes[i++]) memcpy(buf + at, data[i], bytes[i]);
    *cat = wgml_q4_upload_gguf(m->wg, (int)type, buf, total, n, k);
    free(buf);
    if (!*cat) return upload_err(m, names[0]);
    for (int64_t i = 0, r0 = 0; i < cnt; r0 += ns[i++]) {
        w[i]->type = type;
        if (!(w[i]->q = q4_weight_rows(*cat, r0, ns[i]))) return upload_err(m, names[i]);
    }
    return WGML_OK;
}

/* A vocabulary matrix [V, D] (the token embedding, an untied head) in as many row parts as the
 * device's storage-binding limit needs: one on most devices; Gemma 3's 262144 x 640 Q8_0 table
 * (160 MiB of codes) takes two under lavapipe's 128 MiB. */
static wgml_status load_vocab(wgml_model *m, const char *path, const char *name, vweight *w, int optional) {
    int64_t V = m->cfg.n_vocab, D = m->cfg.n_embd, i = wgml_gguf_find_tensor(m->file, name);
    if (i < 0 && optional) return WGML_OK;
    uint32_t type = i >= 0 ? wgml_gguf_tensor_at(m->file, i)->type : 0;
    /* a row's codes on the GPU: 4 bits per element for Q4_0/Q4_1/Q4_K, 8 for the other block
     * formats (5- and 6-bit codes are held widened), 32 for f32 */
    int quant = keep_quantised(type, D);
    int four = type == WGML_GGML_Q4_0 || type == WGML_GGML_Q4_1 || type == WGML_GGML_Q4_K;
    uint64_t row_bytes = !quant ? (uint64_t)D * 4 : four ? (uint64_t)D / 2 : (uint64_t)D;
    wgml_device_info info;
    wgml_device_get_info(m->ctx, &info);
    uint64_t limit = info.max_storage_binding ? info.max_storage_binding : ((uint64_t)1 << 27);
    uint64_t rows_fit = limit / row_bytes;
    int64_t parts = rows_fit ? (int64_t)(((uint64_t)V + rows_fit - 1) / rows_fit) : VPARTS_MAX + 1;
    if (parts > VPARTS_MAX)
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT,
                              "model_load: %s: tensor '%s' [%lld, %lld] needs more than %d parts of the device's "
                              "%llu-byte storage binding limit",
                              path, name, (long long)V, (long long)D, VPARTS_MAX, (unsigned long long)limit);
    if (parts > 1 && !quant && w == &m->tok_embd) /* embed() looks up 4-bit/8-bit parts only */
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT,
                              "model_load: %s: tensor '%s' [%lld, %lld] (f32, %llu bytes) is over the device's "
                              "%llu-byte storage binding limit (a quantised table would be split in parts; an f32 "
                              "one is not)",
                              path, name, (long long)V, (long long)D, (unsigned long long)(row_bytes * (uint64_t)V),
                              (unsigned long long)limit);
    int64_t per = (V + parts - 1) / parts;
    w->n = (int)parts;
    for (int p = 0; p <= w->n; p++) w->row0[p] = p * per < V ? p * per : V;
    return load_rows(m, path, name, V, D, per, w->part, optional);
}

static wgml_status load_config(wgml_model *m, const char *path, const wgml_model_options *opt) {
    wgml_llama_config *c = &m->cfg;
    char err[512];
    wgml_status s = arch_from_gguf(m->file, &m->arch, c, err, sizeof err);
    if (s) return wgml_set_error(m->ctx, s, "model_load: %s: %s", path, err);
    if (opt && (opt->n_ctx < 0 || opt->n_ctx > ((int64_t)1 << 24)))
        return wgml_set_error(m->ctx, WGML_ERR_ARG, "model_load: n_ctx %lld is outside 1..%lld (0: the default)",
                              (long long)opt->n_ctx, (long long)1 << 24);
    c->n_ctx = opt && opt->n_ctx > 0 ? opt->n_ctx : (c->n_ctx_train < 2048 ? c->n_ctx_train : 2048);
    return WGML_OK;
}

/* The bias [n] of a loaded W[n, k] (4-bit weights add it in their own kernels). */
static wgml_status load_bias(wgml_model *m, const char *path, const char *name, lweight *w) {
    int64_t n = w->q ? w->q->n : w->f->shape[0];
    wgml_status s = load_vector(m, path, name, n, &w->bias);
    if (!s && w->q) w->q->bias = w->bias;
    return s;
}

static wgml_status load_weights(wgml_model *m, const char *path) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *a = &m->arch;
    int64_t D = c->n_embd, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_head_kv * hd;
    wgml_status s;
    if ((s = load_vocab(m, path, "token_embd.weight", &m->tok_embd, 0)) ||
        (s = load_vector(m, path, "output_norm.weight", D, &m->output_norm)) ||
        (s = load_vocab(m, path, "output.weight", &m->output, 1)))
        return s;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) return wgml_set_error(m->ctx, WGML_ERR_OOM, "model_load: out of host memory");
    int64_t cshape[4] = {1, c->n_head_kv, c->n_ctx, hd};
    for (int64_t l = 0; l < c->n_layer; l++) {
        layer *L = &m->layers[l];
        char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%lld.%s.weight", (long long)l, x), n)
        if ((s = load_vector(m, path, NAME("attn_norm"), D, &L->attn_norm)) ||
            (s = load_vector(m, path, NAME("ffn_norm"), D, &L->ffn_norm)) ||
            (a->qk_norm && ((s = load_vector(m, path, NAME("attn_q_norm"), hd, &L->q_norm)) ||
                            (s = load_vector(m, path, NAME("attn_k_norm"), hd, &L->k_norm)))) ||
            (a->post_norms && ((s = load_vector(m, path, NAME("post_attention_norm"), D, &L->post_attn_norm)) ||
                               (s = load_vector(m, path, NAME("post_ffw_norm"), D, &L->post_ffn_norm)))) ||
            (s = load_matrix(m, path, NAME("attn_output"), D, qd, &L->wo, 0)) ||
            (s = load_matrix(m, path, NAME("ffn_down"), D, c->n_ff, &L->down, 0)))
            return s;
#undef NAME
        /* q, k, v and gate, up: one weight each where they can be (the biases of qkv_bias are
         * loaded part by part below, so those stay apart) */
        char nq[96], nk[96], nv[96], ng[96], nu[96];
        const char *qkv_names[3] = {nq, nk, nv}, *gu_names[2] = {ng, nu};
        snprintf(nq, sizeof nq, "blk.%lld.attn_q.weight", (long long)l);
        snprintf(nk, sizeof nk, "blk.%lld.attn_k.weight", (long long)l);
        snprintf(nv, sizeof nv, "blk.%lld.attn_v.weight", (long long)l);
        snprintf(ng, sizeof ng, "blk.%lld.ffn_gate.weight", (long long)l);
        snprintf(nu, sizeof nu, "blk.%lld.ffn_up.weight", (long long)l);
        const int64_t qkv_n[3] = {qd, kvd, kvd}, gu_n[2] = {c->n_ff, c->n_ff};
        lweight *const qkv_w[3] = {&L->wq, &L->wk, &L->wv}, *const gu_w[2] = {&L->gate, &L->up};
        if ((s = load_group(m, path, qkv_names, qkv_n, 3, D, !a->qkv_bias, qkv_w, &L->qkv)) ||
            (s = load_group(m, path, gu_names, gu_n, 2, D, true, gu_w, &L->gate_up)))
            return s;
#define BIAS(x) (snprintf(n, sizeof n, "blk.%lld.%s.bias", (long long)l, x), n)
        if (a->qkv_bias && ((s = load_bias(m, path, BIAS("attn_q"), &L->wq)) || (s = load_bias(m, path, BIAS("attn_k"), &L->wk)) ||
                            (s = load_bias(m, path, BIAS("attn_v"), &L->wv))))
            return s;
#undef BIAS
        L->k_cache = wgml_tensor_new(m->wg, WGML_F32, 4, cshape);
        L->v_cache = wgml_tensor_new(m->wg, WGML_F32, 4, cshape);
        if (!L->k_cache || !L->v_cache) return wgml_last_status(m->ctx);
    }
    return WGML_OK;
}

/* ------------------------------------------------------------------ forward graph */

static wgml_tensor *share(wgml_graph *g, wgml_tensor *t) { return t ? wgml_tensor_share(g, t) : NULL; }

/* The status of a failed build step: the context's, or WGML_ERR_ARG when an op gave NULL
 * without setting one. */
static wgml_status fail_status(wgml_ctx *ctx) { return wgml_last_status(ctx) ? wgml_last_status(ctx) : WGML_ERR_ARG; }

/* The LM head: output.weight, or the tied token embedding when the file has none. */
static const vweight *head_weight(const wgml_model *m) { return m->output.n ? &m->output : &m->tok_embd; }

/* out[..., n] = x[..., k] · Wᵀ */
static wgml_tensor *linear(wgml_graph *g, wgml_tensor *x, const lweight *w) {
    if (w->q) {
        wgml_q4_weight q;
        return q4_weight_share(g, w->q, &q) ? NULL : wgml_q4_linear(g, x, &q);
    }
    return wgml_linear(g, x, share(g, w->f), share(g, w->bias));
}

/* The token embeddings [B*S, D], times the architecture's multiplier (Gemma 3: sqrt(d)). A
 * table in several row parts (4-bit/8-bit only) is the sum of the parts' lookups, each giving
 * zero rows for the ids outside it. */
static wgml_tensor *embed(const wgml_model *m, wgml_graph *g, wgml_tensor *ids) {
    const vweight *v = &m->tok_embd;
    wgml_tensor *x = NULL;
    for (int p = 0; p < v->n; p++) {
        const lweight *w = &v->part[p];
        wgml_tensor *e;
        if (w->q) {
            wgml_q4_weight t = *w->q, q;
            t.bias = NULL; /* a lookup adds none */
            e = q4_weight_share(g, &t, &q) ? NULL
                : v->n == 1             ? wgml_q4_embedding(g, &q, ids)
                                        : wgml_q4_embedding_rows(g, &q, ids, v->row0[p]);
        } else if (v->n == 1) {
            e = wgml_embedding(g, share(g, w->f), ids);
        } else {
            wgml_set_error(m->ctx, WGML_ERR_UNSUPPORTED, "model: an f32 token embedding in %d parts is not supported",
                           v->n);
            return NULL;
        }
        x = !e ? NULL : p == 0 ? e : x ? wgml_add(g, x, e, 1.0f) : NULL;
        if (!x) return NULL;
    }
    return x && m->arch.embed_mult != 1.0f ? wgml_mul_scalar(g, x, m->arch.embed_mult) : x;
}

/* The logits x · Wᵀ of the head (the parts' products side by side). */
static wgml_tensor *head_logits(const wgml_model *m, wgml_graph *g, wgml_tensor *x) {
    const vweight *v = head_weight(m);
    if (v->n == 1) return linear(g, x, &v->part[0]);
    wgml_tensor *y[VPARTS_MAX];
    for (int p = 0; p < v->n; p++)
        if (!(y[p] = linear(g, x, &v->part[p]))) return NULL;
    return wgml_cat(g, y, v->n, x->rank - 1);
}

static const lweight *target_weight(const wgml_model *m, int64_t l, int t) {
    const layer *L = &m->layers[l];
    const lweight *w[LLAMA_N_TARGETS] = {[T_Q] = &L->wq,      [T_K] = &L->wk,   [T_V] = &L->wv,      [T_O] = &L->wo,
                                         [T_GATE] = &L->gate, [T_UP] = &L->up, [T_DOWN] = &L->down};
    return w[t];
}

void llama_target_dims(const wgml_model *m, int t, int64_t *n, int64_t *k) {
    const wgml_llama_config *c = &m->cfg;
    int64_t D = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    const int64_t ns[LLAMA_N_TARGETS] = {[T_Q] = qd,      [T_K] = kvd,     [T_V] = kvd,  [T_O] = D,
                                         [T_GATE] = c->n_ff, [T_UP] = c->n_ff, [T_DOWN] = D};
    const int64_t ks[LLAMA_N_TARGETS] = {[T_Q] = D,    [T_K] = D,    [T_V] = D, [T_O] = qd,
                                         [T_GATE] = D, [T_UP] = D, [T_DOWN] = c->n_ff};
    *n = ns[t];
    *k = ks[t];
}

const wgml_q4_weight *llama_target_q4(const wgml_model *m, int64_t l, int t) { return target_weight(m, l, t)->q; }

int llama_target_gguf_type(const wgml_model *m, int64_t l, int t) {
    const lweight *w = target_weight(m, l, t);
    return w->q ? (int)w->type : -1;
}

/* How the block builder (forward_hidden) records the model into a graph: the inference graphs
 * (build_step) and the training forward (llama_forward_train_hidden) differ only here. */
typedef struct fwd_opts {
    int64_t B, S;           /* B sequences of S positions (inference: B = 1) */
    wgml_tensor *ids;       /* i32 [B*S] */
    wgml_tensor *positions; /* i32 [S]: the position of each index (pos0 + i with a cache) */
    /* KV cache: k and v go to the cache rows from pos (i32 [1]) on, attention reads the cache
     * up to len (i32 [1]). NULL: no cache, causal attention within each sequence (training). */
    wgml_tensor *pos, *len;
    wgml_tensor *row;       /* i32 [1]: only this row goes to the final norm (prefill), or NULL */
    wgml_lora *const *lora; /* NULL or n_layer * LLAMA_N_TARGETS adapters (entry l*7 + t) */
    bool lora_shared;       /* the adapters' tensors are the weight graph's (shared into g), else g's */
    wgml_tensor *const *latent; /* NULL or a table like lora of straight-through latents of g */
    /* the fused inference ops (norm_add_rms, ew_glu, rope_kv_step, the GEMV's prologue and
     * epilogue) and the grouped 4-bit GEMV; off in training (the plain ops carry the autograd rules) and in the inference
     * graphs of a model loaded under $WGML_LLAMA_UNFUSED=1 (for comparisons) */
    bool fused;
} fwd_opts;

/* Target t of layer l applied to x: the weight (4-bit with a latent: straight-through), plus
 * the target's adapter when o has one. */
static wgml_tensor *target_linear(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, int t,
                                  wgml_tensor *x) {
    const lweight *w = target_weight(m, l, t);
    int64_t e = l * LLAMA_N_TARGETS + t;
    wgml_tensor *latent = o->latent ? o->latent[e] : NULL;
    const wgml_lora *lo = o->lora ? o->lora[e] : NULL;
    wgml_tensor *y;
    if (latent && w->q) {
        wgml_q4_weight q;
        y = q4_weight_share(g, w->q, &q) ? NULL : q4_ste_linear(g, x, &q, latent);
    } else {
        y = linear(g, x, w);
    }
    if (!lo || !y) return y;
    wgml_lora sl = *lo;
    if (o->lora_shared) {
        sl.a = share(g, lo->a);
        sl.b = sl.a ? share(g, lo->b) : NULL;
        if (!sl.b) return NULL;
    }
    return wgml_lora_apply(g, x, y, &sl);
}

/* The weight that targets[0..n) of layer l were loaded as together (load_group): q, k, v or
 * gate, up in that order; NULL when they are another set or were loaded apart. */
static const wgml_q4_weight *group_weight(const wgml_model *m, int64_t l, const int *targets, int n) {
    const layer *L = &m->layers[l];
    if (n == 3 && targets[0] == T_Q && targets[1] == T_K && targets[2] == T_V) return L->qkv;
    if (n == 2 && targets[0] == T_GATE && targets[1] == T_UP) return L->gate_up;
    return NULL;
}

/* y[i] = target_linear(.., targets[i], x) for i < n (n <= WGML_Q4_MULTI_MAX). Fused: the
 * products with 4-bit weights (no latent) go through one wgml_q4_linear_multi (at decode, one
 * GEMV dispatch per weight kind instead of one per weight; larger S falls back to one GEMM each
 * inside it), or, when all n are 4-bit and were loaded as one weight, through one GEMM over it
 * where q4_concat_applies (a prefill); then each adapter is added; the others one by one.
 * Returns false when any output is missing (the error is on the context). */
static bool linear_group(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, const int *targets, int n,
                         wgml_tensor *x, wgml_tensor **y) {
    wgml_q4_weight q[WGML_Q4_MULTI_MAX];
    const wgml_q4_weight *qp[WGML_Q4_MULTI_MAX];
    wgml_tensor *qo[WGML_Q4_MULTI_MAX];
    int idx[WGML_Q4_MULTI_MAX], nq = 0;
    for (int i = 0; i < n; i++) {
        const lweight *w = target_weight(m, l, targets[i]);
        int64_t e = l * LLAMA_N_TARGETS + targets[i];
        y[i] = NULL;
        if (o->fused && x && w->q && !(o->latent && o->latent[e])) {
            if (q4_weight_share(g, w->q, &q[nq])) return false;
            qp[nq] = &q[nq];
            idx[nq++] = i;
        } else {
            y[i] = target_linear(m, g, o, l, targets[i], x);
        }
    }
    /* all of them 4-bit and loaded as one weight: one GEMM at prefill sizes (q4_concat.h) */
    const wgml_q4_weight *cat = nq == n ? group_weight(m, l, targets, n) : NULL;
    int64_t ns[WGML_Q4_MULTI_MAX];
    for (int j = 0; cat && j < n; j++) ns[j] = qp[j]->n;
    if (cat && q4_concat_applies(g, x, cat, n, ns)) {
        wgml_q4_weight cq;
        if (!q4_weight_share(g, cat, &cq) && !q4_linear_concat(g, "model", x, &cq, n, ns, qo))
            for (int j = 0; j < n; j++) y[j] = qo[j];
    } else if (nq == 1) {
        y[idx[0]] = wgml_q4_linear(g, x, qp[0]);
    } else if (nq > 1 && !wgml_q4_linear_multi(g, x, qp, nq, qo))
        for (int j = 0; j < nq; j++) y[idx[j]] = qo[j];
    for (int j = 0; j < nq; j++) {
        const wgml_lora *lo = o->lora ? o->lora[l * LLAMA_N_TARGETS + targets[idx[j]]] : NULL;
        if (!lo || !y[idx[j]]) continue;
        wgml_lora sl = *lo;
        if (o->lora_shared) {
            sl.a = share(g, lo->a);
            sl.b = sl.a ? share(g, lo->b) : NULL;
        }
        y[idx[j]] = sl.b ? wgml_lora_apply(g, x, y[idx[j]], &sl) : NULL;
    }
    for (int i = 0; i < n; i++)
        if (!y[i]) return false;
    return true;
}

/* h = rms_norm(x + y') * w with *sum = x + y', y' = y, or with a post-norm weight wy,
 * rms_norm(y) * wy: one fused dispatch (norm_add_rms, norm_add_rms_post) or the plain ops. */
static wgml_tensor *add_norm(wgml_graph *g, const fwd_opts *o, wgml_tensor *x, wgml_tensor *y, wgml_tensor *wy,
                             wgml_tensor *w, float eps, wgml_tensor **sum) {
    *sum = NULL;
    if (!x || !y || !w) return NULL;
    if (o->fused) return wy ? norm_add_rms_post(g, x, y, wy, w, eps, sum) : norm_add_rms(g, x, y, w, eps, sum);
    if (wy && !(y = wgml_rms_norm(g, y, wy, eps))) return NULL;
    *sum = wgml_add(g, x, y, 1.0f);
    return wgml_rms_norm(g, *sum, w, eps);
}

/* h = add_norm(x, target_linear(.., t, a), wy, w), *sum the new stream. Fused, a 4-bit product
 * without adapter or latent at a prefill's rows is left in its split-K slices (q4_parts.h) and
 * the add and norm sum them as they read them: the reduction's dispatch goes. */
static wgml_tensor *proj_add_norm(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, int t,
                                  wgml_tensor *a, wgml_tensor *x, wgml_tensor *wy, wgml_tensor *w, float eps,
                                  wgml_tensor **sum) {
    const lweight *lw = target_weight(m, l, t);
    int64_t e = l * LLAMA_N_TARGETS + t;
    *sum = NULL;
    if (o->fused && a && x && w && lw->q && !(o->latent && o->latent[e]) && !(o->lora && o->lora[e]) &&
        q4_parts_applies(g, a, lw->q)) {
        wgml_q4_weight q;
        int ny = 0;
        wgml_tensor *p = q4_weight_share(g, lw->q, &q) ? NULL : q4_linear_parts(g, "model", a, &q, &ny);
        return p ? norm_add_rms_parts(g, x, p, ny, wy, w, eps, sum) : NULL;
    }
    return add_norm(g, o, x, a ? target_linear(m, g, o, l, t, a) : NULL, wy, w, eps, sum);
}

/* act(gate) * up, act as the architecture says (silu or tanh-GELU): one fused dispatch (ew_glu)
 * or the plain activation and mul. */
static wgml_tensor *glu(const wgml_model *m, wgml_graph *g, const fwd_opts *o, wgml_tensor *gate, wgml_tensor *up) {
    if (!gate || !up) return NULL;
    bool gelu = m->arch.act == ARCH_GELU_TANH_GLU;
    if (o->fused) return ew_glu(g, gate, up, gelu ? EW_GLU_GELU_TANH : EW_GLU_SILU);
    return wgml_mul(g, gelu ? wgml_gelu(g, gate, 1) : wgml_silu(g, gate), up);
}

/* RMSNorm of each head of x [B, S, H, hd] with w [hd] (the q/k norms), same shape. */
static wgml_tensor *head_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, float eps) {
    if (!x || !w) return NULL;
    int64_t rows[2] = {x->shape[0] * x->shape[1] * x->shape[2], x->shape[3]};
    wgml_tensor *y = wgml_rms_norm(g, wgml_reshape(g, x, 2, rows), w, eps);
    return y ? wgml_reshape(g, y, 4, x->shape) : NULL;
}

/* [1, S, H, hd] -> [1, H, S, hd] (a reshape when S = 1). */
static wgml_tensor *heads_first(wgml_graph *g, wgml_tensor *x, int64_t S, int64_t H, int64_t hd) {
    if (S == 1) {
        int64_t shape[4] = {1, H, 1, hd};
        return wgml_reshape(g, x, 4, shape);
    }
    static const int perm[4] = {0, 2, 1, 3};
    return wgml_permute(g, x, perm);
}

/* Attention of layer l over q, k, v f32 [B*S, heads*hd] (the projections): the q/k norms when
 * the architecture has them, RoPE (the layer's base and the family's pairing), then with a KV
 * cache k and v appended to it and q attending to the cache up to len (tab: the fused inputs,
 * attn_decode_step at one row, else rope_kv_step), else causal attention within each sequence;
 * a windowed layer sees only the last window positions. Returns [B*S, H*hd]; with chunks (and
 * the decode kernel taken) *chunks = its key chunks, and when more than 1 it returns their
 * partials [H, chunks, hd + 2] unmerged (attn_decode_step_parts) for the o projection. */
static wgml_tensor *attention(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l,
                              wgml_tensor *const *qkv, wgml_tensor *tab, int64_t *chunks) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *ar = &m->arch;
    const layer *L = &m->layers[l];
    int64_t B = o->B, S = o->S, hd = c->head_dim, H = c->n_head, Hk = c->n_head_kv;
    int64_t s4q[4] = {B, S, H, hd}, s4k[4] = {B, S, Hk, hd}, s2[2] = {B * S, H * hd};
    static const int perm[4] = {0, 2, 1, 3}; /* [B, S, H, hd] <-> [B, H, S, hd] */
    int windowed = arch_layer_windowed(ar, l);
    float base = windowed ? ar->rope_base_local : ar->rope_base, scale = ar->attn_scale;
    wgml_rope_style style = ar->rope_style;
    wgml_tensor *q = wgml_reshape(g, qkv[0], 4, s4q);
    wgml_tensor *k = wgml_reshape(g, qkv[1], 4, s4k);
    wgml_tensor *v = wgml_reshape(g, qkv[2], 4, s4k);
    wgml_tensor *kc = o->len ? share(g, L->k_cache) : NULL, *vc = o->len ? share(g, L->v_cache) : NULL, *a;
    if (tab && kc && vc && S == 1 && attn_decode_preferred(m->ctx, H, Hk, hd, kc->shape[2], ar->qk_norm)) {
        /* decode: the q/k norms, rope, both cache writes and attention in one dispatch (and
         * the chunks' merge) */
        wgml_tensor *qn = ar->qk_norm ? share(g, L->q_norm) : NULL, *kn = ar->qk_norm ? share(g, L->k_norm) : NULL;
        if (ar->qk_norm && (!qn || !kn)) return NULL;
        if (chunks) { /* the chunks' partials when the step splits: the o projection merges them */
            a = attn_decode_step_parts(g, q, k, v, o->positions, o->len, tab, kc, vc, style, windowed ? ar->window : 0,
                                       scale, qn, kn, c->rms_eps, chunks);
            if (a && *chunks > 1) return a;
        } else {
            a = attn_decode_step(g, q, k, v, o->positions, o->len, tab, kc, vc, style, windowed ? ar->window : 0, scale,
                                 qn, kn, c->rms_eps);
        }
        return a ? wgml_reshape(g, a, 2, s2) : NULL;
    }
    if (ar->qk_norm) {
        q = head_norm(g, q, share(g, L->q_norm), c->rms_eps);
        k = head_norm(g, k, share(g, L->k_norm), c->rms_eps);
    }
    if (!o->len) {
        q = wgml_rope_ex(g, q, o->positions, base, style, WGML_ROPE_BSHD, 0);
        k = wgml_rope_ex(g, k, o->positions, base, style, WGML_ROPE_BSHD, 0);
        q = wgml_permute(g, q, perm);
        k = wgml_permute(g, k, perm);
        v = wgml_permute(g, v, perm);
        a = windowed ? wgml_sdpa_window(g, q, k, v, ar->window, scale) : wgml_sdpa(g, q, k, v, 1, scale);
        a = wgml_permute(g, a, perm);
        return wgml_reshape(g, a, 2, s2);
    }
    if (tab) { /* rope of q and k, q heads-first and both cache writes in one dispatch */
        q = rope_kv_step(g, q, k, v, o->positions, tab, kc, vc, style);
        if (!q) return NULL;
    } else {
        q = wgml_rope_ex(g, q, o->positions, base, style, WGML_ROPE_BSHD, 0);
        k = wgml_rope_ex(g, k, o->positions, base, style, WGML_ROPE_BSHD, 0);
        q = heads_first(g, q, S, H, hd);
        k = heads_first(g, k, S, Hk, hd);
        v = heads_first(g, v, S, Hk, hd);
        if (!q || !k || !v || !kc || !vc || wgml_kv_append(g, kc, k, o->pos) || wgml_kv_append(g, vc, v, o->pos))
            return NULL;
    }
    a = sdpa_cached_rows(g, q, kc, vc, o->len, windowed ? ar->window : 0, scale); /* [1, S, H, hd] */
    return wgml_reshape(g, a, 2, s2);
}

/* Whether the decode step folds norms, residual adds and the gated activation into the 4-bit
 * GEMVs (q4_gemv_fused): one row through the KV cache, the fused ops on, no adapters or latents
 * (their products need the normed input itself), every projection 4-bit/8-bit. */
static bool gemv_fusion(const wgml_model *m, const fwd_opts *o) {
    if (!o->fused || !o->len || o->B * o->S != 1 || o->lora || o->latent) return false;
    for (int64_t l = 0; l < m->cfg.n_layer; l++)
        for (int t = 0; t < LLAMA_N_TARGETS; t++)
            if (!target_weight(m, l, t)->q) return false;
    return true;
}

/* Whether every layer's o projection GEMV can merge the decode step's attention chunks in its
 * prologue (q4_gemv_merge_fits with the step's chunk count). */
static bool merge_fits(const wgml_model *m) {
    const wgml_llama_config *c = &m->cfg;
    int64_t chunks = attn_decode_chunks(m->ctx, c->n_head, c->n_head_kv, c->head_dim, c->n_ctx);
    q4_gemv_fuse f = {.epi = Q4_EPI_RESIDUAL, .merge_heads = c->n_head, .merge_chunks = chunks, .merge_dim = c->head_dim};
    for (int64_t l = 0; l < c->n_layer && chunks > 1; l++)
        if (!q4_gemv_merge_fits(m->ctx, target_weight(m, l, T_O)->q, &f)) return false;
    return chunks > 1;
}

/* out = the targets of layer l on x through one q4_gemv_fused call: norm_w (or NULL) is the
 * RMSNorm folded in before the products, epi what is done with them (residual: the residual
 * stream the product is added to); chunks > 1: x is attention's chunk partials, merged in the
 * prologue. NULL with the error on the context. */
static bool gemv_fused_targets(const wgml_model *m, wgml_graph *g, int64_t l, const int *targets, int n, wgml_tensor *x,
                               wgml_tensor *norm_w, q4_epilogue epi, wgml_tensor *residual, int64_t chunks,
                               wgml_tensor **out) {
    wgml_q4_weight q[WGML_Q4_MULTI_MAX];
    const wgml_q4_weight *qp[WGML_Q4_MULTI_MAX];
    if (!x || (epi == Q4_EPI_RESIDUAL && !residual)) return false;
    for (int i = 0; i < n; i++) {
        if (q4_weight_share(g, target_weight(m, l, targets[i])->q, &q[i])) return false;
        qp[i] = &q[i];
    }
    q4_gemv_fuse f = {.norm_w = norm_w, .eps = m->cfg.rms_eps, .epi = epi, .residual = residual};
    if (chunks > 1) f.merge_heads = m->cfg.n_head, f.merge_chunks = chunks, f.merge_dim = m->cfg.head_dim;
    return q4_gemv_fused(g, "model", x, qp, n, &f, out) == WGML_OK;
}

/* The model's forward up to the final norm, recorded into g as o says: the token embedding
 * (times the architecture's multiplier), n_layer blocks (attention, then the gated FFN, each on
 * an RMSNorm of the residual stream and, with post-norms, RMSNormed again before it is added
 * back), the final RMSNorm. Each residual add computes the next norm with it (one dispatch
 * when fused). Returns the head's input f32 [B*S, D] ([1, D] with o->row), NULL with the error
 * on the context. */
static wgml_tensor *forward_hidden(const wgml_model *m, wgml_graph *g, const fwd_opts *o) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *ar = &m->arch;
    float eps = c->rms_eps;
    /* the RoPE tables (one per base) of the fused attention inputs through the KV cache */
    wgml_tensor *tab[2] = {NULL, NULL};
    if (o->fused && o->len && o->B == 1) {
        if (!(tab[0] = rope_freq_table(g, "model", c->head_dim, ar->rope_base))) return NULL;
        if (ar->window && !(tab[1] = rope_freq_table(g, "model", c->head_dim, ar->rope_base_local))) return NULL;
    }
    /* decode with GEMV fusion: without post-norms (pre_only) every norm and residual add is
     * inside a GEMV (x is the only stream; per block: q/k/v with the norm, attention, o with the
     * residual, gate/up with the norm and the activation, down with the residual); with
     * post-norms only the gated activation moves into the gate/up GEMV */
    bool gf = gemv_fusion(m, o), pre_only = gf && !ar->post_norms;
    /* decode: the o projections' GEMVs merge attention's key chunks in their prologue */
    bool merge_o = gf && merge_fits(m);
    q4_epilogue glu_epi = ar->act == ARCH_GELU_TANH_GLU ? Q4_EPI_GEGLU : Q4_EPI_SWIGLU;
    wgml_tensor *x = embed(m, g, o->ids); /* the residual stream [B*S, D] */
    /* the next sub-block's input (pre_only: never formed) */
    wgml_tensor *h = pre_only ? x : wgml_rms_norm(g, x, share(g, m->layers[0].attn_norm), eps);
    static const int qkv_t[3] = {T_Q, T_K, T_V}, gu_t[2] = {T_GATE, T_UP}, o_t[1] = {T_O}, down_t[1] = {T_DOWN};
    for (int64_t l = 0; l < c->n_layer; l++) {
        const layer *L = &m->layers[l];
        wgml_tensor *qkv[3], *gu[2];
        if (pre_only) {
            if (!gemv_fused_targets(m, g, l, qkv_t, 3, x, share(g, L->attn_norm), Q4_EPI_STORE, NULL, 0, qkv))
                return NULL;
        } else if (!h || !linear_group(m, g, o, l, qkv_t, 3, h, qkv)) {
            return NULL; /* q, k, v from one h */
        }
        /* decode: attention's key chunks left for the o projection's GEMV to merge, where it can */
        int64_t chunks = 0;
        wgml_tensor *a = attention(m, g, o, l, qkv, tab[arch_layer_windowed(ar, l)], merge_o ? &chunks : NULL);
        if (!a) return NULL;
        if (pre_only) {
            wgml_tensor *act = NULL;
            if (!gemv_fused_targets(m, g, l, o_t, 1, a, NULL, Q4_EPI_RESIDUAL, x, chunks, &x) ||
                !gemv_fused_targets(m, g, l, gu_t, 2, x, share(g, L->ffn_norm), glu_epi, NULL, 0, &act) ||
                !gemv_fused_targets(m, g, l, down_t, 1, act, NULL, Q4_EPI_RESIDUAL, x, 0, &x))
                return NULL;
            continue;
        }
        wgml_tensor *wy = ar->post_norms ? share(g, L->post_attn_norm) : NULL, *y = NULL;
        if (chunks > 1) {
            if (!gemv_fused_targets(m, g, l, o_t, 1, a, NULL, Q4_EPI_STORE, NULL, chunks, &y)) return NULL;
            h = add_norm(g, o, x, y, wy, share(g, L->ffn_norm), eps, &x);
        } else {
            h = proj_add_norm(m, g, o, l, T_O, a, x, wy, share(g, L->ffn_norm), eps, &x);
        }
        wgml_tensor *act = NULL;
        if (gf) {
            if (!gemv_fused_targets(m, g, l, gu_t, 2, h, NULL, glu_epi, NULL, 0, &act)) return NULL;
        } else {
            if (!h || !linear_group(m, g, o, l, gu_t, 2, h, gu)) return NULL; /* gate and up from one h */
            act = glu(m, g, o, gu[0], gu[1]);
        }
        wgml_tensor *fpost = ar->post_norms ? share(g, L->post_ffn_norm) : NULL, *f = NULL;
        if (l + 1 < c->n_layer || !o->row) {
            wgml_tensor *next = share(g, l + 1 < c->n_layer ? m->layers[l + 1].attn_norm : m->output_norm);
            h = proj_add_norm(m, g, o, l, T_DOWN, act, x, fpost, next, eps, &x);
        } else if (!(f = act ? target_linear(m, g, o, l, T_DOWN, act) : NULL)) {
            return NULL;
        } else { /* prefill: only the wanted row goes through the final norm */
            if (fpost) f = f ? wgml_rms_norm(g, f, fpost, eps) : NULL;
            x = f ? wgml_add(g, x, f, 1.0f) : NULL;
            h = x ? wgml_rms_norm(g, wgml_index_select(g, x, 0, o->row), share(g, m->output_norm), eps) : NULL;
        }
        if (!x || !h) return NULL;
    }
    if (pre_only) h = wgml_rms_norm(g, x, share(g, m->output_norm), eps);
    return h;
}

/* One runnable graph for S positions: inputs, the forward with the KV cache, logits and
 * argmax kept, and (S = 1) the greedy feedback. */
static wgml_status build_step(wgml_model *m, step_graph *sg, int64_t S) {
    memset(sg, 0, sizeof *sg);
    sg->S = S;
    wgml_graph *g = sg->g = wgml_graph_new(m->ctx);
    if (!g) return wgml_last_status(m->ctx);
    int64_t scalar = 1; /* the shape [1] */
    sg->ids = wgml_tensor_new(g, WGML_I32, 1, &S);
    sg->positions = wgml_tensor_new(g, WGML_I32, 1, &S);
    sg->pos = S == 1 ? sg->positions : wgml_tensor_new(g, WGML_I32, 1, &scalar);
    sg->len = wgml_tensor_new(g, WGML_I32, 1, &scalar);
    if (S > 1) sg->row = wgml_tensor_new(g, WGML_I32, 1, &scalar);
    fwd_opts o = {.B = 1, .S = S, .ids = sg->ids, .positions = sg->positions, .pos = sg->pos, .len = sg->len,
                  .row = sg->row, .lora = m->lora, .lora_shared = true, .fused = !m->unfused};
    wgml_tensor *x = forward_hidden(m, g, &o); /* [1, D] */
    if (!x) return fail_status(m->ctx);
    sg->logits = head_logits(m, g, x); /* [1, V] */
    sg->argmax = wgml_argmax(g, sg->logits, 1, 0);
    if (!sg->argmax || wgml_graph_keep(g, sg->logits) || wgml_graph_keep(g, sg->argmax)) return wgml_last_status(m->ctx);
    if (S == 1) {
        /* feedback for greedy decoding on the GPU (wgml_model_decode_greedy): the argmax becomes
         * the next token, goes to the history at this position, position and length advance.
         * Harmless for host-driven steps, which write ids, position and length before each run.
         * The kernel stays here: it is generation's own step over this graph's inputs, not an op. */
        sg->history = wgml_tensor_new(g, WGML_I32, 1, &m->cfg.n_ctx);
        wgml_tensor *ro[1] = {sg->argmax}, *rw[4] = {sg->ids, sg->positions, sg->len, sg->history};
        if (!sg->history || graph_dispatch(g, "llama_feedback", "llama_feedback", NULL, ro, 1, rw, 4, NULL, 0, 1))
            return wgml_last_status(m->ctx);
    }
    if (wgml_graph_compile(g)) return wgml_last_status(m->ctx);
    return WGML_OK;
}

wgml_tensor *llama_forward_train_hidden(wgml_model *m, wgml_graph *g, wgml_tensor *ids, wgml_tensor *positions,
                                        int64_t B, int64_t S, wgml_lora *const *lora, wgml_tensor *const *latent) {
    fwd_opts o = {.B = B, .S = S, .ids = ids, .positions = positions, .lora = lora, .latent = latent};
    return forward_hidden(m, g, &o); /* [B*S, D] */
}

/* Vocabulary columns per chunk of the fused head: the scratch is [T, 8192] f32 (128 MiB at
 * T = 4096, against 768 MiB for the whole logits and as much again for dlogits). */
#define LMHEAD_CHUNK 8192

wgml_tensor *llama_lmhead_ce(wgml_model *m, wgml_graph *g, wgml_tensor *h, wgml_tensor *labels,
                             const wgml_ce_options *opt) {
    if (!h) return NULL;
    const vweight *v = head_weight(m);
    /* a head in row parts (over the binding limit): the plain logits [R, V] and cross-entropy,
     * whose [R, V] must then fit one binding (small R; the fused op reads W in one binding) */
    if (v->n > 1) return wgml_cross_entropy_ex(g, head_logits(m, g, h), labels, opt, NULL);
    const lweight *w = &v->part[0];
    if (w->q) {
        wgml_q4_weight q;
        return q4_weight_share(g, w->q, &q) ? NULL : wgml_lmhead_ce_q4(g, h, &q, labels, LMHEAD_CHUNK, opt, NULL);
    }
    wgml_tensor *f = share(g, w->f);
    return f ? wgml_lmhead_ce(g, h, f, labels, LMHEAD_CHUNK, opt, NULL) : NULL;
}

static void free_step(step_graph *sg) {
    wgml_graph_free(sg->g);
    memset(sg, 0, sizeof *sg);
}

/* Writes the inputs for ids[0..n) at pos0 (padded to S with id 0), runs, reads outputs. */
static wgml_status run_step(wgml_model *m, step_graph *sg, const int32_t *ids, size_t n, float *logits, int32_t *next) {
    int64_t S = sg->S;
    int32_t *buf = calloc((size_t)S * 2, sizeof(int32_t));
    if (!buf) return wgml_set_error(m->ctx, WGML_ERR_OOM, "model: out of host memory");
    for (int64_t i = 0; i < S; i++) {
        buf[i] = i < (int64_t)n ? ids[i] : 0;
        buf[S + i] = (int32_t)(m->pos + i);
    }
    int32_t p0 = (int32_t)m->pos, len = (int32_t)(m->pos + S), row = (int32_t)n - 1;
    wgml_status s = wgml_tensor_write(sg->ids, buf, sizeof(int32_t) * (size_t)S);
    if (!s) s = wgml_tensor_write(sg->positions, buf + S, sizeof(int32_t) * (size_t)S);
    free(buf);
    if (!s && S > 1) s = wgml_tensor_write(sg->pos, &p0, sizeof p0);
    if (!s) s = wgml_tensor_write(sg->len, &len, sizeof len);
    if (!s && sg->row) s = wgml_tensor_write(sg->row, &row, sizeof row);
    if (!s) s = wgml_graph_run_timed(sg->g, &m->last_s);
    if (!s && next) s = wgml_tensor_read(sg->argmax, next, sizeof *next);
    if (!s && logits) s = wgml_tensor_read(sg->logits, logits, sizeof(float) * (size_t)m->cfg.n_vocab);
    if (!s) m->pos += (int64_t)n;
    return s;
}

static wgml_status check_ids(wgml_model *m, const char *op, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.n_vocab)
            return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: token %zu = %d is outside the vocabulary [0, %lld)", op, i,
                                  (int)ids[i], (long long)m->cfg.n_vocab);
    return WGML_OK;
}

/* The graph length for a chunk of n > 1 tokens at the current position: 8, then multiples of 16
 * (at most 15 padded positions), or n itself where padding would run past the cache. */
static int64_t prefill_bucket(const wgml_model *m, size_t n) {
    int64_t S = n <= MIN_BUCKET ? MIN_BUCKET : ((int64_t)n + 15) / 16 * 16;
    return m->pos + S > m->cfg.n_ctx ? (int64_t)n : S;
}

static step_graph *find_prefill(wgml_model *m, int64_t S) {
    for (int i = 0; i < m->n_prefill; i++)
        if (m->prefill[i].S == S) return &m->prefill[i];
    return NULL;
}

wgml_status wgml_model_prefill(wgml_model *m, const int32_t *ids, size_t n, float *logits, int32_t *next) {
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "model_prefill: model is NULL");
    if (!ids || n == 0) return wgml_set_error(m->ctx, WGML_ERR_ARG, "model_prefill: no tokens");
    if (check_ids(m, "model_prefill", ids, n)) return wgml_last_status(m->ctx);
    if (m->pos + (int64_t)n > m->cfg.n_ctx)
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT, "model_prefill: %lld + %zu tokens exceed the context of %lld",
                              (long long)m->pos, n, (long long)m->cfg.n_ctx);
    while (n > 0) {
        size_t chunk = n > MAX_BUCKET ? MAX_BUCKET : n;
        if (chunk == 1) { /* one token: the decode graph */
            wgml_status s = run_step(m, &m->decode, ids, 1, n == 1 ? logits : NULL, n == 1 ? next : NULL);
            if (s) return s;
            ids++, n--;
            continue;
        }
        int64_t S = prefill_bucket(m, chunk);
        step_graph *sg = find_prefill(m, S);
        if (!sg) {
            if (m->n_prefill == MAX_PREFILL_GRAPHS) free_step(&m->prefill[--m->n_prefill]);
            sg = &m->prefill[m->n_prefill];
            wgml_status s = build_step(m, sg, S);
            if (s) {
                free_step(sg);
                return s;
            }
            m->n_prefill++;
        }
        int last = chunk == n;
        wgml_status s = run_step(m, sg, ids, chunk, last ? logits : NULL, last ? next : NULL);
        if (s) return s;
        ids += chunk, n -= chunk;
    }
    return WGML_OK;
}

wgml_status wgml_model_decode(wgml_model *m, int32_t id, float *logits, int32_t *next) {
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "model_decode: model is NULL");
    if (check_ids(m, "model_decode", &id, 1)) return wgml_last_status(m->ctx);
    if (m->pos + 1 > m->cfg.n_ctx)
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT, "model_decode: the context of %lld positions is full",
                              (long long)m->cfg.n_ctx);
    return run_step(m, &m->decode, &id, 1, logits, next);
}

/* Steps in flight: a group is read back while the next one runs. */
#define GREEDY_DEPTH 2
#define GREEDY_BATCH 16

wgml_status wgml_model_decode_greedy(wgml_model *m, int32_t id, size_t n_steps, int batch, wgml_token_fn on_token,
                                     void *user, wgml_decode_stats *stats) {
    const char *op = "model_decode_greedy";
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: model is NULL", op);
    if (stats) memset(stats, 0, sizeof *stats);
    if (check_ids(m, op, &id, 1)) return wgml_last_status(m->ctx);
    if (m->pos + (int64_t)n_steps > m->cfg.n_ctx)
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT, "%s: %lld + %zu steps exceed the context of %lld", op,
                              (long long)m->pos, n_steps, (long long)m->cfg.n_ctx);
    if (n_steps == 0) return WGML_OK;
    if (!m->decode.g) return wgml_set_error(m->ctx, WGML_ERR_STATE, "%s: the model has no decode graph", op);
    size_t per = batch > 0 ? (size_t)batch : GREEDY_BATCH;
    step_graph *sg = &m->decode;
    int32_t p0 = (int32_t)m->pos, len = p0 + 1;
    uint64_t submits0 = wgml_submit_count(m->ctx);
    wgml_status s = wgml_tensor_write(sg->ids, &id, sizeof id);
    if (!s) s = wgml_tensor_write(sg->positions, &p0, sizeof p0);
    if (!s) s = wgml_tensor_write(sg->len, &len, sizeof len);
    gpu_async *flight[GREEDY_DEPTH] = {0};
    size_t count[GREEDY_DEPTH] = {0};
    int32_t *got = malloc(sizeof(int32_t) * per);
    if (!got && !s) s = wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    size_t submitted = 0, used = 0;
    int head = 0, n_flight = 0, stop = 0;
    double gpu_s = 0;
    uint64_t submit_ns = 0;
    /* keep GREEDY_DEPTH groups queued; read the oldest, hand its tokens over in order */
    while (!s && !stop && used < n_steps) {
        while (!s && n_flight < GREEDY_DEPTH && submitted < n_steps) {
            size_t k = n_steps - submitted < per ? n_steps - submitted : per;
            int slot = (head + n_flight) % GREEDY_DEPTH;
            uint64_t t0 = gpu_now_ns();
            flight[slot] = graph_run_async(sg->g, k, sg->history, sizeof(int32_t) * (uint64_t)(p0 + (int64_t)submitted),
                                           sizeof(int32_t) * k, true);
            submit_ns += gpu_now_ns() - t0;
            if (!flight[slot]) {
                s = wgml_last_status(m->ctx);
                if (!s) s = wgml_set_error(m->ctx, WGML_ERR_GPU, "%s: the submit failed", op);
            } else {
                count[slot] = k, submitted += k, n_flight++;
            }
        }
        if (s) break;
        double t = 0;
        gpu_async *a = flight[head];
        flight[head] = NULL;
        size_t k = count[head];
        head = (head + 1) % GREEDY_DEPTH, n_flight--;
        if ((s = gpu_async_wait(m->ctx, a, got, &t))) break;
        gpu_s = t < 0 || gpu_s < 0 ? -1 : gpu_s + t;
        for (size_t i = 0; i < k && !stop; i++) {
            used++, m->pos++; /* the step that made this token has run: its position is in the cache */
            if (on_token && on_token(user, got[i])) stop = 1;
        }
    }
    /* groups submitted past a stop: let them finish (they only write cache rows past pos and
     * the history), then drop their tokens */
    for (; n_flight > 0; head = (head + 1) % GREEDY_DEPTH, n_flight--) {
        double t = 0;
        if (s) gpu_async_free(flight[head]);
        else if (!(s = gpu_async_wait(m->ctx, flight[head], NULL, &t))) gpu_s = t < 0 || gpu_s < 0 ? -1 : gpu_s + t;
        flight[head] = NULL;
    }
    free(got);
    if (stats) {
        stats->steps = used;
        stats->submitted = submitted;
        stats->gpu_s = gpu_s;
        stats->submits = wgml_submit_count(m->ctx) - submits0;
        stats->submit_s = (double)submit_ns * 1e-9;
        stats->dispatches_per_step = wgml_graph_dispatch_count(sg->g);
    }
    m->last_s = gpu_s;
    return s;
}

/* ------------------------------------------------------------------ lifetime */

/* The stop tokens, from the file's metadata (so a model whose tokenizer wgml cannot build still
 * stops): tokenizer.ggml.eos_token_id and the end-of-turn tokens of the chat formats (ChatML,
 * Llama 3, Gemma) found by their text in tokenizer.ggml.tokens. */
static void find_stops(wgml_model *m) {
    wgml_gguf_value v, e;
    int64_t eos;
    if (wgml_gguf_find(m->file, "tokenizer.ggml.eos_token_id", &v) && !wgml_gguf_value_i64(m->file, v, &eos) &&
        eos >= 0 && eos < m->cfg.n_vocab)
        m->stop_ids[m->n_stop++] = (int32_t)eos;
    static const char *names[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"};
    if (wgml_gguf_get_array(m->file, "tokenizer.ggml.tokens", &v) || v.elem_type != WGML_GGUF_STRING) return;
    for (uint64_t i = 0; i < v.count && i < (uint64_t)m->cfg.n_vocab && m->n_stop < 4; i++) {
        const char *t;
        size_t n;
        if (wgml_gguf_array_elem(m->file, v, i, &e) || wgml_gguf_value_string(m->file, e, &t, &n)) return;
        if (n < 9 || t[0] != '<') continue; /* every name is 9 or more bytes and starts with '<' */
        for (size_t k = 0; k < sizeof names / sizeof *names; k++)
            if (strlen(names[k]) == n && !memcmp(names[k], t, n) && !wgml_model_is_stop(m, (int32_t)i))
                m->stop_ids[m->n_stop++] = (int32_t)i;
    }
}

wgml_model *wgml_model_load(wgml_ctx *ctx, const char *path, const wgml_model_options *options) {
    if (!ctx) return NULL;
    if (!path) {
        wgml_set_error(ctx, WGML_ERR_ARG, "model_load: path is NULL");
        return NULL;
    }
    wgml_model *m = calloc(1, sizeof *m);
    if (!m) {
        wgml_set_error(ctx, WGML_ERR_OOM, "model_load: out of host memory");
        return NULL;
    }
    m->ctx = ctx;
    const char *e = getenv("WGML_LLAMA_UNFUSED");
    m->unfused = e && *e && strcmp(e, "0");
    char err[512];
    wgml_status s = wgml_gguf_open(path, &m->file, err, sizeof err);
    if (s) {
        wgml_set_error(ctx, s, "model_load: %s", err);
        free(m);
        return NULL;
    }
    s = load_config(m, path, options);
    /* a tokenizer kind wgml does not build (WGML_ERR_UNSUPPORTED) leaves the model without one
     * (ids in, ids out; wgml_model_tokenizer gives NULL); a broken one fails the load */
    wgml_status ts = s ? WGML_OK : wgml_tokenizer_from_gguf(m->file, &m->tok, err, sizeof err);
    if (ts == WGML_ERR_UNSUPPORTED) memcpy(m->tok_err, err, sizeof m->tok_err);
    else if (ts) s = wgml_set_error(ctx, WGML_ERR_FORMAT, "model_load: %s: tokenizer: %s", path, err);
    if (!s && wgml_tokenizer_vocab_size(m->tok) > m->cfg.n_vocab)
        s = wgml_set_error(ctx, WGML_ERR_FORMAT, "model_load: %s: the tokenizer has %d tokens, the model %lld", path,
                           (int)wgml_tokenizer_vocab_size(m->tok), (long long)m->cfg.n_vocab);
    if (!s && !(m->wg = wgml_graph_new(ctx))) s = wgml_last_status(ctx);
    if (!s) s = load_weights(m, path);
    if (!s) s = build_step(m, &m->decode, 1);
    if (s) {
        wgml_model_free(m);
        return NULL;
    }
    find_stops(m);
    return m;
}

static void free_weight(lweight *w) {
    wgml_q4_free(w->q); /* built graph: frees the struct; the tensors go with the graph */
    w->q = NULL;
}

static void free_lora(wgml_model *m) {
    if (!m->lora) return;
    for (int64_t i = 0; i < m->cfg.n_layer * LLAMA_N_TARGETS; i++) wgml_lora_free(m->lora[i]);
    free(m->lora);
    m->lora = NULL;
}

/* Parses "blk.L.TARGET.lora_a|lora_b": layer, target index, 0 (a) or 1 (b); -1 when not one. */
static int parse_lora_name(const wgml_model *m, const char *name, int64_t *l, int *t) {
    long long li;
    char tn[32], ab[16];
    if (!name || sscanf(name, "blk.%lld.%31[a-z_].%15s", &li, tn, ab) != 3 || li < 0 || li >= m->cfg.n_layer) return -1;
    *l = li;
    for (*t = 0; *t < LLAMA_N_TARGETS; (*t)++)
        if (!strcmp(tn, llama_target_names[*t])) break;
    if (*t == LLAMA_N_TARGETS) return -1;
    return !strcmp(ab, "lora_a") ? 0 : !strcmp(ab, "lora_b") ? 1 : -1;
}

/* The adapters' tensors are new persistent tensors of the weight graph (a later call makes new
 * ones; the old ones stay allocated until the model is freed). The inference graphs are rebuilt
 * and the cached sequence is forgotten. */
wgml_status wgml_model_set_lora(wgml_model *m, const wgml_train_config *cfg, int n, const char *const *names,
                                const float *const *data) {
    const char *op = "model_set_lora";
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: model is NULL", op);
    if (n < 0 || (n > 0 && (!cfg || !names || !data)))
        return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: %d tensors need a config, names and data", op, n);
    if (n > 0 && (cfg->lora_rank < 1 || !(cfg->lora_alpha > 0)))
        return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: lora_rank %d and lora_alpha %g must be positive", op,
                              cfg->lora_rank, (double)cfg->lora_alpha);
    int64_t slots = m->cfg.n_layer * LLAMA_N_TARGETS;
    /* check every name first, so a bad list leaves the model as it was */
    int *have = calloc((size_t)slots, sizeof *have);
    if (!have) return wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    for (int i = 0; i < n; i++) {
        int64_t l;
        int t, ab = parse_lora_name(m, names[i], &l, &t);
        if (ab < 0 || !data[i]) {
            free(have);
            return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: tensor %d '%s' is not blk.<layer < %lld>.<target>.lora_a|lora_b "
                                  "with data", op, i, names[i] ? names[i] : "(null)", (long long)m->cfg.n_layer);
        }
        have[l * LLAMA_N_TARGETS + t] |= 1 << ab;
    }
    for (int64_t i = 0; i < slots; i++)
        if (have[i] && have[i] != 3) {
            char which = have[i] == 1 ? 'a' : 'b';
            free(have);
            return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: blk.%lld.%s has only its lora_%c", op,
                                  (long long)(i / LLAMA_N_TARGETS), llama_target_names[i % LLAMA_N_TARGETS], which);
        }
    free_step(&m->decode);
    for (int i = 0; i < m->n_prefill; i++) free_step(&m->prefill[i]);
    m->n_prefill = 0;
    m->pos = 0;
    free_lora(m);
    wgml_status s = WGML_OK;
    if (n > 0 && !(m->lora = calloc((size_t)slots, sizeof *m->lora)))
        s = wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    for (int64_t i = 0; i < slots && !s && n > 0; i++) {
        if (!have[i]) continue;
        int64_t N, K, r = cfg->lora_rank;
        llama_target_dims(m, (int)(i % LLAMA_N_TARGETS), &N, &K);
        wgml_lora *lo = calloc(1, sizeof *lo);
        if (!lo) {
            s = wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
            break;
        }
        m->lora[i] = lo;
        int64_t sa[2] = {r, K}, sb[2] = {N, r};
        lo->n = N, lo->k = K, lo->r = r, lo->scale = cfg->lora_alpha / (float)r;
        lo->a = wgml_tensor_new(m->wg, WGML_F32, 2, sa);
        lo->b = lo->a ? wgml_tensor_new(m->wg, WGML_F32, 2, sb) : NULL;
        if (!lo->b) s = wgml_last_status(m->ctx);
    }
    for (int i = 0; i < n && !s; i++) {
        int64_t l;
        int t, ab = parse_lora_name(m, names[i], &l, &t);
        wgml_lora *lo = m->lora[l * LLAMA_N_TARGETS + t];
        wgml_tensor *dst = ab ? lo->b : lo->a;
        s = wgml_tensor_write(dst, data[i], wgml_tensor_nbytes(dst));
    }
    free(have);
    if (s) free_lora(m);
    wgml_status s2 = build_step(m, &m->decode, 1);
    return s ? s : s2;
}

void wgml_model_free(wgml_model *m) {
    if (!m) return;
    /* the running graphs hold views of m->wg's tensors: free them first */
    free_step(&m->decode);
    for (int i = 0; i < m->n_prefill; i++) free_step(&m->prefill[i]);
    if (m->layers)
        for (int64_t l = 0; l < m->cfg.n_layer; l++) {
            layer *L = &m->layers[l];
            free_weight(&L->wq), free_weight(&L->wk), free_weight(&L->wv), free_weight(&L->wo);
            free_weight(&L->gate), free_weight(&L->up), free_weight(&L->down);
            wgml_q4_free(L->qkv), wgml_q4_free(L->gate_up); /* after the weights of their rows */
        }
    free_lora(m);
    free(m->layers);
    for (int p = 0; p < VPARTS_MAX; p++) {
        free_weight(&m->tok_embd.part[p]);
        free_weight(&m->output.part[p]);
    }
    wgml_graph_free(m->wg);
    wgml_tokenizer_free(m->tok);
    wgml_gguf_close(m->file);
    free(m);
}

const wgml_llama_config *wgml_model_config(const wgml_model *m) { return m ? &m->cfg : NULL; }
const wgml_tokenizer *wgml_model_tokenizer(const wgml_model *m) { return m ? m->tok : NULL; }
const char *wgml_model_tokenizer_error(const wgml_model *m) {
    return !m ? "model is NULL" : m->tok ? "" : m->tok_err;
}
void wgml_model_reset(wgml_model *m) {
    if (m) m->pos = 0;
}
int64_t wgml_model_pos(const wgml_model *m) { return m ? m->pos : 0; }

wgml_graph *wgml_model_decode_graph(wgml_model *m) { return m ? m->decode.g : NULL; }

wgml_graph *wgml_model_prefill_graph(wgml_model *m, size_t n) {
    if (!m || n < 2 || n > MAX_BUCKET) return NULL;
    step_graph *sg = find_prefill(m, prefill_bucket(m, n));
    return sg ? sg->g : NULL;
}
double wgml_model_last_run_seconds(const wgml_model *m) { return m ? m->last_s : 0; }

int wgml_model_is_stop(const wgml_model *m, int32_t id) {
    if (!m) return 0;
    for (int i = 0; i < m->n_stop; i++)
        if (m->stop_ids[i] == id) return 1;
    return 0;
}
