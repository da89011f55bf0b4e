/* The test harness: seeded random inputs, NaN-poisoned outputs (the context is created with
 * poison_outputs), double-precision references, and checks that count failures.
 * An element fails only when both its absolute and its relative error exceed the tolerance. */
#ifndef WGML_TEST_HARNESS_H
#define WGML_TEST_HARNESS_H

#include "wgml.h"
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

double th_uniform(double lo, double hi);
void th_fill_uniform(float *x, size_t n, double lo, double hi);
float *th_random(size_t n, double lo, double hi); /* malloc'ed */

/* Uploads host data into a new tensor of the eager graph. */
wgml_tensor *th_tensor_f32(int rank, const int64_t *shape, const float *data);
wgml_tensor *th_tensor_i32(int rank, const int64_t *shape, const int32_t *data);
/* Reads a tensor back into a malloc'ed buffer (NULL and a failure on error). */
float *th_read_f32(wgml_tensor *t);

/* Records a pass or a failure. */
bool th_check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compares got with a double-precision reference; NaN in got always fails. */
bool th_close(const char *name, const float *got, const double *ref, size_t n, double atol, double rtol);
/* Bit-exact comparison of 32-bit words. */
bool th_exact_u32(const char *name, const uint32_t *got, const uint32_t *ref, size_t n);
/* Expects the last call to have failed with status `want` and a message containing each of
 * the NULL-terminated substrings; then clears the error. */
bool th_expect_error(const char *name, bool failed, wgml_status want, ...);

#endif
