/* Faults: every failure returns an error to the caller and leaves the library usable (or at
 * least cleanly destroyable).
 *  - limits: a tensor over the storage-binding limit (WGML_ERR_LIMIT), a built graph whose
 *    arena would exceed the device's buffer size (WGML_ERR_LIMIT at compile), many large
 *    allocations (capped at 2 GiB in all) to see whether the device runs out first;
 *  - a device memory budget (WGML_DEVICE_MEMORY_LIMIT): allocations, op outputs and a built
 *    graph's arenas past it give WGML_ERR_OOM naming the op and the sizes; freeing makes the
 *    memory usable again; the context shuts down cleanly;
 *  - a lost device (the internal hook gpu_debug_destroy_device destroys the WebGPU device, as a
 *    driver reset would): every call after it returns WGML_ERR_DEVICE_LOST with a message,
 *    reads fail cleanly, wgml_ctx_destroy works, nothing hangs;
 *  - a wait timeout: a context with a 20 ms timeout and a long dispatch chain gives
 *    WGML_ERR_TIMEOUT without hanging; the context then recovers (documented behaviour: the
 *    work keeps running on the device, and once it is done reads succeed with the right
 *    values; the context is not marked lost);
 *  - NULL / invalid arguments across the public API (table-driven): no crash, an error status
 *    or NULL, and a message. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

#include "gpu/gpu.h"

void gpu_debug_destroy_device(wgml_ctx *ctx); /* internal test hook (src/gpu/device.c) */

static uint64_t gpu_max_binding_floats(wgml_ctx *ctx) { return (gpu_get_caps(ctx)->max_storage_binding & ~255ull) / 4; }

/* A small op still works on ctx (the library is usable after a failure). */
static bool still_usable(wgml_ctx *ctx, const char *what) {
    wgml_graph *g = wgml_eager(ctx);
    int64_t shape[1] = {5};
    wgml_tensor *a = wgml_full(g, WGML_F32, 1, shape, 2.0);
    wgml_tensor *b = wgml_add_scalar(g, a, 1.0f, 1.0f);
    float out[5] = {0};
    wgml_status s = b ? wgml_tensor_read(b, out, sizeof out) : wgml_last_status(ctx);
    bool ok = s == WGML_OK;
    for (int i = 0; i < 5; i++) ok = ok && out[i] == 3.0f;
    wgml_tensor_free(a);
    wgml_tensor_free(b);
    return th_check(ok, "%s: the context still works (%s)", what, ok ? "" : wgml_last_error(ctx));
}

/* ---- limits ------------------------------------------------------------------------------ */

static void test_limits(void) {
    wgml_device_info info;
    wgml_device_get_info(T.ctx, &info);
    printf("limits: max storage binding %llu bytes, max buffer %llu bytes\n",
           (unsigned long long)info.max_storage_binding, (unsigned long long)info.max_buffer_size);
    /* a tensor one element over the binding limit */
    int64_t big[1] = {(int64_t)(info.max_storage_binding / 4) + 1};
    wgml_tensor *t = wgml_tensor_new(T.g, WGML_F32, 1, big);
    th_expect_error("tensor over the storage-binding limit", t == NULL, WGML_ERR_LIMIT, "binding", NULL);
    /* the same as an op's output */
    t = wgml_full(T.g, WGML_F32, 1, big, 0.0);
    th_expect_error("full() over the storage-binding limit", t == NULL, WGML_ERR_LIMIT, NULL);
    still_usable(T.ctx, "after the binding-limit errors");

    /* a built graph whose intermediates, all kept alive, need more arenas than the plan allows:
     * arenas are capped at the device's buffer size, lowered here to 64 KiB with
     * $WGML_ARENA_BYTES so that 70 kept tensors of 64 KiB need 70 arenas (the limit is 64);
     * nothing is allocated until compile, which must refuse */
    th_setenv("WGML_ARENA_BYTES", "65536", 1);
    wgml_graph *g = wgml_graph_new(T.ctx);
    int n = 70;
    int64_t shape[1] = {16384};
    bool recorded = true;
    for (int i = 0; i < n; i++) {
        wgml_tensor *x = wgml_full(g, WGML_F32, 1, shape, (double)i);
        recorded = recorded && x && wgml_graph_keep(g, x) == WGML_OK;
    }
    th_check(recorded, "arena: %d tensors of 64 KiB recorded (%s)", n, recorded ? "" : wgml_last_error(T.ctx));
    wgml_status s = wgml_graph_compile(g);
    th_unsetenv("WGML_ARENA_BYTES");
    th_expect_error("graph needing more arenas than allowed", s != WGML_OK, WGML_ERR_LIMIT, "arenas", NULL);
    s = wgml_graph_run(g);
    th_expect_error("running the graph that failed to compile", s != WGML_OK, WGML_ERR_STATE, NULL);
    wgml_graph_free(g);
    still_usable(T.ctx, "after the arena error");

    /* many large allocations, at most 2 GiB in all, in a fresh context without poisoning (so
     * nothing is written): lavapipe backs device memory with host memory, so this shows
     * whether an out-of-memory error comes before the cap */
    wgml_ctx *ctx = NULL;
    wgml_ctx_options opt = {0};
    if (wgml_ctx_create(&opt, &ctx) != WGML_OK) {
        th_check(false, "context: %s", wgml_create_error());
        return;
    }
    uint64_t each = 256ull << 20;
    if (each > info.max_storage_binding) each = info.max_storage_binding & ~255ull;
    int64_t es[1] = {(int64_t)(each / 4)};
    wgml_tensor *held[64];
    int nh = 0;
    uint64_t total = 0;
    wgml_status last = WGML_OK;
    double t0 = now();
    while (total + each <= (2ull << 30) && nh < 64) {
        wgml_tensor *x = wgml_tensor_new(wgml_eager(ctx), WGML_F32, 1, es);
        if (!x) {
            last = wgml_last_status(ctx);
            break;
        }
        held[nh++] = x;
        total += each;
    }
    if (last != WGML_OK)
        printf("  allocations: out of memory after %d x %llu MiB: %s: %s\n", nh, (unsigned long long)(each >> 20),
               wgml_status_name(last), wgml_last_error(ctx));
    else
        printf("  allocations: %d x %llu MiB (%.1f GiB) all succeeded (no OOM below the 2 GiB cap), %.2f s\n", nh,
               (unsigned long long)(each >> 20), total / 1073741824.0, now() - t0);
    th_check(last == WGML_OK || last == WGML_ERR_OOM || last == WGML_ERR_LIMIT,
             "allocations end in success or a clean OOM/limit error (%s)", wgml_status_name(last));
    for (int i = 0; i < nh; i++) wgml_tensor_free(held[i]);
    wgml_clear_error(ctx);
    still_usable(ctx, "after the large allocations");
    wgml_ctx_destroy(ctx);
}

