#define _POSIX_C_SOURCE 200809L
/* Autograd beyond the single rules (each rule against finite differences: test_autograd_rules.c):
 * gradients into caller-provided tensors (flat buffer views, micro-batch accumulation), frozen
 * branches (no backward dispatches), the scatter kernel over more than 65,535 workgroups, amax's
 * ties, bad input, LoRA's initialisation, and --dump cases (an MLP, a GQA + RoPE attention
 * block, a Llama block with 4-bit projections and LoRA) that tests/py/test_torch_autograd.py
 * recomputes with PyTorch float64 autograd. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd_util.h"

/* ------------------------------------------------------------------ gradients into caller tensors */

static double *host_dw(const float *x, const float *R, int64_t M, int64_t N, int64_t K) {
    double *dw = calloc((size_t)(N * K), sizeof(double));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) dw[n * K + k] += (double)R[m * N + n] * x[m * K + k];
    return dw;
}

/* Two parameters whose gradients land in views of one flat buffer (overwritten each run), and
 * a third accumulated over two micro-batches. */
static void test_grad_tensors(void) {
    const int64_t M = 5, N = 4, K = 8;
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {M, K}, ws[2] = {N, K}, ys[2] = {M, N}, flat_n = 128;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *bias = wgml_tensor_new(g, WGML_F32, 1, &N), *w2 = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *R = wgml_tensor_new(g, WGML_F32, 2, ys);
    wgml_tensor *flat = wgml_tensor_new(g, WGML_F32, 1, &flat_n), *acc = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *gw = wgml_tensor_view(flat, 0, 2, ws), *gb = wgml_tensor_view(flat, 64, 1, &N);
    wgml_tensor_set_trainable(w, 1);
    wgml_tensor_set_trainable(bias, 1);
    wgml_tensor_set_trainable(w2, 1);
    wgml_tensor_set_grad(w, gw, 0);
    wgml_tensor_set_grad(bias, gb, 0);
    th_check(!wgml_tensor_set_grad(w2, acc, 1), "set_grad accumulate: %s", wgml_last_error(T.ctx));
    wgml_tensor *y = wgml_add(g, wgml_linear(g, x, w, bias), wgml_linear(g, x, w2, NULL), 1.0f);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, y, R), NULL, 0, 0);
    th_check(!wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g), "grad tensors: build: %s", wgml_last_error(T.ctx));
    th_check(wgml_tensor_grad(w) == gw && wgml_tensor_grad(w2) == acc, "grad tensors: wgml_tensor_grad gives the caller's");
    float zeros[32] = {0};
    wgml_tensor_write(acc, zeros, sizeof zeros);
    float *fl = th_random((size_t)flat_n, -1, 1); /* stale contents must be overwritten */
    wgml_tensor_write(flat, fl, sizeof(float) * (size_t)flat_n);
    double sum_dw[32] = {0};
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(M * K), -1, 1), *hw = th_random((size_t)(N * K), -1, 1), *hR = th_random((size_t)(M * N), -1, 1);
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)(M * K));
        wgml_tensor_write(w, hw, sizeof(float) * (size_t)(N * K));
        wgml_tensor_write(w2, hw, sizeof(float) * (size_t)(N * K));
        wgml_tensor_write(bias, hw, sizeof(float) * (size_t)N);
        wgml_tensor_write(R, hR, sizeof(float) * (size_t)(M * N));
        th_check(!wgml_graph_run(g), "grad tensors: run");
        double *dw = host_dw(hx, hR, M, N, K), db[4] = {0};
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) db[n] += hR[m * N + n];
        for (int i = 0; i < 32; i++) sum_dw[i] += dw[i];
        float *gf = th_read_f32(flat), *ga = th_read_f32(acc);
        char name[64];
        snprintf(name, sizeof name, "flat view dw (run %d)", run);
        th_close(name, gf, dw, 32, 1e-5, 1e-5);
        snprintf(name, sizeof name, "flat view dbias (run %d)", run);
        th_close(name, gf + 64, db, 4, 1e-5, 1e-5);
        snprintf(name, sizeof name, "accumulated dw (after %d micro-batches)", run + 1);
        th_close(name, ga, sum_dw, 32, 1e-5, 1e-5);
        free(gf);
        free(ga);
        free(dw);
        free(hx);
        free(hw);
        free(hR);
    }
    free(fl);
    wgml_graph_free(g);
}

