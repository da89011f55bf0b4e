/* Fuzz target: the fine-tuning data loader (src/train/data.c) with the real SmolLM2 tokenizer
 * (loaded once, as fuzz_tokenizer loads it). Input: a flags byte (bit 0: JSONL, else plain
 * text; bits 1-2: batch size - 1), a byte for seq_len (1..64), a byte for the eval fraction
 * (0, or 1/256 .. 255/512), then the data. Checks on an accepted data set: every row's inputs
 * are token ids, its labels -100 or token ids; the train/eval row counts and the label counts
 * agree with the rows; wgml_data_train_batch over two epochs visits every training row exactly
 * once per epoch and stays in bounds; wgml_data_eval_batch over the held-out rows and one batch
 * past them gives pad inputs and -100 labels beyond n_eval. A rejection must come with a
 * message and leave the data set empty.
 * The model path: $WGML_FUZZ_MODEL, else the compiled-in WGML_FUZZ_MODEL_PATH.
 * WGML_FUZZ_VERBOSE: print each outcome. */
#include "wgml-model.h"
#include "wgml-train.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef WGML_FUZZ_MODEL_PATH
#define WGML_FUZZ_MODEL_PATH ".deps/models/SmolLM2-135M-Instruct.Q4_1.gguf"
#endif

static wgml_gguf *g_file;
static wgml_tokenizer *g_tok;

static void fail(const char *what) {
    fprintf(stderr, "fuzz_data: %s\n", what);
    abort();
}

/* Loads the vocabulary; returns 0 when the model file is missing (the replay test skips). */
int fuzz_data_setup(void) {
    if (g_tok) return 1;
    const char *path = getenv("WGML_FUZZ_MODEL");
    if (!path || !*path) path = WGML_FUZZ_MODEL_PATH;
    char err[512];
    if (wgml_gguf_open(path, &g_file, err, sizeof err) != WGML_OK) {
        fprintf(stderr, "fuzz_data: %s\n", err);
        return 0;
    }
    if (wgml_tokenizer_from_gguf(g_file, &g_tok, err, sizeof err) != WGML_OK) {
        fprintf(stderr, "fuzz_data: %s\n", err);
        return 0;
    }
    return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (!fuzz_data_setup()) abort();
    return 0;
}

static void check_row(const wgml_dataset *ds, const int32_t *in, const int32_t *lab, int32_t nv) {
    for (int j = 0; j < ds->seq_len; j++) {
        if (in[j] < 0 || in[j] >= nv) fail("an input is not a token id");
        if (lab[j] != -100 && (lab[j] < 0 || lab[j] >= nv)) fail("a label is neither -100 nor a token id");
    }
}

static int64_t labels_of(const int32_t *lab, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++) c += lab[i] != -100;
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3 || !g_tok) return 0;
    int jsonl = data[0] & 1, batch = 1 + ((data[0] >> 1) & 3);
    int seq_len = 1 + data[1] % 64;
    double frac = data[2] ? data[2] / 512.0 : 0.0;
    const char *text = (const char *)data + 3;
    size_t len = size - 3;
    int32_t nv = wgml_tokenizer_vocab_size(g_tok);
    wgml_dataset ds;
    char err[512] = "";
    wgml_status s = jsonl ? wgml_data_from_jsonl(g_tok, text, len, seq_len, frac, &ds, err, sizeof err)
                          : wgml_data_from_text(g_tok, text, len, seq_len, frac, &ds, err, sizeof err);
    if (getenv("WGML_FUZZ_VERBOSE"))
        fprintf(stderr, "%s (%lld train, %lld eval rows)\n", s ? err : "accepted", (long long)ds.n_train, (long long)ds.n_eval);
    if (s != WGML_OK) {
        if (!err[0] || ds.tok || ds.tgt || ds.n_train || ds.n_eval) fail("a rejection without a message or with data left");
        return 0;
    }
    if (ds.seq_len != seq_len || ds.n_train < 1 || ds.n_eval < 0 || (frac > 0) != (ds.n_eval > 0)) fail("row counts");
    if (jsonl && (ds.n_train + ds.n_eval != ds.n_examples || ds.n_truncated > ds.n_examples)) fail("example counts");
    if (ds.pad_id < 0 || ds.pad_id >= nv) fail("pad id");
    size_t L = (size_t)seq_len;
    int32_t *in = malloc((size_t)batch * L * sizeof *in), *lab = malloc((size_t)batch * L * sizeof *lab);
    uint8_t *seen = calloc((size_t)ds.n_train, 1);
    if (!in || !lab || !seen) fail("out of memory");
    /* every row directly */
    int64_t tl = 0, el = 0;
    for (int64_t r = 0; r < ds.n_train + ds.n_eval; r++) {
        wgml_data_row(&ds, r, in, lab);
        check_row(&ds, in, lab, nv);
        *(r < ds.n_train ? &tl : &el) += labels_of(lab, L);
    }
    if (tl != ds.train_labels || el != ds.eval_labels) fail("label counts disagree with the rows");
    if (!jsonl && (tl != ds.n_train * seq_len || el != ds.n_eval * seq_len)) fail("plain text: every position is a label");
    /* two epochs: positions [e·n_train, (e+1)·n_train) visit each training row once */
    uint64_t seed = (uint64_t)data[0] * 0x9e3779b97f4a7c15ull + data[1];
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        memset(seen, 0, (size_t)ds.n_train);
        for (int64_t k = 0; k < ds.n_train; k++) {
            int64_t r = wgml_data_train_row(&ds, seed, epoch * ds.n_train + k);
            if (r < 0 || r >= ds.n_train || seen[r]) fail("an epoch does not visit each training row once");
            seen[r] = 1;
        }
    }
    /* batches over the two epochs (a batch may straddle an epoch boundary) */
    for (int64_t pos = 0; pos < 2 * ds.n_train;) {
        int64_t next = wgml_data_train_batch(&ds, seed, pos, batch, in, lab);
        if (next != pos + batch) fail("wgml_data_train_batch position");
        for (int b = 0; b < batch; b++) check_row(&ds, in + (size_t)b * L, lab + (size_t)b * L, nv);
        pos = next;
    }
    /* held-out batches, one past the end */
    for (int64_t first = 0; first < ds.n_eval + batch; first += batch) {
        wgml_data_eval_batch(&ds, first, batch, in, lab);
        for (int b = 0; b < batch; b++) {
            const int32_t *bi = in + (size_t)b * L, *bl = lab + (size_t)b * L;
            check_row(&ds, bi, bl, nv);
            if (first + b >= ds.n_eval)
                for (size_t j = 0; j < L; j++)
                    if (bi[j] != ds.pad_id || bl[j] != -100) fail("a batch row past n_eval is not padding");
        }
    }
    free(seen);
    free(in);
    free(lab);
    wgml_data_free(&ds);
    return 0;
}
