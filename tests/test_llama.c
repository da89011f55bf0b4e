/* The Llama model (src/model/decoder*.c), sampling and generation.
 *
 * A tiny synthetic Llama (2 layers, random weights in Q8_0 / Q4_0 / Q4_1 / F32, written as a
 * GGUF file with gguf_build.h) is loaded and its logits are compared with a double-precision
 * forward written here from the dequantised weights (the dequantisation formulas written out
 * below, not wgml's). Also: loading errors, prefill + decode consistency through the KV cache,
 * greedy generation against the reference's greedy continuation, and the sampler. */
#define _POSIX_C_SOURCE 200809L
#include "gguf_build.h"
#include "harness.h"
#include "model/decoder.h"
#include "wgml-model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiny_llama.h"
#include "wall_clock.h"

/* ------------------------------------------------------------------ the fp64 reference */

static void ref_rms(const double *x, const double *w, double *out) {
    double ss = 0;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / D + RMS_EPS);
    for (int i = 0; i < D; i++) out[i] = x[i] * r * w[i];
}

/* y[n] = W[n, k] x[k] */
static void ref_mv(const mat *m, const double *x, double *y) {
    for (int64_t r = 0; r < m->n; r++) {
        double acc = 0;
        for (int64_t c = 0; c < m->k; c++) acc += m->w[r * m->k + c] * x[c];
        y[r] = acc;
    }
}

/* rope, adjacent pairs (2i, 2i+1) of each head rotate by pos·base^(-2i/HD) */
static void ref_rope(double *v, int heads, int pos) {
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < HD / 2; i++) {
            double a = pos * pow(ROPE_BASE, -2.0 * i / HD), c = cos(a), s = sin(a);
            double *p = v + h * HD + 2 * i, x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s;
            p[1] = x0 * s + x1 * c;
        }
}

/* logits[S][V] of the sequence ids[0..S) */
static void ref_forward(const synth *s, const int32_t *ids, int S, double *logits) {
    double *x = malloc(sizeof(double) * (size_t)S * D), *K = malloc(sizeof(double) * (size_t)S * NKV * HD);
    double *Vv = malloc(sizeof(double) * (size_t)S * NKV * HD), *Q = malloc(sizeof(double) * (size_t)S * NH * HD);
    double h[D], a[NH * HD], o[D], g[FF], u[FF], sc[256];
    const mat *emb = find(s, "token_embd.weight");
    for (int t = 0; t < S; t++) memcpy(x + t * D, emb->w + (int64_t)ids[t] * D, sizeof(double) * D);
    for (int l = 0; l < NL; l++) {
        char n[64];
#define W(nm) (snprintf(n, sizeof n, "blk.%d.%s.weight", l, nm), find(s, n))
        for (int t = 0; t < S; t++) {
            ref_rms(x + t * D, W("attn_norm")->w, h);
            ref_mv(W("attn_q"), h, Q + t * NH * HD);
            ref_mv(W("attn_k"), h, K + t * NKV * HD);
            ref_mv(W("attn_v"), h, Vv + t * NKV * HD);
            ref_rope(Q + t * NH * HD, NH, t);
            ref_rope(K + t * NKV * HD, NKV, t);
        }
        for (int t = 0; t < S; t++) {
            for (int hh = 0; hh < NH; hh++) {
                int kh = hh / (NH / NKV);
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    double d = 0;
                    for (int e = 0; e < HD; e++) d += Q[t * NH * HD + hh * HD + e] * K[j * NKV * HD + kh * HD + e];
                    sc[j] = d / sqrt(HD);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j <= t; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int e = 0; e < HD; e++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++) acc += sc[j] * Vv[j * NKV * HD + kh * HD + e];
                    a[hh * HD + e] = acc / sum;
                }
            }
            ref_mv(W("attn_output"), a, o);
            for (int i = 0; i < D; i++) x[t * D + i] += o[i];
            ref_rms(x + t * D, W("ffn_norm")->w, h);
            ref_mv(W("ffn_gate"), h, g);
            ref_mv(W("ffn_up"), h, u);
            for (int i = 0; i < FF; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            ref_mv(W("ffn_down"), g, o);
            for (int i = 0; i < D; i++) x[t * D + i] += o[i];
        }
#undef W
    }
    const mat *out = find(s, "output.weight");
    if (!out) out = emb;
    for (int t = 0; t < S; t++) {
        ref_rms(x + t * D, find(s, "output_norm.weight")->w, h);
        ref_mv(out, h, logits + (size_t)t * V);
    }
    free(x), free(K), free(Vv), free(Q);
}

