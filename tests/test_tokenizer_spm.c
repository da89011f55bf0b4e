/* SentencePiece tokenizer (tokenizer.ggml.model "llama") on small vocabularies written here as
 * GGUF files, with ids worked out by hand from the format's rules (score order, leftmost on a
 * tie, frozen user-defined pieces, unused pieces split back, byte fallback, the unknown token,
 * the dummy prefix), round trips of random text (invalid UTF-8 included), 1 MB speed, errors
 * on bad metadata, and Gemma's chat format. With the Gemma 3 GGUF present, a few ids that
 * PyPI sentencepiece gives for its vocabulary (the full comparison on megabytes of text is
 * tests/py/test_tokenizer_spm.py). */
#include "gguf_build.h"
#include "harness.h"
#include "wgml-model.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SP "\xe2\x96\x81" /* U+2581 */

enum { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER = 4, UNUSED = 5, BYTE = 6 };

/* The vocabulary: 7 specials, then 256 byte tokens (ids 7..262), then the pieces below. */
typedef struct piece {
    const char *text;
    float score;
    int type;
} piece;
static const piece specials[] = {{"<pad>", 0, CONTROL},         {"<eos>", 0, CONTROL},         {"<bos>", 0, CONTROL},
                                 {"<unk>", 0, UNKNOWN},         {"<start_of_turn>", 0, CONTROL}, {"<end_of_turn>", 0, CONTROL},
                                 {"\n", 0, USER}};
static const piece pieces[] = {
    {SP, -1, NORMAL},     /* 263 */
    {"a", -2, NORMAL},    /* 264 */
    {"b", -3, NORMAL},    /* 265 */
    {"c", -4, NORMAL},    /* 266 */
    {"h", -5, NORMAL},    /* 267 */
    {"i", -6, NORMAL},    /* 268 */
    {"ab", -10, NORMAL},  /* 269 */
    {"bc", -8, NORMAL},   /* 270: outscores "ab", so "abc" is [a, bc] */
    {SP "h", -7, NORMAL}, /* 271 */
    {SP "hi", -9, NORMAL},/* 272 */
    {"\xc3\xa9", -11, NORMAL}, /* 273: e-acute */
    {"x", -12, NORMAL},   /* 274 */
    {"y", -13, NORMAL},   /* 275 */
    {"xy", -15, NORMAL},  /* 276: a tie with "yx": the left pair wins */
    {"yx", -15, NORMAL},  /* 277 */
    {"ca", -1.5f, UNUSED},/* 278: merges first, but an unused piece is split back */
    {"cab", -30, NORMAL}, /* 279 */
    {"\nb", 5, NORMAL},   /* 280: never formed: "\n" is frozen */
    {"<>", -40, NORMAL},  /* 281 */
};
#define N_SPECIAL 7
#define N_PIECES ((int)(sizeof pieces / sizeof pieces[0]))
#define BYTE0 7
#define P(i) (263 + (i))

/* What a built file varies: the flags, and one corruption for the error cases. */
typedef struct vopts {
    int prefix, bytes, add_bos;
    const char *arch, *tmpl;
    int bad; /* 0 none; see build_file */
} vopts;

static void kv_key(gb *b, const char *k, uint32_t type) { gb_str(b, k); gb_u32(b, type); }

