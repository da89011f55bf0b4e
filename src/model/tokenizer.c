/* The tokenizer built from GGUF metadata: what its two kinds share. tokenizer.ggml.model picks
 * the kind: byte-level BPE ("gpt2", tokenizer_bpe.c) or SentencePiece's BPE ("llama": Gemma,
 * Llama 2, Mistral, ...; tokenizer_spm.c). Here: construction and validation of the metadata
 * (model, tokens, token types, special token ids and flags), the vocabulary's hash index, the
 * special-token trie (matched leftmost then longest first, with WGML_TOK_SPECIAL), the work area
 * and pair queue both kinds merge with, and the public entry points (encode, which cuts the
 * text at special tokens and hands each run between them to its kind; decode; the accessors).
 * The chat formats are in tokenizer_chat.c. */
#include "model/tokenizer_internal.h"

#include "io/errbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wgml_status tok_error(const wgml_tokenizer *t, wgml_status s, const char *fmt, ...) {
    wgml_tokenizer *m = (wgml_tokenizer *)t; /* the error buffer is the only mutable state */
    va_list ap;
    va_start(ap, fmt);
    errbuf_vset(m->err, sizeof m->err, s, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- Unicode ------------------------------------------------------------------------------ */

int tok_is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

/* Decodes one UTF-8 sequence at p (n bytes left); an invalid byte is one "character" of its
 * own (code point 0xFFFFFFFF, class other). Returns the length in bytes. */
int tok_utf8_next(const uint8_t *p, size_t n, uint32_t *cp) {
    uint8_t b = p[0];
    if (b < 0x80) { *cp = b; return 1; }
    int len;
    uint32_t c, min;
    if ((b & 0xE0) == 0xC0) { len = 2; c = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { len = 3; c = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { len = 4; c = b & 0x07; min = 0x10000; }
    else { *cp = 0xFFFFFFFFu; return 1; }
    if ((size_t)len > n) { *cp = 0xFFFFFFFFu; return 1; }
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) { *cp = 0xFFFFFFFFu; return 1; }
        c = c << 6 | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) { *cp = 0xFFFFFFFFu; return 1; }
    *cp = c;
    return len;
}

/* ---- hash tables -------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

uint64_t tok_mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

int32_t tok_vocab_find(const wgml_tokenizer *t, const vocab_index *vi, const char *s, size_t n) {
    uint64_t full = hash_bytes(s, n), h = full & (vi->cap - 1);
    uint32_t up = (uint32_t)(full >> 32);
    while (vi->slot[h] >= 0) {
        int32_t id = vi->slot[h];
        if (vi->hash[h] == up && t->tok_len[id] == n && !memcmp(t->tok[id], s, n)) return id;
        h = (h + 1) & (vi->cap - 1);
    }
    return -1;
}

static int type_in(const wgml_tokenizer *t, int32_t id, int mask) {
    return mask < 0 || (t->type[id] >= 0 && t->type[id] < 31 && (mask >> t->type[id] & 1));
}

/* token text -> id over the tokens whose type is in mask (-1: all); of tokens with the same
 * text the later wins when later_wins (as in a dictionary built in order), else the first.
 * Returns 0 when out of memory. */
int tok_index_build(const wgml_tokenizer *t, vocab_index *vi, int mask, int later_wins) {
    int32_t nv = t->n_vocab;
    *vi = (vocab_index){.slot = NULL, .hash = NULL, .cap = 16};
    while (vi->cap < (uint64_t)nv * 2) vi->cap *= 2;
    vi->slot = malloc(vi->cap * sizeof *vi->slot);
    vi->hash = malloc(vi->cap * sizeof *vi->hash);
    if (!vi->slot || !vi->hash) {
        free(vi->slot);
        free(vi->hash);
        *vi = (vocab_index){.slot = NULL, .hash = NULL, .cap = 0};
        return 0;
    }
    for (uint64_t i = 0; i < vi->cap; i++) vi->slot[i] = -1;
    for (int32_t i = 0; i < nv; i++) {
        if (!type_in(t, i, mask)) continue;
        uint64_t full = hash_bytes(t->tok[i], t->tok_len[i]), h = full & (vi->cap - 1);
        while (vi->slot[h] >= 0 && !(t->tok_len[vi->slot[h]] == t->tok_len[i] &&
                                     !memcmp(t->tok[vi->slot[h]], t->tok[i], t->tok_len[i])))
            h = (h + 1) & (vi->cap - 1);
        if (vi->slot[h] < 0 || later_wins) {
            vi->slot[h] = i;
            vi->hash[h] = (uint32_t)(full >> 32);
        }
    }
    return 1;
}

/* ---- construction ------------------------------------------------------------------------- */

void wgml_tokenizer_free(wgml_tokenizer *t) {
    if (!t) return;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->tok) free(t->tok[i]);
        if (t->dec) free(t->dec[i]);
    }
    free(t->tok);
    free(t->tok_len);
    free(t->dec);
    free(t->dec_len);
    free(t->type);
    free(t->merges);
    free(t->trie_term);
    free(t->trie_edges);
    free(t->score);
    free(t->pieces.slot);
    free(t->pieces.hash);
    free(t->chat_template);
    free(t);
}

