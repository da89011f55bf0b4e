/* Training data: tokenisation, packing, held-out split, shuffled order (public API in include/wgml-train.h, "training data"). */
#define _POSIX_C_SOURCE 200809L
#include "wgml-model.h"
#include "wgml-train.h"

#include "io/errbuf.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "tensor/splitmix.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wgml_data_free(wgml_dataset *ds) {
    if (!ds) return;
    free(ds->tok);
    free(ds->tgt);
    free(ds->perm);
    memset(ds, 0, sizeof *ds);
}

static int32_t pad_of(const wgml_tokenizer *tok) {
    int32_t e = wgml_tokenizer_eos(tok);
    return e >= 0 ? e : 0;
}

static int64_t count_labels(const wgml_dataset *ds, int64_t r0, int64_t r1) {
    int64_t n = 0, w = ds->seq_len + 1;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t j = 1; j < w; j++) n += ds->tgt[r * w + j];
    return n;
}

/* The readers' common start: ds cleared, then seq_len, the eval fraction and the pointers
 * checked, in that order. */
static wgml_status check_args(const wgml_tokenizer *tok, const char *text, size_t len, int seq_len, double eval_fraction,
                              wgml_dataset *ds, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    if (seq_len < 1 || seq_len > (1 << 20)) return errbuf_set(err, errlen, WGML_ERR_ARG, "data: seq_len %d out of range", seq_len);
    if (!(eval_fraction >= 0 && eval_fraction < 1)) return errbuf_set(err, errlen, WGML_ERR_ARG, "data: eval fraction %g is not in [0, 1)", eval_fraction);
    if (!tok || (!text && len)) return errbuf_set(err, errlen, WGML_ERR_ARG, "data: NULL argument");
    return WGML_OK;
}

wgml_status wgml_data_from_text(const wgml_tokenizer *tok, const char *text, size_t len, int seq_len, double eval_fraction,
                                wgml_dataset *ds, char *err, size_t errlen) {
    wgml_status s = check_args(tok, text, len, seq_len, eval_fraction, ds, err, errlen);
    if (s) return s;
    int32_t *ids = NULL;
    size_t n = 0;
    s = wgml_tokenizer_encode(tok, text, len, 0, &ids, &n);
    if (s) return errbuf_set(err, errlen, s, "data: %s", wgml_tokenizer_error(tok));
    size_t n_eval_tok = (size_t)((double)n * eval_fraction);
    size_t n_train_tok = n - n_eval_tok;
    int64_t L = seq_len;
    int64_t rt = n_train_tok > (size_t)L ? (int64_t)(n_train_tok - 1) / L : 0;
    int64_t re = n_eval_tok > (size_t)L ? (int64_t)(n_eval_tok - 1) / L : 0;
    if (rt < 1) {
        free(ids);
        return errbuf_set(err, errlen, WGML_ERR_ARG, "data: %zu training tokens do not fill one row of %d + 1 tokens", n_train_tok, seq_len);
    }
    if (eval_fraction > 0 && re < 1) {
        free(ids);
        return errbuf_set(err, errlen, WGML_ERR_ARG,
                    "data: the held-out %zu tokens (eval fraction %g) do not fill one row of %d + 1 tokens; use more text, a "
                    "larger eval fraction or a shorter seq-len", n_eval_tok, eval_fraction, seq_len);
    }
    size_t w = (size_t)L + 1, rows = (size_t)(rt + re);
    ds->tok = malloc(rows * w * sizeof(int32_t));
    ds->tgt = malloc(rows * w);
    if (!ds->tok || !ds->tgt) {
        free(ids);
        wgml_data_free(ds);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "data: out of memory");
    }
    for (int64_t r = 0; r < rt; r++) memcpy(ds->tok + (size_t)r * w, ids + (size_t)r * (size_t)L, w * sizeof(int32_t));
    for (int64_t r = 0; r < re; r++)
        memcpy(ds->tok + (size_t)(rt + r) * w, ids + n_train_tok + (size_t)r * (size_t)L, w * sizeof(int32_t));
    memset(ds->tgt, 1, rows * w);
    free(ids);
    ds->seq_len = seq_len;
    ds->n_train = rt;
    ds->n_eval = re;
    ds->pad_id = pad_of(tok);
    ds->train_labels = rt * L;
    ds->eval_labels = re * L;
    ds->perm_epoch = -1;
    return WGML_OK;
}

