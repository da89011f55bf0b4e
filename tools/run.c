/* `wgml run FILE.pte`: runs an ExecuTorch program on wgml (include/wgml-program.h), inputs from
 * .npy files or seeded random numbers, outputs written as .npy, with timing and an optional
 * comparison against reference arrays. */
#include "run.h"

#include "bench.h"
#include "cli.h"
#include "wgml-program.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_MAX_IO 64

/* Default tolerances of --check, for float32 results against a reference of the same program
 * (PyTorch, ExecuTorch's runtime): the two differ by summation order and kernels, which moves a
 * float32 result by some ulp of its partial sums (float32's epsilon is 1.2e-7), so 1e-4 relative
 * leaves room for sums of ~10^3 terms; 1e-4 absolute is for elements that cancel to near zero,
 * where the relative error means nothing. A wrong kernel is off by far more than either. */
#define RUN_ATOL 1e-4
#define RUN_RTOL 1e-4

static void run_usage(FILE *f) {
    fprintf(f, "usage: wgml run FILE.pte [--method NAME] [--input N FILE.npy]... [--seed S] [--out DIR]\n"
               "                [--check REF.npy]... [--atol A] [--rtol R] [--runs N]\n"
               "  --input N FILE  input N from a .npy file (its dtype and shape must be the program's;\n"
               "                  float64/int64 files also fill float32/int32 inputs and back)\n"
               "  --seed S        inputs not given are random: floats in [-1, 1), integers in [0, 4),\n"
               "                  bools 0/1 (splitmix of S; default 1)\n"
               "  --out DIR       write output i to DIR/output_i.npy (DIR and its parents are made)\n"
               "  --check REF     compare output k (k-th --check) with REF.npy: max abs and rel error and\n"
               "                  the elements over tolerance; exit 1 when any output fails\n"
               "  --atol A        an element fails when |got - ref| > A + R |ref|, or when one of the\n"
               "  --rtol R        two is NaN, or an inf differs (defaults: atol %g, rtol %g)\n"
               "  --runs N        time N runs (default 1): best and median\n",
            RUN_ATOL, RUN_RTOL);
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

/* "[d0, d1, ...]" into buf. */
static const char *shape_text(char *buf, size_t n, int rank, const int64_t *shape) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < rank && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
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

/* Whether one element passes: NaN only against NaN, an inf only against the same inf, otherwise
 * |got - ref| <= atol + rtol |ref|. */
static int elem_ok(double got, double ref, double atol, double rtol) {
    if (isnan(got) || isnan(ref)) return isnan(got) && isnan(ref);
    if (isinf(got) || isinf(ref)) return got == ref;
    return fabs(got - ref) <= atol + rtol * fabs(ref);
}

/* Compares output i with the reference array at ref_path; prints the max abs and rel error (of
 * the finite pairs) and the elements over tolerance. Returns 1 when the output fails. */
static int check_output(int i, const char *ref_path, const void *out, const wgml_program_io *io, double atol, double rtol) {
    wgml_npy r;
    if (wgml_npy_read(ref_path, &r)) {
        fprintf(stderr, "wgml run: check of output %d: FAIL: %s\n", i, wgml_last_error(NULL));
        return 1;
    }
    if (!same_shape(&r, io) || r.dtype == WGML_PROG_F16) {
        char rs[160], os[160];
        fprintf(stderr, "wgml run: check of output %d: FAIL: %s is %s %s, the output is %s %s\n", i, ref_path,
                wgml_program_dtype_name(r.dtype), shape_text(rs, sizeof rs, r.rank, r.shape),
                wgml_program_dtype_name(io->dtype), shape_text(os, sizeof os, io->rank, io->shape));
        wgml_npy_free(&r);
        return 1;
    }
    double max_abs = 0, max_rel = 0;
    int64_t over = 0, first = -1;
    for (int64_t k = 0; k < io->numel; k++) {
        double a = elem(out, io->dtype, k), b = elem(r.data, r.dtype, k);
        if (!elem_ok(a, b, atol, rtol)) over++, first = first < 0 ? k : first;
        if (!isfinite(a) || !isfinite(b)) continue;
        double d = fabs(a - b), rel = d / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
        if (d > max_abs) max_abs = d;
        if (d > 0 && rel > max_rel) max_rel = rel;
    }
    printf("check output %d against %s: %s: max abs error %.3g, max rel error %.3g, %lld of %lld elements over "
           "atol %g + rtol %g |ref|\n",
           i, ref_path, over ? "FAIL" : "ok", max_abs, max_rel, (long long)over, (long long)io->numel, atol, rtol);
    if (over)
        printf("  first at element %lld: got %.9g, want %.9g\n", (long long)first, elem(out, io->dtype, first),
               elem(r.data, r.dtype, first));
    wgml_npy_free(&r);
    return over ? 1 : 0;
}

typedef struct run_args {
    const char *file, *out_dir, *method;
    const char *in_path[RUN_MAX_IO], *check[RUN_MAX_IO];
    int n_check, runs;
    uint64_t seed;
    double atol, rtol;
} run_args;

static int usage_error(const char *what, const char *arg) {
    fprintf(stderr, "wgml run: %s '%s'\n", what, arg);
    run_usage(stderr);
    return 2;
}

/* One option with its value v; 0, or 2 after a usage error. */
static int parse_opt(run_args *r, const char *a, const char *v) {
    int64_t x;
    if (!strcmp(a, "--seed")) {
        if (cli_need_int("wgml run", a, v, 0, INT64_MAX, &x)) return 2;
        r->seed = (uint64_t)x;
    } else if (!strcmp(a, "--out")) {
        r->out_dir = v;
    } else if (!strcmp(a, "--method")) {
        r->method = v;
    } else if (!strcmp(a, "--check")) {
        if (r->n_check == RUN_MAX_IO) return usage_error("too many --check files at", v);
        r->check[r->n_check++] = v;
    } else if (!strcmp(a, "--atol")) {
        return cli_need_num("wgml run", a, v, 0, 1e30, &r->atol) ? 2 : 0;
    } else if (!strcmp(a, "--rtol")) {
        return cli_need_num("wgml run", a, v, 0, 1e30, &r->rtol) ? 2 : 0;
    } else if (!strcmp(a, "--runs")) {
        if (cli_need_int("wgml run", a, v, 1, 1000000, &x)) return 2;
        r->runs = (int)x;
    } else {
        return usage_error("unknown argument", a);
    }
    return 0;
}

/* 0 ok, 1 help printed, 2 a usage error (printed). */
static int parse_args(int argc, char **argv, run_args *r) {
    *r = (run_args){.runs = 1, .seed = 1, .atol = RUN_ATOL, .rtol = RUN_RTOL};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int64_t k;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout);
            return 1;
        } else if (a[0] != '-') {
            if (r->file) return usage_error("a second program file", a);
            r->file = a;
        } else if (!strcmp(a, "--input")) {
            if (i + 2 >= argc) return usage_error("incomplete argument", a);
            if (cli_need_int("wgml run", a, argv[i + 1], 0, RUN_MAX_IO - 1, &k)) return 2;
            r->in_path[k] = argv[i + 2], i += 2;
        } else if (i + 1 >= argc) {
            return usage_error("unknown or incomplete argument", a);
        } else if (parse_opt(r, a, argv[++i])) {
            return 2;
        }
    }
    if (!r->file) {
        run_usage(stderr);
        return 2;
    }
    return 0;
}

