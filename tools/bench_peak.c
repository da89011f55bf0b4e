/* wgml bench peak: the device's peak rate for one kind of instruction at a time (the probes of
 * src/ops/probe: f32 FMA, the integer dot product, the int-to-float conversion and its
 * replacement through the mantissa of 2^23), each over enough threads to fill the GPU and
 * checked against the host's result for a sample of threads. These are the floors that the
 * kernels' accounts in docs/PERFORMANCE.md compare against. */
#include "bench.h"
#include "ops/probe/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kind k over `threads` threads of `iters` steps: the best of 5 runs after warm-up, its rate,
 * and the check of 64 threads spread over the grid. 0, or 1 when it failed or was wrong. */
static int peak_case(wgml_ctx *ctx, probe_kind k, uint32_t threads, uint32_t iters, int cpu) {
    wgml_graph *g = wgml_graph_new(ctx);
    wgml_tensor *out = g ? probe_record(g, k, threads, iters) : NULL;
    double best = 0;
    uint32_t *host = malloc(sizeof(uint32_t) * threads);
    int bad = !host || !out || wgml_graph_keep(g, out) || wgml_graph_compile(g) ||
              wgml_graph_benchmark(g, cpu ? 0.0 : 0.3, cpu ? 1 : 5, &best, NULL) ||
              wgml_tensor_read(out, host, sizeof(uint32_t) * threads);
    if (bad) {
        fprintf(stderr, "bench peak: %s: %s\n", probe_name(k), wgml_last_error(ctx));
        free(host);
        wgml_graph_free(g);
        return 1;
    }
    int wrong = 0;
    for (uint32_t i = 0; i < 64; i++) {
        uint32_t t = (uint32_t)((uint64_t)i * (threads - 1) / 63);
        uint32_t want = probe_expected(k, t, iters);
        if (host[t] != want && wrong++ < 3)
            fprintf(stderr, "bench peak: %s: thread %u gave 0x%08x, want 0x%08x\n", probe_name(k), t, host[t], want);
    }
    double steps = (double)threads * iters * PROBE_CHAINS;
    printf("%-22s %10.3f %12.2f %10.2f %s\n", probe_name(k), best * 1e3, steps / best * 1e-12,
           steps * probe_ops_per_step(k) / best * 1e-12, wrong ? "FAIL" : "ok");
    free(host);
    wgml_graph_free(g);
    return wrong != 0;
}

int bench_peak_main(wgml_ctx *ctx, int argc, char **argv) {
    int cpu = bench_cpu_adapter(ctx);
    uint32_t threads = cpu ? 4096u : 1u << 20, iters = cpu ? 64u : 2048u;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) iters = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: wgml bench peak [--threads N] [--steps N (<= %u)]\n", PROBE_MAX_ITERS);
            return 2;
        }
    }
    if (threads < 64 || iters < 1 || iters > PROBE_MAX_ITERS) {
        fprintf(stderr, "bench peak: --threads must be >= 64 and --steps 1..%u\n", PROBE_MAX_ITERS);
        return 2;
    }
    printf("%u threads x %u steps x %d chains a kind; T/s: steps a second (1e12), Tops: flops (FMA: 2), integer\n"
           "operations (dot4I8Packed: 8) or conversions (1) a second\n",
           threads, iters, PROBE_CHAINS);
    printf("%-22s %10s %12s %10s %s\n", "kind", "ms", "Tsteps/s", "Tops/s", "check");
    int failed = 0;
    for (int k = 0; k < PROBE_N; k++) {
        if (!probe_supported(ctx, (probe_kind)k)) {
            printf("%-22s not supported by this adapter\n", probe_name((probe_kind)k));
            continue;
        }
        failed |= peak_case(ctx, (probe_kind)k, threads, iters, cpu);
    }
    return failed;
}
