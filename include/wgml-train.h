/* wgml-train.h: fine-tuning (src/train): the trainer, checkpoints, adapter files, training
 * data and run reports. Builds on wgml.h, the optimizer of wgml-optim.h and the model of
 * wgml-model.h (both included here, so code written when AdamW was declared here compiles). */
#ifndef WGML_TRAIN_H
#define WGML_TRAIN_H

#include "wgml.h"
#include "wgml-model.h"
#include "wgml-optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the trainer ------------------------------------------------------------------------- */
/* LoRA or straight-through fine-tuning of a loaded model, its state and its evaluation. */

/* Fine-tuning a loaded Llama (wgml_model) on the GPU. One optimizer step is ONE run of one
 * built graph: embedding (frozen) -> blocks (frozen 4-bit linears plus LoRA adapters on the
 * chosen targets) -> final norm -> head -> fused cross-entropy -> backward -> AdamW over every
 * trainable tensor; the host writes tokens, labels and lr, and reads back only the loss
 * (4 bytes). The model's weights are shared (wgml_tensor_share), never copied. Positions run
 * 0 .. seq_len-1 in every sequence of the batch; attention is causal within a sequence. */
typedef enum { WGML_TRAIN_LORA = 0, WGML_TRAIN_STE = 1 } wgml_train_mode;
/* Which linears of every block get an adapter (bits, combine with |). */
enum {
    WGML_TARGET_Q = 1, WGML_TARGET_K = 2, WGML_TARGET_V = 4, WGML_TARGET_O = 8,
    WGML_TARGET_GATE = 16, WGML_TARGET_UP = 32, WGML_TARGET_DOWN = 64, WGML_TARGET_ALL = 127
};
typedef struct wgml_train_config {
    wgml_train_mode mode; /* LORA: adapters on the targets, base frozen. STE: the targets' 4-bit
                             weights themselves train through fp32 latents (straight-through: the
                             forward uses the codes, AdamW updates the latent, the same run
                             requantises the codes at their frozen scales; Q8_0 and float weights
                             among the targets stay frozen) */
    int lora_rank;        /* r (LORA) */
    float lora_alpha;     /* adapter scale = alpha / r (LORA) */
    unsigned targets;     /* WGML_TARGET_* bits */
    int batch, seq_len;   /* tokens per step = batch * seq_len */
    float lr, weight_decay, beta1, beta2, eps; /* AdamW (torch.optim.AdamW's meaning) */
    float clip_norm;      /* global gradient-norm clipping; <= 0: off */
    uint64_t seed;        /* LoRA A init: one splitmix64 stream over all A's in tensor order,
                             U(-1/sqrt(K), 1/sqrt(K)) as wgml_lora_new; B = 0 */
    int grad_accum;       /* micro-batches per optimizer step (1 .. 4096): the gradients of
                             grad_accum calls of wgml_trainer_step are averaged (each
                             micro-batch's mean loss weighs 1 / grad_accum) and the last call
                             steps */
} wgml_train_config;
/* LoRA r 8, alpha 16, targets q|v, batch 1 x 64, lr 2e-4, wd 0.01, betas (0.9, 0.999),
 * eps 1e-8, clip 1.0, seed 0, grad_accum 1. */
wgml_train_config wgml_train_defaults(void);
typedef struct wgml_trainer wgml_trainer;
/* Builds and compiles the train graph and an eval graph (forward and loss only), both sharing
 * the model's weights and the adapters. The model must outlive the trainer. NULL on error. */
wgml_trainer *wgml_trainer_new(wgml_model *m, const wgml_train_config *cfg);
void wgml_trainer_free(wgml_trainer *t);
/* One optimizer step (with grad_accum > 1: one micro-batch; every grad_accum-th call steps):
 * tokens and labels i32 [batch*seq_len] (a label < 0 is ignored; making label = next token is
 * the caller's job), lr for this step (the stepping call's counts); *loss (may be NULL)
 * receives the mean loss over the valid labels, computed before the update. One graph run; only
 * the loss is read back. A step whose gradients are non-finite leaves everything unchanged
 * (AdamW skip). */
