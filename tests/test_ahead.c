/* Compiling ahead (src/gpu/ahead.c), turned on for any adapter ($WGML_COMPILE_AHEAD=1; CPU
 * adapters have it by default):
 *  - a built graph's kernels go to the thread, which compiles every one of them, and the
 *    graph's results are those of an fp64 reference (softmax of a product: two kernel families);
 *  - eager ops give it nothing (their kernels run at once);
 *  - a context destroyed while the thread still has kernels ends cleanly (under ASan: no leak,
 *    no use after free);
 *  - $WGML_COMPILE_AHEAD=0 turns it off. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu/gpu.h"

#define M 8
#define K 16
#define N 32

/* softmax(x·w) over rows, in fp64 */
static void reference(const float *x, const float *w, double *ref) {
    for (int m = 0; m < M; m++) {
        double row[N], mx = -INFINITY, sum = 0;
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)x[m * K + k] * w[k * N + n];
            row[n] = s;
            mx = s > mx ? s : mx;
        }
        for (int n = 0; n < N; n++) sum += row[n] = exp(row[n] - mx);
        for (int n = 0; n < N; n++) ref[m * N + n] = row[n] / sum;
    }
}

/* A graph of softmax(x·w), compiled; NULL with a failure recorded. *out gets the result. */
static wgml_graph *build(wgml_ctx *ctx, const float *x, const float *w, wgml_tensor **out) {
    wgml_graph *g = wgml_graph_new(ctx);
    int64_t sx[2] = {M, K}, sw[2] = {K, N};
    wgml_tensor *tx = g ? wgml_tensor_new(g, WGML_F32, 2, sx) : NULL;
    wgml_tensor *tw = g ? wgml_tensor_new(g, WGML_F32, 2, sw) : NULL;
    bool ok = tx && tw && !wgml_tensor_write(tx, x, sizeof(float) * M * K) &&
              !wgml_tensor_write(tw, w, sizeof(float) * K * N);
    wgml_tensor *y = ok ? wgml_softmax(g, wgml_mm(g, tx, tw), -1) : NULL;
    ok = y && !wgml_graph_keep(g, y) && !wgml_graph_compile(g);
    if (!th_check(ok, "build softmax(x.w): %s", wgml_last_error(ctx))) {
        wgml_graph_free(g);
        return NULL;
    }
    *out = y;
    return g;
}

static void test_built_graph(void) {
    uint64_t given = 0, compiled = 0;
    /* an eager op first: its kernel runs at once and is not given to the thread */
    int64_t s1[1] = {64};
    float *a = th_random(64, -1, 1);
    wgml_tensor *ta = th_tensor_f32(1, s1, a);
    wgml_tensor *sum = ta ? wgml_add(T.g, ta, ta, 1.0f) : NULL;
    float *got_sum = sum ? th_read_f32(sum) : NULL;
    th_check(got_sum != NULL, "eager add: %s", wgml_last_error(T.ctx));
    bool on = gpu_ahead_stats(T.ctx, 0, &given, &compiled);
    if (!th_check(on, "WGML_COMPILE_AHEAD=1 turns the thread on")) return;
    th_check(given == 0, "eager ops give the thread nothing (given %llu)", (unsigned long long)given);
    free(a);
    free(got_sum);
    wgml_tensor_free(sum);
    wgml_tensor_free(ta);

    float *x = th_random(M * K, -2, 2), *w = th_random(K * N, -2, 2);
    double ref[M * N];
    reference(x, w, ref);
    wgml_tensor *y = NULL;
    wgml_graph *g = build(T.ctx, x, w, &y);
    if (g) {
        gpu_ahead_stats(T.ctx, 120, &given, &compiled);
        th_check(given >= 2 && compiled == given, "the built graph's kernels all compiled ahead: %llu given, %llu compiled",
                 (unsigned long long)given, (unsigned long long)compiled);
        float got[M * N];
        wgml_status s = wgml_graph_run(g);
        if (!s) s = wgml_tensor_read(y, got, sizeof got);
        if (th_check(s == WGML_OK, "run: %s", wgml_last_error(T.ctx))) th_close("softmax(x.w)", got, ref, M * N, 1e-6, 1e-5);
        wgml_graph_free(g);
    }
    free(x);
    free(w);
}

/* A context destroyed with kernels still given: the thread drops them and ends. */
static void test_destroy_busy(void) {
    wgml_ctx *ctx = NULL;
    wgml_ctx_options o = {.poison_outputs = 1};
    if (!th_check(wgml_ctx_create(&o, &ctx) == WGML_OK, "a second context: %s", wgml_create_error())) return;
    float *x = th_random(M * K, -1, 1), *w = th_random(K * N, -1, 1);
    wgml_tensor *y = NULL;
    wgml_graph *g = build(ctx, x, w, &y);
    uint64_t given = 0;
    gpu_ahead_stats(ctx, 0, &given, NULL);
    th_check(given >= 2, "the second context's thread has the graph's kernels (%llu)", (unsigned long long)given);
    wgml_graph_free(g);
    wgml_ctx_destroy(ctx); /* at once, the thread likely still compiling */
    free(x);
    free(w);
}

static void test_off(void) {
    th_setenv("WGML_COMPILE_AHEAD", "0", 1);
    wgml_ctx *ctx = NULL;
    wgml_ctx_options o = {.poison_outputs = 1};
    if (th_check(wgml_ctx_create(&o, &ctx) == WGML_OK, "a third context: %s", wgml_create_error()))
        th_check(!gpu_ahead_stats(ctx, 0, NULL, NULL), "WGML_COMPILE_AHEAD=0 turns the thread off");
    wgml_ctx_destroy(ctx);
    th_setenv("WGML_COMPILE_AHEAD", "1", 1);
}

int main(void) {
    th_setenv("WGML_COMPILE_AHEAD", "1", 1);
    th_init("ahead");
    test_built_graph();
    test_destroy_busy();
    test_off();
    return th_done();
}
