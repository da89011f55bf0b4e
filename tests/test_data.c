/* Fine-tuning data (src/train/data.c) and the JSON reader: packing, shifting, held-out split,
 * shuffled order, chat masking and error messages, with the real model's tokenizer. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include <unistd.h>
#include "io/json.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef WGML_MODEL_DIR
#define WGML_MODEL_DIR ".deps/models"
#endif

static const wgml_tokenizer *TOK;

static char *decode(const int32_t *ids, size_t n) {
    char *s = NULL;
    size_t len;
    if (wgml_tokenizer_decode(TOK, ids, n, 0, &s, &len)) return strdup("<decode error>");
    return s;
}

static void test_json(void) {
    json_value v;
    char err[200];
    const char *ok = " {\"a\": [1, -2.5e3, true, false, null], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\\\"\", \"o\": {}} ";
    th_check(json_parse(ok, strlen(ok), &v, err, sizeof err) == 0, "json: valid document parses (%s)", err);
    const json_value *a = json_get(&v, "a"), *s = json_get(&v, "s");
    th_check(a && a->kind == JSON_ARRAY && a->n == 5 && a->items[1].number == -2500.0 && a->items[2].boolean == 1 &&
                 a->items[4].kind == JSON_NULL,
             "json: array values");
    th_check(s && s->kind == JSON_STRING && !strcmp(s->str, "x\xc3\xa9\xf0\x9f\x98\x80\n\"") && s->len == 9,
             "json: escapes and surrogate pairs decode to UTF-8");
    json_free(&v);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"a\":1,}", "column 8"},          {"{\"a\" 1}", "expected ':'"},   {"[1 2]", "expected ','"},
        {"{\"a\":1,\"a\":2}", "repeated key"}, {"\"\\x\"", "bad escape"},       {"\"abc", "unterminated string"},
        {"01", "after the value"},            {"1.", "digits must follow"}, {"\"\\ud800\"", "surrogate"},
        {"\"\xff\"", "invalid UTF-8"},        {"tru", "unexpected character"}, {"", "end of input"},
        {"\"a\tb\"", "control character"},    {"{} {}", "after the value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int r = json_parse(bad[i].text, strlen(bad[i].text), &v, err, sizeof err);
        th_check(r != 0 && strstr(err, bad[i].want) != NULL, "json: '%s' rejected with '%s' (got '%s')", bad[i].text, bad[i].want,
                 err);
    }
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    th_check(json_parse(deep, 200, &v, err, sizeof err) != 0 && strstr(err, "nesting"), "json: 100 levels of nesting rejected");
    char *out = NULL;
    size_t len = 0, cap = 0;
    json_put_string(&out, &len, &cap, "a\"b\\c\n\x01", 7);
    th_check(out && !strcmp(out, "\"a\\\"b\\\\c\\n\\u0001\""), "json: string writer escapes (%s)", out ? out : "NULL");
    th_check(json_parse(out, len, &v, err, sizeof err) == 0 && !strcmp(v.str, "a\"b\\c\n\x01"), "json: writer output reads back");
    json_free(&v);
    free(out);
}

static char *kjv_like_text(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    for (int v = 1; n + 200 < cap; v++)
        n += (size_t)snprintf(t + n, cap - n, "Genesis 1:%d In the beginning God created the heaven and the earth, verse %d.\n", v, v * 7);
    *len = n;
    return t;
}

static void test_text(void) {
    size_t len;
    char *text = kjv_like_text(&len);
    int32_t *ids;
    size_t n;
    wgml_tokenizer_encode(TOK, text, len, 0, &ids, &n);
    const int L = 32;
    const double frac = 0.1;
    wgml_dataset ds;
    char err[300];
    wgml_status s = wgml_data_from_text(TOK, text, len, L, frac, &ds, err, sizeof err);
    th_check(s == WGML_OK, "text: dataset built (%s)", s ? err : "");
    if (s) return;
    size_t n_eval_tok = (size_t)((double)n * frac), n_train_tok = n - n_eval_tok;
    th_check(ds.n_train == (int64_t)(n_train_tok - 1) / L && ds.n_eval == (int64_t)(n_eval_tok - 1) / L,
             "text: %lld train and %lld held-out rows from %zu tokens", (long long)ds.n_train, (long long)ds.n_eval, n);
    int32_t in[32], lab[32];
    int ok_rows = 1, ok_shift = 1;
    for (int64_t r = 0; r < ds.n_train + ds.n_eval; r++) {
        size_t base = r < ds.n_train ? (size_t)r * L : n_train_tok + (size_t)(r - ds.n_train) * L;
        wgml_data_row(&ds, r, in, lab);
        for (int j = 0; j < L; j++) {
            ok_rows &= in[j] == ids[base + (size_t)j];
            ok_shift &= lab[j] == ids[base + (size_t)j + 1];
        }
        /* training rows end before the held-out tokens start; held-out rows start at or after */
        if (r < ds.n_train) ok_rows &= base + L < n_train_tok;
        else ok_rows &= base >= n_train_tok && base + L < n;
    }
    th_check(ok_rows, "text: rows are stride-L windows of the token stream; held-out rows lie after every training token");
    th_check(ok_shift, "text: labels are the inputs shifted by one");
    th_check(ds.train_labels == ds.n_train * L && ds.eval_labels == ds.n_eval * L, "text: label counts");

    /* order: each epoch a permutation, deterministic by seed, different per seed and epoch */
    int64_t nt = ds.n_train;
    int64_t *o1 = malloc(sizeof(int64_t) * (size_t)nt * 2), *o2 = malloc(sizeof(int64_t) * (size_t)nt * 2);
    char *seen = calloc((size_t)nt, 1);
    for (int64_t p = 0; p < 2 * nt; p++) o1[p] = wgml_data_train_row(&ds, 42, p);
    for (int64_t p = 0; p < 2 * nt; p++) o2[p] = wgml_data_train_row(&ds, 43, p);
    int perm_ok = 1, same_seed = 1, differ_seed = 0, differ_epoch = 0, identity = 1;
    for (int64_t p = 0; p < nt; p++) {
        if (o1[p] < 0 || o1[p] >= nt || seen[o1[p]]) perm_ok = 0;
        else seen[o1[p]] = 1;
        differ_seed |= o1[p] != o2[p];
        differ_epoch |= o1[p] != o1[p + nt];
        identity &= o1[p] == p;
    }
    for (int64_t p = 2 * nt - 1; p >= 0; p--) same_seed &= wgml_data_train_row(&ds, 42, p) == o1[p]; /* any access order */
    th_check(perm_ok, "order: epoch 1 visits every training row once");
    th_check(same_seed, "order: the same seed gives the same order, whatever the access order (resume)");
    th_check(differ_seed && differ_epoch && !identity, "order: other seeds and epochs give other orders, not the identity");
    int32_t bin[3 * 32], blab[3 * 32];
    int64_t np = wgml_data_train_batch(&ds, 42, 5, 3, bin, blab);
    wgml_data_row(&ds, o1[6], in, lab);
    th_check(np == 8 && !memcmp(bin + 32, in, sizeof in) && !memcmp(blab + 32, lab, sizeof lab), "order: a batch is consecutive positions");
    wgml_data_eval_batch(&ds, ds.n_eval - 1, 2, bin, blab);
    wgml_data_row(&ds, ds.n_train + ds.n_eval - 1, in, lab);
    int pad_ok = !memcmp(bin, in, sizeof in);
    for (int j = 0; j < L; j++) pad_ok &= blab[32 + j] == -100;
    th_check(pad_ok, "eval: a batch past the held-out rows is padded with ignored labels");
    free(o1), free(o2), free(seen);
    wgml_data_free(&ds);

    th_check(wgml_data_from_text(TOK, "hello", 5, L, 0.1, &ds, err, sizeof err) == WGML_ERR_ARG && strstr(err, "do not fill one row"),
             "text: too little text is an error naming the problem (%s)", err);
    th_check(wgml_data_from_text(TOK, text, len, 0, 0.1, &ds, err, sizeof err) == WGML_ERR_ARG, "text: seq_len 0 rejected");
    th_check(wgml_data_from_text(TOK, text, len, L, 1.0, &ds, err, sizeof err) == WGML_ERR_ARG, "text: eval fraction 1 rejected");
    free(ids);
    free(text);
}