wgml_status wgml_trainer_step(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, float lr, float *loss);
/* Micro-batches accumulated since the last optimizer step (0 at a step boundary, where the
 * state read by wgml_trainer_read_state / read_opt_state is complete: the pending gradients
 * are not part of it). wgml_trainer_write_opt_state drops pending gradients (a restored state
 * is a step boundary); wgml_trainer_write_state keeps them. */
int wgml_trainer_pending(const wgml_trainer *t);
/* The configuration t was made with (as checked and filled in by wgml_trainer_new; the defaults
 * for a NULL t): what wgml_trainer_save_adapter takes. */
wgml_train_config wgml_trainer_config(const wgml_trainer *t);
/* The loss summed over the valid labels and their count, without updating (eval graph). */
wgml_status wgml_trainer_eval(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, double *loss_sum,
                              int64_t *n_valid);
/* Trainable state for checkpoints: named f32 tensors, "blk.<l>.<target>.lora_a" [r, K] and
 * "...lora_b" [N, r] (target = attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
 * ffn_down), layer by layer, in the order of the target bits, a before b; in STE mode
 * "blk.<l>.<target>.latent" [N, K]. Host copies in and out: what 0 = the parameter, 1 = AdamW's
 * m, 2 = AdamW's v (numel floats each). Writing a latent (what 0) requantises the model's
 * codes from the latents at once. */
int wgml_trainer_tensor_count(const wgml_trainer *t);
const char *wgml_trainer_tensor_name(const wgml_trainer *t, int i);
wgml_status wgml_trainer_tensor_shape(const wgml_trainer *t, int i, int *rank, int64_t shape[4]);
wgml_status wgml_trainer_read_state(wgml_trainer *t, int i, int what, float *out);
wgml_status wgml_trainer_write_state(wgml_trainer *t, int i, int what, const float *in);
/* The optimizer's small state (step count, steps skipped, ...) as an opaque blob: read with
 * *bytes = the buffer's size (on return: the bytes written; 64 is always enough), write it
 * back as read. */
wgml_status wgml_trainer_read_opt_state(wgml_trainer *t, void *buf, size_t *bytes);
wgml_status wgml_trainer_write_opt_state(wgml_trainer *t, const void *buf, size_t bytes);
/* Submits made by the last wgml_trainer_step (graph run and loss readback included). */
uint64_t wgml_trainer_submits_per_step(const wgml_trainer *t);
/* The compiled training-step graph (forward, backward, optimizer), e.g. for wgml_graph_profile
 * after a wgml_trainer_step has written its inputs (a profiled run is one more update). */
wgml_graph *wgml_trainer_graph(wgml_trainer *t);
/* The compiled evaluation graph (forward and loss only, what wgml_trainer_eval runs), e.g. for
 * wgml_graph_profile after a wgml_trainer_eval has written its inputs. */
wgml_graph *wgml_trainer_eval_graph(wgml_trainer *t);
/* Generation with the trained adapter: copies the trainer's current LoRA into the model's
 * inference graphs (wgml_model_set_lora), so wgml_model_prefill/decode/wgml_generate use base +
 * adapter from then on. STE mode: nothing to do (the model's own codes are trained). */
wgml_status wgml_trainer_attach_lora(wgml_trainer *t);

/* ---- adapters ---------------------------------------------------------------------------- */
/* LoRA adapters for the model's inference graphs, adapter files and the STE model export: what
 * a fine-tuning run leaves behind, and reading it back. */

/* Target names: bit i of WGML_TARGET_* is "q", "k", "v", "o", "gate", "up", "down" (i = 0..6),
 * the names --targets takes and adapter_config.json lists. wgml_target_name: NULL for i out of
 * range. wgml_targets_parse: a comma list of names, or "all", into *targets (WGML_ERR_ARG on an
 * unknown name or an empty list, *targets unchanged). wgml_targets_format: the names of the set
 * bits in bit order, comma-separated, into buf[n] (truncated to fit). */
const char *wgml_target_name(int i);
wgml_status wgml_targets_parse(const char *s, unsigned *targets);
void wgml_targets_format(unsigned targets, char *buf, size_t n);

/* SHA-256 of a file, the base model's identity in checkpoints and adapter configs: 64 hex
 * digits and a NUL into out, the file's size into *size. WGML_ERR_IO naming the path when the
 * file cannot be read. */
