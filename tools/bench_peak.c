/* wgml bench peak: the device's peak rate for one kind of instruction at a time
 * (wgml_peak_measure: f32 FMA, the integer dot product, the int-to-float conversion and its
 * replacement through the mantissa of 2^23), each over enough threads to fill the GPU and
 * checked against the host for a sample of threads. These are the floors that the kernels'
 * accounts in docs/PERFORMANCE.md compare against. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_peak_main(wgml_ctx *ctx, int argc, char **argv) {
    int cpu = bench_cpu_adapter(ctx);
    uint32_t threads = cpu ? 4096u : 1u << 20, steps = cpu ? 64u : 2048u;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: wgml bench peak [--threads N (>= 64)] [--steps N (1..32768)]\n");
            return 2;
        }
    }
    printf("%u threads x %u steps x 16 chains a kind; the rate in 1e12 operations a second: flops for the\n"
           "FMA (2 each), integer operations for dot4I8Packed (8: 4 multiply-adds), conversions for the rest\n",
           threads, steps);
    printf("%-22s %10s %10s %s\n", "kind", "ms", "Tops/s", "check");
    int failed = 0;
    for (int k = 0; k < WGML_PEAK_KINDS; k++) {
        double sec = 0, rate = 0;
        wgml_status s = wgml_peak_measure(ctx, k, threads, steps, cpu ? 0.0 : 0.3, cpu ? 1 : 5, &sec, &rate);
        if (s == WGML_ERR_UNSUPPORTED) printf("%-22s not supported by this adapter\n", wgml_peak_name(k));
        else if (s) {
            fprintf(stderr, "bench peak: %s\n", wgml_last_error(ctx));
            failed = 1;
            if (s == WGML_ERR_ARG) return 2;
        } else printf("%-22s %10.3f %10.4f ok\n", wgml_peak_name(k), sec * 1e3, rate * 1e-12);
        fflush(stdout);
    }
    return failed;
}
