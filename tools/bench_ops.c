/* wgml bench ops: effective bandwidth of bandwidth-bound kernels (bytes each must move at the
 * least / GPU time) next to the WGSL copy (clone), each checked on sampled rows first. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ops_case {
    const char *name;
    double bytes_per_elem; /* fewest bytes moved per element of x */
} ops_case;

static const ops_case CASES[] = {
    {"copy (clone)", 8}, {"add (broadcast-free)", 12}, {"softmax (rows of 4096)", 8},
    {"rms_norm (rows of 4096)", 8}, {"layer_norm (rows of 4096)", 8}, {"sum (rows of 4096)", 4},
    {"cross_entropy (rows of 4096)", 8}, /* reads the logits, writes dlogits (labels: 4 B a row) */
};
#define N_CASES (int)(sizeof CASES / sizeof CASES[0])

static wgml_tensor *run_case(wgml_graph *g, int c, wgml_tensor *x, wgml_tensor *y, wgml_tensor *w, wgml_tensor *lab) {
    int last = -1;
    wgml_tensor *d = NULL;
    switch (c) {
    case 0: return wgml_clone(g, x);
    case 1: return wgml_add(g, x, y, 1.0f);
    case 2: return wgml_softmax(g, x, -1);
    case 3: return wgml_rms_norm(g, x, w, 1e-5f);
    case 4: return wgml_layer_norm(g, x, w, NULL, 1e-5f, NULL, NULL);
    case 5: return wgml_sum(g, x, &last, 1, 0);
    case 6: return wgml_cross_entropy(g, x, lab, &d) ? d : NULL;
    }
    return NULL;
}

/* Reference for row r of case c, in double precision. */
static void reference_row(int c, const float *x, const float *y, const float *w, int64_t cols, int32_t label,
                          int64_t rows, double *out) {
    double s = 0, mx = -INFINITY, ss = 0;
    for (int64_t j = 0; j < cols; j++) {
        s += x[j];
        ss += (double)x[j] * x[j];
        if (x[j] > mx) mx = x[j];
    }
    double mean = s / cols, var = 0, z = 0;
    for (int64_t j = 0; j < cols; j++) {
        var += (x[j] - mean) * (x[j] - mean);
        z += exp(x[j] - mx);
    }
    var /= cols;
    for (int64_t j = 0; j < cols; j++) {
        switch (c) {
        case 0: out[j] = x[j]; break;
        case 1: out[j] = (double)x[j] + y[j]; break;
        case 2: out[j] = exp(x[j] - mx) / z; break;
        case 3: out[j] = x[j] / sqrt(ss / cols + 1e-5) * w[j]; break;
        case 4: out[j] = (x[j] - mean) / sqrt(var + 1e-5) * w[j]; break;
        case 5: out[0] = s; return;
        case 6: out[j] = (exp(x[j] - mx) / z - (j == label)) / (double)rows; break;
        }
    }
}

/* Host cost of a dispatch in a built graph: a chain of small clones (one dispatch each, on a
 * [64] tensor), run repeatedly; wgml_record_stats gives the CPU time (this thread) spent
 * encoding and submitting the runs, divided by the dispatches recorded. Five batches of runs,
 * the best and the median batch reported (the host's scheduling moves single batches by up to
 * 2x on the GPU machine). */
