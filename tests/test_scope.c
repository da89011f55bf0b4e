/* Error scopes answered late. wgml learns whether creating a kernel or a buffer failed from the
 * answers to its error scopes' pops, which come through callbacks; in Chromium they come after a
 * round trip to the GPU process, which can be busy for seconds. The browser's run of this test
 * delays every answer by $WGML_WEB_POP_DELAY_MS (web/webgpu.js's test hook; tests/web's
 * CMakeLists.txt sets 2500) and checks:
 *  - a kernel whose WGSL does not compile fails with an error naming the kernel, however late
 *    the answer comes (wgml waits up to its timeout; a wait bounded by 1000 polls, about a
 *    second in Chromium, lost the error and let the answer land in a dead stack frame);
 *  - on a context whose timeout is shorter than the delay, the same kernel fails with
 *    WGML_ERR_TIMEOUT naming what it waited for, and the late answers, which arrive while
 *    another context works, leave that context's results right (a kernel compiles and its copy
 *    gives the values written).
 * Natively (no delay) the first check runs: a compile error reaches the caller. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

#include "gpu/gpu.h"
#include "graph/graph.h"

#define N 64

static const char *BROKEN = "fn broken( {\n";

/* graph_copy with a prelude that does not compile: NULL and the context's error. */
static wgml_status compile_broken(wgml_ctx *ctx) {
    gpu_pipeline *p = gpu_pipeline_get(ctx, "graph_copy", BROKEN, 1, 1, true, false, false);
    return p ? WGML_OK : wgml_last_status(ctx);
}

static void test_late_error(double delay_s) {
    double t0 = now();
    wgml_status s = compile_broken(T.ctx);
    double took = now() - t0;
    th_expect_error("a kernel that does not compile", s != WGML_OK, WGML_ERR_GPU, "compiling kernel 'graph_copy'", NULL);
    if (delay_s > 0)
        th_check(took >= 0.9 * delay_s, "the error waited for the late answer: %.2f s for a delay of %.2f s", took,
                 delay_s);
    wgml_clear_error(T.ctx);
}

static void test_timeout_then_work(double delay_s) {
    wgml_ctx *short_ctx = NULL;
    wgml_ctx_options o = {.timeout_s = delay_s / 5, .poison_outputs = 1};
    wgml_status s = wgml_ctx_create(&o, &short_ctx);
    if (!th_check(s == WGML_OK, "a second context (%s)", wgml_create_error())) return;
    s = compile_broken(short_ctx);
    const char *err = wgml_last_error(short_ctx);
    th_check(s == WGML_ERR_TIMEOUT && strstr(err, "compiling kernel 'graph_copy'") && strstr(err, "did not finish within"),
             "an answer later than the timeout: want a timeout naming the kernel, got %s: %s", wgml_status_name(s), err);
    wgml_ctx_destroy(short_ctx);
    /* the late answers arrive while this copy waits for its own */
    float *h = th_random(N, -1, 1);
    wgml_tensor *x = th_tensor_f32(1, (int64_t[]){N}, h);
    wgml_tensor *y = x ? wgml_tensor_new(T.g, WGML_F32, 1, (int64_t[]){N}) : NULL;
    uint32_t p[4] = {N, 0, 0, 0};
    s = y ? graph_dispatch(T.g, "scope_copy", "graph_copy", NULL, &x, 1, &y, 1, p, sizeof p, 1) : WGML_ERR_ARG;
    th_check(s == WGML_OK, "a copy after the late answers (%s)", wgml_last_error(T.ctx));
    if (!s) th_read_equals("the copy after the late answers", y, h, N);
    wgml_tensor_free(x);
    wgml_tensor_free(y);
    free(h);
}

int main(void) {
    th_init("scope");
    const char *e = getenv("WGML_WEB_POP_DELAY_MS");
    double delay_s = e ? atof(e) * 1e-3 : 0;
    test_late_error(delay_s);
    if (delay_s > 0) test_timeout_then_work(delay_s);
    return th_done();
}
