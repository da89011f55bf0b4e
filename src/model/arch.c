/* Architectures as data: one table entry per family the decoder's block builders
 * (decoder_block.c, decoder_fused.c) run, and the reading of its hyper-parameters from a GGUF
 * file's "<arch>.*" metadata. What differs between Llama/SmolLM2, Qwen2, Qwen3 and Gemma 3 is here and nowhere else: norm placement, q/k norms,
 * biases, the activation, the RoPE pairing and bases, sliding windows, the embedding multiplier,
 * the attention scale and soft caps. */
#include "model/arch.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* The families. RoPE pairing: llama.cpp's converter permutes a Llama's q/k rows so that GGML's
 * normal (interleaved) mode applies; Qwen2, Qwen3 and Gemma 3 keep Hugging Face's rows and use
 * the NeoX (half) pairing. Gemma 3: RMSNorm before and after attention and FFN, q/k norms,
 * GeGLU with tanh-GELU, embeddings times sqrt(d), a sliding window on five layers of six (layer
 * l is global when (l + 1) % 6 == 0, the rule of transformers' Gemma3TextConfig and of
 * llama.cpp) with the local RoPE base 10000 (the file stores only the global base). */
static const model_arch ARCHS[] = {
    {.name = "llama", .act = ARCH_SILU_GLU, .rope_style = WGML_ROPE_INTERLEAVED},
    {.name = "qwen2", .qkv_bias = true, .act = ARCH_SILU_GLU, .rope_style = WGML_ROPE_HALF},
    {.name = "qwen3", .qk_norm = true, .act = ARCH_SILU_GLU, .rope_style = WGML_ROPE_HALF},
    {.name = "gemma3", .post_norms = true, .qk_norm = true, .act = ARCH_GELU_TANH_GLU, .rope_style = WGML_ROPE_HALF,
     .embed_scale = true, .swa_pattern_default = 6, .rope_base_local_default = 10000.0f},
};

static wgml_status fail(char *err, size_t errlen, wgml_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return s;
}

/* "<arch>.<suffix>" */
static const char *key_of(const model_arch *a, const char *suffix, char *buf, size_t n) {
    snprintf(buf, n, "%s.%s", a->name, suffix);
    return buf;
}

/* A positive integer <arch>.<suffix>; dflt when absent and not required. */
static wgml_status get_int(const wgml_gguf *f, const model_arch *a, const char *suffix, int64_t *out, int64_t dflt,
                           int required, char *err, size_t errlen) {
    char key[128];
    wgml_gguf_value v;
    if (!wgml_gguf_find(f, key_of(a, suffix, key, sizeof key), &v)) {
        if (required) return fail(err, errlen, WGML_ERR_FORMAT, "missing key '%s'", key);
        *out = dflt;
        return WGML_OK;
    }
    if (wgml_gguf_value_i64(f, v, out)) return fail(err, errlen, WGML_ERR_FORMAT, "%s", wgml_gguf_error(f));
    if (*out <= 0) return fail(err, errlen, WGML_ERR_FORMAT, "key '%s' = %lld must be positive", key, (long long)*out);
    return WGML_OK;
}

/* A float <arch>.<suffix>, positive (or, with zero_ok, zero); dflt when absent and not required. */
static wgml_status get_float(const wgml_gguf *f, const model_arch *a, const char *suffix, float *out, float dflt,
                             int required, int zero_ok, char *err, size_t errlen) {
    char key[128];
    wgml_gguf_value v;
    if (!wgml_gguf_find(f, key_of(a, suffix, key, sizeof key), &v)) {
        if (required) return fail(err, errlen, WGML_ERR_FORMAT, "missing key '%s'", key);
        *out = dflt;
        return WGML_OK;
    }
    double d;
    if (wgml_gguf_value_f64(f, v, &d)) return fail(err, errlen, WGML_ERR_FORMAT, "%s", wgml_gguf_error(f));
    if (!(d > 0 || (zero_ok && d == 0)) || !isfinite(d) || d > 3.4e38)
        return fail(err, errlen, WGML_ERR_FORMAT, "key '%s' = %g must be %s", key, d, zero_ok ? "finite, >= 0" : "positive");
    *out = (float)d;
    return WGML_OK;
}

