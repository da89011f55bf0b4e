/* The bindings of a dispatch. The kernels' declared bindings (//!bindings, wgsl_source.c): a
 * kernel bound with other counts than it declares, a malformed directive and a binding numbered
 * by hand fail with an error naming the kernel; a prelude's binding is numbered after the
 * file's (the copy reads it and gives its values).
 * WebGPU's aliasing rule and its debug check ($WGML_CHECK_ALIASING, on here whatever the
 * environment says):
 *  - a dispatch recorded through graph_dispatch with two overlapping writable bindings (the
 *    same tensor twice, a tensor and a view of it) fails the eager flush and a built graph's
 *    compile with an error naming the op, the kernel, both bindings and their ranges; the
 *    context stays usable;
 *  - graphs that bound overlapping ranges before the rule was kept run clean with the check on
 *    and match an fp64 reference: mul(a, a) with a an arena intermediate (the graph layer
 *    binds a copy), an elementwise chain whose inputs die where their successors are written
 *    (the planner keeps them apart) and that ends in an op reading two overlapping views, and
 *    accumulate-mode gradients (a sink written by the rule, one stored by the backward
 *    engine), run twice. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

#define N 256 /* elements of the test vectors: views at element 64 sit on a 256-byte boundary */

static wgml_tensor *upload(wgml_graph *g, const float *data, int64_t n) {
    wgml_tensor *t = wgml_tensor_new(g, WGML_F32, 1, &n);
    if (t && wgml_tensor_write(t, data, sizeof(float) * (size_t)n)) t = NULL;
    return t;
}

/* ---- the declared bindings ----------------------------------------------------------- */

/* graph_copy declares read(src) write(dst) uniform(p); the prelude may add to it. */
static wgml_status record_copy(const char *prelude, wgml_tensor *const *ro, int n_ro, wgml_tensor *dst) {
    uint32_t p[4] = {N, 0, 0, 0};
    return graph_dispatch(T.g, "bind_probe", "graph_copy", prelude, ro, n_ro, &dst, 1, p, sizeof p, 1);
}

static void test_declared_bindings(void) {
    float *h = th_random(N, -1, 1), *h2 = th_random(N, -1, 1);
    wgml_tensor *x = th_tensor_f32(1, (int64_t[]){N}, h), *x2 = th_tensor_f32(1, (int64_t[]){N}, h2);
    wgml_tensor *y = th_tensor_f32(1, (int64_t[]){N}, h2), *ro[2] = {x, x2};
    wgml_status s = record_copy(NULL, ro, 2, y);
    th_expect_error("bindings: one read more than declared", s != WGML_OK, WGML_ERR_ARG, "graph_copy",
                    "declares 1 read, 1 write and 1 uniform bindings", "its op binds 2, 1 and 1", NULL);
    s = record_copy("//!bindings reed(extra: array<f32>)\n", ro, 2, y);
    th_expect_error("bindings: a malformed directive", s != WGML_OK, WGML_ERR_ARG, "graph_copy",
                    "wants read(...), write(...) or uniform(...)", "reed(extra", NULL);
    s = record_copy("//!bindings read(extra: array<f32>\n", ro, 2, y);
    th_expect_error("bindings: a section not closed", s != WGML_OK, WGML_ERR_ARG, "graph_copy", "read( is not closed", NULL);
    s = record_copy("@group(0) @binding(3) var<storage, read> extra: array<f32>;\n", ro, 2, y);
    th_expect_error("bindings: one numbered by hand", s != WGML_OK, WGML_ERR_ARG, "graph_copy",
                    "numbers a binding by hand", "@binding(3)", NULL);
    /* the prelude's read is the second: the copy reads src = x */
    s = record_copy("//!bindings read(extra: array<f32>)\n", ro, 2, y);
    th_check(s == WGML_OK, "bindings: a prelude's binding (%s)", wgml_last_error(T.ctx));
    if (!s) th_read_equals("bindings: the copy with a prelude's binding reads the file's", y, h, N);
    wgml_tensor_free(x);
    wgml_tensor_free(x2);
    wgml_tensor_free(y);
    free(h);
    free(h2);
}

