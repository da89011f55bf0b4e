/* Compiling ahead on CPU adapters: a second device, on a thread of its own, gives the driver
 * the kernels of a built graph before the graph's first run needs them.
 *
 * Why: lavapipe compiles a kernel at its first dispatch, in its queue's one thread, so a cold
 * run compiles its kernels one after another on one core while the machine's other cores wait
 * (the README example: 29 s of its 73 s cold on the 2-core machine; bench/NOTES.md,
 * 2026-12-05, sixth session). The driver keeps what it compiles in its shader cache on disk,
 * and a second device's compile lands there too: so this thread makes each kernel a graph
 * records on its own device and dispatches it with no workgroups (which compiles it and runs
 * nothing), taking the most recent first. The graph's first run compiles in recording order
 * from the front and finds the kernels the thread did in the cache; the two meet in the middle.
 * Nothing the thread does reaches the caller: its device, buffers and errors are its own, and a
 * kernel it fails on is simply compiled by the run as before. Where the driver compiles at
 * pipeline creation, or keeps no disk cache, the thread costs one CPU core's idle time and
 * changes nothing. It compiles on idle cores only (ahead_lower_priority).
 *
 * On only for CPU adapters of native builds, unless $WGML_COMPILE_AHEAD=0; =1 turns it on for
 * any adapter (to measure). The browser build has no threads: there these are no-ops. */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* SCHED_IDLE (Linux) */
#include "gpu/gpu_internal.h"

#if defined(__wasm__)
void gpu_ahead_start(wgml_ctx *ctx) { (void)ctx; }
void gpu_ahead_push(wgml_ctx *ctx, const void *id, const char *label, const char *code, int n_ro, int n_rw,
                    bool has_uniform, bool all_writable) {
    (void)ctx, (void)id, (void)label, (void)code, (void)n_ro, (void)n_rw, (void)has_uniform, (void)all_writable;
}
void gpu_ahead_touch(wgml_ctx *ctx, const void *id) { (void)ctx, (void)id; }
bool gpu_ahead_stats(wgml_ctx *ctx, double wait_s, uint64_t *given, uint64_t *compiled) {
    (void)ctx, (void)wait_s;
    if (given) *given = 0;
    if (compiled) *compiled = 0;
    return false;
}
void gpu_ahead_stop(wgml_ctx *ctx) { (void)ctx; }
#else

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define AHEAD_BINDING_BYTES 4096 /* every binding's buffer: above any kernel's minimum size */

typedef struct ahead_job {
    const void *id; /* the context's pipeline (compared, never read) */
    char *label, *code;
    int n_ro, n_rw, nb;
    bool all_writable;
    struct ahead_job *next;
} ahead_job;

struct gpu_ahead {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ahead_job *stack; /* most recent first */
    bool started, failed, stop, busy;
    uint64_t given, compiled; /* kernels pushed; compiled by the thread */
    /* what the thread needs to make its device like the context's */
    char adapter_name[256];
    WGPUBackendType backend;
    WGPUFeatureName features[32];
    size_t n_features;
    bool checked;
    /* the thread's own (created and released on it) */
    WGPUInstance instance;
    WGPUDevice device;
    WGPUQueue queue;
    WGPUBuffer buffers[16];
};

static void ignore_error(WGPUDevice const *d, WGPUErrorType type, WGPUStringView msg, void *u1, void *u2) {
    (void)d, (void)type, (void)msg, (void)u1, (void)u2;
}

/* The thread's device on the adapter of the same name and backend as the context's, with the
 * same features; false when there is none. */
static bool ahead_open(struct gpu_ahead *a) {
    if (!(a->instance = native_create_instance())) return false;
    WGPUAdapter list[32], adapter = NULL;
    size_t n = native_enumerate_adapters(a->instance, list, 32);
    for (size_t i = 0; i < n; i++) {
        WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
        char name[256] = "";
        if (!adapter && wgpuAdapterGetInfo(list[i], &info) == WGPUStatus_Success) {
            sv_copy(name, sizeof name, info.device);
            if (!strcmp(name, a->adapter_name) && info.backendType == a->backend) adapter = list[i];
            wgpuAdapterInfoFreeMembers(info);
        }
        if (list[i] != adapter) wgpuAdapterRelease(list[i]);
    }
    if (!adapter) return false;
    WGPULimits lim = WGPU_LIMITS_INIT;
    bool have_limits = wgpuAdapterGetLimits(adapter, &lim) == WGPUStatus_Success;
    lim.nextInChain = NULL;
    WGPUDeviceDescriptor dd = WGPU_DEVICE_DESCRIPTOR_INIT;
    dd.label = sv("wgml compile-ahead");
    dd.requiredFeatureCount = a->n_features;
    dd.requiredFeatures = a->features;
    dd.requiredLimits = have_limits ? &lim : NULL;
    dd.uncapturedErrorCallbackInfo.callback = ignore_error;
    char why[640];
    wgml_status s = gpu_request_device(a->instance, adapter, &dd, 10.0, &a->device, why, sizeof why);
    wgpuAdapterRelease(adapter);
    if (s) return false;
    a->queue = wgpuDeviceGetQueue(a->device);
    WGPUBufferDescriptor bd = WGPU_BUFFER_DESCRIPTOR_INIT;
    bd.size = AHEAD_BINDING_BYTES;
    bd.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_Uniform;
    for (int i = 0; i < 16; i++) a->buffers[i] = wgpuDeviceCreateBuffer(a->device, &bd);
    return true;
}