/* ---- a device memory budget ---------------------------------------------------------------- */

/* A context with WGML_DEVICE_MEMORY_LIMIT=1 MiB: allocations past it fail with WGML_ERR_OOM
 * naming the op and the sizes, as a device out of memory does; after freeing, the memory is
 * usable again; the context shuts down cleanly. */
static bool expect_oom(wgml_ctx *ctx, const char *name, bool failed, const char *sub1, const char *sub2) {
    const char *msg = wgml_last_error(ctx);
    bool ok = failed && wgml_last_status(ctx) == WGML_ERR_OOM && strstr(msg, sub1) && (!sub2 || strstr(msg, sub2));
    th_check(ok, "%s: failed %d, status %s, message '%s' (wanted '%s'%s%s)", name, failed, wgml_status_name(wgml_last_status(ctx)),
             msg, sub1, sub2 ? ", " : "", sub2 ? sub2 : "");
    wgml_clear_error(ctx);
    return ok;
}

static void test_memory_limit(void) {
    th_setenv("WGML_DEVICE_MEMORY_LIMIT", "1M", 1);
    wgml_ctx *ctx = NULL;
    wgml_ctx_options opt = {0};
    wgml_status cs = wgml_ctx_create(&opt, &ctx);
    th_unsetenv("WGML_DEVICE_MEMORY_LIMIT");
    if (cs != WGML_OK) {
        th_check(false, "context: %s", wgml_create_error());
        return;
    }
    wgml_graph *g = wgml_eager(ctx);
    int64_t q[1] = {65536}; /* 256 KiB */
    wgml_tensor *held[8];
    int nh = 0;
    wgml_tensor *x = NULL;
    while (nh < 8 && (x = wgml_tensor_new(g, WGML_F32, 1, q))) held[nh++] = x;
    th_check(nh >= 2 && nh <= 4, "memory limit: %d tensors of 256 KiB fit in 1 MiB", nh);
    wgml_memory_stats ms;
    wgml_memory_get(ctx, &ms);
    th_check(ms.in_use >= (uint64_t)nh * 262144 && ms.in_use <= 1048576 && ms.peak >= ms.in_use,
             "memory stats with %d x 256 KiB held: in use %llu, peak %llu", nh, (unsigned long long)ms.in_use,
             (unsigned long long)ms.peak);
    printf("  memory limit: %d x 256 KiB, then: %s\n", nh, wgml_last_error(ctx));
    expect_oom(ctx, "a tensor past the device memory limit", x == NULL, "out of device memory", "1048576");
    wgml_tensor *y = wgml_full(g, WGML_F32, 1, q, 1.0);
    expect_oom(ctx, "an op's output past the device memory limit", y == NULL, "full", "262144");
    /* a built graph whose arena does not fit: compile fails, nothing is left half-built */
    wgml_graph *bg = wgml_graph_new(ctx);
    int64_t big[1] = {1 << 20}; /* 4 MiB */
    wgml_tensor *z = wgml_full(bg, WGML_F32, 1, big, 3.0);
    bool rec = z && wgml_graph_keep(bg, z) == WGML_OK;
    th_check(rec, "memory limit: a 4 MiB tensor recorded in a built graph (%s)", rec ? "" : wgml_last_error(ctx));
    wgml_status s = wgml_graph_compile(bg);
    printf("  built graph: %s\n", wgml_last_error(ctx));
    expect_oom(ctx, "a built graph past the device memory limit", s != WGML_OK, "out of device memory", NULL);
    wgml_graph_free(bg);
    for (int i = 0; i < nh; i++) wgml_tensor_free(held[i]);
    wgml_memory_get(ctx, &ms);
    th_check(ms.pool_idle >= (uint64_t)nh * 262144 && ms.pool_idle <= ms.in_use,
             "memory stats after freeing %d x 256 KiB: %llu idle in the pool of %llu in use", nh,
             (unsigned long long)ms.pool_idle, (unsigned long long)ms.in_use);
    still_usable(ctx, "after the memory-limit errors and freeing");
    /* the freed memory can be used again (the pool gives idle buffers back when needed) */
    int64_t q2[1] = {3 * 65536}; /* 768 KiB: fits only once the 256 KiB buffers are gone */
    wgml_tensor *w = wgml_full(g, WGML_F32, 1, q2, 2.0);
    float *v = calloc(3 * 65536, sizeof(float));
    th_check(w && v && wgml_tensor_read(w, v, 3 * 65536 * sizeof(float)) == WGML_OK && v[0] == 2.0f && v[3 * 65536 - 1] == 2.0f,
             "memory limit: 768 KiB allocated and written after freeing (%s)", w ? "" : wgml_last_error(ctx));
    free(v);
    wgml_tensor_free(w);
    wgml_ctx_destroy(ctx);
}

