/* Determinism: the same op sequence with the same seed, run twice in fresh contexts, gives the
 * same output bytes exactly. Ops: matmul (mm and linear), softmax, rms_norm, sum, fused
 * cross-entropy (loss and dlogits), the linear weight gradient, and AdamW steps (src/ops/cross_entropy, src/optim:
 * clipping on, so the global-norm reduction is exercised). Sizes are chosen so the reductions
 * span several workgroups. Both an eager run and a built graph (run three times) are compared.
 * The inputs come from a splitmix64 stream of the seed (the harness seed), not from the
 * harness RNG, so both runs see the same bytes. */
#include "harness.h"
#include "tensor/splitmix.h"
#include "wgml-train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { M = 96, K = 160, N = 1000, STEPS = 3 };

typedef struct blob {
    uint8_t *p;
    size_t n, cap;
    char names[32][32];
    size_t ends[32];
    int parts;
} blob;

static void put(blob *b, const char *name, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    if (b->parts < 32) {
        snprintf(b->names[b->parts], sizeof b->names[0], "%s", name);
        b->ends[b->parts++] = b->n;
    }
}

static void put_tensor(blob *b, const char *name, wgml_tensor *t, wgml_ctx *ctx) {
    size_t n = wgml_tensor_nbytes(t);
    void *h = malloc(n ? n : 1);
    if (!t || wgml_tensor_read(t, h, n)) {
        th_check(false, "reading %s: %s", name, wgml_last_error(ctx));
        memset(h, 0, n);
    }
    put(b, name, h, n);
    free(h);
}

static float unif(uint64_t *s) { return (float)((double)(splitmix64(s) >> 11) * 0x1p-53 * 2.0 - 1.0); }

typedef struct inputs {
    float x[M * K], w[K * N], gamma[N], p0[N * K];
    int32_t labels[M];
} inputs;

static void make_inputs(inputs *in, uint64_t seed) {
    uint64_t s = seed;
    for (int i = 0; i < M * K; i++) in->x[i] = unif(&s);
    for (int i = 0; i < K * N; i++) in->w[i] = unif(&s) * 0.1f;
    for (int i = 0; i < N; i++) in->gamma[i] = 1.0f + 0.5f * unif(&s);
    for (int i = 0; i < N * K; i++) in->p0[i] = unif(&s) * 0.05f;
    for (int i = 0; i < M; i++) in->labels[i] = (int32_t)(splitmix64(&s) % N);
    in->labels[3] = -100; /* an ignored row */
}