wgml_status tok_oom(char *err, size_t errlen) {
    return errbuf_set(err, errlen, WGML_ERR_OOM, "tokenizer: out of memory");
}

/* tokenizer.ggml.model must be "gpt2" or "llama"; for "gpt2", tokenizer.ggml.pre (optional)
 * picks the pre-tokenizer (bpe_read_pre; SentencePiece has none: its name is only recorded). */
static wgml_status read_model_and_pre(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    const char *s;
    size_t n;
    wgml_status st;
    if ((st = wgml_gguf_get_string(f, "tokenizer.ggml.model", &s, &n))) {
        return errbuf_set(err, errlen, st, "tokenizer: %s", wgml_gguf_error(f));
    }
    t->spm = n == 5 && !memcmp(s, "llama", 5);
    if (!t->spm && (n != 4 || memcmp(s, "gpt2", 4))) {
        return errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED,
                          "tokenizer: tokenizer.ggml.model '%.*s' is not supported (byte-level BPE 'gpt2' and "
                          "SentencePiece 'llama' are)",
                          (int)(n > 64 ? 64 : n), s);
    }
    snprintf(t->model, sizeof t->model, "%s", t->spm ? "llama" : "gpt2");
    snprintf(t->pre, sizeof t->pre, "default");
    if (!t->spm) return bpe_read_pre(t, f, err, errlen);
    if (wgml_gguf_get_string(f, "tokenizer.ggml.pre", &s, &n) == WGML_OK)
        snprintf(t->pre, sizeof t->pre, "%.*s", (int)(n > 63 ? 63 : n), s);
    return WGML_OK;
}

/* A token's decoded bytes into dec (room for n + 1): every character mapped back through inv,
 * or the stored bytes when one cannot be. Returns the decoded length. */
static size_t decode_token_text(const int16_t inv[512], const char *s, size_t n, char *dec) {
    size_t p = 0, o = 0;
    int ok = 1;
    while (p < n) {
        uint32_t cp;
        p += (size_t)tok_utf8_next((const uint8_t *)s + p, n - p, &cp);
        if (cp >= 512 || inv[cp] < 0) { ok = 0; break; }
        dec[o++] = (char)inv[cp];
    }
    if (!ok) {
        memcpy(dec, s, n);
        o = n;
    }
    dec[o] = 0;
    return o;
}

/* tokenizer.ggml.tokens: every token's stored text and decoded bytes (type normal for now);
 * toks is left holding the array for the checks that follow. */
