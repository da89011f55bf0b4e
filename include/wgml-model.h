/* wgml-model.h: the tokenizer and chat template, the Llama model, generation and sampling
 * (src/model). Builds on wgml.h and the GGUF reader of wgml-io.h (included here, so code written
 * when the GGUF reader was declared here compiles). */
#ifndef WGML_MODEL_H
#define WGML_MODEL_H

#include "wgml.h"
#include "wgml-io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- model files ------------------------------------------------------------------------ */
/* Writes a summary of a GGUF model to file (a FILE*; NULL: stdout): architecture, every
 * "<arch>.*" hyper-parameter, the tokenizer and a tensor table (name, shape, type, bytes). */
wgml_status wgml_model_print_info(const char *path, void *file);

/* ---- tokenizer and chat template --------------------------------------------------------- */
/* Text to token ids and back, and the instruct model's chat format. */

/* A tokenizer built from a GGUF's metadata, of one of two kinds (tokenizer.ggml.model):
 *  - "gpt2", byte-level BPE: tokens, merges, token types, BOS/EOS ids and the pre-tokenizer
 *    named by tokenizer.ggml.pre ("smollm" and the others that split digits one by one before
 *    the GPT-2 pattern; "gpt2"/"default" for the plain GPT-2 pattern). Control and
 *    user-defined tokens are matched in the text (leftmost, longest) before BPE when
 *    WGML_TOK_SPECIAL is given.
 *  - "llama", SentencePiece BPE (Gemma, Llama 2, Mistral): tokens, scores, token types,
 *    bos/eos/unknown/padding ids, add_bos_token, add_eos_token, add_space_prefix. Spaces
 *    become U+2581, the dummy prefix U+2581 starts the text when add_space_prefix says so, the
 *    adjacent pair whose concatenation has the highest score merges first (leftmost on a tie),
 *    characters outside the vocabulary become <0xXX> byte tokens (or the unknown token when
 *    there are none), and so do bytes that are not valid UTF-8 (kept, not replaced by U+FFFD,
 *    so decode gives them back; a U+2581 in the text comes back as a space). User-defined
 *    tokens are always matched as whole tokens (as SentencePiece does; their spaces stand for
 *    U+2581, which GGUF converters write as spaces); control tokens' text only with
 *    WGML_TOK_SPECIAL.
 * Decoding skips control tokens with WGML_TOK_SKIP_SPECIAL (else shows their text) and, for
 * SentencePiece, drops the space of the dummy prefix. */
typedef struct wgml_tokenizer wgml_tokenizer;

enum {
    WGML_TOK_ADD_BOS = 1,  /* encode: prepend the BOS id */
    WGML_TOK_ADD_EOS = 2,  /* encode: append the EOS id */
    WGML_TOK_SPECIAL = 4,  /* encode: match special-token text (else it is plain text) */
    WGML_TOK_SKIP_SPECIAL = 8 /* decode: leave out control tokens (else they appear as text) */
};

wgml_status wgml_tokenizer_from_gguf(const wgml_gguf *f, wgml_tokenizer **out, char *err, size_t errlen);
void wgml_tokenizer_free(wgml_tokenizer *t);
/* Encodes len bytes of text; *ids is malloc'ed (free it), *n_ids its length. */
wgml_status wgml_tokenizer_encode(const wgml_tokenizer *t, const char *text, size_t len, int flags,
                                  int32_t **ids, size_t *n_ids);
/* Decodes ids to bytes (UTF-8 for text that came from encode); *text is malloc'ed and
 * NUL-terminated, *len excludes the NUL. An id out of range gives WGML_ERR_ARG. */
wgml_status wgml_tokenizer_decode(const wgml_tokenizer *t, const int32_t *ids, size_t n_ids, int flags,
                                  char **text, size_t *len);
int32_t wgml_tokenizer_vocab_size(const wgml_tokenizer *t);
int32_t wgml_tokenizer_bos(const wgml_tokenizer *t); /* -1 when the file names none */
int32_t wgml_tokenizer_eos(const wgml_tokenizer *t);
int32_t wgml_tokenizer_unknown(const wgml_tokenizer *t); /* -1 when the file names none */
int32_t wgml_tokenizer_padding(const wgml_tokenizer *t); /* -1 when the file names none */
/* tokenizer.ggml.add_bos_token / add_eos_token: whether a prompt should get WGML_TOK_ADD_BOS /
 * _EOS (default: BOS for SentencePiece, neither for byte-level BPE). */