/* ---- JSONL ---- */

typedef struct tokbuf {
    int32_t *id;
    uint8_t *tg;
    size_t n, cap;
} tokbuf;

static int tb_add(tokbuf *b, const int32_t *ids, size_t n, int target) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        int32_t *i2 = realloc(b->id, c * sizeof(int32_t));
        if (!i2) return 1;
        b->id = i2;
        uint8_t *t2 = realloc(b->tg, c);
        if (!t2) return 1;
        b->tg = t2;
        b->cap = c;
    }
    memcpy(b->id + b->n, ids, n * sizeof(int32_t));
    memset(b->tg + b->n, target ? 1 : 0, n);
    b->n += n;
    return 0;
}

/* Tokenises text[a..b) (special tokens matched) and appends it with the target flag. */
static wgml_status add_piece(const wgml_tokenizer *tok, tokbuf *b, const char *text, size_t a, size_t e, int target, char *err,
                             size_t errlen) {
    if (e <= a) return WGML_OK;
    int32_t *ids;
    size_t n;
    wgml_status s = wgml_tokenizer_encode(tok, text + a, e - a, WGML_TOK_SPECIAL, &ids, &n);
    if (s) return errbuf_set(err, errlen, s, "%s", wgml_tokenizer_error(tok));
    int bad = tb_add(b, ids, n, target);
    free(ids);
    return bad ? errbuf_set(err, errlen, WGML_ERR_OOM, "out of memory") : WGML_OK;
}

/* One example's tokens and targets: each prefix of the conversation is formatted with the
 * template; the text an assistant message adds is split into its header (the generation
 * prompt, not a target), its content through <|im_end|> (targets) and what follows. */
static wgml_status encode_chat(const wgml_tokenizer *tok, const wgml_chat_msg *msgs, size_t n, tokbuf *b, char *err, size_t errlen) {
    size_t done = 0; /* bytes of the formatted conversation already tokenised */
    char *full = NULL;
    wgml_status s = WGML_OK;
    for (size_t i = 0; i < n && !s; i++) {
        char *hdr = NULL, *cur = NULL;
        size_t hl = 0, cl = 0;
        s = wgml_chat_apply(tok, msgs, i, 1, &hdr, &hl);
        if (!s) s = wgml_chat_apply(tok, msgs, i + 1, 0, &cur, &cl);
        if (s) {
            errbuf_set(err, errlen, s, "%s", wgml_tokenizer_error(tok));
        } else if (hl < done || cl < hl || memcmp(cur, hdr, done)) {
            s = errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED, "the chat template does not format a conversation as a prefix of its continuation");
        } else if (!strcmp(msgs[i].role, "assistant")) {
            /* the header is the generation prompt; the content runs to the end marker */
            const char *end_mark = "<|im_end|>";
            size_t el = strlen(end_mark);
            const char *m = NULL;
            if (memcmp(cur, hdr, hl) == 0) {
                for (size_t p = cl >= el ? cl - el : 0;; p--) {
                    if (p >= hl && !memcmp(cur + p, end_mark, el)) {
                        m = cur + p;
                        break;
                    }
                    if (p == 0) break;
                }
            }
            if (!m) {
                s = errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED, "cannot find the assistant content in the formatted conversation");
            } else {
                size_t content_end = (size_t)(m - cur) + el;
                s = add_piece(tok, b, cur, done, hl, 0, err, errlen);
                if (!s) s = add_piece(tok, b, cur, hl, content_end, 1, err, errlen);
                if (!s) s = add_piece(tok, b, cur, content_end, cl, 0, err, errlen);
            }
        } else {
            s = add_piece(tok, b, cur, done, cl, 0, err, errlen);
        }
        done = cl;
        free(hdr);
        free(full);
        full = cur;
    }
    free(full);
    return s;
}

static const char *str_member(const json_value *o, const char *key) {
    const json_value *v = json_get(o, key);
    return v && v->kind == JSON_STRING ? v->str : NULL;
}