wgml_status wgml_file_sha256(const char *path, char out[65], uint64_t *size, char *err, size_t errlen);

/* Adapter files: DIR/adapter.safetensors (the LoRA tensors, F32, named as
 * wgml_trainer_tensor_name lists them; metadata format "wgml-lora-1", rank, alpha, targets,
 * base_model_sha256) and DIR/adapter_config.json (format, mode, rank, alpha, targets, the base
 * model's path, size and sha256, the data path, seq_len, batch, steps and the tensor count),
 * each written atomically. Errors: a status and a message in err[errlen] naming the file. */
typedef struct wgml_adapter_info {
    const char *base_model;  /* the base model's path, as given */
    uint64_t base_size;      /* its size in bytes ... */
    const char *base_sha256; /* ... and SHA-256 (wgml_file_sha256) */
    const char *data;        /* the training data's path */
    int64_t steps;           /* optimizer steps taken */
} wgml_adapter_info;
/* Writes the trainer's current adapter (LoRA mode) into dir (which must exist); cfg is the
 * configuration the trainer was made with. Also dir/peft (created): the same adapter as PEFT
 * writes it (adapter_config.json with peft_type LORA, r, lora_alpha, target_modules and
 * base_model_name_or_path = info->base_model; adapter_model.safetensors with PEFT's names,
 * base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight ..., and Hugging Face's row
 * order of q and k, which Llama GGUF files permute). */
wgml_status wgml_trainer_save_adapter(wgml_trainer *t, const wgml_train_config *cfg, const char *dir,
                                      const wgml_adapter_info *info, char *err, size_t errlen);
/* STE mode: writes a copy of the GGUF at model_path to out_path with the trained weights'
 * 4-bit codes recomputed from the trainer's latents at their frozen scales (everything else
 * byte for byte as it was). */
wgml_status wgml_trainer_save_ste_gguf(wgml_trainer *t, const char *model_path, const char *out_path, char *err,
                                       size_t errlen);

/* An adapter read back from its directory. */
typedef struct wgml_adapter wgml_adapter;
/* Reads dir's adapter_config.json and adapter.safetensors. When model_path is not NULL and the
 * config records the base model's size and sha256, the file at model_path must match them
 * ("the adapter in DIR was trained on another base model ..."). A config that is not
 * wgml-lora-1 (format, mode lora, rank, alpha, known targets), malformed JSON or safetensors,
 * or a tensor that is not F32 is WGML_ERR_FORMAT naming the file. *out is NULL on error.
 * A PEFT directory (its adapter_config.json has peft_type) is read from adapter_model.safetensors
 * (F32, F64, F16 or BF16): a LoRA of the blocks' seven projections; DoRA, rsLoRA, rank or alpha
 * patterns, biases, modules_to_save, fan_in_fan_out and other modules are WGML_ERR_UNSUPPORTED
 * naming what. Its shapes are checked against the model when it is attached. dir may also be
 * a llama.cpp LoRA adapter GGUF file (a name ending .gguf; general.type adapter, adapter.type
 * lora, F32 or F16 tensors of the blocks' seven projections; anything else is refused). */
wgml_status wgml_adapter_load(const char *dir, const char *model_path, wgml_adapter **out, char *err, size_t errlen);
void wgml_adapter_free(wgml_adapter *a); /* NULL is fine */
/* wgml_train_defaults() with mode LORA and the file's rank, alpha and targets. */
const wgml_train_config *wgml_adapter_config(const wgml_adapter *a);
int wgml_adapter_tensor_count(const wgml_adapter *a);
/* Generation with the adapter: wgml_model_set_lora with its configuration and tensors (error on
 * the model's context; WGML_ERR_FORMAT when a tensor does not fit the model's shapes: "an adapter
 * of another base model"). */
wgml_status wgml_adapter_attach(wgml_model *m, const wgml_adapter *a);
/* Writes the adapter as llama.cpp's LoRA adapter GGUF at path (what `llama-cli --lora` and
 * llama-server load; `wgml export-lora`): general.type adapter, adapter.type lora,
 * adapter.lora.alpha, general.architecture of the base model at model_path (read from its
 * metadata), F32 tensors blk.L.attn_q.weight.lora_a / .lora_b ... in the GGUF's row order.
 * wgml_adapter_load reads such a file back (path ending .gguf). */
