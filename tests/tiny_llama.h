/* A tiny synthetic Llama for the tests (2 layers, width 64, random weights in Q8_0 / Q4_0 / Q4_1
 * / F32 with their dequantised values kept in double, tied or separate output head), written as a
 * GGUF file with gguf_build.h. Shared by test_llama.c, test_trainer.c and test_trainer_compare.c;
 * include after harness.h (the weights come from the seeded harness RNG). */
#ifndef WGML_TEST_TINY_LLAMA_H
#define WGML_TEST_TINY_LLAMA_H
#include "gguf_build.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { V = 96, D = 64, NL = 2, FF = 96, NH = 4, NKV = 2, HD = 16, CTX_TRAIN = 64 };
#define ROPE_BASE 10000.0
#define RMS_EPS 1e-5

typedef struct mat {
    char name[64];
    int n_dims;
    int64_t n, k;   /* W[n, k]; a vector has n = 1, n_dims = 1 */
    uint32_t type;  /* ggml type */
    uint8_t *data;
    size_t nbytes;
    double *w;      /* dequantised [n * k] */
} mat;

typedef struct synth {
    mat m[64];
    int n;
} synth;

static inline uint16_t f2h(float f) { /* normal values only (all the scales used here) */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int e = (int)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = (x >> 13) & 0x3ff;
    if (e <= 0) return (uint16_t)sign;
    return (uint16_t)(sign | ((uint32_t)e << 10) | mant);
}
static inline double h2d(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

/* A matrix of the given type with entries of typical size `scale`. */
static inline mat *add_mat(synth *s, const char *name, uint32_t type, int64_t n, int64_t k, double scale, int vector) {
    mat *m = &s->m[s->n++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->n_dims = vector ? 1 : 2;
    m->n = n, m->k = k, m->type = type;
    m->w = malloc(sizeof(double) * (size_t)(n * k));
    size_t bb = type == WGML_GGML_F32 ? 4 : type == WGML_GGML_Q8_0 ? 34 : type == WGML_GGML_Q4_0 ? 18 : 20;
    int64_t per = type == WGML_GGML_F32 ? 1 : 32;
    m->nbytes = (size_t)(n * k / per) * bb;
    m->data = calloc(1, m->nbytes);
    uint8_t *p = m->data;
    for (int64_t r = 0; r < n; r++)
        for (int64_t b = 0; b < k / per; b++) {
            double *w = m->w + r * k + b * per;
            if (type == WGML_GGML_F32) {
                float f = (float)(scale * th_uniform(-1.7, 1.7));
                memcpy(p, &f, 4);
                w[0] = f;
            } else if (type == WGML_GGML_Q8_0) { /* w = d·q, q int8 */
                uint16_t d = f2h((float)(scale / 73.0 * th_uniform(0.5, 1.5)));
                memcpy(p, &d, 2);
                for (int j = 0; j < 32; j++) {
                    int8_t q = (int8_t)floor(th_uniform(-127, 128));
                    p[2 + j] = (uint8_t)q;
                    w[j] = h2d(d) * q;
                }
            } else if (type == WGML_GGML_Q4_0) { /* w = d·(q − 8); element j: low nibble of byte j, j+16 high */
                uint16_t d = f2h((float)(scale / 4.6 * th_uniform(0.5, 1.5)));
                memcpy(p, &d, 2);
                for (int j = 0; j < 16; j++) {
                    int lo = (int)floor(th_uniform(0, 16)) & 15, hi = (int)floor(th_uniform(0, 16)) & 15;
                    p[2 + j] = (uint8_t)(lo | hi << 4);
                    w[j] = h2d(d) * (lo - 8);
                    w[j + 16] = h2d(d) * (hi - 8);
                }
            } else { /* Q4_1: w = d·q + m */
                uint16_t d = f2h((float)(scale / 4.6 * th_uniform(0.5, 1.5)));
                uint16_t mn = f2h((float)(-h2d(d) * th_uniform(6.5, 8.5)));
                memcpy(p, &d, 2);
                memcpy(p + 2, &mn, 2);
                for (int j = 0; j < 16; j++) {
                    int lo = (int)floor(th_uniform(0, 16)) & 15, hi = (int)floor(th_uniform(0, 16)) & 15;
                    p[4 + j] = (uint8_t)(lo | hi << 4);
                    w[j] = h2d(d) * lo + h2d(mn);
                    w[j + 16] = h2d(d) * hi + h2d(mn);
                }
            }
            p += bb;
        }
    return m;
}

static inline const mat *find(const synth *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->m[i].name, name)) return &s->m[i];
    return NULL;
}