/* Uploads larger than the flush size (64 MiB) between two submits: the writes are handed to
 * the GPU by one empty submit in between (so their staging is not all held at once) and every
 * byte arrives, in order, on both sides of it. */
static void test_upload_flush(void) {
    wgml_ctx *ctx = NULL;
    wgml_ctx_options opt = {0};
    th_unsetenv("WGML_UPLOAD_FLUSH"); /* the default, 64 MiB */
    if (wgml_ctx_create(&opt, &ctx) != WGML_OK) {
        th_check(false, "context: %s", wgml_create_error());
        return;
    }
    wgml_graph *g = wgml_eager(ctx);
    int64_t n[1] = {12 << 20}; /* 48 MiB each: the second write crosses 64 MiB */
    float *h[2] = {malloc(sizeof(float) * (size_t)n[0]), malloc(sizeof(float) * (size_t)n[0])};
    float *back = malloc(sizeof(float) * (size_t)n[0]);
    wgml_tensor *t[2] = {wgml_tensor_new(g, WGML_F32, 1, n), wgml_tensor_new(g, WGML_F32, 1, n)};
    if (!h[0] || !h[1] || !back || !t[0] || !t[1]) {
        th_check(false, "upload flush: allocation (%s)", wgml_last_error(ctx));
    } else {
        for (int i = 0; i < 2; i++) th_fill_uniform(h[i], (size_t)n[0], -1.0, 1.0);
        uint64_t s0 = wgml_submit_count(ctx);
        bool w = wgml_tensor_write(t[0], h[0], sizeof(float) * (size_t)n[0]) == WGML_OK &&
                 wgml_tensor_write(t[1], h[1], sizeof(float) * (size_t)n[0]) == WGML_OK;
        uint64_t flushes = wgml_submit_count(ctx) - s0;
        th_check(w && flushes == 1, "upload flush: 96 MiB of writes made %llu submits, wanted 1 (%s)",
                 (unsigned long long)flushes, w ? "" : wgml_last_error(ctx));
        for (int i = 0; i < 2; i++) {
            bool r = wgml_tensor_read(t[i], back, sizeof(float) * (size_t)n[0]) == WGML_OK;
            th_check(r && !memcmp(back, h[i], sizeof(float) * (size_t)n[0]), "upload flush: tensor %d reads back as written", i);
        }
    }
    wgml_tensor_free(t[0]);
    wgml_tensor_free(t[1]);
    free(h[0]);
    free(h[1]);
    free(back);
    wgml_ctx_destroy(ctx);
}

/* ---- device lost ------------------------------------------------------------------------- */

static bool lost(wgml_ctx *ctx, const char *what, bool failed) {
    wgml_status s = wgml_last_status(ctx);
    const char *msg = wgml_last_error(ctx);
    bool ok = failed && s == WGML_ERR_DEVICE_LOST && strstr(msg, "lost");
    if (ok) printf("  ok %-44s error: %s\n", what, msg);
    return th_check(ok, "device lost: %s: failed %d, status %s, message '%s'", what, failed, wgml_status_name(s), msg);
}