/* One line's example, or an error message (without the line number). */
static wgml_status parse_example(const wgml_tokenizer *tok, const char *line, size_t len, tokbuf *b, char *err, size_t errlen) {
    json_value v;
    char jerr[200];
    if (json_parse(line, len, &v, jerr, sizeof jerr)) return errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s", jerr);
    wgml_status s = WGML_OK;
    wgml_chat_msg *msgs = NULL;
    size_t n = 0;
    const json_value *mv = json_get(&v, "messages");
    if (v.kind != JSON_OBJECT) {
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "the line is not a JSON object");
    } else if (mv) {
        if (mv->kind != JSON_ARRAY || mv->n == 0) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "\"messages\" must be a non-empty array");
            goto out;
        }
        msgs = calloc(mv->n, sizeof *msgs);
        if (!msgs) {
            s = errbuf_set(err, errlen, WGML_ERR_OOM, "out of memory");
            goto out;
        }
        int any_assistant = 0;
        for (size_t i = 0; i < mv->n; i++) {
            const char *role = str_member(&mv->items[i], "role"), *content = str_member(&mv->items[i], "content");
            if (!role || !content) {
                s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "message %zu needs string \"role\" and \"content\"", i);
                goto out;
            }
            if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")) {
                s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "message %zu has role \"%.40s\" (system, user or assistant)", i, role);
                goto out;
            }
            any_assistant |= !strcmp(role, "assistant");
            msgs[n++] = (wgml_chat_msg){role, content};
        }
        if (!any_assistant) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "no assistant message (nothing to learn)");
            goto out;
        }
    } else {
        const char *p = str_member(&v, "prompt"), *r = str_member(&v, "response");
        if (!p || !r) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "expected \"messages\" or string \"prompt\" and \"response\"");
            goto out;
        }
        msgs = calloc(2, sizeof *msgs);
        if (!msgs) {
            s = errbuf_set(err, errlen, WGML_ERR_OOM, "out of memory");
            goto out;
        }
        msgs[0] = (wgml_chat_msg){"user", p};
        msgs[1] = (wgml_chat_msg){"assistant", r};
        n = 2;
    }
    if (!s) s = encode_chat(tok, msgs, n, b, err, errlen);
out:
    free(msgs);
    json_free(&v);
    return s;
}

wgml_status wgml_data_from_jsonl(const wgml_tokenizer *tok, const char *text, size_t len, int seq_len, double eval_fraction,
                                 wgml_dataset *ds, char *err, size_t errlen) {
    wgml_status s = check_args(tok, text, len, seq_len, eval_fraction, ds, err, errlen);
    if (s) return s;
    size_t w = (size_t)seq_len + 1, cap = 0;
    int32_t pad = pad_of(tok);
    tokbuf b = {0};
    size_t line_no = 0;
    for (size_t p = 0; p < len;) {
        const char *nl = memchr(text + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - text) : len;
        line_no++;
        size_t a = p;
        p = nl ? e + 1 : len;
        size_t q = a;
        while (q < e && (text[q] == ' ' || text[q] == '\t' || text[q] == '\r')) q++;
        if (q == e) continue; /* blank line */
        b.n = 0;
        char e2[300];
        s = parse_example(tok, text + a, e - a, &b, e2, sizeof e2);
        if (s) {
            errbuf_set(err, errlen, s, "line %zu: %s", line_no, e2);
            goto fail;
        }
        if ((size_t)ds->n_examples + 1 > cap) {
            cap = cap ? cap * 2 : 64;
            int32_t *t2 = realloc(ds->tok, cap * w * sizeof(int32_t));
            if (!t2) goto oom;
            ds->tok = t2;
            uint8_t *g2 = realloc(ds->tgt, cap * w);
            if (!g2) goto oom;
            ds->tgt = g2;
        }
        size_t r = (size_t)ds->n_examples++, k = b.n < w ? b.n : w;
        if (b.n > w) ds->n_truncated++;
        memcpy(ds->tok + r * w, b.id, k * sizeof(int32_t));
        memcpy(ds->tgt + r * w, b.tg, k);
        for (size_t j = k; j < w; j++) ds->tok[r * w + j] = pad, ds->tgt[r * w + j] = 0;
    }
    free(b.id);
    free(b.tg);
    b = (tokbuf){0};
    int64_t ne = (int64_t)((double)ds->n_examples * eval_fraction + 0.999999);
    if (eval_fraction > 0 && ne < 1) ne = 1;
    if (ds->n_examples - ne < 1) {
        s = errbuf_set(err, errlen, WGML_ERR_ARG, "data: %lld examples leave none for training after holding out %lld",
                 (long long)ds->n_examples, (long long)ne);
        goto fail;
    }
    ds->seq_len = seq_len;
    ds->n_train = ds->n_examples - ne;
    ds->n_eval = ne;
    ds->pad_id = pad;
    ds->train_labels = count_labels(ds, 0, ds->n_train);
    ds->eval_labels = count_labels(ds, ds->n_train, ds->n_train + ds->n_eval);
    ds->perm_epoch = -1;
    return WGML_OK;
oom:
    s = errbuf_set(err, errlen, WGML_ERR_OOM, "data: out of memory");
fail:
    free(b.id);
    free(b.tg);
    wgml_data_free(ds);
    return s;
}