static inline void synth_free(synth *s) {
    for (int i = 0; i < s->n; i++) free(s->m[i].data), free(s->m[i].w);
    s->n = 0;
}

/* Random weights. tied: no output.weight, Q8_0 embedding; else F32 embedding and output.
 * all_q: every projection 4-bit (all Q4_1 but layer 1's k, Q4_0), as the decode step's GEMV
 * fusion needs; else layer 0's v is F32 and layer 1's up Q8_0. */
static inline void synth_make_q(synth *s, int tied, int all_q) {
    s->n = 0;
    add_mat(s, "token_embd.weight", tied ? WGML_GGML_Q8_0 : WGML_GGML_F32, V, D, 1.0, 0);
    add_mat(s, "output_norm.weight", WGML_GGML_F32, 1, D, 1.0, 1);
    if (!tied) add_mat(s, "output.weight", WGML_GGML_F32, V, D, 1.0 / sqrt(D), 0);
    for (int l = 0; l < NL; l++) {
        char n[64];
        double sd = 1.0 / sqrt(D), sf = 1.0 / sqrt(FF);
#define N(x) (snprintf(n, sizeof n, "blk.%d.%s.weight", l, x), n)
        add_mat(s, N("attn_norm"), WGML_GGML_F32, 1, D, 1.0, 1);
        add_mat(s, N("ffn_norm"), WGML_GGML_F32, 1, D, 1.0, 1);
        add_mat(s, N("attn_q"), WGML_GGML_Q4_1, NH * HD, D, 2 * sd, 0);
        add_mat(s, N("attn_k"), l == 1 ? WGML_GGML_Q4_0 : WGML_GGML_Q4_1, NKV * HD, D, 2 * sd, 0);
        add_mat(s, N("attn_v"), l == 0 && !all_q ? WGML_GGML_F32 : WGML_GGML_Q4_1, NKV * HD, D, sd, 0);
        add_mat(s, N("attn_output"), WGML_GGML_Q4_1, D, NH * HD, sd, 0);
        add_mat(s, N("ffn_gate"), WGML_GGML_Q4_1, FF, D, sd, 0);
        add_mat(s, N("ffn_up"), l == 1 && !all_q ? WGML_GGML_Q8_0 : WGML_GGML_Q4_1, FF, D, sd, 0);
        add_mat(s, N("ffn_down"), WGML_GGML_Q4_1, D, FF, sf, 0);
#undef N
    }
    /* norm weights around 1 */
    for (int i = 0; i < s->n; i++)
        if (s->m[i].n_dims == 1)
            for (int64_t j = 0; j < s->m[i].k; j++) {
                float f = (float)th_uniform(0.6, 1.4);
                memcpy(s->m[i].data + 4 * j, &f, 4);
                s->m[i].w[j] = f;
            }
}
static inline void synth_make(synth *s, int tied) { synth_make_q(s, tied, 0); }

static inline void kv_str(gb *b, const char *k, const char *v) { gb_str(b, k), gb_u32(b, 8), gb_str(b, v); }
static inline void kv_u32(gb *b, const char *k, uint32_t v) { gb_str(b, k), gb_u32(b, 4), gb_u32(b, v); }
static inline void kv_f32(gb *b, const char *k, float v) { gb_str(b, k), gb_u32(b, 6), gb_f32(b, v); }