static void test_device_lost(void) {
    wgml_ctx *ctx = NULL;
    wgml_ctx_options opt = {0};
    if (wgml_ctx_create(&opt, &ctx) != WGML_OK) {
        th_check(false, "context: %s", wgml_create_error());
        return;
    }
    wgml_graph *e = wgml_eager(ctx);
    int64_t shape[2] = {64, 64};
    wgml_tensor *a = wgml_full(e, WGML_F32, 2, shape, 1.0);
    wgml_tensor *b = wgml_full(e, WGML_F32, 2, shape, 2.0);
    /* a built graph compiled before the loss */
    wgml_graph *g = wgml_graph_new(ctx);
    wgml_tensor *ga = wgml_tensor_new(g, WGML_F32, 2, shape);
    wgml_tensor *gm = wgml_mm(g, ga, ga);
    wgml_graph_keep(g, gm);
    th_check(wgml_graph_compile(g) == WGML_OK, "device lost: graph compiled before the loss (%s)", wgml_last_error(ctx));
    /* work in flight, then the device goes */
    wgml_tensor *c = wgml_mm(e, a, b);
    wgml_sync(ctx);
    wgml_tensor *d = wgml_mm(e, c, b); /* recorded, not yet run */
    double t0 = now();
    gpu_debug_destroy_device(ctx);
    float buf[64 * 64];
    lost(ctx, "read of a finished tensor", wgml_tensor_read(c, buf, sizeof buf) != WGML_OK);
    lost(ctx, "read of a pending tensor", d && wgml_tensor_read(d, buf, sizeof buf) != WGML_OK);
    lost(ctx, "write", wgml_tensor_write(a, buf, sizeof buf) != WGML_OK);
    lost(ctx, "sync", wgml_sync(ctx) != WGML_OK);
    lost(ctx, "tensor_new", wgml_tensor_new(e, WGML_F32, 2, shape) == NULL);
    lost(ctx, "an op (mm)", wgml_mm(e, a, b) == NULL || wgml_sync(ctx) != WGML_OK);
    lost(ctx, "running a compiled graph", wgml_graph_run(g) != WGML_OK);
    wgml_graph *g2 = wgml_graph_new(ctx);
    wgml_tensor *x2 = g2 ? wgml_tensor_new(g2, WGML_F32, 2, shape) : NULL;
    wgml_tensor *y2 = x2 ? wgml_relu(g2, x2) : NULL;
    if (y2) wgml_graph_keep(g2, y2);
    lost(ctx, "compiling a new graph", !y2 || wgml_graph_compile(g2) != WGML_OK);
    wgml_clear_error(ctx);
    th_check(wgml_last_status(ctx) == WGML_ERR_DEVICE_LOST, "device lost: clear_error keeps the lost status (%s)",
             wgml_status_name(wgml_last_status(ctx)));
    wgml_graph_free(g2);
    wgml_graph_free(g);
    wgml_tensor_free(a);
    wgml_tensor_free(b);
    wgml_tensor_free(c);
    wgml_tensor_free(d);
    wgml_ctx_destroy(ctx);
    double dt = now() - t0;
    th_check(dt < 10.0, "device lost: everything after the loss, destroy included, took %.3f s (no hang)", dt);
}

/* ---- timeout ----------------------------------------------------------------------------- */

static void test_timeout(void) {
    /* On lavapipe a submit blocks inside the driver while an earlier submission runs, so the
     * one wait that can outlast the timeout is the readback of a large tensor: its copy (128 MiB,
     * tens of ms) against a 1 ms timeout. */
    wgml_ctx *ctx = NULL;
    wgml_ctx_options opt = {0};
    opt.timeout_s = 0.001;
    if (wgml_ctx_create(&opt, &ctx) != WGML_OK) {
        th_check(false, "context: %s", wgml_create_error());
        return;
    }
    wgml_graph *e = wgml_eager(ctx);
    int64_t n = (int64_t)(gpu_max_binding_floats(ctx));
    int64_t shape[1] = {n};
    wgml_tensor *big = wgml_full(e, WGML_F32, 1, shape, 3.0);
    wgml_tensor *head = big ? wgml_tensor_view(big, 0, 1, (int64_t[]){4}) : NULL;
    float *out = malloc((size_t)n * sizeof *out), part[4] = {0};
    wgml_status s = head && out ? WGML_OK : WGML_ERR_OOM;
    /* first let the fill finish: small reads until one succeeds (wgml_sync may return before
     * lavapipe has run the work, see docs/RELIABILITY.md) */
    for (int i = 0; i < 200 && !s; i++) {
        wgml_clear_error(ctx);
        if (wgml_tensor_read(head, part, sizeof part) == WGML_OK) break;
        if (wgml_last_status(ctx) != WGML_ERR_TIMEOUT) s = wgml_last_status(ctx);
    }
    double t0 = now();
    if (!s) s = wgml_tensor_read(big, out, (size_t)n * sizeof *out);
    double dt = now() - t0;
    bool to = s == WGML_ERR_TIMEOUT && strstr(wgml_last_error(ctx), "did not finish");
    th_check(to && dt < 30.0, "timeout: read of %lld MiB with a 1 ms timeout gives %s after %.3f s: %s",
             (long long)(n >> 18), wgml_status_name(s), dt, wgml_last_error(ctx));
    if (to) printf("  ok timeout after %.3f s, error: %s\n", dt, wgml_last_error(ctx));
    th_check(wgml_last_status(ctx) != WGML_ERR_DEVICE_LOST, "timeout: the device is not marked lost");
    /* recovery: the context stays usable; a small read (fast enough) succeeds, with the right
     * values from the same tensor (the abandoned copy finishes in the background) */
    wgml_clear_error(ctx);
    int tries = 0;
    memset(part, 0, sizeof part);
    t0 = now();
    do {
        wgml_clear_error(ctx);
        s = head ? wgml_tensor_read(head, part, sizeof part) : wgml_last_status(ctx);
        tries++;
    } while (s == WGML_ERR_TIMEOUT && tries < 50);
    bool right = s == WGML_OK && part[0] == 3.0f && part[3] == 3.0f;
    th_check(right, "timeout: the context recovers: a small read ok after %d tries (%.3f s), values right (%s)",
             tries, now() - t0, wgml_last_error(ctx));
    printf("  recovery: small read ok after %d tries\n", tries);
    wgml_tensor_free(head);
    wgml_tensor_free(big);
    free(out);
    wgml_ctx_destroy(ctx);
}

/* ---- NULL and invalid arguments ---------------------------------------------------------- */

/* Each case returns 1 when the call failed cleanly (NULL / error status). The calls without a
 * context report through wgml_last_error(NULL) where they can. */
typedef struct api_case {
    const char *name;
    int (*call)(void);
} api_case;

