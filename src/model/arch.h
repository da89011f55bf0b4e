/* Architectures as data (arch.c): what differs between the decoder-only families that the
 * decoder's block builders (decoder_block.c, decoder_fused.c) run, as one table entry per
 * general.architecture plus the values the file's metadata sets. */
#ifndef WGML_MODEL_ARCH_H
#define WGML_MODEL_ARCH_H

#include "wgml.h"
#include "wgml-model.h"

#include <stdbool.h>
#include <stdio.h>

/* The feed-forward's gated activation: act(gate) · up. */
typedef enum arch_act { ARCH_SILU_GLU = 0, ARCH_GELU_TANH_GLU = 1 } arch_act;

typedef struct model_arch {
    /* the family's facts (the table) */
    const char *name;           /* general.architecture, also the metadata keys' prefix */
    bool post_norms;            /* RMSNorm of the attention and FFN outputs before each residual add */
    bool qk_norm;               /* RMSNorm of every head of q and k (weights [head_dim]) before RoPE */
    bool qkv_bias;              /* the q, k and v projections carry biases */
    arch_act act;
    wgml_rope_style rope_style; /* INTERLEAVED: GGUF llama q/k (the converter permuted the rows); HALF: NeoX */
    bool embed_scale;           /* the embeddings are multiplied by sqrt(n_embd) */
    int swa_pattern_default;    /* with a window: layer l is global when (l + 1) % pattern == 0 */
    float rope_base_local_default; /* the local layers' RoPE base when the file names none */
    /* resolved from the metadata (arch_from_gguf) */
    float rope_base;            /* global layers (all layers without a window) */
    float rope_base_local;      /* the sliding-window layers */
    bool rope_freqs;            /* the file holds rope_freqs.weight: per-pair frequency factors (Llama 3) */
    int64_t window;             /* sliding window in keys; 0: every layer attends to all earlier keys */
    int swa_pattern;            /* 0: no window layers */
    float embed_mult;           /* the embedding multiplier: sqrt(n_embd) in f32, or 1 */
    float attn_scale;           /* the softmax scale of q·kᵀ */
    float attn_softcap, final_softcap; /* tanh soft caps of the attention scores and the logits; 0: none */
} model_arch;

/* Reads general.architecture and every hyper-parameter of f into *a and *c (c->n_ctx is left
 * to the caller). Returns WGML_UNSUPPORTED for an architecture not in the table or a feature
 * the builder does not run (soft caps), WGML_ERR_FORMAT for a missing or bad key; err says
 * which (without the file name). */
wgml_status arch_from_gguf(const wgml_gguf *f, model_arch *a, wgml_llama_config *c, char *err, size_t errlen);
/* 1 when layer l attends through the sliding window. */
int arch_layer_windowed(const model_arch *a, int64_t l);
/* The description, one "  key: value" line each, for wgml info. */
void arch_print(FILE *o, const model_arch *a, const wgml_llama_config *c);

#endif