static int argmax_d(const double *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}
static double margin(const double *x, int n) { /* top1 - top2 */
    int b = argmax_d(x, n);
    double second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && x[i] > second) second = x[i];
    return x[b] - second;
}

/* ------------------------------------------------------------------ tests */

static char g_path[256];

static void test_load_errors(const synth *s) {
    wgml_model *m = wgml_model_load(T.ctx, "/nonexistent/model.gguf", NULL);
    th_expect_error("load: missing file", m == NULL, WGML_ERR_IO, "/nonexistent/model.gguf", NULL);
    th_check(synth_write(s, g_path, "gpt2", NULL, NULL), "write gguf");
    m = wgml_model_load(T.ctx, g_path, NULL);
    th_expect_error("load: wrong architecture", m == NULL, WGML_ERR_UNSUPPORTED, "architecture", "gpt2", NULL);
    th_check(synth_write(s, g_path, "llama", "blk.1.ffn_down.weight", NULL), "write gguf");
    m = wgml_model_load(T.ctx, g_path, NULL);
    th_expect_error("load: missing tensor", m == NULL, WGML_ERR_FORMAT, "missing tensor", "blk.1.ffn_down.weight", NULL);
    th_check(synth_write(s, g_path, "llama", "llama.block_count", NULL), "write gguf");
    m = wgml_model_load(T.ctx, g_path, NULL);
    th_expect_error("load: missing key", m == NULL, WGML_ERR_FORMAT, "llama.block_count", NULL);
    th_check(synth_write(s, g_path, "llama", NULL, "blk.0.attn_k.weight"), "write gguf");
    m = wgml_model_load(T.ctx, g_path, NULL);
    th_expect_error("load: wrong shape", m == NULL, WGML_ERR_FORMAT, "blk.0.attn_k.weight", "expected", NULL);
    m = wgml_model_load(T.ctx, NULL, NULL);
    th_expect_error("load: NULL path", m == NULL, WGML_ERR_ARG, "path", NULL);
}

static void close_rows(const char *name, const float *got, const double *ref) {
    /* fp32 through 2 layers of width <= 96 on O(1) values: errors ~1e-6; 1e-4 absolute
     * leaves room and still catches any wrong position, pairing or head mapping (O(0.1)). */
    th_close(name, got, ref, V, 1e-4, 1e-4);
}

