/* The decoder's rooms share these (private to src/model/decoder*.c): the model's tensors and
 * graphs, and what each room offers the others. The rooms: decoder_weights.c (GGUF tensors onto
 * the GPU), decoder_block.c (the block as plain ops: the reference, the training forward and the
 * unfused inference graphs), decoder_fused.c (the inference graphs' fusions: grouped GEMVs and
 * GEMMs, fused norms, attention's decode kernel), decoder.c (the step graphs: prefill, decode,
 * greedy decoding; the model's life). */
#ifndef WGML_MODEL_DECODER_INTERNAL_H
#define WGML_MODEL_DECODER_INTERNAL_H

#include "model/decoder.h"
#include "model/arch.h"
#include "wgml-model.h"

#include "graph/graph.h"

/* A matrix W[n, k]: quantised (q) or f32 (f, [n, k]), and its bias (f32 [n], or NULL; for q it
 * is also q->bias). */
typedef struct lweight {
    wgml_qweight *q;
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
    wgml_qweight *qkv, *gate_up;
    wgml_tensor *k_cache, *v_cache; /* f32 [1, Hkv, n_ctx, head_dim], or u32 [.., head_dim / 2] (f16) */
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
    /* RoPE frequency tables (ops/rope/rope_fused.h) of the global layers [0] and the windowed
     * ones [1] (NULL without a window), rope_freqs.weight's factors applied */
    wgml_tensor *rope_tab[2];
    layer *layers;
    step_graph decode;
    step_graph prefill[MAX_PREFILL_GRAPHS];
    int n_prefill;
    int64_t pos;
    double last_s;
    int unfused; /* plain ops instead of the fused kernels: CPU adapters, or $WGML_LLAMA_UNFUSED */
    int x8;      /* the inference graphs quantise the weights' activations to int8 (graph_set_x8) */
    int32_t stop_ids[4];
    int n_stop;
    wgml_lora **lora; /* [n_layer * DECODER_N_TARGETS] adapters of the inference graphs, or NULL;
                         tensors in wg (wgml_model_set_lora) */
};

/* The targets by index (the WGML_TARGET_* bit order). */
enum { T_Q, T_K, T_V, T_O, T_GATE, T_UP, T_DOWN };

/* How a block builder records the model into a graph: the inference graphs (decoder.c's
 * build_step) and the training forward (decoder_forward_train_hidden) differ only here. */
typedef struct fwd_opts {
    int64_t B, S;           /* B sequences of S positions (inference: B = 1) */
    wgml_tensor *ids;       /* i32 [B*S] */
    wgml_tensor *positions; /* i32 [S]: the position of each index (pos0 + i with a cache) */
    /* KV cache: k and v go to the cache rows from pos (i32 [1]) on, attention reads the cache
     * up to len (i32 [1]). NULL: no cache, causal attention within each sequence (training). */
    wgml_tensor *pos, *len;
    wgml_tensor *row;       /* i32 [1]: only this row goes to the final norm (prefill), or NULL */
    wgml_lora *const *lora; /* NULL or n_layer * DECODER_N_TARGETS adapters (entry l*7 + t) */
    wgml_tensor *const *lora_cat; /* NULL or a table like lora of stacked A's (decoder_adapters) */
    bool lora_shared;       /* the adapters' tensors are the weight graph's (shared into g), else g's */
    wgml_tensor *const *latent; /* NULL or a table like lora of straight-through latents of g */
} fwd_opts;

/* decoder_weights.c: the model's configuration and tensors from its GGUF file (errors name the
 * file and tensor); target t of layer l; freeing the weights. */
wgml_status decoder_load_config(wgml_model *m, const char *path, const wgml_model_options *opt);
wgml_status decoder_load_weights(wgml_model *m, const char *path);
const lweight *decoder_target_weight(const wgml_model *m, int64_t l, int t);
void decoder_free_weights(wgml_model *m);

/* decoder_block.c: the pieces both builders use, and the plain builder. */
wgml_tensor *decoder_share(wgml_graph *g, wgml_tensor *t); /* t shared into g (NULL stays NULL) */
wgml_status decoder_fail_status(wgml_ctx *ctx); /* a failed build step's status (never OK) */
wgml_tensor *decoder_embed(const wgml_model *m, wgml_graph *g, wgml_tensor *ids);
wgml_tensor *decoder_head_logits(const wgml_model *m, wgml_graph *g, wgml_tensor *x);
/* The LM head: output.weight, or the tied token embedding when the file has none. */
const vweight *decoder_head(const wgml_model *m);
/* y + the adapter of entry e of o (lora_shared: its tensors shared into g) applied to x; y
 * itself without one; NULL when y is or on failure */
wgml_tensor *decoder_add_lora(wgml_graph *g, const fwd_opts *o, int64_t e, wgml_tensor *x, wgml_tensor *y);
wgml_tensor *decoder_target_linear(const wgml_model *m, wgml_graph *g, const fwd_opts *o, int64_t l, int t,
                                   wgml_tensor *x);
wgml_tensor *decoder_head_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, float eps);
/* The model's forward up to the final norm as plain ops: returns the head's input f32 [B*S, D]
 * ([1, D] with o->row), NULL with the error on the context. */
wgml_tensor *decoder_forward_plain(const wgml_model *m, wgml_graph *g, const fwd_opts *o);

/* decoder_fused.c: the same forward for the inference graphs (a KV cache, B = 1) with the fused
 * kernels. */
wgml_tensor *decoder_forward_fused(const wgml_model *m, wgml_graph *g, const fwd_opts *o);

#endif