static wgml_graph *G;   /* the eager graph of the test context */
static wgml_tensor *X;  /* a valid f32 [4, 4] tensor */
static const int64_t S2[2] = {4, 4};
static float HBUF[16];

#define NP(id, expr) static int id(void) { return (expr) == NULL; }
#define NS(id, expr) static int id(void) { return (expr) != WGML_OK; }
#define NV(id, stmt) static int id(void) { stmt; return 1; }

/* NULL handles */
NS(c_ctx_create, wgml_ctx_create(NULL, NULL))
NV(c_ctx_destroy, wgml_ctx_destroy(NULL))
NS(c_last_status, wgml_last_status(NULL) == WGML_OK ? WGML_OK : WGML_ERR_ARG)
NV(c_clear_error, wgml_clear_error(NULL))
static int c_device_info(void) { wgml_device_info d; wgml_device_get_info(NULL, &d); return d.adapter[0] == 0; }
NP(c_eager, wgml_eager(NULL))
NS(c_sync, wgml_sync(NULL))
NP(c_graph_new, wgml_graph_new(NULL))
NV(c_graph_free, wgml_graph_free(NULL))
NS(c_graph_keep, wgml_graph_keep(NULL, NULL))
NS(c_graph_compile, wgml_graph_compile(NULL))
NS(c_graph_run, wgml_graph_run(NULL))
static int c_graph_run_timed(void) { double s; return wgml_graph_run_timed(NULL, &s) != WGML_OK; }
static int c_graph_counts(void) { return wgml_graph_dispatch_count(NULL) == 0 && wgml_graph_arena_bytes(NULL) == 0 && wgml_submit_count(NULL) == 0; }
NP(c_tensor_new, wgml_tensor_new(NULL, WGML_F32, 2, S2))
NS(c_tensor_write, wgml_tensor_write(NULL, HBUF, sizeof HBUF))
NS(c_tensor_read, wgml_tensor_read(NULL, HBUF, sizeof HBUF))
NV(c_tensor_free, wgml_tensor_free(NULL))
NP(c_reshape, wgml_reshape(NULL, X, 1, (int64_t[]){16}))
NP(c_view, wgml_tensor_view(NULL, 0, 1, (int64_t[]){4}))
static int c_tensor_getters(void) {
    return wgml_tensor_rank(NULL) == 0 && wgml_tensor_numel(NULL) == 0 && wgml_tensor_nbytes(NULL) == 0 &&
           wgml_tensor_dim(NULL, 0) == 0 && (int)wgml_tensor_dtype(NULL) >= 0;
}
NP(c_full, wgml_full(NULL, WGML_F32, 2, S2, 0))
NS(c_fill, wgml_fill(NULL, NULL, 0))
NP(c_mm, wgml_mm(NULL, X, X))
NP(c_linear, wgml_linear(NULL, X, X, NULL))
NP(c_matmul, wgml_matmul(NULL, X, X, 0, 0))
NS(c_linear_dw, wgml_linear_dw(NULL, X, X, X, 0))
NV(c_force_variant, wgml_matmul_force_variant(NULL, 0))
NP(c_sum, wgml_sum(NULL, X, NULL, 0, 0))
NP(c_softmax, wgml_softmax(NULL, X, -1))
NP(c_rms_norm, wgml_rms_norm(NULL, X, NULL, 1e-5f))
NP(c_layer_norm, wgml_layer_norm(NULL, X, NULL, NULL, 1e-5f, NULL, NULL))
NP(c_embedding, wgml_embedding(NULL, X, NULL))
NP(c_slice, wgml_slice(NULL, X, 0, 0, 2, 1))
NP(c_cat, wgml_cat(NULL, NULL, 0, 0))
NP(c_permute, wgml_permute(NULL, X, NULL))
NP(c_clone, wgml_clone(NULL, X))
NP(c_scalar_tensor, wgml_scalar_tensor(NULL, WGML_F32, 1))
NP(c_binary, wgml_binary(NULL, WGML_BIN_ADD, X, X, 1))
NP(c_unary, wgml_unary(NULL, WGML_UN_EXP, X))
NP(c_compare, wgml_compare(NULL, WGML_CMP_EQ, X, X))
NP(c_where, wgml_where(NULL, X, X, X))
NP(c_rope, wgml_rope(NULL, X, X, 10000, WGML_ROPE_HALF))
NP(c_sdpa, wgml_sdpa(NULL, X, X, X, 1, 0))
NS(c_kv_append, wgml_kv_append(NULL, X, X, X))
NP(c_ce, wgml_cross_entropy(NULL, X, X, NULL))
NP(c_adamw_new, wgml_adamw_new(NULL, NULL))
NV(c_adamw_free, wgml_adamw_free(NULL))
NP(c_adamw_param, wgml_adamw_param(NULL, 1, (int64_t[]){4}))
NP(c_adamw_grad, wgml_adamw_grad(NULL, X))
NS(c_adamw_step, wgml_adamw_step(NULL, NULL))
NS(c_adamw_zero, wgml_adamw_zero_grad(NULL, NULL))
NS(c_adamw_lr, wgml_adamw_set_lr(NULL, 1e-3))
NS(c_adamw_wd, wgml_adamw_set_weight_decay(NULL, 0))
NS(c_adamw_stats, wgml_adamw_stats(NULL, NULL, NULL, NULL))
NP(c_adamw_buffer, wgml_adamw_buffer(NULL, WGML_ADAMW_PARAMS))
static int c_adamw_used(void) { return wgml_adamw_used(NULL) == 0; }
NS(c_gguf_open, wgml_gguf_open(NULL, NULL, NULL, 0))
static int c_gguf_open_path(void) { wgml_gguf *f = (wgml_gguf *)1; return wgml_gguf_open(NULL, &f, NULL, 0) != WGML_OK && f == NULL; }
NV(c_gguf_close, wgml_gguf_close(NULL))
static int c_gguf_getters(void) {
    wgml_gguf_value v;
    const void *p;
    size_t n;
    uint32_t u;
    return wgml_gguf_version(NULL) == 0 && wgml_gguf_kv_count(NULL) == 0 && wgml_gguf_tensor_count(NULL) == 0 &&
           wgml_gguf_kv_key(NULL, 0) == NULL && !wgml_gguf_find(NULL, "x", &v) && wgml_gguf_find_tensor(NULL, "x") < 0 &&
           wgml_gguf_tensor_at(NULL, 0) == NULL && wgml_gguf_tensor_data(NULL, 0, &p, &n) != WGML_OK &&
           wgml_gguf_get_u32(NULL, "x", &u) != WGML_OK && wgml_gguf_error(NULL)[0] != 0 &&
           wgml_gguf_alignment(NULL) == 0 && wgml_gguf_data_offset(NULL) == 0 && wgml_gguf_file_size(NULL) == 0;
}
static int c_gguf_value_getters(void) {
    wgml_gguf_value v = wgml_gguf_kv_value(NULL, 0), e;
    uint64_t u;
    int64_t i;
    double d;
    const char *s;
    size_t n;
    return wgml_gguf_value_u64(NULL, v, &u) != WGML_OK && wgml_gguf_value_i64(NULL, v, &i) != WGML_OK &&
           wgml_gguf_value_f64(NULL, v, &d) != WGML_OK && wgml_gguf_value_string(NULL, v, &s, &n) != WGML_OK &&
           wgml_gguf_array_elem(NULL, v, 0, &e) != WGML_OK;
}
NS(c_tok_from_gguf, wgml_tokenizer_from_gguf(NULL, NULL, NULL, 0))
NV(c_tok_free, wgml_tokenizer_free(NULL))
static int c_tok_calls(void) {
    int32_t *ids;
    size_t n;
    char *s;
    return wgml_tokenizer_encode(NULL, "a", 1, 0, &ids, &n) != WGML_OK &&
           wgml_tokenizer_decode(NULL, NULL, 0, 0, &s, &n) != WGML_OK && wgml_tokenizer_vocab_size(NULL) == 0 &&
           wgml_tokenizer_bos(NULL) == -1 && wgml_tokenizer_eos(NULL) == -1 && wgml_tokenizer_token(NULL, 0) == NULL &&
           wgml_tokenizer_pre(NULL) != NULL && wgml_tokenizer_merge_count(NULL) == 0 &&
           wgml_tokenizer_error(NULL) != NULL && wgml_chat_apply(NULL, NULL, 0, 0, &s, &n) != WGML_OK;
}
NS(c_model_info, wgml_model_print_info(NULL, NULL))
NS(c_dequant, wgml_gguf_dequantize(WGML_GGML_Q4_0, NULL, 18, 1, 32, HBUF))
NS(c_q4gsw_deq, wgml_q4gsw_dequantize(NULL, NULL, 1, 32, 32, HBUF))
NS(c_q4gsw_quant, wgml_q4gsw_quantize(NULL, 1, 32, 32, NULL, NULL))
NP(c_qw_upload, wgml_qweight_upload_gguf(NULL, WGML_GGML_Q4_0, HBUF, 18, 1, 32))
NP(c_qw_quantize, wgml_qweight_quantize(NULL, HBUF, 1, 32, 32))
NV(c_qw_free, wgml_qweight_free(NULL))
NP(c_qw_linear, wgml_qlinear(NULL, X, NULL))
NP(c_qw_linear_g, wgml_qlinear(G, X, NULL))
NS(c_qw_requant, wgml_qweight_requant(G, X, NULL))
NP(c_qw_embedding, wgml_qembedding(G, NULL, X))
NP(c_qw_dequantize, wgml_qweight_dequantize(G, NULL))
NP(c_model_load, wgml_model_load(NULL, "nope.gguf", NULL))
NV(c_model_free, wgml_model_free(NULL))
static int c_model_getters(void) {
    return wgml_model_config(NULL) == NULL && wgml_model_tokenizer(NULL) == NULL && !wgml_model_is_stop(NULL, 0) &&
           wgml_model_pos(NULL) == 0 && wgml_model_prefill(NULL, NULL, 0, NULL, NULL) != WGML_OK &&
           wgml_model_decode(NULL, 0, NULL, NULL) != WGML_OK;
}
NV(c_model_reset, wgml_model_reset(NULL))
NS(c_generate, wgml_generate(NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL))
static int c_sample(void) { return wgml_sample(NULL, 0, NULL, NULL) < 0; }
NP(c_share, wgml_tensor_share(NULL, X))
NS(c_set_trainable, wgml_tensor_set_trainable(NULL, 1))
NS(c_set_grad, wgml_tensor_set_grad(NULL, NULL, 0))
NS(c_backward, wgml_backward(NULL, NULL, 1))
NP(c_tensor_grad, wgml_tensor_grad(NULL))
NP(c_lora_new, wgml_lora_new(NULL, 4, 4, 2, 1, 1))
NV(c_lora_free, wgml_lora_free(NULL))
NP(c_lora_apply, wgml_lora_apply(G, X, X, NULL))