/* Writes the vocabulary as a GGUF file at path. */
static void build_file(const char *path, vopts o) {
    int nv = N_SPECIAL + (o.bytes ? 256 : 0) + N_PIECES;
    char names[256][8];
    gb b = {0};
    int n_kv = 10 + (o.tmpl != NULL);
    gb_header(&b, 3, 0, (uint64_t)n_kv);
    kv_key(&b, "general.architecture", 8); gb_str(&b, o.arch ? o.arch : "gemma3");
    kv_key(&b, "tokenizer.ggml.model", 8); gb_str(&b, "llama");
    kv_key(&b, "tokenizer.ggml.tokens", 9); gb_u32(&b, 8); gb_u64(&b, (uint64_t)nv);
    for (int i = 0; i < N_SPECIAL; i++) gb_str(&b, specials[i].text);
    for (int i = 0; o.bytes && i < 256; i++) {
        snprintf(names[i], sizeof names[i], "<0x%02X>", i);
        gb_str(&b, o.bad == 3 && i == 65 ? "<0xZZ>" : names[i]);
    }
    for (int i = 0; i < N_PIECES; i++) gb_str(&b, pieces[i].text);
    int ns = o.bad == 1 ? nv - 1 : nv; /* 1: one score short */
    kv_key(&b, "tokenizer.ggml.scores", 9); gb_u32(&b, 6); gb_u64(&b, (uint64_t)ns);
    for (int i = 0; i < N_SPECIAL; i++) gb_f32(&b, specials[i].score);
    for (int i = 0; o.bytes && i < 256; i++) gb_f32(&b, 0);
    for (int i = 0; i < ns - N_SPECIAL - (o.bytes ? 256 : 0); i++) gb_f32(&b, pieces[i].score);
    kv_key(&b, "tokenizer.ggml.token_type", 9); gb_u32(&b, 5); gb_u64(&b, (uint64_t)nv);
    for (int i = 0; i < N_SPECIAL; i++) gb_u32(&b, o.bad == 6 && i == 3 ? CONTROL : (uint32_t)specials[i].type);
    /* 2: one byte token typed normal (so <0x80> is missing); 4: a type out of range */
    for (int i = 0; o.bytes && i < 256; i++) gb_u32(&b, o.bad == 2 && i == 0x80 ? NORMAL : BYTE);
    for (int i = 0; i < N_PIECES; i++) gb_u32(&b, o.bad == 4 && i == 3 ? 9u : (uint32_t)pieces[i].type);
    /* 7: no BOS id (with add_bos_token) */
    kv_key(&b, o.bad == 7 ? "tokenizer.ggml.cls_token_id" : "tokenizer.ggml.bos_token_id", 4); gb_u32(&b, o.bad == 5 ? (uint32_t)nv : 2); /* 5: out of range */
    kv_key(&b, "tokenizer.ggml.eos_token_id", 4); gb_u32(&b, 1);
    /* 6: no unknown token (no id, <unk> typed control) and no byte tokens: nothing could
     * encode a character outside the vocabulary */
    kv_key(&b, o.bad == 6 ? "tokenizer.ggml.padding_token_id" : "tokenizer.ggml.unknown_token_id", 4); gb_u32(&b, o.bad == 6 ? 0 : 3);
    kv_key(&b, "tokenizer.ggml.add_space_prefix", 7); gb_u8(&b, (uint8_t)o.prefix);
    kv_key(&b, "tokenizer.ggml.add_bos_token", 7); gb_u8(&b, (uint8_t)o.add_bos);
    if (o.tmpl) { kv_key(&b, "tokenizer.chat_template", 8); gb_str(&b, o.tmpl); }
    gb_write(&b, path);
    free(b.p);
}

static char g_path[128];

/* Builds and loads; on failure returns NULL with the message in err. */
static wgml_tokenizer *load(vopts o, wgml_gguf **f, char *err, size_t errlen) {
    build_file(g_path, o);
    wgml_tokenizer *t = NULL;
    *f = NULL;
    if (wgml_gguf_open(g_path, f, err, errlen)) return NULL;
    if (wgml_tokenizer_from_gguf(*f, &t, err, errlen)) {
        wgml_gguf_close(*f);
        *f = NULL;
        return NULL;
    }
    return t;
}

static void expect(wgml_tokenizer *t, const char *what, const char *text, size_t len, int flags, const int32_t *want, size_t nw) {
    int32_t *ids = NULL;
    size_t n = 0;
    wgml_status s = wgml_tokenizer_encode(t, text, len, flags, &ids, &n);
    int ok = s == WGML_OK && n == nw && (n == 0 || !memcmp(ids, want, n * sizeof *ids));
    th_check(ok, "%s: encode gave %zu ids (want %zu)", what, s ? 0 : n, nw);
    if (!ok && !s) {
        printf("    got:");
        for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
        printf("\n   want:");
        for (size_t i = 0; i < nw; i++) printf(" %d", want[i]);
        printf("\n");
    }
    free(ids);
}

#define EXPECT(t, what, text, flags, ...)                                                                    \
    do {                                                                                                      \
        const int32_t w_[] = {__VA_ARGS__};                                                                   \
        expect(t, what, text, sizeof(text) - 1, flags, w_, sizeof w_ / sizeof w_[0]);                         \
    } while (0)