/* A frozen branch records no backward work: y = x·W1ᵀ + x·W2ᵀ with W2 frozen gives exactly
 * as many backward dispatches as y = x·W1ᵀ + C. */
static size_t backward_dispatches(bool frozen_branch, bool *w2_grad_null) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {6, 8}, ws[2] = {4, 8}, ys[2] = {6, 4};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w1 = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *w2 = wgml_tensor_new(g, WGML_F32, 2, ws), *c = wgml_tensor_new(g, WGML_F32, 2, ys);
    wgml_tensor_set_trainable(w1, 1);
    wgml_tensor *other = frozen_branch ? wgml_gelu(g, wgml_linear(g, x, w2, NULL), 0) : c;
    wgml_tensor *loss = wgml_sum(g, wgml_add(g, wgml_linear(g, x, w1, NULL), other, 1.0f), NULL, 0, 0);
    size_t before = wgml_graph_dispatch_count(g);
    th_check(!wgml_backward(g, loss, 1.0f), "frozen: backward: %s", wgml_last_error(T.ctx));
    size_t n = wgml_graph_dispatch_count(g) - before;
    *w2_grad_null = wgml_tensor_grad(w2) == NULL;
    wgml_graph_free(g);
    return n;
}

/* A weight whose only use is a linear gets its gradient written by wgml_linear_dw straight into
 * the caller's tensor: no extra store dispatch. */
static size_t linear_backward_dispatches(bool into_caller) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {6, 8}, ws[2] = {4, 8};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor_set_trainable(w, 1);
    if (into_caller) wgml_tensor_set_grad(w, wgml_tensor_new(g, WGML_F32, 2, ws), 1);
    wgml_tensor *loss = wgml_sum(g, wgml_linear(g, x, w, NULL), NULL, 0, 0);
    size_t before = wgml_graph_dispatch_count(g);
    wgml_backward(g, loss, 1.0f);
    size_t n = wgml_graph_dispatch_count(g) - before;
    wgml_graph_free(g);
    return n;
}

static void test_frozen(void) {
    size_t da = linear_backward_dispatches(false), db = linear_backward_dispatches(true);
    th_check(da == db, "linear weight gradient into the caller's tensor: %zu dispatches, %zu into an arena tensor", db, da);
    bool null_a, null_b;
    size_t a = backward_dispatches(true, &null_a), b = backward_dispatches(false, &null_b);
    th_check(a == b && a > 0, "frozen branch: %zu backward dispatches, %zu without the branch", a, b);
    th_check(null_a, "frozen branch: the frozen weight has no gradient");
}

/* The scatter kernel over more than 65,535 workgroups (2-D grid fold). */
static void test_big_scatter(void) {
    const int64_t cols = 8388736; /* 2·cols / 256 = 65,537 workgroups */
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {2, cols}, one = 1;
    int32_t row = 1;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_tensor_set_trainable(x, 1);
    wgml_tensor *idx = upload(g, WGML_I32, 1, &one, &row);
    wgml_tensor *loss = wgml_sum(g, wgml_index_select(g, x, 0, idx), NULL, 0, 0);
    bool ok = !wgml_backward(g, loss, 3.0f) && !wgml_graph_compile(g) && !wgml_graph_run(g);
    if (th_check(ok, "big scatter: %s", wgml_last_error(T.ctx))) {
        float *d = th_read_f32(wgml_tensor_grad(x));
        int64_t bad = 0;
        for (int64_t i = 0; d && i < 2 * cols; i++) bad += d[i] != (i < cols ? 0.0f : 3.0f);
        th_check(d && bad == 0, "big scatter (65,537 workgroups): %lld wrong elements", (long long)bad);
        free(d);
    }
    wgml_graph_free(g);
}

