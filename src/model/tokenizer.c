/* Byte-level BPE tokenizer (GGUF tokenizer.ggml.model "gpt2") built from GGUF metadata.
 *
 * Encoding, in order:
 *  1. special tokens (types control and user-defined) are found in the text, leftmost then
 *     longest first, and emitted as they are (when WGML_TOK_SPECIAL is given);
 *  2. the text between them is split by the pre-tokenizer that tokenizer.ggml.pre names:
 *     for "smollm" (and the others of its kind) every numeric character (category N) becomes
 *     a piece of its own first, then the GPT-2 pattern
 *        's|'t|'re|'ve|'m|'ll|'d| ?L+| ?N+| ?[^\s L N]+|\s+(?!\S)|\s+
 *     splits each piece (L and N are Unicode general categories, \s is White_Space);
 *  3. each piece's bytes start as byte tokens (through the GPT-2 byte-to-character map) and
 *     merges are applied lowest rank first (leftmost on a tie) until none applies.
 * Token ids and merges work on ids only: a merge table maps the pair (left id, right id) to
 * its rank and the merged id. Decoding maps a token's characters back to bytes. */
#include "model/tokenizer.h"
#include "wgml-model.h"

#include "io/errbuf.h"
#include "model/unicode_tables.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };
enum { PRE_GPT2 = 0, PRE_DIGITS_GPT2 = 1 };
enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };

typedef struct merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank, id;
} merge_slot;

struct wgml_tokenizer {
    int32_t n_vocab;
    char **tok;        /* stored text, NUL-terminated */
    uint32_t *tok_len;
    char **dec;        /* decoded bytes of each token */
    uint32_t *dec_len;
    int32_t *type;
    int32_t bos, eos;
    int pre_kind;
    char pre[64];
    int32_t byte_id[256];
    merge_slot *merges;
    uint64_t merge_cap;
    int64_t n_merges;
    int32_t *special; /* ids of tokens matched in text, longest first */
    int32_t n_special;
    uint8_t special_first[256];
    char *chat_template;
    char err[512];
};

static wgml_status terr(const wgml_tokenizer *t, wgml_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static wgml_status terr(const wgml_tokenizer *t, wgml_status s, const char *fmt, ...) {
    wgml_tokenizer *m = (wgml_tokenizer *)t; /* the error buffer is the only mutable state */
    va_list ap;
    va_start(ap, fmt);
    errbuf_vset(m->err, sizeof m->err, s, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- Unicode ------------------------------------------------------------------------------ */

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static int is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static int char_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return C_SPACE;
        return C_OTHER;
    }
    if (is_white_space(cp)) return C_SPACE;
    if (in_ranges(wgml_uni_letter, wgml_uni_letter_count, cp)) return C_LETTER;
    if (in_ranges(wgml_uni_number, wgml_uni_number_count, cp)) return C_NUMBER;
    return C_OTHER;
}

/* Decodes one UTF-8 sequence at p (n bytes left); an invalid byte is one "character" of its
 * own (code point 0xFFFFFFFF, class other). Returns the length in bytes. */
static int utf8_next(const uint8_t *p, size_t n, uint32_t *cp) {
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

static int utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The GPT-2 byte-to-character map: printable bytes map to themselves, the rest to 256+k. */
static void byte_map(uint32_t map[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        map[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

/* ---- hash tables ------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

typedef struct vocab_index {
    int32_t *slot; /* token id or -1 */
    uint64_t cap;
} vocab_index;

static int32_t vocab_find(const wgml_tokenizer *t, const vocab_index *vi, const char *s, size_t n) {
    uint64_t h = hash_bytes(s, n) & (vi->cap - 1);
    while (vi->slot[h] >= 0) {
        int32_t id = vi->slot[h];
        if (t->tok_len[id] == n && !memcmp(t->tok[id], s, n)) return id;
        h = (h + 1) & (vi->cap - 1);
    }
    return -1;
}

static const merge_slot *merge_find(const wgml_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint64_t h = mix64(key) & (t->merge_cap - 1);
    while (t->merges[h].key) {
        if (t->merges[h].key == key) return &t->merges[h];
        h = (h + 1) & (t->merge_cap - 1);
    }
    return NULL;
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
    free(t->special);
    free(t->chat_template);
    free(t);
}

static wgml_status oom_error(char *err, size_t errlen) {
    return errbuf_set(err, errlen, WGML_ERR_OOM, "tokenizer: out of memory");
}

/* tokenizer.ggml.model must be "gpt2"; tokenizer.ggml.pre (optional) picks the pre-tokenizer. */
static wgml_status read_model_and_pre(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    const char *s;
    size_t n;
    wgml_status st;
    if ((st = wgml_gguf_get_string(f, "tokenizer.ggml.model", &s, &n))) {
        return errbuf_set(err, errlen, st, "tokenizer: %s", wgml_gguf_error(f));
    }
    if (n != 4 || memcmp(s, "gpt2", 4)) {
        return errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED,
                          "tokenizer: tokenizer.ggml.model '%.*s' is not supported (only byte-level BPE 'gpt2')",
                          (int)(n > 64 ? 64 : n), s);
    }
    snprintf(t->pre, sizeof t->pre, "default");
    t->pre_kind = PRE_GPT2;
    if (wgml_gguf_get_string(f, "tokenizer.ggml.pre", &s, &n) == WGML_OK) {
        snprintf(t->pre, sizeof t->pre, "%.*s", (int)(n > 63 ? 63 : n), s);
        static const char *digit_first[] = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"};
        int known = !strcmp(t->pre, "default") || !strcmp(t->pre, "gpt2") || !strcmp(t->pre, "gpt-2");
        for (size_t i = 0; i < sizeof digit_first / sizeof digit_first[0]; i++)
            if (!strcmp(t->pre, digit_first[i])) { known = 1; t->pre_kind = PRE_DIGITS_GPT2; }
        if (!known) {
            return errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED,
                              "tokenizer: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported", t->pre);
        }
    }
    return WGML_OK;
}

/* A token's decoded bytes into dec (room for n + 1): every character mapped back through inv,
 * or the stored bytes when one cannot be. Returns the decoded length. */
static size_t decode_token_text(const int16_t inv[512], const char *s, size_t n, char *dec) {
    size_t p = 0, o = 0;
    int ok = 1;
    while (p < n) {
        uint32_t cp;
        p += (size_t)utf8_next((const uint8_t *)s + p, n - p, &cp);
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
    if (!t->tok || !t->tok_len || !t->dec || !t->dec_len || !t->type) return oom_error(err, errlen);
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
        if (!t->tok[i] || !t->dec[i]) return oom_error(err, errlen);
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

/* token text -> id (a later duplicate wins, as in a dictionary built in order), then the id of
 * each byte's character. Returns 0 when out of memory. */
static int build_vocab_index(wgml_tokenizer *t, const uint32_t bmap[256], vocab_index *vi) {
    int32_t nv = t->n_vocab;
    *vi = (vocab_index){.slot = NULL, .cap = 16};
    while (vi->cap < (uint64_t)nv * 2) vi->cap *= 2;
    vi->slot = malloc(vi->cap * sizeof *vi->slot);
    if (!vi->slot) return 0;
    for (uint64_t i = 0; i < vi->cap; i++) vi->slot[i] = -1;
    for (int32_t i = 0; i < nv; i++) {
        uint64_t h = hash_bytes(t->tok[i], t->tok_len[i]) & (vi->cap - 1);
        while (vi->slot[h] >= 0 && !(t->tok_len[vi->slot[h]] == t->tok_len[i] && !memcmp(t->tok[vi->slot[h]], t->tok[i], t->tok_len[i])))
            h = (h + 1) & (vi->cap - 1);
        vi->slot[h] = i;
    }
    for (int b = 0; b < 256; b++) {
        char u[4];
        int l = utf8_put(bmap[b], u);
        t->byte_id[b] = vocab_find(t, vi, u, (size_t)l);
    }
    return 1;
}

/* tokenizer.ggml.merges: each "left right" string names two tokens and their concatenation,
 * all in the vocabulary; its index is its rank. */
static wgml_status read_merges(wgml_tokenizer *t, const wgml_gguf *f, const vocab_index *vi, char *err, size_t errlen) {
    wgml_gguf_value merges;
    if (!wgml_gguf_find(f, "tokenizer.ggml.merges", &merges) || merges.type != WGML_GGUF_ARRAY ||
        merges.elem_type != WGML_GGUF_STRING) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: tokenizer.ggml.merges missing or not an array of strings");
    } else if (merges.count > INT32_MAX) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: too many merges (%llu)",
                          (unsigned long long)merges.count);
    }
    t->merge_cap = 16;
    while (t->merge_cap < merges.count * 2) t->merge_cap *= 2;
    t->merges = calloc(t->merge_cap, sizeof *t->merges);
    if (!t->merges) return oom_error(err, errlen);
    t->n_merges = (int64_t)merges.count;
    for (uint64_t r = 0; r < merges.count; r++) {
        const char *s;
        size_t n;
        wgml_gguf_value e;
        wgml_gguf_array_elem(f, merges, r, &e);
        wgml_gguf_value_string(f, e, &s, &n);
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        int32_t a = -1, b = -1, m = -1;
        if (sp) {
            size_t la = (size_t)(sp - s), lb = n - la - 1;
            a = vocab_find(t, vi, s, la);
            b = vocab_find(t, vi, sp + 1, lb);
            if (a >= 0 && b >= 0) {
                char stackbuf[256], *cat = la + lb <= sizeof stackbuf ? stackbuf : malloc(la + lb);
                if (!cat) return oom_error(err, errlen);
                memcpy(cat, s, la);
                memcpy(cat + la, sp + 1, lb);
                m = vocab_find(t, vi, cat, la + lb);
                if (cat != stackbuf) free(cat);
            }
        }
        if (!sp || a < 0 || b < 0 || m < 0) {
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: merge %llu '%.*s' %s", (unsigned long long)r,
                              (int)(n > 80 ? 80 : n), s,
                              !sp ? "has no space between its two parts"
                                  : "names a token that is not in the vocabulary");
        }
        uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
        uint64_t h = mix64(key) & (t->merge_cap - 1);
        while (t->merges[h].key && t->merges[h].key != key) h = (h + 1) & (t->merge_cap - 1);
        t->merges[h].key = key; /* a later duplicate replaces the earlier one */
        t->merges[h].rank = (int32_t)r;
        t->merges[h].id = m;
    }
    return WGML_OK;
}

/* The special tokens (control and user-defined, non-empty) matched in text, longest first.
 * Returns 0 when out of memory. */
static int collect_specials(wgml_tokenizer *t) {
    int32_t nv = t->n_vocab, ns = 0;
    for (int32_t i = 0; i < nv; i++) ns += (t->type[i] == TT_CONTROL || t->type[i] == TT_USER) && t->tok_len[i] > 0;
    t->special = malloc(((size_t)ns + 1) * sizeof *t->special);
    if (!t->special) return 0;
    for (int32_t i = 0; i < nv; i++)
        if ((t->type[i] == TT_CONTROL || t->type[i] == TT_USER) && t->tok_len[i] > 0) {
            t->special[t->n_special++] = i;
            t->special_first[(uint8_t)t->tok[i][0]] = 1;
        }
    /* longest first, then by id (insertion sort: the list is short) */
    for (int32_t i = 1; i < t->n_special; i++) {
        int32_t id = t->special[i], j = i;
        while (j > 0 && t->tok_len[t->special[j - 1]] < t->tok_len[id]) {
            t->special[j] = t->special[j - 1];
            j--;
        }
        t->special[j] = id;
    }
    return 1;
}

/* The tokenizer from GGUF metadata, in the order the checks have always run: model and
 * pre-tokenizer, tokens, token types, merges, bos/eos, special tokens, chat template. */
static wgml_status build(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    wgml_status st;
    if ((st = read_model_and_pre(t, f, err, errlen))) return st;

    uint32_t bmap[256];
    byte_map(bmap);
    wgml_gguf_value toks;
    if ((st = read_vocab(t, f, bmap, &toks, err, errlen))) return st;
    if ((st = read_token_types(t, f, toks, err, errlen))) return st;

    vocab_index vi;
    if (!build_vocab_index(t, bmap, &vi)) return oom_error(err, errlen);
    st = read_merges(t, f, &vi, err, errlen);
    free(vi.slot);
    if (st) return st;

    int32_t nv = t->n_vocab;
    t->bos = t->eos = -1;
    uint32_t v;
    if (wgml_gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &v) == WGML_OK && v < (uint32_t)nv) t->bos = (int32_t)v;
    if (wgml_gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &v) == WGML_OK && v < (uint32_t)nv) t->eos = (int32_t)v;

    if (!collect_specials(t)) return oom_error(err, errlen);

    const char *s;
    size_t n;
    if (wgml_gguf_get_string(f, "tokenizer.chat_template", &s, &n) == WGML_OK) {
        t->chat_template = malloc(n + 1);
        if (!t->chat_template) return oom_error(err, errlen);
        memcpy(t->chat_template, s, n);
        t->chat_template[n] = 0;
    }
    return WGML_OK;
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

typedef struct ids_buf {
    int32_t *v;
    size_t n, cap;
} ids_buf;

static int push(ids_buf *b, int32_t id) {
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

typedef struct heap_item {
    int32_t rank, pos;
} heap_item;

typedef struct work {
    /* per character of the current segment */
    uint32_t *cp;
    uint32_t *off; /* byte offset of each character; off[n] = end */
    uint8_t *cls;
    size_t cap_chars;
    /* per byte of the current word */
    int32_t *sym, *prev, *next;
    heap_item *heap;
    size_t cap_bytes, heap_n;
} work;

static int heap_less(heap_item a, heap_item b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(work *w, heap_item it) {
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(it, w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = it;
}

static heap_item heap_pop(work *w) {
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

static void push_pair(const wgml_tokenizer *t, work *w, int32_t pos) {
    int32_t nx = w->next[pos];
    if (nx < 0) return;
    const merge_slot *m = merge_find(t, w->sym[pos], w->sym[nx]);
    if (m) heap_push(w, (heap_item){m->rank, pos});
}

static int grow(void **p, size_t elem, size_t n) {
    void *q = realloc(*p, elem * n);
    if (!q) return 0;
    *p = q;
    return 1;
}

/* BPE on one piece of bytes; appends its ids. */
static int bpe_word(const wgml_tokenizer *t, work *w, const uint8_t *s, size_t n, ids_buf *out) {
    if (n == 0) return 1;
    if (n > w->cap_bytes) {
        size_t cap = n < 64 ? 64 : n;
        /* The heap keeps stale pairs (dropped when popped), so it can hold more entries than
         * symbols: m - 1 pairs at the start, then up to 2 new ones per merge, and there are at
         * most m - 1 merges, so at most 3(m - 1) entries. (Sized 1× before: a long run of one
         * repeated letter overflowed it; found by fuzz/fuzz_tokenizer.c.) */
        if (!grow((void **)&w->sym, sizeof *w->sym, cap) || !grow((void **)&w->prev, sizeof *w->prev, cap) ||
            !grow((void **)&w->next, sizeof *w->next, cap) || !grow((void **)&w->heap, sizeof *w->heap, 3 * cap))
            return 0;
        w->cap_bytes = cap;
    }
    /* a byte without a token in the vocabulary is left out (as the reference BPE does when
     * the model has no unknown token), so its neighbours become adjacent */
    int32_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (t->byte_id[s[i]] >= 0) w->sym[m++] = t->byte_id[s[i]];
    if (m == 0) return 1;
    for (int32_t i = 0; i < m; i++) {
        w->prev[i] = i - 1;
        w->next[i] = i + 1 < m ? i + 1 : -1;
    }
    w->heap_n = 0;
    for (int32_t i = 0; i + 1 < m; i++) push_pair(t, w, i);
    while (w->heap_n) {
        heap_item it = heap_pop(w);
        int32_t p = it.pos, q = w->next[p];
        if (w->sym[p] < 0 || q < 0) continue; /* dead or no right neighbour */
        const merge_slot *m = merge_find(t, w->sym[p], w->sym[q]);
        if (!m || m->rank != it.rank) continue; /* the pair changed since it was queued */
        w->sym[p] = m->id;
        w->sym[q] = -2; /* dead */
        w->next[p] = w->next[q];
        if (w->next[q] >= 0) w->prev[w->next[q]] = p;
        if (w->prev[p] >= 0) push_pair(t, w, w->prev[p]);
        push_pair(t, w, p);
    }
    for (int32_t i = 0; i >= 0; i = w->next[i])
        if (!push(out, w->sym[i])) return 0;
    return 1;
}

/* The GPT-2 pattern on characters [s, e) of the segment; calls bpe_word on each match. */
static int gpt2_split(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t s, size_t e, ids_buf *out) {
    const uint32_t *cp = w->cp;
    const uint8_t *cls = w->cls;
    size_t i = s;
    while (i < e) {
        size_t end = i + 1;
        int done = 0;
        if (cp[i] == '\'' && i + 1 < e) {
            uint32_t c1 = cp[i + 1], c2 = i + 2 < e ? cp[i + 2] : 0;
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') { end = i + 2; done = 1; }
            else if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) { end = i + 3; done = 1; }
        }
        if (!done) {
            size_t j = (cp[i] == ' ' && i + 1 < e && cls[i + 1] != C_SPACE) ? i + 1 : i;
            int c = cls[j];
            if (c != C_SPACE) {
                end = j + 1;
                while (end < e && cls[end] == c) end++;
            } else {
                size_t k = i;
                while (k < e && cls[k] == C_SPACE) k++;
                end = (k == e || k - i < 2) ? k : k - 1;
            }
        }
        if (!bpe_word(t, w, text + w->off[i], w->off[end] - w->off[i], out)) return 0;
        i = end;
    }
    return 1;
}

/* Pre-tokenizes and encodes bytes [a, b) of text (no special tokens inside). */
static int encode_segment(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t a, size_t b, ids_buf *out) {
    size_t nb = b - a;
    if (nb + 1 > w->cap_chars) {
        size_t cap = nb + 1;
        if (!grow((void **)&w->cp, sizeof *w->cp, cap) || !grow((void **)&w->off, sizeof *w->off, cap) ||
            !grow((void **)&w->cls, sizeof *w->cls, cap))
            return 0;
        w->cap_chars = cap;
    }
    size_t n = 0;
    for (size_t p = a; p < b;) {
        uint32_t c;
        int l = utf8_next(text + p, b - p, &c);
        w->cp[n] = c;
        w->off[n] = (uint32_t)(p - a);
        w->cls[n] = (uint8_t)(c == 0xFFFFFFFFu ? C_OTHER : char_class(c));
        n++;
        p += (size_t)l;
    }
    w->off[n] = (uint32_t)nb;
    const uint8_t *seg = text + a;
    if (t->pre_kind == PRE_GPT2) return gpt2_split(t, w, seg, 0, n, out);
    /* every numeric character alone, the runs between them through the GPT-2 pattern */
    size_t s = 0;
    for (size_t i = 0; i < n; i++) {
        if (w->cls[i] != C_NUMBER) continue;
        if (s < i && !gpt2_split(t, w, seg, s, i, out)) return 0;
        if (!bpe_word(t, w, seg + w->off[i], w->off[i + 1] - w->off[i], out)) return 0;
        s = i + 1;
    }
    return s < n ? gpt2_split(t, w, seg, s, n, out) : 1;
}

/* The special token starting at text[p] (longest), or -1. */
static int32_t match_special(const wgml_tokenizer *t, const uint8_t *text, size_t p, size_t len) {
    if (!t->special_first[text[p]]) return -1;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        size_t l = t->tok_len[id];
        if (l <= len - p && !memcmp(text + p, t->tok[id], l)) return id;
    }
    return -1;
}

wgml_status wgml_tokenizer_encode(const wgml_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                                  size_t *n_ids) {
    if (!t || !ids || !n_ids || (!text && len)) return t ? terr(t, WGML_ERR_ARG, "tokenizer encode: NULL argument") : WGML_ERR_ARG;
    *ids = NULL;
    *n_ids = 0;
    if (len > UINT32_MAX - 1) return terr(t, WGML_ERR_ARG, "tokenizer encode: text of %zu bytes is too long (4 GiB max)", len);
    if ((flags & WGML_TOK_ADD_BOS) && t->bos < 0) return terr(t, WGML_ERR_ARG, "tokenizer encode: the model has no BOS token");
    if ((flags & WGML_TOK_ADD_EOS) && t->eos < 0) return terr(t, WGML_ERR_ARG, "tokenizer encode: the model has no EOS token");
    ids_buf out = {0};
    work w = {0};
    int ok = 1;
    const uint8_t *u = (const uint8_t *)text;
    if (flags & WGML_TOK_ADD_BOS) ok = push(&out, t->bos);
    size_t seg = 0;
    if (flags & WGML_TOK_SPECIAL) {
        for (size_t p = 0; ok && p < len;) {
            int32_t id = match_special(t, u, p, len);
            if (id < 0) {
                p++;
                continue;
            }
            if (seg < p) ok = encode_segment(t, &w, u, seg, p, &out);
            ok = ok && push(&out, id);
            p += t->tok_len[id];
            seg = p;
        }
    }
    if (ok && seg < len) ok = encode_segment(t, &w, u, seg, len, &out);
    if (ok && (flags & WGML_TOK_ADD_EOS)) ok = push(&out, t->eos);
    free(w.cp); free(w.off); free(w.cls); free(w.sym); free(w.prev); free(w.next); free(w.heap);
    if (!ok) {
        free(out.v);
        return terr(t, WGML_ERR_OOM, "tokenizer encode: out of memory");
    }
    if (!out.v) out.v = malloc(sizeof(int32_t));
    if (!out.v) return terr(t, WGML_ERR_OOM, "tokenizer encode: out of memory");
    *ids = out.v;
    *n_ids = out.n;
    return WGML_OK;
}

wgml_status wgml_tokenizer_decode(const wgml_tokenizer *t, const int32_t *ids, size_t n_ids, int flags, char **text,
                                  size_t *len) {
    if (!t || !text || (!ids && n_ids)) return t ? terr(t, WGML_ERR_ARG, "tokenizer decode: NULL argument") : WGML_ERR_ARG;
    *text = NULL;
    if (len) *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return terr(t, WGML_ERR_ARG, "tokenizer decode: id %d at position %zu is out of range (vocabulary %d)", ids[i], i, t->n_vocab);
        total += t->dec_len[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s) return terr(t, WGML_ERR_OOM, "tokenizer decode: out of memory");
    size_t o = 0;
    for (size_t i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if ((flags & WGML_TOK_SKIP_SPECIAL) && t->type[id] == TT_CONTROL) continue;
        memcpy(s + o, t->dec[id], t->dec_len[id]);
        o += t->dec_len[id];
    }
    s[o] = 0;
    *text = s;
    if (len) *len = o;
    return WGML_OK;
}

int32_t wgml_tokenizer_vocab_size(const wgml_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t wgml_tokenizer_bos(const wgml_tokenizer *t) { return t ? t->bos : -1; }
int32_t wgml_tokenizer_eos(const wgml_tokenizer *t) { return t ? t->eos : -1; }
const char *wgml_tokenizer_token(const wgml_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab ? t->tok[id] : NULL;
}
const char *wgml_tokenizer_pre(const wgml_tokenizer *t) { return t ? t->pre : ""; }
int64_t wgml_tokenizer_merge_count(const wgml_tokenizer *t) { return t ? t->n_merges : 0; }
const char *wgml_tokenizer_error(const wgml_tokenizer *t) { return t ? t->err : "no tokenizer"; }

/* ---- chat template ------------------------------------------------------------------------ */

/* The ChatML template of SmolLM2-Instruct, split around its default system message. */
static const char chatml_head[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '";
static const char chatml_tail[] =
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int ok;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (!b->ok) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->ok = 0; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

wgml_status wgml_chat_apply(const wgml_tokenizer *t, const wgml_chat_msg *msgs, size_t n_msgs, int add_generation_prompt,
                            char **out, size_t *len) {
    if (!t || !out || (!msgs && n_msgs)) return t ? terr(t, WGML_ERR_ARG, "chat: NULL argument") : WGML_ERR_ARG;
    *out = NULL;
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content) return terr(t, WGML_ERR_ARG, "chat: message %zu has a NULL role or content", i);
    if (!t->chat_template) return terr(t, WGML_ERR_UNSUPPORTED, "chat: the model has no tokenizer.chat_template");
    /* the template with "\n" escapes written as newlines */
    sbuf tpl = {.ok = 1};
    for (const char *p = t->chat_template; *p; p++) {
        if (p[0] == '\\' && p[1] == 'n') {
            sb_put(&tpl, "\n", 1);
            p++;
        } else {
            sb_put(&tpl, p, 1);
        }
    }
    if (!tpl.ok) return terr(t, WGML_ERR_OOM, "chat: out of memory");
    size_t hl = sizeof chatml_head - 1, tl = sizeof chatml_tail - 1;
    if (tpl.n < hl + tl || memcmp(tpl.p, chatml_head, hl) || memcmp(tpl.p + tpl.n - tl, chatml_tail, tl) ||
        memchr(tpl.p + hl, '\'', tpl.n - hl - tl)) {
        free(tpl.p);
        return terr(t, WGML_ERR_UNSUPPORTED, "chat: the model's chat template is not the ChatML template this "
                                             "implementation knows (no general Jinja engine)");
    }
    const char *sys = tpl.p + hl;
    size_t sys_len = tpl.n - hl - tl;
    sbuf b = {.ok = 1};
    sb_put(&b, "", 0);
    for (size_t i = 0; i < n_msgs; i++) {
        if (i == 0 && strcmp(msgs[0].role, "system") != 0) sb_put(&b, sys, sys_len);
        sb_str(&b, "<|im_start|>");
        sb_str(&b, msgs[i].role);
        sb_str(&b, "\n");
        sb_str(&b, msgs[i].content);
        sb_str(&b, "<|im_end|>\n");
    }
    if (add_generation_prompt) sb_str(&b, "<|im_start|>assistant\n");
    free(tpl.p);
    if (!b.ok) {
        free(b.p);
        return terr(t, WGML_ERR_OOM, "chat: out of memory");
    }
    *out = b.p;
    if (len) *len = b.n;
    return WGML_OK;
}
