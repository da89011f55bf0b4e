/* Training programs through the C API, in the plain and the ASan build: every training program of
 * the unpacked ExecuTorch fixture (DIR/programs/train_*.pte, tests/et/programs.py; none is a
 * failure) is loaded for training and its first step
 * checked against a host reference computed here from what wgml reports (the parameters before
 * the step, the gradient outputs of the step's run): SGD p - lr·g, AdamW's first step
 * p·(1 - lr·wd) - lr·g/(|g| + eps) (the bias corrections cancel at t = 1), in double. Inputs
 * are fresh random (labels 0 or 1). Refusals: a NULL or unknown config, pairing arrays without
 * n_params, truncated programs at 40 cuts, set_lr / param_info misuse: each fails with a
 * message, never a crash.
 *
 *     test_program_train DIR   (DIR: BUILD/et-fixture) */
#include "harness.h"
#include "wgml-program.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures, checks;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static double uni(void) { return (double)(next() >> 11) / 9007199254740992.0; }

static void check(int ok, const char *what, const char *detail) {
    checks++;
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail && *detail ? ": " : "", detail ? detail : "");
    if (!ok) failures++;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = len > 0 ? malloc((size_t)len) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) free(b), b = NULL;
    fclose(f);
    *n = b ? (size_t)len : 0;
    return b;
}

/* Random inputs: floats uniform(-1, 1), integers 0 or 1. */
static int set_inputs(wgml_program *p) {
    for (int i = 0; i < wgml_program_input_count(p); i++) {
        wgml_program_io io;
        if (wgml_program_input_info(p, i, &io)) return 0;
        uint8_t *d = malloc(io.nbytes ? io.nbytes : 1);
        for (int64_t k = 0; k < io.numel; k++) {
            if (io.dtype == WGML_PROG_F32) ((float *)d)[k] = (float)(2 * uni() - 1);
            else if (io.dtype == WGML_PROG_I64) ((int64_t *)d)[k] = (int64_t)(next() & 1);
            else if (io.dtype == WGML_PROG_I32) ((int32_t *)d)[k] = (int32_t)(next() & 1);
            else memset(d, 0, io.nbytes);
        }
        int ok = !wgml_program_set_input(p, i, d, io.nbytes);
        free(d);
        if (!ok) return 0;
    }
    return 1;
}

/* One step of a program loaded for `opt`; the parameters after it against the host rule. */
static void one_step(wgml_ctx *ctx, const char *file, const uint8_t *b, size_t n, wgml_program_optimizer opt) {
    char what[320], detail[256] = "";
    snprintf(what, sizeof what, "%s: one %s step", file, opt == WGML_PROGRAM_SGD ? "SGD" : "AdamW");
    wgml_program_train_config c = wgml_program_train_defaults(opt);
    c.lr = opt == WGML_PROGRAM_SGD ? 0.1 : 0.01;
    c.weight_decay = opt == WGML_PROGRAM_SGD ? 0 : 0.1;
    wgml_program *p = wgml_program_load_training(ctx, b, n, NULL, &c);
    if (!p) {
        /* the program made to be refused: a parameter in two delegates */
        const char *e = wgml_last_error(ctx);
        check(strstr(e, "several delegates") != NULL, what, e);
        return;
    }
    int np = wgml_program_param_count(p), ok = np > 0 && set_inputs(p);
    float **p0 = calloc((size_t)np + 1, sizeof *p0), **g = calloc((size_t)np + 1, sizeof *g),
          **p1 = calloc((size_t)np + 1, sizeof *p1);
    int64_t *numel = calloc((size_t)np + 1, sizeof *numel);
    for (int j = 0; ok && j < np; j++) {
        int ci, go;
        wgml_program_io io;
        ok = !wgml_program_param_info(p, j, &ci, &go, NULL) && !wgml_program_constant_info(p, ci, &io, NULL);
        numel[j] = io.numel;
        p0[j] = malloc(io.nbytes), g[j] = malloc(io.nbytes), p1[j] = malloc(io.nbytes);
        ok = ok && !wgml_program_read_constant(p, ci, p0[j], io.nbytes);
    }
    ok = ok && !wgml_program_run(p, NULL);
    double worst = 0;
    for (int j = 0; ok && j < np; j++) {
        int ci, go;
        wgml_program_param_info(p, j, &ci, &go, NULL);
        size_t nb = (size_t)numel[j] * 4;
        ok = !wgml_program_get_output(p, go, g[j], nb) && !wgml_program_read_constant(p, ci, p1[j], nb);
        for (int64_t k = 0; ok && k < numel[j]; k++) {
            double pw = p0[j][k], gw = g[j][k], want;
            if (opt == WGML_PROGRAM_SGD) want = pw - (double)(float)c.lr * gw;
            else want = pw * (1 - (double)(float)c.lr * (float)c.weight_decay) - (double)(float)c.lr * gw / (fabs(gw) + 1e-8);
            worst = th_max_err(worst, fabs(p1[j][k] - want) / (1 + fabs(want)));
        }
    }
    int64_t steps = -1;
    ok = ok && !wgml_program_steps(p, &steps) && steps == 1;
    snprintf(detail, sizeof detail, "%d parameters, max error %.2e%s%s", np, worst, ok ? "" : "; ",
             ok ? "" : wgml_last_error(ctx));
    check(ok && worst < 1e-6, what, detail);
    for (int j = 0; j < np; j++) free(p0[j]), free(g[j]), free(p1[j]);
    free(p0), free(g), free(p1), free(numel);
    wgml_program_free(p);
}