static void expect_decode(wgml_tokenizer *t, const char *what, const int32_t *ids, size_t n, int flags, const char *want) {
    char *s = NULL;
    size_t len = 0;
    wgml_status st = wgml_tokenizer_decode(t, ids, n, flags, &s, &len);
    th_check(st == WGML_OK && len == strlen(want) && !memcmp(s, want, len), "%s: decode gave '%s' (want '%s')", what,
             st ? "" : s, want);
    free(s);
}

static void test_rules(void) {
    char err[512];
    wgml_gguf *f;
    wgml_tokenizer *t = load((vopts){.prefix = 0, .bytes = 1}, &f, err, sizeof err);
    th_check(t != NULL, "load the byte-fallback vocabulary: %s", err);
    if (!t) return;
    th_check(!strcmp(wgml_tokenizer_model(t), "llama") && wgml_tokenizer_unknown(t) == 3 && wgml_tokenizer_bos(t) == 2 &&
                 wgml_tokenizer_eos(t) == 1 && !wgml_tokenizer_add_bos(t) && wgml_tokenizer_vocab_size(t) == 263 + N_PIECES,
             "model, ids and flags");
    EXPECT(t, "score order", "abc", 0, P(1), P(7));
    EXPECT(t, "tie to the left", "xyx", 0, P(13), P(11));
    EXPECT(t, "tie to the left (yxy)", "yxy", 0, P(14), P(12));
    EXPECT(t, "no prefix", "hi", 0, P(4), P(5));
    EXPECT(t, "space marker", " hi", 0, P(9));
    EXPECT(t, "space run", "a  b", 0, P(1), P(0), P(0), P(2));
    EXPECT(t, "frozen user-defined", "a\nb", 0, P(1), 6, P(2));
    EXPECT(t, "user-defined without the special flag", "\n\n", 0, 6, 6);
    EXPECT(t, "unused piece split back", "ca", 0, P(3), P(1));
    EXPECT(t, "unused piece inside a normal one", "cab", 0, P(16));
    EXPECT(t, "piece with two bytes", "\xc3\xa9", 0, P(10));
    EXPECT(t, "byte fallback", "\xe2\x82\xac", 0, BYTE0 + 0xE2, BYTE0 + 0x82, BYTE0 + 0xAC);
    EXPECT(t, "invalid UTF-8 kept as bytes", "a\xff\xc3", 0, P(1), BYTE0 + 0xFF, BYTE0 + 0xC3);
    int32_t *ids;
    size_t n;
    th_check(wgml_tokenizer_encode(t, "", 0, 0, &ids, &n) == WGML_OK && n == 0, "empty text gives no ids");
    free(ids);
    EXPECT(t, "control text with the special flag", "<bos>hi<eos>", WGML_TOK_SPECIAL, 2, P(4), P(5), 1);
    /* without it, "<bos>" is text: '<' '>' merge, the letters fall back to bytes */
    EXPECT(t, "control text as plain text", "<>", 0, P(18));
    wgml_tokenizer_encode(t, "<bos>", 5, 0, &ids, &n);
    th_check(n == 5 && ids[0] == BYTE0 + '<', "control text without the special flag is bytes (%zu ids)", n);
    free(ids);
    EXPECT(t, "BOS and EOS flags", "ab", WGML_TOK_ADD_BOS | WGML_TOK_ADD_EOS, 2, P(6), 1);
    const int32_t d1[] = {P(9), BYTE0 + 0xE2, BYTE0 + 0x82, BYTE0 + 0xAC, 6, 2, P(0)};
    expect_decode(t, "decode pieces, bytes, control", d1, 7, 0, " hi\xe2\x82\xac\n<bos> ");
    expect_decode(t, "decode skipping control", d1, 7, WGML_TOK_SKIP_SPECIAL, " hi\xe2\x82\xac\n ");
    wgml_tokenizer_free(t);
    wgml_gguf_close(f);

    /* the dummy prefix */
    t = load((vopts){.prefix = 1, .bytes = 1, .add_bos = 1}, &f, err, sizeof err);
    th_check(t != NULL, "load the vocabulary with add_space_prefix: %s", err);
    if (!t) return;
    th_check(wgml_tokenizer_add_bos(t), "add_bos_token read");
    EXPECT(t, "dummy prefix", "hi", 0, P(9));
    EXPECT(t, "dummy prefix on a space", " hi", 0, P(0), P(9));
    EXPECT(t, "dummy prefix on the text's start only", "hi<eos>hi", WGML_TOK_SPECIAL, P(9), 1, P(4), P(5));
    EXPECT(t, "no dummy prefix after a special token at the start", "<bos>hi", WGML_TOK_SPECIAL, 2, P(4), P(5));
    EXPECT(t, "dummy prefix after BOS", "hi", WGML_TOK_ADD_BOS, 2, P(9));
    const int32_t d2[] = {P(9), P(9)};
    expect_decode(t, "decode drops the dummy prefix's space", d2, 2, 0, "hi hi");
    const int32_t d3[] = {2, P(9)};
    expect_decode(t, "after a skipped BOS too", d3, 2, WGML_TOK_SKIP_SPECIAL, "hi");
    const int32_t d4[] = {P(0), P(9)};
    expect_decode(t, "only the first space", d4, 2, 0, " hi");

    /* random text round-trips (decode(encode(s)) == s), invalid UTF-8 and special text included */
    static const char *alphabet[] = {"a", "b", "c", "h", "i", "x", "y", " ", "  ", "\n", "\t", "\xc3\xa9", "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80", "\xff", "\xc3", "<bos>", "<>", "\xe6\x97\xa5", "e\xcc\x81"};
    int bad = 0;
    for (int r = 0; r < 300; r++) {
        char buf[512];
        size_t len = 0;
        int k = (int)th_uniform(0, 40);
        for (int i = 0; i < k; i++) {
            const char *p = alphabet[(int)th_uniform(0, sizeof alphabet / sizeof alphabet[0] - 1e-9)];
            memcpy(buf + len, p, strlen(p));
            len += strlen(p);
        }
        char *back = NULL;
        size_t blen = 0;
        if (wgml_tokenizer_encode(t, buf, len, 0, &ids, &n) || wgml_tokenizer_decode(t, ids, n, 0, &back, &blen)) {
            bad++;
            continue;
        }
        bad += !(blen == len && !memcmp(back, buf, len));
        free(ids);
        free(back);
    }
    th_check(bad == 0, "random round trips: %d of 300 differ", bad);

    /* speed: 1 MB of text from the alphabet, as one line (the worst case: one merge queue) */
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap + 16);
    while (len < cap) {
        const char *p = alphabet[(int)th_uniform(0, 9 - 1e-9)];
        if (*p == '\n') continue;
        memcpy(text + len, p, strlen(p));
        len += strlen(p);
    }
    clock_t c0 = clock();
    wgml_status s = wgml_tokenizer_encode(t, text, len, 0, &ids, &n);
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("  encoded %zu bytes (one line) into %zu ids in %.3f s\n", len, n, secs);
    th_check(s == WGML_OK && secs < 3.0, "encode 1 MB in under 3 s (%.2f s)", secs);
    if (!s) {
        char *back;
        size_t blen;
        s = wgml_tokenizer_decode(t, ids, n, 0, &back, &blen);
        th_check(s == WGML_OK && blen == len && !memcmp(back, text, len), "1 MB round trip");
        if (!s) free(back);
        free(ids);
    }
    free(text);
    wgml_tokenizer_free(t);
    wgml_gguf_close(f);

    /* no byte tokens: the unknown token, one per unknown character */
    t = load((vopts){.prefix = 0, .bytes = 0}, &f, err, sizeof err);
    th_check(t != NULL, "load the vocabulary without byte tokens: %s", err);
    if (!t) return;
    EXPECT(t, "unknown token", "a\xe2\x82\xac\xe2\x82\xac" "b", 0, P(1) - 256, 3, 3, P(2) - 256);
    wgml_tokenizer_free(t);
    wgml_gguf_close(f);
}

