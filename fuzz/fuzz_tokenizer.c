/* Fuzz target: the tokenizer with two real vocabularies, loaded once: SmolLM2's byte-level BPE
 * (49,152 tokens, its merges and special tokens) and Gemma 3's SentencePiece BPE (262,144
 * pieces with scores, user-defined and control tokens, byte fallback). The first input byte
 * picks the flags, and its top bit the vocabulary (set: Gemma's); the rest is text. Checks:
 * encode never fails on any bytes, every id is in range, and decoding gives the text back
 * exactly (byte-level BPE is lossless, except for the bytes that have no token in the
 * vocabulary, which are left out; SentencePiece with byte fallback is lossless, invalid UTF-8
 * included, except that a U+2581 in the text stands for a space and comes back as one; Gemma's
 * vocabulary has no dummy prefix; with WGML_TOK_SPECIAL the special
 * tokens decode to their own text). The same bytes are then read as little-endian i32 ids
 * (some out of range) and decoded, with and without skipping control tokens.
 * The model paths: $WGML_FUZZ_MODEL and $WGML_FUZZ_SPM_MODEL, else the compiled-in
 * WGML_FUZZ_MODEL_PATH and WGML_FUZZ_SPM_MODEL_PATH. Without the Gemma file, inputs for it
 * are skipped. */
#include "wgml.h"
#include "wgml-model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef WGML_FUZZ_MODEL_PATH
#define WGML_FUZZ_MODEL_PATH ".deps/models/SmolLM2-135M-Instruct.Q4_1.gguf"
#endif
#ifndef WGML_FUZZ_SPM_MODEL_PATH
#define WGML_FUZZ_SPM_MODEL_PATH ".deps/models/gemma-3-270m-q4_k_m.gguf"
#endif

static wgml_gguf *g_file, *g_spm_file;
static wgml_tokenizer *g_tok, *g_spm;
/* Bytes with no token in the vocabulary (SmolLM2 lacks 21 of the 256 byte tokens, e.g. 0xFF);
 * encode leaves them out, as the reference BPE does without an unknown token. */
static unsigned char g_dropped[256];

/* Loads the vocabulary; returns 0 when the model file is missing (the replay test skips). */
int fuzz_tokenizer_setup(void) {
    if (g_tok) return 1;
    const char *path = getenv("WGML_FUZZ_MODEL");
    if (!path || !*path) path = WGML_FUZZ_MODEL_PATH;
    char err[512];
    if (wgml_gguf_open(path, &g_file, err, sizeof err) != WGML_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err);
        return 0;
    }
    if (wgml_tokenizer_from_gguf(g_file, &g_tok, err, sizeof err) != WGML_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err);
        return 0;
    }
    for (int c = 0; c < 256; c++) {
        char ch = (char)c;
        int32_t *ids = NULL;
        size_t n = 0;
        if (wgml_tokenizer_encode(g_tok, &ch, 1, 0, &ids, &n) == WGML_OK) g_dropped[c] = n == 0;
        free(ids);
    }
    const char *sp = getenv("WGML_FUZZ_SPM_MODEL");
    if (!sp || !*sp) sp = WGML_FUZZ_SPM_MODEL_PATH;
    if (wgml_gguf_open(sp, &g_spm_file, err, sizeof err) != WGML_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s (the SentencePiece inputs are skipped)\n", err);
    } else if (wgml_tokenizer_from_gguf(g_spm_file, &g_spm, err, sizeof err) != WGML_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err);
        return 0;
    }
    return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (!fuzz_tokenizer_setup()) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || !g_tok) return 0;
    int flags = data[0] & (WGML_TOK_ADD_BOS | WGML_TOK_ADD_EOS | WGML_TOK_SPECIAL);
    int spm = data[0] & 0x80;
    if (spm && !g_spm) return 0;
    wgml_tokenizer *tok = spm ? g_spm : g_tok;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t nv = wgml_tokenizer_vocab_size(tok);
    int32_t *ids = NULL;
    size_t n = 0;
    if (wgml_tokenizer_encode(tok, text, len, flags, &ids, &n) != WGML_OK) {
        fprintf(stderr, "encode failed: %s\n", wgml_tokenizer_error(tok));
        abort();
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv) abort();
    size_t skip_b = (flags & WGML_TOK_ADD_BOS) ? 1 : 0, skip_e = (flags & WGML_TOK_ADD_EOS) ? 1 : 0;
    if (n < skip_b + skip_e) abort();
    char *back = NULL;
    size_t blen = 0;
    if (wgml_tokenizer_decode(tok, ids + skip_b, n - skip_b - skip_e, 0, &back, &blen) != WGML_OK) abort();
    /* the text without the bytes that have no token */
    char *want = malloc(len ? len : 1);
    if (!want) abort();
    size_t wl = 0;
    for (size_t i = 0; i < len; i++) {
        if (spm && i + 3 <= len && !memcmp(text + i, "\xe2\x96\x81", 3)) {
            want[wl++] = ' '; /* U+2581: no byte before it can take it into a sequence of its own */
            i += 2;
        } else if (spm || !g_dropped[(unsigned char)text[i]]) {
            want[wl++] = text[i];
        }
    }
    if (blen != wl || memcmp(back, want, wl) != 0) {
        fprintf(stderr, "round trip differs: %zu bytes in (%zu with a token), %zu out\n", len, wl, blen);
        abort();
    }
    free(want);
    free(back);
    free(ids);

    /* arbitrary ids */
    size_t nid = len / 4;
    int32_t *raw = malloc((nid ? nid : 1) * sizeof *raw);
    if (!raw) return 0;
    for (size_t i = 0; i < nid; i++) {
        uint32_t u;
        memcpy(&u, text + 4 * i, 4);
        /* mostly in range, sometimes just outside or wild */
        raw[i] = (u & 0x80000000u) ? (int32_t)u : (int32_t)(u % (uint32_t)(nv + 2));
    }
    for (int f = 0; f < 2; f++) {
        char *s = NULL;
        size_t sl = 0;
        wgml_status st = wgml_tokenizer_decode(tok, raw, nid, f ? WGML_TOK_SKIP_SPECIAL : 0, &s, &sl);
        if (st == WGML_OK) {
            if (strlen(s) > sl) abort(); /* NUL-terminated at len (a token may hold a NUL byte) */
            free(s);
        } else if (st != WGML_ERR_ARG || s) {
            abort();
        }
    }
    free(raw);
    return 0;
}
