/* wgml: the command-line tool. */
#include "wgml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_main(wgml_ctx *ctx, int argc, char **argv); /* tools/bench.c */

static void usage(FILE *f) {
    fprintf(f,
            "usage: wgml <command> [options]\n"
            "\n"
            "commands:\n"
            "  info                 the adapter, backend, driver, limits and features in use\n"
            "  info --model FILE    a GGUF model: architecture, hyper-parameters, tokenizer, tensors\n"
            "  bench matmul [opts]  fp32 matmul GFLOP/s per shape (GPU time from timestamps)\n"
            "                       --shapes MxNxK[,..]  --reps N  --variant auto|NAME  --check\n"
            "  help                 this text\n"
            "\n"
            "environment:\n"
            "  WGML_ADAPTER=text    use the adapter whose name contains text\n"
            "  WGML_TIMEOUT_S=n     longest wait for the GPU before an error (default 600)\n");
}

static int open_ctx(wgml_ctx **ctx) {
    wgml_status s = wgml_ctx_create(NULL, ctx);
    if (s) {
        fprintf(stderr, "wgml: %s: %s\n", wgml_status_name(s), wgml_create_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    wgml_ctx *ctx = NULL;
    int rc;
    if (!strcmp(cmd, "info") && argc >= 3) {
        if (argc != 4 || strcmp(argv[2], "--model")) {
            fprintf(stderr, "usage: wgml info [--model FILE]\n");
            return 2;
        }
        return wgml_model_print_info(argv[3], stdout) == WGML_OK ? 0 : 1;
    } else if (!strcmp(cmd, "info")) {
        if (open_ctx(&ctx)) return 1;
        wgml_device_print(ctx, stdout);
        rc = 0;
    } else if (!strcmp(cmd, "bench")) {
        if (open_ctx(&ctx)) return 1;
        rc = bench_main(ctx, argc - 2, argv + 2);
    } else {
        fprintf(stderr, "wgml: unknown command '%s'\n\n", cmd);
        usage(stderr);
        return 2;
    }
    wgml_ctx_destroy(ctx);
    return rc;
}
