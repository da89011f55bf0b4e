/* Architectures as data (src/model/arch.c): tiny synthetic Qwen2, Qwen3 and Gemma 3 models
 * (the tiny Llama of tiny_llama.h plus each family's tensors and keys, written as GGUF) against
 * a double-precision forward written here from each family's definition (Hugging Face's Qwen2,
 * Qwen3 and Gemma 3 decoder layers: qkv biases; per-head q/k RMSNorm before RoPE; NeoX RoPE
 * pairs (i, i + hd/2); Gemma's sqrt(d) embedding multiplier, RMSNorm after attention and FFN,
 * tanh-GELU GLU, sliding window on every layer but each sixth with the local RoPE base 10000).
 * Prefill and decode through the KV cache; the description read from the metadata; a Gemma 3
 * LoRA training run through the trainer (window attention, GELU, q/k and post norms in the
 * backward) whose loss falls. The real Gemma-3-270M is tests/py/test_gemma3_logits.py. */
#define _POSIX_C_SOURCE 200809L
#include "gguf_build.h"
#include "harness.h"
#include "model/arch.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiny_llama.h"
#include "wall_clock.h"

enum { WINDOW = 4 };
#define GLOBAL_BASE 1000000.0
#define LOCAL_BASE 10000.0

typedef struct family {
    const char *name;
    int bias, qk_norm, post_norms, gemma;
} family;

static const family FAMILIES[] = {
    {"qwen2", 1, 0, 0, 0},
    {"qwen3", 0, 1, 0, 0},
    {"gemma3", 0, 1, 1, 1},
};

/* The tiny Llama plus the family's tensors: biases [n] of q, k, v; q/k norms [HD]; post norms. */
static void make_family(synth *s, const family *f) {
    synth_make(s, 1);
    for (int l = 0; l < NL; l++) {
        char n[64];
        int first = s->n;
#define N(x, suf) (snprintf(n, sizeof n, "blk.%d.%s.%s", l, x, suf), n)
        if (f->bias) {
            add_mat(s, N("attn_q", "bias"), WGML_GGML_F32, 1, NH * HD, 0.5, 1);
            add_mat(s, N("attn_k", "bias"), WGML_GGML_F32, 1, NKV * HD, 0.5, 1);
            add_mat(s, N("attn_v", "bias"), WGML_GGML_F32, 1, NKV * HD, 0.5, 1);
            first = s->n; /* biases keep their random values */
        }
        if (f->qk_norm) {
            add_mat(s, N("attn_q_norm", "weight"), WGML_GGML_F32, 1, HD, 1.0, 1);
            add_mat(s, N("attn_k_norm", "weight"), WGML_GGML_F32, 1, HD, 1.0, 1);
        }
        if (f->post_norms) {
            add_mat(s, N("post_attention_norm", "weight"), WGML_GGML_F32, 1, D, 1.0, 1);
            add_mat(s, N("post_ffw_norm", "weight"), WGML_GGML_F32, 1, D, 1.0, 1);
        }
#undef N
        for (int i = first; i < s->n; i++) /* norm weights around 1 */
            for (int64_t j = 0; j < s->m[i].k; j++) {
                float v = (float)th_uniform(0.6, 1.4);
                memcpy(s->m[i].data + 4 * j, &v, 4);
                s->m[i].w[j] = v;
            }
    }
}

/* ------------------------------------------------------------------ the fp64 reference */

static void rms(const double *x, const double *w, int n, double *out) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + RMS_EPS);
    for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

/* y[n] = W[n, k] x[k] (+ bias) */
static void mv(const mat *m, const mat *bias, const double *x, double *y) {
    for (int64_t r = 0; r < m->n; r++) {
        double acc = bias ? bias->w[r] : 0;
        for (int64_t c = 0; c < m->k; c++) acc += m->w[r * m->k + c] * x[c];
        y[r] = acc;
    }
}

/* NeoX rope: elements i and i + HD/2 of each head rotate by pos·base^(-2i/HD) */
static void rope_half(double *v, int heads, int pos, double base) {
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < HD / 2; i++) {
            double a = pos * pow(base, -2.0 * i / HD), c = cos(a), sn = sin(a);
            double *p = v + h * HD, x0 = p[i], x1 = p[i + HD / 2];
            p[i] = x0 * c - x1 * sn;
            p[i + HD / 2] = x0 * sn + x1 * c;
        }
}

