/* Helpers shared by the autograd tests, test_autograd_rules.c (every backward rule against finite
 * differences) and test_autograd.c (gradients into caller tensors, frozen branches, bad input,
 * the PyTorch model blocks): element counts, a graph's tensor from host data, and the clock
 * (wall_clock.h). */
#ifndef WGML_TEST_AUTOGRAD_UTIL_H
#define WGML_TEST_AUTOGRAD_UTIL_H
#include "wall_clock.h"

#include "harness.h"

static inline int64_t numel(int rank, const int64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= s[i];
    return n;
}

static inline wgml_tensor *upload(wgml_graph *g, wgml_dtype dt, int rank, const int64_t *s, const void *data) {
    wgml_tensor *t = wgml_tensor_new(g, dt, rank, s);
    if (t && wgml_tensor_write(t, data, wgml_tensor_nbytes(t))) return NULL;
    return t;
}

#endif