/* a valid graph, NULL tensors: the error lands on the context */
NP(g_mm, wgml_mm(G, NULL, X))
NP(g_bmm, wgml_bmm(G, X, NULL))
NP(g_addmm, wgml_addmm(G, NULL, X, X, 1, 1))
NS(g_linear_dw, wgml_linear_dw(G, NULL, X, X, 0))
NS(g_fill, wgml_fill(G, NULL, 0))
NP(g_reshape, wgml_reshape(G, NULL, 1, (int64_t[]){16}))
NP(g_full_like, wgml_full_like(G, NULL, 0))
NP(g_amax, wgml_amax(G, NULL, NULL, 0, 0))
NP(g_argmax, wgml_argmax(G, NULL, 0, 0))
NP(g_log_softmax, wgml_log_softmax(G, NULL, 0))
NP(g_layer_norm, wgml_layer_norm(G, NULL, NULL, NULL, 1e-5f, NULL, NULL))
NP(g_gather, wgml_gather(G, X, 0, NULL))
NP(g_index_select, wgml_index_select(G, NULL, 0, X))
NP(g_cat, wgml_cat(G, (wgml_tensor *const[]){X, NULL}, 2, 0))
NP(g_transpose, wgml_transpose(G, NULL, 0, 1))
NP(g_expand, wgml_expand_copy(G, NULL, 2, S2))
NP(g_binary_scalar, wgml_binary_scalar(G, WGML_BIN_MUL, NULL, 2, 1))
NP(g_clamp, wgml_clamp(G, NULL, 0, 1))
NP(g_logical_and, wgml_logical_and(G, NULL, NULL))
NP(g_where, wgml_where(G, NULL, X, X))
NP(g_rope_ex, wgml_rope_ex(G, NULL, NULL, 1e4f, WGML_ROPE_HALF, WGML_ROPE_BHSD, 0))
NP(g_rope_backward, wgml_rope_backward(G, NULL, NULL, 1e4f, WGML_ROPE_HALF))
NP(g_sdpa_cached, wgml_sdpa_cached(G, NULL, NULL, NULL, NULL, 1, 0))
NS(g_kv_append, wgml_kv_append(G, NULL, NULL, NULL))
NP(g_ce_ex, wgml_cross_entropy_ex(G, NULL, NULL, NULL, NULL))
NP(g_adamw_new, wgml_adamw_new(G, NULL))
NS(g_backward, wgml_backward(G, NULL, 1))
NP(g_lora_linear, wgml_lora_linear(G, NULL, X, NULL, NULL))
NP(g_share, wgml_tensor_share(G, NULL))
/* invalid values with valid handles */
NP(v_rank_neg, wgml_tensor_new(G, WGML_F32, -1, S2))
NP(v_rank_big, wgml_tensor_new(G, WGML_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}))
NP(v_shape_null, wgml_tensor_new(G, WGML_F32, 2, NULL))
NP(v_dim_zero, wgml_tensor_new(G, WGML_F32, 2, (int64_t[]){4, 0}))
NP(v_dim_neg, wgml_tensor_new(G, WGML_F32, 2, (int64_t[]){4, -3}))
NP(v_dtype_bad, wgml_tensor_new(G, (wgml_dtype)99, 2, S2))
NS(v_write_size, wgml_tensor_write(X, HBUF, 7))
NS(v_write_null, wgml_tensor_write(X, NULL, sizeof HBUF))
NS(v_read_size, wgml_tensor_read(X, HBUF, 3))
NS(v_read_null, wgml_tensor_read(X, NULL, sizeof HBUF))
NP(v_reshape_numel, wgml_reshape(G, X, 1, (int64_t[]){15}))
NP(v_view_oob, wgml_tensor_view(X, 8, 1, (int64_t[]){16}))
NP(v_softmax_dim, wgml_softmax(G, X, 5))
NP(v_sum_dims, wgml_sum(G, X, (int[]){0, 0}, 2, 0))
NP(v_slice_step, wgml_slice(G, X, 0, 0, 4, 0))
NP(v_permute_bad, wgml_permute(G, X, (int[]){0, 0}))
NP(v_mm_shape, wgml_mm(G, X, wgml_reshape(G, X, 2, (int64_t[]){2, 8})))
NS(v_graph_run_eager, wgml_graph_run(G))
NS(v_keep_eager_null, wgml_graph_keep(G, NULL))
NP(v_adamw_cap, wgml_adamw_new(G, &(wgml_adamw_config){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .capacity = -5}))

