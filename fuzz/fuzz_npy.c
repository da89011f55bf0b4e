/* Fuzz target: the .npy reader and writer (src/io/npy.c). The input is a whole file,
 * parsed by wgml_npy_parse. An accepted file is walked (every data byte read), written back
 * with wgml_npy_write and the written file parsed again: it must be accepted with the same
 * dtype, shape and bytes (a real round trip). A rejected file must come with a message. */
#include "wgml-io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fail(const char *what) {
    fprintf(stderr, "fuzz_npy: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wgml_npy a;
    if (wgml_npy_parse(data, size, &a) != WGML_OK) {
        const char *e = wgml_last_error(NULL);
        if (getenv("WGML_FUZZ_VERBOSE")) fprintf(stderr, "rejected: %s\n", e);
        if (!e || !e[0]) fail("rejected without a message");
        if (a.data) fail("rejected but data allocated");
        return 0;
    }
    if (a.rank < 0 || a.rank > WGML_MAX_RANK) fail("rank");
    int64_t numel = 1;
    for (int i = 0; i < a.rank; i++) numel *= a.shape[i];
    if (numel != a.numel || (size_t)numel * wgml_program_dtype_size(a.dtype) != a.nbytes) fail("size");
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < a.nbytes; i++) sink ^= ((const uint8_t *)a.data)[i];
    (void)sink;
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_npy_%d.npy", (int)getpid());
    if (wgml_npy_write(path, a.dtype, a.rank, a.shape, a.data) != WGML_OK) fail("an accepted array cannot be written");
    wgml_npy b;
    if (wgml_npy_read(path, &b) != WGML_OK) fail("a written file is not accepted");
    remove(path);
    if (b.dtype != a.dtype || b.rank != a.rank || b.nbytes != a.nbytes || memcmp(b.shape, a.shape, sizeof a.shape) ||
        (a.nbytes && memcmp(a.data, b.data, a.nbytes)))
        fail("round trip differs");
    wgml_npy_free(&a);
    wgml_npy_free(&b);
    return 0;
}