/* Targets of row r, decoded; and the non-target text. */
static void split_row(const wgml_dataset *ds, int64_t r, char **tgt, char **other) {
    size_t w = (size_t)ds->seq_len + 1;
    int32_t *a = malloc(w * sizeof(int32_t)), *b = malloc(w * sizeof(int32_t));
    size_t na = 0, nb = 0;
    for (size_t j = 0; j < w; j++) {
        int32_t t = ds->tok[(size_t)r * w + j];
        if (ds->tgt[(size_t)r * w + j]) a[na++] = t;
        else b[nb++] = t;
    }
    *tgt = decode(a, na);
    *other = decode(b, nb);
    free(a), free(b);
}

static void test_jsonl(void) {
    const char *jl = "{\"prompt\": \"What is 2+2?\", \"response\": \"It is 4.\"}\n"
                     "\n"
                     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
                     " {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\": \"Bye\"},"
                     " {\"role\": \"assistant\", \"content\": \"Farewell \\u00e9.\"}]}\r\n"
                     "{\"prompt\": \"p3\", \"response\": \"r3\"}\n";
    wgml_dataset ds;
    char err[300];
    wgml_status s = wgml_data_from_jsonl(TOK, jl, strlen(jl), 96, 0.2, &ds, err, sizeof err);
    th_check(s == WGML_OK, "jsonl: three examples parse (%s)", s ? err : "");
    if (s) return;
    th_check(ds.n_examples == 3 && ds.n_train == 2 && ds.n_eval == 1, "jsonl: 3 examples, the last held out (%lld/%lld)",
             (long long)ds.n_train, (long long)ds.n_eval);
    char *t, *o;
    split_row(&ds, 0, &t, &o);
    th_check(!strcmp(t, "It is 4.<|im_end|>"), "jsonl: prompt/response: targets are the answer and <|im_end|> ('%s')", t);
    th_check(strstr(o, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n") != NULL && strstr(o, "<|im_start|>system\n"),
             "jsonl: prompt/response: the default system message, the user turn and the assistant header are not targets");
    free(t), free(o);
    split_row(&ds, 1, &t, &o);
    th_check(!strcmp(t, "Hello!<|im_end|>Farewell \xc3\xa9.<|im_end|>"), "jsonl: messages: both assistant turns are targets ('%s')", t);
    th_check(strstr(o, "<|im_start|>system\nBe brief.<|im_end|>") && strstr(o, "Bye") && !strstr(o, "Hello!"),
             "jsonl: messages: system and user turns are not targets ('%s')", o);
    free(t), free(o);
    /* the tokens of a row equal the tokens of the whole formatted conversation */
    wgml_chat_msg m[2] = {{"user", "What is 2+2?"}, {"assistant", "It is 4."}};
    char *fmt;
    size_t fl;
    int32_t *ids;
    size_t n;
    wgml_chat_apply(TOK, m, 2, 0, &fmt, &fl);
    wgml_tokenizer_encode(TOK, fmt, fl, WGML_TOK_SPECIAL, &ids, &n);
    int same = n <= 97;
    for (size_t j = 0; same && j < n; j++) same &= ds.tok[j] == ids[j];
    for (size_t j = n; same && j < 97; j++) same &= ds.tok[j] == ds.pad_id && ds.tgt[j] == 0;
    th_check(same, "jsonl: a row is the formatted conversation's tokens, then pad tokens that are not targets");
    int32_t in[96], lab[96];
    wgml_data_row(&ds, 0, in, lab);
    int shift = 1;
    for (int j = 0; j < 96; j++) shift &= lab[j] == (ds.tgt[j + 1] ? ds.tok[j + 1] : -100);
    th_check(shift, "jsonl: labels are shifted targets, -100 elsewhere");
    th_check(ds.train_labels == (int64_t)(strlen("It is 4.") > 0) * 0 + ds.train_labels && ds.train_labels > 0 && ds.eval_labels > 0,
             "jsonl: label counts (%lld train, %lld held out)", (long long)ds.train_labels, (long long)ds.eval_labels);
    free(fmt), free(ids);
    wgml_data_free(&ds);

    /* truncation */
    s = wgml_data_from_jsonl(TOK, jl, strlen(jl), 8, 0.2, &ds, err, sizeof err);
    th_check(s == WGML_OK && ds.n_truncated == 3, "jsonl: examples longer than seq_len + 1 are truncated and counted");
    wgml_data_free(&ds);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"a\",\"response\":\"b\",}\n", "line 2: column 30: expected a string key"},
        {"{\"prompt\":\"a\",\"response\":\"b\"}\n\n{\"prompt\":\"a\"}\n", "line 3: expected \"messages\""},
        {"[1,2]\n", "line 1: the line is not a JSON object"},
        {"{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}\n", "line 1: message 0 has role \"bot\""},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}\n", "line 1: no assistant message"},
        {"{\"messages\":[{\"role\":\"user\"}]}\n", "line 1: message 0 needs"},
        {"{\"messages\":[]}\n", "line 1: \"messages\" must be a non-empty array"},
        {"{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"a\",\"response\":\"b\"\n", "line 2: column 29: unexpected end"},
        {"{\"prompt\":\"a\",\"response\":\"b\"}\n", "none for training"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = wgml_data_from_jsonl(TOK, bad[i].text, strlen(bad[i].text), 32, 0.2, &ds, err, sizeof err);
        th_check(s != WGML_OK && strstr(err, bad[i].want) != NULL, "jsonl: bad input %zu rejected with '%s' (got '%s')", i, bad[i].want,
                 err);
    }
}

