#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "tensor/splitmix.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "wall_clock.h"

th T;

static const char *dump_dir, *part_arg;
static bool list_parts;

void th_init_args(const char *suite, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump_dir = argv[i + 1];
        if (!strcmp(argv[i], "--part") && i + 1 < argc) part_arg = argv[i + 1];
        if (!strcmp(argv[i], "--list-parts")) list_parts = true;
    }
    if (list_parts) return; /* no context: th_run_parts only prints */
    th_init(suite);
}

int th_run_parts(const th_part *parts, int n) {
    if (list_parts) {
        for (int i = 0; i < n; i++) printf("%s\n", parts[i].name);
        return 0;
    }
    bool found = !part_arg;
    int ran = 0, checked = 0; /* parts run, and those of them that ran a check */
    for (int i = 0; i < n; i++) {
        if (part_arg && strcmp(part_arg, parts[i].name)) continue;
        found = true;
        int before = T.passed + T.failed;
        double t0 = now();
        parts[i].run();
        bool any = T.passed + T.failed > before;
        ran++;
        checked += any;
        printf("part %s: %.2f s%s\n", parts[i].name, now() - t0, any ? "" : " (no check ran: skipped)");
    }
    th_check(found, "--part %s: no such part", part_arg ? part_arg : "");
    int rc = th_done();
    /* what ran no check is a skip (a part that needs a feature the device lacks), never a pass */
    return rc == 0 && found && ran > 0 && checked == 0 ? TH_SKIPPED : rc;
}

bool th_dumping(void) { return dump_dir != NULL; }

void th_dump(const char *case_name, const char *name, wgml_dtype dtype, int rank, const int64_t *shape, const void *data) {
    if (!dump_dir) return;
    char path[1024];
    size_t n = wgml_dtype_size(dtype);
    for (int i = 0; i < rank; i++) n *= (size_t)shape[i];
    snprintf(path, sizeof path, "%s/%s.%s.bin", dump_dir, case_name, name);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    snprintf(path, sizeof path, "%s/manifest.txt", dump_dir);
    FILE *m = fopen(path, "a");
    if (m) {
        fprintf(m, "%s %s %s %d", case_name, name, wgml_dtype_name(dtype), rank);
        for (int i = 0; i < rank; i++) fprintf(m, " %lld", (long long)shape[i]);
        fprintf(m, "\n");
        ok = fclose(m) == 0 && ok;
    } else {
        ok = false;
    }
    th_check(ok, "dumping %s.%s into %s", case_name, name, dump_dir);
}

void th_dump_tensor(const char *case_name, const char *name, wgml_tensor *t) {
    if (!dump_dir) return;
    if (!t) {
        th_check(false, "dumping %s.%s: tensor is NULL (%s)", case_name, name, wgml_last_error(T.ctx));
        return;
    }
    void *h = malloc(wgml_tensor_nbytes(t) ? wgml_tensor_nbytes(t) : 1);
    if (!h || wgml_tensor_read(t, h, wgml_tensor_nbytes(t))) {
        th_check(false, "dumping %s.%s: %s", case_name, name, wgml_last_error(T.ctx));
        free(h);
        return;
    }
    int64_t shape[WGML_MAX_RANK];
    int rank = wgml_tensor_rank(t);
    for (int i = 0; i < rank; i++) shape[i] = wgml_tensor_dim(t, i);
    th_dump(case_name, name, wgml_tensor_dtype(t), rank, shape, h);
    free(h);
}

static const char *const th_env_names[] = {
    "WGML_ARENA_BYTES",        "WGML_CE_COUNT",         "WGML_CHECK_ALIASING",      "WGML_COMPILE_AHEAD",
    "WGML_DEVICE_MEMORY_LIMIT", "WGML_KV",              "WGML_LLAMA_UNFUSED",       "WGML_LORA_FOLD",
    "WGML_LORA_SHARED",        "WGML_MATMUL_SPLITK",    "WGML_MATMUL_VARIANT",      "WGML_QW_CONCAT",
    "WGML_QW_GEMV",            "WGML_QW_GEMV_HANDOFF",  "WGML_QW_GEMV_I8",          "WGML_QW_GEMV_MAX_M",
    "WGML_QW_GEMV_MERGE",      "WGML_QW_GEMV_NORM_BUDGET", "WGML_QW_GEMV_SUBGROUP", "WGML_QW_GEMV_XQ",
    "WGML_QW_I8_PREFETCH",     "WGML_QW_I8_STAGE",      "WGML_QW_I8_TILE",          "WGML_QW_INT8",
    "WGML_QW_MM_SPLITK",       "WGML_QW_MM_VARIANT",    "WGML_QW_PARTS",            "WGML_SDPA_BWD_SCRATCH",
    "WGML_SDPA_SPLIT",         "WGML_SDPA_TILE",        "WGML_UPLOAD_FLUSH",
};

static bool th_env_listed(const char *name) {
    for (size_t i = 0; i < sizeof th_env_names / sizeof th_env_names[0]; i++)
        if (!strcmp(th_env_names[i], name)) return true;
    return false;
}

