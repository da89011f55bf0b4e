/* The model: a decoder-only transformer from a GGUF file, whose families (Llama/SmolLM2, Qwen 2
 * and 3, Gemma 3) are rows of arch.c (public API in include/wgml-model.h). What the rest of the
 * library (generation, the trainer, the adapters' formats) uses of it; its rooms share
 * decoder_internal.h. */
#ifndef WGML_MODEL_DECODER_H
#define WGML_MODEL_DECODER_H

#include "wgml.h"
#include "wgml-model.h"

wgml_ctx *decoder_ctx(const wgml_model *m);
/* What the block builder does for m's family (a row of arch.c). */
const struct model_arch *decoder_arch(const wgml_model *m);
/* Length of the longest prefix of s[0..n) that does not end inside an incomplete UTF-8
 * sequence (the streaming hold-back of wgml_generate). */
size_t decoder_utf8_complete(const unsigned char *s, size_t n);

/* The linears of a block that can carry an adapter, in the order of the WGML_TARGET_* bits:
 * attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down (GGUF tensor names). */
#define DECODER_N_TARGETS 7
extern const char *const decoder_target_names[DECODER_N_TARGETS];
/* W[n, k] of target t (the same in every layer). */
void decoder_target_dims(const wgml_model *m, int t, int64_t *n, int64_t *k);
/* The 4-bit weight of target t in layer l (tensors of the model's weight graph), or NULL when
 * the file stores it in floating point. */
const wgml_qweight *decoder_target_qw(const wgml_model *m, int64_t l, int t);
/* The GGUF type a quantised target weight came from (-1 when it is held in f32). */
int decoder_target_gguf_type(const wgml_model *m, int64_t l, int t);
/* What the training forward adapts, each a table of n_layer * DECODER_N_TARGETS entries (l*7 + t)
 * or NULL. lora: adapters (NULL entry: none) whose tensors are g's own. lora_cat: at the entries
 * of q and of gate, the A's of that group's adapted targets (q/k/v, gate/up) stacked [n·r, K], a
 * tensor of g (the trainer's view over A's it keeps adjacent): those targets' down-projections
 * then run as one product; NULL there: each alone. latent: fp32 [N, K] trainable tensors of g:
 * those linears (4-bit weights only) train straight-through (qw_ste_linear). */
typedef struct decoder_adapters {
    wgml_lora *const *lora;
    wgml_tensor *const *lora_cat;
    wgml_tensor *const *latent;
} decoder_adapters;

/* Records the training forward into g (a built graph; the plain block builder of
 * decoder_block.c, without KV cache): ids i32 [B*S] (B sequences of S tokens), positions
 * i32 [S] (0 .. S-1), causal attention within each sequence, with the adapters of ad. The
 * model's weights are shared into g. Returns h f32 [B*S, D], the LM head's input (the forward up
 * to the final norm; decoder_lmhead_ce takes it from there). */
wgml_tensor *decoder_forward_train_hidden(wgml_model *m, wgml_graph *g, wgml_tensor *ids, wgml_tensor *positions,
                                          int64_t B, int64_t S, const decoder_adapters *ad);
/* Mean cross-entropy of the model's LM head (output.weight, or the tied token embedding, in the
 * form the model holds it: 4-bit/8-bit or f32, shared into g) on h [B*S, D] against labels,
 * through the fused chunked wgml_lmhead_ce (no [B*S, V] logits; its autograd rule gives h its
 * gradient in wgml_backward). A head held in row parts (over the device's binding limit: Gemma
 * 3 under lavapipe) takes the plain logits and wgml_cross_entropy_ex instead. opt as for
 * wgml_cross_entropy_ex. */
wgml_tensor *decoder_lmhead_ce(wgml_model *m, wgml_graph *g, wgml_tensor *h, wgml_tensor *labels,
                               const wgml_ce_options *opt);

#endif