static void test_errors(void) {
    struct { const char *name; vopts o; const char *msg; } cases[] = {
        {"scores short", {.bytes = 1, .bad = 1}, "tokenizer.ggml.scores"},
        {"byte token missing", {.bytes = 1, .bad = 2}, "not <0x80>"},
        {"bad byte token name", {.bytes = 1, .bad = 3}, "'<0xZZ>' has type byte"},
        {"type out of range", {.bytes = 1, .bad = 4}, "has type 9"},
        {"bos out of range", {.bytes = 1, .bad = 5}, "bos_token_id"},
        {"no unknown, no bytes", {.bytes = 0, .bad = 6}, "neither byte tokens"},
        {"add_bos without BOS", {.bytes = 1, .bad = 7, .add_bos = 1}, "no bos_token_id"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char err[512] = "";
        wgml_gguf *f;
        wgml_tokenizer *t = load(cases[k].o, &f, err, sizeof err);
        th_check(!t && strstr(err, cases[k].msg), "%s: got '%s'", cases[k].name, err);
        if (!t) printf("  ok %-22s %s\n", cases[k].name, err);
        wgml_tokenizer_free(t);
        wgml_gguf_close(f);
    }
}

static void expect_chat(wgml_tokenizer *t, const char *what, const wgml_chat_msg *m, size_t n, int gen, const char *want) {
    char *out = NULL;
    size_t len = 0;
    wgml_status s = wgml_chat_apply(t, m, n, gen, &out, &len);
    th_check(s == WGML_OK && len == strlen(want) && !strcmp(out, want), "%s: got '%s' (%s)", what, s ? "" : out,
             s ? wgml_tokenizer_error(t) : "");
    free(out);
}

static void test_chat(void) {
    char err[512];
    wgml_gguf *f;
    /* no template: the gemma architecture picks Gemma's format */
    wgml_tokenizer *t = load((vopts){.bytes = 1}, &f, err, sizeof err);
    th_check(t != NULL, "load: %s", err);
    if (!t) return;
    wgml_chat_msg m1[] = {{"user", "Hello!"}};
    expect_chat(t, "one user turn", m1, 1, 1, "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
    wgml_chat_msg m2[] = {{"system", "Be brief."}, {"user", " \tHi \n"}, {"assistant", "Hello.\n\n"}, {"user", "ab"}};
    expect_chat(t, "system folded into the first turn, contents trimmed", m2, 4, 0,
                "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
                "<start_of_turn>user\nab<end_of_turn>\n");
    wgml_chat_msg m3[] = {{"system", "S"}};
    expect_chat(t, "system only", m3, 1, 1, "<bos><start_of_turn>model\n");
    expect_chat(t, "no messages", NULL, 0, 0, "<bos>");
    wgml_chat_msg m4[] = {{"user", "a\xe2\x80\x83"}, {"model", "\xc2\xa0" "b"}};
    expect_chat(t, "Unicode white space trimmed; role model kept", m4, 2, 0,
                "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n");
    wgml_chat_msg bad[] = {{"user", "a"}, {"user", "b"}};
    char *out = NULL;
    size_t len;
    th_check(wgml_chat_apply(t, bad, 2, 1, &out, &len) == WGML_ERR_ARG && strstr(wgml_tokenizer_error(t), "alternate"),
             "roles that do not alternate: %s", wgml_tokenizer_error(t));
    wgml_chat_msg bad2[] = {{"assistant", "a"}};
    th_check(wgml_chat_apply(t, bad2, 1, 1, &out, &len) == WGML_ERR_ARG, "first turn not the user's");
    /* the formatted prompt encodes with the control tokens as single ids */
    EXPECT(t, "chat prompt ids", "<bos><start_of_turn>user\nhi<end_of_turn>\n", WGML_TOK_SPECIAL, 2, 4, BYTE0 + 'u',
           BYTE0 + 's', BYTE0 + 'e', BYTE0 + 'r', 6, P(4), P(5), 5, 6);
    wgml_tokenizer_free(t);
    wgml_gguf_close(f);

    /* a template naming <start_of_turn> picks Gemma's format whatever the architecture; Gemma
     * 2's template has no system role */
    t = load((vopts){.bytes = 1, .arch = "llama",
                     .tmpl = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
                             "supported') }}{% endif %}<start_of_turn>...<end_of_turn>"},
             &f, err, sizeof err);
    th_check(t != NULL, "load: %s", err);
    if (t) {
        expect_chat(t, "Gemma 2 template", m1, 1, 1, "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
        th_check(wgml_chat_apply(t, m2, 4, 1, &out, &len) == WGML_ERR_ARG && strstr(wgml_tokenizer_error(t), "no system role"),
                 "Gemma 2 template with a system message: %s", wgml_tokenizer_error(t));
        wgml_tokenizer_free(t);
        wgml_gguf_close(f);
    }
    /* neither a known template nor a gemma architecture */
    t = load((vopts){.bytes = 1, .arch = "llama"}, &f, err, sizeof err);
    if (t) {
        th_check(wgml_chat_apply(t, m1, 1, 1, &out, &len) == WGML_ERR_UNSUPPORTED, "no template, llama: unsupported");
        wgml_tokenizer_free(t);
        wgml_gguf_close(f);
    }
}

/* The Gemma 3 vocabulary: ids PyPI sentencepiece gives (a ModelProto written from this file's
 * tokens, scores and types; tests/py/test_tokenizer_spm.py), the chat prompt's ids. */
static void test_gemma_file(void) {
    char mp[512], err[512];
    snprintf(mp, sizeof mp, "%s/gemma-3-270m-q4_k_m.gguf", WGML_MODEL_DIR);
    /* scripts/setup.sh installs the model: a missing file is a failure, not a skip */
    if (!th_check(!access(mp, R_OK), "%s is missing (run scripts/setup.sh): the Gemma checks cannot run", mp)) return;
    wgml_gguf *f = NULL;
    wgml_tokenizer *t = NULL;
    clock_t c0 = clock();
    wgml_status s = wgml_gguf_open(mp, &f, err, sizeof err);
    if (!s) s = wgml_tokenizer_from_gguf(f, &t, err, sizeof err);
    th_check(s == WGML_OK, "load Gemma 3's tokenizer: %s", err);
    printf("  Gemma 3 tokenizer loaded in %.3f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    if (s) {
        wgml_gguf_close(f);
        return;
    }
    th_check(wgml_tokenizer_vocab_size(t) == 262144 && wgml_tokenizer_bos(t) == 2 && wgml_tokenizer_eos(t) == 1 &&
                 wgml_tokenizer_unknown(t) == 3 && wgml_tokenizer_padding(t) == 0 && wgml_tokenizer_add_bos(t),
             "Gemma 3 ids and flags");
    /* 138 and 140 are the user-defined pieces "\u2581\u2581" and "\u2581\u2581\u2581\u2581" (the file writes
     * "  " and "    ") */
    EXPECT(t, "Gemma text", "Hello world, it is 2024!  Tabs\there.\n", 0, 9259, 1902, 236764, 625, 563, 236743, 236778,
           236771, 236778, 236812, 236888, 138, 76222, 255968, 8472, 236761, 107);
    EXPECT(t, "Gemma spaces", "a    b", 0, 236746, 140, 236763);
    th_check(!strcmp(wgml_tokenizer_token(t, 138), SP SP), "user-defined piece 138 is U+2581 U+2581");
    EXPECT(t, "Gemma literal marker", SP "x", 0, 1123); /* the marker is a space: the same as " x" */
    wgml_chat_msg m[] = {{"user", "Hi"}};
    char *out = NULL;
    size_t len;
    s = wgml_chat_apply(t, m, 1, 1, &out, &len);
    th_check(s == WGML_OK, "Gemma chat: %s", wgml_tokenizer_error(t));
    if (!s) {
        /* <bos> <start_of_turn> user \n Hi <end_of_turn> \n <start_of_turn> model \n */
        const int32_t want[] = {2, 105, 2364, 107, 10979, 106, 107, 105, 4368, 107};
        expect(t, "Gemma chat prompt", out, len, WGML_TOK_SPECIAL, want, 10);
        free(out);
    }
    wgml_tokenizer_free(t);
    wgml_gguf_close(f);
}

int main(int argc, char **argv) {
    th_init_args("test_tokenizer_spm", argc, argv);
    th_tmp_path(g_path, sizeof g_path, "wgml_test_spm_%d.gguf", (int)getpid());
    test_rules();
    test_errors();
    test_chat();
    test_gemma_file();
    unlink(g_path);
    return th_done();
}
