/* wgml_pool (src/ops/pool): max (with the argmax offsets) and average pooling over 1-3 window
 * dims, with stride, padding, dilation, ceil-mode extents, count_include_pad, divisor and
 * adaptive windows, against an fp64 reference that walks every window element by element
 * (PyTorch's definitions); random shapes and arguments each run, NaN-poisoned outputs; a NaN
 * in a window wins the maximum; a built graph run twice with new inputs; bad arguments give
 * errors naming them. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t irand(int64_t lo, int64_t hi) { return (int64_t)floor(th_uniform((double)lo, (double)hi + 1.0 - 1e-9)); }

typedef struct pcase {
    int rank, nd;
    int64_t shape[5];
    wgml_pool_desc d;
} pcase;

/* A random valid case: kind 0 max, 1 average, 2 adaptive max, 3 adaptive average. */
static pcase draw(int nd, int kind) {
    pcase c = {.nd = nd, .rank = nd + (int)irand(0, 2)};
    c.d = (wgml_pool_desc){.nd = nd, .max = kind == 0 || kind == 2, .adaptive = kind >= 2,
                           .count_include_pad = (int)irand(0, 1)};
    int lead = c.rank - nd, ceil_mode = (int)irand(0, 1);
    for (int i = 0; i < lead; i++) c.shape[i] = irand(1, 3);
    if (kind == 1 && irand(0, 3) == 0) c.d.divisor = irand(1, 9);
    for (int i = 0; i < nd; i++) {
        int64_t in = irand(1, nd == 1 ? 20 : nd == 2 ? 9 : 6);
        c.shape[lead + i] = in;
        if (kind >= 2) {
            c.d.out[i] = irand(1, in + 2);
            continue;
        }
        int64_t k = irand(1, 4), dl = kind == 0 ? irand(1, 2) : 1;
        if (dl * (k - 1) + 1 > in) k = 1;
        int64_t ek = dl * (k - 1) + 1, st = irand(1, 3), pd = irand(0, ek / 2);
        int64_t span = in + 2 * pd - ek, o = (ceil_mode ? span + st - 1 : span) / st + 1;
        if (ceil_mode && (o - 1) * st >= in + pd) o--;
        c.d.kernel[i] = k, c.d.stride[i] = st, c.d.padding[i] = pd, c.d.dilation[i] = dl, c.d.out[i] = o;
    }
    return c;
}

/* The reference: out and idx over [planes, out...]. */
static void reference(const pcase *c, const float *x, double *out, double *idx) {
    int lead = c->rank - c->nd, nd = c->nd;
    int64_t planes = 1, P = 1, NP = 1;
    const int64_t *in = c->shape + lead;
    for (int i = 0; i < lead; i++) planes *= c->shape[i];
    for (int i = 0; i < nd; i++) P *= in[i], NP *= c->d.out[i];
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t p = 0; p < NP; p++) {
            int64_t o[3], r = p, lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1}, step[3] = {1, 1, 1}, pool = 1;
            for (int i = nd - 1; i >= 0; i--) o[i] = r % c->d.out[i], r /= c->d.out[i];
            for (int i = 0; i < nd; i++) {
                if (c->d.adaptive) {
                    lo[i] = (int64_t)floor((double)(o[i] * in[i]) / (double)c->d.out[i]);
                    hi[i] = (int64_t)ceil((double)((o[i] + 1) * in[i]) / (double)c->d.out[i]), step[i] = 1;
                } else {
                    lo[i] = o[i] * c->d.stride[i] - c->d.padding[i], step[i] = c->d.dilation[i];
                    hi[i] = lo[i] + (c->d.kernel[i] - 1) * step[i] + 1;
                    int64_t e = lo[i] + c->d.kernel[i] < in[i] + c->d.padding[i] ? lo[i] + c->d.kernel[i] : in[i] + c->d.padding[i];
                    pool *= e - lo[i];
                }
            }
            double best = -INFINITY, sum = 0;
            int64_t arg = -1, cnt = 0, at[3] = {lo[0], nd > 1 ? lo[1] : 0, nd > 2 ? lo[2] : 0};
            for (;;) {
                int inside = 1;
                int64_t off = 0;
                for (int i = 0; i < nd; i++) inside &= at[i] >= 0 && at[i] < in[i], off = off * in[i] + at[i];
                if (inside) {
                    double v = x[pl * P + off];
                    if (v > best || isnan(v) || arg < 0) best = v, arg = off;
                    sum += v, cnt++;
                }
                int i = nd - 1;
                while (i >= 0 && (at[i] += step[i]) >= hi[i]) at[i] = lo[i], i--;
                if (i < 0) break;
            }
            int64_t div = c->d.divisor ? c->d.divisor : c->d.count_include_pad && !c->d.adaptive ? pool : cnt;
            out[pl * NP + p] = c->d.max ? best : sum / (double)div;
            idx[pl * NP + p] = (double)arg;
        }
}