/* ---- the check ------------------------------------------------------------------------- */

/* Records norm_bwd_cols (4 read-only, 2 writable bindings) with both writable bindings given
 * by the caller; the dispatch is never submitted when the check is on. */
static wgml_status record_two_writers(wgml_graph *g, wgml_tensor *const *ro, wgml_tensor *w0, wgml_tensor *w1) {
    const char *prelude = "const LAYER: bool = true; const HAS_DW: bool = true; const HAS_DB: bool = true;\n";
    uint32_t p[4] = {1, N, 1, N};
    wgml_tensor *rw[2] = {w0, w1};
    return graph_dispatch(g, "alias_probe", "norm_bwd_cols", prelude, ro, 4, rw, 2, p, sizeof p, 1);
}

static void test_check_eager(void) {
    float *h = th_random(N, -1, 1);
    wgml_tensor *ro[4], *y = th_tensor_f32(1, (int64_t[]){N}, h);
    for (int i = 0; i < 4; i++) ro[i] = th_tensor_f32(1, (int64_t[]){N}, h);
    wgml_status s = wgml_sync(T.ctx);
    th_check(s == WGML_OK, "eager: setup (%s)", wgml_last_error(T.ctx));

    s = record_two_writers(T.g, ro, y, y);
    if (!s) s = wgml_sync(T.ctx);
    th_expect_error("eager: one tensor bound writable twice", s != WGML_OK, WGML_ERR_STATE, "alias_probe",
                    "aliasing (eager graph)", "norm_bwd_cols", "binding 4 [0, 1024) writable",
                    "binding 5 [0, 1024) writable", "overlaps", NULL);

    wgml_tensor *v = wgml_tensor_view(y, 64, 1, (int64_t[]){128});
    s = v ? record_two_writers(T.g, ro, y, v) : wgml_last_status(T.ctx);
    if (!s) s = wgml_sync(T.ctx);
    th_expect_error("eager: a tensor and its view bound writable", s != WGML_OK, WGML_ERR_STATE, "alias_probe",
                    "binding 4 [0, 1024) writable", "binding 5 [256, 768) writable", NULL);
    wgml_tensor_free(v);

    /* the flush that failed dropped its work; the next one runs */
    wgml_tensor *z = wgml_add_scalar(T.g, y, 1.0f, 1.0f);
    float *got = z ? th_read_f32(z) : NULL;
    double ref[N];
    for (int i = 0; i < N; i++) ref[i] = (double)h[i] + 1.0;
    if (got) th_close("eager: usable after the failed flush", got, ref, N, 1e-6, 1e-6);
    free(got);
    wgml_tensor_free(z);
    wgml_tensor_free(y);
    for (int i = 0; i < 4; i++) wgml_tensor_free(ro[i]);
    free(h);
}

static void test_check_built(void) {
    float *h = th_random(N, -1, 1);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *ro[4], *x = upload(g, h, N);
    for (int i = 0; i < 4; i++) ro[i] = upload(g, h, N);
    /* an arena intermediate bound writable twice */
    wgml_tensor *y = x ? wgml_relu(g, x) : NULL;
    wgml_status s = y ? record_two_writers(g, ro, y, y) : wgml_last_status(T.ctx);
    th_check(s == WGML_OK, "built: recording (%s)", wgml_last_error(T.ctx));
    s = wgml_graph_compile(g);
    th_expect_error("built: an intermediate bound writable twice", s != WGML_OK, WGML_ERR_STATE, "alias_probe",
                    "aliasing (built graph)", "norm_bwd_cols", "binding 4 [", "binding 5 [", "writable", NULL);
    wgml_graph_free(g);

    /* a persistent tensor and an overlapping view of it, both writable */
    g = wgml_graph_new(T.ctx);
    for (int i = 0; i < 4; i++) ro[i] = upload(g, h, N);
    x = upload(g, h, N);
    wgml_tensor *v = x ? wgml_tensor_view(x, 64, 1, (int64_t[]){64}) : NULL;
    s = v ? record_two_writers(g, ro, v, x) : wgml_last_status(T.ctx);
    th_check(s == WGML_OK, "built: recording the view (%s)", wgml_last_error(T.ctx));
    s = wgml_graph_compile(g);
    th_expect_error("built: a view and its base bound writable", s != WGML_OK, WGML_ERR_STATE, "alias_probe",
                    "binding 4 [256, 512) writable", "binding 5 [0, 1024) writable", NULL);
    wgml_graph_free(g);
    free(h);
}