static void ahead_close(struct gpu_ahead *a) {
    for (int i = 0; i < 16; i++)
        if (a->buffers[i]) wgpuBufferRelease(a->buffers[i]);
    if (a->queue) wgpuQueueRelease(a->queue);
    if (a->device) wgpuDeviceRelease(a->device);
    if (a->instance) wgpuInstanceRelease(a->instance);
}

/* Dispatches pipe with no workgroups (bound to the thread's scratch buffers) and waits for the
 * queue: the driver compiles the kernel there (and keeps it in its cache). */
static void ahead_dispatch(struct gpu_ahead *a, WGPUComputePipeline pipe, WGPUBindGroupLayout bgl, int nb) {
    WGPUBindGroupEntry be[16];
    for (int i = 0; i < nb; i++) {
        WGPUBindGroupEntry x = WGPU_BIND_GROUP_ENTRY_INIT;
        x.binding = (uint32_t)i;
        x.buffer = a->buffers[i];
        x.size = AHEAD_BINDING_BYTES;
        be[i] = x;
    }
    WGPUBindGroupDescriptor bd = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
    bd.layout = bgl;
    bd.entryCount = (size_t)nb;
    bd.entries = be;
    WGPUBindGroup bg = wgpuDeviceCreateBindGroup(a->device, &bd);
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(a->device, NULL);
    WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(enc, NULL);
    wgpuComputePassEncoderSetPipeline(pass, pipe);
    wgpuComputePassEncoderSetBindGroup(pass, 0, bg, 0, NULL);
    wgpuComputePassEncoderDispatchWorkgroups(pass, 0, 0, 0);
    wgpuComputePassEncoderEnd(pass);
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
    wgpuQueueSubmit(a->queue, 1, &cmd);
    /* the queue's work-done answer (device.c): the next kernel is taken once this one is
     * compiled, so the newest goes next; 120 s at most */
    idle_wait *w = gpu_idle_watch(a->queue);
    for (int i = 0; w && !w->done && i < 120000; i++) {
        native_poll(a->device, false);
        if (!w->done) gpu_nap_us(1000);
    }
    gpu_idle_release(w);
    wgpuCommandBufferRelease(cmd);
    wgpuComputePassEncoderRelease(pass);
    wgpuCommandEncoderRelease(enc);
    wgpuBindGroupRelease(bg);
}

/* Job j's pipeline on the thread's device, dispatched. */
static void ahead_compile(struct gpu_ahead *a, const ahead_job *j) {
    WGPUBindGroupLayout bgl = NULL;
    WGPUComputePipeline pipe =
        gpu_make_pipeline(a->device, j->label, j->code, j->n_ro, j->n_rw, j->nb, j->all_writable, a->checked, &bgl);
    if (pipe && bgl) ahead_dispatch(a, pipe, bgl, j->nb);
    if (pipe) wgpuComputePipelineRelease(pipe);
    if (bgl) wgpuBindGroupLayoutRelease(bgl);
}

static void job_free(ahead_job *j) {
    free(j->label);
    free(j->code);
    free(j);
}

/* The thread and the threads its device starts (lavapipe's queue thread, which compiles) run
 * only on cores nothing else wants (Linux's SCHED_IDLE, which new threads inherit): a run's
 * arithmetic spreads over every core of a CPU adapter, and a compile beside it would slow it by
 * about what it saves later (bench/NOTES.md, 2026-12-05, sixth and seventh sessions). Elsewhere
 * it runs at the normal priority. */
static void ahead_lower_priority(void) {
#if defined(__linux__) && defined(SCHED_IDLE)
    struct sched_param sp = {.sched_priority = 0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp); /* refused: the normal priority */
#endif
}

