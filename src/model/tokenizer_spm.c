/* SentencePiece BPE (tokenizer.ggml.model "llama": Gemma, Llama 2, Mistral, ...): the
 * vocabulary's set-up (scores, byte tokens, the unknown token, the pieces index) and the
 * encoding of a run of text. The tokenizer's construction, special tokens and entry points are
 * in tokenizer.c.
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
#include "model/tokenizer_internal.h"

#include "io/errbuf.h"

#include <stdlib.h>
#include <string.h>

/* ---- construction ------------------------------------------------------------------------- */

/* "<0xXX>" (either case of hex digit) -> the byte, else -1. */
static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* tokenizer.ggml.scores: one score per token (f32 or f64, never NaN). */
static wgml_status read_scores(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    int32_t nv = t->n_vocab;
    wgml_gguf_value sc;
    if (!wgml_gguf_find(f, "tokenizer.ggml.scores", &sc) || sc.type != WGML_GGUF_ARRAY || sc.count != (uint64_t)nv ||
        (sc.elem_type != WGML_GGUF_F32 && sc.elem_type != WGML_GGUF_F64)) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: a SentencePiece vocabulary needs tokenizer.ggml.scores, an f32 array of one "
                          "score per token (%d)", nv);
    }
    t->score = malloc((size_t)nv * sizeof *t->score);
    if (!t->score) return tok_oom(err, errlen);
    for (int32_t i = 0; i < nv; i++) {
        wgml_gguf_value e;
        double d = 0;
        wgml_gguf_array_elem(f, sc, (uint64_t)i, &e);
        wgml_gguf_value_f64(f, e, &d);
        if (d != d) return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: the score of token %d is NaN", i);
        t->score[i] = (float)d;
    }
    return WGML_OK;
}

/* Every token type checked (undefined read as normal), the byte tokens' ids, and byte fallback
 * when there are byte tokens. */
static wgml_status read_byte_tokens(wgml_tokenizer *t, char *err, size_t errlen) {
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    int n_byte = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->type[i] == 0) t->type[i] = TT_NORMAL; /* "undefined" */
        if (t->type[i] < TT_NORMAL || t->type[i] > TT_BYTE) {
            return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                              "tokenizer: token %d has type %d in tokenizer.ggml.token_type (the types are 1..6)", i,
                              t->type[i]);
        }
        if (t->type[i] != TT_BYTE) continue;
        int v = byte_token_value(t->tok[i], t->tok_len[i]);
        if (v < 0) {
            return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                              "tokenizer: token %d '%.*s' has type byte but is not <0xXX>", i,
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
                              "tokenizer: the vocabulary has byte tokens but not <0x%02X>: byte fallback needs all "
                              "256", b);
        }
    return WGML_OK;
}

/* The unknown token: tokenizer.ggml.unknown_token_id, else the first of type unknown; without
 * one, byte fallback must cover what the vocabulary does not. */
static wgml_status read_unknown(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    wgml_status st;
    if ((st = tok_read_id(t, f, "tokenizer.ggml.unknown_token_id", &t->unk, err, errlen))) return st;
    for (int32_t i = 0; i < t->n_vocab && t->unk < 0; i++)
        if (t->type[i] == TT_UNKNOWN) t->unk = i;
    if (!t->byte_fallback && t->unk < 0) {
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "tokenizer: the SentencePiece vocabulary has neither byte tokens <0xXX> nor an unknown "
                          "token, so text outside it cannot be encoded");
    }
    return WGML_OK;
}

/* GGUF converters write a user-defined piece's U+2581 as a space (pre-normalized for
 * runtimes that match such pieces in the raw text); the marker is put back, so that the
 * piece matches the normalized text and merges as SentencePiece's own piece does (Gemma's
 * "  " is SentencePiece's "\u2581\u2581") */