void th_setenv(const char *name, const char *value, int overwrite) {
    if (!th_env_listed(name)) th_check(false, "harness: %s is not in th_env_names (setting it races the driver's threads)", name);
    const char *was = getenv(name);
    if (overwrite || !was || !*was) setenv(name, value, 1);
}

void th_unsetenv(const char *name) {
    if (!th_env_listed(name)) th_check(false, "harness: %s is not in th_env_names (unsetting it races the driver's threads)", name);
    setenv(name, "", 1);
}

void th_init(const char *suite) {
    for (size_t i = 0; i < sizeof th_env_names / sizeof th_env_names[0]; i++) /* before the device's threads */
        if (!getenv(th_env_names[i])) setenv(th_env_names[i], "", 1);
    const char *env = getenv("WGML_SEED");
    T.seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    T.rng = T.seed;
    printf("%s: seed %llu (rerun with WGML_SEED=%llu)\n", suite, (unsigned long long)T.seed,
           (unsigned long long)T.seed);
    wgml_ctx_options opt = {0};
    opt.poison_outputs = 1;
    wgml_status s = wgml_ctx_create(&opt, &T.ctx);
    if (s) {
        printf("FAIL: no context: %s\n", wgml_create_error());
        printf("0 passed, 1 failed\n");
        exit(1);
    }
    wgml_device_info info;
    wgml_device_get_info(T.ctx, &info);
    printf("%s: adapter %s (%s, %s)\n", suite, info.adapter, info.backend, info.type);
    T.g = wgml_eager(T.ctx);
}

int th_done(void) {
    wgml_ctx_destroy(T.ctx);
    printf("%d passed, %d failed\n", T.passed, T.failed);
    return T.failed ? 1 : 0;
}

double th_uniform(double lo, double hi) { return lo + (hi - lo) * ((splitmix64(&T.rng) >> 11) * (1.0 / 9007199254740992.0)); }

void th_fill_uniform(float *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) x[i] = (float)th_uniform(lo, hi);
}

float *th_random(size_t n, double lo, double hi) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    if (x) th_fill_uniform(x, n, lo, hi);
    return x;
}

static wgml_tensor *upload(wgml_dtype dt, int rank, const int64_t *shape, const void *data) {
    wgml_tensor *t = wgml_tensor_new(T.g, dt, rank, shape);
    if (!t) {
        th_check(false, "creating a tensor: %s", wgml_last_error(T.ctx));
        return NULL;
    }
    if (wgml_tensor_write(t, data, wgml_tensor_nbytes(t))) {
        th_check(false, "uploading a tensor: %s", wgml_last_error(T.ctx));
        wgml_tensor_free(t);
        return NULL;
    }
    return t;
}

wgml_tensor *th_tensor_f32(int rank, const int64_t *shape, const float *data) { return upload(WGML_F32, rank, shape, data); }
wgml_tensor *th_tensor_i32(int rank, const int64_t *shape, const int32_t *data) { return upload(WGML_I32, rank, shape, data); }

float *th_read_f32(wgml_tensor *t) {
    if (!t) {
        th_check(false, "reading a NULL tensor: %s", wgml_last_error(T.ctx));
        return NULL;
    }
    float *h = malloc(wgml_tensor_nbytes(t));
    if (h && wgml_tensor_read(t, h, wgml_tensor_nbytes(t))) {
        th_check(false, "reading back: %s", wgml_last_error(T.ctx));
        free(h);
        return NULL;
    }
    return h;
}

double th_half(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

uint16_t th_to_half(double x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isnan(x)) return 0x7e00;
    if (a == 0) return sign;
    int E;
    frexp(a, &E); /* a = m 2^E, m in [0.5, 1): the leading bit is 2^(E - 1) */
    /* the units of the last place: 2^-24 below the normal range, else 2^(E - 11); the count of
     * them (rint: ties to even) carries into the exponent field when it reaches 2048 */
    uint32_t bits = E - 1 < -14 ? (uint32_t)rint(ldexp(a, 24))
                                : (uint32_t)((E - 1 + 15) << 10) + (uint32_t)rint(ldexp(a, 11 - E)) - 1024u;
    return (uint16_t)(sign | (bits >= 0x7c00u ? 0x7c00u : bits));
}

double th_half_ulp(double x) {
    double a = fabs(x);
    if (a < ldexp(1, -14)) return ldexp(1, -24);
    int E;
    frexp(a, &E);
    return ldexp(1, E - 11);
}

wgml_tensor *th_tensor_half(int rank, const int64_t *shape, const float *data) {
    wgml_tensor *t = wgml_tensor_new(T.g, WGML_U32, rank, shape);
    if (!t) {
        th_check(false, "th_tensor_half: %s", wgml_last_error(T.ctx));
        return NULL;
    }
    size_t words = wgml_tensor_nbytes(t) / 4;
    uint32_t *w = th_pack_half(data, words);
    if (wgml_tensor_write(t, w, 4 * words)) th_check(false, "th_tensor_half: %s", wgml_last_error(T.ctx));
    free(w);
    return t;
}