/* amax shares the gradient evenly among tied maxima (finite differences cannot see this). */
static void test_amax_ties(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t s[2] = {2, 4}, rs[2] = {2, 1};
    float hx[8] = {1, 3, 3, 2, 5, 5, 5, 5}, hr[2] = {2, -4};
    wgml_tensor *x = upload(g, WGML_F32, 2, s, hx), *r = upload(g, WGML_F32, 2, rs, hr);
    wgml_tensor_set_trainable(x, 1);
    int last = -1;
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, wgml_amax(g, x, &last, 1, 1), r), NULL, 0, 0);
    if (th_check(!wgml_backward(g, loss, 1) && !wgml_graph_compile(g) && !wgml_graph_run(g), "amax ties: %s",
                 wgml_last_error(T.ctx))) {
        float *d = th_read_f32(wgml_tensor_grad(x));
        double want[8] = {0, 1, 1, 0, -1, -1, -1, -1};
        th_close("amax ties: gradient split evenly", d, want, 8, 1e-6, 1e-6);
        free(d);
    }
    wgml_graph_free(g);
}

static void test_errors(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t s[2] = {2, 3};
    wgml_tensor *a = wgml_tensor_new(g, WGML_F32, 2, s), *f = wgml_tensor_new(g, WGML_F32, 2, s);
    th_expect_error("backward: loss not trainable", wgml_backward(g, wgml_sum(g, f, NULL, 0, 0), 1) != WGML_OK,
                    WGML_ERR_ARG, "does not depend", NULL);
    wgml_tensor_set_trainable(a, 1);
    th_expect_error("backward: loss of 6 elements", wgml_backward(g, wgml_mul(g, a, f), 1) != WGML_OK, WGML_ERR_SHAPE,
                    "wgml_backward", "one element", NULL);
    th_expect_error("backward: NULL loss", wgml_backward(g, NULL, 1) != WGML_OK, WGML_ERR_ARG, "loss is NULL", NULL);
    th_check(wgml_backward(NULL, a, 1) == WGML_ERR_ARG, "backward: NULL graph is an argument error");
    int64_t s3 = 5;
    th_expect_error("set_grad: element count", wgml_tensor_set_grad(a, wgml_tensor_new(g, WGML_F32, 1, &s3), 0) != WGML_OK,
                    WGML_ERR_SHAPE, "wgml_tensor_set_grad", "[5]", NULL);
    th_expect_error("set_grad: not persistent", wgml_tensor_set_grad(a, wgml_mul(g, f, f), 0) != WGML_OK, WGML_ERR_ARG,
                    "persistent", NULL);
    wgml_tensor *i32 = wgml_tensor_new(g, WGML_I32, 2, s);
    th_expect_error("set_trainable: i32", wgml_tensor_set_trainable(i32, 1) != WGML_OK, WGML_ERR_DTYPE, "set_trainable",
                    NULL);
    th_check(wgml_tensor_set_trainable(NULL, 1) == WGML_ERR_ARG, "set_trainable: NULL is an argument error");
    wgml_tensor *e = th_tensor_f32(2, s, (float[6]){0});
    th_expect_error("set_trainable: eager", wgml_tensor_set_trainable(e, 1) != WGML_OK, WGML_ERR_UNSUPPORTED, "eager",
                    NULL);
    wgml_tensor_free(e);
    th_check(!wgml_backward(g, wgml_sum(g, wgml_mul(g, a, f), NULL, 0, 0), 1), "backward: %s", wgml_last_error(T.ctx));
    th_expect_error("backward twice", wgml_backward(g, wgml_sum(g, a, NULL, 0, 0), 1) != WGML_OK, WGML_ERR_STATE,
                    "already ran", NULL);
    wgml_graph_compile(g);
    th_expect_error("set_trainable after compile", wgml_tensor_set_trainable(f, 1) != WGML_OK, WGML_ERR_STATE, "compiled",
                    NULL);
    wgml_graph_free(g);
}