static void test_model(int tied) {
    synth s;
    synth_make(&s, tied);
    if (tied) test_load_errors(&s);
    th_check(synth_write(&s, g_path, "llama", NULL, NULL), "write gguf");
    wgml_model_options mo = {.n_ctx = 40};
    double t0 = now();
    wgml_model *m = wgml_model_load(T.ctx, g_path, &mo);
    double t1 = now();
    if (!th_check(m != NULL, "load synthetic llama (tied %d): %s", tied, m ? "" : wgml_last_error(T.ctx))) {
        synth_free(&s);
        return;
    }
    const wgml_llama_config *c = wgml_model_config(m);
    th_check(c->n_vocab == V && c->n_embd == D && c->n_layer == NL && c->n_ff == FF && c->n_head == NH &&
                 c->n_head_kv == NKV && c->head_dim == HD && c->n_ctx_train == CTX_TRAIN && c->n_ctx == 40 &&
                 c->tied_output == tied && fabsf(c->rope_base - (float)ROPE_BASE) < 1e-3f &&
                 fabsf(c->rms_eps - (float)RMS_EPS) < 1e-10f,
             "config from metadata (tied %d)", tied);
    th_check(wgml_model_is_stop(m, 2) && !wgml_model_is_stop(m, 5), "EOS is a stop token");

    enum { S = 23 };
    int32_t ids[S];
    for (int i = 0; i < S; i++) ids[i] = (int32_t)floor(th_uniform(0, V));
    double *ref = malloc(sizeof(double) * S * V);
    ref_forward(&s, ids, S, ref);
    float got[V], pre[V];
    int32_t next = -1;
    char name[128];

    /* prefills of several lengths (padded buckets 16, 32, 8; exactly a bucket: 8; one token) */
    const int lens[] = {11, 8, 1, 23, 3};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        int n = lens[i];
        wgml_model_reset(m);
        wgml_status st = wgml_model_prefill(m, ids, (size_t)n, got, &next);
        snprintf(name, sizeof name, "tied %d: prefill %d tokens, last logits", tied, n);
        if (!th_check(st == WGML_OK, "%s: %s", name, wgml_last_error(T.ctx))) continue;
        close_rows(name, got, ref + (size_t)(n - 1) * V);
        if (margin(ref + (size_t)(n - 1) * V, V) > 1e-3)
            th_check(next == argmax_d(ref + (size_t)(n - 1) * V, V), "%s: GPU argmax %d, reference %d", name, next,
                     argmax_d(ref + (size_t)(n - 1) * V, V));
        th_check(wgml_model_pos(m) == n, "position after prefill");
        if (n == 23) memcpy(pre, got, sizeof pre);
    }

    /* prefill 9, then decode tokens 9..22 through the KV cache; compare each step with the
     * reference row and the last with the 23-token prefill */
    wgml_model_reset(m);
    wgml_status st = wgml_model_prefill(m, ids, 9, NULL, NULL);
    double worst = 0;
    int ok_argmax = 1;
    for (int p = 9; p < S && !st; p++) {
        st = wgml_model_decode(m, ids[p], got, &next);
        for (int j = 0; j < V && !st; j++) worst = th_max_err(worst, fabs(got[j] - ref[(size_t)p * V + j]));
        snprintf(name, sizeof name, "tied %d: decode step at position %d", tied, p);
        close_rows(name, got, ref + (size_t)p * V);
        if (margin(ref + (size_t)p * V, V) > 1e-3) ok_argmax &= next == argmax_d(ref + (size_t)p * V, V);
    }
    th_check(st == WGML_OK, "decode steps: %s", wgml_last_error(T.ctx));
    th_check(ok_argmax, "tied %d: decode GPU argmax equals the reference's", tied);
    printf("  tied %d: decode max |err| vs fp64 %.2e\n", tied, worst);
    double d = 0;
    for (int j = 0; j < V; j++) d = th_max_err(d, fabs(got[j] - pre[j]));
    /* both fp32, different kernels (GEMV for one row, tiled GEMM for many) and summation orders */
    th_check(d < 1e-4, "tied %d: decode logits at position 22 equal the 23-token prefill's (max diff %.2e)", tied, d);

    /* a second prefill continuing after decode steps (position > 0) */
    wgml_model_reset(m);
    st = wgml_model_prefill(m, ids, 5, NULL, NULL);
    if (!st) st = wgml_model_decode(m, ids[5], NULL, NULL);
    if (!st) st = wgml_model_prefill(m, ids + 6, 12, got, NULL);
    if (th_check(st == WGML_OK, "prefill after decode: %s", wgml_last_error(T.ctx)))
        close_rows("prefill continuing at position 6", got, ref + (size_t)17 * V);

    /* a short cache: padding would run past it, so the prefill graphs take the exact length */
    wgml_model_options short_ctx = {.n_ctx = 24};
    wgml_model *m2 = wgml_model_load(T.ctx, g_path, &short_ctx);
    st = m2 ? wgml_model_prefill(m2, ids, 20, NULL, NULL) : WGML_ERR_ARG;
    if (!st) st = wgml_model_prefill(m2, ids + 20, 3, got, NULL);
    if (th_check(st == WGML_OK, "prefill near the end of a short cache: %s", wgml_last_error(T.ctx)))
        close_rows("prefill of 20 then 3 tokens in a 24-row cache", got, ref + (size_t)22 * V);
    wgml_model_free(m2);

    /* errors */
    wgml_model_reset(m);
    int32_t bad = V;
    th_expect_error("prefill: id out of range", wgml_model_prefill(m, &bad, 1, NULL, NULL) != WGML_OK, WGML_ERR_ARG,
                    "outside the vocabulary", NULL);
    th_expect_error("decode: id out of range", wgml_model_decode(m, -1, NULL, NULL) != WGML_OK, WGML_ERR_ARG,
                    "outside the vocabulary", NULL);
    th_expect_error("prefill: no tokens", wgml_model_prefill(m, ids, 0, NULL, NULL) != WGML_OK, WGML_ERR_ARG,
                    "no tokens", NULL);
    wgml_gen_options none = {.max_tokens = 4};
    th_expect_error("generate: NULL options", wgml_generate(m, ids, 3, NULL, NULL, NULL, NULL, NULL, NULL) != WGML_OK,
                    WGML_ERR_ARG, "generate", NULL);
    th_check(wgml_generate(NULL, ids, 3, &none, NULL, NULL, NULL, NULL, NULL) == WGML_ERR_ARG, "generate: NULL model");
    wgml_clear_error(T.ctx);
    int32_t many[41] = {0};
    th_expect_error("prefill: past the context", wgml_model_prefill(m, many, 41, NULL, NULL) != WGML_OK, WGML_ERR_LIMIT,
                    "context", NULL);

    /* greedy generation equals the reference's greedy continuation */
    if (tied) {
        enum { NP = 5, NG = 8 };
        int32_t seq[NP + NG];
        memcpy(seq, ids, sizeof(int32_t) * NP);
        double *r = malloc(sizeof(double) * (NP + NG) * V);
        int ref_n = 0, decisive = 1;
        for (int t = NP; t < NP + NG; t++) {
            ref_forward(&s, seq, t, r);
            decisive &= margin(r + (size_t)(t - 1) * V, V) > 1e-3;
            seq[t] = argmax_d(r + (size_t)(t - 1) * V, V);
            if (seq[t] == 2) break; /* EOS stops */
            ref_n++;
        }
        wgml_gen_options go = {.max_tokens = NG, .sampler = {0, 0, 0}, .seed = 1};
        int32_t *out = NULL;
        size_t n_out = 0;
        wgml_gen_stats gs;
        st = wgml_generate(m, ids, NP, &go, NULL, NULL, &gs, &out, &n_out);
        int same = st == WGML_OK && (int)n_out == ref_n;
        for (int i = 0; same && i < ref_n; i++) same = out[i] == seq[NP + i];
        if (decisive) th_check(same, "greedy generation equals the reference (%d tokens)", ref_n);
        th_check(gs.prompt_tokens == NP && gs.generated_tokens == n_out, "generation stats");
        free(out);
        /* sampling: the same seed gives the same tokens; top_k = 1 is greedy */
        wgml_gen_options so = {.max_tokens = 6, .sampler = {1.0f, 0, 1.0f}, .seed = 42};
        int32_t *o1 = NULL, *o2 = NULL;
        size_t n1 = 0, n2 = 0;
        st = wgml_generate(m, ids, NP, &so, NULL, NULL, NULL, &o1, &n1);
        if (!st) st = wgml_generate(m, ids, NP, &so, NULL, NULL, NULL, &o2, &n2);
        th_check(st == WGML_OK && n1 == n2 && (n1 == 0 || !memcmp(o1, o2, n1 * sizeof *o1)),
                 "sampling with one seed is deterministic");
        free(o1), free(o2);
        so.sampler.top_k = 1;
        so.max_tokens = NG;
        st = wgml_generate(m, ids, NP, &so, NULL, NULL, NULL, &o1, &n1);
        same = st == WGML_OK && (int)n1 == ref_n;
        for (int i = 0; same && i < ref_n; i++) same = o1[i] == seq[NP + i];
        if (decisive) th_check(same, "sampling with top_k 1 is greedy");
        free(o1);
        free(r);
    }
    free(ref);
    wgml_model_free(m);
    printf("  tied %d: load %.2f s\n", tied, t1 - t0);
    synth_free(&s);
}

