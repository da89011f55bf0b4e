/* The decoder's weights: its configuration (arch.c's row for the file's family, the
 * hyper-parameters) and its tensors, from the GGUF file onto the GPU into the weight graph
 * (m->wg, never run: it owns the persistent tensors). Projections the GPU can read quantised stay
 * so (4-bit/8-bit kinds); q, k, v and gate, up are loaded as one weight where they can be (the
 * concatenated prefill GEMM); a vocabulary matrix over the binding limit is held in row parts.
 * Errors name the file and the tensor. */
#define _POSIX_C_SOURCE 200809L
#include "model/decoder_internal.h"

#include "ops/qweight/qw_share.h"
#include "ops/rope/rope_fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const decoder_target_names[DECODER_N_TARGETS] = {
    [T_Q] = "attn_q",      [T_K] = "attn_k", [T_V] = "attn_v",     [T_O] = "attn_output",
    [T_GATE] = "ffn_gate", [T_UP] = "ffn_up", [T_DOWN] = "ffn_down"};

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
 * format the qweight family runs (wgml_qweight_gguf_on_gpu: Q4_0 ... Q8_0, Q2_K ... Q6_K, IQ4_NL,
 * IQ4_XS) whose rows are whole blocks;
 * the float types take the plain f32 path. */
static int keep_quantised(uint32_t type, int64_t k) {
    uint64_t be = 0;
    if (type == WGML_GGML_F32 || type == WGML_GGML_F16 || type == WGML_GGML_BF16) return 0;
    return wgml_qweight_gguf_on_gpu((int)type) && wgml_ggml_type_size(type, &be, NULL) && be && k % (int64_t)be == 0;
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
            w[p].q = wgml_qweight_upload_gguf(m->wg, (int)t->type, (const char *)data + row * (size_t)r0, row * (size_t)rn,
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
 * rows (qw_weight_rows): a prefill takes them in one GEMM (qw_concat.h), every other use sees
 * separate weights. Else each alone (*cat NULL). */
static wgml_status load_group(wgml_model *m, const char *path, const char *const *names, const int64_t *ns, int cnt,
                              int64_t k, bool together, lweight *const *w, wgml_qweight **cat) {
    *cat = NULL;
    const void *data[3];
    size_t bytes[3], total = 0;
    int64_t n = 0;
    uint32_t type = 0;
    for (int i = 0; i < cnt && together; i++) {
        int64_t t = find_tensor(m, path, names[i], ns[i], k, 0);
        if (t < 0) return wgml_last_status(m->ctx);
        uint32_t ty = wgml_gguf_tensor_at(m->file, t)->type;
        together = (i == 0 || ty == type) && keep_quantised(ty, k) && qw_gguf_rows_fit(m->ctx, (int)ty, k, n);
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
    *cat = wgml_qweight_upload_gguf(m->wg, (int)type, buf, total, n, k);
    free(buf);
    if (!*cat) return upload_err(m, names[0]);
    for (int64_t i = 0, r0 = 0; i < cnt; r0 += ns[i++]) {
        w[i]->type = type;
        if (!(w[i]->q = qw_weight_rows(*cat, r0, ns[i]))) return upload_err(m, names[i]);
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

/* The KV cache's element type into cfg.kv_f16: the option, else $WGML_KV, else f32. */
static wgml_status kv_type(wgml_model *m, const wgml_model_options *opt) {
    wgml_kv_type t = opt ? opt->kv_type : WGML_KV_AUTO;
    const char *e = getenv("WGML_KV");
    if (t == WGML_KV_AUTO && e && *e) {
        if (strcmp(e, "f16") && strcmp(e, "f32"))
            return wgml_set_error(m->ctx, WGML_ERR_ARG, "model_load: $WGML_KV is '%s'; it takes f16 or f32", e);
        t = strcmp(e, "f16") ? WGML_KV_F32 : WGML_KV_F16;
    }
    if (t != WGML_KV_AUTO && t != WGML_KV_F32 && t != WGML_KV_F16)
        return wgml_set_error(m->ctx, WGML_ERR_ARG, "model_load: kv_type %d is not a wgml_kv_type", (int)t);
    if (t == WGML_KV_F16 && m->cfg.head_dim % 4)
        return wgml_set_error(m->ctx, WGML_ERR_UNSUPPORTED,
                              "model_load: an f16 KV cache needs head_dim a multiple of 4; this model's is %lld",
                              (long long)m->cfg.head_dim);
    m->cfg.kv_f16 = t == WGML_KV_F16;
    return WGML_OK;
}

wgml_status decoder_load_config(wgml_model *m, const char *path, const wgml_model_options *opt) {
    wgml_llama_config *c = &m->cfg;
    char err[512];
    wgml_status s = arch_from_gguf(m->file, &m->arch, c, err, sizeof err);
    if (s) return wgml_set_error(m->ctx, s, "model_load: %s: %s", path, err);
    if (opt && (opt->n_ctx < 0 || opt->n_ctx > ((int64_t)1 << 24)))
        return wgml_set_error(m->ctx, WGML_ERR_ARG, "model_load: n_ctx %lld is outside 1..%lld (0: the default)",
                              (long long)opt->n_ctx, (long long)1 << 24);
    c->n_ctx = opt && opt->n_ctx > 0 ? opt->n_ctx : (c->n_ctx_train < 2048 ? c->n_ctx_train : 2048);
    return kv_type(m, opt);
}

/* The bias [n] of a loaded W[n, k] (4-bit weights add it in their own kernels). */
static wgml_status load_bias(wgml_model *m, const char *path, const char *name, lweight *w) {
    int64_t n = w->q ? w->q->n : w->f->shape[0];
    wgml_status s = load_vector(m, path, name, n, &w->bias);
    if (!s && w->q) w->q->bias = w->bias;
    return s;
}

/* The RoPE frequency tables of the global and the windowed layers, persistent and shared by
 * every graph: theta^(-2i/hd) per pair, divided by the file's rope_freqs.weight [hd/2] where it
 * has one. Llama 3.1 / 3.2 / 3.3 files do: their long-context frequency scaling (rope_scaling
 * "llama3" in the Hugging Face config) written as a factor per pair, which llama.cpp divides
 * by as here; without it every such model's attention would be off at any length. */
static wgml_status load_rope_tables(wgml_model *m, const char *path) {
    int64_t hd = m->cfg.head_dim, half = hd / 2;
    float *f = NULL;
    int64_t i = find_tensor(m, path, "rope_freqs.weight", 0, half, 1);
    if (i == -1) return wgml_last_status(m->ctx);
    if (i >= 0 && !(f = host_f32(m, path, i, 1, half))) return wgml_last_status(m->ctx);
    for (int64_t j = 0; f && j < half; j++)
        if (!(f[j] > 0) || !isfinite(f[j])) {
            wgml_status s = wgml_set_error(m->ctx, WGML_ERR_FORMAT,
                                           "model_load: %s: tensor 'rope_freqs.weight' [%lld]: factor %lld is %g; "
                                           "frequency factors must be positive and finite",
                                           path, (long long)half, (long long)j, (double)f[j]);
            free(f);
            return s;
        }
    m->rope_tab[0] = rope_freq_table(m->wg, "model_load", hd, m->arch.rope_base, f);
    if (m->rope_tab[0] && m->arch.window) m->rope_tab[1] = rope_freq_table(m->wg, "model_load", hd, m->arch.rope_base_local, f);
    free(f);
    return m->rope_tab[0] && (!m->arch.window || m->rope_tab[1]) ? WGML_OK : wgml_last_status(m->ctx);
}

wgml_status decoder_load_weights(wgml_model *m, const char *path) {
    const wgml_llama_config *c = &m->cfg;
    const model_arch *a = &m->arch;
    int64_t D = c->n_embd, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_head_kv * hd;
    wgml_status s;
    if ((s = load_vocab(m, path, "token_embd.weight", &m->tok_embd, 0)) ||
        (s = load_vector(m, path, "output_norm.weight", D, &m->output_norm)) ||
        (s = load_vocab(m, path, "output.weight", &m->output, 1)) || (s = load_rope_tables(m, path)))
        return s;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) return wgml_set_error(m->ctx, WGML_ERR_OOM, "model_load: out of host memory");
    /* the KV cache: f32, or its f16 form (src/ops/attention/kv_cache.h) */
    int64_t cshape[4] = {1, c->n_head_kv, c->n_ctx, c->kv_f16 ? hd / 2 : hd};
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
        L->k_cache = wgml_tensor_new(m->wg, c->kv_f16 ? WGML_U32 : WGML_F32, 4, cshape);
        L->v_cache = wgml_tensor_new(m->wg, c->kv_f16 ? WGML_U32 : WGML_F32, 4, cshape);
        if (!L->k_cache || !L->v_cache) return wgml_last_status(m->ctx);
    }
    return WGML_OK;
}

const lweight *decoder_target_weight(const wgml_model *m, int64_t l, int t) {
    const layer *L = &m->layers[l];
    const lweight *w[DECODER_N_TARGETS] = {[T_Q] = &L->wq,      [T_K] = &L->wk,   [T_V] = &L->wv,      [T_O] = &L->wo,
                                         [T_GATE] = &L->gate, [T_UP] = &L->up, [T_DOWN] = &L->down};
    return w[t];
}

void decoder_target_dims(const wgml_model *m, int t, int64_t *n, int64_t *k) {
    const wgml_llama_config *c = &m->cfg;
    int64_t D = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    const int64_t ns[DECODER_N_TARGETS] = {[T_Q] = qd,      [T_K] = kvd,     [T_V] = kvd,  [T_O] = D,
                                         [T_GATE] = c->n_ff, [T_UP] = c->n_ff, [T_DOWN] = D};
    const int64_t ks[DECODER_N_TARGETS] = {[T_Q] = D,    [T_K] = D,    [T_V] = D, [T_O] = qd,
                                         [T_GATE] = D, [T_UP] = D, [T_DOWN] = c->n_ff};
    *n = ns[t];
    *k = ks[t];
}

const wgml_qweight *decoder_target_qw(const wgml_model *m, int64_t l, int t) { return decoder_target_weight(m, l, t)->q; }

int decoder_target_gguf_type(const wgml_model *m, int64_t l, int t) {
    const lweight *w = decoder_target_weight(m, l, t);
    return w->q ? (int)w->type : -1;
}

static void free_weight(lweight *w) {
    wgml_qweight_free(w->q); /* built graph: frees the struct; the tensors go with the graph */
    w->q = NULL;
}

void decoder_free_weights(wgml_model *m) {
    if (m->layers)
        for (int64_t l = 0; l < m->cfg.n_layer; l++) {
            layer *L = &m->layers[l];
            free_weight(&L->wq), free_weight(&L->wk), free_weight(&L->wv), free_weight(&L->wo);
            free_weight(&L->gate), free_weight(&L->up), free_weight(&L->down);
            wgml_qweight_free(L->qkv), wgml_qweight_free(L->gate_up); /* after the weights of their rows */
        }
    free(m->layers);
    m->layers = NULL;
    for (int p = 0; p < VPARTS_MAX; p++) {
        free_weight(&m->tok_embd.part[p]);
        free_weight(&m->output.part[p]);
    }
}
