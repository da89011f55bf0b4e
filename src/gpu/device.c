#define _POSIX_C_SOURCE 200809L
/* The device: instance, adapter choice, device creation with the adapter's limits, the
 * capability record, device-lost and uncaptured-error callbacks, error scopes, the last
 * error, timeouts and waits, device info. */
#include "gpu/gpu_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ errors */

static char create_error[WGML_ERROR_MAX];

const char *wgml_create_error(void) { return create_error; }

wgml_status wgml_set_error(wgml_ctx *ctx, wgml_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (ctx) {
        vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
        ctx->status = s;
    } else {
        vsnprintf(create_error, sizeof create_error, fmt, ap);
    }
    va_end(ap);
    return s;
}

const char *wgml_last_error(const wgml_ctx *ctx) { return ctx ? ctx->error : create_error; }
wgml_status wgml_last_status(const wgml_ctx *ctx) { return ctx ? ctx->status : WGML_ERR_ARG; }
void wgml_clear_error(wgml_ctx *ctx) {
    if (!ctx) return;
    ctx->error[0] = 0;
    ctx->status = ctx->lost ? WGML_ERR_DEVICE_LOST : WGML_OK;
}

const char *wgml_status_name(wgml_status s) {
    static const char *names[] = {"ok", "bad argument", "shape mismatch", "wrong dtype",
                                  "over a device limit", "out of device memory", "GPU error",
                                  "device lost", "timeout", "no adapter", "wrong wgpu-native version",
                                  "I/O error", "malformed file", "unsupported", "wrong state"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown status";
}

static void on_device_lost(WGPUDevice const *device, WGPUDeviceLostReason reason, WGPUStringView msg,
                           void *u1, void *u2) {
    (void)device; (void)u2;
    wgml_ctx *ctx = u1;
    if (!ctx || reason == WGPUDeviceLostReason_CallbackCancelled) return;
    ctx->lost = true;
    sv_copy(ctx->lost_msg, sizeof ctx->lost_msg, msg);
}

static void on_uncaptured(WGPUDevice const *device, WGPUErrorType type, WGPUStringView msg, void *u1, void *u2) {
    (void)device; (void)u2;
    wgml_ctx *ctx = u1;
    if (!ctx || ctx->pending_error) return; /* keep the first */
    ctx->pending_error = true;
    ctx->pending_type = type;
    sv_copy(ctx->pending_msg, sizeof ctx->pending_msg, msg);
}

wgml_status gpu_check_alive(wgml_ctx *ctx) {
    if (ctx->lost)
        return wgml_set_error(ctx, WGML_ERR_DEVICE_LOST, "the GPU device was lost: %s", ctx->lost_msg);
    return WGML_OK;
}

/* Turns an error reported by a callback since the last check into the context's error. */
wgml_status gpu_take_pending(wgml_ctx *ctx, const char *during) {
    wgml_status s = gpu_check_alive(ctx);
    if (s) return s;
    if (!ctx->pending_error) return WGML_OK;
    ctx->pending_error = false;
    s = ctx->pending_type == WGPUErrorType_OutOfMemory ? WGML_ERR_OOM : WGML_ERR_GPU;
    return wgml_set_error(ctx, s, "%s: %s", during, ctx->pending_msg);
}

/* Error scopes: push before creating something, pop after to learn whether it failed.
 * (wgpu-native panics on the Internal filter; internal errors reach the uncaptured callback.)
 * The pops answer through callbacks, which may come late: in the browser after a round trip to
 * a GPU process that can be busy for seconds (compiling a kernel, taking a model's weights). So
 * the answers land in a record on the heap, and a waiter that gives up (device lost, timeout)
 * leaves it to the last answer to free: no answer is ever written into memory that is no longer
 * the waiter's (in wasm, a late answer into a stack frame overwrites the frames of the calls
 * after it). The wait is bounded by the context's timeout, not by a count of polls. */
typedef struct scope_wait {
    int left;       /* answers still to come */
    bool abandoned; /* the waiter has gone: the last answer frees the record */
    bool done;      /* every answer came */
    struct {
        WGPUErrorType type;
        char msg[512];
    } r[2];
} scope_wait;

static void on_pop(WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView msg, void *u1, void *u2) {
    scope_wait *w = u1;
    int i = (int)(intptr_t)u2;
    w->r[i].type = status == WGPUPopErrorScopeStatus_Success ? type : WGPUErrorType_NoError;
    sv_copy(w->r[i].msg, sizeof w->r[i].msg, msg);
    if (--w->left > 0) return;
    if (w->abandoned) free(w);
    else w->done = true;
}

void gpu_scope_push(wgml_ctx *ctx) {
    wgpuDevicePushErrorScope(ctx->device, WGPUErrorFilter_OutOfMemory);
    wgpuDevicePushErrorScope(ctx->device, WGPUErrorFilter_Validation);
}

static void scope_pop_into(wgml_ctx *ctx, scope_wait *w) {
    for (int i = 0; i < 2; i++) {
        WGPUPopErrorScopeCallbackInfo cb = WGPU_POP_ERROR_SCOPE_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_AllowProcessEvents;
        cb.callback = on_pop;
        cb.userdata1 = w;
        cb.userdata2 = (void *)(intptr_t)i;
        wgpuDevicePopErrorScope(ctx->device, cb);
    }
}

wgml_status gpu_scope_pop(wgml_ctx *ctx, const char *during) {
    scope_wait *w = calloc(1, sizeof *w);
    if (!w) { /* the scopes are popped all the same; their answers go where nothing reads them */
        static scope_wait sink = {.left = 1 << 30};
        scope_pop_into(ctx, &sink);
        return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", during);
    }
    w->left = 2;
    scope_pop_into(ctx, w);
    wgml_status s = w->done ? WGML_OK : gpu_wait_flag(ctx, &w->done, during);
    if (s) {
        if (w->done) free(w);
        else w->abandoned = true;
        return s;
    }
    for (int i = 0; i < 2 && !s; i++) {
        if (w->r[i].type != WGPUErrorType_NoError)
            s = wgml_set_error(ctx, w->r[i].type == WGPUErrorType_OutOfMemory ? WGML_ERR_OOM : WGML_ERR_GPU, "%s: %s",
                               during, w->r[i].msg);
    }
    free(w);
    return s ? s : gpu_take_pending(ctx, during);
}

/* ------------------------------------------------------------------ time and waiting */

uint64_t gpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread (recording cost, as opposed to wall time) */
uint64_t gpu_thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void gpu_nap_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* The wait for the queue's work (flag NULL below): the answer of wgpuQueueOnSubmittedWorkDone
 * goes into a heap record, as the scopes' answers do (above), so a waiter that gives up leaves
 * the record to the answer to free. Not wgpuDevicePoll's "queue empty": with lavapipe it
 * answered empty while submitted work had not run yet (the kernels it compiled at their first
 * dispatch did so after the wait; bench/NOTES.md, 2026-12-05). */
static void on_idle(WGPUQueueWorkDoneStatus status, WGPUStringView msg, void *u1, void *u2) {
    (void)status; (void)msg; (void)u2;
    idle_wait *w = u1;
    if (w->abandoned) free(w);
    else w->done = true;
}

idle_wait *gpu_idle_watch(WGPUQueue queue) {
    idle_wait *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    WGPUQueueWorkDoneCallbackInfo cb = WGPU_QUEUE_WORK_DONE_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = on_idle;
    cb.userdata1 = w;
    wgpuQueueOnSubmittedWorkDone(queue, cb);
    return w;
}

void gpu_idle_release(idle_wait *w) {
    if (w && w->done) free(w);
    else if (w) w->abandoned = true;
}

/* Polls until *flag is set (a callback sets it) or, with flag NULL, until the work submitted
 * before the call has finished, within the timeout. */
wgml_status gpu_wait_flag(wgml_ctx *ctx, volatile bool *flag, const char *what) {
    if (ctx->lost) return gpu_check_alive(ctx);
    idle_wait *w = NULL;
    if (!flag) {
        if (!(w = gpu_idle_watch(ctx->queue))) return wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", what);
        flag = &w->done;
    }
    uint64_t start = gpu_now_ns();
    long nap = 1;
    wgml_status s = WGML_OK;
    for (;;) {
        native_poll(ctx->device, false);
        if (*flag) break;
        if (ctx->lost) {
            s = gpu_check_alive(ctx);
            break;
        }
        double waited = (double)(gpu_now_ns() - start) * 1e-9;
        if (waited > ctx->timeout_s) {
            s = wgml_set_error(ctx, WGML_ERR_TIMEOUT, "%s: the GPU did not finish within %.3g s", what, ctx->timeout_s);
            break;
        }
        gpu_nap_us(nap);
        if (nap < 500) nap *= 2;
    }
    gpu_idle_release(w);
    return s;
}

wgml_status gpu_wait_idle(wgml_ctx *ctx) {
    wgml_status s = gpu_wait_flag(ctx, NULL, "waiting for the GPU");
    return s ? s : gpu_take_pending(ctx, "GPU work");
}

/* ------------------------------------------------------------------ device */

/* The requests for an adapter and a device answer through callbacks, into records on the heap
 * for the reason the error scopes' answers are (above): a waiter that gives up leaves the record
 * to the answer, which frees it and releases what it brought. */
typedef struct request_wait {
    bool done, abandoned;
    WGPUAdapter adapter;
    WGPUDevice device;
    char msg[512];
} request_wait;

/* An answer's first step: true when its waiter still waits (the answer goes into w); false when
 * the waiter gave up, and then w is freed here and the caller releases what came. */
static bool request_waited_for(request_wait *w) {
    if (!w->abandoned) return true;
    free(w);
    return false;
}

static void on_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView msg, void *u1, void *u2) {
    (void)msg; (void)u2;
    WGPUAdapter got = status == WGPURequestAdapterStatus_Success ? adapter : NULL;
    request_wait *w = u1;
    if (!request_waited_for(w)) {
        if (got) wgpuAdapterRelease(got);
        return;
    }
    w->adapter = got;
    w->done = true;
}