static double gelu_tanh(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))); }

static int windowed(const family *f, int l) { return f->gemma && (l + 1) % 6 != 0; }

/* logits[S][V] of the sequence ids[0..S) */
static void ref_forward(const synth *s, const family *f, const int32_t *ids, int S, double *logits) {
    double *x = malloc(sizeof(double) * (size_t)S * D), *K = malloc(sizeof(double) * (size_t)S * NKV * HD);
    double *Vv = malloc(sizeof(double) * (size_t)S * NKV * HD), *Q = malloc(sizeof(double) * (size_t)S * NH * HD);
    double h[D], a[NH * HD], o[D], g[FF], u[FF], sc[256], tmp[HD];
    const mat *emb = find(s, "token_embd.weight");
    double mult = f->gemma ? (double)(float)sqrt((double)D) : 1.0;
    for (int t = 0; t < S; t++)
        for (int i = 0; i < D; i++) x[t * D + i] = emb->w[(int64_t)ids[t] * D + i] * mult;
    for (int l = 0; l < NL; l++) {
        char n[64];
#define W(nm) (snprintf(n, sizeof n, "blk.%d.%s.weight", l, nm), find(s, n))
#define B(nm) (snprintf(n, sizeof n, "blk.%d.%s.bias", l, nm), find(s, n))
        double base = !f->gemma ? ROPE_BASE : windowed(f, l) ? LOCAL_BASE : GLOBAL_BASE;
        for (int t = 0; t < S; t++) {
            rms(x + t * D, W("attn_norm")->w, D, h);
            mv(W("attn_q"), B("attn_q"), h, Q + t * NH * HD);
            mv(W("attn_k"), B("attn_k"), h, K + t * NKV * HD);
            mv(W("attn_v"), B("attn_v"), h, Vv + t * NKV * HD);
            if (f->qk_norm) {
                for (int hh = 0; hh < NH; hh++) {
                    rms(Q + t * NH * HD + hh * HD, W("attn_q_norm")->w, HD, tmp);
                    memcpy(Q + t * NH * HD + hh * HD, tmp, sizeof tmp);
                }
                for (int hh = 0; hh < NKV; hh++) {
                    rms(K + t * NKV * HD + hh * HD, W("attn_k_norm")->w, HD, tmp);
                    memcpy(K + t * NKV * HD + hh * HD, tmp, sizeof tmp);
                }
            }
            rope_half(Q + t * NH * HD, NH, t, base);
            rope_half(K + t * NKV * HD, NKV, t, base);
        }
        for (int t = 0; t < S; t++) {
            int j0 = windowed(f, l) && t >= WINDOW ? t - WINDOW + 1 : 0;
            for (int hh = 0; hh < NH; hh++) {
                int kh = hh / (NH / NKV);
                double mx = -INFINITY, sum = 0;
                for (int j = j0; j <= t; j++) {
                    double d = 0;
                    for (int e = 0; e < HD; e++) d += Q[t * NH * HD + hh * HD + e] * K[j * NKV * HD + kh * HD + e];
                    sc[j] = d / sqrt(HD);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = j0; j <= t; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int e = 0; e < HD; e++) {
                    double acc = 0;
                    for (int j = j0; j <= t; j++) acc += sc[j] * Vv[j * NKV * HD + kh * HD + e];
                    a[hh * HD + e] = acc / sum;
                }
            }
            mv(W("attn_output"), NULL, a, o);
            if (f->post_norms) rms(o, W("post_attention_norm")->w, D, o);
            for (int i = 0; i < D; i++) x[t * D + i] += o[i];
            rms(x + t * D, W("ffn_norm")->w, D, h);
            mv(W("ffn_gate"), NULL, h, g);
            mv(W("ffn_up"), NULL, h, u);
            for (int i = 0; i < FF; i++) g[i] = (f->gemma ? gelu_tanh(g[i]) : g[i] / (1 + exp(-g[i]))) * u[i];
            mv(W("ffn_down"), NULL, g, o);
            if (f->post_norms) rms(o, W("post_ffw_norm")->w, D, o);
            for (int i = 0; i < D; i++) x[t * D + i] += o[i];
        }
#undef W
#undef B
    }
    for (int t = 0; t < S; t++) {
        rms(x + t * D, find(s, "output_norm.weight")->w, D, h);
        mv(emb, NULL, h, logits + (size_t)t * V);
    }
    free(x), free(K), free(Vv), free(Q);
}