wgml_status wgml_adapter_save_gguf(const wgml_adapter *a, const char *model_path, const char *path, char *err, size_t errlen);
/* Writes the adapter's tensors into a LoRA trainer built with wgml_adapter_config (e.g. to
 * evaluate it): every tensor of the trainer must be in the file with its element count, and the
 * file must hold no others (WGML_ERR_FORMAT naming the tensor). */
wgml_status wgml_trainer_load_adapter(wgml_trainer *t, const wgml_adapter *a, char *err, size_t errlen);

/* ---- checkpoints ------------------------------------------------------------------------- */
/* Saving a run and resuming it exactly: the trainer's state plus the caller's metadata. */

/* A checkpoint is DIR/state.safetensors: every trainer tensor NAME (as
 * wgml_trainer_tensor_name lists it) with AdamW's moments as NAME.adam_m and NAME.adam_v, the
 * optimizer's state blob ("optimizer_state", U8), and string metadata chosen by the caller
 * (step, data position, run configuration), under a 64-bit checksum of the whole file, written
 * atomically (temp file, fsync, rename): a crash while saving leaves the previous checkpoint in
 * place. Save at a step boundary (wgml_trainer_pending 0): pending gradients are not saved.
 * Errors: a status and a message in err[errlen]. */
/* Saves t's state and the n_meta pairs keys[i] = vals[i] into dir (created if missing; its
 * parent must exist). */
wgml_status wgml_checkpoint_save(wgml_trainer *t, const char *dir, const char *const *keys, const char *const *vals,
                                 int n_meta, char *err, size_t errlen);
typedef struct wgml_checkpoint wgml_checkpoint;
/* Reads dir's checkpoint and verifies its format and checksum ("corrupt or missing checkpoint
 * ...", "corrupt checkpoint ...: checksum ..."). *out is NULL on error. */
wgml_status wgml_checkpoint_open(const char *dir, wgml_checkpoint **out, char *err, size_t errlen);
void wgml_checkpoint_close(wgml_checkpoint *c); /* NULL is fine */
/* The metadata value of key, NULL when absent (valid until wgml_checkpoint_close). */
const char *wgml_checkpoint_meta(const wgml_checkpoint *c, const char *key);
/* WGML_OK when key's value is want; else WGML_ERR_FORMAT with "checkpoint mismatch: KEY is
 * 'saved' in the checkpoint but 'want' in this run" (saved "(absent)" when missing). */
wgml_status wgml_checkpoint_expect(const wgml_checkpoint *c, const char *key, const char *want, char *err,
                                   size_t errlen);
/* Writes the checkpoint's tensors and optimizer state into t (a trainer of the same
 * configuration): the saved tensors must be exactly t's, with their shapes ("checkpoint
 * mismatch: ..."); a restored trainer is at a step boundary. */
wgml_status wgml_checkpoint_restore(const wgml_checkpoint *c, wgml_trainer *t, char *err, size_t errlen);

/* ---- training data ----------------------------------------------------------------------- */
/* Text and JSONL files cut into rows of tokens and labels, and their training order (host side,
 * no GPU; errors: a status and the message in err[errlen]).
 *
 * Every example becomes rows of seq_len + 1 tokens with a target flag per token; a row gives
 * the inputs tokens[0..L) and the labels tokens[1..L] (shifted by one), a label being -100
 * where its token is not a target.
 *  - Plain text: the whole text is tokenised, the last eval_fraction of the tokens is held
 *    out (split on the token stream, so no row straddles the boundary), and each part is cut
 *    into rows with a stride of L (row i holds tokens [iL, iL + L], so every token after the
 *    first is a label exactly once); a tail shorter than L + 1 is dropped. All are targets.
 *  - JSONL: one example per line, {"messages": [{"role": R, "content": C}, ...]} or
 *    {"prompt": P, "response": A} (taken as a user and an assistant message). The model's
 *    chat template (wgml_chat_apply) formats it; only assistant turns (their content and the
 *    closing <|im_end|>) are targets. One example per row: longer ones are truncated, shorter
 *    ones padded (pad tokens are not targets). The last eval_fraction of the examples (at
 *    least one when there are two or more) is held out.
 * Training order: epoch e visits the training rows in a permutation drawn from (seed, e)
 * (Fisher-Yates over splitmix64), so position p (rows consumed so far) fixes the next row and
 * a resumed run needs only p and the seed. */