/* Sets every input from its file or random numbers; 0, or 1 after a message. */
static int set_inputs(wgml_ctx *ctx, wgml_program *p, run_args *r) {
    int n_in = wgml_program_input_count(p);
    for (int i = 0; i < RUN_MAX_IO; i++)
        if (r->in_path[i] && i >= n_in) {
            fprintf(stderr, "wgml run: --input %d: the program has %d inputs\n", i, n_in);
            return 1;
        }
    for (int i = 0; i < n_in; i++) {
        wgml_program_io io;
        wgml_program_input_info(p, i, &io);
        const char *path = i < RUN_MAX_IO ? r->in_path[i] : NULL;
        void *buf = malloc(io.nbytes ? io.nbytes : 1);
        int rc = !buf;
        if (!rc && path) rc = load_input(p, i, path, buf, &io);
        else if (!rc) fill_random(&io, buf, &r->seed);
        if (!rc && wgml_program_set_input(p, i, buf, io.nbytes)) {
            fprintf(stderr, "wgml run: %s\n", wgml_last_error(ctx));
            rc = 1;
        }
        free(buf);
        if (rc) return 1;
        char sh[160];
        printf("input %d: %s %s%s%s\n", i, wgml_program_dtype_name(io.dtype), shape_text(sh, sizeof sh, io.rank, io.shape),
               path ? " from " : " random", path ? path : "");
    }
    return 0;
}