static void *ahead_main(void *arg) {
    struct gpu_ahead *a = arg;
    ahead_lower_priority();
    bool ok = ahead_open(a);
    for (;;) {
        pthread_mutex_lock(&a->mu);
        a->busy = false;
        pthread_cond_broadcast(&a->cv);
        while (!a->stop && !a->stack) pthread_cond_wait(&a->cv, &a->mu);
        ahead_job *j = a->stop ? NULL : a->stack;
        if (j) a->stack = j->next;
        a->busy = j != NULL;
        pthread_mutex_unlock(&a->mu);
        if (!j) break;
        if (ok) {
            uint64_t t0 = gpu_now_ns();
            ahead_compile(a, j);
            if (gpu_log_pipelines() > 0)
                fprintf(stderr, "wgml: pipeline %s (%zu bytes of WGSL) compiled ahead in %.1f ms\n", j->label,
                        strlen(j->code), (double)(gpu_now_ns() - t0) * 1e-6);
            pthread_mutex_lock(&a->mu);
            a->compiled++;
            pthread_mutex_unlock(&a->mu);
        }
        job_free(j);
    }
    ahead_close(a);
    return NULL;
}

void gpu_ahead_start(wgml_ctx *ctx) {
    const char *env = getenv("WGML_COMPILE_AHEAD");
    bool on = env && *env ? atoi(env) != 0 : ctx->caps.is_cpu;
    if (!on) return;
    struct gpu_ahead *a = calloc(1, sizeof *a);
    if (!a) return;
    sv_copy(a->adapter_name, sizeof a->adapter_name, ctx->info.device);
    a->backend = ctx->info.backendType;
    a->checked = ctx->checked_shaders;
    WGPUSupportedFeatures f = WGPU_SUPPORTED_FEATURES_INIT;
    wgpuDeviceGetFeatures(ctx->device, &f);
    for (size_t i = 0; i < f.featureCount && a->n_features < 32; i++) a->features[a->n_features++] = f.features[i];
    wgpuSupportedFeaturesFreeMembers(f);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    ctx->ahead = a; /* the thread starts with the first kernel (a context that runs no built graph
                       never starts one) */
}

void gpu_ahead_push(wgml_ctx *ctx, const void *id, const char *label, const char *code, int n_ro, int n_rw,
                    bool has_uniform, bool all_writable) {
    struct gpu_ahead *a = ctx->ahead;
    if (!a) return;
    ahead_job *j = calloc(1, sizeof *j);
    if (!j) return;
    j->id = id;
    j->label = strdup(label);
    j->code = strdup(code);
    if (!j->label || !j->code) {
        job_free(j);
        return;
    }
    j->n_ro = n_ro;
    j->n_rw = n_rw;
    j->nb = n_ro + n_rw + (has_uniform ? 1 : 0);
    j->all_writable = all_writable;
    if (!a->started && !a->failed) {
        a->started = pthread_create(&a->thread, NULL, ahead_main, a) == 0;
        a->failed = !a->started;
    }
    if (!a->started) {
        job_free(j);
        return;
    }
    pthread_mutex_lock(&a->mu);
    a->given++;
    j->next = a->stack;
    a->stack = j;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* A graph built later records a kernel an earlier one made: its job, if not started, goes to
 * the top again (so the newest graph's kernels come first, in the reverse of its recording). */
void gpu_ahead_touch(wgml_ctx *ctx, const void *id) {
    struct gpu_ahead *a = ctx->ahead;
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    for (ahead_job **pj = &a->stack; *pj; pj = &(*pj)->next)
        if ((*pj)->id == id) {
            ahead_job *j = *pj;
            *pj = j->next;
            j->next = a->stack;
            a->stack = j;
            break;
        }
    pthread_mutex_unlock(&a->mu);
}

bool gpu_ahead_stats(wgml_ctx *ctx, double wait_s, uint64_t *given, uint64_t *compiled) {
    struct gpu_ahead *a = ctx->ahead;
    if (given) *given = 0;
    if (compiled) *compiled = 0;
    if (!a) return false;
    pthread_mutex_lock(&a->mu);
    uint64_t end = gpu_now_ns() + (uint64_t)(wait_s * 1e9);
    while (wait_s > 0 && a->started && (a->stack || a->busy) && gpu_now_ns() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10000000; /* re-check every 10 ms */
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    }
    if (given) *given = a->given;
    if (compiled) *compiled = a->compiled;
    pthread_mutex_unlock(&a->mu);
    return true;
}

/* Drops the jobs not started, waits for the one in progress, joins the thread. */
void gpu_ahead_stop(wgml_ctx *ctx) {
    struct gpu_ahead *a = ctx->ahead;
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->stop = true;
    while (a->stack) {
        ahead_job *j = a->stack;
        a->stack = j->next;
        job_free(j);
    }
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (a->started) pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
    ctx->ahead = NULL;
}
#endif
