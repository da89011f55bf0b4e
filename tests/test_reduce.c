#define _POSIX_C_SOURCE 199309L
/* Reductions (sum, mean, amax, argmax) over every kind of dim set, and softmax / log_softmax
 * over every dim, against plain double-precision loops; eager and in a built graph; bad input.
 * Run with --dump DIR, the softmax cases are also checked by tests/py/test_torch_reduce.py. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

enum { K_SUM, K_MEAN, K_MAX, K_ARGMAX };
static const char *KNAME[] = {"sum", "mean", "amax", "argmax"};

/* Reference: out[k] over the kept coordinates (row-major in kept order); for argmax the index
 * is the linear index over the reduced dims (one dim for argmax), first maximum wins. */
static void ref_reduce(const float *x, int rank, const int64_t *shape, const bool *red, int kind, double *out,
                       int32_t *idx, int64_t *n_out_p) {
    int64_t numel = 1, n_out = 1, n_red = 1;
    for (int d = 0; d < rank; d++) {
        numel *= shape[d];
        if (red[d]) n_red *= shape[d];
        else n_out *= shape[d];
    }
    for (int64_t o = 0; o < n_out; o++) {
        out[o] = kind == K_SUM || kind == K_MEAN ? 0.0 : -INFINITY;
        if (idx) idx[o] = -1;
    }
    int64_t c[WGML_MAX_RANK] = {0};
    for (int64_t e = 0; e < numel; e++) {
        int64_t o = 0, r = 0;
        for (int d = 0; d < rank; d++) {
            if (red[d]) r = r * shape[d] + c[d];
            else o = o * shape[d] + c[d];
        }
        double v = x[e];
        if (kind == K_SUM || kind == K_MEAN) out[o] += v;
        else if (idx ? (idx[o] < 0 || v > out[o]) : v > out[o]) {
            out[o] = v;
            if (idx) idx[o] = (int32_t)r;
        }
        for (int d = rank - 1; d >= 0; d--) {
            if (++c[d] < shape[d]) break;
            c[d] = 0;
        }
    }
    if (kind == K_MEAN)
        for (int64_t o = 0; o < n_out; o++) out[o] /= (double)n_red;
    *n_out_p = n_out;
}