typedef struct wgml_dataset {
    int seq_len;
    int64_t n_train, n_eval; /* rows; the held-out rows follow the training rows */
    int32_t *tok;            /* [(n_train + n_eval) · (seq_len + 1)] */
    uint8_t *tgt;            /* same size: 1 where the token is a target */
    int64_t train_labels, eval_labels; /* labels (targets at positions 1..L) in each part */
    int64_t n_examples, n_truncated;   /* JSONL: examples read, examples cut at seq_len + 1 */
    int32_t pad_id;
    /* the current epoch's permutation */
    int64_t *perm;
    int64_t perm_epoch;
    uint64_t perm_seed;
} wgml_dataset;

wgml_status wgml_data_from_text(const wgml_tokenizer *tok, const char *text, size_t len, int seq_len, double eval_fraction,
                                wgml_dataset *ds, char *err, size_t errlen);
/* Errors name the line: "line 7: column 12: expected ',' or '}'". */
wgml_status wgml_data_from_jsonl(const wgml_tokenizer *tok, const char *text, size_t len, int seq_len, double eval_fraction,
                                 wgml_dataset *ds, char *err, size_t errlen);
/* Reads path: JSONL when its name ends in .jsonl or its first non-blank byte is '{'. */
wgml_status wgml_data_from_file(const wgml_tokenizer *tok, const char *path, int seq_len, double eval_fraction, wgml_dataset *ds,
                                char *err, size_t errlen);
void wgml_data_free(wgml_dataset *ds);

/* Row i's inputs and labels (seq_len each). */
void wgml_data_row(const wgml_dataset *ds, int64_t row, int32_t *inputs, int32_t *labels);
/* The training row at position pos (pos >= 0; epoch pos / n_train). */
int64_t wgml_data_train_row(wgml_dataset *ds, uint64_t seed, int64_t pos);
/* batch rows from position pos into inputs/labels [batch · seq_len]; returns pos + batch. */
int64_t wgml_data_train_batch(wgml_dataset *ds, uint64_t seed, int64_t pos, int batch, int32_t *inputs, int32_t *labels);
/* Held-out rows first .. first + batch - 1; rows past n_eval are filled with pad inputs and
 * ignored labels. */
void wgml_data_eval_batch(const wgml_dataset *ds, int64_t first, int batch, int32_t *inputs, int32_t *labels);

/* ---- run reports ------------------------------------------------------------------------- */
/* The learning-rate schedule, loss.csv and the loss.svg plot of a fine-tuning run (host side). */

/* Linear warmup over `warmup` steps to lr, then cosine decay to min_lr at step total - 1.
 * step is 0-based. */
double wgml_lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_lr);

/* One row of the run's history: a training step (loss > 0 or NaN), optionally with a
 * held-out perplexity (eval_ppl > 0) measured after it; step 0 with only eval_ppl is the
 * measurement before training. */
typedef struct wgml_report_row {
    int64_t step;
    double loss, lr, tokens_per_s, eval_ppl; /* NaN / 0 when absent */
} wgml_report_row;

/* loss.csv: "step,loss,lr,tokens_per_s,eval_ppl" then one line per row (empty fields when
 * absent). Written atomically. */
wgml_status wgml_report_write_csv(const char *path, const wgml_report_row *rows, size_t n, char *err, size_t errlen);
/* Reads back a loss.csv written by wgml_report_write_csv (rows with step <= max_step). */
wgml_status wgml_report_read_csv(const char *path, int64_t max_step, wgml_report_row **rows, size_t *n, char *err, size_t errlen);
/* loss.svg: training loss (a line) and held-out loss ln(ppl) (points) against the step, with
 * axes, ticks, labels and a legend. Written atomically. */
wgml_status wgml_report_write_svg(const char *path, const char *title, const wgml_report_row *rows, size_t n, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