static void test_file(void) {
    char path[64];
    th_tmp_path(path, sizeof path, "wgml_test_data_%d.jsonl", (int)getpid());
    FILE *f = fopen(path, "w");
    th_check(f != NULL, "file: temp file %s", path);
    if (!f) return;
    fputs("  {\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"c\",\"response\":\"d\"}\n", f);
    fclose(f);
    wgml_dataset ds;
    char err[300];
    wgml_status s = wgml_data_from_file(TOK, path, 16, 0.5, &ds, err, sizeof err);
    th_check(s == WGML_OK && ds.n_examples == 2, "file: JSONL detected by its first byte (%s)", s ? err : "");
    wgml_data_free(&ds);
    remove(path);
    s = wgml_data_from_file(TOK, "/nonexistent/x.txt", 16, 0.1, &ds, err, sizeof err);
    th_check(s == WGML_ERR_IO && strstr(err, "/nonexistent/x.txt"), "file: a missing file names the path (%s)", err);
}

int main(int argc, char **argv) {
    th_init_args("test_data", argc, argv);
    clock_t c0 = clock();
    test_json();
    char mp[512], err[256] = "";
    snprintf(mp, sizeof mp, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", WGML_MODEL_DIR);
    wgml_gguf *g = NULL;
    wgml_tokenizer *tok = NULL;
    wgml_status s = wgml_gguf_open(mp, &g, err, sizeof err);
    if (!s) s = wgml_tokenizer_from_gguf(g, &tok, err, sizeof err);
    th_check(s == WGML_OK, "load the tokenizer (run scripts/setup.sh for the model): %s", err);
    if (!s) {
        TOK = tok;
        test_text();
        test_jsonl();
        test_file();
    }
    wgml_tokenizer_free(tok);
    wgml_gguf_close(g);
    printf("test_data: %.2f s CPU\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    return th_done();
}