#define C(id) {#id, id}
static const api_case CASES_NOCTX[] = {
    C(c_ctx_create), C(c_ctx_destroy), C(c_last_status), C(c_clear_error), C(c_device_info), C(c_eager), C(c_sync),
    C(c_graph_new), C(c_graph_free), C(c_graph_keep), C(c_graph_compile), C(c_graph_run), C(c_graph_run_timed),
    C(c_graph_counts), C(c_tensor_new), C(c_tensor_write), C(c_tensor_read), C(c_tensor_free), C(c_reshape),
    C(c_view), C(c_tensor_getters), C(c_full), C(c_fill), C(c_mm), C(c_linear), C(c_matmul), C(c_linear_dw),
    C(c_force_variant), C(c_sum), C(c_softmax), C(c_rms_norm), C(c_layer_norm), C(c_embedding), C(c_slice),
    C(c_cat), C(c_permute), C(c_clone), C(c_scalar_tensor), C(c_binary), C(c_unary), C(c_compare), C(c_where),
    C(c_rope), C(c_sdpa), C(c_kv_append), C(c_ce), C(c_adamw_new), C(c_adamw_free), C(c_adamw_param),
    C(c_adamw_grad), C(c_adamw_step), C(c_adamw_zero), C(c_adamw_lr), C(c_adamw_wd), C(c_adamw_stats),
    C(c_adamw_buffer), C(c_adamw_used), C(c_gguf_open), C(c_gguf_open_path), C(c_gguf_close), C(c_gguf_getters),
    C(c_gguf_value_getters), C(c_tok_from_gguf), C(c_tok_free), C(c_tok_calls), C(c_model_info), C(c_dequant),
    C(c_q4gsw_deq), C(c_q4gsw_quant), C(c_qw_upload), C(c_qw_quantize), C(c_qw_free), C(c_qw_linear),
    C(c_model_load), C(c_model_free), C(c_model_getters), C(c_model_reset), C(c_generate), C(c_sample),
    C(c_share), C(c_set_trainable), C(c_set_grad), C(c_backward), C(c_tensor_grad), C(c_lora_new), C(c_lora_free),
};
static const api_case CASES_CTX[] = {
    C(c_qw_linear_g), C(c_qw_requant), C(c_qw_embedding), C(c_qw_dequantize), C(c_lora_apply), C(g_mm), C(g_bmm),
    C(g_addmm), C(g_linear_dw), C(g_fill), C(g_reshape), C(g_full_like), C(g_amax), C(g_argmax), C(g_log_softmax),
    C(g_layer_norm), C(g_gather), C(g_index_select), C(g_cat), C(g_transpose), C(g_expand), C(g_binary_scalar),
    C(g_clamp), C(g_logical_and), C(g_where), C(g_rope_ex), C(g_rope_backward), C(g_sdpa_cached), C(g_kv_append),
    C(g_ce_ex), C(g_adamw_new), C(g_backward), C(g_lora_linear), C(g_share), C(v_rank_neg), C(v_rank_big),
    C(v_shape_null), C(v_dim_zero), C(v_dim_neg), C(v_dtype_bad), C(v_write_size), C(v_write_null), C(v_read_size),
    C(v_read_null), C(v_reshape_numel), C(v_view_oob), C(v_softmax_dim), C(v_sum_dims), C(v_slice_step),
    C(v_permute_bad), C(v_mm_shape), C(v_graph_run_eager), C(v_keep_eager_null), C(v_adamw_cap),
};