/* The shapes: heads, head dims (key, value, rope equal and even), vocabulary. */
static wgml_status read_shapes(const wgml_gguf *f, const model_arch *a, wgml_llama_config *c, char *err, size_t errlen) {
    wgml_status s;
    if ((s = get_int(f, a, "context_length", &c->n_ctx_train, 0, 1, err, errlen)) ||
        (s = get_int(f, a, "embedding_length", &c->n_embd, 0, 1, err, errlen)) ||
        (s = get_int(f, a, "block_count", &c->n_layer, 0, 1, err, errlen)) ||
        (s = get_int(f, a, "feed_forward_length", &c->n_ff, 0, 1, err, errlen)) ||
        (s = get_int(f, a, "attention.head_count", &c->n_head, 0, 1, err, errlen)) ||
        (s = get_int(f, a, "attention.head_count_kv", &c->n_head_kv, c->n_head, 0, err, errlen)))
        return s;
    if (c->n_embd % c->n_head || c->n_head % c->n_head_kv)
        return fail(err, errlen, WGML_ERR_FORMAT, "embedding length %lld, %lld heads and %lld KV heads do not fit",
                    (long long)c->n_embd, (long long)c->n_head, (long long)c->n_head_kv);
    if ((s = get_int(f, a, "attention.key_length", &c->head_dim, c->n_embd / c->n_head, 0, err, errlen))) return s;
    int64_t vdim, rdim;
    if ((s = get_int(f, a, "attention.value_length", &vdim, c->head_dim, 0, err, errlen)) ||
        (s = get_int(f, a, "rope.dimension_count", &rdim, c->head_dim, 0, err, errlen)))
        return s;
    if (vdim != c->head_dim || rdim != c->head_dim || c->head_dim % 2)
        return fail(err, errlen, WGML_ERR_UNSUPPORTED, "head dims (key %lld, value %lld, rope %lld) must be equal and even",
                    (long long)c->head_dim, (long long)vdim, (long long)rdim);
    int64_t ti = wgml_gguf_find_tensor(f, "token_embd.weight");
    if (ti < 0) return fail(err, errlen, WGML_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    const wgml_gguf_tensor *te = wgml_gguf_tensor_at(f, ti);
    if ((s = get_int(f, a, "vocab_size", &c->n_vocab, te->dims[1], 0, err, errlen))) return s;
    c->tok_embd_type = te->type;
    c->tied_output = wgml_gguf_find_tensor(f, "output.weight") < 0;
    return WGML_OK;
}

/* RoPE bases, the sliding window, the multipliers and the soft caps. */
static wgml_status read_attention(const wgml_gguf *f, model_arch *a, wgml_llama_config *c, char *err, size_t errlen) {
    wgml_status s;
    int64_t window = 0;
    if ((s = get_float(f, a, "rope.freq_base", &c->rope_base, 10000.0f, 0, 0, err, errlen)) ||
        (s = get_float(f, a, "attention.layer_norm_rms_epsilon", &c->rms_eps, 0, 1, 0, err, errlen)) ||
        (s = get_int(f, a, "attention.sliding_window", &window, 0, 0, err, errlen)))
        return s;
    a->rope_base = c->rope_base;
    a->window = a->swa_pattern_default ? window : 0;
    a->swa_pattern = a->window ? a->swa_pattern_default : 0;
    float local = a->rope_base_local_default > 0 ? a->rope_base_local_default : c->rope_base;
    if ((s = get_float(f, a, "rope.freq_base_swa", &a->rope_base_local, local, 0, 0, err, errlen))) return s;
    a->rope_freqs = wgml_gguf_find_tensor(f, "rope_freqs.weight") >= 0;
    /* the query scale: <arch>.attention.scale when the file has it, else 1/sqrt(head_dim) (Gemma 3:
     * 1/sqrt(query_pre_attn_scalar), which equals head_dim for every size but 27B) */
    if ((s = get_float(f, a, "attention.scale", &a->attn_scale, (float)(1.0 / sqrt((double)c->head_dim)), 0, 0, err,
                       errlen)))
        return s;
    /* transformers multiplies by sqrt(d) held as an f32 tensor cast to the weights' dtype; our
     * embeddings are f32, so the multiplier is sqrt(d) rounded to f32 */
    a->embed_mult = a->embed_scale ? (float)sqrt((double)c->n_embd) : 1.0f;
    if ((s = get_float(f, a, "attn_logit_softcapping", &a->attn_softcap, 0, 0, 1, err, errlen)) ||
        (s = get_float(f, a, "final_logit_softcapping", &a->final_softcap, 0, 0, 1, err, errlen)))
        return s;
    if (a->attn_softcap > 0 || a->final_softcap > 0)
        return fail(err, errlen, WGML_ERR_UNSUPPORTED, "soft caps (attention %g, final %g) are not implemented",
                    (double)a->attn_softcap, (double)a->final_softcap);
    return WGML_OK;
}

wgml_status arch_from_gguf(const wgml_gguf *f, model_arch *a, wgml_llama_config *c, char *err, size_t errlen) {
    const char *name;
    size_t len;
    if (wgml_gguf_get_string(f, "general.architecture", &name, &len))
        return fail(err, errlen, WGML_ERR_FORMAT, "%s", wgml_gguf_error(f));
    const model_arch *found = NULL;
    for (size_t i = 0; i < sizeof ARCHS / sizeof *ARCHS && !found; i++)
        if (strlen(ARCHS[i].name) == len && !memcmp(ARCHS[i].name, name, len)) found = &ARCHS[i];
    if (!found)
        return fail(err, errlen, WGML_ERR_UNSUPPORTED,
                    "architecture '%.*s' is not supported (supported: llama, qwen2, qwen3, gemma3)", (int)(len > 64 ? 64 : len),
                    name);
    *a = *found;
    wgml_status s = read_shapes(f, a, c, err, errlen);
    return s ? s : read_attention(f, a, c, err, errlen);
}

int arch_layer_windowed(const model_arch *a, int64_t l) {
    return a->window > 0 && a->swa_pattern > 0 && (l + 1) % a->swa_pattern != 0;
}

void arch_print(FILE *o, const model_arch *a, const wgml_llama_config *c) {
    fprintf(o, "  family:        %s\n", a->name);
    fprintf(o, "  blocks:        %lld, d %lld, ffn %lld, %lld heads, %lld KV heads, head dim %lld, vocab %lld\n",
            (long long)c->n_layer, (long long)c->n_embd, (long long)c->n_ff, (long long)c->n_head,
            (long long)c->n_head_kv, (long long)c->head_dim, (long long)c->n_vocab);
    fprintf(o, "  norms:         RMSNorm (eps %g) %s%s\n", (double)c->rms_eps,
            a->post_norms ? "before and after attention and FFN" : "before attention and FFN",
            a->qk_norm ? ", and on each head of q and k" : "");
    fprintf(o, "  projections:   %s\n", a->qkv_bias ? "q, k, v with bias" : "no biases");
    fprintf(o, "  activation:    %s\n", a->act == ARCH_GELU_TANH_GLU ? "GELU(tanh)-GLU" : "SiLU-GLU");
    fprintf(o, "  rope:          %s pairs, base %g", a->rope_style == WGML_ROPE_HALF ? "half (NeoX)" : "interleaved",
            (double)a->rope_base);
    if (a->window) fprintf(o, " (window layers %g)", (double)a->rope_base_local);
    if (a->rope_freqs) fprintf(o, ", each pair's frequency divided by its factor in rope_freqs.weight");
    fprintf(o, "\n");
    if (a->window) {
        fprintf(o, "  attention:     sliding window %lld on layers l with (l+1) %% %d != 0; global:", (long long)a->window,
                a->swa_pattern);
        for (int64_t l = 0; l < c->n_layer; l++)
            if (!arch_layer_windowed(a, l)) fprintf(o, " %lld", (long long)l);
        fprintf(o, "\n");
    } else {
        fprintf(o, "  attention:     causal over all earlier positions\n");
    }
    fprintf(o, "  scales:        embedding x%.9g, attention %.9g\n", (double)a->embed_mult, (double)a->attn_scale);
    fprintf(o, "  soft caps:     attention %s, final %s\n", a->attn_softcap > 0 ? "set" : "none",
            a->final_softcap > 0 ? "set" : "none");
    fprintf(o, "  output head:   %s\n", c->tied_output ? "tied (the token embedding)" : "output.weight");
}