static int64_t numel(const pcase *c, int outp) {
    int64_t n = 1;
    for (int i = 0; i < c->rank; i++) n *= i >= c->rank - c->nd && outp ? c->d.out[i - (c->rank - c->nd)] : c->shape[i];
    return n;
}

static void run_case(const pcase *c, int with_nan, const char *name) {
    int64_t nx = numel(c, 0), ny = numel(c, 1);
    float *hx = th_random((size_t)nx, -2, 2);
    if (with_nan) hx[irand(0, nx - 1)] = NAN;
    double *ref = malloc((size_t)ny * sizeof *ref), *refi = malloc((size_t)ny * sizeof *refi);
    reference(c, hx, ref, refi);
    wgml_tensor *x = th_tensor_f32(c->rank, c->shape, hx), *ix = NULL;
    wgml_tensor *y = wgml_pool(T.g, x, &c->d, c->d.max ? &ix : NULL);
    char what[200];
    snprintf(what, sizeof what, "%s nd %d rank %d in %lld out %lld k %lld st %lld pd %lld dl %lld cip %d div %lld", name,
             c->nd, c->rank, (long long)c->shape[c->rank - c->nd], (long long)c->d.out[0], (long long)c->d.kernel[0],
             (long long)c->d.stride[0], (long long)c->d.padding[0], (long long)c->d.dilation[0], c->d.count_include_pad,
             (long long)c->d.divisor);
    if (!th_check(y != NULL, "%s: runs (%s)", what, y ? "" : wgml_last_error(T.ctx))) goto done;
    th_check(wgml_tensor_numel(y) == ny && wgml_tensor_rank(y) == c->rank, "%s: output shape", what);
    float *got = th_read_f32(y);
    if (got) {
        if (with_nan) { /* NaN where the reference has one, the values elsewhere */
            int ok = 1;
            for (int64_t i = 0; i < ny; i++)
                if (isnan(ref[i]) != isnan(got[i]) || (!isnan(ref[i]) && fabs(got[i] - ref[i]) > 1e-6)) ok = 0;
            th_check(ok, "%s: a NaN wins its windows", what);
        } else {
            th_close(what, got, ref, (size_t)ny, 1e-6, 1e-5);
        }
    }
    free(got);
    if (ix) {
        int32_t *gi = malloc((size_t)ny * sizeof *gi);
        int ok = !wgml_tensor_read(ix, gi, (size_t)ny * sizeof *gi);
        int64_t bad = -1;
        for (int64_t i = 0; ok && i < ny; i++)
            if ((double)gi[i] != refi[i]) ok = 0, bad = i;
        th_check(ok, "%s: indices%s", what, ok ? "" : " differ");
        if (!ok && bad >= 0) printf("     at %lld: got %d, want %.0f\n", (long long)bad, gi[bad], refi[bad]);
        free(gi);
    }
done:
    wgml_tensor_free(x), wgml_tensor_free(y), wgml_tensor_free(ix);
    free(hx), free(ref), free(refi);
}