int wgml_tokenizer_add_bos(const wgml_tokenizer *t);
int wgml_tokenizer_add_eos(const wgml_tokenizer *t);
const char *wgml_tokenizer_model(const wgml_tokenizer *t); /* "gpt2" or "llama" */
/* The token's text as stored (byte-level form; SentencePiece: the piece, with U+2581 for a
 * space in user-defined pieces too), NUL-terminated; NULL when out of range. */
const char *wgml_tokenizer_token(const wgml_tokenizer *t, int32_t id);
const char *wgml_tokenizer_pre(const wgml_tokenizer *t); /* tokenizer.ggml.pre or "default" */
int64_t wgml_tokenizer_merge_count(const wgml_tokenizer *t);
/* The last error message of encode/decode/chat on t. */
const char *wgml_tokenizer_error(const wgml_tokenizer *t);

/* Chat formatting for the instruct model. This is not a general Jinja engine: it recognises
 * two formats by tokenizer.chat_template (or, without one, a "gemma*" general.architecture):
 *  - ChatML, the template SmolLM2-Instruct carries (each message as
 *    "<|im_start|>ROLE\nCONTENT<|im_end|>\n", a default system message taken from the
 *    template inserted when the first message is not "system", and "<|im_start|>assistant\n"
 *    when add_generation_prompt is set);
 *  - Gemma's (a template with <start_of_turn>): the BOS token's text, then each message as
 *    "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n" with CONTENT trimmed of white space and
 *    "assistant" written "model", a first "system" message folded into the first turn
 *    (its content + "\n\n" in front of that turn's content), roles alternating user/other
 *    (else WGML_ERR_ARG), and "<start_of_turn>model\n" when add_generation_prompt is set.
 *    The text holds the BOS: encode it without WGML_TOK_ADD_BOS.
 * Another template gives WGML_ERR_UNSUPPORTED.
 * *out is malloc'ed and NUL-terminated; encode it with WGML_TOK_SPECIAL. */
typedef struct wgml_chat_msg {
    const char *role;
    const char *content;
} wgml_chat_msg;
wgml_status wgml_chat_apply(const wgml_tokenizer *t, const wgml_chat_msg *msgs, size_t n_msgs,
                            int add_generation_prompt, char **out, size_t *len);

/* ---- the model --------------------------------------------------------------------------- */
/* A Llama model loaded from GGUF: prefill and decode through built graphs, a KV cache. */

/* A decoder model loaded from a GGUF file: general.architecture "llama" (SmolLM2), "qwen2",
 * "qwen3" or "gemma3", each an entry of one description table (norm placement, q/k norms,
 * biases, activation, RoPE pairing and bases, sliding windows, multipliers; `wgml info
 * --model` prints it). Every hyper-parameter comes from the file's <arch>.* metadata. Weights
 * stay in their file type on the GPU: Q4_0/Q4_1/Q8_0 matrices as wgml_qweight (the token
 * embedding through wgml_qembedding), other types (F32/F16/BF16, the K-quants) dequantised
 * to f32; norms f32. When output.weight is absent the output head is the token embedding used
 * as a linear (tied). RoPE pairs elements (2i, 2i+1) of each head for "llama" (GGML's normal
 * mode, the convention of GGUF Llama q/k weights), (i, i + head_dim/2) for the others, with
 * angle pos·base^(-2i/head_dim). Attention is grouped-query with a KV cache of n_ctx rows per
 * layer. The forward runs as built graphs: one per prefill length bucket (8,
 * then the next multiple of 16, up to 512 per chunk; padded positions come after the real ones
 * so causal masking keeps them out and decode overwrites their cache rows; built on first use
 * and cached) and one decode graph (one token) built at the first decode step and replayed with
 * the position, the cache length and the token in tensors. */
typedef struct wgml_model wgml_model;