/* ------------------------------------------------------------------ PyTorch comparison cases */

typedef struct param {
    const char *name;
    wgml_tensor *t;
    int64_t n;
    bool train;
} param;

static wgml_tensor *new_param(wgml_graph *g, param *ps, int *np, const char *name, int rank, const int64_t *s, bool train) {
    wgml_tensor *t = wgml_tensor_new(g, WGML_F32, rank, s);
    if (train) wgml_tensor_set_trainable(t, 1);
    ps[(*np)++] = (param){name, t, numel(rank, s), train};
    return t;
}

/* Writes fresh values into every parameter, runs, dumps inputs and gradients under case name. */
static void run_and_dump(wgml_graph *g, param *ps, int np, const char *case_name, double scale, wgml_tensor *loss) {
    for (int i = 0; i < np; i++) {
        float *h = th_random((size_t)ps[i].n, -scale, scale);
        if (!strncmp(ps[i].name, "normw", 5))
            for (int64_t j = 0; j < ps[i].n; j++) h[j] += 1.0f;
        wgml_tensor_write(ps[i].t, h, sizeof(float) * (size_t)ps[i].n);
        free(h);
    }
    th_check(!wgml_graph_run(g), "%s: run: %s", case_name, wgml_last_error(T.ctx));
    float l = 0;
    wgml_tensor_read(loss, &l, sizeof l);
    th_check(isfinite(l), "%s: finite loss %g", case_name, (double)l);
    char name[64];
    for (int i = 0; i < np; i++) {
        th_dump_tensor(case_name, ps[i].name, ps[i].t);
        if (ps[i].train) {
            snprintf(name, sizeof name, "grad_%s", ps[i].name);
            th_dump_tensor(case_name, name, wgml_tensor_grad(ps[i].t));
        }
    }
    th_dump_tensor(case_name, "loss", loss);
}

/* MLP: loss = mean(silu(linear(gelu(linear(x, W1, b1)), W2, b2))²). */
static void dump_mlp(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    param ps[8];
    int np = 0;
    int64_t xs[2] = {6, 8}, w1s[2] = {16, 8}, b1s = 16, w2s[2] = {8, 16}, b2s = 8;
    wgml_tensor *x = new_param(g, ps, &np, "x", 2, xs, true);
    wgml_tensor *w1 = new_param(g, ps, &np, "w1", 2, w1s, true), *b1 = new_param(g, ps, &np, "b1", 1, &b1s, true);
    wgml_tensor *w2 = new_param(g, ps, &np, "w2", 2, w2s, true), *b2 = new_param(g, ps, &np, "b2", 1, &b2s, true);
    wgml_tensor *y = wgml_silu(g, wgml_linear(g, wgml_gelu(g, wgml_linear(g, x, w1, b1), 0), w2, b2));
    wgml_tensor *loss = wgml_mean(g, wgml_mul(g, y, y), NULL, 0, 0);
    wgml_graph_keep(g, loss);
    if (th_check(!wgml_backward(g, loss, 1) && !wgml_graph_compile(g), "mlp: build: %s", wgml_last_error(T.ctx))) {
        run_and_dump(g, ps, np, "mlp_run0", 1, loss);
        run_and_dump(g, ps, np, "mlp_run1", 1, loss);
    }
    wgml_graph_free(g);
}

