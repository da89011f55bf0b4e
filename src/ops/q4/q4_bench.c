/* wgml_q4_bench: throughput of the 4-bit forward, timed with GPU timestamps over a built graph
 * of repeated dispatches (one submit per timed run; the best of 5 after 0.3 s of warm-up runs). Decode (M = 1, GEMV): effective GB/s of
 * the bytes one forward must move (codes + scales + activations in and out). Prefill/training
 * (M = 512, GEMM): GFLOP/s. */
#include "ops/q4/q4_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t bench_rng = 0x2545F4914F6CDD1Dull;
static float bench_rand(void) {
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return (float)((bench_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Seconds per forward of x[m, k] · W[n, k]ᵀ, or a negative value on error. The graph cycles
 * through `copies` distinct weights (same codes, separate buffers) so that a GPU cache larger
 * than one weight does not serve the repeated reads. After timing, 64 sampled outputs of the
 * last forward are checked against a double-precision product with the dequantised weight
 * (*check_ok). */
static double time_forward(wgml_ctx *ctx, int64_t m, int64_t n, int64_t k, int reps, int copies, int *check_ok) {
    int64_t kb = (k + 1) / 2, pn = (n + 3) / 4 * 4, ng = (k + 31) / 32;
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *x = malloc(sizeof(float) * (size_t)(m * k));
    uint8_t *codes = malloc((size_t)(n * kb));
    float *scales = malloc(sizeof(float) * (size_t)(ng * pn));
    wgml_q4_weight **q = calloc((size_t)copies, sizeof *q);
    double result = -1;
    wgml_graph *g = wgml_graph_new(ctx);
    if (!w || !x || !codes || !scales || !q || !g) goto done;
    for (int64_t i = 0; i < n * k; i++) w[i] = bench_rand();
    for (int64_t i = 0; i < m * k; i++) x[i] = bench_rand();
    if (wgml_q4gsw_quantize(w, n, k, 32, codes, scales)) goto done;
    for (int c = 0; c < copies; c++)
        if (!(q[c] = wgml_q4_upload_q4gsw(g, codes, scales, NULL, n, k, 32))) goto done;
    int64_t xs[2] = {m, k};
    wgml_tensor *xt = wgml_tensor_new(g, WGML_F32, 2, xs);
    if (!xt || wgml_tensor_write(xt, x, sizeof(float) * (size_t)(m * k))) goto done;
    bool ok = true;
    wgml_tensor *last = NULL;
    for (int r = 0; r < reps && ok; r++) ok = (last = wgml_q4_linear(g, xt, q[r % copies])) != NULL;
    double t = 0;
    bool cpu = gpu_get_caps(ctx)->is_cpu;
    if (ok && !wgml_graph_keep(g, last) && !wgml_graph_compile(g) &&
        !wgml_graph_benchmark(g, cpu ? 0.0 : 0.3, cpu ? 1 : 5, &t, NULL))
        result = t / reps;
    *check_ok = 0;
    float *got = result > 0 ? malloc(sizeof(float) * (size_t)(m * n)) : NULL;
    if (got && !wgml_tensor_read(last, got, sizeof(float) * (size_t)(m * n))) {
        /* the dequantised weight (independent host code) times x in double precision */
        if (!wgml_q4gsw_dequantize(codes, scales, n, k, 32, w)) {
            *check_ok = 1;
            for (int s = 0; s < 64; s++) {
                int64_t i = (int64_t)((bench_rand() * 0.5f + 0.5f) * (float)(m - 1));
                int64_t j = (int64_t)((bench_rand() * 0.5f + 0.5f) * (float)(n - 1));
                double ref = 0, mag = 0;
                for (int64_t kk = 0; kk < k; kk++) {
                    ref += (double)x[i * k + kk] * w[j * k + kk];
                    mag += fabs((double)x[i * k + kk] * w[j * k + kk]);
                }
                if (!(fabs(got[i * n + j] - ref) <= 1e-5 * mag + 1e-6)) *check_ok = 0;
            }
        }
    }
    free(got);
done:
    for (int c = 0; q && c < copies; c++) wgml_q4_free(q[c]);
    wgml_graph_free(g);
    free(q);
    free(w);
    free(x);
    free(codes);
    free(scales);
    return result;
}

int wgml_q4_bench(wgml_ctx *ctx, void *out_file, int gemv_only) {
    FILE *out = out_file ? (FILE *)out_file : stdout;
    if (!ctx) return 1;
    bool cpu = gpu_get_caps(ctx)->is_cpu;
    static const int64_t decode[][2] = {{576, 1536}, {1536, 576}, {2048, 8192}, {4096, 11008}}; /* K -> N */
    fprintf(out, "%-34s %10s %10s %s\n", "q4 forward (G = 32)", "us", "GB/s", "check");
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        int64_t k = decode[i][0], n = decode[i][1];
        double bytes = (double)n * k / 2 + (double)n * (k / 32) * 4 + 4.0 * k + 4.0 * n;
        int reps = cpu ? 4 : 100;
        int copies = cpu ? 1 : (int)(256e6 / bytes) + 1; /* 256 MB of weights: past any cache */
        int check = 0;
        double t = time_forward(ctx, 1, n, k, reps, copies < reps ? copies : reps, &check);
        char label[64];
        snprintf(label, sizeof label, "M=1 %lld->%lld (GEMV)", (long long)k, (long long)n);
        if (t <= 0) {
            fprintf(out, "%-34s failed: %s\n", label, wgml_last_error(ctx));
            failed++;
            continue;
        }
        fprintf(out, "%-34s %10.1f %10.1f %s\n", label, t * 1e6, bytes / t * 1e-9, check ? "ok" : "FAIL");
        if (!check) failed++;
    }
    static const int64_t gemm[][3] = {{512, 2048, 2048}, {512, 8192, 2048}}; /* M, N, K */
    fprintf(out, "%-34s %10s %10s %s\n", "", "ms", "GFLOP/s", "check");
    for (int i = 0; i < (gemv_only ? 0 : cpu ? 1 : 2); i++) {
        int64_t m = gemm[i][0], n = gemm[i][1], k = gemm[i][2];
        int check = 0;
        double t = time_forward(ctx, m, n, k, cpu ? 1 : 20, 1, &check);
        char label[64];
        snprintf(label, sizeof label, "M=%lld %lld->%lld (GEMM)", (long long)m, (long long)k, (long long)n);
        if (t <= 0) {
            fprintf(out, "%-34s failed: %s\n", label, wgml_last_error(ctx));
            failed++;
            continue;
        }
        fprintf(out, "%-34s %10.2f %10.1f %s\n", label, t * 1e3, 2.0 * m * n * k / t * 1e-9, check ? "ok" : "FAIL");
        if (!check) failed++;
    }
    return failed;
}
