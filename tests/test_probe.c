/* The throughput probes of `wgml bench peak` (src/ops/probe): each kind run on the GPU over a
 * grid of a few workgroups (thread counts not a multiple of the workgroup, so the last one is
 * partial) and compared word for word with the host's step-by-step result; the FMA kinds also
 * with their closed form in double (every chain counts up by one a step: start + steps, in f16
 * up to 2048, past which the steps run on at 2048); the
 * kinds' results differ from one another and from the start (a probe whose steps were folded
 * away would not); the public wgml_peak_measure; bad arguments. */
#include "harness.h"
#include "ops/probe/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void case_probe(probe_kind k, uint32_t threads, uint32_t iters) {
    char name[96];
    snprintf(name, sizeof name, "probe %s, %u threads x %u steps", probe_name(k), threads, iters);
    if (!probe_supported(T.ctx, k)) {
        printf("  %s: not supported by this adapter, not run\n", name);
        return;
    }
    wgml_tensor *out = probe_record(T.g, k, threads, iters);
    uint32_t *got = malloc(sizeof(uint32_t) * threads), *want = malloc(sizeof(uint32_t) * threads);
    if (!th_check(out && got && want && !wgml_tensor_read(out, got, sizeof(uint32_t) * threads), "%s: %s", name,
                  wgml_last_error(T.ctx))) {
        free(got), free(want), wgml_tensor_free(out);
        return;
    }
    for (uint32_t t = 0; t < threads; t++) want[t] = probe_expected(k, t, iters);
    th_exact_u32(name, got, want, threads);
    if (k == PROBE_FMA || k == PROBE_FMA_F16) { /* sum over chains c of (t % 61) + c + steps (f16: at most 2048) */
        int bad = 0;
        for (uint32_t t = 0; t < threads; t++) {
            double sum = 0;
            for (int c = 0; c < PROBE_CHAINS; c++) {
                double x = (double)(t % 61u) + c + iters;
                sum += k == PROBE_FMA_F16 && x > 2048 ? 2048 : x;
            }
            float f = (float)sum;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            bad += bits != want[t];
        }
        th_check(bad == 0, "%s: the host's steps against the closed form: %d threads differ", name, bad);
    }
    /* the steps changed something: the result is not the sum of the starts for most threads */
    int unchanged = 0;
    for (uint32_t t = 0; t < threads; t++) {
        double start = 0;
        for (int c = 0; c < PROBE_CHAINS; c++) start += (double)(t % 61u) + c;
        float f = (float)start;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        uint32_t ibits = (uint32_t)(int32_t)start;
        unchanged += got[t] == (k == PROBE_DOT4I8 ? ibits : bits);
    }
    th_check(unchanged < (int)threads / 8, "%s: %d of %u threads' results equal their start", name, unchanged, threads);
    free(got), free(want), wgml_tensor_free(out);
}

int main(int argc, char **argv) {
    th_init_args("test_probe", argc, argv);
    for (int k = 0; k < PROBE_N; k++) {
        case_probe((probe_kind)k, 1000, 37);
        case_probe((probe_kind)k, 3 * 256 + 5, 300);
    }
    case_probe(PROBE_FMA_F16, 300, 2100); /* every f16 chain reaches 2048 and stays */
    /* the public measurement: a rate, and its errors */
    double sec = 0, rate = 0;
    wgml_status s = wgml_peak_measure(T.ctx, 0, 512, 16, 0.0, 1, &sec, &rate);
    th_check(s == WGML_OK && sec > 0 && rate > 0, "wgml_peak_measure f32 fma: status %d, %g s, %g ops/s (%s)", (int)s,
             sec, rate, wgml_last_error(T.ctx));
    th_expect_error("peak: unknown kind", wgml_peak_measure(T.ctx, WGML_PEAK_KINDS, 512, 16, 0.0, 1, &sec, &rate) != 0,
                    WGML_ERR_ARG, "kind 5", NULL);
    th_expect_error("peak: too few threads", wgml_peak_measure(T.ctx, 0, 63, 16, 0.0, 1, &sec, &rate) != 0,
                    WGML_ERR_ARG, "63 threads", NULL);
    th_expect_error("probe: too many steps", probe_record(T.g, PROBE_FMA, 64, PROBE_MAX_ITERS + 1) == NULL,
                    WGML_ERR_ARG, "32769 steps", NULL);
    th_expect_error("probe: no threads", probe_record(T.g, PROBE_FMA, 0, 8) == NULL, WGML_ERR_ARG, "0 threads",
                    NULL);
    th_expect_error("probe: unknown kind", probe_record(T.g, PROBE_N, 64, 8) == NULL, WGML_ERR_ARG,
                    "supported: no", NULL);
    return th_done();
}