static void on_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView msg, void *u1, void *u2) {
    (void)u2;
    WGPUDevice got = status == WGPURequestDeviceStatus_Success ? device : NULL;
    request_wait *w = u1;
    if (!request_waited_for(w)) {
        if (got) wgpuDeviceRelease(got);
        return;
    }
    w->device = got;
    if (!got) sv_copy(w->msg, sizeof w->msg, msg);
    w->done = true;
}

/* Runs the instance's events until w is answered or timeout_s passes; true when answered. On a
 * timeout the record is the callback's to free. */
static bool request_answered(WGPUInstance instance, double timeout_s, request_wait *w) {
    uint64_t start = gpu_now_ns();
    while (!w->done && (double)(gpu_now_ns() - start) * 1e-9 < timeout_s) {
        wgpuInstanceProcessEvents(instance);
        if (!w->done) gpu_nap_us(100);
    }
    if (!w->done) w->abandoned = true;
    return w->done;
}

wgml_status gpu_request_device(WGPUInstance instance, WGPUAdapter adapter, const WGPUDeviceDescriptor *d,
                               double timeout_s, WGPUDevice *out, char *why, size_t why_n) {
    *out = NULL;
    request_wait *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(why, why_n, "out of host memory");
        return WGML_ERR_OOM;
    }
    WGPURequestDeviceCallbackInfo cb = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowSpontaneous;
    cb.callback = on_device;
    cb.userdata1 = w;
    wgpuAdapterRequestDevice(adapter, d, cb);
    if (!request_answered(instance, timeout_s, w)) {
        snprintf(why, why_n, "the adapter did not answer the request for a device within %.3g s", timeout_s);
        return WGML_ERR_TIMEOUT;
    }
    *out = w->device;
    if (!w->device) snprintf(why, why_n, "the adapter refused a device: %s", w->msg);
    free(w);
    return *out ? WGML_OK : WGML_ERR_GPU;
}