typedef struct wgml_llama_config {
    int64_t n_vocab, n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim;
    int64_t n_ctx_train; /* llama.context_length */
    int64_t n_ctx;       /* KV cache rows (positions) this instance holds */
    float rope_base, rms_eps;
    int tied_output;         /* 1 when the output head is the token embedding */
    uint32_t tok_embd_type;  /* wgml_ggml_type of token_embd.weight */
    int kv_f16;              /* 1 when the KV cache holds f16 (wgml_model_options.kv_type) */
} wgml_llama_config;

/* The KV cache's element type. F32 keeps k and v as computed (the parity checks against
 * transformers run so). F16 rounds each k (after RoPE) and v element to f16 as it is written:
 * half the cache's memory and half the bytes attention reads per step (llama.cpp's default
 * cache type); it needs head_dim a multiple of 4, and a value beyond f16's range (65504) is
 * not representable. AUTO: $WGML_KV ("f16" or "f32"), else F32. */
typedef enum wgml_kv_type { WGML_KV_AUTO = 0, WGML_KV_F32 = 1, WGML_KV_F16 = 2 } wgml_kv_type;

typedef struct wgml_model_options {
    int64_t n_ctx;         /* KV cache length; 0: min(llama.context_length, 2048) */
    wgml_kv_type kv_type;  /* the KV cache's element type (above) */
} wgml_model_options;

/* Loads path (options may be NULL). NULL on error, with the message on ctx: a missing file
 * (WGML_ERR_IO), another architecture (WGML_ERR_UNSUPPORTED), a missing key or tensor or a
 * tensor of the wrong shape (WGML_ERR_FORMAT, naming it). */
wgml_model *wgml_model_load(wgml_ctx *ctx, const char *path, const wgml_model_options *options);
void wgml_model_free(wgml_model *m);
const wgml_llama_config *wgml_model_config(const wgml_model *m);
/* The model's tokenizer; NULL when the file's tokenizer kind is not one wgml builds (the model
 * still runs on token ids), and wgml_model_tokenizer_error says why ("" when there is one). */
const wgml_tokenizer *wgml_model_tokenizer(const wgml_model *m);
const char *wgml_model_tokenizer_error(const wgml_model *m);
/* 1 when id ends generation (the EOS id, <|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>). */
int wgml_model_is_stop(const wgml_model *m, int32_t id);
/* Forgets the cached sequence (the next prefill starts at position 0). */
void wgml_model_reset(wgml_model *m);
int64_t wgml_model_pos(const wgml_model *m); /* tokens in the KV cache */
/* The compiled one-token decode graph (NULL before the first decode step), e.g. for
 * wgml_graph_profile after a decode step has written its inputs (a profiled run is one more step
 * in the KV cache's last position: decode from a known position again afterwards). */
wgml_graph *wgml_model_decode_graph(wgml_model *m);
/* The compiled graph that a prefill of n tokens (2..512) at the current position runs, NULL until
 * one has run; e.g. for wgml_graph_profile (a profiled run writes the cache rows again). */
wgml_graph *wgml_model_prefill_graph(wgml_model *m, size_t n);
/* Runs ids[0..n) at positions pos .. pos + n - 1 (pos = wgml_model_pos), appending them to the
 * KV cache. Writes the last position's logits into logits[n_vocab] and/or its argmax (computed
 * on the GPU) into *next; either may be NULL. */
wgml_status wgml_model_prefill(wgml_model *m, const int32_t *ids, size_t n, float *logits, int32_t *next);
/* One decode step: token id at position pos through the decode graph; same outputs. */
wgml_status wgml_model_decode(wgml_model *m, int32_t id, float *logits, int32_t *next);
/* GPU seconds (timestamps, else wall) of the last prefill (all its chunks' graph runs) or decode
 * graph run. */
double wgml_model_last_run_seconds(const wgml_model *m);
/* Greedy decoding kept on the GPU: n_steps decode steps from token id at position pos, each
 * step's argmax (computed and fed back on the GPU) being the next step's token. The host
 * submits `batch` steps per submit (<= 0: 16) and keeps two submits queued, reading each
 * one's tokens back while the next runs, so the GPU does not wait for the host. on_token (may
 * be NULL) receives the produced tokens in order (each at most 2 * batch steps after the GPU
 * made it); a non-zero return stops after that token. Steps already submitted past the stop
 * run to their end but are dropped: afterwards wgml_model_pos and the cache are exactly those
 * of host-driven wgml_model_decode steps that stopped there (pos advanced by the tokens
 * handed to on_token). Fails with WGML_ERR_LIMIT when pos + n_steps > n_ctx. */