static wgml_status restore_markers(wgml_tokenizer *t, char *err, size_t errlen) {
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->type[i] != TT_USER || !memchr(t->tok[i], ' ', t->tok_len[i])) continue;
        size_t n = t->tok_len[i], spaces = 0;
        for (size_t k = 0; k < n; k++) spaces += t->tok[i][k] == ' ';
        if (n + 2 * spaces > UINT32_MAX / 2)
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "tokenizer: token %d is too long", i);
        char *r = malloc(n + 2 * spaces + 1);
        if (!r) return tok_oom(err, errlen);
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
    return WGML_OK;
}

/* decoded bytes: U+2581 -> space in pieces, a byte token's byte, control and unknown
 * tokens as their text (read_vocab, tokenizer.c, left room for the file's length + 1, which is
 * what a user-defined piece decodes to) */
static void decode_pieces(wgml_tokenizer *t) {
    for (int32_t i = 0; i < t->n_vocab; i++) {
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
}

/* SentencePiece: scores, checked token types, byte tokens, the unknown token, the pieces
 * index and each token's decoded bytes. */
wgml_status spm_setup(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    wgml_status st;
    if ((st = read_scores(t, f, err, errlen)) || (st = read_byte_tokens(t, err, errlen)) ||
        (st = read_unknown(t, f, err, errlen)) ||
        (st = tok_read_flag(f, "tokenizer.ggml.add_space_prefix", 1, &t->add_space_prefix, err, errlen)) ||
        (st = restore_markers(t, err, errlen)))
        return st;
    if (!tok_index_build(t, &t->pieces, TT_BIT(TT_NORMAL) | TT_BIT(TT_USER) | TT_BIT(TT_UNUSED), 0))
        return tok_oom(err, errlen);
    decode_pieces(t);
    return WGML_OK;
}

/* ---- encoding ----------------------------------------------------------------------------- */

/* Queues the pair of symbols l and r (adjacent) when neither is frozen and their
 * concatenation is a piece; an unused piece remembers where it was split (the last pair queued
 * wins, as in SentencePiece). Returns 0 when out of memory. */
static int spm_push_pair(const wgml_tokenizer *t, work *w, int32_t l, int32_t r) {
    if (w->s_fix[l] >= 0 || w->s_fix[r] >= 0) return 1;
    uint32_t n = w->s_len[l] + w->s_len[r];
    int32_t id = tok_vocab_find(t, &t->pieces, (const char *)w->norm + w->s_start[l], n);
    if (id < 0) return 1;
    tok_heap_push(w, (heap_item){.key = -(double)t->score[id], .pos = l, .size = n});
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
        int32_t id = tok_vocab_find(t, &t->pieces, (const char *)w->norm + s, n);
        if (id >= 0 && t->type[id] == TT_UNUSED && w->rev && w->rev[id] > 0 && w->rev[id] < n) {
            uint32_t k = w->rev[id];
            if (sp + 4 > w->cap_stack) {
                size_t cap = w->cap_stack * 2 + 16;
                if (!tok_grow((void **)&w->stack, sizeof *w->stack, cap)) return 0;
                w->cap_stack = cap;
            }
            w->stack[sp++] = s + k; /* right, then left on top */
            w->stack[sp++] = n - k;
            w->stack[sp++] = s;
            w->stack[sp++] = k;
        } else if (id >= 0) {
            if (!tok_push(out, id)) return 0;
        } else if (t->byte_fallback) {
            for (uint32_t k = 0; k < n; k++)
                if (!tok_push(out, t->byte_id[w->norm[s + k]])) return 0;
        } else if (!tok_push(out, t->unk)) {
            return 0;
        }
    }
    return 1;
}

/* Step 2: bytes [a, b) of text normalized into w->norm (each space as U+2581, the dummy prefix
 * in front with prefix); *len its length. Returns 0 when out of memory. */
