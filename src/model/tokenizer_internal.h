/* What the tokenizer's files share, internal to src/model/tokenizer*.c: the tokenizer itself,
 * its token types and tables, the encoding work area with its pair queue, and the helpers that
 * more than one algorithm calls. tokenizer.c holds construction, the tables and the entry points;
 * tokenizer_bpe.c byte-level BPE ("gpt2"); tokenizer_spm.c SentencePiece BPE ("llama");
 * tokenizer_chat.c the chat formats. */
#ifndef WGML_MODEL_TOKENIZER_INTERNAL_H
#define WGML_MODEL_TOKENIZER_INTERNAL_H

#include "model/tokenizer.h"
#include "wgml-model.h"

#include <stddef.h>
#include <stdint.h>

/* Token types as tokenizer.ggml.token_type writes them. */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* A type's bit in a mask of types. */
#define TT_BIT(t) (1 << (t))

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
    int pre_kind;      /* byte-level: the pre-tokenizer (tokenizer_bpe.c) */
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
    int chat_kind;          /* the chat format (tokenizer_chat.c) */
    char err[512];
};

/* ---- shared helpers (tokenizer.c) --------------------------------------------------------- */

/* Sets t's error message (t is const for the callers' sake: the error buffer is the only mutable
 * state) and returns s. */
wgml_status tok_error(const wgml_tokenizer *t, wgml_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes "tokenizer: out of memory" into err and returns WGML_ERR_OOM. */
wgml_status tok_oom(char *err, size_t errlen);

/* Decodes one UTF-8 sequence at p (n bytes left); an invalid byte is one "character" of its
 * own (code point 0xFFFFFFFF). Returns the length in bytes. */
int tok_utf8_next(const uint8_t *p, size_t n, uint32_t *cp);
/* Whether cp has the Unicode property White_Space. */
int tok_is_white_space(uint32_t cp);

/* A 64-bit mixer for the integer-keyed tables (merges, trie edges). */
uint64_t tok_mix64(uint64_t x);
/* token text -> id over the tokens whose type is in mask (-1: all); of tokens with the same
 * text the later wins when later_wins, else the first. Returns 0 when out of memory. */
int tok_index_build(const wgml_tokenizer *t, vocab_index *vi, int mask, int later_wins);
/* The id of the token with text s[0, n) in vi, or -1. */
int32_t tok_vocab_find(const wgml_tokenizer *t, const vocab_index *vi, const char *s, size_t n);

/* An optional token id from GGUF key (*id = -1 when absent); one that is not an integer in the
 * vocabulary's range is an error. */
wgml_status tok_read_id(const wgml_tokenizer *t, const wgml_gguf *f, const char *key, int32_t *id, char *err,
                        size_t errlen);
/* An optional bool from GGUF key (def when absent); a value of another type is an error. */
wgml_status tok_read_flag(const wgml_gguf *f, const char *key, int def, int *out, char *err, size_t errlen);

/* ---- encoding: the output, the work area and its pair queue (tokenizer.c) ----------------- */

typedef struct ids_buf {
    int32_t *v;
    size_t n, cap;
} ids_buf;

/* A queued pair: key (byte-level: the merge's rank; SentencePiece: minus the score), the
 * position of its left symbol, and (SentencePiece) the length of the concatenation, by which a
 * stale entry is recognised. Popped lowest key first, then leftmost. */
typedef struct heap_item {
    double key;
    int32_t pos;
    uint32_t size;
} heap_item;

/* The scratch arrays of one encode call, grown as needed and freed at its end. */
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

/* Appends id to b. Returns 0 when out of memory. */
int tok_push(ids_buf *b, int32_t id);
/* Resizes *p to n elements of elem bytes. Returns 0 (leaving *p) when out of memory. */
int tok_grow(void **p, size_t elem, size_t n);
/* The pair queue in w->heap (w->heap_n entries; the caller sizes the array). */
void tok_heap_push(work *w, heap_item it);
heap_item tok_heap_pop(work *w);
/* The longest special token of a type in mask whose text starts at text[p] (len bytes in all),
 * or -1. */
int32_t tok_match_special(const wgml_tokenizer *t, const uint8_t *text, size_t p, size_t len, int mask);

/* ---- byte-level BPE (tokenizer_bpe.c) ----------------------------------------------------- */

/* The GPT-2 byte-to-character map: printable bytes map to themselves, the rest to 256+k. */
void bpe_byte_map(uint32_t map[256]);
/* tokenizer.ggml.pre (optional): records its name and picks the pre-tokenizer; an unknown one
 * is an error. */
wgml_status bpe_read_pre(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen);
/* The byte tokens' ids (through bmap) and tokenizer.ggml.merges. */
wgml_status bpe_setup(wgml_tokenizer *t, const wgml_gguf *f, const uint32_t bmap[256], char *err, size_t errlen);
/* Pre-tokenizes and encodes bytes [a, b) of text (no special tokens inside); appends the ids.
 * Returns 0 when out of memory. */
int bpe_segment(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t a, size_t b, ids_buf *out);

/* ---- SentencePiece BPE (tokenizer_spm.c) -------------------------------------------------- */

/* Scores, checked token types, byte tokens, the unknown token, the pieces index and each
 * token's decoded bytes. */
wgml_status spm_setup(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen);
/* SentencePiece BPE on bytes [a, b) of text (no special tokens inside); prefix: add the dummy
 * prefix. Appends the ids. Returns 0 when out of memory. */
int spm_segment(const wgml_tokenizer *t, work *w, const uint8_t *text, size_t a, size_t b, int prefix, ids_buf *out);

/* ---- chat formats (tokenizer_chat.c) ------------------------------------------------------ */

/* tokenizer.chat_template (optional) kept, and the chat format recognised. */
wgml_status chat_read_template(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen);

#endif
