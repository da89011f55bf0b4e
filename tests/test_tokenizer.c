/* Tokenizer: SmolLM2's tokenizer from the model's GGUF (ids checked against Hugging Face
 * `tokenizers`; the full comparison on megabytes of text is tests/py/test_tokenizer.py),
 * round trips, BOS/EOS, special tokens, the chat template, speed, and errors on bad
 * metadata (built here as small GGUF files). */
#include "gguf_build.h"
#include "harness.h"
#include "wgml-model.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static wgml_tokenizer *tok;

static int ids_equal(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static void expect_ids(const char *text, int flags, const int32_t *want, size_t n_want) {
    int32_t *ids;
    size_t n;
    wgml_status s = wgml_tokenizer_encode(tok, text, strlen(text), flags, &ids, &n);
    th_check(s == WGML_OK && ids_equal(ids, n, want, n_want), "encode '%s' (%zu ids, want %zu)", text, s ? 0 : n, n_want);
    if (!s) {
        char *back;
        size_t len;
        int strip = (flags & WGML_TOK_ADD_BOS) || (flags & WGML_TOK_ADD_EOS);
        s = wgml_tokenizer_decode(tok, ids, n, strip ? WGML_TOK_SKIP_SPECIAL : 0, &back, &len);
        th_check(s == WGML_OK && len == strlen(text) && !memcmp(back, text, len), "decode(encode('%s'))", text);
        if (!s) free(back);
        free(ids);
    }
}

static void test_known(void) {
    /* ids from Hugging Face tokenizers built from this vocabulary (see the Python test) */
    const int32_t hello[] = {19556, 905, 17, 657, 506, 216, 34, 32, 34, 36, 28, 3247, 982, 357, 47};
    expect_ids("Hello world! It's 2024, isn't it?", 0, hello, 15);
    const int32_t chat[] = {1, 4093, 198, 56, 2756, 31394, 40303, 218, 2};
    expect_ids("<|im_start|>user\nH\xc3\xa9llo \xf0\x9f\x98\x80<|im_end|>", WGML_TOK_SPECIAL, chat, 9);
    const int32_t bos_eos[] = {1, 19556, 2};
    expect_ids("Hello", WGML_TOK_ADD_BOS | WGML_TOK_ADD_EOS, bos_eos, 3);
    expect_ids("", 0, NULL, 0);
    /* without WGML_TOK_SPECIAL the special text is plain text */
    int32_t *ids;
    size_t n;
    wgml_tokenizer_encode(tok, "<|im_end|>", 10, 0, &ids, &n);
    th_check(n > 1 && ids[0] != 2, "special text as plain text: %zu ids", n);
    free(ids);
    th_check(wgml_tokenizer_bos(tok) == 1 && wgml_tokenizer_eos(tok) == 2 && wgml_tokenizer_vocab_size(tok) == 49152,
             "bos/eos/vocab");
    th_check(!strcmp(wgml_tokenizer_pre(tok), "smollm") && wgml_tokenizer_merge_count(tok) == 48900, "pre and merges");
    th_check(!strcmp(wgml_tokenizer_model(tok), "gpt2") && !wgml_tokenizer_add_bos(tok) && !wgml_tokenizer_add_eos(tok) &&
                 wgml_tokenizer_unknown(tok) == 0 && wgml_tokenizer_padding(tok) == 2,
             "model kind, add_bos/add_eos, unknown and padding ids from the file");
    th_check(!strcmp(wgml_tokenizer_token(tok, 2), "<|im_end|>") && wgml_tokenizer_token(tok, 49152) == NULL, "token text");
}

static void test_roundtrip_random(void) {
    /* random bytes that are valid UTF-8 pieces: ASCII, Latin-1, CJK, emoji, whitespace */
    static const char *pieces[] = {"a", "Z", " ", "  ", "\n", "\t", "7", "42", "'s", "'ll", "\xc3\xa9", "\xc3\x9f",
                                   "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "!", "...", "\xe2\x80\x94", "\xc2\xa0", "x"};
    int bad = 0;
    for (int r = 0; r < 200; r++) {
        char buf[1024];
        size_t len = 0;
        int k = 1 + (int)th_uniform(0, 60);
        for (int i = 0; i < k; i++) {
            const char *p = pieces[(int)th_uniform(0, sizeof pieces / sizeof pieces[0] - 1e-9)];
            memcpy(buf + len, p, strlen(p));
            len += strlen(p);
        }
        int32_t *ids;
        size_t n;
        char *back;
        size_t blen;
        if (wgml_tokenizer_encode(tok, buf, len, 0, &ids, &n) || wgml_tokenizer_decode(tok, ids, n, 0, &back, &blen)) {
            bad++;
            continue;
        }
        bad += !(blen == len && !memcmp(back, buf, len));
        free(ids);
        free(back);
    }
    th_check(bad == 0, "random round trips: %d of 200 differ", bad);
}

static void test_speed(void) {
    /* 1 MB of English-like text from a fixed vocabulary */
    static const char *words[] = {"the", "and", "of", "to", "in", "that", "he", "shall", "unto", "for", "I", "his",
                                  "a", "LORD", "they", "be", "is", "him", "not", "them", "it", "with", "all", "thou"};
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap + 64);
    while (len < cap) {
        const char *w = words[(int)th_uniform(0, 24 - 1e-9)];
        len += (size_t)sprintf(text + len, "%s%s", w, th_uniform(0, 1) < 0.1 ? ",\n" : " ");
    }
    int32_t *ids;
    size_t n;
    clock_t c0 = clock();
    wgml_status s = wgml_tokenizer_encode(tok, text, len, 0, &ids, &n);
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("  encoded %zu bytes into %zu ids in %.3f s (%.1f MB/s)\n", len, n, secs, len / 1e6 / secs);
    th_check(s == WGML_OK && secs < 5.0, "encode 1 MB in under 5 s (%.2f s)", secs);
    if (!s) {
        char *back;
        size_t blen;
        s = wgml_tokenizer_decode(tok, ids, n, 0, &back, &blen);
        th_check(s == WGML_OK && blen == len && !memcmp(back, text, len), "1 MB round trip");
        if (!s) free(back);
        free(ids);
    }
    free(text);
}

static void test_chat(void) {
    wgml_chat_msg m1[] = {{"user", "Hello!"}};
    char *out;
    size_t len;
    wgml_status s = wgml_chat_apply(tok, m1, 1, 1, &out, &len);
    const char *want1 = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n";
    th_check(s == WGML_OK && !strcmp(out, want1) && len == strlen(want1), "chat with the default system message");
    if (!s) free(out);
    wgml_chat_msg m2[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}};
    s = wgml_chat_apply(tok, m2, 3, 0, &out, &len);
    const char *want2 = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\nHello.<|im_end|>\n";
    th_check(s == WGML_OK && !strcmp(out, want2), "chat with a system message, no generation prompt");
    if (!s) free(out);
    wgml_chat_msg bad[] = {{"user", NULL}};
    th_check(wgml_chat_apply(tok, bad, 1, 1, &out, &len) == WGML_ERR_ARG && strstr(wgml_tokenizer_error(tok), "NULL"),
             "chat NULL content: %s", wgml_tokenizer_error(tok));
}

