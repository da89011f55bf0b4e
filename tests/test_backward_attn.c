#define _POSIX_C_SOURCE 200809L
/* Backward ops of attention and lookups against plain double-precision loops (the references:
 * backward_ref.h): sdpa backward (GQA 9/3 heads, D = 64, causal and not, Sq < Skv, sliding
 * windows, in slices of kv-head groups or of query heads under a scratch limit), embedding
 * backward (a 49,152-row table), gather backward, and determinism (the same bits twice). Their
 * references' finite-difference check, a built graph with them and their bad input are in
 * test_backward.c. Run with --dump DIR, the cases are also checked by
 * tests/py/test_torch_backward.py against PyTorch float64 autograd. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backward_ref.h"

/* window > 0: wgml_sdpa_window and wgml_sdpa_backward_window (causal). */
static void case_sdpa_w(attn_dims a, bool causal, float scale, int dump, int64_t window) {
    size_t nq = (size_t)(a.B * a.Hq * a.Sq * a.D), nk = (size_t)(a.B * a.Hkv * a.Skv * a.D);
    int64_t qs[4] = {a.B, a.Hq, a.Sq, a.D}, ks[4] = {a.B, a.Hkv, a.Skv, a.D};
    float *hq = th_random(nq, -1, 1), *hk = th_random(nk, -1, 1), *hv = th_random(nk, -1, 1), *hdo = th_random(nq, -1, 1);
    wgml_tensor *q = th_tensor_f32(4, qs, hq), *k = th_tensor_f32(4, ks, hk), *v = th_tensor_f32(4, ks, hv),
                *dout = th_tensor_f32(4, qs, hdo);
    wgml_tensor *out = window ? wgml_sdpa_window(T.g, q, k, v, window, scale) : wgml_sdpa(T.g, q, k, v, causal, scale);
    wgml_tensor *dq = NULL, *dk = NULL, *dv = NULL;
    wgml_sync(T.ctx);
    double t0 = now(); /* the backward alone */
    wgml_status s = window ? wgml_sdpa_backward_window(T.g, q, k, v, out, dout, window, scale, &dq, &dk, &dv)
                           : wgml_sdpa_backward(T.g, q, k, v, out, dout, causal, scale, &dq, &dk, &dv);
    float *gq = th_read_f32(dq), *gk = th_read_f32(dk), *gv = th_read_f32(dv);
    double dt = now() - t0;
    th_check(!s, "sdpa_backward status: %s", wgml_last_error(T.ctx));
    double *qd = to_d(hq, nq), *kd = to_d(hk, nk), *vd = to_d(hv, nk), *dod = to_d(hdo, nq);
    double *rq = dalloc(nq), *rk = dalloc(nk), *rv = dalloc(nk);
    double sc = scale > 0 ? scale : 1 / sqrt((double)a.D);
    double *ro = dalloc(nq);
    float *go = th_read_f32(out);
    ref_window = window;
    ref_sdpa(&a, qd, kd, vd, dod, causal, sc, ro, rq, rk, rv);
    ref_window = 0;
    char base[160], name[200];
    snprintf(base, sizeof base, "sdpa_backward B%lld Hq%lld Hkv%lld Sq%lld Skv%lld D%lld%s window %lld", (long long)a.B,
             (long long)a.Hq, (long long)a.Hkv, (long long)a.Sq, (long long)a.Skv, (long long)a.D,
             causal ? " causal" : "", (long long)window);
    snprintf(name, sizeof name, "%s forward out", base);
    th_close(name, go, ro, nq, 2e-5, 1e-4);
    free(ro);
    free(go);
    /* dk / dv sum over Sq·rep rows: atol grows with the square root of that */
    double at = 2e-5 * sqrt((double)(a.Sq * a.Hq / a.Hkv));
    snprintf(name, sizeof name, "%s dq (%.0f ms)", base, dt * 1e3);
    th_close(name, gq, rq, nq, 2e-5, 1e-3);
    snprintf(name, sizeof name, "%s dk", base);
    th_close(name, gk, rk, nk, at, 1e-3);
    snprintf(name, sizeof name, "%s dv", base);
    th_close(name, gv, rv, nk, at, 1e-3);
    if (dump == 2) { /* determinism of the GQA sums */
        wgml_tensor *dq2 = NULL, *dk2 = NULL, *dv2 = NULL;
        wgml_sdpa_backward(T.g, q, k, v, out, dout, causal, scale, &dq2, &dk2, &dv2);
        float *k2 = th_read_f32(dk2), *v2 = th_read_f32(dv2);
        th_check(k2 && v2 && !memcmp(k2, gk, nk * 4) && !memcmp(v2, gv, nk * 4),
                 "%s: dk and dv the same bits twice", base);
        free(k2); free(v2);
        wgml_tensor_free(dq2); wgml_tensor_free(dk2); wgml_tensor_free(dv2);
    }
    if (dump && th_dumping()) {
        char cn[32];
        snprintf(cn, sizeof cn, "sdpa%d", n_dumped++);
        float prm[2] = {causal, (float)sc};
        int64_t two = 2;
        th_dump(cn, "q", WGML_F32, 4, qs, hq);
        th_dump(cn, "k", WGML_F32, 4, ks, hk);
        th_dump(cn, "v", WGML_F32, 4, ks, hv);
        th_dump(cn, "dout", WGML_F32, 4, qs, hdo);
        th_dump(cn, "params", WGML_F32, 1, &two, prm);
        th_dump_tensor(cn, "dq", dq);
        th_dump_tensor(cn, "dk", dk);
        th_dump_tensor(cn, "dv", dv);
    }
    free(hq); free(hk); free(hv); free(hdo); free(gq); free(gk); free(gv);
    free(qd); free(kd); free(vd); free(dod); free(rq); free(rk); free(rv);
    wgml_tensor_free(q); wgml_tensor_free(k); wgml_tensor_free(v); wgml_tensor_free(dout); wgml_tensor_free(out);
    wgml_tensor_free(dq); wgml_tensor_free(dk); wgml_tensor_free(dv);
}