static int adapter_rank(WGPUAdapterType t) {
    switch (t) {
    case WGPUAdapterType_DiscreteGPU: return 0;
    case WGPUAdapterType_IntegratedGPU: return 1;
    case WGPUAdapterType_Unknown: return 2;
    case WGPUAdapterType_CPU: return 3;
    default: return 4;
    }
}

static bool contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && (p[i] | 32) == (needle[i] | 32)) i++;
        if (i == n) return true;
    }
    return n == 0;
}

static WGPUAdapter choose_adapter(wgml_ctx *ctx, const char *want, char *names, size_t names_n) {
    WGPUAdapter list[32];
    size_t n = native_enumerate_adapters(ctx->instance, list, 32);
    WGPUAdapter best = NULL;
    int best_rank = 99;
    names[0] = 0;
    for (size_t i = 0; i < n; i++) {
        WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
        char name[256] = "";
        if (wgpuAdapterGetInfo(list[i], &info) == WGPUStatus_Success) {
            sv_copy(name, sizeof name, info.device);
            int rank = adapter_rank(info.adapterType);
            wgpuAdapterInfoFreeMembers(info);
            size_t used = strlen(names);
            snprintf(names + used, names_n - used, "%s'%s'", used ? ", " : "", name);
            bool ok = want ? contains_ci(name, want) : true;
            if (ok && rank < best_rank) {
                if (best) wgpuAdapterRelease(best);
                best = list[i];
                best_rank = rank;
                continue;
            }
        }
        wgpuAdapterRelease(list[i]);
    }
    if (!best && !want && n == 0) {
        /* fall back to the standard request when enumeration finds nothing */
        request_wait *w = calloc(1, sizeof *w);
        if (!w) return NULL;
        WGPURequestAdapterOptions opt = WGPU_REQUEST_ADAPTER_OPTIONS_INIT;
        opt.powerPreference = WGPUPowerPreference_HighPerformance;
        WGPURequestAdapterCallbackInfo cb = WGPU_REQUEST_ADAPTER_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_AllowSpontaneous;
        cb.callback = on_adapter;
        cb.userdata1 = w;
        wgpuInstanceRequestAdapter(ctx->instance, &opt, cb);
        if (request_answered(ctx->instance, ctx->timeout_s, w)) {
            best = w->adapter;
            free(w);
        }
    }
    return best;
}

