/* `wgml run FILE.pte`: runs an ExecuTorch program on wgml (include/wgml-program.h), inputs from
 * .npy files or seeded random numbers, outputs written as .npy, with timing and an optional
 * comparison against reference arrays. */
#include "run.h"

#include "bench.h"
#include "wgml-program.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_MAX_IO 64

static void run_usage(FILE *f) {
    fprintf(f, "usage: wgml run FILE.pte [--method NAME] [--input N FILE.npy]... [--seed S] [--out DIR]\n"
               "                [--check REF.npy]... [--runs N]\n"
               "  --input N FILE  input N from a .npy file (its dtype and shape must be the program's;\n"
               "                  float64/int64 files also fill float32/int32 inputs and back)\n"
               "  --seed S        inputs not given are random: floats in [-1, 1), integers in [0, 4),\n"
               "                  bools 0/1 (splitmix of S; default 1)\n"
               "  --out DIR       write output i to DIR/output_i.npy\n"
               "  --check REF     compare output k (k-th --check) with REF.npy: max abs and rel error\n"
               "  --runs N        time N runs (default 1): best and median\n");
}

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill_random(const wgml_program_io *io, void *data, uint64_t *seed) {
    for (int64_t i = 0; i < io->numel; i++) {
        uint64_t r = mix(seed);
        double u = (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        switch (io->dtype) {
        case WGML_PROG_F32: ((float *)data)[i] = (float)u; break;
        case WGML_PROG_F64: ((double *)data)[i] = u; break;
        case WGML_PROG_I32: ((int32_t *)data)[i] = (int32_t)(r % 4); break;
        case WGML_PROG_I64: ((int64_t *)data)[i] = (int64_t)(r % 4); break;
        default: ((uint8_t *)data)[i] = (uint8_t)(r & 1); break;
        }
    }
}

static double elem(const void *data, wgml_program_dtype dt, int64_t i) {
    switch (dt) {
    case WGML_PROG_F32: return ((const float *)data)[i];
    case WGML_PROG_F64: return ((const double *)data)[i];
    case WGML_PROG_I32: return ((const int32_t *)data)[i];
    case WGML_PROG_I64: return (double)((const int64_t *)data)[i];
    case WGML_PROG_I16: return ((const int16_t *)data)[i];
    case WGML_PROG_I8: return ((const int8_t *)data)[i];
    default: return ((const uint8_t *)data)[i];
    }
}

static int same_shape(const wgml_npy *a, const wgml_program_io *io) {
    if (a->numel != io->numel) return 0;
    if (a->rank == io->rank) {
        for (int i = 0; i < a->rank; i++)
            if (a->shape[i] != io->shape[i]) return 0;
        return 1;
    }
    return a->numel == 1; /* a scalar and a one-element tensor */
}

/* An .npy array as input i: the program's dtype, or the same kind at the other width. */
static int load_input(wgml_program *p, int i, const char *path, void *buf, const wgml_program_io *io) {
    wgml_npy a;
    if (wgml_npy_read(path, &a)) {
        fprintf(stderr, "wgml run: %s\n", wgml_last_error(NULL));
        return 1;
    }
    int rc = 0;
    if (!same_shape(&a, io)) {
        fprintf(stderr, "wgml run: input %d: %s has %lld elements (rank %d), the program takes %lld (rank %d)\n", i, path,
                (long long)a.numel, a.rank, (long long)io->numel, io->rank);
        rc = 1;
    } else if (a.dtype == io->dtype) {
        memcpy(buf, a.data, io->nbytes);
    } else {
        int a_float = a.dtype == WGML_PROG_F32 || a.dtype == WGML_PROG_F64;
        int io_float = io->dtype == WGML_PROG_F32 || io->dtype == WGML_PROG_F64;
        int a_int = a.dtype == WGML_PROG_I32 || a.dtype == WGML_PROG_I64;
        int io_int = io->dtype == WGML_PROG_I32 || io->dtype == WGML_PROG_I64;
        if ((a_float && io_float) || (a_int && io_int)) {
            for (int64_t k = 0; k < io->numel; k++) {
                double x = elem(a.data, a.dtype, k);
                switch (io->dtype) {
                case WGML_PROG_F32: ((float *)buf)[k] = (float)x; break;
                case WGML_PROG_F64: ((double *)buf)[k] = x; break;
                case WGML_PROG_I32: ((int32_t *)buf)[k] = (int32_t)((const int64_t *)a.data)[k]; break;
                default: ((int64_t *)buf)[k] = ((const int32_t *)a.data)[k]; break;
                }
            }
        } else {
            fprintf(stderr, "wgml run: input %d: %s holds %s, the program takes %s\n", i, path,
                    wgml_program_dtype_name(a.dtype), wgml_program_dtype_name(io->dtype));
            rc = 1;
        }
    }
    wgml_npy_free(&a);
    return rc;
}

static int check_output(int i, const char *ref_path, const void *out, const wgml_program_io *io) {
    wgml_npy r;
    if (wgml_npy_read(ref_path, &r)) {
        fprintf(stderr, "wgml run: %s\n", wgml_last_error(NULL));
        return 1;
    }
    if (!same_shape(&r, io) || r.dtype == WGML_PROG_F16) {
        fprintf(stderr, "wgml run: check %d: %s has %lld elements of %s, output %d has %lld of %s\n", i, ref_path,
                (long long)r.numel, wgml_program_dtype_name(r.dtype), i, (long long)io->numel,
                wgml_program_dtype_name(io->dtype));
        wgml_npy_free(&r);
        return 1;
    }
    double max_abs = 0, max_rel = 0;
    int64_t nan_mismatch = 0;
    for (int64_t k = 0; k < io->numel; k++) {
        double a = elem(out, io->dtype, k), b = elem(r.data, r.dtype, k);
        if (isnan(a) || isnan(b)) {
            nan_mismatch += isnan(a) != isnan(b);
            continue;
        }
        if (isinf(a) || isinf(b)) {
            if (a != b) nan_mismatch++;
            continue;
        }
        double d = fabs(a - b), rel = d / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
        if (d > max_abs) max_abs = d;
        if (d > 0 && rel > max_rel) max_rel = rel;
    }
    printf("check output %d against %s: max abs error %.3g, max rel error %.3g%s\n", i, ref_path, max_abs, max_rel,
           nan_mismatch ? " (NaN/inf positions differ)" : "");
    wgml_npy_free(&r);
    return nan_mismatch ? 1 : 0;
}

int run_main(wgml_ctx *ctx, int argc, char **argv) {
    const char *file = NULL, *out_dir = NULL, *method = NULL;
    const char *in_path[RUN_MAX_IO] = {0}, *check[RUN_MAX_IO] = {0};
    int n_check = 0, runs = 1;
    uint64_t seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--input") && i + 2 < argc) {
            int k = atoi(argv[i + 1]);
            if (k < 0 || k >= RUN_MAX_IO) {
                fprintf(stderr, "wgml run: --input %s: index out of range\n", argv[i + 1]);
                return 2;
            }
            in_path[k] = argv[i + 2], i += 2;
        } else if (!strcmp(a, "--seed") && more) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--out") && more) {
            out_dir = argv[++i];
        } else if (!strcmp(a, "--method") && more) {
            method = argv[++i];
        } else if (!strcmp(a, "--check") && more) {
            if (n_check == RUN_MAX_IO) return 2;
            check[n_check++] = argv[++i];
        } else if (!strcmp(a, "--runs") && more) {
            runs = atoi(argv[++i]);
            if (runs < 1) runs = 1;
        } else if (a[0] != '-' && !file) {
            file = a;
        } else {
            fprintf(stderr, "wgml run: unknown or incomplete argument '%s'\n", a);
            run_usage(stderr);
            return 2;
        }
    }
    if (!file) {
        run_usage(stderr);
        return 2;
    }
    if (!ctx) return 1;
    wgml_program *p = wgml_program_load(ctx, file, method);
    if (!p) {
        fprintf(stderr, "wgml run: %s: %s\n", wgml_status_name(wgml_last_status(ctx)), wgml_last_error(ctx));
        return 1;
    }
    int rc = 0, n_in = wgml_program_input_count(p), n_out = wgml_program_output_count(p);
    for (int i = 0; i < RUN_MAX_IO; i++)
        if (in_path[i] && i >= n_in) {
            fprintf(stderr, "wgml run: --input %d: the program has %d inputs\n", i, n_in);
            rc = 1;
        }
    if (n_check > n_out) {
        fprintf(stderr, "wgml run: %d --check files for %d outputs\n", n_check, n_out);
        rc = 1;
    }
    for (int i = 0; i < n_in && !rc; i++) {
        wgml_program_io io;
        wgml_program_input_info(p, i, &io);
        void *buf = malloc(io.nbytes ? io.nbytes : 1);
        if (!buf) {
            rc = 1;
            break;
        }
        if (i < RUN_MAX_IO && in_path[i]) rc = load_input(p, i, in_path[i], buf, &io);
        else fill_random(&io, buf, &seed);
        if (!rc && wgml_program_set_input(p, i, buf, io.nbytes)) {
            fprintf(stderr, "wgml run: %s\n", wgml_last_error(ctx));
            rc = 1;
        }
        if (!rc) {
            printf("input %d: %s [", i, wgml_program_dtype_name(io.dtype));
            for (int d = 0; d < io.rank; d++) printf(d ? ", %lld" : "%lld", (long long)io.shape[d]);
            printf("]%s%s\n", i < RUN_MAX_IO && in_path[i] ? " from " : " random", i < RUN_MAX_IO && in_path[i] ? in_path[i] : "");
        }
        free(buf);
    }
    double *times = calloc((size_t)runs, sizeof *times);
    for (int r = 0; r < runs && !rc; r++) {
        if (!times || wgml_program_run(p, &times[r])) {
            fprintf(stderr, "wgml run: %s\n", wgml_last_error(ctx));
            rc = 1;
        }
    }
    if (!rc) {
        qsort(times, (size_t)runs, sizeof *times, bench_cmp_double);
        printf("%d run%s: best %.3f ms, median %.3f ms\n", runs, runs > 1 ? "s" : "", times[0] * 1e3, times[runs / 2] * 1e3);
    }
    free(times);
    for (int i = 0; i < n_out && !rc; i++) {
        wgml_program_io io;
        wgml_program_output_info(p, i, &io);
        void *buf = malloc(io.nbytes ? io.nbytes : 1);
        if (!buf || wgml_program_get_output(p, i, buf, io.nbytes)) {
            fprintf(stderr, "wgml run: %s\n", wgml_last_error(ctx));
            free(buf);
            rc = 1;
            break;
        }
        printf("output %d: %s [", i, wgml_program_dtype_name(io.dtype));
        for (int d = 0; d < io.rank; d++) printf(d ? ", %lld" : "%lld", (long long)io.shape[d]);
        printf("]\n");
        if (out_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/output_%d.npy", out_dir, i);
            if (wgml_npy_write(path, io.dtype, io.rank, io.shape, buf)) {
                fprintf(stderr, "wgml run: %s\n", wgml_last_error(NULL));
                rc = 1;
            }
        }
        if (i < n_check && check_output(i, check[i], buf, &io)) rc = 1;
        free(buf);
    }
    wgml_program_free(p);
    return rc;
}