uint32_t *th_pack_half(const float *data, size_t words) {
    uint32_t *w = malloc(4 * words);
    for (size_t i = 0; i < words; i++) w[i] = th_to_half(data[2 * i]) | (uint32_t)th_to_half(data[2 * i + 1]) << 16;
    return w;
}

float *th_read_half(wgml_tensor *t) {
    uint32_t *w = (uint32_t *)th_read_f32(t);
    if (!w) return NULL;
    size_t words = wgml_tensor_nbytes(t) / 4;
    float *f = malloc(sizeof(float) * 2 * words);
    for (size_t i = 0; i < words; i++) {
        f[2 * i] = (float)th_half((uint16_t)(w[i] & 0xffff));
        f[2 * i + 1] = (float)th_half((uint16_t)(w[i] >> 16));
    }
    free(w);
    return f;
}

bool th_check(bool ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (ok) {
        T.passed++;
    } else {
        T.failed++;
        printf("FAIL: ");
        vprintf(fmt, ap);
        printf("\n");
    }
    va_end(ap);
    return ok;
}

/* th_close and th_close_each: atol_each, where given, is element i's absolute tolerance */
static bool close_impl(const char *name, const float *got, const double *ref, size_t n, const double *atol_each,
                       double atol, double rtol) {
    if (!got) return th_check(false, "%s: no result", name);
    size_t bad = 0, first = 0;
    double worst_abs = 0, worst_rel = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i], at = atol_each ? atol_each[i] : atol;
        double ae = fabs(g - r), re = ae / (fabs(r) > 0 ? fabs(r) : 1e-30);
        bool fail;
        if (isnan(r)) fail = !isnan(g);
        else if (isinf(r)) fail = g != r;
        else if (isnan(g) || isinf(g)) fail = true;
        else fail = ae > at && re > rtol;
        if (fail) {
            if (!bad) first = i;
            bad++;
        }
        if (!isnan(ae) && ae > worst_abs) worst_abs = ae;
        if (!isnan(re) && ae > at && re > worst_rel) worst_rel = re;
    }
    if (bad)
        return th_check(false, "%s: %zu of %zu elements off (first at %zu: got %.9g, want %.9g, tolerance %.3g); worst abs "
                        "%.3g", name, bad, n, first, (double)got[first], ref[first], atol_each ? atol_each[first] : atol,
                        worst_abs);
    printf("  ok %-48s n=%-8zu max abs err %.3g\n", name, n, worst_abs);
    return th_check(true, "%s", name);
}

bool th_close(const char *name, const float *got, const double *ref, size_t n, double atol, double rtol) {
    return close_impl(name, got, ref, n, NULL, atol, rtol);
}

bool th_close_each(const char *name, const float *got, const double *ref, size_t n, const double *atol, double rtol) {
    return close_impl(name, got, ref, n, atol, 0, rtol);
}

bool th_exact_u32(const char *name, const uint32_t *got, const uint32_t *ref, size_t n) {
    if (!got) return th_check(false, "%s: no result", name);
    for (size_t i = 0; i < n; i++)
        if (got[i] != ref[i])
            return th_check(false, "%s: element %zu is 0x%08x, want 0x%08x", name, i, got[i], ref[i]);
    printf("  ok %-48s n=%zu exact\n", name, n);
    return th_check(true, "%s", name);
}

bool th_read_equals(const char *name, wgml_tensor *t, const float *want, size_t n) {
    float *got = th_read_f32(t);
    bool ok = th_exact_u32(name, (const uint32_t *)got, (const uint32_t *)want, n);
    free(got);
    return ok;
}

bool th_expect_error(const char *name, bool failed, wgml_status want, ...) {
    const char *msg = wgml_last_error(T.ctx);
    wgml_status got = wgml_last_status(T.ctx);
    bool ok = failed && got == want;
    va_list ap;
    va_start(ap, want);
    for (const char *sub = va_arg(ap, const char *); sub; sub = va_arg(ap, const char *))
        if (!strstr(msg, sub)) ok = false;
    va_end(ap);
    if (ok) printf("  ok %-48s error: %s\n", name, msg);
    th_check(ok, "%s: want failure '%s', got %s '%s'", name, wgml_status_name(want),
             failed ? wgml_status_name(got) : "success", msg);
    wgml_clear_error(T.ctx);
    return ok;
}

int th_remove_tree(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) return unlink(dir);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(n);
        if (!p) { rc = -1; break; }
        snprintf(p, n, "%s/%s", dir, e->d_name);
        rc |= th_remove_tree(p);
        free(p);
    }
    closedir(d);
    return rmdir(dir) | rc;
}

bool th_tmp_path(char *buf, size_t n, const char *fmt, ...) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    int k = snprintf(buf, n, "%s/", dir);
    va_list ap;
    va_start(ap, fmt);
    int m = k >= 0 && (size_t)k < n ? vsnprintf(buf + k, n - (size_t)k, fmt, ap) : -1;
    va_end(ap);
    return th_check(m >= 0 && (size_t)(k + m) < n, "a temporary path under %s fits %zu bytes", dir, n);
}