/* Attention: out = x + Wo·merge(sdpa(rope(q), rope(k), v)), q/k/v linear projections, GQA
 * (4 query heads, 2 kv heads), causal; loss = Σ out·R. q gets rope in [B,S,H,D] before the
 * head split, k after it ([B,H,S,D]); both the half-split style. */
static void dump_attention(void) {
    const int64_t S = 8, Hq = 4, Hkv = 2, D = 4, Dm = Hq * D;
    wgml_graph *g = wgml_graph_new(T.ctx);
    param ps[10];
    int np = 0;
    int64_t xs[3] = {1, S, Dm}, wq[2] = {Hq * D, Dm}, wk[2] = {Hkv * D, Dm}, wo[2] = {Dm, Hq * D};
    wgml_tensor *x = new_param(g, ps, &np, "x", 3, xs, true);
    wgml_tensor *Wq = new_param(g, ps, &np, "wq", 2, wq, true), *Wk = new_param(g, ps, &np, "wk", 2, wk, true);
    wgml_tensor *Wv = new_param(g, ps, &np, "wv", 2, wk, true), *Wo = new_param(g, ps, &np, "wo", 2, wo, true);
    wgml_tensor *R = new_param(g, ps, &np, "r", 3, xs, false);
    int32_t pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    wgml_tensor *positions = upload(g, WGML_I32, 1, &S, pos);
    int64_t q4s[4] = {1, S, Hq, D}, k4s[4] = {1, S, Hkv, D};
    int heads_first[4] = {0, 2, 1, 3};
    wgml_tensor *q = wgml_rope(g, wgml_reshape(g, wgml_linear(g, x, Wq, NULL), 4, q4s), positions, 10000, WGML_ROPE_HALF);
    q = wgml_permute(g, q, heads_first);
    wgml_tensor *k = wgml_permute(g, wgml_reshape(g, wgml_linear(g, x, Wk, NULL), 4, k4s), heads_first);
    k = wgml_rope_ex(g, k, positions, 10000, WGML_ROPE_HALF, WGML_ROPE_BHSD, 0);
    wgml_tensor *v = wgml_permute(g, wgml_reshape(g, wgml_linear(g, x, Wv, NULL), 4, k4s), heads_first);
    wgml_tensor *a = wgml_permute(g, wgml_sdpa(g, q, k, v, 1, 0), heads_first);
    wgml_tensor *out = wgml_add(g, x, wgml_linear(g, wgml_reshape(g, a, 3, xs), Wo, NULL), 1.0f);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, out, R), NULL, 0, 0);
    wgml_graph_keep(g, loss);
    if (th_check(!wgml_backward(g, loss, 1) && !wgml_graph_compile(g), "attention: build: %s", wgml_last_error(T.ctx))) {
        run_and_dump(g, ps, np, "attn_run0", 1, loss);
        run_and_dump(g, ps, np, "attn_run1", 1, loss);
    }
    wgml_graph_free(g);
}

/* One Llama block with every projection a frozen 4-bit linear plus a LoRA adapter:
 *   h = x + o(attn(rope(q(n1)), rope(k(n1)), v(n1))), n1 = rms_norm(x, normw1)
 *   out = h + down(silu(gate(n2))·up(n2)), n2 = rms_norm(h, normw2); loss = Σ out·R.
 * Gradients: x and every adapter's A and B (B starts random here, so A gets a gradient). */