/* ---- graphs that used to alias --------------------------------------------------------- */

static void test_square_of_intermediate(void) {
    float *ha = th_random(N, -2, 2), *hb = th_random(N, -2, 2);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *a = upload(g, ha, N), *b = upload(g, hb, N);
    wgml_tensor *s = a && b ? wgml_add(g, a, b, 1.0f) : NULL;     /* an arena intermediate */
    wgml_tensor *sq = s ? wgml_mul(g, s, s) : NULL;               /* the same tensor twice */
    wgml_tensor *out = sq ? wgml_mul(g, sq, a) : NULL;            /* keeps sq in the arena too */
    wgml_status st = out && !wgml_graph_keep(g, out) ? wgml_graph_compile(g) : wgml_last_status(T.ctx);
    if (!th_check(st == WGML_OK, "mul(a, a): compiles with the check on (%s)", wgml_last_error(T.ctx))) {
        wgml_graph_free(g);
        free(ha);
        free(hb);
        return;
    }
    double ref[N];
    for (int i = 0; i < N; i++) {
        double v = (double)ha[i] + (double)hb[i];
        ref[i] = v * v * (double)ha[i];
    }
    for (int run = 0; run < 2; run++) {
        st = wgml_graph_run(g);
        float *got = st ? NULL : th_read_f32(out);
        th_check(st == WGML_OK, "mul(a, a): run %d (%s)", run, wgml_last_error(T.ctx));
        if (got) th_close("mul(a, a) of an arena intermediate", got, ref, N, 1e-5, 1e-5);
        free(got);
    }
    wgml_graph_free(g);
    free(ha);
    free(hb);
}

/* Each op's input dies at the op that writes its successor: a planner that freed the input's
 * bytes for that output would bind them twice in one (all-writable) dispatch. */
static void test_chain(void) {
    float *hx = th_random(N, -2, 2);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x = upload(g, hx, N);
    wgml_tensor *t = x ? wgml_mul_scalar(g, x, 0.5f) : NULL;
    t = t ? wgml_tanh(g, t) : NULL;
    t = t ? wgml_add_scalar(g, t, 1.0f, 0.25f) : NULL;
    t = t ? wgml_relu(g, t) : NULL;
    t = t ? wgml_neg(g, t) : NULL;
    /* two overlapping views of the last link read by one op */
    wgml_tensor *lo = t ? wgml_tensor_view(t, 0, 1, (int64_t[]){128}) : NULL;
    wgml_tensor *hi = t ? wgml_tensor_view(t, 64, 1, (int64_t[]){128}) : NULL;
    wgml_tensor *out = lo && hi ? wgml_add(g, lo, hi, 1.0f) : NULL;
    wgml_status st = out && !wgml_graph_keep(g, out) ? wgml_graph_compile(g) : wgml_last_status(T.ctx);
    if (th_check(st == WGML_OK, "chain: compiles with the check on (%s)", wgml_last_error(T.ctx))) {
        st = wgml_graph_run(g);
        float *got = st ? NULL : th_read_f32(out);
        double v[N], ref[128];
        for (int i = 0; i < N; i++) {
            double u = tanh(0.5 * (double)hx[i]) + 0.25;
            v[i] = -(u > 0 ? u : 0);
        }
        for (int i = 0; i < 128; i++) ref[i] = v[i] + v[64 + i];
        if (got) th_close("elementwise chain, overlapping views of the last link", got, ref, 128, 1e-5, 1e-5);
        free(got);
    }
    wgml_graph_free(g);
    free(hx);
}

