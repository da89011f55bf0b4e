/* now(): the monotonic clock in seconds, for the timings a test prints (one definition for the
 * tests and test headers that include it). */
#ifndef WGML_TEST_WALL_CLOCK_H
#define WGML_TEST_WALL_CLOCK_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <time.h>

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