static void refusals(wgml_ctx *ctx, const char *file, const uint8_t *b, size_t n) {
    char what[320];
    wgml_program_train_config c = wgml_program_train_defaults(WGML_PROGRAM_ADAMW);
    snprintf(what, sizeof what, "%s: no config", file);
    check(!wgml_program_load_training(ctx, b, n, NULL, NULL) && strstr(wgml_last_error(ctx), "no config"), what,
          wgml_last_error(ctx));
    c.optimizer = (wgml_program_optimizer)7;
    snprintf(what, sizeof what, "%s: unknown optimizer", file);
    check(!wgml_program_load_training(ctx, b, n, NULL, &c) && strstr(wgml_last_error(ctx), "unknown optimizer"), what,
          wgml_last_error(ctx));
    c = wgml_program_train_defaults(WGML_PROGRAM_SGD);
    int go[1] = {1};
    c.grad_outputs = go;
    snprintf(what, sizeof what, "%s: grad_outputs without n_params", file);
    check(!wgml_program_load_training(ctx, b, n, NULL, &c) && strstr(wgml_last_error(ctx), "without n_params"), what,
          wgml_last_error(ctx));
    c = wgml_program_train_defaults(WGML_PROGRAM_SGD);
    c.lr = -1;
    snprintf(what, sizeof what, "%s: a negative lr", file);
    wgml_program *bad = wgml_program_load_training(ctx, b, n, NULL, &c);
    check(!bad && strstr(wgml_last_error(ctx), "lr"), what, wgml_last_error(ctx));
    wgml_program_free(bad);
    int clear = 0;
    for (int k = 1; k <= 40; k++) {
        size_t cut = n * (size_t)k / 41;
        c = wgml_program_train_defaults(k & 1 ? WGML_PROGRAM_SGD : WGML_PROGRAM_ADAMW);
        wgml_program *t = wgml_program_load_training(ctx, b, cut, NULL, &c);
        clear += !t && !strncmp(wgml_last_error(ctx), "program:", 8);
        wgml_program_free(t);
    }
    char detail[64];
    snprintf(detail, sizeof detail, "%d of 40 clear errors", clear);
    snprintf(what, sizeof what, "%s: truncated", file);
    check(clear == 40, what, detail);
    wgml_program *plain = wgml_program_load_bytes(ctx, b, n, NULL);
    snprintf(what, sizeof what, "%s: set_lr and steps of a plain load", file);
    int64_t st;
    check(plain && wgml_program_set_lr(plain, 0.1) && wgml_program_steps(plain, &st) &&
              wgml_program_param_count(plain) == 0 && wgml_program_param_info(plain, 0, NULL, NULL, NULL),
          what, wgml_last_error(ctx));
    wgml_program_free(plain);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "build/et-fixture";
    const char *seed_env = getenv("WGML_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
    rng ^= seed * 0xBF58476D1CE4E5B9ull;
    printf("seed %llu (WGML_SEED to repeat)\n", (unsigned long long)seed);
    /* the error fold must keep a NaN however many finite errors follow it */
    check(th_max_err(th_max_err(th_max_err(0, 1e-9), NAN), 1e-9) == INFINITY, "a NaN error is never lost", NULL);
    wgml_ctx *ctx;
    wgml_ctx_options o = {.poison_outputs = 1};
    if (wgml_ctx_create(&o, &ctx)) {
        fprintf(stderr, "no device: %s\n", wgml_create_error());
        return 1;
    }
    int programs = 0;
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/programs", dir);
    DIR *d = opendir(sub);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "train_", 6) || l < 5 || strcmp(e->d_name + l - 4, ".pte")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
        size_t n;
        uint8_t *b = read_file(path, &n);
        check(b != NULL, "reading a training program", path);
        if (!b) continue;
        programs++;
        one_step(ctx, e->d_name, b, n, WGML_PROGRAM_SGD);
        one_step(ctx, e->d_name, b, n, WGML_PROGRAM_ADAMW);
        if (programs == 1) refusals(ctx, e->d_name, b, n);
        free(b);
    }
    if (d) closedir(d);
    wgml_ctx_destroy(ctx);
    check(programs >= 4, "the fixture's training programs are there", sub);
    printf("%d training programs, %d checks, %d failures\n", programs, checks, failures);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