static bool has_feature(WGPUAdapter a, WGPUFeatureName f) { return wgpuAdapterHasFeature(a, f); }

static wgml_status create_device(wgml_ctx *ctx) {
    WGPUFeatureName feats[8];
    size_t nf = 0;
    ctx->caps.timestamps = has_feature(ctx->adapter, WGPUFeatureName_TimestampQuery);
    ctx->caps.f16 = has_feature(ctx->adapter, WGPUFeatureName_ShaderF16);
    ctx->caps.subgroups = has_feature(ctx->adapter, WGPUFeatureName_Subgroups);
    bool native_subgroups = !ctx->caps.subgroups && has_feature(ctx->adapter, native_feature_subgroups());
    ctx->caps.f32_atomics = has_feature(ctx->adapter, native_feature_f32_atomics());
    ctx->caps.dot4i8 = native_wgsl_dot4i8(ctx->instance);
    if (ctx->caps.timestamps) feats[nf++] = WGPUFeatureName_TimestampQuery;
    if (ctx->caps.f16) feats[nf++] = WGPUFeatureName_ShaderF16;
    if (ctx->caps.subgroups) feats[nf++] = WGPUFeatureName_Subgroups;
    if (native_subgroups) {
        feats[nf++] = native_feature_subgroups();
        ctx->caps.subgroups = true;
    }
    if (ctx->caps.f32_atomics) feats[nf++] = native_feature_f32_atomics();

    WGPULimits lim = WGPU_LIMITS_INIT;
    if (wgpuAdapterGetLimits(ctx->adapter, &lim) != WGPUStatus_Success)
        return wgml_set_error(NULL, WGML_ERR_GPU, "could not read the adapter's limits");
    lim.nextInChain = NULL;

    WGPUDeviceDescriptor dd = WGPU_DEVICE_DESCRIPTOR_INIT;
    dd.label = sv("wgml");
    dd.requiredFeatureCount = nf;
    dd.requiredFeatures = feats;
    dd.requiredLimits = &lim; /* every limit as the adapter offers it */
    dd.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
    dd.deviceLostCallbackInfo.callback = on_device_lost;
    dd.deviceLostCallbackInfo.userdata1 = ctx;
    dd.uncapturedErrorCallbackInfo.callback = on_uncaptured;
    dd.uncapturedErrorCallbackInfo.userdata1 = ctx;
    char why[640];
    wgml_status refused = gpu_request_device(ctx->instance, ctx->adapter, &dd, ctx->timeout_s, &ctx->device, why, sizeof why);
    if (refused) return wgml_set_error(NULL, refused, "%s", why);
    ctx->queue = wgpuDeviceGetQueue(ctx->device);
    ctx->limits = (WGPULimits)WGPU_LIMITS_INIT;
    wgpuDeviceGetLimits(ctx->device, &ctx->limits);
    const WGPULimits *l = &ctx->limits;
    gpu_caps *c = &ctx->caps;
    c->max_storage_binding = l->maxStorageBufferBindingSize;
    c->max_buffer_size = l->maxBufferSize;
    c->max_workgroup_storage = l->maxComputeWorkgroupStorageSize;
    c->max_invocations = l->maxComputeInvocationsPerWorkgroup;
    c->max_wg_x = l->maxComputeWorkgroupSizeX;
    c->max_wg_per_dim = l->maxComputeWorkgroupsPerDimension;
    c->storage_align = l->minStorageBufferOffsetAlignment;
    c->uniform_align = l->minUniformBufferOffsetAlignment;
    c->max_storage_per_stage = l->maxStorageBuffersPerShaderStage;
    c->subgroup_min = ctx->info.subgroupMinSize;
    c->subgroup_max = ctx->info.subgroupMaxSize;
    c->is_cpu = ctx->info.adapterType == WGPUAdapterType_CPU;
    return WGML_OK;
}