/* One reduction case. quant > 0 rounds inputs to multiples of 1/quant (ties for argmax). */
static void case_reduce(int kind, int rank, const int64_t *shape, const int *dims, int n_dims, int keepdim,
                        double quant) {
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= shape[d];
    float *hx = th_random((size_t)numel, -1, 1);
    if (quant > 0)
        for (int64_t i = 0; i < numel; i++) hx[i] = (float)(floor(hx[i] * quant) / quant);
    wgml_tensor *x = th_tensor_f32(rank, shape, hx);
    bool red[WGML_MAX_RANK] = {false};
    for (int i = 0; i < n_dims; i++) red[dims[i] < 0 ? dims[i] + rank : dims[i]] = true;
    if (n_dims == 0)
        for (int d = 0; d < rank; d++) red[d] = true;
    char name[200];
    int used = snprintf(name, sizeof name, "%s [", KNAME[kind]);
    for (int d = 0; d < rank; d++) used += snprintf(name + used, sizeof name - (size_t)used, "%s%lld", d ? "," : "", (long long)shape[d]);
    used += snprintf(name + used, sizeof name - (size_t)used, "] dims {");
    for (int i = 0; i < n_dims; i++) used += snprintf(name + used, sizeof name - (size_t)used, "%s%d", i ? "," : "", dims[i]);
    snprintf(name + used, sizeof name - (size_t)used, "}%s%s", keepdim ? " keepdim" : "", quant > 0 ? " ties" : "");

    double t0 = now();
    wgml_tensor *o = kind == K_SUM ? wgml_sum(T.g, x, dims, n_dims, keepdim)
                     : kind == K_MEAN ? wgml_mean(T.g, x, dims, n_dims, keepdim)
                     : kind == K_MAX ? wgml_amax(T.g, x, dims, n_dims, keepdim)
                                     : wgml_argmax(T.g, x, dims[0], keepdim);
    void *got = o ? malloc(wgml_tensor_nbytes(o)) : NULL;
    if (!o || wgml_tensor_read(o, got, wgml_tensor_nbytes(o))) {
        th_check(false, "%s: %s", name, wgml_last_error(T.ctx));
        free(got); free(hx); wgml_tensor_free(x); wgml_tensor_free(o);
        return;
    }
    double dt = now() - t0;
    /* output shape */
    int orank = 0;
    int64_t oshape[WGML_MAX_RANK];
    for (int d = 0; d < rank; d++)
        if (!red[d]) oshape[orank++] = shape[d];
        else if (keepdim) oshape[orank++] = 1;
    bool shape_ok = wgml_tensor_rank(o) == orank &&
                    wgml_tensor_dtype(o) == (kind == K_ARGMAX ? WGML_I32 : WGML_F32);
    for (int d = 0; shape_ok && d < orank; d++) shape_ok = wgml_tensor_dim(o, d) == oshape[d];
    th_check(shape_ok, "%s: output shape/dtype", name);

    double *ref = malloc(sizeof(double) * (size_t)numel);
    int32_t *ridx = kind == K_ARGMAX ? malloc(sizeof(int32_t) * (size_t)numel) : NULL;
    int64_t n_out, n_red = numel;
    ref_reduce(hx, rank, shape, red, kind, ref, ridx, &n_out);
    n_red = numel / n_out;
    char full[260];
    snprintf(full, sizeof full, "%s (%.0f ms)", name, dt * 1e3);
    if (kind == K_ARGMAX) {
        th_exact_u32(full, got, (const uint32_t *)ridx, (size_t)n_out);
    } else if (kind == K_MAX) {
        th_close(full, got, ref, (size_t)n_out, 0, 0); /* exact: the maximum is one of the inputs */
    } else {
        /* fp32 accumulation of n values of magnitude <= 1: error grows like sqrt(n) ulps of the
         * partial sums (tree order); mean divides both by n */
        double atol = 2e-6 * sqrt((double)n_red) * (kind == K_MEAN ? 1.0 / (double)n_red : 1.0) * 8;
        th_close(full, got, ref, (size_t)n_out, fmax(atol, 1e-6), 1e-5);
    }
    free(got); free(hx); free(ref); free(ridx);
    wgml_tensor_free(x); wgml_tensor_free(o);
}