/* One full run in a fresh context; built = 0: eager, 1: a built graph run STEPS times. */
static void run_once(const inputs *in, int built, blob *out) {
    wgml_ctx *ctx = NULL;
    wgml_ctx_options opt = {0};
    if (wgml_ctx_create(&opt, &ctx) != WGML_OK) {
        th_check(false, "context: %s", wgml_create_error());
        return;
    }
    wgml_graph *e = wgml_eager(ctx);
    wgml_graph *g = built ? wgml_graph_new(ctx) : e;
    int64_t sx[2] = {M, K}, sw[2] = {K, N}, sp[2] = {N, K}, sg[1] = {N}, sl[1] = {M};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, sx), *w = wgml_tensor_new(g, WGML_F32, 2, sw);
    wgml_tensor *gamma = wgml_tensor_new(g, WGML_F32, 1, sg), *labels = wgml_tensor_new(g, WGML_I32, 1, sl);
    wgml_adamw_config c = wgml_adamw_defaults();
    c.lr = 1e-2;
    c.max_grad_norm = 0.5;
    c.capacity = wgml_adamw_padded(N * K);
    wgml_optimizer *o = wgml_adamw_new(g, &c);
    wgml_tensor *p = o ? wgml_adamw_param(o, 2, sp) : NULL;
    wgml_tensor *gp = p ? wgml_adamw_grad(o, p) : NULL;
    if (!th_check(x && w && gamma && labels && p && gp, "setup: %s", wgml_last_error(ctx))) goto done;
    wgml_tensor_write(x, in->x, sizeof in->x);
    wgml_tensor_write(w, in->w, sizeof in->w);
    wgml_tensor_write(gamma, in->gamma, sizeof in->gamma);
    wgml_tensor_write(labels, in->labels, sizeof in->labels);
    wgml_tensor_write(p, in->p0, sizeof in->p0);

    int records = built ? 1 : STEPS, runs = built ? STEPS : 1;
    wgml_tensor *y = NULL, *sm = NULL, *rn = NULL, *tot = NULL, *loss = NULL, *dl = NULL;
    for (int r = 0; r < records; r++) {
        y = wgml_mm(g, x, w);                      /* [M, N] */
        sm = wgml_softmax(g, y, -1);
        rn = wgml_rms_norm(g, y, gamma, 1e-5f);
        tot = wgml_sum(g, rn, NULL, 0, 0);
        wgml_tensor *logits = wgml_linear(g, x, p, NULL); /* [M, N] */
        loss = wgml_cross_entropy(g, logits, labels, &dl);
        wgml_status s = dl ? wgml_linear_dw(g, dl, x, gp, 0) : wgml_last_status(ctx);
        if (!s) s = wgml_adamw_step(g, o);
        if (!th_check(s == WGML_OK && y && sm && rn && tot && loss, "record step %d: %s", r, wgml_last_error(ctx))) goto done;
        if (!built && r + 1 < records) {
            put_tensor(out, "loss", loss, ctx);
            wgml_tensor_free(y); wgml_tensor_free(sm); wgml_tensor_free(rn); wgml_tensor_free(tot);
            wgml_tensor_free(logits); wgml_tensor_free(loss); wgml_tensor_free(dl);
        }
    }
    if (built) {
        wgml_tensor *keep[] = {y, sm, rn, tot, loss, dl};
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) wgml_graph_keep(g, keep[i]);
        if (!th_check(wgml_graph_compile(g) == WGML_OK, "compile: %s", wgml_last_error(ctx))) goto done;
        for (int r = 0; r < runs; r++) {
            if (!th_check(wgml_graph_run(g) == WGML_OK, "run: %s", wgml_last_error(ctx))) goto done;
            if (r + 1 < runs) put_tensor(out, "loss", loss, ctx);
        }
    }
    put_tensor(out, "mm", y, ctx);
    put_tensor(out, "softmax", sm, ctx);
    put_tensor(out, "rms_norm", rn, ctx);
    put_tensor(out, "sum", tot, ctx);
    put_tensor(out, "loss", loss, ctx);
    put_tensor(out, "dlogits", dl, ctx);
    put_tensor(out, "params", wgml_adamw_buffer(o, WGML_ADAMW_PARAMS), ctx);
    put_tensor(out, "m", wgml_adamw_buffer(o, WGML_ADAMW_M), ctx);
    put_tensor(out, "v", wgml_adamw_buffer(o, WGML_ADAMW_V), ctx);
    put_tensor(out, "adamw_state", wgml_adamw_buffer(o, WGML_ADAMW_STATE), ctx);
    if (!built) {
        wgml_tensor_free(y); wgml_tensor_free(sm); wgml_tensor_free(rn); wgml_tensor_free(tot);
        wgml_tensor_free(loss); wgml_tensor_free(dl);
    }
done:
    wgml_adamw_free(o);
    if (built) wgml_graph_free(g);
    else {
        wgml_tensor_free(x); wgml_tensor_free(w); wgml_tensor_free(gamma); wgml_tensor_free(labels);
    }
    wgml_ctx_destroy(ctx);
}

static void compare(const char *what, const blob *a, const blob *b) {
    bool same = a->n == b->n && a->n > 0 && memcmp(a->p, b->p, a->n) == 0;
    if (!same && a->n == b->n) {
        size_t i = 0;
        while (i < a->n && a->p[i] == b->p[i]) i++;
        int part = 0;
        while (part < a->parts && a->ends[part] <= i) part++;
        th_check(false, "%s: outputs differ first at byte %zu (in '%s')", what, i, part < a->parts ? a->names[part] : "?");
        return;
    }
    th_check(same, "%s: %zu output bytes identical in both runs (%d outputs)", what, a->n, a->parts);
    if (same) printf("  ok %s: %zu bytes identical (%d outputs)\n", what, a->n, a->parts);
}

int main(int argc, char **argv) {
    th_init_args("test_determinism", argc, argv);
    inputs *in = malloc(sizeof *in);
    make_inputs(in, T.seed);
    for (int built = 0; built < 2; built++) {
        blob a = {0}, b = {0};
        clock_t t0 = clock();
        run_once(in, built, &a);
        run_once(in, built, &b);
        compare(built ? "built graph, 3 runs" : "eager, 3 steps", &a, &b);
        /* the loss changes from step to step (the optimizer did something): the first
         * recorded part is step 1's loss, part 6 the last step's */
        float l0 = 0, l2 = 0;
        if (a.parts > 6) {
            memcpy(&l0, a.p, 4);
            memcpy(&l2, a.p + a.ends[5], 4);
        }
        th_check(a.parts > 6 && l0 != l2, "the loss moves across steps (%.6f then %.6f)", l0, l2);
        printf("  loss: step 1 %.6f, step 3 %.6f\n", l0, l2);
        printf("  (%s: %.2f s CPU)\n", built ? "built" : "eager", (double)(clock() - t0) / CLOCKS_PER_SEC);
        free(a.p);
        free(b.p);
    }
    free(in);
    return th_done();
}