/* A byte count from the environment: a number with an optional K, M or G suffix (binary
 * units); 0 when unset, not positive or out of range. */
static uint64_t env_bytes(const char *name) {
    const char *e = getenv(name);
    if (!e || !*e) return 0;
    char *end;
    double v = strtod(e, &end);
    double unit = (*end == 'k' || *end == 'K') ? 1024.0 : (*end == 'm' || *end == 'M') ? 1048576.0
                  : (*end == 'g' || *end == 'G') ? 1073741824.0 : 1.0;
    return v > 0 && v * unit < 1.8e19 ? (uint64_t)(v * unit) : (uint64_t)64 << 20;
}

wgml_status gpu_device_create(const wgml_ctx_options *options, wgml_ctx **out) {
    *out = NULL;
    wgml_ctx_options opt = {0};
    if (options) opt = *options;
    const char *version_error = native_version_error();
    if (version_error) return wgml_set_error(NULL, WGML_ERR_VERSION, "%s", version_error);
    wgml_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return wgml_set_error(NULL, WGML_ERR_OOM, "out of host memory");
    const char *env_timeout = getenv("WGML_TIMEOUT_S");
    ctx->timeout_s = opt.timeout_s > 0 ? opt.timeout_s : env_timeout ? atof(env_timeout) : 600.0;
    if (ctx->timeout_s <= 0) ctx->timeout_s = 600.0;
    ctx->poison = opt.poison_outputs != 0;
    const char *env_checks = getenv("WGML_SHADER_CHECKS");
    ctx->checked_shaders = opt.checked_shaders || (env_checks && atoi(env_checks) != 0);
    ctx->mem_limit = env_bytes("WGML_DEVICE_MEMORY_LIMIT");
    ctx->mem_trace = env_bytes("WGML_MEMORY_TRACE");
    const char *env_flush = getenv("WGML_UPLOAD_FLUSH"); /* 0: never (for measuring what it saves) */
    ctx->upload_flush = env_flush && *env_flush ? env_bytes("WGML_UPLOAD_FLUSH") : (uint64_t)64 << 20;
    ctx->instance = native_create_instance();
    if (!ctx->instance) {
        free(ctx);
        return wgml_set_error(NULL, WGML_ERR_NO_ADAPTER, "could not create a WebGPU instance");
    }
    const char *want = opt.adapter ? opt.adapter : getenv("WGML_ADAPTER");
    if (want && !*want) want = NULL;
    char names[1024];
    ctx->adapter = choose_adapter(ctx, want, names, sizeof names);
    if (!ctx->adapter) {
        wgml_status s = want ? wgml_set_error(NULL, WGML_ERR_NO_ADAPTER, "no adapter name contains '%s' (found: %s)",
                                              want, names[0] ? names : "none")
                             : wgml_set_error(NULL, WGML_ERR_NO_ADAPTER,
                                              "no WebGPU adapter found (is a Vulkan driver installed? "
                                              "lavapipe: mesa-vulkan-drivers)");
        wgpuInstanceRelease(ctx->instance);
        free(ctx);
        return s;
    }
    ctx->info = (WGPUAdapterInfo)WGPU_ADAPTER_INFO_INIT;
    wgpuAdapterGetInfo(ctx->adapter, &ctx->info);
    wgml_status s = create_device(ctx);
    if (s) {
        wgpuAdapterInfoFreeMembers(ctx->info);
        wgpuAdapterRelease(ctx->adapter);
        wgpuInstanceRelease(ctx->instance);
        free(ctx);
        return s;
    }
    if (opt.verbose) wgml_device_print(ctx, stderr);
    gpu_ahead_start(ctx);
    *out = ctx;
    return WGML_OK;
}