static void test_sampler(void) {
    float l[5] = {0.0f, logf(3.0f), -1.0f, 0.5f, 0.5f};
    wgml_sampler greedy = {0, 0, 0}, k1 = {1.0f, 1, 1.0f};
    uint64_t rng = wgml_rng_seed(7);
    th_check(wgml_sample(l, 5, &greedy, &rng) == 1 && wgml_sample(l, 5, &k1, &rng) == 1, "sample: greedy and top_k 1");
    /* top_k 2 at temperature 1: ids 1 and 3 (logits ln 3 and 0.5; the tie with id 4 goes to
     * the lower id) with probabilities 3/(3 + e^0.5) and e^0.5/(3 + e^0.5) */
    wgml_sampler k2 = {1.0f, 2, 1.0f};
    int count[5] = {0}, N = 40000;
    for (int i = 0; i < N; i++) count[wgml_sample(l, 5, &k2, &rng)]++;
    double f1 = (double)count[1] / N, p1 = 3.0 / (3.0 + exp(0.5)); /* sd of f1: ~0.0024 */
    th_check(count[1] + count[3] == N && fabs(f1 - p1) < 0.012, "sample: top_k 2 frequencies (%.4f, want %.4f)", f1, p1);
    /* top_p 0.5: the most likely token alone holds 3/(3+1+e^-1+2e^0.5) = 0.40 < 0.5, so the
     * nucleus is the top two (ids 1 and 3 or 4; ties by id: 3) */
    wgml_sampler p5 = {1.0f, 0, 0.5f};
    int only = 1;
    for (int i = 0; i < 2000; i++) {
        int32_t id = wgml_sample(l, 5, &p5, &rng);
        only &= id == 1 || id == 3;
    }
    th_check(only, "sample: top_p keeps the smallest nucleus");
    /* temperature: a low temperature concentrates on the argmax */
    wgml_sampler cold = {0.05f, 0, 1.0f};
    int hits = 0;
    for (int i = 0; i < 1000; i++) hits += wgml_sample(l, 5, &cold, &rng) == 1;
    th_check(hits == 1000, "sample: temperature 0.05 picks the argmax (%d/1000)", hits);
    uint64_t a = wgml_rng_seed(3), b = wgml_rng_seed(3);
    wgml_sampler t1 = {1.0f, 0, 1.0f};
    int same = 1;
    for (int i = 0; i < 100; i++) same &= wgml_sample(l, 5, &t1, &a) == wgml_sample(l, 5, &t1, &b);
    th_check(same, "sample: one seed, one sequence");
}