static void case_sdpa(attn_dims a, bool causal, float scale, int dump) { case_sdpa_w(a, causal, scale, dump, 0); }

/* The number of attn_bwd_soft dispatches (one a slice) in a built graph with the backward of
 * {2, 9, 3, 37, 37, 64}: 6 kv-head groups of 3 query heads, 5,476 bytes of scratch a head. */
static size_t sliced_soft_dispatches(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t qs[4] = {2, 9, 37, 64}, ks[4] = {2, 3, 37, 64};
    wgml_tensor *q = wgml_tensor_new(g, WGML_F32, 4, qs), *k = wgml_tensor_new(g, WGML_F32, 4, ks);
    wgml_tensor *v = wgml_tensor_new(g, WGML_F32, 4, ks), *dout = wgml_tensor_new(g, WGML_F32, 4, qs);
    wgml_tensor *out = wgml_sdpa(g, q, k, v, 1, 0), *dq = NULL, *dk = NULL, *dv = NULL;
    size_t n = 0;
    if (out && !wgml_sdpa_backward(g, q, k, v, out, dout, 1, 0, &dq, &dk, &dv) && !wgml_graph_keep(g, dq) &&
        !wgml_graph_keep(g, dk) && !wgml_graph_keep(g, dv) && !wgml_graph_compile(g)) {
        const char *shader = NULL;
        for (size_t i = 0; i < wgml_graph_dispatch_count(g); i++)
            if (wgml_graph_dispatch_name(g, i, &shader) && shader && !strcmp(shader, "attn_bwd_soft")) n++;
    }
    wgml_graph_free(g);
    return n;
}

/* A scratch over the device's binding limit ($WGML_SDPA_BWD_SCRATCH lowers the limit here): the
 * backward runs over slices of kv-head groups, or of one group's query heads, each slice's views
 * at the storage offset alignment; the gradients are the same (against the fp64 reference, dk
 * and dv the same bits twice), and a limit below one query head's scratch, or head slices off
 * the alignment, are clear errors. */