static void test_errors(void) {
    int32_t ids[] = {5, 49152};
    char *out;
    size_t len;
    th_check(wgml_tokenizer_decode(tok, ids, 2, 0, &out, &len) == WGML_ERR_ARG &&
                 strstr(wgml_tokenizer_error(tok), "id 49152 at position 1"),
             "decode out of range: %s", wgml_tokenizer_error(tok));
    int32_t neg = -1;
    th_check(wgml_tokenizer_decode(tok, &neg, 1, 0, &out, &len) == WGML_ERR_ARG, "decode negative id");

    /* small files with bad tokenizer metadata */
    char path[128], err[512];
    th_tmp_path(path, sizeof path, "wgml_test_tok_%d.gguf", (int)getpid());
    struct { const char *name, *model, *pre, *merge, *tmpl; wgml_status want; const char *msg; } cases[] = {
        {"unknown model", "bert", "default", "a b", NULL, WGML_ERR_UNSUPPORTED, "is not supported"},
        {"unknown pre", "gpt2", "qwen9", "a b", NULL, WGML_ERR_UNSUPPORTED, "pre-tokenizer 'qwen9'"},
        {"merge out of vocab", "gpt2", "gpt2", "a q", NULL, WGML_ERR_FORMAT, "not in the vocabulary"},
        {"merge without space", "gpt2", "gpt2", "ab", NULL, WGML_ERR_FORMAT, "no space"},
        {"good", "gpt2", "gpt2", "a b", "{{ messages }}", WGML_OK, ""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gb b = {0};
        gb_header(&b, 3, 0, cases[k].tmpl ? 5 : 4);
        gb_str(&b, "tokenizer.ggml.model"); gb_u32(&b, 8); gb_str(&b, cases[k].model);
        gb_str(&b, "tokenizer.ggml.pre"); gb_u32(&b, 8); gb_str(&b, cases[k].pre);
        gb_str(&b, "tokenizer.ggml.tokens"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 3);
        gb_str(&b, "a"); gb_str(&b, "b"); gb_str(&b, "ab");
        gb_str(&b, "tokenizer.ggml.merges"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 1); gb_str(&b, cases[k].merge);
        if (cases[k].tmpl) { gb_str(&b, "tokenizer.chat_template"); gb_u32(&b, 8); gb_str(&b, cases[k].tmpl); }
        gb_write(&b, path);
        free(b.p);
        wgml_gguf *f = NULL;
        wgml_tokenizer *t = NULL;
        wgml_status s = wgml_gguf_open(path, &f, err, sizeof err);
        th_check(s == WGML_OK, "%s: open: %s", cases[k].name, err);
        if (s) continue;
        s = wgml_tokenizer_from_gguf(f, &t, err, sizeof err);
        th_check(s == cases[k].want && strstr(err, cases[k].msg), "%s: got %s '%s'", cases[k].name, wgml_status_name(s), err);
        if (s && s == cases[k].want) printf("  ok %-22s %s\n", cases[k].name, err);
        if (t) {
            int32_t *ids;
            size_t n;
            s = wgml_tokenizer_encode(t, "abab", 4, 0, &ids, &n);
            th_check(s == WGML_OK && n == 2 && ids[0] == 2 && ids[1] == 2, "toy BPE merges 'abab' into [ab, ab]");
            if (!s) free(ids);
            th_check(wgml_tokenizer_encode(t, "a", 1, WGML_TOK_ADD_BOS, &ids, &n) == WGML_ERR_ARG &&
                         strstr(wgml_tokenizer_error(t), "no BOS"), "BOS without a BOS id: %s", wgml_tokenizer_error(t));
            wgml_chat_msg m[] = {{"user", "x"}};
            char *o;
            size_t ol;
            th_check(wgml_chat_apply(t, m, 1, 1, &o, &ol) == WGML_ERR_UNSUPPORTED &&
                         strstr(wgml_tokenizer_error(t), "not the ChatML template"), "unknown chat template: %s",
                     wgml_tokenizer_error(t));
        }
        wgml_tokenizer_free(t);
        wgml_gguf_close(f);
    }
    /* no tokenizer at all */
    gb b = {0};
    gb_header(&b, 3, 0, 0);
    gb_write(&b, path);
    free(b.p);
    wgml_gguf *f = NULL;
    wgml_tokenizer *t = NULL;
    if (wgml_gguf_open(path, &f, err, sizeof err) == WGML_OK) {
        th_check(wgml_tokenizer_from_gguf(f, &t, err, sizeof err) == WGML_ERR_FORMAT && strstr(err, "tokenizer.ggml.model"),
                 "no tokenizer metadata: %s", err);
        wgml_gguf_close(f);
    }
    unlink(path);
}

int main(int argc, char **argv) {
    th_init_args("test_tokenizer", argc, argv);
    char mp[512], err[512];
    snprintf(mp, sizeof mp, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", WGML_MODEL_DIR);
    wgml_gguf *f = NULL;
    clock_t c0 = clock();
    wgml_status s = wgml_gguf_open(mp, &f, err, sizeof err);
    if (!s) s = wgml_tokenizer_from_gguf(f, &tok, err, sizeof err);
    th_check(s == WGML_OK, "load the tokenizer (run scripts/setup.sh for the model): %s", err);
    printf("  tokenizer loaded in %.3f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    if (!s) {
        test_known();
        test_roundtrip_random();
        test_speed();
        test_chat();
        test_errors();
    }
    wgml_tokenizer_free(tok);
    wgml_gguf_close(f);
    return th_done();
}