static void test_reductions(void) {
    const int64_t s3[3] = {7, 37, 129};
    const int dl[] = {0}, dm[] = {1}, dt[] = {2}, dneg[] = {-1}, d02[] = {0, 2}, d20[] = {-1, 0}, d01[] = {0, 1},
              d12[] = {1, 2}, dall[] = {0, 1, 2};
    struct { const int *d; int n; } sets[] = {{dl, 1}, {dm, 1}, {dt, 1}, {dneg, 1}, {d02, 2}, {d20, 2}, {d01, 2},
                                               {d12, 2}, {dall, 3}, {NULL, 0}};
    for (int k = K_SUM; k <= K_MAX; k++)
        for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
            for (int keep = 0; keep < 2; keep++) {
                if (k != K_SUM && keep && i % 2) continue; /* keepdim on every set for sum, half for the rest */
                case_reduce(k, 3, s3, sets[i].d, sets[i].n, keep, 0);
            }
    /* the vec4 row path (trailing dim % 4 == 0), the strided workgroup-per-output path
     * (one block, few outputs, long reduction), rank 4 with two separate reduced blocks */
    const int64_t v4[2] = {37, 132}, mid[3] = {3, 129, 5}, r4[4] = {3, 5, 7, 4}, big[2] = {2, 70001};
    const int d13[] = {1, 3}, d0[] = {0}, d023[] = {0, 2, 3}, dm1[] = {-1};
    for (int k = K_SUM; k <= K_MAX; k++) {
        case_reduce(k, 2, v4, dm1, 1, 0, 0);
        case_reduce(k, 2, v4, NULL, 0, 1, 0);
        case_reduce(k, 3, mid, dm, 1, 1, 0);
        case_reduce(k, 4, r4, d13, 2, 0, 0);
        case_reduce(k, 4, r4, d023, 3, 1, 0);
        case_reduce(k, 2, big, dm1, 1, 0, 0);
    }
    case_reduce(K_SUM, 4, r4, d0, 1, 0, 0);
    /* short trailing rows (a thread per output) */
    const int64_t sh[2] = {129, 7};
    case_reduce(K_SUM, 2, sh, dm1, 1, 1, 0);
    case_reduce(K_MAX, 2, sh, dm1, 1, 0, 0);
    case_reduce(K_ARGMAX, 2, sh, dm1, 1, 0, 2);
    /* few outputs, long reductions: split into chunks and merged in a second dispatch
     * (contiguous vec4 and scalar, one strided block, two blocks) */
    const int64_t sv4[2] = {3, 40000}, sodd[3] = {129, 37, 37}, sblk[3] = {2, 40000, 3}, s2b[3] = {300, 3, 129};
    const int d1[] = {1};
    for (int k = K_SUM; k <= K_ARGMAX; k++) {
        double q = k == K_ARGMAX ? 2 : 0;
        case_reduce(k, 2, sv4, dm1, 1, 0, q);
        case_reduce(k, 3, sblk, d1, 1, 1, q);
        if (k != K_ARGMAX) {
            case_reduce(k, 3, sodd, NULL, 0, 0, 0);
            case_reduce(k, 3, s2b, d02, 2, 0, 0);
        }
    }
    /* 70,000 rows of 37: a workgroup per row, more than 65,535 workgroups */
    const int64_t many[2] = {70000, 37};
    case_reduce(K_SUM, 2, many, dm1, 1, 0, 0);
    case_reduce(K_MEAN, 2, many, dm1, 1, 1, 0);
    case_reduce(K_ARGMAX, 2, many, dm1, 1, 0, 4);
    /* a size-1 dim reduced alone (a copy) */
    const int64_t s1[3] = {5, 1, 7};
    case_reduce(K_MEAN, 3, s1, dm, 1, 0, 0);
    case_reduce(K_ARGMAX, 3, s1, dm, 1, 1, 0);
}

static void test_argmax(void) {
    const int64_t s3[3] = {7, 37, 129}, v4[2] = {37, 132}, mid[3] = {3, 129, 5}, big[2] = {2, 70001};
    for (int d = -1; d < 3; d++)
        for (int keep = 0; keep < 2; keep++) {
            case_reduce(K_ARGMAX, 3, s3, &d, 1, keep, 0);
            case_reduce(K_ARGMAX, 3, s3, &d, 1, keep, 2); /* values in {-1, -0.5, 0, 0.5}: many ties */
        }
    int dl = 1, d1 = 1;
    case_reduce(K_ARGMAX, 2, v4, &dl, 1, 0, 2);
    case_reduce(K_ARGMAX, 3, mid, &d1, 1, 0, 2);
    case_reduce(K_ARGMAX, 2, big, &dl, 1, 0, 0);
    /* ties far apart in one long row: the maximum at several places that different threads,
     * vec4 lanes and chunks of a split reduction own; the first must win */
    int64_t n = 4100, shape[2] = {3, 4100};
    float *hx = th_random((size_t)(3 * n), -1, 1);
    const int64_t at[3][3] = {{4099, 17, 2050}, {300, 301, 4000}, {3, 2, 1}};
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 3; j++) hx[r * n + at[r][j]] = 5.0f;
    wgml_tensor *x = th_tensor_f32(2, shape, hx);
    int32_t *got = (int32_t *)th_read_f32(wgml_argmax(T.g, x, -1, 0));
    uint32_t want[3] = {17, 300, 1};
    th_exact_u32("argmax ties placed far apart [3,4100]", (uint32_t *)got, want, 3);
    free(got);
    /* the same for amax / argmax over a leading dim through the strided kernel */
    float *ht = malloc(sizeof(float) * (size_t)(3 * n));
    for (int64_t i = 0; i < n; i++)
        for (int r = 0; r < 3; r++) ht[i * 3 + r] = hx[r * n + i];
    int64_t tshape_[2] = {4100, 3};
    wgml_tensor *xt = th_tensor_f32(2, tshape_, ht);
    got = (int32_t *)th_read_f32(wgml_argmax(T.g, xt, 0, 1));
    th_exact_u32("argmax ties along dim 0 [4100,3]", (uint32_t *)got, want, 3);
    free(got); free(hx); free(ht);
    wgml_tensor_free(x); wgml_tensor_free(xt);
}