/* Reads every output, writes it under --out and checks it against its --check file. 0, 1 when
 * an output cannot be read or written (the rest are skipped), or 1 when a check fails (every
 * output is still written and checked). */
static int outputs(wgml_ctx *ctx, wgml_program *p, const run_args *r) {
    int n_out = wgml_program_output_count(p), failed = 0;
    for (int i = 0; i < n_out; i++) {
        wgml_program_io io;
        wgml_program_output_info(p, i, &io);
        void *buf = malloc(io.nbytes ? io.nbytes : 1);
        if (!buf || wgml_program_get_output(p, i, buf, io.nbytes)) {
            fprintf(stderr, "wgml run: %s\n", buf ? wgml_last_error(ctx) : "out of host memory");
            free(buf);
            return 1;
        }
        char sh[160];
        printf("output %d: %s %s\n", i, wgml_program_dtype_name(io.dtype), shape_text(sh, sizeof sh, io.rank, io.shape));
        if (r->out_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/output_%d.npy", r->out_dir, i);
            if (wgml_npy_write(path, io.dtype, io.rank, io.shape, buf)) {
                fprintf(stderr, "wgml run: %s\n", wgml_last_error(NULL));
                free(buf);
                return 1;
            }
        }
        if (i < r->n_check) failed |= check_output(i, r->check[i], buf, &io, r->atol, r->rtol);
        free(buf);
    }
    return failed;
}

int run_main(wgml_ctx *ctx, int argc, char **argv) {
    run_args r;
    int pr = parse_args(argc, argv, &r);
    if (pr) return pr == 1 ? 0 : 2;
    if (!ctx) return 1;
    wgml_program *p = wgml_program_load(ctx, r.file, r.method);
    if (!p) {
        fprintf(stderr, "wgml run: %s: %s\n", wgml_status_name(wgml_last_status(ctx)), wgml_last_error(ctx));
        return 1;
    }
    int rc = 0, n_out = wgml_program_output_count(p);
    if (r.n_check > n_out) {
        fprintf(stderr, "wgml run: %d --check files for %d outputs\n", r.n_check, n_out);
        rc = 1;
    }
    /* the output folder before the runs: one that cannot be made fails without running */
    if (!rc && r.out_dir && cli_make_dirs(r.out_dir)) {
        fprintf(stderr, "wgml run: --out %s: cannot create it: %s\n", r.out_dir, strerror(errno));
        rc = 1;
    }
    if (!rc) rc = set_inputs(ctx, p, &r);
    double *times = rc ? NULL : calloc((size_t)r.runs, sizeof *times);
    for (int k = 0; k < r.runs && !rc; k++) {
        if (!times || wgml_program_run(p, &times[k])) {
            fprintf(stderr, "wgml run: %s\n", times ? wgml_last_error(ctx) : "out of host memory");
            rc = 1;
        }
    }
    if (!rc) {
        qsort(times, (size_t)r.runs, sizeof *times, bench_cmp_double);
        printf("%d run%s: best %.3f ms, median %.3f ms\n", r.runs, r.runs > 1 ? "s" : "", times[0] * 1e3,
               times[r.runs / 2] * 1e3);
    }
    free(times);
    if (!rc) rc = outputs(ctx, p, &r);
    wgml_program_free(p);
    return rc;
}