static void test_sdpa_sliced(void) {
    th_check(sliced_soft_dispatches() == 1, "sdpa_backward: one slice when the scratch fits");
    th_setenv("WGML_SDPA_BWD_SCRATCH", "40000", 1); /* 2 of the 6 groups a slice */
    th_check(sliced_soft_dispatches() == 3, "sdpa_backward: 3 slices of 2 groups under a 40,000-byte limit");
    case_sdpa((attn_dims){2, 9, 3, 37, 37, 64}, true, 0, 2);
    case_sdpa_w((attn_dims){3, 4, 2, 48, 48, 32}, true, 0, 0, 9); /* 18,432 bytes a group: 2 a slice */
    th_setenv("WGML_SDPA_BWD_SCRATCH", "12000", 1); /* under one group (16,428): 2 of its 3 heads, then 1 */
    th_check(sliced_soft_dispatches() == 12, "sdpa_backward: 12 slices of query heads under a 12,000-byte limit");
    case_sdpa((attn_dims){2, 9, 3, 37, 37, 64}, true, 0, 2);
    case_sdpa_w((attn_dims){1, 4, 1, 40, 40, 64}, true, 0, 0, 16); /* 4 heads of 6,400 bytes: 1 a slice */
    /* D = 4: whole groups rounded to the alignment's unit (2 groups at 32 bytes, 16 at 256) */
    th_setenv("WGML_SDPA_BWD_SCRATCH", "14400", 1);
    case_sdpa((attn_dims){40, 2, 1, 30, 3, 4}, false, 0, 0);
    int64_t qs[4] = {1, 2, 8, 16}, ks[4] = {1, 1, 8, 16}, q3[4] = {1, 2, 8, 3}, k3[4] = {1, 1, 1, 3};
    wgml_tensor *q = wgml_tensor_new(T.g, WGML_F32, 4, qs), *k = wgml_tensor_new(T.g, WGML_F32, 4, ks);
    wgml_tensor *qa = wgml_tensor_new(T.g, WGML_F32, 4, q3), *ka = wgml_tensor_new(T.g, WGML_F32, 4, k3);
    wgml_tensor *dq = NULL, *dk = NULL, *dv = NULL;
    th_setenv("WGML_SDPA_BWD_SCRATCH", "100", 1);
    th_expect_error("sdpa_backward: one head's scratch over the limit",
                    wgml_sdpa_backward(T.g, q, k, k, q, q, 1, 0, &dq, &dk, &dv) != WGML_OK && !dq && !dk && !dv,
                    WGML_ERR_LIMIT, "sdpa_backward", "one query head of 8 queries by 8 keys needs 256 bytes",
                    "over the device's 100-byte limit", NULL);
    /* one key of D = 3: a group's k and v span 12 bytes, so head slices of one group cannot align */
    th_setenv("WGML_SDPA_BWD_SCRATCH", "40", 1);
    th_expect_error("sdpa_backward: head slices off the alignment",
                    wgml_sdpa_backward(T.g, qa, ka, ka, qa, qa, 0, 0, &dq, &dk, &dv) != WGML_OK && !dq,
                    WGML_ERR_LIMIT, "sdpa_backward", "one kv head (16 query rows by 1 key, 64 bytes)",
                    "storage alignment", NULL);
    th_unsetenv("WGML_SDPA_BWD_SCRATCH");
    wgml_tensor *t[4] = {q, k, qa, ka};
    for (int i = 0; i < 4; i++) wgml_tensor_free(t[i]);
}