#define LL_S 8
#define LL_DM 32
#define LL_HQ 4
#define LL_HKV 2
#define LL_D 8
#define LL_FF 64
static void dump_llama(void) {
    const char *names[7] = {"q", "k", "v", "o", "gate", "up", "down"};
    const int64_t shapes[7][2] = {{LL_HQ * LL_D, LL_DM}, {LL_HKV * LL_D, LL_DM}, {LL_HKV * LL_D, LL_DM}, {LL_DM, LL_HQ * LL_D},
                                  {LL_FF, LL_DM},        {LL_FF, LL_DM},         {LL_DM, LL_FF}};
    wgml_graph *g = wgml_graph_new(T.ctx);
    param ps[32];
    int np = 0;
    int64_t xs[3] = {1, LL_S, LL_DM}, dm = LL_DM, S = LL_S;
    wgml_tensor *x = new_param(g, ps, &np, "x", 3, xs, true);
    wgml_tensor *n1w = new_param(g, ps, &np, "normw1", 1, &dm, false), *n2w = new_param(g, ps, &np, "normw2", 1, &dm, false);
    wgml_tensor *R = new_param(g, ps, &np, "r", 3, xs, false);
    wgml_qweight *W[7];
    wgml_lora *L[7];
    for (int i = 0; i < 7; i++) {
        int64_t n = shapes[i][0], k = shapes[i][1];
        float *w = th_random((size_t)(n * k), -0.3, 0.3), *wd = malloc(sizeof(float) * (size_t)(n * k));
        uint8_t *codes = malloc((size_t)(n * k / 2));
        float *scales = calloc((size_t)(k / 32 * ((n + 3) / 4 * 4)), sizeof(float));
        wgml_q4gsw_quantize(w, n, k, 32, codes, scales);
        wgml_q4gsw_dequantize(codes, scales, n, k, 32, wd);
        W[i] = wgml_qweight_upload_q4gsw(g, codes, scales, NULL, n, k, 32);
        char nm[32];
        snprintf(nm, sizeof nm, "w_%s", names[i]);
        th_dump("llama", nm, WGML_F32, 2, shapes[i], wd);
        L[i] = wgml_lora_new(g, n, k, 4, 8.0f, 1000 + (uint64_t)i);
        snprintf(nm, sizeof nm, "a_%s", names[i]);
        ps[np++] = (param){strdup(nm), L[i]->a, 4 * k, true};
        snprintf(nm, sizeof nm, "b_%s", names[i]);
        ps[np++] = (param){strdup(nm), L[i]->b, n * 4, true};
        free(w);
        free(wd);
        free(codes);
        free(scales);
    }
    int32_t pos[LL_S];
    for (int i = 0; i < LL_S; i++) pos[i] = i;
    wgml_tensor *positions = upload(g, WGML_I32, 1, &S, pos);
    int hf[4] = {0, 2, 1, 3};
    int64_t q4s[4] = {1, LL_S, LL_HQ, LL_D}, k4s[4] = {1, LL_S, LL_HKV, LL_D};
    wgml_tensor *n1 = wgml_rms_norm(g, x, n1w, 1e-5f);
    wgml_tensor *q = wgml_reshape(g, wgml_lora_qlinear(g, n1, W[0], L[0]), 4, q4s);
    wgml_tensor *k = wgml_reshape(g, wgml_lora_qlinear(g, n1, W[1], L[1]), 4, k4s);
    wgml_tensor *v = wgml_reshape(g, wgml_lora_qlinear(g, n1, W[2], L[2]), 4, k4s);
    q = wgml_permute(g, wgml_rope(g, q, positions, 10000, WGML_ROPE_HALF), hf);
    k = wgml_permute(g, wgml_rope(g, k, positions, 10000, WGML_ROPE_HALF), hf);
    v = wgml_permute(g, v, hf);
    wgml_tensor *a = wgml_reshape(g, wgml_permute(g, wgml_sdpa(g, q, k, v, 1, 0), hf), 3, xs);
    wgml_tensor *h = wgml_add(g, x, wgml_lora_qlinear(g, a, W[3], L[3]), 1.0f);
    wgml_tensor *n2 = wgml_rms_norm(g, h, n2w, 1e-5f);
    wgml_tensor *act = wgml_mul(g, wgml_silu(g, wgml_lora_qlinear(g, n2, W[4], L[4])), wgml_lora_qlinear(g, n2, W[5], L[5]));
    wgml_tensor *out = wgml_add(g, h, wgml_lora_qlinear(g, act, W[6], L[6]), 1.0f);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, out, R), NULL, 0, 0);
    wgml_graph_keep(g, loss);
    size_t fwd = wgml_graph_dispatch_count(g);
    bool ok = !wgml_backward(g, loss, 1) && !wgml_graph_compile(g);
    if (th_check(ok, "llama: build: %s", wgml_last_error(T.ctx))) {
        printf("llama block: %zu forward + %zu backward dispatches, arena %.1f KiB\n", fwd,
               wgml_graph_dispatch_count(g) - fwd, (double)wgml_graph_arena_bytes(g) / 1024);
        run_and_dump(g, ps, np, "llama_run0", 0.5, loss);
        run_and_dump(g, ps, np, "llama_run1", 0.5, loss);
    }
    for (int i = 0; i < 7; i++) {
        wgml_qweight_free(W[i]);
        wgml_lora_free(L[i]);
    }
    for (int i = 4; i < np; i++) free((char *)ps[i].name);
    wgml_graph_free(g);
}