void gpu_device_destroy(wgml_ctx *ctx) {
    if (!ctx) return;
    gpu_ahead_stop(ctx);
    if (!ctx->lost) native_poll(ctx->device, true);
    gpu_pool_release(ctx);
    gpu_pipelines_release(ctx);
    gpu_timestamps_release(ctx);
    wgpuQueueRelease(ctx->queue);
    wgpuDeviceRelease(ctx->device);
    wgpuAdapterInfoFreeMembers(ctx->info);
    wgpuAdapterRelease(ctx->adapter);
    wgpuInstanceRelease(ctx->instance);
    free(ctx);
}

/* Test hook: destroys the device as a driver reset would. */
void gpu_debug_destroy_device(wgml_ctx *ctx) {
    wgpuDeviceDestroy(ctx->device);
    native_poll(ctx->device, false);
    ctx->lost = true;
    if (!ctx->lost_msg[0]) snprintf(ctx->lost_msg, sizeof ctx->lost_msg, "device destroyed");
}

const gpu_caps *gpu_get_caps(const wgml_ctx *ctx) { return &ctx->caps; }
double gpu_timeout(const wgml_ctx *ctx) { return ctx->timeout_s; }
bool gpu_poison_outputs(const wgml_ctx *ctx) { return ctx->poison; }
void *gpu_ctx_layer_state(const wgml_ctx *ctx) { return ctx->layer_state; }
void gpu_ctx_set_layer_state(wgml_ctx *ctx, void *state) { ctx->layer_state = state; }
uint64_t wgml_submit_count(const wgml_ctx *ctx) { return ctx ? ctx->submits : 0; }

void wgml_record_stats(const wgml_ctx *ctx, uint64_t *cpu_ns, uint64_t *dispatches) {
    if (cpu_ns) *cpu_ns = ctx ? ctx->record_ns : (uint64_t)64 << 20;
    if (dispatches) *dispatches = ctx ? ctx->recorded : (uint64_t)64 << 20;
}
uint64_t wgml_read_bytes(const wgml_ctx *ctx) { return ctx ? ctx->read_bytes : 0; }

void wgml_memory_get(const wgml_ctx *ctx, wgml_memory_stats *out) {
    *out = (wgml_memory_stats){0};
    if (!ctx) return;
    out->in_use = ctx->mem_used;
    out->peak = ctx->mem_peak;
    for (const gpu_buffer *b = ctx->free_buffers; b; b = b->next_free) out->pool_idle += b->size;
}

static const char *backend_name(WGPUBackendType b) {
    switch (b) {
    case WGPUBackendType_Vulkan: return "Vulkan";
    case WGPUBackendType_Metal: return "Metal";
    case WGPUBackendType_D3D12: return "D3D12";
    case WGPUBackendType_D3D11: return "D3D11";
    case WGPUBackendType_OpenGL: return "OpenGL";
    case WGPUBackendType_OpenGLES: return "OpenGLES";
    case WGPUBackendType_WebGPU: return "WebGPU";
    default: return "unknown";
    }
}

static const char *type_name(WGPUAdapterType t) {
    switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "unknown";
    }
}