typedef int (*wgml_token_fn)(void *user, int32_t id);
typedef struct wgml_decode_stats {
    size_t steps;     /* steps whose tokens were handed over (the position advance) */
    size_t submitted; /* steps run, those dropped after a stop included */
    uint64_t submits; /* queue submits made */
    double gpu_s;     /* GPU seconds of all submitted steps (timestamps); -1 without timestamps */
    double submit_s;  /* host seconds spent recording and submitting them */
    size_t dispatches_per_step; /* compute dispatches in one decode step */
} wgml_decode_stats;
wgml_status wgml_model_decode_greedy(wgml_model *m, int32_t id, size_t n_steps, int batch, wgml_token_fn on_token,
                                     void *user, wgml_decode_stats *stats);

/* Adapters for the inference graphs from host arrays (e.g. a saved adapter, or a trainer's:
 * wgml_trainer_attach_lora): n tensors named blk.L.TARGET.lora_a|lora_b (TARGET a GGUF
 * projection name: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down; every target
 * given needs both), lora_a [rank, K] and lora_b [N, rank] row-major with K and N the
 * projection's, scale alpha / rank. n = 0 removes the adapters (rank and alpha are then
 * ignored). Rebuilds the inference graphs and forgets the cached sequence (position 0). */
wgml_status wgml_model_set_lora(wgml_model *m, int rank, float alpha, int n, const char *const *names,
                                const float *const *data);

/* ---- generation and sampling ------------------------------------------------------------- */
/* Picking the next token from logits, and whole generations with streamed text. */

/* Host-side sampling from one logits row: temperature <= 0 gives the argmax (first of ties);
 * otherwise softmax(logits / temperature) restricted to the top_k largest (top_k <= 0: all)
 * then to the smallest prefix, by descending probability, whose mass reaches top_p (top_p
 * outside (0, 1): no cut), renormalised and drawn with *rng (xorshift64*; never 0). */
typedef struct wgml_sampler {
    float temperature;
    int top_k;
    float top_p;
} wgml_sampler;
int32_t wgml_sample(const float *logits, int64_t n, const wgml_sampler *s, uint64_t *rng);
uint64_t wgml_rng_seed(uint64_t seed); /* a non-zero state from a seed */

/* Generation: prefill the prompt from position 0, then decode until a stop token or
 * max_tokens. Greedy (temperature 0) keeps the tokens on the GPU (wgml_model_decode_greedy,
 * decode_batch steps per submit, read back with a lag of at most two batches, so on_text and
 * the stop check see tokens that late); decode_batch < 0 takes the step-by-step path (one
 * submit and one argmax readback per token; same tokens). Sampling reads back the last logits
 * row of each step. on_text receives the generated text as it is decoded, held back at an
 * incomplete UTF-8 sequence (so every call is whole characters); a non-zero return stops. */
typedef struct wgml_gen_options {
    int max_tokens;
    wgml_sampler sampler;
    uint64_t seed;
    int decode_batch; /* greedy: decode steps per submit; 0: 16; < 0: step by step */
} wgml_gen_options;
typedef struct wgml_gen_stats {
    size_t prompt_tokens, generated_tokens;
    size_t decode_steps;        /* decode graph runs (tokens fed back) */
    double prefill_s, decode_s; /* GPU (or wall) seconds of the graph runs */
    double prefill_wall_s, decode_wall_s;
    int stopped; /* 1: a stop token ended generation */
    uint64_t decode_submits; /* queue submits during decoding */
} wgml_gen_stats;
typedef int (*wgml_text_fn)(void *user, const char *text, size_t len);
/* out_ids (may be NULL) receives the generated ids (malloc'ed) and *n_out their count. */
wgml_status wgml_generate(wgml_model *m, const int32_t *prompt, size_t n_prompt, const wgml_gen_options *opt,
                          wgml_text_fn on_text, void *user, wgml_gen_stats *stats, int32_t **out_ids, size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif
