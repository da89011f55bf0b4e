/* The tokenizer built from GGUF metadata: byte-level BPE (tokenizer.ggml.model "gpt2") and
 * SentencePiece's BPE ("llama": Gemma, Llama 2, Mistral, ...).
 *
 * Byte-level BPE ("gpt2"), encoding in order:
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
 * its rank and the merged id. Decoding maps a token's characters back to bytes.
 *
 * SentencePiece BPE ("llama"), encoding in order (the rules of SentencePiece's BPE model with
 * an identity normalizer, which is what a GGUF vocabulary of this kind describes):
 *  1. with WGML_TOK_SPECIAL, control (and unknown-type) token text is found in the text,
 *     leftmost then longest first, and emitted as it is;
 *  2. each run of text between them is normalized: every space becomes U+2581 (the space
 *     marker), and when tokenizer.ggml.add_space_prefix is true the run at the start of the
 *     text gets one marker in front (the dummy prefix; none after a special token at the start);
 *  3. the run is cut into symbols: a user-defined token's text is one frozen symbol (longest
 *     match; always, as SentencePiece does; GGUF writes such a piece's U+2581 as a space and
 *     the marker is put back when loading), otherwise one UTF-8 character; a byte that is not
 *     valid UTF-8 is a symbol of its own (SentencePiece would replace it with U+FFFD; keeping
 *     the byte lets byte fallback encode it and decode give it back);
 *  4. repeatedly the adjacent pair whose concatenation is a piece (a normal, user-defined or
 *     unused token) of the highest score is merged, the leftmost on a tie (a priority queue over
 *     the pairs; stale entries are dropped when popped);
 *  5. each symbol becomes its piece's id; a piece of type unused is split back into the two
 *     symbols it was last formed from (as SentencePiece does); a symbol that is no piece becomes
 *     its bytes' <0xXX> tokens when the vocabulary has byte tokens, else the unknown token.
 * Decoding maps U+2581 back to a space, byte tokens to their byte, and drops the space of the
 * dummy prefix at the start of the output. A U+2581 in the input text therefore decodes as a
 * space (as in SentencePiece, where the marker stands for a space). */
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

#define TT_BIT(t) (1 << (t))
enum { CHAT_NONE = 0, CHAT_CHATML = 1, CHAT_GEMMA = 2 };

typedef struct merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank, id;
} merge_slot;

typedef struct vocab_index {
    int32_t *slot;  /* token id or -1 */
    uint32_t *hash; /* the upper half of the text's hash: most misses end without reading the text */
    uint64_t cap;
} vocab_index;

typedef struct trie_slot {
    uint64_t key; /* (node << 8 | byte) + 1; 0 = empty */
    int32_t child;
} trie_slot;

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
    /* the special tokens (control, user-defined, unknown) as a byte trie: node 0 is the root,
     * term[node] the lowest id whose text ends there or -1 */
    int32_t *trie_term;
    int32_t trie_nodes;
    trie_slot *trie_edges;
    uint64_t trie_cap;
    int32_t n_special;
    uint8_t special_first[256];
    int spm;                /* tokenizer.ggml.model "llama": SentencePiece BPE */
    float *score;           /* spm: tokenizer.ggml.scores */
    vocab_index pieces;     /* spm: the tokens merges may form (normal, user-defined, unused) */
    int32_t unk, pad;
    int add_bos, add_eos, add_space_prefix, byte_fallback;
    char model[16];
    char *chat_template;
    int chat_kind;
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

static int32_t vocab_find(const wgml_tokenizer *t, const vocab_index *vi, const char *s, size_t n) {
    uint64_t full = hash_bytes(s, n), h = full & (vi->cap - 1);
    uint32_t up = (uint32_t)(full >> 32);
    while (vi->slot[h] >= 0) {
        int32_t id = vi->slot[h];
        if (vi->hash[h] == up && t->tok_len[id] == n && !memcmp(t->tok[id], s, n)) return id;
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
    free(t->trie_term);
    free(t->trie_edges);
    free(t->score);
    free(t->pieces.slot);
    free(t->pieces.hash);
    free(t->chat_template);
    free(t);
}

static wgml_status oom_error(char *err, size_t errlen) {
    return errbuf_set(err, errlen, WGML_ERR_OOM, "tokenizer: out of memory");
}

/* tokenizer.ggml.model must be "gpt2" or "llama"; for "gpt2", tokenizer.ggml.pre (optional)
 * picks the pre-tokenizer (SentencePiece has none: its name is only recorded). */
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
    t->pre_kind = PRE_GPT2;
    if (t->spm) {
        if (wgml_gguf_get_string(f, "tokenizer.ggml.pre", &s, &n) == WGML_OK)
            snprintf(t->pre, sizeof t->pre, "%.*s", (int)(n > 63 ? 63 : n), s);
        return WGML_OK;
    }
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

static int type_in(const wgml_tokenizer *t, int32_t id, int mask) {
    return mask < 0 || (t->type[id] >= 0 && t->type[id] < 31 && (mask >> t->type[id] & 1));
}

/* token text -> id over the tokens whose type is in mask (-1: all); of tokens with the same
 * text the later wins when later_wins (as in a dictionary built in order), else the first.
 * Returns 0 when out of memory. */
static int index_build(const wgml_tokenizer *t, vocab_index *vi, int mask, int later_wins) {
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
        while (vi->slot[h] >= 0 && !(t->tok_len[vi->slot[h]] == t->tok_len[i] && !memcmp(t->tok[vi->slot[h]], t->tok[i], t->tok_len[i])))
            h = (h + 1) & (vi->cap - 1);
        if (vi->slot[h] < 0 || later_wins) {
            vi->slot[h] = i;
            vi->hash[h] = (uint32_t)(full >> 32);
        }
    }
    return 1;
}

/* The byte-level index (every token, a later duplicate wins), then the id of each byte's
 * character. Returns 0 when out of memory. */
static int build_vocab_index(wgml_tokenizer *t, const uint32_t bmap[256], vocab_index *vi) {
    if (!index_build(t, vi, -1, 1)) return 0;
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

static int32_t trie_child(const wgml_tokenizer *t, int32_t node, uint8_t byte) {
    uint64_t key = ((uint64_t)node << 8 | byte) + 1;
    for (uint64_t h = mix64(key) & (t->trie_cap - 1); t->trie_edges[h].key; h = (h + 1) & (t->trie_cap - 1))
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
            uint64_t h = mix64(key) & (t->trie_cap - 1);
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
static wgml_status read_id(const wgml_tokenizer *t, const wgml_gguf *f, const char *key, int32_t *id, char *err,
                           size_t errlen) {
    wgml_gguf_value v;
    int64_t x = -1;
    *id = -1;
    if (!wgml_gguf_find(f, key, &v)) return WGML_OK;
    if (wgml_gguf_value_i64(f, v, &x) != WGML_OK || x < 0 || x >= t->n_vocab) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: %s (%s %lld) is not a token id of the vocabulary (%d tokens)",
                          key, wgml_gguf_type_name(v.type), (long long)x, t->n_vocab);
    }
    *id = (int32_t)x;
    return WGML_OK;
}

/* An optional bool (def when absent); a value of another type is an error. */
static wgml_status read_flag(const wgml_gguf *f, const char *key, int def, int *out, char *err, size_t errlen) {
    wgml_gguf_value v;
    *out = def;
    if (!wgml_gguf_find(f, key, &v)) return WGML_OK;
    if (v.type != WGML_GGUF_BOOL || wgml_gguf_get_bool(f, key, out) != WGML_OK) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: %s must be a bool (got %s)", key,
                          wgml_gguf_type_name(v.type));
    }
    return WGML_OK;
}

/* "<0xXX>" (either case of hex digit) -> the byte, else -1. */
static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* SentencePiece: scores, checked token types, byte tokens, the unknown token, the pieces
 * index and each token's decoded bytes. */
static wgml_status spm_setup(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    int32_t nv = t->n_vocab;
    wgml_gguf_value sc;
    if (!wgml_gguf_find(f, "tokenizer.ggml.scores", &sc) || sc.type != WGML_GGUF_ARRAY || sc.count != (uint64_t)nv ||
        (sc.elem_type != WGML_GGUF_F32 && sc.elem_type != WGML_GGUF_F64)) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: a SentencePiece vocabulary needs tokenizer.ggml.scores, an f32 array of one score per "
                          "token (%d)", nv);
    }
    t->score = malloc((size_t)nv * sizeof *t->score);
    if (!t->score) return oom_error(err, errlen);
    for (int32_t i = 0; i < nv; i++) {
        wgml_gguf_value e;
        double d = 0;
        wgml_gguf_array_elem(f, sc, (uint64_t)i, &e);
        wgml_gguf_value_f64(f, e, &d);
        if (d != d) return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: the score of token %d is NaN", i);
        t->score[i] = (float)d;
    }
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    int n_byte = 0;
    for (int32_t i = 0; i < nv; i++) {
        if (t->type[i] == 0) t->type[i] = TT_NORMAL; /* "undefined" */
        if (t->type[i] < TT_NORMAL || t->type[i] > TT_BYTE) {
            return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                              "tokenizer: token %d has type %d in tokenizer.ggml.token_type (the types are 1..6)", i, t->type[i]);
        }
        if (t->type[i] != TT_BYTE) continue;
        int v = byte_token_value(t->tok[i], t->tok_len[i]);
        if (v < 0) {
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: token %d '%.*s' has type byte but is not <0xXX>", i,
                              (int)(t->tok_len[i] > 40 ? 40 : t->tok_len[i]), t->tok[i]);
        }
        if (t->byte_id[v] < 0) t->byte_id[v] = i;
        n_byte++;
    }
    /* byte fallback needs every byte: a character outside the vocabulary may be any bytes */
    t->byte_fallback = n_byte > 0;
    for (int b = 0; t->byte_fallback && b < 256; b++)
        if (t->byte_id[b] < 0) {
            return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                              "tokenizer: the vocabulary has byte tokens but not <0x%02X>: byte fallback needs all 256", b);
        }
    wgml_status st;
    if ((st = read_id(t, f, "tokenizer.ggml.unknown_token_id", &t->unk, err, errlen))) return st;
    for (int32_t i = 0; i < nv && t->unk < 0; i++)
        if (t->type[i] == TT_UNKNOWN) t->unk = i;
    if (!t->byte_fallback && t->unk < 0) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: the SentencePiece vocabulary has neither byte tokens <0xXX> nor an unknown token, "
                          "so text outside it cannot be encoded");
    }
    if ((st = read_flag(f, "tokenizer.ggml.add_space_prefix", 1, &t->add_space_prefix, err, errlen))) return st;
    /* GGUF converters write a user-defined piece's U+2581 as a space (pre-normalized for
     * runtimes that match such pieces in the raw text); the marker is put back, so that the
     * piece matches the normalized text and merges as SentencePiece's own piece does (Gemma's
     * "  " is SentencePiece's "\u2581\u2581") */
    for (int32_t i = 0; i < nv; i++) {
        if (t->type[i] != TT_USER || !memchr(t->tok[i], ' ', t->tok_len[i])) continue;
        size_t n = t->tok_len[i], spaces = 0;
        for (size_t k = 0; k < n; k++) spaces += t->tok[i][k] == ' ';
        if (n + 2 * spaces > UINT32_MAX / 2) return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: token %d is too long", i);
        char *r = malloc(n + 2 * spaces + 1);
        if (!r) return oom_error(err, errlen);
        size_t o = 0;
        for (size_t k = 0; k < n; k++) {
            if (t->tok[i][k] == ' ') { memcpy(r + o, "\xe2\x96\x81", 3); o += 3; }
            else r[o++] = t->tok[i][k];
        }
        r[o] = 0;
        free(t->tok[i]);
        t->tok[i] = r;
        t->tok_len[i] = (uint32_t)o;
    }
    if (!index_build(t, &t->pieces, TT_BIT(TT_NORMAL) | TT_BIT(TT_USER) | TT_BIT(TT_UNUSED), 0)) return oom_error(err, errlen);
    /* decoded bytes: U+2581 -> space in pieces, a byte token's byte, control and unknown
     * tokens as their text (read_vocab left room for the file's length + 1, which is what a
     * user-defined piece decodes to) */
    for (int32_t i = 0; i < nv; i++) {
        const char *s = t->tok[i];
        char *d = t->dec[i];
        size_t n = t->tok_len[i], o = 0;
        if (t->type[i] == TT_BYTE) {
            d[o++] = (char)byte_token_value(s, n);
        } else if (t->type[i] == TT_CONTROL || t->type[i] == TT_UNKNOWN) {
            memcpy(d, s, n);
            o = n;
        } else {
            for (size_t k = 0; k < n;) {
                if (k + 3 <= n && !memcmp(s + k, "\xe2\x96\x81", 3)) { d[o++] = ' '; k += 3; }
                else d[o++] = s[k++];
            }
        }
        d[o] = 0;
        t->dec_len[i] = (uint32_t)o;
    }
    return WGML_OK;
}