/* Writes the GGUF. arch: general.architecture, also the hyper-parameters' key prefix (the
 * llama.* keys for an architecture that is not a known family, for the wrong-architecture
 * test); skip: a tensor or key left out (NULL: none); bad_shape: a tensor written with a wrong
 * shape; window > 0: <arch>.attention.sliding_window; rope_base: <arch>.rope.freq_base. */
static inline int synth_write_ex(const synth *s, const char *path, const char *arch, const char *skip,
                                 const char *bad_shape, uint32_t window, double rope_base) {
    gb b = {0};
    int n_t = 0;
    for (int i = 0; i < s->n; i++) n_t += !skip || strcmp(skip, s->m[i].name);
    const char *pre = !strcmp(arch, "qwen2") || !strcmp(arch, "qwen3") || !strcmp(arch, "gemma3") ? arch : "llama";
    const char *suffix[] = {"context_length", "embedding_length", "block_count", "feed_forward_length",
                            "attention.head_count", "attention.head_count_kv"};
    char ukeys[6][64], key[64];
    for (int i = 0; i < 6; i++) snprintf(ukeys[i], sizeof ukeys[i], "%s.%s", pre, suffix[i]);
    const uint32_t uvals[] = {CTX_TRAIN, D, NL, FF, NH, NKV};
    int n_kv = 3 + 6 + 2 + 6 + (window > 0);
    for (int i = 0; i < 6; i++) n_kv -= skip && !strcmp(skip, ukeys[i]);
    gb_header(&b, 3, (uint64_t)n_t, (uint64_t)n_kv);
    kv_str(&b, "general.architecture", arch);
    kv_str(&b, "general.name", "synthetic");
    kv_u32(&b, "general.alignment", 32);
    for (int i = 0; i < 6; i++)
        if (!skip || strcmp(skip, ukeys[i])) kv_u32(&b, ukeys[i], uvals[i]);
    snprintf(key, sizeof key, "%s.rope.freq_base", pre);
    kv_f32(&b, key, (float)rope_base);
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", pre);
    kv_f32(&b, key, (float)RMS_EPS);
    if (window > 0) {
        snprintf(key, sizeof key, "%s.attention.sliding_window", pre);
        kv_u32(&b, key, window);
    }
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "gpt2");
    gb_str(&b, "tokenizer.ggml.tokens"), gb_u32(&b, 9), gb_u32(&b, 8), gb_u64(&b, V);
    gb_str(&b, "a"), gb_str(&b, "b"), gb_str(&b, "ab");
    for (int i = 3; i < V; i++) {
        char t[16];
        snprintf(t, sizeof t, "t%d", i);
        gb_str(&b, t);
    }
    gb_str(&b, "tokenizer.ggml.merges"), gb_u32(&b, 9), gb_u32(&b, 8), gb_u64(&b, 1), gb_str(&b, "a b");
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    uint64_t off = 0;
    for (int i = 0; i < s->n; i++) {
        const mat *m = &s->m[i];
        if (skip && !strcmp(skip, m->name)) continue;
        gb_str(&b, m->name);
        gb_u32(&b, (uint32_t)m->n_dims);
        int bad = bad_shape && !strcmp(bad_shape, m->name);
        gb_u64(&b, (uint64_t)m->k);
        if (m->n_dims == 2) gb_u64(&b, (uint64_t)(bad ? m->n / 2 : m->n));
        gb_u32(&b, m->type);
        gb_u64(&b, off);
        off += (m->nbytes + 31) / 32 * 32;
    }
    gb_pad(&b, 32);
    for (int i = 0; i < s->n; i++) {
        const mat *m = &s->m[i];
        if (skip && !strcmp(skip, m->name)) continue;
        gb_put(&b, m->data, m->nbytes);
        gb_pad(&b, 32);
    }
    int ok = gb_write(&b, path);
    free(b.p);
    return ok;
}

static inline int synth_write(const synth *s, const char *path, const char *arch, const char *skip, const char *bad_shape) {
    return synth_write_ex(s, path, arch, skip, bad_shape, 0, ROPE_BASE);
}

#endif