static wgml_status read_vocab(wgml_tokenizer *t, const wgml_gguf *f, const uint32_t bmap[256], wgml_gguf_value *toks,
                              char *err, size_t errlen) {
    const char *s;
    size_t n;
    wgml_status st;
    if ((st = wgml_gguf_get_array(f, "tokenizer.ggml.tokens", toks))) {
        return errbuf_set(err, errlen, st, "tokenizer: %s", wgml_gguf_error(f));
    }
    if (toks->elem_type != WGML_GGUF_STRING || toks->count == 0 || toks->count > INT32_MAX) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: tokenizer.ggml.tokens must be a non-empty array of strings (got %llu of %s)",
                          (unsigned long long)toks->count, wgml_gguf_type_name(toks->elem_type));
    }
    int32_t nv = (int32_t)toks->count;
    t->tok = calloc((size_t)nv, sizeof *t->tok);
    t->tok_len = calloc((size_t)nv, sizeof *t->tok_len);
    t->dec = calloc((size_t)nv, sizeof *t->dec);
    t->dec_len = calloc((size_t)nv, sizeof *t->dec_len);
    t->type = calloc((size_t)nv, sizeof *t->type);
    if (!t->tok || !t->tok_len || !t->dec || !t->dec_len || !t->type) return tok_oom(err, errlen);
    t->n_vocab = nv;

    int16_t inv[512]; /* character -> byte, -1 */
    for (int i = 0; i < 512; i++) inv[i] = -1;
    for (int b = 0; b < 256; b++) inv[bmap[b]] = (int16_t)b;

    for (int32_t i = 0; i < nv; i++) {
        wgml_gguf_value e;
        wgml_gguf_array_elem(f, *toks, (uint64_t)i, &e);
        wgml_gguf_value_string(f, e, &s, &n);
        if (n > UINT32_MAX / 2) {
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: token %d is too long", i);
        }
        t->tok[i] = malloc(n + 1);
        t->dec[i] = malloc(n + 1);
        if (!t->tok[i] || !t->dec[i]) return tok_oom(err, errlen);
        memcpy(t->tok[i], s, n);
        t->tok[i][n] = 0;
        t->tok_len[i] = (uint32_t)n;
        t->dec_len[i] = (uint32_t)decode_token_text(inv, s, n, t->dec[i]);
        t->type[i] = TT_NORMAL;
    }
    return WGML_OK;
}

/* tokenizer.ggml.token_type (optional): one type per token. */
static wgml_status read_token_types(wgml_tokenizer *t, const wgml_gguf *f, wgml_gguf_value toks, char *err,
                                    size_t errlen) {
    wgml_gguf_value types;
    if (!wgml_gguf_find(f, "tokenizer.ggml.token_type", &types)) return WGML_OK;
    if (types.type != WGML_GGUF_ARRAY || types.count != toks.count ||
        (types.elem_type != WGML_GGUF_I32 && types.elem_type != WGML_GGUF_U32)) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: tokenizer.ggml.token_type must be an i32 array of %d elements", t->n_vocab);
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        wgml_gguf_value e;
        int64_t v;
        wgml_gguf_array_elem(f, types, (uint64_t)i, &e);
        wgml_gguf_value_i64(f, e, &v);
        t->type[i] = (int32_t)v;
    }
    return WGML_OK;
}

static int32_t trie_child(const wgml_tokenizer *t, int32_t node, uint8_t byte) {
    uint64_t key = ((uint64_t)node << 8 | byte) + 1;
    for (uint64_t h = tok_mix64(key) & (t->trie_cap - 1); t->trie_edges[h].key; h = (h + 1) & (t->trie_cap - 1))
        if (t->trie_edges[h].key == key) return t->trie_edges[h].child;
    return -1;
}

/* The special tokens (control, user-defined and unknown types, non-empty) as a byte trie, so
 * that matching at a position costs the length of the match whatever the number of special
 * tokens (Gemma has thousands). Of tokens with the same text the lowest id is kept. Returns 0
 * when out of memory. */