/* NaN and infinities: amax propagates NaN and argmax takes the first NaN (as torch does); a
 * row of -inf has maximum -inf at index 0; +inf wins. Rows of 37 (a workgroup per row), 7 (a
 * thread per row) and 5000 (split into chunks). */
static void test_nan_inf(void) {
    const int64_t lens[3] = {37, 7, 5000};
    for (int li = 0; li < 3; li++) {
        int64_t n = lens[li], shape[2] = {4, n};
        float *hx = th_random((size_t)(4 * n), -1, 1);
        hx[0 * n + 5] = NAN;
        hx[0 * n + n - 1] = NAN;
        for (int64_t j = 0; j < n; j++) hx[1 * n + j] = -INFINITY;
        hx[2 * n + 3] = INFINITY;
        hx[2 * n + n - 2] = INFINITY;
        double rmax[4] = {NAN, -INFINITY, INFINITY, -INFINITY};
        uint32_t ridx[4] = {5, 0, 3, 0};
        for (int64_t j = 0; j < n; j++)
            if (hx[3 * n + j] > rmax[3]) { rmax[3] = hx[3 * n + j]; ridx[3] = (uint32_t)j; }
        wgml_tensor *x = th_tensor_f32(2, shape, hx);
        int dl = -1;
        char name[80];
        float *gm = th_read_f32(wgml_amax(T.g, x, &dl, 1, 0));
        snprintf(name, sizeof name, "amax with NaN / ±inf, rows of %lld", (long long)n);
        th_close(name, gm, rmax, 4, 0, 0);
        uint32_t *gi = (uint32_t *)th_read_f32(wgml_argmax(T.g, x, -1, 0));
        snprintf(name, sizeof name, "argmax with NaN / ±inf, rows of %lld", (long long)n);
        th_exact_u32(name, gi, ridx, 4);
        free(gm); free(gi); free(hx);
        wgml_tensor_free(x);
    }
}

/* Softmax reference in double: m = max, s = Σ exp(x - m). */
static void ref_softmax(const float *x, double *out, int64_t outer, int64_t n, int64_t inner, bool log_form) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *p = x + o * n * inner + i;
            double *q = out + o * n * inner + i;
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < n; j++) m = fmax(m, p[j * inner]);
            for (int64_t j = 0; j < n; j++) s += exp(p[j * inner] - m);
            for (int64_t j = 0; j < n; j++)
                q[j * inner] = log_form ? (p[j * inner] - m) - log(s) : exp(p[j * inner] - m) / s;
        }
}

static int dump_count;