static int dispatch_cost(wgml_ctx *ctx, int cpu) {
    enum { BATCHES = 5 };
    int nd = cpu ? 200 : 2000, runs = cpu ? 2 : 10;
    wgml_graph *g = wgml_graph_new(ctx);
    int64_t len = 64;
    wgml_tensor *t = wgml_tensor_new(g, WGML_F32, 1, &len);
    float host[64];
    for (int i = 0; i < 64; i++) host[i] = (float)i;
    int ok = t && !wgml_tensor_write(t, host, sizeof host);
    wgml_tensor *cur = t;
    for (int i = 0; ok && i < nd; i++) ok = (cur = wgml_clone(g, cur)) != NULL;
    ok = ok && !wgml_graph_keep(g, cur) && !wgml_graph_compile(g) && !wgml_graph_run(g) && !wgml_sync(ctx);
    double per[BATCHES], wall = 0;
    for (int b = 0; ok && b < BATCHES; b++) {
        uint64_t ns0 = 0, n0 = 0, ns1 = 0, n1 = 0;
        wgml_record_stats(ctx, &ns0, &n0);
        double wall0 = bench_wall_now();
        for (int r = 0; ok && r < runs; r++) ok = !wgml_graph_run(g) && !wgml_sync(ctx);
        wall += bench_wall_now() - wall0;
        wgml_record_stats(ctx, &ns1, &n1);
        if (n1 <= n0) ok = 0;
        else per[b] = (double)(ns1 - ns0) / (double)(n1 - n0) * 1e-3;
    }
    float back[64];
    ok = ok && !wgml_tensor_read(cur, back, sizeof back);
    for (int i = 0; ok && i < 64; i++) ok = back[i] == host[i];
    if (!ok) {
        fprintf(stderr, "bench ops: dispatch cost: %s\n", wgml_last_error(ctx));
        wgml_graph_free(g);
        return 1;
    }
    qsort(per, BATCHES, sizeof per[0], bench_cmp_double);
    printf("%-28s %10.3f us CPU per dispatch, best of %d batches (median %.3f; record + submit; %d dispatches a run, "
           "%d runs a batch; wall %.1f us a dispatch incl. GPU) %s\n",
           "dispatch_cpu_us", per[0], BATCHES, per[BATCHES / 2], nd, runs, wall / (BATCHES * runs) / nd * 1e6, "ok");
    wgml_graph_free(g);
    return 0;
}

typedef struct ops_opts {
    int64_t rows, cols;
    int reps, profile, cpu;
} ops_opts;

/* 0, or 2 after the usage or the range line. */
static int parse_ops_opts(int argc, char **argv, int cpu, ops_opts *o) {
    *o = (ops_opts){.rows = cpu ? 256 : 16384, .cols = 4096, .reps = cpu ? 2 : 10, .cpu = cpu};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) o->rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) o->reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile")) o->profile = 1;
        else {
            fprintf(stderr, "usage: wgml bench ops [--rows N] [--reps N] [--profile]\n");
            return 2;
        }
    }
    if (o->rows < 1 || o->reps < 1 || o->reps > 1000) {
        fprintf(stderr, "bench ops: --rows must be >= 1 and --reps 1..1000\n");
        return 2;
    }
    return 0;
}

/* The host side: x, y, w and the labels, a reference row's scratch and the generator the sampled
 * rows are drawn from. */
typedef struct ops_host {
    int64_t n;
    float *hx, *hy, *hw;
    double *ref;
    int32_t *hl;
    uint64_t seed;
} ops_host;

static void ops_host_free(ops_host *h) { free(h->hx), free(h->hy), free(h->hw), free(h->ref), free(h->hl); }

/* Random inputs: 0, or 1 after a message. */
static int ops_host_new(const ops_opts *o, ops_host *h) {
    int64_t rows = o->rows, cols = o->cols, n = h->n = rows * cols;
    h->hx = malloc(sizeof(float) * (size_t)n), h->hy = malloc(sizeof(float) * (size_t)n);
    h->hw = malloc(sizeof(float) * (size_t)cols);
    h->ref = malloc(sizeof(double) * (size_t)cols);
    h->hl = malloc(sizeof(int32_t) * (size_t)rows);
    if (!h->hx || !h->hy || !h->hw || !h->ref || !h->hl) {
        fprintf(stderr, "bench ops: out of host memory\n");
        return 1;
    }
    h->seed = 0x2545F4914F6CDD1Dull;
    for (int64_t i = 0; i < n; i++) h->hx[i] = 4.0f * bench_frand(&h->seed), h->hy[i] = bench_frand(&h->seed);
    for (int64_t j = 0; j < cols; j++) h->hw[j] = 1.0f + 0.5f * bench_frand(&h->seed);
    for (int64_t r = 0; r < rows; r++) h->hl[r] = (int32_t)((bench_frand(&h->seed) * 0.5f + 0.5f) * (float)(cols - 1));
    return 0;
}