static void test_sdpa(void) {
    /* sliding windows: prefill blocks straddling the window, Sq < Skv, Gemma 3's shape */
    case_sdpa_w((attn_dims){1, 4, 2, 48, 48, 32}, true, 0, 0, 9);
    case_sdpa_w((attn_dims){2, 4, 1, 20, 70, 16}, true, 0, 0, 30);
    case_sdpa_w((attn_dims){1, 4, 1, 40, 40, 256}, true, 0.0625f, 0, 16);
    case_sdpa((attn_dims){1, 9, 3, 37, 37, 64}, false, 0, 2);
    case_sdpa((attn_dims){1, 9, 3, 37, 37, 64}, true, 0, 1);
    case_sdpa((attn_dims){2, 9, 3, 7, 37, 64}, true, 0, 1);  /* Sq < Skv: end-aligned mask */
    case_sdpa((attn_dims){1, 4, 4, 129, 7, 16}, false, 0.3f, 1); /* Sq > Skv, MHA, explicit scale */
    case_sdpa((attn_dims){1, 3, 1, 129, 129, 64}, true, 0, 0);
    /* causal band skipping in the products (matmul_banded): query segments of 48 rows that
     * tiles straddle, and an end-aligned band (Sq 32 < Skv 80) whose first key tiles need
     * every query */
    case_sdpa((attn_dims){2, 6, 2, 48, 48, 32}, true, 0, 0);
    case_sdpa((attn_dims){1, 4, 2, 32, 80, 16}, true, 0, 0);
    case_sdpa((attn_dims){1, 9, 3, 512, 512, 64}, true, 0, 0); /* a training length */
    case_sdpa((attn_dims){1100, 2, 1, 30, 3, 4}, false, 0, 0); /* 66,000 rows: more than 65,535 workgroups */
    test_sdpa_sliced();
}

static void case_embedding(int64_t V, int rank, const int64_t *ishape, int64_t D, int hot, int dump) {
    int64_t N = numel_of(rank, ishape), dshape[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) dshape[i] = ishape[i];
    dshape[rank] = D;
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)(N ? N : 1));
    for (int64_t i = 0; i < N; i++) {
        int32_t id = (int32_t)th_uniform(0, (double)V);
        if (id >= V) id = (int32_t)V - 1;
        if (hot && i % 4 == 0) id = 3; /* one row used by a quarter of the positions */
        if (i % 7 == 5) id -= (int32_t)V; /* negative ids count from the end */
        hi[i] = id;
    }
    float *hdy = th_random((size_t)(N * D), -1, 1);
    wgml_tensor *idx = th_tensor_i32(rank, ishape, hi), *dy = th_tensor_f32(rank + 1, dshape, hdy);
    double t0 = now();
    wgml_tensor *dw = wgml_embedding_backward(T.g, idx, dy, V);
    float *got = th_read_f32(dw);
    double dt = now() - t0;
    double *ref = dalloc((size_t)(V * D));
    for (int64_t p = 0; p < N; p++) {
        int64_t r = hi[p] < 0 ? hi[p] + V : hi[p];
        for (int64_t c = 0; c < D; c++) ref[r * D + c] += hdy[p * D + c];
    }
    char name[160];
    snprintf(name, sizeof name, "embedding_backward V %lld N %lld D %lld%s (%.0f ms)", (long long)V, (long long)N,
             (long long)D, hot ? " hot row" : "", dt * 1e3);
    th_close(name, got, ref, (size_t)(V * D), 1e-5 * sqrt((double)N / 4 + 1), RTOL);
    wgml_tensor *dw2 = wgml_embedding_backward(T.g, idx, dy, V);
    float *g2 = th_read_f32(dw2);
    th_check(g2 && got && !memcmp(g2, got, sizeof(float) * (size_t)(V * D)), "%s: the same bits twice", name);
    if (dump && th_dumping()) {
        char cn[32];
        snprintf(cn, sizeof cn, "embedding%d", n_dumped++);
        float prm[1] = {(float)V};
        int64_t one = 1;
        th_dump(cn, "idx", WGML_I32, rank, ishape, hi);
        th_dump(cn, "dy", WGML_F32, rank + 1, dshape, hdy);
        th_dump(cn, "params", WGML_F32, 1, &one, prm);
        th_dump_tensor(cn, "dw", dw);
    }
    free(hi); free(hdy); free(got); free(g2); free(ref);
    wgml_tensor_free(idx); wgml_tensor_free(dy); wgml_tensor_free(dw); wgml_tensor_free(dw2);
}