static void test_api_args(void) {
    G = T.g;
    X = wgml_full(G, WGML_F32, 2, S2, 1.0);
    int n0 = (int)(sizeof CASES_NOCTX / sizeof CASES_NOCTX[0]), n1 = (int)(sizeof CASES_CTX / sizeof CASES_CTX[0]);
    printf("API with NULL handles (%d cases; message from wgml_last_error(NULL) where one is set):\n", n0);
    char before[1024];
    for (int i = 0; i < n0; i++) {
        snprintf(before, sizeof before, "%s", wgml_last_error(NULL)); /* the context-less message slot */
        int ok = CASES_NOCTX[i].call();
        th_check(ok, "%s: did not fail cleanly", CASES_NOCTX[i].name);
        const char *after = wgml_last_error(NULL);
        if (ok) printf("  ok %-22s %s\n", CASES_NOCTX[i].name, strcmp(before, after) ? after : "(no message)");
    }
    printf("API with a valid graph and NULL or invalid arguments (%d cases):\n", n1);
    for (int i = 0; i < n1; i++) {
        wgml_clear_error(T.ctx);
        int ok = CASES_CTX[i].call();
        const char *msg = wgml_last_error(T.ctx);
        th_check(ok && msg[0] && wgml_last_status(T.ctx) != WGML_OK, "%s: failed %d, status %s, message '%s'",
                 CASES_CTX[i].name, ok, wgml_status_name(wgml_last_status(T.ctx)), msg);
        if (ok) printf("  ok %-22s %s: %s\n", CASES_CTX[i].name, wgml_status_name(wgml_last_status(T.ctx)), msg);
    }
    wgml_clear_error(T.ctx);
    still_usable(T.ctx, "after the API argument errors");
    wgml_tensor_free(X);
}

int main(int argc, char **argv) {
    th_init_args("test_faults", argc, argv);
    double t0 = now();
    test_api_args();
    printf("api: %.2f s\n", now() - t0);
    t0 = now();
    test_limits();
    printf("limits: %.2f s\n", now() - t0);
    t0 = now();
    test_memory_limit();
    printf("memory limit: %.2f s\n", now() - t0);
    t0 = now();
    test_upload_flush();
    printf("upload flush: %.2f s\n", now() - t0);
    t0 = now();
    test_device_lost();
    printf("device lost: %.2f s\n", now() - t0);
    t0 = now();
    test_timeout();
    printf("timeout: %.2f s\n", now() - t0);
    return th_done();
}