/* One softmax case: x uniform in [-range, range], with every ninf_every-th element -inf. */
static void case_softmax(bool log_form, int rank, const int64_t *shape, int dim, double range, int ninf_every) {
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= shape[d];
    float *hx = th_random((size_t)numel, -range, range);
    if (ninf_every)
        for (int64_t i = 3; i < numel; i += ninf_every) hx[i] = -INFINITY;
    wgml_tensor *x = th_tensor_f32(rank, shape, hx);
    int d = dim < 0 ? dim + rank : dim;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= shape[i];
    for (int i = d + 1; i < rank; i++) inner *= shape[i];
    double t0 = now();
    wgml_tensor *o = log_form ? wgml_log_softmax(T.g, x, dim) : wgml_softmax(T.g, x, dim);
    float *got = th_read_f32(o);
    double dt = now() - t0;
    double *ref = malloc(sizeof(double) * (size_t)numel);
    ref_softmax(hx, ref, outer, shape[d], inner, log_form);
    char name[200];
    int used = snprintf(name, sizeof name, "%s [", log_form ? "log_softmax" : "softmax");
    for (int i = 0; i < rank; i++) used += snprintf(name + used, sizeof name - (size_t)used, "%s%lld", i ? "," : "", (long long)shape[i]);
    snprintf(name + used, sizeof name - (size_t)used, "] dim %d ±%g%s (%.0f ms)", dim, range, ninf_every ? " -inf" : "",
             dt * 1e3);
    /* softmax values lie in [0, 1]: fp32 exp and a sum in fp32 give a few ulps of relative
     * error, so atol 1e-5 (absolute, for the tiny probabilities) and rtol 1e-4; log_softmax
     * values reach |2·range|, so its atol scales with the range */
    th_close(name, got, ref, (size_t)numel, log_form ? 1e-5 * fmax(1.0, range) : 1e-5, 1e-4);
    if (th_dumping() && dump_count < 40 && numel <= 400000) {
        char cn[32];
        snprintf(cn, sizeof cn, "%s%d", log_form ? "logsoftmax" : "softmax", dump_count++);
        float prm[1] = {(float)dim};
        int64_t one = 1;
        th_dump(cn, "x", WGML_F32, rank, shape, hx);
        th_dump(cn, "params", WGML_F32, 1, &one, prm);
        th_dump_tensor(cn, "out", o);
    }
    free(got); free(hx); free(ref);
    wgml_tensor_free(x); wgml_tensor_free(o);
}

static void test_softmax(void) {
    const int64_t s3[3] = {7, 37, 129}, longr[2] = {3, 49152}, longo[2] = {2, 49153}, shortr[2] = {1000, 7},
                  strided[3] = {2, 2000, 3}, many[2] = {70000, 37}, v36[2] = {129, 36}, v132[2] = {37, 132};
    for (int lf = 0; lf < 2; lf++) {
        for (int d = -1; d < 3; d++) case_softmax(lf, 3, s3, d, 4, 0);
        case_softmax(lf, 3, s3, 2, 40, 0);
        case_softmax(lf, 3, s3, 1, 80, 0);
        case_softmax(lf, 3, s3, -1, 80, 11); /* rows with -inf entries */
        case_softmax(lf, 3, s3, 0, 80, 5);
        case_softmax(lf, 2, longr, 1, 40, 0);  /* a vocabulary-long row, vec4 */
        case_softmax(lf, 2, longo, -1, 80, 97); /* odd length: scalar path, -inf entries */
        case_softmax(lf, 2, shortr, 1, 40, 0); /* short rows: a thread per row */
        case_softmax(lf, 2, v36, 1, 40, 13);   /* vec4 rows, 64 rows of 4 threads per workgroup */
        case_softmax(lf, 2, v132, -1, 80, 0);  /* vec4 rows, 32 rows of 8 threads per workgroup */
        case_softmax(lf, 3, strided, 1, 40, 0); /* long rows at a stride: a workgroup per row */
        case_softmax(lf, 1, strided + 1, 0, 1000, 0); /* rank 1, far beyond ±40 */
    }
    case_softmax(false, 2, many, 1, 40, 0); /* 70,000 rows (2,188 workgroups of 32 rows) */
    case_softmax(true, 2, many, -1, 40, 0);
}

/* A built graph: softmax (vec4 rows), log_softmax over a middle dim, sum / mean / amax /
 * argmax; run twice with new inputs. */