static int collect_specials(wgml_tokenizer *t) {
    const int mask = TT_BIT(TT_CONTROL) | TT_BIT(TT_USER) | TT_BIT(TT_UNKNOWN);
    uint64_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (type_in(t, i, mask)) total += t->tok_len[i];
    if (total >= INT32_MAX) return 0; /* node ids are int32 */
    t->trie_cap = 16;
    while (t->trie_cap < total * 2) t->trie_cap *= 2;
    t->trie_edges = calloc(t->trie_cap, sizeof *t->trie_edges);
    t->trie_term = malloc((size_t)(total + 1) * sizeof *t->trie_term);
    if (!t->trie_edges || !t->trie_term) return 0;
    t->trie_term[0] = -1;
    t->trie_nodes = 1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (!type_in(t, i, mask) || t->tok_len[i] == 0) continue;
        int32_t node = 0;
        for (uint32_t k = 0; k < t->tok_len[i]; k++) {
            uint64_t key = ((uint64_t)node << 8 | (uint8_t)t->tok[i][k]) + 1;
            uint64_t h = tok_mix64(key) & (t->trie_cap - 1);
            while (t->trie_edges[h].key && t->trie_edges[h].key != key) h = (h + 1) & (t->trie_cap - 1);
            if (!t->trie_edges[h].key) {
                t->trie_edges[h] = (trie_slot){.key = key, .child = t->trie_nodes};
                t->trie_term[t->trie_nodes++] = -1;
            }
            node = t->trie_edges[h].child;
        }
        if (t->trie_term[node] < 0) {
            t->trie_term[node] = i;
            t->n_special++;
        }
        t->special_first[(uint8_t)t->tok[i][0]] = 1;
    }
    return 1;
}

/* An optional token id (*id = -1 when the key is absent); one that is not an integer in the
 * vocabulary's range is an error. */
wgml_status tok_read_id(const wgml_tokenizer *t, const wgml_gguf *f, const char *key, int32_t *id, char *err,
                           size_t errlen) {
    wgml_gguf_value v;
    int64_t x = -1;
    *id = -1;
    if (!wgml_gguf_find(f, key, &v)) return WGML_OK;
    if (wgml_gguf_value_i64(f, v, &x) != WGML_OK || x < 0 || x >= t->n_vocab) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: %s (%s %lld) is not a token id of the vocabulary (%d tokens)",
                          key, wgml_gguf_type_name(v.type), (long long)x, t->n_vocab);
    }
    *id = (int32_t)x;
    return WGML_OK;
}

/* An optional bool (def when absent); a value of another type is an error. */
wgml_status tok_read_flag(const wgml_gguf *f, const char *key, int def, int *out, char *err, size_t errlen) {
    wgml_gguf_value v;
    *out = def;
    if (!wgml_gguf_find(f, key, &v)) return WGML_OK;
    if (v.type != WGML_GGUF_BOOL || wgml_gguf_get_bool(f, key, out) != WGML_OK) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: %s must be a bool (got %s)", key,
                          wgml_gguf_type_name(v.type));
    }
    return WGML_OK;
}

/* The tokenizer from GGUF metadata, in the order the checks have always run: model and
 * pre-tokenizer, tokens, token types, merges (byte-level) or scores (SentencePiece), special
 * token ids and flags, special tokens, chat template. */
static wgml_status build(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    wgml_status st;
    if ((st = read_model_and_pre(t, f, err, errlen))) return st;

    uint32_t bmap[256];
    bpe_byte_map(bmap);
    wgml_gguf_value toks;
    if ((st = read_vocab(t, f, bmap, &toks, err, errlen))) return st;
    if ((st = read_token_types(t, f, toks, err, errlen))) return st;

    if ((st = t->spm ? spm_setup(t, f, err, errlen) : bpe_setup(t, f, bmap, err, errlen))) return st;

    if ((st = tok_read_id(t, f, "tokenizer.ggml.bos_token_id", &t->bos, err, errlen)) ||
        (st = tok_read_id(t, f, "tokenizer.ggml.eos_token_id", &t->eos, err, errlen)) ||
        (st = tok_read_id(t, f, "tokenizer.ggml.padding_token_id", &t->pad, err, errlen)) ||
        (st = tok_read_flag(f, "tokenizer.ggml.add_bos_token", t->spm, &t->add_bos, err, errlen)) ||
        (st = tok_read_flag(f, "tokenizer.ggml.add_eos_token", 0, &t->add_eos, err, errlen)))
        return st;
    if (!t->spm && (st = tok_read_id(t, f, "tokenizer.ggml.unknown_token_id", &t->unk, err, errlen))) return st;
    if (t->add_bos && t->bos < 0)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
    if (t->add_eos && t->eos < 0)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: tokenizer.ggml.add_eos_token is true but there is no eos_token_id");

    if (!collect_specials(t)) return tok_oom(err, errlen);
    return chat_read_template(t, f, err, errlen);
}