/* ------------------------------------------------------------------ tests */

/* The description arch_from_gguf reads from the file. */
static void check_description(const family *f, const char *path) {
    char err[512];
    wgml_gguf *file;
    if (!th_check(!wgml_gguf_open(path, &file, err, sizeof err), "open %s: %s", path, err)) return;
    model_arch a;
    wgml_llama_config c = {0};
    wgml_status s = arch_from_gguf(file, &a, &c, err, sizeof err);
    th_check(!s, "%s: arch_from_gguf: %s", f->name, err);
    if (!s) {
        th_check(!strcmp(a.name, f->name) && a.qkv_bias == (bool)f->bias && a.qk_norm == (bool)f->qk_norm &&
                     a.post_norms == (bool)f->post_norms && a.rope_style == WGML_ROPE_HALF &&
                     a.act == (f->gemma ? ARCH_GELU_TANH_GLU : ARCH_SILU_GLU) && a.attn_softcap == 0 &&
                     a.final_softcap == 0,
                 "%s: family facts (bias %d, qk_norm %d, post_norms %d, act %d, rope %d)", f->name, a.qkv_bias,
                 a.qk_norm, a.post_norms, (int)a.act, (int)a.rope_style);
        double base = f->gemma ? GLOBAL_BASE : ROPE_BASE;
        th_check(a.rope_base == (float)base && a.window == (f->gemma ? WINDOW : 0) &&
                     a.swa_pattern == (f->gemma ? 6 : 0) && a.rope_base_local == (float)(f->gemma ? LOCAL_BASE : base) &&
                     a.embed_mult == (f->gemma ? (float)sqrt((double)D) : 1.0f) &&
                     a.attn_scale == (float)(1.0 / sqrt((double)HD)) && c.n_layer == NL && c.n_head == NH &&
                     c.n_head_kv == NKV && c.head_dim == HD && c.n_vocab == V && c.tied_output,
                 "%s: values from the metadata (base %g, local %g, window %lld, pattern %d, mult %g, scale %g)",
                 f->name, (double)a.rope_base, (double)a.rope_base_local, (long long)a.window, a.swa_pattern,
                 (double)a.embed_mult, (double)a.attn_scale);
        th_check(arch_layer_windowed(&a, 0) == (f->gemma != 0) && !arch_layer_windowed(&a, 5) &&
                     arch_layer_windowed(&a, 6) == (f->gemma != 0),
                 "%s: windowed layers", f->name);
    }
    wgml_gguf_close(file);
}