static void test_embedding(void) {
    const int64_t s1[1] = {37}, s2[2] = {7, 129}, s3[2] = {2, 2048}, s0[1] = {1};
    case_embedding(129, 1, s1, 7, 0, 1);
    case_embedding(37, 2, s2, 36, 1, 1);
    case_embedding(5, 1, s0, 4, 0, 1);
    case_embedding(6, 0, s0, 5, 0, 1); /* a rank-0 index: dy is [D] */
    case_embedding(49152, 2, s3, 64, 1, 0); /* a real vocabulary, 4096 positions */
    case_embedding(49152, 2, s3, 383, 0, 0); /* scalar sums: more than 65,535 workgroups */
}

static void case_gather(int rank, const int64_t *xs, const int64_t *is, int dim) {
    int64_t nx = numel_of(rank, xs), ni = numel_of(rank, is);
    int d = dim < 0 ? dim + rank : dim;
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)ni);
    for (int64_t i = 0; i < ni; i++) {
        int32_t v = (int32_t)th_uniform(0, (double)xs[d]);
        if (v >= xs[d]) v = (int32_t)xs[d] - 1;
        hi[i] = i % 5 == 3 ? v - (int32_t)xs[d] : v; /* some negative */
    }
    float *hdy = th_random((size_t)ni, -1, 1);
    wgml_tensor *x = wgml_tensor_new(T.g, WGML_F32, rank, xs), *idx = th_tensor_i32(rank, is, hi),
                *dy = th_tensor_f32(rank, is, hdy);
    double t0 = now();
    wgml_tensor *dx = wgml_gather_backward(T.g, x, dim, idx, dy);
    float *got = th_read_f32(dx);
    double dt = now() - t0;
    double *ref = dalloc((size_t)nx);
    for (int64_t i = 0; i < ni; i++) {
        int64_t r = i, off = 0, mul = 1;
        for (int k = rank - 1; k >= 0; k--) {
            int64_t c = r % is[k];
            r /= is[k];
            if (k == d) c = hi[i] < 0 ? hi[i] + xs[d] : hi[i];
            off += c * mul;
            mul *= xs[k];
        }
        ref[off] += hdy[i];
    }
    char name[160];
    snprintf(name, sizeof name, "gather_backward rank %d dim %d, %lld index entries into %lld (%.0f ms)", rank, dim,
             (long long)ni, (long long)nx, dt * 1e3);
    th_close(name, got, ref, (size_t)nx, ATOL, RTOL);
    if (th_dumping()) {
        char cn[32];
        snprintf(cn, sizeof cn, "gather%d", n_dumped++);
        float prm[1] = {(float)dim};
        int64_t one = 1;
        th_dump(cn, "idx", WGML_I32, rank, is, hi);
        th_dump(cn, "dy", WGML_F32, rank, is, hdy);
        th_dump(cn, "params", WGML_F32, 1, &one, prm);
        th_dump_tensor(cn, "dx", dx);
    }
    free(hi); free(hdy); free(got); free(ref);
    wgml_tensor_free(x); wgml_tensor_free(idx); wgml_tensor_free(dy); wgml_tensor_free(dx);
}

static void test_gather(void) {
    const int64_t x1[2] = {7, 37}, i1[2] = {7, 5}, x2[3] = {37, 9, 4}, i2[3] = {129, 5, 4}, x3[3] = {4, 3, 129},
                  i3[3] = {3, 2, 7}, x4[1] = {7}, i4[1] = {37};
    case_gather(2, x1, i1, 1);
    case_gather(3, x2, i2, 0);  /* many duplicates; index smaller than x in dim 1 */
    case_gather(3, x3, i3, -1);
    case_gather(1, x4, i4, 0);
}

int main(int argc, char **argv) {
    th_init_args("test_backward_attn", argc, argv);
    double t0 = now(), t;
    test_sdpa();
    printf("sdpa: %.1f s\n", now() - t0);
    t = now();
    test_embedding();
    printf("embedding: %.1f s\n", now() - t);
    t = now();
    test_gather();
    printf("gather: %.1f s\n", now() - t);
    printf("total: %.1f s\n", now() - t0);
    return th_done();
}