wgml_status wgml_tokenizer_from_gguf(const wgml_gguf *f, wgml_tokenizer **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return WGML_ERR_ARG;
    *out = NULL;
    if (!f) { return errbuf_set(err, errlen, WGML_ERR_ARG, "tokenizer: no GGUF file given"); }
    wgml_tokenizer *t = calloc(1, sizeof *t);
    if (!t) { return errbuf_set(err, errlen, WGML_ERR_OOM, "tokenizer: out of memory"); }
    wgml_status s = build(t, f, err, errlen);
    if (s) {
        wgml_tokenizer_free(t);
        return s;
    }
    *out = t;
    return WGML_OK;
}

/* ---- encoding ----------------------------------------------------------------------------- */

int tok_push(ids_buf *b, int32_t id) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        int32_t *p = realloc(b->v, cap * sizeof *p);
        if (!p) return 0;
        b->v = p;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return 1;
}

int tok_grow(void **p, size_t elem, size_t n) {
    void *q = realloc(*p, elem * n);
    if (!q) return 0;
    *p = q;
    return 1;
}

static int heap_less(heap_item a, heap_item b) { return a.key < b.key || (a.key == b.key && a.pos < b.pos); }

void tok_heap_push(work *w, heap_item it) {
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(it, w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = it;
}

heap_item tok_heap_pop(work *w) {
    heap_item top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(w->heap[c + 1], w->heap[c])) c++;
        if (!heap_less(w->heap[c], last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* The longest special token of a type in mask whose text starts at text[p], or -1. */
int32_t tok_match_special(const wgml_tokenizer *t, const uint8_t *text, size_t p, size_t len, int mask) {
    if (!t->special_first[text[p]]) return -1;
    int32_t node = 0, best = -1;
    for (size_t i = p; i < len; i++) {
        node = trie_child(t, node, text[i]);
        if (node < 0) break;
        int32_t id = t->trie_term[node];
        if (id >= 0 && type_in(t, id, mask)) best = id;
    }
    return best;
}

/* Bytes [a, b) of text, a run without special tokens, through the tokenizer's kind (the
 * SentencePiece dummy prefix goes only in front of the text's first byte). Returns 0 when out of
 * memory. */
static int encode_run(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t a, size_t b, ids_buf *out) {
    return t->spm ? spm_segment(t, w, text, a, b, t->add_space_prefix && a == 0, out)
                  : bpe_segment(t, w, text, a, b, out);
}

wgml_status wgml_tokenizer_encode(const wgml_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                                  size_t *n_ids) {
    if (!t || !ids || !n_ids || (!text && len))
        return t ? tok_error(t, WGML_ERR_ARG, "tokenizer encode: NULL argument") : WGML_ERR_ARG;
    *ids = NULL;
    *n_ids = 0;
    if (len > UINT32_MAX - 1)
        return tok_error(t, WGML_ERR_ARG, "tokenizer encode: text of %zu bytes is too long (4 GiB max)", len);
    /* SentencePiece's normalized text (a space becomes 3 bytes) is indexed with 32 bits too */
    if (t->spm && len > UINT32_MAX / 3 - 2)
        return tok_error(t, WGML_ERR_ARG, "tokenizer encode: text of %zu bytes is too long (1.4 GiB max)", len);
    if ((flags & WGML_TOK_ADD_BOS) && t->bos < 0)
        return tok_error(t, WGML_ERR_ARG, "tokenizer encode: the model has no BOS token");
    if ((flags & WGML_TOK_ADD_EOS) && t->eos < 0)
        return tok_error(t, WGML_ERR_ARG, "tokenizer encode: the model has no EOS token");
    ids_buf out = {0};
    work w = {0};
    int ok = 1;
    const uint8_t *u = (const uint8_t *)text;
    if (flags & WGML_TOK_ADD_BOS) ok = tok_push(&out, t->bos);
    size_t seg = 0;
    /* byte-level: control and user-defined text; SentencePiece: control and unknown (its
     * user-defined pieces are matched inside each run, with or without this flag) */
    int mask = t->spm ? TT_BIT(TT_CONTROL) | TT_BIT(TT_UNKNOWN) : TT_BIT(TT_CONTROL) | TT_BIT(TT_USER);
    if (flags & WGML_TOK_SPECIAL) {
        for (size_t p = 0; ok && p < len;) {
            int32_t id = tok_match_special(t, u, p, len, mask);
            if (id < 0) {
                p++;
                continue;
            }
            if (seg < p) ok = encode_run(t, &w, u, seg, p, &out);
            ok = ok && tok_push(&out, id);
            p += t->tok_len[id];
            seg = p;
        }
    }
    if (ok && seg < len) ok = encode_run(t, &w, u, seg, len, &out);
    if (ok && (flags & WGML_TOK_ADD_EOS)) ok = tok_push(&out, t->eos);
    free(w.cp); free(w.off); free(w.cls); free(w.sym); free(w.prev); free(w.next); free(w.heap);
    free(w.norm); free(w.s_start); free(w.s_len); free(w.s_fix); free(w.rev); free(w.stack);
    if (!ok) {
        free(out.v);
        return tok_error(t, WGML_ERR_OOM, "tokenizer encode: out of memory");
    }
    if (!out.v) out.v = malloc(sizeof(int32_t));
    if (!out.v) return tok_error(t, WGML_ERR_OOM, "tokenizer encode: out of memory");
    *ids = out.v;
    *n_ids = out.n;
    return WGML_OK;
}

wgml_status wgml_tokenizer_decode(const wgml_tokenizer *t, const int32_t *ids, size_t n_ids, int flags, char **text,
                                  size_t *len) {
    if (!t || !text || (!ids && n_ids))
        return t ? tok_error(t, WGML_ERR_ARG, "tokenizer decode: NULL argument") : WGML_ERR_ARG;
    *text = NULL;
    if (len) *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return tok_error(t, WGML_ERR_ARG, "tokenizer decode: id %d at position %zu is out of range (vocabulary %d)",
                             ids[i], i, t->n_vocab);
        total += t->dec_len[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s) return tok_error(t, WGML_ERR_OOM, "tokenizer decode: out of memory");
    size_t o = 0;
    /* SentencePiece: the space of the dummy prefix goes, i.e. the leading space of the first
     * piece when nothing came before it */
    int bos_ws = t->spm && t->add_space_prefix;
    for (size_t i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if ((flags & WGML_TOK_SKIP_SPECIAL) && t->type[id] == TT_CONTROL) continue;
        const char *d = t->dec[id];
        size_t dl = t->dec_len[id];
        if (bos_ws && o == 0 && dl && d[0] == ' ' &&
            type_in(t, id, TT_BIT(TT_NORMAL) | TT_BIT(TT_USER) | TT_BIT(TT_UNUSED))) {
            d++;
            dl--;
            bos_ws = 0;
        }
        if (dl) bos_ws = 0;
        memcpy(s + o, d, dl);
        o += dl;
    }
    s[o] = 0;
    *text = s;
    if (len) *len = o;
    return WGML_OK;
}

int32_t wgml_tokenizer_vocab_size(const wgml_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t wgml_tokenizer_bos(const wgml_tokenizer *t) { return t ? t->bos : -1; }
int32_t wgml_tokenizer_eos(const wgml_tokenizer *t) { return t ? t->eos : -1; }
int32_t wgml_tokenizer_unknown(const wgml_tokenizer *t) { return t ? t->unk : -1; }
int32_t wgml_tokenizer_padding(const wgml_tokenizer *t) { return t ? t->pad : -1; }
int wgml_tokenizer_add_bos(const wgml_tokenizer *t) { return t ? t->add_bos : 0; }
int wgml_tokenizer_add_eos(const wgml_tokenizer *t) { return t ? t->add_eos : 0; }
const char *wgml_tokenizer_model(const wgml_tokenizer *t) { return t ? t->model : ""; }
const char *wgml_tokenizer_token(const wgml_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab ? t->tok[id] : NULL;
}
const char *wgml_tokenizer_pre(const wgml_tokenizer *t) { return t ? t->pre : ""; }
int64_t wgml_tokenizer_merge_count(const wgml_tokenizer *t) { return t ? t->n_merges : 0; }
const char *wgml_tokenizer_error(const wgml_tokenizer *t) { return t ? t->err : "no tokenizer"; }