/* Accumulate-mode gradients into the caller's tensors, two runs: G_w += xᵀ·1 per run (the
 * linear rule writes it straight into the sink), G_p += 2p per run (mul(p, p): the engine adds
 * the two partial gradients and stores with accumulate). */
static void test_accumulate_grad(void) {
    const int64_t B = 3, K = 8, M = 4;
    float *hx = th_random((size_t)(B * K), -1, 1), *hw = th_random((size_t)(M * K), -1, 1);
    float *hp = th_random((size_t)N, -1, 1);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){B, K});
    wgml_tensor *w = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){M, K});
    wgml_tensor *gw = wgml_tensor_new(g, WGML_F32, 2, (int64_t[]){M, K});
    wgml_tensor *p = upload(g, hp, N), *gp = wgml_tensor_new(g, WGML_F32, 1, (int64_t[]){N});
    float zeros[N] = {0};
    wgml_status st = x && w && gw && p && gp ? WGML_OK : wgml_last_status(T.ctx);
    if (!st) st = wgml_tensor_write(x, hx, sizeof(float) * (size_t)(B * K));
    if (!st) st = wgml_tensor_write(w, hw, sizeof(float) * (size_t)(M * K));
    if (!st) st = wgml_tensor_write(gw, zeros, sizeof(float) * (size_t)(M * K));
    if (!st) st = wgml_tensor_write(gp, zeros, sizeof zeros);
    if (!st) st = wgml_tensor_set_trainable(w, 1);
    if (!st) st = wgml_tensor_set_trainable(p, 1);
    if (!st) st = wgml_tensor_set_grad(w, gw, 1);
    if (!st) st = wgml_tensor_set_grad(p, gp, 1);
    wgml_tensor *y = st ? NULL : wgml_linear(g, x, w, NULL);
    wgml_tensor *sq = y ? wgml_mul(g, p, p) : NULL;
    wgml_tensor *l1 = sq ? wgml_sum(g, y, NULL, 0, 0) : NULL, *l2 = l1 ? wgml_sum(g, sq, NULL, 0, 0) : NULL;
    wgml_tensor *loss = l2 ? wgml_add(g, l1, l2, 1.0f) : NULL;
    if (!st) st = loss ? wgml_backward(g, loss, 1.0f) : wgml_last_status(T.ctx);
    if (!st) st = wgml_graph_compile(g);
    for (int run = 0; run < 2 && !st; run++) st = wgml_graph_run(g);
    if (th_check(st == WGML_OK, "accumulate: builds and runs twice with the check on (%s)", wgml_last_error(T.ctx))) {
        float *got_w = th_read_f32(gw), *got_p = th_read_f32(gp);
        double ref_w[4 * 8], ref_p[N];
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++) {
                double acc = 0;
                for (int b = 0; b < B; b++) acc += hx[b * K + k];
                ref_w[m * K + k] = 2.0 * acc;
            }
        for (int i = 0; i < N; i++) ref_p[i] = 4.0 * (double)hp[i];
        if (got_w) th_close("accumulated dW (sink) after two runs", got_w, ref_w, (size_t)(M * K), 1e-5, 1e-5);
        if (got_p) th_close("accumulated d(p) of mul(p, p) after two runs", got_p, ref_p, N, 1e-5, 1e-5);
        free(got_w);
        free(got_p);
    }
    wgml_graph_free(g);
    free(hx);
    free(hw);
    free(hp);
}

int main(int argc, char **argv) {
    th_setenv("WGML_CHECK_ALIASING", "1", 1); /* read when the context's eager graph is made */
    th_init_args("test_aliasing", argc, argv);
    test_declared_bindings();
    test_check_eager();
    test_check_built();
    test_square_of_intermediate();
    test_chain();
    test_accumulate_grad();
    return th_done();
}