/* A built graph: compiled once, run with two inputs. */
static void built_graph(void) {
    pcase c = draw(2, 0);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, c.rank, c.shape), *ix = NULL;
    wgml_tensor *y = wgml_pool(g, x, &c.d, &ix);
    int ok = y && ix && !wgml_graph_keep(g, y) && !wgml_graph_keep(g, ix) && !wgml_graph_compile(g);
    th_check(ok, "built graph compiles (%s)", ok ? "" : wgml_last_error(T.ctx));
    int64_t nx = numel(&c, 0), ny = numel(&c, 1);
    for (int run = 0; ok && run < 2; run++) {
        float *hx = th_random((size_t)nx, -1, 1), *got = malloc((size_t)ny * sizeof *got);
        double *ref = malloc((size_t)ny * sizeof *ref), *refi = malloc((size_t)ny * sizeof *refi);
        reference(&c, hx, ref, refi);
        wgml_tensor_write(x, hx, (size_t)nx * sizeof *hx);
        th_check(!wgml_graph_run(g) && !wgml_tensor_read(y, got, (size_t)ny * sizeof *got), "built graph run %d", run);
        th_close("built graph max", got, ref, (size_t)ny, 1e-6, 1e-5);
        free(hx), free(got), free(ref), free(refi);
    }
    wgml_graph_free(g);
}

static void bad_input(void) {
    int64_t s4[4] = {1, 2, 5, 5};
    float *h = th_random(50, -1, 1);
    wgml_tensor *x = th_tensor_f32(4, s4, h), *ix;
    wgml_pool_desc ok = {.nd = 2, .max = 1, .out = {2, 2}, .kernel = {2, 2}, .stride = {2, 2}, .dilation = {1, 1}};
    wgml_pool_desc d = ok;
    d.nd = 4;
    th_expect_error("4 window dims", wgml_pool(T.g, x, &d, NULL) == NULL, WGML_ERR_ARG, "pool", "window dims", NULL);
    d = ok, d.kernel[1] = 0;
    th_expect_error("kernel 0", wgml_pool(T.g, x, &d, NULL) == NULL, WGML_ERR_ARG, "pool", "kernel", "[1, 2, 5, 5]", NULL);
    d = ok, d.padding[0] = 2;
    th_expect_error("padding over half", wgml_pool(T.g, x, &d, NULL) == NULL, WGML_ERR_ARG, "padding", NULL);
    d = ok, d.out[0] = 4;
    th_expect_error("window past the input", wgml_pool(T.g, x, &d, NULL) == NULL, WGML_ERR_ARG, "output extent", NULL);
    d = ok, d.max = 0;
    th_expect_error("indices of an average", wgml_pool(T.g, x, &d, &ix) == NULL, WGML_ERR_ARG, "indices", NULL);
    d = ok, d.max = 0, d.dilation[0] = 2;
    th_expect_error("dilated average", wgml_pool(T.g, x, &d, NULL) == NULL, WGML_ERR_ARG, "dilation", NULL);
    d = ok, d.kernel[0] = d.kernel[1] = 1000, d.padding[0] = d.padding[1] = 400, d.out[0] = d.out[1] = 1;
    th_expect_error("huge window", wgml_pool(T.g, x, &d, NULL) == NULL, WGML_ERR_LIMIT, "windows of more than", NULL);
    int64_t si[2] = {5, 5};
    int32_t hi[25] = {0};
    wgml_tensor *xi = th_tensor_i32(2, si, hi);
    th_expect_error("i32 input", wgml_pool(T.g, xi, &ok, NULL) == NULL, WGML_ERR_DTYPE, "pool", NULL);
    th_expect_error("NULL desc", wgml_pool(T.g, x, NULL, NULL) == NULL, WGML_ERR_ARG, "desc", NULL);
    wgml_tensor_free(x), wgml_tensor_free(xi);
    free(h);
}

int main(int argc, char **argv) {
    th_init_args("pool", argc, argv);
    static const char *names[] = {"max", "avg", "adaptive max", "adaptive avg"};
    for (int rep = 0; rep < 3; rep++)
        for (int nd = 1; nd <= 3; nd++)
            for (int kind = 0; kind < 4; kind++) {
                pcase c = draw(nd, kind);
                run_case(&c, 0, names[kind]);
            }
    for (int kind = 0; kind < 3; kind += 2) {
        pcase c = draw(2, kind);
        run_case(&c, 1, names[kind]);
    }
    built_graph();
    bad_input();
    return th_done();
}
