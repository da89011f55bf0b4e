/* Training data for fine-tuning (host side, no GPU). Internal to wgml.
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
#ifndef WGML_TRAIN_DATA_H
#define WGML_TRAIN_DATA_H

#include "wgml.h"
#include "wgml-model.h"

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

wgml_status data_from_text(const wgml_tokenizer *tok, const char *text, size_t len, int seq_len, double eval_fraction,
                           wgml_dataset *ds, char *err, size_t errlen);
/* Errors name the line: "line 7: column 12: expected ',' or '}'". */
wgml_status data_from_jsonl(const wgml_tokenizer *tok, const char *text, size_t len, int seq_len, double eval_fraction,
                            wgml_dataset *ds, char *err, size_t errlen);
/* Reads path: JSONL when its name ends in .jsonl or its first non-blank byte is '{'. */
wgml_status data_from_file(const wgml_tokenizer *tok, const char *path, int seq_len, double eval_fraction, wgml_dataset *ds,
                           char *err, size_t errlen);
void data_free(wgml_dataset *ds);

/* Row i's inputs and labels (seq_len each). */
void data_row(const wgml_dataset *ds, int64_t row, int32_t *inputs, int32_t *labels);
/* The training row at position pos (pos >= 0; epoch pos / n_train). */
int64_t data_train_row(wgml_dataset *ds, uint64_t seed, int64_t pos);
/* batch rows from position pos into inputs/labels [batch · seq_len]; returns pos + batch. */
int64_t data_train_batch(wgml_dataset *ds, uint64_t seed, int64_t pos, int batch, int32_t *inputs, int32_t *labels);
/* Held-out rows first .. first + batch - 1; rows past n_eval are filled with pad inputs and
 * ignored labels. */
void data_eval_batch(const wgml_dataset *ds, int64_t first, int batch, int32_t *inputs, int32_t *labels);

#endif
