/* Byte-level BPE (tokenizer.ggml.model "gpt2": SmolLM2 and the GPT-2 family): the
 * pre-tokenizers, the GPT-2 byte-to-character map, the merge table and the merging of a piece.
 * The tokenizer's construction, special tokens and entry points are in tokenizer.c.
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
 * its rank and the merged id. Decoding maps a token's characters back to bytes. */
#include "model/tokenizer_internal.h"

#include "io/errbuf.h"
#include "model/unicode_tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PRE_GPT2 = 0, PRE_DIGITS_GPT2 = 1 };
enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };

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

static int char_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return C_SPACE;
        return C_OTHER;
    }
    if (tok_is_white_space(cp)) return C_SPACE;
    if (in_ranges(wgml_uni_letter, wgml_uni_letter_count, cp)) return C_LETTER;
    if (in_ranges(wgml_uni_number, wgml_uni_number_count, cp)) return C_NUMBER;
    return C_OTHER;
}

static int utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- construction ------------------------------------------------------------------------- */

/* The GPT-2 byte-to-character map: printable bytes map to themselves, the rest to 256+k. */
void bpe_byte_map(uint32_t map[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        map[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

/* tokenizer.ggml.pre (optional): the name is recorded (t->pre holds "default" until then) and
 * picks the pre-tokenizer. */
wgml_status bpe_read_pre(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    const char *s;
    size_t n;
    t->pre_kind = PRE_GPT2;
    if (wgml_gguf_get_string(f, "tokenizer.ggml.pre", &s, &n) == WGML_OK) {
        snprintf(t->pre, sizeof t->pre, "%.*s", (int)(n > 63 ? 63 : n), s);
        static const char *digit_first[] = {"smollm",    "starcoder", "refact", "command-r",
                                            "codeshell", "exaone",    "minerva"};
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

/* The byte-level index (every token, a later duplicate wins), then the id of each byte's
 * character. Returns 0 when out of memory. */
static int build_vocab_index(wgml_tokenizer *t, const uint32_t bmap[256], vocab_index *vi) {
    if (!tok_index_build(t, vi, -1, 1)) return 0;
    for (int b = 0; b < 256; b++) {
        char u[4];
        int l = utf8_put(bmap[b], u);
        t->byte_id[b] = tok_vocab_find(t, vi, u, (size_t)l);
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
    if (!t->merges) return tok_oom(err, errlen);
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
            a = tok_vocab_find(t, vi, s, la);
            b = tok_vocab_find(t, vi, sp + 1, lb);
            if (a >= 0 && b >= 0) {
                char stackbuf[256], *cat = la + lb <= sizeof stackbuf ? stackbuf : malloc(la + lb);
                if (!cat) return tok_oom(err, errlen);
                memcpy(cat, s, la);
                memcpy(cat + la, sp + 1, lb);
                m = tok_vocab_find(t, vi, cat, la + lb);
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
        uint64_t h = tok_mix64(key) & (t->merge_cap - 1);
        while (t->merges[h].key && t->merges[h].key != key) h = (h + 1) & (t->merge_cap - 1);
        t->merges[h].key = key; /* a later duplicate replaces the earlier one */
        t->merges[h].rank = (int32_t)r;
        t->merges[h].id = m;
    }
    return WGML_OK;
}

/* The byte tokens and the merges through a byte-level index that lives only while they are read. */
wgml_status bpe_setup(wgml_tokenizer *t, const wgml_gguf *f, const uint32_t bmap[256], char *err, size_t errlen) {
    vocab_index vi;
    if (!build_vocab_index(t, bmap, &vi)) return tok_oom(err, errlen);
    wgml_status st = read_merges(t, f, &vi, err, errlen);
    free(vi.slot);
    free(vi.hash);
    return st;
}

/* ---- encoding ----------------------------------------------------------------------------- */

static const merge_slot *merge_find(const wgml_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint64_t h = tok_mix64(key) & (t->merge_cap - 1);
    while (t->merges[h].key) {
        if (t->merges[h].key == key) return &t->merges[h];
        h = (h + 1) & (t->merge_cap - 1);
    }
    return NULL;
}

static void push_pair(const wgml_tokenizer *t, work *w, int32_t pos) {
    int32_t nx = w->next[pos];
    if (nx < 0) return;
    const merge_slot *m = merge_find(t, w->sym[pos], w->sym[nx]);
    if (m) tok_heap_push(w, (heap_item){.key = m->rank, .pos = pos});
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
        if (!tok_grow((void **)&w->sym, sizeof *w->sym, cap) || !tok_grow((void **)&w->prev, sizeof *w->prev, cap) ||
            !tok_grow((void **)&w->next, sizeof *w->next, cap) ||
            !tok_grow((void **)&w->heap, sizeof *w->heap, 3 * cap))
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
        heap_item it = tok_heap_pop(w);
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
        if (!tok_push(out, w->sym[i])) return 0;
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
            else if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                end = i + 3;
                done = 1;
            }
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
int bpe_segment(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t a, size_t b, ids_buf *out) {
    size_t nb = b - a;
    if (nb + 1 > w->cap_chars) {
        size_t cap = nb + 1;
        if (!tok_grow((void **)&w->cp, sizeof *w->cp, cap) || !tok_grow((void **)&w->off, sizeof *w->off, cap) ||
            !tok_grow((void **)&w->cls, sizeof *w->cls, cap))
            return 0;
        w->cap_chars = cap;
    }
    size_t n = 0;
    for (size_t p = a; p < b;) {
        uint32_t c;
        int l = tok_utf8_next(text + p, b - p, &c);
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