static void test_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t shape[3] = {5, 9, 12};
    int64_t n = 5 * 9 * 12;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 3, shape);
    wgml_tensor *sm = wgml_softmax(g, x, -1);
    wgml_tensor *ls = wgml_log_softmax(g, sm, 1);
    int d02[2] = {0, 2}, d1[1] = {1};
    wgml_tensor *s = wgml_sum(g, ls, d02, 2, 0);   /* [9] */
    wgml_tensor *mn = wgml_mean(g, ls, d1, 1, 1);  /* [5, 1, 12] */
    wgml_tensor *mx = wgml_amax(g, x, NULL, 0, 0); /* [] */
    wgml_tensor *am = wgml_argmax(g, x, 1, 0);     /* [5, 12] */
    int64_t yshape[2] = {64, 700};
    wgml_tensor *y = wgml_tensor_new(g, WGML_F32, 2, yshape);
    wgml_tensor *ys = wgml_sum(g, y, NULL, 0, 1); /* [1, 1]: a split reduction (two dispatches) */
    th_check(s && mn && mx && am && ys && !wgml_graph_keep(g, s) && !wgml_graph_keep(g, mn) &&
                 !wgml_graph_keep(g, mx) && !wgml_graph_keep(g, am) && !wgml_graph_keep(g, ys) && !wgml_graph_compile(g),
             "reduce graph builds and compiles: %s", wgml_last_error(T.ctx));
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)n, -3, 3), *hy = th_random(64 * 700, -1, 1);
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)n);
        wgml_tensor_write(y, hy, sizeof(float) * 64 * 700);
        th_check(!wgml_graph_run(g), "reduce graph run: %s", wgml_last_error(T.ctx));
        double *rsm = malloc(sizeof(double) * (size_t)n), *rls = malloc(sizeof(double) * (size_t)n);
        ref_softmax(hx, rsm, 45, 12, 1, false);
        float *fsm = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) fsm[i] = (float)rsm[i];
        ref_softmax(fsm, rls, 5, 9, 12, true);
        double rs[9] = {0}, rmn[60] = {0}, rmx = -INFINITY;
        uint32_t ram[60];
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 9; b++)
                for (int c = 0; c < 12; c++) {
                    double v = rls[(a * 9 + b) * 12 + c];
                    rs[b] += v;
                    rmn[a * 12 + c] += v / 9;
                    rmx = fmax(rmx, hx[(a * 9 + b) * 12 + c]);
                }
        for (int a = 0; a < 5; a++)
            for (int c = 0; c < 12; c++) {
                int best = 0;
                for (int b = 1; b < 9; b++)
                    if (hx[(a * 9 + b) * 12 + c] > hx[(a * 9 + best) * 12 + c]) best = b;
                ram[a * 12 + c] = (uint32_t)best;
            }
        float gs[9], gmn[60], gmx;
        uint32_t gam[60];
        th_check(!wgml_tensor_read(s, gs, sizeof gs) && !wgml_tensor_read(mn, gmn, sizeof gmn) &&
                     !wgml_tensor_read(mx, &gmx, sizeof gmx) && !wgml_tensor_read(am, gam, sizeof gam),
                 "read graph outputs: %s", wgml_last_error(T.ctx));
        th_close(run ? "graph run 2: sum of log_softmax" : "graph run 1: sum of log_softmax", gs, rs, 9, 1e-4, 1e-4);
        th_close(run ? "graph run 2: mean" : "graph run 1: mean", gmn, rmn, 60, 1e-5, 1e-4);
        th_close(run ? "graph run 2: amax" : "graph run 1: amax", &gmx, &rmx, 1, 0, 0);
        th_exact_u32(run ? "graph run 2: argmax" : "graph run 1: argmax", gam, ram, 60);
        double rys = 0;
        float gys = NAN;
        for (int i = 0; i < 64 * 700; i++) rys += hy[i];
        th_check(!wgml_tensor_read(ys, &gys, sizeof gys), "read split sum: %s", wgml_last_error(T.ctx));
        th_close(run ? "graph run 2: sum over 44800 (split)" : "graph run 1: sum over 44800 (split)", &gys, &rys, 1,
                 2e-6 * sqrt(44800.0) * 8, 1e-5);
        free(hy);
        free(hx); free(rsm); free(rls); free(fsm);
    }
    wgml_graph_free(g);
}