wgml_status wgml_data_from_file(const wgml_tokenizer *tok, const char *path, int seq_len, double eval_fraction, wgml_dataset *ds,
                                char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    uint8_t *buf;
    size_t len;
    char e2[400];
    wgml_status s = file_read_all(path, &buf, &len, e2, sizeof e2);
    if (s) return errbuf_set(err, errlen, s, "data: %s", e2);
    size_t pl = strlen(path), i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) i++;
    int jsonl = (pl >= 6 && !strcmp(path + pl - 6, ".jsonl")) || (i < len && buf[i] == '{');
    s = jsonl ? wgml_data_from_jsonl(tok, (const char *)buf, len, seq_len, eval_fraction, ds, e2, sizeof e2)
              : wgml_data_from_text(tok, (const char *)buf, len, seq_len, eval_fraction, ds, e2, sizeof e2);
    free(buf);
    if (s) errbuf_set(err, errlen, s, "%s: %s", path, e2);
    return s;
}

void wgml_data_row(const wgml_dataset *ds, int64_t row, int32_t *inputs, int32_t *labels) {
    size_t w = (size_t)ds->seq_len + 1;
    const int32_t *t = ds->tok + (size_t)row * w;
    const uint8_t *g = ds->tgt + (size_t)row * w;
    for (int j = 0; j < ds->seq_len; j++) {
        inputs[j] = t[j];
        labels[j] = g[j + 1] ? t[j + 1] : -100;
    }
}

int64_t wgml_data_train_row(wgml_dataset *ds, uint64_t seed, int64_t pos) {
    int64_t n = ds->n_train, epoch = pos / n;
    if (!ds->perm) {
        ds->perm = malloc((size_t)n * sizeof(int64_t));
        if (!ds->perm) return pos % n; /* out of memory: unshuffled order */
        ds->perm_epoch = -1;
    }
    if (ds->perm_epoch != epoch || ds->perm_seed != seed) {
        uint64_t st = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(epoch + 1));
        for (int64_t i = 0; i < n; i++) ds->perm[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(splitmix64(&st) % (uint64_t)(i + 1));
            int64_t t = ds->perm[i];
            ds->perm[i] = ds->perm[j];
            ds->perm[j] = t;
        }
        ds->perm_epoch = epoch;
        ds->perm_seed = seed;
    }
    return ds->perm[pos % n];
}

int64_t wgml_data_train_batch(wgml_dataset *ds, uint64_t seed, int64_t pos, int batch, int32_t *inputs, int32_t *labels) {
    for (int b = 0; b < batch; b++) {
        int64_t r = wgml_data_train_row(ds, seed, pos + b);
        wgml_data_row(ds, r, inputs + (size_t)b * (size_t)ds->seq_len, labels + (size_t)b * (size_t)ds->seq_len);
    }
    return pos + batch;
}

void wgml_data_eval_batch(const wgml_dataset *ds, int64_t first, int batch, int32_t *inputs, int32_t *labels) {
    for (int b = 0; b < batch; b++) {
        int32_t *in = inputs + (size_t)b * (size_t)ds->seq_len, *lab = labels + (size_t)b * (size_t)ds->seq_len;
        if (first + b < ds->n_eval) {
            wgml_data_row(ds, ds->n_train + first + b, in, lab);
        } else {
            for (int j = 0; j < ds->seq_len; j++) in[j] = ds->pad_id, lab[j] = -100;
        }
    }
}
