/* The test harness: seeded random inputs, NaN-poisoned outputs (the context is created with
 * poison_outputs), double-precision references, and checks that count failures.
 * An element fails only when both its absolute and its relative error exceed the tolerance. */
#ifndef WGML_TEST_HARNESS_H
#define WGML_TEST_HARNESS_H

#include "wgml.h"
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct th {
    wgml_ctx *ctx;
    wgml_graph *g; /* the eager graph */
    uint64_t seed, rng;
    int passed, failed;
} th;

extern th T;

/* Creates the context (poisoned outputs) and prints the seed ($WGML_SEED or the time). */
void th_init(const char *suite);
/* Prints "N passed, M failed", destroys the context; returns the exit code. */
int th_done(void);

/* The settings tests change between cases. A driver's threads (lavapipe's) read the environment
 * as they start, and setenv of a name not yet there, or unsetenv, moves the environment's array
 * under them (a crash in getenv, seen under ASan and plain). So th_init creates each name the
 * tests set (th_env_names in harness.c) before the device, empty, and tests change them only
 * through these two: th_setenv replaces an existing entry's value (as setenv(name, value, 1);
 * overwrite 0 keeps a value already set), th_unsetenv sets it empty, which every setting reads
 * as its default. A name missing from the list fails the test (add it there). */
void th_setenv(const char *name, const char *value, int overwrite);
void th_unsetenv(const char *name);

double th_uniform(double lo, double hi);
void th_fill_uniform(float *x, size_t n, double lo, double hi);
float *th_random(size_t n, double lo, double hi); /* malloc'ed */

/* Uploads host data into a new tensor of the eager graph. */
wgml_tensor *th_tensor_f32(int rank, const int64_t *shape, const float *data);
wgml_tensor *th_tensor_i32(int rank, const int64_t *shape, const int32_t *data);
/* Reads a tensor back into a malloc'ed buffer (NULL and a failure on error). */
float *th_read_f32(wgml_tensor *t);

/* The f16 form of a KV cache (src/ops/attention/kv_cache.h: u32 words of two binary16 elements,
 * element 2i in the low half), from the test's side: th_half(h) is the value of binary16 bits h;
 * th_to_half(x) rounds x to the nearest binary16 (ties to even; inf beyond its range);
 * th_half_ulp(x) is the spacing of binary16 values at |x|, the most a conversion rounding either
 * way may move x. th_tensor_half uploads the 2 * words floats of data, rounded, as a u32 tensor
 * of shape (the words; the last dim halved); th_read_half reads such a tensor back as floats
 * (exact: every binary16 value is a float). */
double th_half(uint16_t h);
uint16_t th_to_half(double x);
double th_half_ulp(double x);
wgml_tensor *th_tensor_half(int rank, const int64_t *shape, const float *data);
uint32_t *th_pack_half(const float *data, size_t words); /* malloc'ed words of th_to_half pairs */
float *th_read_half(wgml_tensor *t);

/* The larger of two errors, a NaN counted as +inf: once a NaN is seen no later finite error can
 * hide it (a plain `err > worst` never takes a NaN, and `!(err <= worst)` lets the next finite
 * error overwrite it). Header-only: the ExecuTorch program tests use it without the harness. */
static inline double th_max_err(double worst, double err) {
    return isnan(err) ? INFINITY : err > worst ? err : worst;
}

/* Records a pass or a failure. */
bool th_check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compares got with a double-precision reference; NaN in got always fails. */
bool th_close(const char *name, const float *got, const double *ref, size_t n, double atol, double rtol);
/* th_close with an absolute tolerance per element (atol[i]): for results whose float32 error
 * follows a per-element condition (a sum of terms much larger than the result). */
bool th_close_each(const char *name, const float *got, const double *ref, size_t n, const double *atol, double rtol);
/* Bit-exact comparison of 32-bit words. */
bool th_exact_u32(const char *name, const uint32_t *got, const uint32_t *ref, size_t n);
/* Reads t back and compares its first n floats bit for bit with want (a copy's check). */
bool th_read_equals(const char *name, wgml_tensor *t, const float *want, size_t n);
/* Expects the last call to have failed with status `want` and a message containing each of
 * the NULL-terminated substrings; then clears the error. */
bool th_expect_error(const char *name, bool failed, wgml_status want, ...);
/* Removes a folder a test wrote and everything under it (links are removed, never followed), so
 * a test leaves nothing in /tmp whatever the code under test put there. Returns 0 or -1. */
int th_remove_tree(const char *dir);
/* The path of a test's file or folder in the temporary folder ($TMPDIR, else /tmp):
 * "TMPDIR/name", name formatted from fmt, into buf; a path that does not fit is a failure. */
bool th_tmp_path(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A test in parts. On lavapipe a test's time is mostly its kernels' compilation, so a long test is
 * split into parts that CTest runs one per test (tests/CMakeLists.txt's WGML_TEST_PARTS: each
 * part stays short and parts run in parallel). th_run_parts runs, after th_init_args: with
 * `--part NAME` that part, with `--list-parts` none (it prints the names, which the check_parts
 * CTest compares with CMake's list), else every part in order; each part's time is printed.
 * Returns the exit code: th_done's, or TH_SKIPPED when the parts run ran no check at all (each
 * such part is printed as skipped; CTest's SKIP_RETURN_CODE reports the test as not run). */
#define TH_SKIPPED 77
typedef struct th_part {
    const char *name;
    void (*run)(void);
} th_part;
int th_run_parts(const th_part *parts, int n);

/* PyTorch comparisons. A test run as `test_x --dump DIR` (th_init reads argv) writes, for
 * each case it chooses, its inputs and wgml's outputs into DIR with th_dump; the script
 * tests/py/test_torch_<family>.py runs the test that way and recomputes every case with
 * PyTorch in float64 (tests/py/wgml_dump.py reads the files). th_dump does nothing when the
 * test was not asked to dump. */
void th_init_args(const char *suite, int argc, char **argv);
bool th_dumping(void);
/* Writes DIR/<case>.<name>.bin (raw little-endian) and a line in DIR/manifest.txt:
 * "<case> <name> <dtype> <rank> <d0> <d1> ..." ; params go in as a rank-1 f32 array. */
void th_dump(const char *case_name, const char *name, wgml_dtype dtype, int rank, const int64_t *shape, const void *data);
/* Dumps a tensor's contents (reads it back). */
void th_dump_tensor(const char *case_name, const char *name, wgml_tensor *t);

#endif