static void test_bad_input(void) {
    int64_t s[3] = {2, 3, 4};
    float z[24] = {0};
    wgml_tensor *x = th_tensor_f32(3, s, z);
    int32_t zi[24] = {0};
    wgml_tensor *xi = th_tensor_i32(3, s, zi);
    int dup[2] = {1, -2}, oor[2] = {0, 3}, neg[1] = {-4};
    th_expect_error("sum NULL x", wgml_sum(T.g, NULL, NULL, 0, 0) == NULL, WGML_ERR_ARG, "sum", "x is NULL", NULL);
    th_expect_error("sum duplicate dims", wgml_sum(T.g, x, dup, 2, 0) == NULL, WGML_ERR_ARG, "sum", "[1, -2]",
                    "twice", "[2, 3, 4]", NULL);
    th_expect_error("mean dim out of range", wgml_mean(T.g, x, oor, 2, 0) == NULL, WGML_ERR_ARG, "mean", "dim 3",
                    "[0, 3]", "[2, 3, 4]", NULL);
    th_expect_error("amax negative dim out of range", wgml_amax(T.g, x, neg, 1, 1) == NULL, WGML_ERR_ARG, "amax",
                    "dim -4", NULL);
    th_expect_error("sum dims NULL with a count", wgml_sum(T.g, x, NULL, 2, 0) == NULL, WGML_ERR_ARG, "sum", NULL);
    th_expect_error("sum i32", wgml_sum(T.g, xi, NULL, 0, 0) == NULL, WGML_ERR_DTYPE, "sum", "x must be f32", NULL);
    th_expect_error("argmax dim out of range", wgml_argmax(T.g, x, 3, 0) == NULL, WGML_ERR_ARG, "argmax", "dim 3",
                    NULL);
    th_expect_error("argmax i32", wgml_argmax(T.g, xi, 0, 0) == NULL, WGML_ERR_DTYPE, "argmax", NULL);
    th_expect_error("softmax dim out of range", wgml_softmax(T.g, x, -4) == NULL, WGML_ERR_ARG, "softmax", "dim -4",
                    "[2, 3, 4]", NULL);
    th_expect_error("log_softmax NULL", wgml_log_softmax(T.g, NULL, 0) == NULL, WGML_ERR_ARG, "log_softmax",
                    "x is NULL", NULL);
    th_expect_error("log_softmax i32", wgml_log_softmax(T.g, xi, 0) == NULL, WGML_ERR_DTYPE, "log_softmax", NULL);
    wgml_graph *g2 = wgml_graph_new(T.ctx);
    th_expect_error("sum x of another graph", wgml_sum(g2, x, NULL, 0, 0) == NULL, WGML_ERR_ARG, "sum",
                    "another graph", NULL);
    wgml_graph_free(g2);
    /* still works afterwards */
    float *got = th_read_f32(wgml_sum(T.g, x, NULL, 0, 0));
    double ref = 0;
    th_close("sum after errors", got, &ref, 1, 0, 0);
    free(got);
    wgml_tensor_free(x); wgml_tensor_free(xi);
}

int main(int argc, char **argv) {
    th_init_args("test_reduce", argc, argv);
    double t0 = now();
    test_reductions();
    printf("reductions: %.1f s\n", now() - t0);
    t0 = now();
    test_argmax();
    test_nan_inf();
    printf("argmax: %.1f s\n", now() - t0);
    t0 = now();
    test_softmax();
    printf("softmax: %.1f s\n", now() - t0);
    test_graph();
    test_bad_input();
    return th_done();
}