/* Prefill S0 tokens, then decode the rest one by one; every row against the reference. */
static void check_logits(const family *f, const synth *s, const char *path) {
    enum { S = 11, S0 = 6 };
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    if (!th_check(m != NULL, "%s: load: %s", f->name, wgml_last_error(T.ctx))) return;
    int32_t ids[S];
    for (int i = 0; i < S; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
    double *ref = malloc(sizeof(double) * S * V);
    ref_forward(s, f, ids, S, ref);
    float got[V];
    int32_t next = -1;
    char name[96];
    wgml_status st = wgml_model_prefill(m, ids, S0, got, &next);
    th_check(!st, "%s: prefill: %s", f->name, wgml_last_error(T.ctx));
    for (int t = S0 - 1; t < S && !st; t++) {
        if (t >= S0) st = wgml_model_decode(m, ids[t], got, &next);
        th_check(!st, "%s: decode: %s", f->name, wgml_last_error(T.ctx));
        snprintf(name, sizeof name, "%s logits at position %d (%s)", f->name, t, t < S0 ? "prefill" : "decode");
        /* fp32 through 2 layers of width 64 from the same dequantised weights */
        if (!st) th_close(name, got, ref + (size_t)t * V, V, 1e-4, 1e-4);
    }
    free(ref);
    wgml_model_free(m);
}

/* A LoRA run on all projections of the tiny Gemma 3: the loss on a fixed batch falls. */
static void check_training(const char *path) {
    enum { TS = 12, STEPS = 12 };
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    if (!th_check(m != NULL, "gemma3 training: load: %s", wgml_last_error(T.ctx))) return;
    wgml_train_config cfg = wgml_train_defaults();
    cfg.lora_rank = 4;
    cfg.lora_alpha = 8.0f;
    cfg.targets = WGML_TARGET_ALL;
    cfg.batch = 1;
    cfg.seq_len = TS;
    cfg.lr = 1e-2f;
    cfg.seed = 5;
    wgml_trainer *tr = wgml_trainer_new(m, &cfg);
    if (!th_check(tr != NULL, "gemma3 trainer_new: %s", wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        return;
    }
    int32_t tok[TS], lab[TS];
    for (int i = 0; i < TS; i++) tok[i] = (int32_t)((i * 29 + 5) % V), lab[i] = (int32_t)((i * 13 + 7) % V);
    float loss[STEPS];
    int ok = 1;
    for (int s = 0; s < STEPS && ok; s++)
        ok = th_check(!wgml_trainer_step(tr, tok, lab, cfg.lr, &loss[s]), "gemma3 step %d: %s", s, wgml_last_error(T.ctx));
    if (ok)
        th_check(isfinite(loss[0]) && loss[STEPS - 1] < 0.8f * loss[0], "gemma3 LoRA: loss %.4f -> %.4f", (double)loss[0],
                 (double)loss[STEPS - 1]);
    wgml_trainer_free(tr);
    wgml_model_free(m);
}

/* The start of .deps/data/kjv.txt as Gemma 3 token ids (transformers' tokenizer of the GGUF,
 * BOS first; fixed here until wgml has the SentencePiece tokenizer). */
static const int32_t KJV_IDS[] = {2, 107, 121735, 236743, 236770, 108, 138, 236770, 799, 506, 6534, 3803, 4464, 506, 20808, 532, 506, 7764, 236761, 107, 138, 236778, 1452, 506, 7764, 691, 2180, 1183, 236764, 532, 2325, 236793, 532, 29151, 691, 3324, 506, 3392, 529, 107, 1437, 5268, 236761, 1452, 506, 18260, 529, 3803, 7808, 3324, 506, 3392, 529, 506, 14513, 236761, 107, 138, 236800, 1452, 3803, 1176, 236764, 3792, 993, 577, 2214, 236787, 532, 993, 691, 2214, 236761, 107, 138, 236812, 1452, 3803, 5004, 506, 2214, 236764, 600, 625, 691, 1535, 236787, 532, 3803, 11310, 506, 2214, 699, 506, 107, 14123, 1788, 236761, 107, 138, 236810, 1452, 3803, 2760, 506, 2214, 6156, 236764, 532, 506, 29151, 668, 2760, 15895, 236761, 1452, 506, 107, 125067, 532, 506, 5597, 964, 506, 1171, 1719, 236761, 107, 138, 236825, 1452, 3803, 1176, 236764, 3792, 993, 577, 496, 6218, 1767, 528, 506, 38362, 529, 506, 14513, 236764, 532, 1531, 107, 509, 19226, 506, 14513, 699, 506, 14513, 236761, 107, 138, 236832, 1452, 3803, 1603, 506, 6218};

/* `test_arch --gemma FILE`: a LoRA fine-tune of Gemma-3-270M (all projections, rank 8) on three
 * 16-token rows of KJV lowers the loss of the next, held-out row. Sized for lavapipe: a step
 * (forward and backward with the 262,144-word head) takes 20-30 s there; the whole test ~2 min. */
static int gemma_finetune(const char *path) {
    enum { SS = 16, TRAIN_ROWS = 3, STEPS = 3 };
    if (access(path, R_OK)) {
        printf("model file missing: %s\n", path);
        return 1;
    }
    double t0 = now();
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    if (!th_check(m != NULL, "load %s: %s", path, wgml_last_error(T.ctx))) return th_done();
    wgml_train_config cfg = wgml_train_defaults();
    cfg.lora_rank = 8;
    cfg.lora_alpha = 16.0f;
    cfg.targets = WGML_TARGET_ALL;
    cfg.batch = 1;
    cfg.seq_len = SS;
    cfg.lr = 2e-3f;
    cfg.clip_norm = 1.0f;
    cfg.seed = 11;
    wgml_trainer *tr = wgml_trainer_new(m, &cfg);
    if (!th_check(tr != NULL, "gemma trainer_new: %s", wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        return th_done();
    }
    printf("  gemma: loaded and trainer built in %.1f s\n", now() - t0);
    const int32_t *held = KJV_IDS + TRAIN_ROWS * SS;
    double before = 0, after = 0;
    int64_t nv = 0;
    int ok = th_check(!wgml_trainer_eval(tr, held, held + 1, &before, &nv), "eval: %s", wgml_last_error(T.ctx));
    for (int s = 0; s < STEPS && ok; s++) {
        const int32_t *row = KJV_IDS + (s % TRAIN_ROWS) * SS;
        float loss;
        double ts = now();
        ok = th_check(!wgml_trainer_step(tr, row, row + 1, cfg.lr, &loss), "gemma step %d: %s", s, wgml_last_error(T.ctx));
        if (ok) printf("  gemma: step %d train loss %.4f (%.1f s)\n", s, (double)loss, now() - ts);
    }
    ok = ok && th_check(!wgml_trainer_eval(tr, held, held + 1, &after, &nv), "eval: %s", wgml_last_error(T.ctx));
    printf("  gemma: held-out loss %.4f -> %.4f (%.1f s in all)\n", before / SS, after / SS, now() - t0);
    if (ok)
        th_check(nv == SS && after < before, "Gemma-3-270M LoRA: held-out loss %.4f -> %.4f", before / SS, after / SS);
    wgml_trainer_free(tr);
    wgml_model_free(m);
    return th_done();
}

/* One family: its description, logits against the reference, and (Gemma 3) training. */
static void run_family(int i) {
    const family *f = &FAMILIES[i];
    synth s;
    make_family(&s, f);
    char path[128];
    th_tmp_path(path, sizeof path, "wgml_test_arch_%s_%d.gguf", f->name, (int)getpid());
    if (th_check(synth_write_ex(&s, path, f->name, NULL, NULL, f->gemma ? WINDOW : 0, f->gemma ? GLOBAL_BASE : ROPE_BASE),
                 "write %s", path)) {
        check_description(f, path);
        check_logits(f, &s, path);
        if (f->gemma) check_training(path);
    }
    unlink(path);
    synth_free(&s);
}

static void part_qwen2(void) { run_family(0); }

/* Qwen3, and a family tensor missing from the file named in the error. */
static void part_qwen3(void) {
    run_family(1);
    synth s;
    synth_make(&s, 1);
    char path[128];
    th_tmp_path(path, sizeof path, "wgml_test_arch_bad_%d.gguf", (int)getpid());
    th_check(synth_write_ex(&s, path, "qwen3", "blk.0.attn_q_norm.weight", NULL, 0, ROPE_BASE), "write %s", path);
    wgml_model *m = wgml_model_load(T.ctx, path, NULL);
    th_expect_error("qwen3 without its q norm", m == NULL, WGML_ERR_FORMAT, "blk.0.attn_q_norm.weight", NULL);
    wgml_model_free(m);
    unlink(path);
    synth_free(&s);
}

static void part_gemma3(void) { run_family(2); }

int main(int argc, char **argv) {
    /* the fused inference graphs, as a GPU runs them (a CPU adapter's default is the plain ops,
     * which test_generate and the Python and browser tests run) */
    th_setenv("WGML_LLAMA_UNFUSED", "0", 0);
    if (argc == 3 && !strcmp(argv[1], "--gemma")) {
        setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines as they come */
        th_init_args("test_arch", 1, argv);
        return gemma_finetune(argv[2]);
    }
    th_init_args("test_arch", argc, argv);
    static const th_part parts[] = {{"qwen2", part_qwen2}, {"qwen3", part_qwen3}, {"gemma3", part_gemma3}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