void wgml_device_get_info(const wgml_ctx *ctx, wgml_device_info *d) {
    memset(d, 0, sizeof *d);
    if (!ctx) return;
    sv_copy(d->adapter, sizeof d->adapter, ctx->info.device);
    sv_copy(d->vendor, sizeof d->vendor, ctx->info.vendor);
    sv_copy(d->architecture, sizeof d->architecture, ctx->info.architecture);
    sv_copy(d->driver, sizeof d->driver, ctx->info.description);
    snprintf(d->backend, sizeof d->backend, "%s", backend_name(ctx->info.backendType));
    snprintf(d->type, sizeof d->type, "%s", type_name(ctx->info.adapterType));
    d->wgpu_version = native_version();
    const gpu_caps *c = &ctx->caps;
    d->max_storage_binding = c->max_storage_binding;
    d->max_buffer_size = c->max_buffer_size;
    d->max_workgroup_storage = c->max_workgroup_storage;
    d->max_invocations = c->max_invocations;
    d->max_workgroup_size_x = c->max_wg_x;
    d->max_workgroups_per_dim = c->max_wg_per_dim;
    d->max_storage_buffers_per_stage = c->max_storage_per_stage;
    d->min_storage_offset_align = c->storage_align;
    d->min_uniform_offset_align = c->uniform_align;
    d->has_f16 = c->f16;
    d->has_subgroups = c->subgroups;
    d->has_timestamps = c->timestamps;
    d->has_f32_atomics = c->f32_atomics;
    d->subgroup_min = c->subgroup_min;
    d->subgroup_max = c->subgroup_max;
}

void wgml_device_print(const wgml_ctx *ctx, void *file) {
    FILE *f = file ? file : stdout;
    wgml_device_info d;
    wgml_device_get_info(ctx, &d);
    fprintf(f, "adapter:     %s\n", d.adapter);
    fprintf(f, "type:        %s\n", d.type);
    fprintf(f, "backend:     %s\n", d.backend);
    fprintf(f, "vendor:      %s (architecture '%s')\n", d.vendor, d.architecture);
    fprintf(f, "driver:      %s\n", d.driver);
    if (d.wgpu_version)
        fprintf(f, "wgpu-native: %u.%u.%u.%u\n", d.wgpu_version >> 24, (d.wgpu_version >> 16) & 255,
                (d.wgpu_version >> 8) & 255, d.wgpu_version & 255);
    else
        fprintf(f, "webgpu:      %s\n", native_name());
    fprintf(f, "limits:\n");
    fprintf(f, "  max storage buffer binding   %llu bytes (%.1f MiB)\n", (unsigned long long)d.max_storage_binding,
            d.max_storage_binding / 1048576.0);
    fprintf(f, "  max buffer size              %llu bytes (%.1f MiB)\n", (unsigned long long)d.max_buffer_size,
            d.max_buffer_size / 1048576.0);
    fprintf(f, "  workgroup memory             %u bytes\n", d.max_workgroup_storage);
    fprintf(f, "  invocations per workgroup    %u (x up to %u)\n", d.max_invocations, d.max_workgroup_size_x);
    fprintf(f, "  workgroups per dimension     %u\n", d.max_workgroups_per_dim);
    fprintf(f, "  storage buffers per stage    %u\n", d.max_storage_buffers_per_stage);
    fprintf(f, "  offset alignment             storage %u, uniform %u\n", d.min_storage_offset_align,
            d.min_uniform_offset_align);
    fprintf(f, "shaders:     %s\n", ctx->checked_shaders ? "checked (naga bounds checks and loop bounding on)"
                                                        : "trusted (runtime checks off; WGML_SHADER_CHECKS=1 turns them on)");
    char sg[48] = "";
    if (d.has_subgroups)
        snprintf(sg, sizeof sg, d.subgroup_max ? " (size %u..%u)" : " (size not reported)", d.subgroup_min, d.subgroup_max);
    fprintf(f, "features:    timestamps %s, shader-f16 %s, subgroups %s%s, f32 atomics %s, int8 dot product %s\n",
            d.has_timestamps ? "yes" : "no", d.has_f16 ? "yes" : "no", d.has_subgroups ? "yes" : "no", sg,
            d.has_f32_atomics ? "yes" : "no", ctx->caps.dot4i8 ? "yes" : "no");
}