/* Which chat format: the template's text names it (ChatML's <|im_start|>, Gemma's
 * <start_of_turn>); without a template, a Gemma architecture means Gemma's. */
static int chat_kind_of(const wgml_gguf *f, const char *tpl) {
    if (tpl) {
        if (strstr(tpl, "<start_of_turn>") && strstr(tpl, "<end_of_turn>")) return CHAT_GEMMA;
        if (strstr(tpl, "<|im_start|>")) return CHAT_CHATML;
        return CHAT_NONE;
    }
    const char *a;
    size_t n;
    if (wgml_gguf_get_string(f, "general.architecture", &a, &n) == WGML_OK && n >= 5 && !memcmp(a, "gemma", 5))
        return CHAT_GEMMA;
    return CHAT_NONE;
}

/* The tokenizer from GGUF metadata, in the order the checks have always run: model and
 * pre-tokenizer, tokens, token types, merges (byte-level) or scores (SentencePiece), special
 * token ids and flags, special tokens, chat template. */
static wgml_status build(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    wgml_status st;
    if ((st = read_model_and_pre(t, f, err, errlen))) return st;

    uint32_t bmap[256];
    byte_map(bmap);
    wgml_gguf_value toks;
    if ((st = read_vocab(t, f, bmap, &toks, err, errlen))) return st;
    if ((st = read_token_types(t, f, toks, err, errlen))) return st;

    if (t->spm) {
        if ((st = spm_setup(t, f, err, errlen))) return st;
    } else {
        vocab_index vi;
        if (!build_vocab_index(t, bmap, &vi)) return oom_error(err, errlen);
        st = read_merges(t, f, &vi, err, errlen);
        free(vi.slot);
        free(vi.hash);
        if (st) return st;
    }

    if ((st = read_id(t, f, "tokenizer.ggml.bos_token_id", &t->bos, err, errlen)) ||
        (st = read_id(t, f, "tokenizer.ggml.eos_token_id", &t->eos, err, errlen)) ||
        (st = read_id(t, f, "tokenizer.ggml.padding_token_id", &t->pad, err, errlen)) ||
        (st = read_flag(f, "tokenizer.ggml.add_bos_token", t->spm, &t->add_bos, err, errlen)) ||
        (st = read_flag(f, "tokenizer.ggml.add_eos_token", 0, &t->add_eos, err, errlen)))
        return st;
    if (!t->spm && (st = read_id(t, f, "tokenizer.ggml.unknown_token_id", &t->unk, err, errlen))) return st;
    if (t->add_bos && t->bos < 0)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
    if (t->add_eos && t->eos < 0)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: tokenizer.ggml.add_eos_token is true but there is no eos_token_id");

    if (!collect_specials(t)) return oom_error(err, errlen);

    const char *s;
    size_t n;
    if (wgml_gguf_get_string(f, "tokenizer.chat_template", &s, &n) == WGML_OK) {
        t->chat_template = malloc(n + 1);
        if (!t->chat_template) return oom_error(err, errlen);
        memcpy(t->chat_template, s, n);
        t->chat_template[n] = 0;
    }
    t->chat_kind = chat_kind_of(f, t->chat_template);
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

/* A queued pair: key (byte-level: the merge's rank; SentencePiece: minus the score), the
 * position of its left symbol, and (SentencePiece) the length of the concatenation, by which a
 * stale entry is recognised. Popped lowest key first, then leftmost. */
typedef struct heap_item {
    double key;
    int32_t pos;
    uint32_t size;
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
    /* SentencePiece: the normalized run and its symbols (start, length, frozen id or -1) */
    uint8_t *norm;
    size_t cap_norm;
    uint32_t *s_start, *s_len;
    int32_t *s_fix;
    uint32_t *rev;  /* per unused piece: the left length of the pair it was last queued from */
    uint32_t *stack; /* (start, length) pairs of the unused-piece split */
    size_t cap_stack;
} work;

static int heap_less(heap_item a, heap_item b) { return a.key < b.key || (a.key == b.key && a.pos < b.pos); }

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
    if (m) heap_push(w, (heap_item){.key = m->rank, .pos = pos});
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
        if (!m || m->rank != it.key) continue; /* the pair changed since it was queued */
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

/* ---- SentencePiece BPE ---------------------------------------------------------------------- */

/* Queues the pair of symbols l and r (adjacent) when neither is frozen and their
 * concatenation is a piece; an unused piece remembers where it was split (the last pair queued
 * wins, as in SentencePiece). Returns 0 when out of memory. */
static int spm_push_pair(const wgml_tokenizer *t, work *w, int32_t l, int32_t r) {
    if (w->s_fix[l] >= 0 || w->s_fix[r] >= 0) return 1;
    uint32_t n = w->s_len[l] + w->s_len[r];
    int32_t id = vocab_find(t, &t->pieces, (const char *)w->norm + w->s_start[l], n);
    if (id < 0) return 1;
    heap_push(w, (heap_item){.key = -(double)t->score[id], .pos = l, .size = n});
    if (t->type[id] == TT_UNUSED) {
        if (!w->rev && !(w->rev = calloc((size_t)t->n_vocab, sizeof *w->rev))) return 0;
        w->rev[id] = w->s_len[l];
    }
    return 1;
}

/* Appends the ids of the symbol at bytes [start, start + len) of the normalized run: its
 * piece, an unused piece split back into the symbols it was formed from (a stack rather than
 * recursion: a piece may be long), or, for no piece, byte tokens or the unknown token. */
static int spm_emit(const wgml_tokenizer *t, work *w, uint32_t start, uint32_t len, ids_buf *out) {
    size_t sp = 0;
    w->stack[sp++] = start;
    w->stack[sp++] = len;
    while (sp) {
        uint32_t n = w->stack[--sp], s = w->stack[--sp];
        int32_t id = vocab_find(t, &t->pieces, (const char *)w->norm + s, n);
        if (id >= 0 && t->type[id] == TT_UNUSED && w->rev && w->rev[id] > 0 && w->rev[id] < n) {
            uint32_t k = w->rev[id];
            if (sp + 4 > w->cap_stack) {
                size_t cap = w->cap_stack * 2 + 16;
                if (!grow((void **)&w->stack, sizeof *w->stack, cap)) return 0;
                w->cap_stack = cap;
            }
            w->stack[sp++] = s + k; /* right, then left on top */
            w->stack[sp++] = n - k;
            w->stack[sp++] = s;
            w->stack[sp++] = k;
        } else if (id >= 0) {
            if (!push(out, id)) return 0;
        } else if (t->byte_fallback) {
            for (uint32_t k = 0; k < n; k++)
                if (!push(out, t->byte_id[w->norm[s + k]])) return 0;
        } else if (!push(out, t->unk)) {
            return 0;
        }
    }
    return 1;
}

static int32_t match_special(const wgml_tokenizer *t, const uint8_t *text, size_t p, size_t len, int mask);

/* SentencePiece BPE on bytes [a, b) of text (no special tokens inside); prefix: add the dummy
 * prefix. Appends the ids. Returns 0 when out of memory. */
static int spm_segment(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t a, size_t b, int prefix,
                       ids_buf *out) {
    static const uint8_t marker[3] = {0xE2, 0x96, 0x81}; /* U+2581 */
    if (a == b) return 1;
    size_t need = 3 * (b - a) + 3;
    if (need > w->cap_norm) {
        if (!grow((void **)&w->norm, 1, need)) return 0;
        w->cap_norm = need;
    }
    size_t o = 0;
    if (prefix) {
        memcpy(w->norm, marker, 3);
        o = 3;
    }
    for (size_t i = a; i < b; i++) {
        if (text[i] == ' ') {
            memcpy(w->norm + o, marker, 3);
            o += 3;
        } else {
            w->norm[o++] = text[i];
        }
    }
    if (o > w->cap_bytes) {
        /* at most one symbol per byte; the heap holds stale pairs too: m - 1 at the start and
         * up to 2 more per merge, at most m - 1 merges (the byte-level path never shares this
         * work area, so its sizing of the same arrays does not interfere) */
        if (!grow((void **)&w->prev, sizeof *w->prev, o) || !grow((void **)&w->next, sizeof *w->next, o) ||
            !grow((void **)&w->s_start, sizeof *w->s_start, o) || !grow((void **)&w->s_len, sizeof *w->s_len, o) ||
            !grow((void **)&w->s_fix, sizeof *w->s_fix, o) || !grow((void **)&w->heap, sizeof *w->heap, 3 * o))
            return 0;
        w->cap_bytes = o;
    }
    if (!w->stack) {
        if (!grow((void **)&w->stack, sizeof *w->stack, 64)) return 0;
        w->cap_stack = 64;
    }
    const uint8_t *u = w->norm;
    int32_t m = 0;
    for (size_t p = 0; p < o;) {
        int32_t id = t->n_special ? match_special(t, u, p, o, TT_BIT(TT_USER)) : -1;
        uint32_t cp, l = id >= 0 ? t->tok_len[id] : (uint32_t)utf8_next(u + p, o - p, &cp);
        w->s_start[m] = (uint32_t)p;
        w->s_len[m] = l;
        w->s_fix[m] = id;
        w->prev[m] = m - 1;
        w->next[m] = m + 1;
        m++;
        p += l;
    }
    w->next[m - 1] = -1;
    /* No pair crosses a frozen symbol, so each run of symbols between frozen ones merges on
     * its own, with the same result and a smaller (cache-friendly) queue: Gemma's newlines are
     * user-defined, which cuts most text into lines. */
    for (int32_t r0 = 0, r1; r0 < m; r0 = r1) {
        r1 = r0 + 1;
        if (w->s_fix[r0] >= 0) continue;
        while (r1 < m && w->s_fix[r1] < 0) r1++;
        w->heap_n = 0;
        for (int32_t i = r0; i + 1 < r1; i++)
            if (!spm_push_pair(t, w, i, i + 1)) return 0;
        while (w->heap_n) {
            heap_item it = heap_pop(w);
            int32_t l = it.pos, r = w->next[l];
            /* stale: a side was merged away or grew since the pair was queued */
            if (w->s_len[l] == 0 || r < 0 || w->s_len[l] + w->s_len[r] != it.size) continue;
            w->s_len[l] += w->s_len[r];
            w->s_len[r] = 0;
            w->next[l] = w->next[r];
            if (w->next[r] >= 0) w->prev[w->next[r]] = l;
            if (w->prev[l] >= 0 && !spm_push_pair(t, w, w->prev[l], l)) return 0;
            if (w->next[l] >= 0 && !spm_push_pair(t, w, l, w->next[l])) return 0;
        }
    }
    for (int32_t i = 0; i >= 0; i = w->next[i]) {
        if (w->s_fix[i] >= 0 ? !push(out, w->s_fix[i]) : !spm_emit(t, w, w->s_start[i], w->s_len[i], out)) return 0;
    }
    return 1;
}

/* The longest special token of a type in mask whose text starts at text[p], or -1. */
static int32_t match_special(const wgml_tokenizer *t, const uint8_t *text, size_t p, size_t len, int mask) {
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

wgml_status wgml_tokenizer_encode(const wgml_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                                  size_t *n_ids) {
    if (!t || !ids || !n_ids || (!text && len)) return t ? terr(t, WGML_ERR_ARG, "tokenizer encode: NULL argument") : WGML_ERR_ARG;
    *ids = NULL;
    *n_ids = 0;
    if (len > UINT32_MAX - 1) return terr(t, WGML_ERR_ARG, "tokenizer encode: text of %zu bytes is too long (4 GiB max)", len);
    /* SentencePiece's normalized text (a space becomes 3 bytes) is indexed with 32 bits too */
    if (t->spm && len > UINT32_MAX / 3 - 2)
        return terr(t, WGML_ERR_ARG, "tokenizer encode: text of %zu bytes is too long (1.4 GiB max)", len);
    if ((flags & WGML_TOK_ADD_BOS) && t->bos < 0) return terr(t, WGML_ERR_ARG, "tokenizer encode: the model has no BOS token");
    if ((flags & WGML_TOK_ADD_EOS) && t->eos < 0) return terr(t, WGML_ERR_ARG, "tokenizer encode: the model has no EOS token");
    ids_buf out = {0};
    work w = {0};
    int ok = 1;
    const uint8_t *u = (const uint8_t *)text;
    if (flags & WGML_TOK_ADD_BOS) ok = push(&out, t->bos);
    size_t seg = 0;
    /* byte-level: control and user-defined text; SentencePiece: control and unknown (its
     * user-defined pieces are matched inside each run, with or without this flag) */
    int mask = t->spm ? TT_BIT(TT_CONTROL) | TT_BIT(TT_UNKNOWN) : TT_BIT(TT_CONTROL) | TT_BIT(TT_USER);
    if (flags & WGML_TOK_SPECIAL) {
        for (size_t p = 0; ok && p < len;) {
            int32_t id = match_special(t, u, p, len, mask);
            if (id < 0) {
                p++;
                continue;
            }
            if (seg < p) ok = t->spm ? spm_segment(t, &w, u, seg, p, t->add_space_prefix && seg == 0, &out)
                                     : encode_segment(t, &w, u, seg, p, &out);
            ok = ok && push(&out, id);
            p += t->tok_len[id];
            seg = p;
        }
    }
    if (ok && seg < len)
        ok = t->spm ? spm_segment(t, &w, u, seg, len, t->add_space_prefix && seg == 0, &out)
                    : encode_segment(t, &w, u, seg, len, &out);
    if (ok && (flags & WGML_TOK_ADD_EOS)) ok = push(&out, t->eos);
    free(w.cp); free(w.off); free(w.cls); free(w.sym); free(w.prev); free(w.next); free(w.heap);
    free(w.norm); free(w.s_start); free(w.s_len); free(w.s_fix); free(w.rev); free(w.stack);
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
    /* SentencePiece: the space of the dummy prefix goes, i.e. the leading space of the first
     * piece when nothing came before it */
    int bos_ws = t->spm && t->add_space_prefix;
    for (size_t i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if ((flags & WGML_TOK_SKIP_SPECIAL) && t->type[id] == TT_CONTROL) continue;
        const char *d = t->dec[id];
        size_t dl = t->dec_len[id];
        if (bos_ws && o == 0 && dl && d[0] == ' ' && type_in(t, id, TT_BIT(TT_NORMAL) | TT_BIT(TT_USER) | TT_BIT(TT_UNUSED))) {
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

/* Python's str.isspace() on a code point (Jinja's trim is str.strip()). */
static int py_space(uint32_t cp) { return is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

/* content without the leading and trailing white space: *a and *b bound what is left. */
static void trim_span(const char *s, size_t *a, size_t *b) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, n = strlen(s), e = n;
    while (i < n) {
        uint32_t cp;
        int l = utf8_next(u + i, n - i, &cp);
        if (cp == 0xFFFFFFFFu || !py_space(cp)) break;
        i += (size_t)l;
    }
    /* from the end: step back over continuation bytes to each character's start */
    while (e > i) {
        size_t k = e - 1;
        while (k > i && (u[k] & 0xC0) == 0x80 && e - k < 4) k--;
        uint32_t cp;
        int l = utf8_next(u + k, e - k, &cp);
        if ((size_t)l != e - k || cp == 0xFFFFFFFFu || !py_space(cp)) break;
        e = k;
    }
    *a = i;
    *b = e;
}

/* Gemma's chat format (the template of Gemma 3's GGUF): the BOS token's text, then each
 * message as "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n" with CONTENT trimmed of white space
 * and the role "assistant" written "model"; a first message "system" is not a turn of its own
 * but its content and "\n\n" are put in front of the first turn's content. The roles after
 * it must alternate user, other, user, ... (the template raises an error otherwise). With
 * add_generation_prompt, "<start_of_turn>model\n" follows. Gemma 1 and 2's template has no
 * system role: a system message there is an error, as that template raises. */
static wgml_status chat_gemma(const wgml_tokenizer *t, const wgml_chat_msg *msgs, size_t n_msgs, int add_generation_prompt,
                              char **out, size_t *len) {
    const char *tpl = t->chat_template;
    size_t first = 0;
    const char *sys = NULL;
    if (n_msgs && !strcmp(msgs[0].role, "system")) {
        if (tpl && strstr(tpl, "System role not supported"))
            return terr(t, WGML_ERR_ARG, "chat: this Gemma template has no system role");
        sys = msgs[0].content;
        first = 1;
    }
    for (size_t i = first; i < n_msgs; i++)
        if (!strcmp(msgs[i].role, "user") != ((i - first) % 2 == 0))
            return terr(t, WGML_ERR_ARG, "chat: message %zu has role '%s': Gemma's roles must alternate user/assistant/user/...",
                        i, msgs[i].role);
    sbuf b = {.ok = 1};
    sb_put(&b, "", 0);
    if ((!tpl || strstr(tpl, "bos_token")) && t->bos >= 0) sb_str(&b, t->tok[t->bos]);
    for (size_t i = first; i < n_msgs; i++) {
        sb_str(&b, "<start_of_turn>");
        sb_str(&b, strcmp(msgs[i].role, "assistant") ? msgs[i].role : "model");
        sb_str(&b, "\n");
        if (i == first && sys) {
            sb_str(&b, sys);
            sb_str(&b, "\n\n");
        }
        size_t a, e;
        trim_span(msgs[i].content, &a, &e);
        sb_put(&b, msgs[i].content + a, e - a);
        sb_str(&b, "<end_of_turn>\n");
    }
    if (add_generation_prompt) sb_str(&b, "<start_of_turn>model\n");
    if (!b.ok) {
        free(b.p);
        return terr(t, WGML_ERR_OOM, "chat: out of memory");
    }
    *out = b.p;
    if (len) *len = b.n;
    return WGML_OK;
}

wgml_status wgml_chat_apply(const wgml_tokenizer *t, const wgml_chat_msg *msgs, size_t n_msgs, int add_generation_prompt,
                            char **out, size_t *len) {
    if (!t || !out || (!msgs && n_msgs)) return t ? terr(t, WGML_ERR_ARG, "chat: NULL argument") : WGML_ERR_ARG;
    *out = NULL;
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content) return terr(t, WGML_ERR_ARG, "chat: message %zu has a NULL role or content", i);
    if (t->chat_kind == CHAT_GEMMA) return chat_gemma(t, msgs, n_msgs, add_generation_prompt, out, len);
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
        return terr(t, WGML_ERR_UNSUPPORTED, "chat: the model's chat template is not the ChatML template nor Gemma's, "
                                             "the two this implementation knows (no general Jinja engine)");
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