static int normalize(work *w, const uint8_t *text, size_t a, size_t b, int prefix, size_t *len) {
    static const uint8_t marker[3] = {0xE2, 0x96, 0x81}; /* U+2581 */
    size_t need = 3 * (b - a) + 3;
    if (need > w->cap_norm) {
        if (!tok_grow((void **)&w->norm, 1, need)) return 0;
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
    *len = o;
    return 1;
}

/* Room for the symbols of a normalized run of o bytes and for their pair queue and split
 * stack. Returns 0 when out of memory. */
static int reserve_symbols(work *w, size_t o) {
    if (o > w->cap_bytes) {
        /* at most one symbol per byte; the heap holds stale pairs too: m - 1 at the start and
         * up to 2 more per merge, at most m - 1 merges (the byte-level path never shares this
         * work area, so its sizing of the same arrays does not interfere) */
        if (!tok_grow((void **)&w->prev, sizeof *w->prev, o) || !tok_grow((void **)&w->next, sizeof *w->next, o) ||
            !tok_grow((void **)&w->s_start, sizeof *w->s_start, o) ||
            !tok_grow((void **)&w->s_len, sizeof *w->s_len, o) || !tok_grow((void **)&w->s_fix, sizeof *w->s_fix, o) ||
            !tok_grow((void **)&w->heap, sizeof *w->heap, 3 * o))
            return 0;
        w->cap_bytes = o;
    }
    if (!w->stack) {
        if (!tok_grow((void **)&w->stack, sizeof *w->stack, 64)) return 0;
        w->cap_stack = 64;
    }
    return 1;
}

/* Step 3: the normalized run of o bytes cut into symbols, linked in order: a user-defined
 * token's text (frozen) or one UTF-8 character. Returns the number of symbols. */
static int32_t cut_symbols(const wgml_tokenizer *t, work *w, size_t o) {
    const uint8_t *u = w->norm;
    int32_t m = 0;
    for (size_t p = 0; p < o;) {
        int32_t id = t->n_special ? tok_match_special(t, u, p, o, TT_BIT(TT_USER)) : -1;
        uint32_t cp, l = id >= 0 ? t->tok_len[id] : (uint32_t)tok_utf8_next(u + p, o - p, &cp);
        w->s_start[m] = (uint32_t)p;
        w->s_len[m] = l;
        w->s_fix[m] = id;
        w->prev[m] = m - 1;
        w->next[m] = m + 1;
        m++;
        p += l;
    }
    w->next[m - 1] = -1;
    return m;
}

/* Step 4 on symbols [r0, r1), none of them frozen: the best pair merged until none is a piece.
 * Returns 0 when out of memory. */
static int merge_run(const wgml_tokenizer *t, work *w, int32_t r0, int32_t r1) {
    w->heap_n = 0;
    for (int32_t i = r0; i + 1 < r1; i++)
        if (!spm_push_pair(t, w, i, i + 1)) return 0;
    while (w->heap_n) {
        heap_item it = tok_heap_pop(w);
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
    return 1;
}

/* SentencePiece BPE on bytes [a, b) of text (no special tokens inside); prefix: add the dummy
 * prefix. Appends the ids. Returns 0 when out of memory. */
int spm_segment(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t a, size_t b, int prefix, ids_buf *out) {
    if (a == b) return 1;
    size_t o;
    if (!normalize(w, text, a, b, prefix, &o) || !reserve_symbols(w, o)) return 0;
    int32_t m = cut_symbols(t, w, o);
    /* No pair crosses a frozen symbol, so each run of symbols between frozen ones merges on
     * its own, with the same result and a smaller (cache-friendly) queue: Gemma's newlines are
     * user-defined, which cuts most text into lines. */
    for (int32_t r0 = 0, r1; r0 < m; r0 = r1) {
        r1 = r0 + 1;
        if (w->s_fix[r0] >= 0) continue;
        while (r1 < m && w->s_fix[r1] < 0) r1++;
        if (!merge_run(t, w, r0, r1)) return 0;
    }
    for (int32_t i = 0; i >= 0; i = w->next[i]) {
        if (w->s_fix[i] >= 0 ? !tok_push(out, w->s_fix[i]) : !spm_emit(t, w, w->s_start[i], w->s_len[i], out))
            return 0;
    }
    return 1;
}