/* Case c's last output against the double reference on 8 sampled rows: 1 when within tolerance. */
static int ops_check(int c, const ops_opts *o, ops_host *h, wgml_tensor *out) {
    int64_t rows = o->rows, cols = o->cols;
    size_t out_bytes = wgml_tensor_nbytes(out);
    float *ho = malloc(out_bytes);
    int ok = ho && !wgml_tensor_read(out, ho, out_bytes);
    for (int s = 0; ok && s < 8; s++) {
        int64_t r = (int64_t)((bench_frand(&h->seed) * 0.5f + 0.5f) * (float)(rows - 1));
        reference_row(c, h->hx + r * cols, h->hy + r * cols, h->hw, cols, h->hl[r], rows, h->ref);
        int64_t len = c == 5 ? 1 : cols;
        const float *got = c == 5 ? ho + r : ho + r * cols;
        for (int64_t j = 0; j < len; j++) {
            double tol = c == 5 ? 1e-4 * sqrt((double)cols) * 4
                         : c == 6 ? 1e-6 / (double)rows + 1e-4 * fabs(h->ref[j])
                                  : 1e-5 + 1e-4 * fabs(h->ref[j]);
            if (!(fabs(got[j] - h->ref[j]) <= tol)) ok = 0;
        }
    }
    free(ho);
    return ok;
}

/* Case c: reps calls in one graph, timed, then checked; its row of the table (*copy_gbs: the
 * copy's bandwidth, which the later rows are relative to). 0, 1 when it failed, 2 when its
 * inputs could not be made (the cases stop there). */
static int time_case(wgml_ctx *ctx, int c, const ops_opts *o, ops_host *h, double *copy_gbs) {
    int64_t rows = o->rows, cols = o->cols, n = h->n;
    wgml_graph *g = wgml_graph_new(ctx);
    int64_t shape[2] = {rows, cols};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, shape), *y = wgml_tensor_new(g, WGML_F32, 2, shape);
    wgml_tensor *w = wgml_tensor_new(g, WGML_F32, 1, &cols), *lab = wgml_tensor_new(g, WGML_I32, 1, &rows);
    if (!x || !y || !w || !lab || wgml_tensor_write(x, h->hx, (size_t)n * 4) || wgml_tensor_write(y, h->hy, (size_t)n * 4) ||
        wgml_tensor_write(w, h->hw, (size_t)cols * 4) || wgml_tensor_write(lab, h->hl, (size_t)rows * 4)) {
        fprintf(stderr, "bench ops: %s\n", wgml_last_error(ctx));
        wgml_graph_free(g);
        return 2;
    }
    wgml_tensor *out = NULL;
    for (int r = 0; r < o->reps; r++) out = run_case(g, c, x, y, w, lab);
    double best = INFINITY;
    if (!out || wgml_graph_keep(g, out) || wgml_graph_compile(g) ||
        wgml_graph_benchmark(g, o->cpu ? 0.0 : 0.3, o->cpu ? 1 : 5, &best, NULL)) {
        fprintf(stderr, "bench ops: %s: %s\n", CASES[c].name, wgml_last_error(ctx));
        wgml_graph_free(g);
        return 1;
    }
    int ok = ops_check(c, o, h, out), failed = !ok;
    double per = best / o->reps, gbs = CASES[c].bytes_per_elem * (double)n / per * 1e-9;
    if (c == 0) *copy_gbs = gbs;
    printf("%-28s %10.3f %10.1f %7.2fx %s\n", CASES[c].name, per * 1e3, gbs, *copy_gbs > 0 ? gbs / *copy_gbs : 0,
           ok ? "ok" : "FAIL");
    fflush(stdout);
    if (o->profile && bench_profile_print(g, CASES[c].name, 8)) failed = 1;
    wgml_graph_free(g);
    return failed;
}

int bench_ops_main(wgml_ctx *ctx, int argc, char **argv) {
    wgml_device_info info;
    wgml_device_get_info(ctx, &info);
    ops_opts o;
    if (parse_ops_opts(argc, argv, strcmp(info.type, "CPU") == 0, &o)) return 2;
    ops_host h = {0};
    if (ops_host_new(&o, &h)) {
        ops_host_free(&h);
        return 1;
    }
    printf("adapter: %s (%s, %s); x [%lld, %lld] f32 (%.0f MiB); %d reps per submit; %s\n", info.adapter,
           info.backend, info.type, (long long)o.rows, (long long)o.cols, h.n * 4.0 / 1048576, o.reps,
           info.has_timestamps ? "GPU timestamps" : "wall clock");
    printf("%-28s %10s %10s %8s %s\n", "op", "ms", "GB/s", "of copy", "check");
    int failed = 0;
    double copy_gbs = 0;
    for (int c = 0; c < N_CASES; c++) {
        int r = time_case(ctx, c, &o, &h, &copy_gbs);
        if (r) failed = 1;
        if (r == 2) break;
    }
    ops_host_free(&h);
    if (dispatch_cost(ctx, o.cpu)) failed = 1;
    return failed;
}