static void test_utf8_holdback(void) {
    struct {
        const char *s;
        size_t want;
    } c[] = {
        {"abc", 3},
        {"caf\xc3", 3},             /* é cut after its lead byte */
        {"caf\xc3\xa9", 5},         /* complete */
        {"x\xe2\x82", 1},           /* € missing its last byte */
        {"x\xe2\x82\xac", 4},       /* complete € */
        {"\xf0\x9f\x98", 0},        /* an emoji missing one byte */
        {"\xf0\x9f\x98\x80!", 5},   /* complete, then ASCII */
        {"\x80\x80\x80\x80\x80", 5}, /* stray continuation bytes pass through */
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        size_t got = decoder_utf8_complete((const unsigned char *)c[i].s, strlen(c[i].s));
        th_check(got == c[i].want, "utf8 hold-back case %zu: %zu, want %zu", i, got, c[i].want);
    }
}

static void test_share(void) {
    /* a tensor of one built graph used by another (the model's weight sharing) */
    wgml_graph *g1 = wgml_graph_new(T.ctx), *g2 = wgml_graph_new(T.ctx);
    int64_t sh[1] = {8};
    float x[8], y[8];
    for (int i = 0; i < 8; i++) x[i] = (float)i;
    wgml_tensor *a = wgml_tensor_new(g1, WGML_F32, 1, sh);
    wgml_tensor_write(a, x, sizeof x);
    wgml_tensor *v = wgml_tensor_share(g2, a);
    wgml_tensor *o = wgml_mul_scalar(g2, v, 2.0f);
    th_check(o && !wgml_graph_keep(g2, o) && !wgml_graph_compile(g2) && !wgml_graph_run(g2) &&
                 !wgml_tensor_read(o, y, sizeof y) && y[7] == 14.0f,
             "tensor_share: a built graph reads another graph's tensor");
    wgml_tensor *im = wgml_mul_scalar(g1, a, 1.0f);
    th_expect_error("tensor_share: intermediate", wgml_tensor_share(g2, im) == NULL, WGML_ERR_ARG, "persistent", NULL);
    wgml_graph_free(g2);
    wgml_graph_free(g1);
    /* an eager tensor shared into a built graph: freed first, released with the graph */
    wgml_graph *g3 = wgml_graph_new(T.ctx);
    wgml_tensor *e = th_tensor_f32(1, sh, x);
    wgml_tensor *ev = wgml_tensor_share(g3, e);
    o = wgml_add_scalar(g3, ev, 1.0f, 1.0f);
    wgml_tensor_free(e); /* deferred: the view in g3 still uses it */
    th_check(o && !wgml_graph_keep(g3, o) && !wgml_graph_compile(g3) && !wgml_graph_run(g3) &&
                 !wgml_tensor_read(o, y, sizeof y) && y[3] == 4.0f,
             "tensor_share: an eager tensor in a built graph");
    wgml_graph_free(g3);
}

int main(int argc, char **argv) {
    /* before the device: its driver's threads read the environment as they start, and
     * setenv beside them is a race (lavapipe crashed in getenv under ASan) */
    /* the fused inference graphs, as a GPU runs them (a CPU adapter's default is the plain ops,
     * which test_generate and the Python and browser tests run) */
    th_setenv("WGML_LLAMA_UNFUSED", "0", 0);
    th_init_args("test_llama", argc, argv);
    th_tmp_path(g_path, sizeof g_path, "wgml_test_llama_%d.gguf", (int)getpid());
    test_sampler();
    test_utf8_holdback();
    test_share();
    test_model(1);
    test_model(0);
    unlink(g_path);
    return th_done();
}