/* LoRA init: A within ±1/√K and not constant, B zero, scale alpha/r. */
static void test_lora_init(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_lora *l = wgml_lora_new(g, 6, 16, 4, 8.0f, 7);
    if (th_check(l != NULL, "lora_new: %s", wgml_last_error(T.ctx))) {
        wgml_graph_compile(g);
        float *a = th_read_f32(l->a), *b = th_read_f32(l->b);
        double lo = 1, hi = -1, bmax = 0;
        for (int i = 0; i < 64; i++) {
            lo = fmin(lo, a[i]);
            hi = fmax(hi, a[i]);
        }
        for (int i = 0; i < 24; i++) bmax = fmax(bmax, fabs(b[i]));
        th_check(lo >= -0.25 && hi <= 0.25 && hi - lo > 0.2 && bmax == 0 && l->scale == 2.0f,
                 "lora init: A in [%g, %g] (bound 0.25), max|B| %g, scale %g", lo, hi, bmax, (double)l->scale);
        free(a);
        free(b);
    }
    th_expect_error("lora_new: r 0", wgml_lora_new(g, 6, 16, 0, 8, 1) == NULL, WGML_ERR_ARG, "lora_new", NULL);
    { /* the adapter's output must match the base output's shape [..., N = 6] */
        wgml_graph *g2 = wgml_graph_new(T.ctx);
        wgml_lora *l2 = wgml_lora_new(g2, 6, 16, 4, 8.0f, 7);
        int64_t xs[2] = {3, 16}, bs[2] = {3, 5};
        wgml_tensor *x = wgml_tensor_new(g2, WGML_F32, 2, xs), *base = wgml_tensor_new(g2, WGML_F32, 2, bs);
        th_check(l2 && x && base, "lora_apply operands: %s", wgml_last_error(T.ctx));
        th_expect_error("lora_apply: base_out [3, 5] for N = 6", wgml_lora_apply(g2, x, base, l2) == NULL,
                        WGML_ERR_SHAPE, "lora_apply", "[3, 5]", NULL);
        th_expect_error("lora_apply: NULL base_out", wgml_lora_apply(g2, x, NULL, l2) == NULL, WGML_ERR_ARG, NULL);
        wgml_lora_free(l2);
        wgml_graph_free(g2);
    }
    wgml_lora_free(l);
    wgml_graph_free(g);
}

int main(int argc, char **argv) {
    th_init_args("test_autograd", argc, argv);
    test_grad_tensors();
    test_frozen();
    test_errors();
    test_amax_ties();
    test_lora_init();
    double t0 = now();
    test_big_scatter();
    double t1 = now();
    printf("big scatter: %.2f s\n", t1 - t0);
    dump_mlp();
    dump_attention();
    dump_llama();
    printf("model blocks: %.2f s\n", now() - t1);
    return th_done();
}
