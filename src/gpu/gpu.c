#define _POSIX_C_SOURCE 200809L
/* The WebGPU context: instance, adapter choice, device with the adapter's limits, capability
 * record, error and device-lost callbacks, buffers, pipelines, submits and readback. */
#include "gpu/gpu.h"
#include "gpu/native.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WGML_EXPECTED_WGPU_VERSION 0x1D000101u /* wgpu-native 29.0.1.1 from PyPI wgpu==0.32.0 */

struct gpu_buffer {
    WGPUBuffer buf;
    uint64_t size;
    gpu_buffer *next_free;
    wgml_ctx *owner; /* whose device-memory count this buffer is in */
};

struct gpu_pipeline {
    char *key;
    WGPUComputePipeline pipeline;
    WGPUBindGroupLayout layout;
    int n_bindings;
    gpu_pipeline *next;
};

struct gpu_bind_group {
    WGPUBindGroup bg;
};

struct wgml_ctx {
    WGPUInstance instance;
    WGPUAdapter adapter;
    WGPUDevice device;
    WGPUQueue queue;
    WGPUAdapterInfo info;
    WGPULimits limits;
    gpu_caps caps;
    double timeout_s;
    bool poison;
    bool checked_shaders;
    int matmul_variant;

    wgml_status status;
    char error[1024];
    bool lost;
    char lost_msg[512];
    /* errors reported by callbacks between checks */
    bool pending_error;
    WGPUErrorType pending_type;
    char pending_msg[512];

    gpu_buffer *free_buffers;
    gpu_pipeline *pipelines;
    WGPUQuerySet timestamps;
    WGPUBuffer ts_resolve, ts_read;
    uint64_t submits;
    uint64_t read_bytes; /* bytes copied back to the host by gpu_read */
    uint64_t record_ns, recorded; /* CPU time recording + submitting passes, dispatches recorded */
    /* device memory in buffers (pooled ones included) and the budget: WGML_DEVICE_MEMORY_LIMIT
     * bytes (0: none; the device's own out-of-memory errors still apply) */
    uint64_t mem_used, mem_limit;
    wgml_graph *eager;
};

/* ------------------------------------------------------------------ errors */

static char create_error[1024];

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

static void sv_copy(char *dst, size_t n, WGPUStringView v) {
    size_t len = v.data ? (v.length == WGPU_STRLEN ? strlen(v.data) : v.length) : 0;
    if (len >= n) len = n - 1;
    if (len) memcpy(dst, v.data, len);
    dst[len] = 0;
}

static WGPUStringView sv(const char *s) { return (WGPUStringView){s, s ? strlen(s) : 0}; }

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
static wgml_status take_pending(wgml_ctx *ctx, const char *during) {
    wgml_status s = gpu_check_alive(ctx);
    if (s) return s;
    if (!ctx->pending_error) return WGML_OK;
    ctx->pending_error = false;
    s = ctx->pending_type == WGPUErrorType_OutOfMemory ? WGML_ERR_OOM : WGML_ERR_GPU;
    return wgml_set_error(ctx, s, "%s: %s", during, ctx->pending_msg);
}

/* Error scopes: push before creating something, pop after to learn whether it failed.
 * (wgpu-native panics on the Internal filter; internal errors reach the uncaptured callback.) */
typedef struct scope_result {
    bool done;
    WGPUErrorType type;
    char msg[512];
} scope_result;

static void on_pop(WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView msg, void *u1, void *u2) {
    (void)u2;
    scope_result *r = u1;
    r->done = true;
    r->type = status == WGPUPopErrorScopeStatus_Success ? type : WGPUErrorType_NoError;
    sv_copy(r->msg, sizeof r->msg, msg);
}

static void scope_push(wgml_ctx *ctx) {
    wgpuDevicePushErrorScope(ctx->device, WGPUErrorFilter_OutOfMemory);
    wgpuDevicePushErrorScope(ctx->device, WGPUErrorFilter_Validation);
}

static wgml_status scope_pop(wgml_ctx *ctx, const char *during) {
    scope_result r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        WGPUPopErrorScopeCallbackInfo cb = WGPU_POP_ERROR_SCOPE_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_AllowProcessEvents;
        cb.callback = on_pop;
        cb.userdata1 = &r[i];
        wgpuDevicePopErrorScope(ctx->device, cb);
    }
    for (int spin = 0; spin < 1000 && !(r[0].done && r[1].done); spin++)
        native_poll(ctx->device, false);
    for (int i = 0; i < 2; i++) {
        if (r[i].done && r[i].type != WGPUErrorType_NoError) {
            wgml_status s = r[i].type == WGPUErrorType_OutOfMemory ? WGML_ERR_OOM : WGML_ERR_GPU;
            return wgml_set_error(ctx, s, "%s: %s", during, r[i].msg);
        }
    }
    return take_pending(ctx, during);
}

/* ------------------------------------------------------------------ time and waiting */

uint64_t gpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread (recording cost, as opposed to wall time) */
static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* Polls until *flag is set (a callback sets it) or the queue drains, within the timeout. */
static wgml_status wait_flag(wgml_ctx *ctx, volatile bool *flag, const char *what) {
    uint64_t start = gpu_now_ns();
    long nap = 1;
    for (;;) {
        bool empty = native_poll(ctx->device, false);
        if (ctx->lost) return gpu_check_alive(ctx);
        if (flag ? *flag : empty) return WGML_OK;
        double waited = (double)(gpu_now_ns() - start) * 1e-9;
        if (waited > ctx->timeout_s)
            return wgml_set_error(ctx, WGML_ERR_TIMEOUT, "%s: the GPU did not finish within %.3g s", what,
                                  ctx->timeout_s);
        nap_us(nap);
        if (nap < 500) nap *= 2;
    }
}

wgml_status gpu_wait_idle(wgml_ctx *ctx) {
    wgml_status s = wait_flag(ctx, NULL, "waiting for the GPU");
    return s ? s : take_pending(ctx, "GPU work");
}

/* ------------------------------------------------------------------ context */

static void on_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView msg, void *u1, void *u2) {
    (void)msg; (void)u2;
    if (status == WGPURequestAdapterStatus_Success) *(WGPUAdapter *)u1 = adapter;
}

static void on_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView msg, void *u1, void *u2) {
    if (status == WGPURequestDeviceStatus_Success) *(WGPUDevice *)u1 = device;
    else sv_copy(u2, 512, msg);
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
        WGPURequestAdapterOptions opt = WGPU_REQUEST_ADAPTER_OPTIONS_INIT;
        opt.powerPreference = WGPUPowerPreference_HighPerformance;
        WGPURequestAdapterCallbackInfo cb = WGPU_REQUEST_ADAPTER_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_AllowSpontaneous;
        cb.callback = on_adapter;
        cb.userdata1 = &best;
        wgpuInstanceRequestAdapter(ctx->instance, &opt, cb);
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
    char msg[512] = "";
    WGPURequestDeviceCallbackInfo cb = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowSpontaneous;
    cb.callback = on_device;
    cb.userdata1 = &ctx->device;
    cb.userdata2 = msg;
    wgpuAdapterRequestDevice(ctx->adapter, &dd, cb);
    for (int i = 0; i < 1000 && !ctx->device && !msg[0]; i++) {
        wgpuInstanceProcessEvents(ctx->instance);
        nap_us(100);
    }
    if (!ctx->device) return wgml_set_error(NULL, WGML_ERR_GPU, "the adapter refused a device: %s", msg);
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

wgml_status wgml_ctx_create(const wgml_ctx_options *options, wgml_ctx **out) {
    if (!out) return wgml_set_error(NULL, WGML_ERR_ARG, "wgml_ctx_create: out is NULL");
    *out = NULL;
    wgml_ctx_options opt = {0};
    if (options) opt = *options;
    uint32_t ver = native_version();
    if (ver != WGML_EXPECTED_WGPU_VERSION)
        return wgml_set_error(NULL, WGML_ERR_VERSION,
                              "wgpu-native version %u.%u.%u.%u found, expected 29.0.1.1 (PyPI wgpu==0.32.0); "
                              "run scripts/setup.sh",
                              ver >> 24, (ver >> 16) & 255, (ver >> 8) & 255, ver & 255);
    wgml_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return wgml_set_error(NULL, WGML_ERR_OOM, "out of host memory");
    const char *env_timeout = getenv("WGML_TIMEOUT_S");
    ctx->timeout_s = opt.timeout_s > 0 ? opt.timeout_s : env_timeout ? atof(env_timeout) : 600.0;
    if (ctx->timeout_s <= 0) ctx->timeout_s = 600.0;
    ctx->poison = opt.poison_outputs != 0;
    const char *env_checks = getenv("WGML_SHADER_CHECKS");
    ctx->checked_shaders = opt.checked_shaders || (env_checks && atoi(env_checks) != 0);
    ctx->matmul_variant = -1;
    const char *env_mem = getenv("WGML_DEVICE_MEMORY_LIMIT");
    if (env_mem && *env_mem) {
        char *end;
        double v = strtod(env_mem, &end);
        double unit = (*end == 'k' || *end == 'K') ? 1024.0 : (*end == 'm' || *end == 'M') ? 1048576.0
                      : (*end == 'g' || *end == 'G') ? 1073741824.0 : 1.0;
        if (v > 0 && v * unit < 1.8e19) ctx->mem_limit = (uint64_t)(v * unit);
    }
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
    *out = ctx;
    return WGML_OK;
}

void graph_eager_destroy(wgml_graph *g); /* graph layer */

void wgml_ctx_destroy(wgml_ctx *ctx) {
    if (!ctx) return;
    if (ctx->eager) graph_eager_destroy(ctx->eager);
    ctx->eager = NULL;
    if (!ctx->lost) native_poll(ctx->device, true);
    while (ctx->free_buffers) {
        gpu_buffer *b = ctx->free_buffers;
        ctx->free_buffers = b->next_free;
        gpu_buffer_release(b);
    }
    while (ctx->pipelines) {
        gpu_pipeline *p = ctx->pipelines;
        ctx->pipelines = p->next;
        wgpuComputePipelineRelease(p->pipeline);
        wgpuBindGroupLayoutRelease(p->layout);
        free(p->key);
        free(p);
    }
    if (ctx->timestamps) wgpuQuerySetRelease(ctx->timestamps);
    if (ctx->ts_resolve) wgpuBufferRelease(ctx->ts_resolve);
    if (ctx->ts_read) wgpuBufferRelease(ctx->ts_read);
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
wgml_graph *gpu_ctx_eager(wgml_ctx *ctx) { return ctx->eager; }
void gpu_ctx_set_eager(wgml_ctx *ctx, wgml_graph *g) { ctx->eager = g; }
int gpu_ctx_matmul_variant(const wgml_ctx *ctx) { return ctx->matmul_variant; }
void wgml_matmul_force_variant(wgml_ctx *ctx, int v) {
    if (ctx) ctx->matmul_variant = v;
}
uint64_t wgml_submit_count(const wgml_ctx *ctx) { return ctx ? ctx->submits : 0; }

void wgml_record_stats(const wgml_ctx *ctx, uint64_t *cpu_ns, uint64_t *dispatches) {
    if (cpu_ns) *cpu_ns = ctx ? ctx->record_ns : 0;
    if (dispatches) *dispatches = ctx ? ctx->recorded : 0;
}
uint64_t wgml_read_bytes(const wgml_ctx *ctx) { return ctx ? ctx->read_bytes : 0; }

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
    fprintf(f, "wgpu-native: %u.%u.%u.%u\n", d.wgpu_version >> 24, (d.wgpu_version >> 16) & 255,
            (d.wgpu_version >> 8) & 255, d.wgpu_version & 255);
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
    fprintf(f, "features:    timestamps %s, shader-f16 %s, subgroups %s%s, f32 atomics %s\n", d.has_timestamps ? "yes" : "no",
            d.has_f16 ? "yes" : "no", d.has_subgroups ? "yes" : "no", sg, d.has_f32_atomics ? "yes" : "no");
}

/* ------------------------------------------------------------------ buffers */

/* Releases the pool's idle buffers (their device memory goes back to the device). */
static void release_idle(wgml_ctx *ctx) {
    while (ctx->free_buffers) {
        gpu_buffer *f = ctx->free_buffers;
        ctx->free_buffers = f->next_free;
        gpu_buffer_release(f);
    }
}

static gpu_buffer *buffer_new(wgml_ctx *ctx, uint64_t size, WGPUBufferUsage usage, const char *what) {
    if (gpu_check_alive(ctx)) return NULL;
    if (size > ctx->caps.max_buffer_size) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: %llu bytes is over the device's buffer size limit of %llu", what,
                       (unsigned long long)size, (unsigned long long)ctx->caps.max_buffer_size);
        return NULL;
    }
    if (ctx->mem_limit && ctx->mem_used + size > ctx->mem_limit) {
        release_idle(ctx); /* give the pool's idle buffers back first */
        if (ctx->mem_used + size > ctx->mem_limit) {
            wgml_set_error(ctx, WGML_ERR_OOM,
                           "%s: out of device memory: allocating %llu bytes would pass the device memory limit of %llu bytes "
                           "(%llu in use; WGML_DEVICE_MEMORY_LIMIT)",
                           what, (unsigned long long)size, (unsigned long long)ctx->mem_limit, (unsigned long long)ctx->mem_used);
            return NULL;
        }
    }
    gpu_buffer *b = calloc(1, sizeof *b);
    if (!b) {
        wgml_set_error(ctx, WGML_ERR_OOM, "%s: out of host memory", what);
        return NULL;
    }
    WGPUBufferDescriptor d = WGPU_BUFFER_DESCRIPTOR_INIT;
    d.label = sv(what);
    d.size = size;
    d.usage = usage;
    char during[160];
    snprintf(during, sizeof during, "%s: allocating %llu bytes of device memory", what, (unsigned long long)size);
    for (int attempt = 0;; attempt++) {
        scope_push(ctx);
        b->buf = wgpuDeviceCreateBuffer(ctx->device, &d);
        wgml_status s = scope_pop(ctx, during);
        if (!s && b->buf) break;
        if (b->buf) wgpuBufferRelease(b->buf);
        b->buf = NULL;
        /* the device is out of memory: give the pool's idle buffers back and try once more */
        if (attempt == 0 && s == WGML_ERR_OOM && ctx->free_buffers) {
            release_idle(ctx);
            wgml_clear_error(ctx);
            continue;
        }
        free(b);
        if (ctx->status == WGML_OK) wgml_set_error(ctx, WGML_ERR_OOM, "%s", during);
        return NULL;
    }
    b->size = size;
    b->owner = ctx;
    ctx->mem_used += size;
    return b;
}

gpu_buffer *gpu_buffer_get(wgml_ctx *ctx, uint64_t size, const char *what) {
    uint64_t want = (size + 255) & ~255ull;
    if (want == 0) want = 256;
    /* best fit among free buffers no larger than twice the request */
    gpu_buffer **best = NULL;
    for (gpu_buffer **p = &ctx->free_buffers; *p; p = &(*p)->next_free)
        if ((*p)->size >= want && (*p)->size <= 2 * want && (!best || (*p)->size < (*best)->size)) best = p;
    if (best) {
        gpu_buffer *b = *best;
        *best = b->next_free;
        b->next_free = NULL;
        return b;
    }
    return buffer_new(ctx, want, WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst, what);
}

void gpu_buffer_put(wgml_ctx *ctx, gpu_buffer *b) {
    if (!b) return;
    b->next_free = ctx->free_buffers;
    ctx->free_buffers = b;
}

gpu_buffer *gpu_uniform_create(wgml_ctx *ctx, uint64_t size) {
    return buffer_new(ctx, (size + 15) & ~15ull, WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst, "uniforms");
}

void gpu_buffer_release(gpu_buffer *b) {
    if (!b) return;
    if (b->owner) b->owner->mem_used -= b->size;
    wgpuBufferRelease(b->buf);
    free(b);
}

uint64_t gpu_buffer_size(const gpu_buffer *b) { return b->size; }

wgml_status gpu_write(wgml_ctx *ctx, gpu_buffer *b, uint64_t offset, const void *data, uint64_t size) {
    wgml_status s = gpu_check_alive(ctx);
    if (s) return s;
    if (offset + size > b->size)
        return wgml_set_error(ctx, WGML_ERR_ARG, "write of %llu bytes at %llu is past the buffer's %llu bytes",
                              (unsigned long long)size, (unsigned long long)offset, (unsigned long long)b->size);
    uint64_t whole = size & ~3ull;
    if (whole) wgpuQueueWriteBuffer(ctx->queue, b->buf, offset, data, whole);
    if (whole < size) { /* a tail that is not a multiple of 4 bytes: pad it */
        uint8_t tail[4] = {0};
        memcpy(tail, (const uint8_t *)data + whole, size - whole);
        wgpuQueueWriteBuffer(ctx->queue, b->buf, offset + whole, tail, 4);
    }
    return take_pending(ctx, "uploading to the GPU");
}

/* The state of one mapping. It lives on the heap: when a wait for the mapping times out, the
 * waiter leaves (abandoned = true) and the callback, which still fires later (when the copy
 * completes or the buffer is released), frees it. A stack variable would be written after its
 * frame is gone. */
typedef struct map_result {
    volatile bool done;
    bool abandoned;
    WGPUMapAsyncStatus status;
    char msg[256];
} map_result;

static void on_map(WGPUMapAsyncStatus status, WGPUStringView msg, void *u1, void *u2) {
    (void)u2;
    map_result *r = u1;
    if (r->abandoned) {
        free(r);
        return;
    }
    r->status = status;
    sv_copy(r->msg, sizeof r->msg, msg);
    r->done = true;
}

static wgml_status map_read(wgml_ctx *ctx, WGPUBuffer staging, uint64_t size, void *data) {
    map_result *r = calloc(1, sizeof *r);
    if (!r) return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = on_map;
    cb.userdata1 = r;
    wgpuBufferMapAsync(staging, WGPUMapMode_Read, 0, (size_t)size, cb);
    wgml_status s = wait_flag(ctx, &r->done, "reading back from the GPU");
    if (s) {
        if (r->done) free(r);
        else r->abandoned = true; /* the callback frees it */
        return s;
    }
    WGPUMapAsyncStatus st = r->status;
    if (st != WGPUMapAsyncStatus_Success) {
        s = wgml_set_error(ctx, WGML_ERR_GPU, "reading back from the GPU: %s", r->msg);
        free(r);
        return s;
    }
    free(r);
    const void *p = wgpuBufferGetConstMappedRange(staging, 0, (size_t)size);
    if (!p) {
        wgpuBufferUnmap(staging);
        return wgml_set_error(ctx, WGML_ERR_GPU, "reading back from the GPU: no mapped range");
    }
    memcpy(data, p, (size_t)size);
    wgpuBufferUnmap(staging);
    return WGML_OK;
}

wgml_status gpu_read(wgml_ctx *ctx, gpu_buffer *b, uint64_t offset, void *data, uint64_t size) {
    wgml_status s = gpu_check_alive(ctx);
    if (s) return s;
    if (size == 0) return WGML_OK;
    uint64_t start = offset & ~3ull, end = (offset + size + 3) & ~3ull;
    if (end > b->size)
        return wgml_set_error(ctx, WGML_ERR_ARG, "read of %llu bytes at %llu is past the buffer's %llu bytes",
                              (unsigned long long)size, (unsigned long long)offset, (unsigned long long)b->size);
    uint64_t n = end - start;
    WGPUBufferDescriptor d = WGPU_BUFFER_DESCRIPTOR_INIT;
    d.label = sv("readback");
    d.size = n;
    d.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    scope_push(ctx);
    WGPUBuffer staging = wgpuDeviceCreateBuffer(ctx->device, &d);
    if ((s = scope_pop(ctx, "allocating a readback buffer")) || !staging) {
        if (staging) wgpuBufferRelease(staging);
        return s ? s : wgml_set_error(ctx, WGML_ERR_OOM, "allocating a readback buffer");
    }
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
    wgpuCommandEncoderCopyBufferToBuffer(enc, b->buf, start, staging, 0, n);
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
    wgpuQueueSubmit(ctx->queue, 1, &cmd);
    ctx->submits++;
    wgpuCommandBufferRelease(cmd);
    wgpuCommandEncoderRelease(enc);
    uint8_t *tmp = malloc((size_t)n);
    if (!tmp) {
        wgpuBufferRelease(staging);
        return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory for a readback of %llu bytes",
                              (unsigned long long)n);
    }
    s = map_read(ctx, staging, n, tmp);
    if (!s) memcpy(data, tmp + (offset - start), (size_t)size);
    if (!s) ctx->read_bytes += size;
    free(tmp);
    wgpuBufferRelease(staging);
    if (!s) s = take_pending(ctx, "reading back from the GPU");
    return s;
}

/* ------------------------------------------------------------------ shaders and pipelines */

extern const struct wgml_shader_source {
    const char *name;
    const char *source;
} wgml_shader_sources[];

const char *gpu_shader_source(const char *name) {
    for (const struct wgml_shader_source *s = wgml_shader_sources; s->name; s++)
        if (strcmp(s->name, name) == 0) return s->source;
    return NULL;
}

/* Shared WGSL: a line "//!include NAME" in a kernel is replaced by the embedded NAME.wgsl
 * (which may include others, to a depth of 4; each file at most once per kernel). Returns a
 * malloc'd copy; NULL with the error set when NAME is unknown or memory runs out. */
#define INCLUDE_MARK "//!include "
typedef struct inc_buf {
    char *p;
    size_t n, cap;
    const char *seen[16];
    int n_seen;
} inc_buf;

static bool inc_put(inc_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

static wgml_status inc_expand(wgml_ctx *ctx, inc_buf *b, const char *kernel, const char *src, int depth) {
    for (const char *line = src; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        if (strncmp(line, INCLUDE_MARK, sizeof INCLUDE_MARK - 1) == 0) {
            const char *arg = line + sizeof INCLUDE_MARK - 1;
            size_t nl = len - (sizeof INCLUDE_MARK - 1);
            while (nl > 0 && (arg[nl - 1] == '\n' || arg[nl - 1] == ' ')) nl--;
            char name[64];
            if (nl == 0 || nl >= sizeof name)
                return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s': a malformed %sline", kernel, INCLUDE_MARK);
            memcpy(name, arg, nl);
            name[nl] = 0;
            const char *inc = gpu_shader_source(name);
            if (!inc) return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s' includes '%s', which is not embedded", kernel, name);
            bool seen = false;
            for (int i = 0; i < b->n_seen; i++) seen = seen || b->seen[i] == inc;
            if (!seen) {
                if (depth >= 4 || b->n_seen >= 16)
                    return wgml_set_error(ctx, WGML_ERR_LIMIT, "kernel '%s': includes nested too deep at '%s'", kernel, name);
                b->seen[b->n_seen++] = inc;
                wgml_status s = inc_expand(ctx, b, kernel, inc, depth + 1);
                if (s) return s;
                if (!inc_put(b, "\n", 1)) return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
            }
        } else if (!inc_put(b, line, len)) {
            return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        }
        line += len;
    }
    return WGML_OK;
}

static char *expand_includes(wgml_ctx *ctx, const char *kernel, const char *src) {
    inc_buf b = {0};
    if (!inc_put(&b, "", 0)) {
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    if (inc_expand(ctx, &b, kernel, src, 0)) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* Returns a copy of code with every "var<storage, read>" made "var<storage, read_write>". */
static char *rewrite_read_only(const char *code) {
    static const char from[] = "var<storage, read>", to[] = "var<storage, read_write>";
    size_t count = 0, nf = sizeof from - 1, nt = sizeof to - 1;
    for (const char *p = strstr(code, from); p; p = strstr(p + nf, from)) count++;
    char *out = malloc(strlen(code) + count * (nt - nf) + 1);
    if (!out) return NULL;
    char *o = out;
    const char *p = code;
    for (const char *q = strstr(p, from); q; q = strstr(p, from)) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, nt);
        o += nt;
        p = q + nf;
    }
    strcpy(o, p);
    return out;
}

gpu_pipeline *gpu_pipeline_get(wgml_ctx *ctx, const char *shader, const char *prelude, int n_ro, int n_rw,
                               bool has_uniform, bool all_writable) {
    if (gpu_check_alive(ctx)) return NULL;
    if (!prelude) prelude = "";
    size_t klen = strlen(shader) + strlen(prelude) + 64;
    char *key = malloc(klen);
    if (!key) {
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    snprintf(key, klen, "%s|%d|%d|%d|%d|%s", shader, n_ro, n_rw, (int)has_uniform, (int)all_writable, prelude);
    for (gpu_pipeline *p = ctx->pipelines; p; p = p->next)
        if (strcmp(p->key, key) == 0) {
            free(key);
            return p;
        }
    const char *raw = gpu_shader_source(shader);
    if (!raw) {
        wgml_set_error(ctx, WGML_ERR_ARG, "no WGSL kernel named '%s' is embedded", shader);
        free(key);
        return NULL;
    }
    int nb = n_ro + n_rw + (has_uniform ? 1 : 0);
    if ((uint32_t)(n_ro + n_rw) > ctx->caps.max_storage_per_stage) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "kernel '%s' needs %d storage buffers; the device allows %u", shader,
                       n_ro + n_rw, ctx->caps.max_storage_per_stage);
        free(key);
        return NULL;
    }
    char *src = expand_includes(ctx, shader, raw);
    size_t n1 = strlen(prelude), n2 = src ? strlen(src) : 0;
    char *code = src ? malloc(n1 + n2 + 2) : NULL;
    if (!code) {
        if (src) wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        free(src);
        free(key);
        return NULL;
    }
    memcpy(code, prelude, n1);
    code[n1] = '\n';
    memcpy(code + n1 + 1, src, n2 + 1);
    free(src);
    if (all_writable) {
        char *rw = rewrite_read_only(code);
        free(code);
        code = rw;
        if (!code) {
            free(key);
            wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
            return NULL;
        }
    }

    WGPUBindGroupLayoutEntry entries[16];
    for (int i = 0; i < nb; i++) {
        WGPUBindGroupLayoutEntry e = WGPU_BIND_GROUP_LAYOUT_ENTRY_INIT;
        e.binding = (uint32_t)i;
        e.visibility = WGPUShaderStage_Compute;
        e.buffer.type = i < n_ro && !all_writable ? WGPUBufferBindingType_ReadOnlyStorage
                        : i < n_ro + n_rw ? WGPUBufferBindingType_Storage
                                          : WGPUBufferBindingType_Uniform;
        entries[i] = e;
    }
    scope_push(ctx);
    WGPUShaderSourceWGSL wgsl = WGPU_SHADER_SOURCE_WGSL_INIT;
    wgsl.code = sv(code);
    WGPUShaderModuleDescriptor md = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
    md.nextInChain = &wgsl.chain;
    md.label = sv(shader);
    WGPUShaderModule mod = native_create_shader_module(ctx->device, &md, ctx->checked_shaders);
    WGPUBindGroupLayoutDescriptor ld = WGPU_BIND_GROUP_LAYOUT_DESCRIPTOR_INIT;
    ld.entryCount = (size_t)nb;
    ld.entries = entries;
    WGPUBindGroupLayout bgl = wgpuDeviceCreateBindGroupLayout(ctx->device, &ld);
    WGPUPipelineLayoutDescriptor pld = WGPU_PIPELINE_LAYOUT_DESCRIPTOR_INIT;
    pld.bindGroupLayoutCount = 1;
    pld.bindGroupLayouts = &bgl;
    WGPUPipelineLayout pl = wgpuDeviceCreatePipelineLayout(ctx->device, &pld);
    WGPUComputePipelineDescriptor cd = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
    cd.label = sv(shader);
    cd.layout = pl;
    cd.compute.module = mod;
    cd.compute.entryPoint = sv("main");
    WGPUComputePipeline pipe = wgpuDeviceCreateComputePipeline(ctx->device, &cd);
    char during[128];
    snprintf(during, sizeof during, "compiling kernel '%s'", shader);
    wgml_status s = scope_pop(ctx, during);
    wgpuPipelineLayoutRelease(pl);
    wgpuShaderModuleRelease(mod);
    free(code);
    if (s || !pipe) {
        if (pipe) wgpuComputePipelineRelease(pipe);
        wgpuBindGroupLayoutRelease(bgl);
        free(key);
        if (!s) wgml_set_error(ctx, WGML_ERR_GPU, "%s failed", during);
        return NULL;
    }
    gpu_pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        wgpuComputePipelineRelease(pipe);
        wgpuBindGroupLayoutRelease(bgl);
        free(key);
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    p->key = key;
    p->pipeline = pipe;
    p->layout = bgl;
    p->n_bindings = nb;
    p->next = ctx->pipelines;
    ctx->pipelines = p;
    return p;
}

gpu_bind_group *gpu_bind_group_create(wgml_ctx *ctx, gpu_pipeline *p, const gpu_range *ranges, int n) {
    if (n != p->n_bindings) {
        wgml_set_error(ctx, WGML_ERR_ARG, "bind group has %d entries; the kernel takes %d", n, p->n_bindings);
        return NULL;
    }
    WGPUBindGroupEntry e[16];
    for (int i = 0; i < n; i++) {
        WGPUBindGroupEntry x = WGPU_BIND_GROUP_ENTRY_INIT;
        x.binding = (uint32_t)i;
        x.buffer = ranges[i].buf->buf;
        x.offset = ranges[i].offset;
        x.size = ranges[i].size;
        e[i] = x;
    }
    WGPUBindGroupDescriptor d = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
    d.layout = p->layout;
    d.entryCount = (size_t)n;
    d.entries = e;
    gpu_bind_group *bg = calloc(1, sizeof *bg);
    if (!bg) {
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    scope_push(ctx);
    bg->bg = wgpuDeviceCreateBindGroup(ctx->device, &d);
    if (scope_pop(ctx, "creating a bind group") || !bg->bg) {
        if (bg->bg) wgpuBindGroupRelease(bg->bg);
        free(bg);
        return NULL;
    }
    return bg;
}

void gpu_bind_group_release(gpu_bind_group *bg) {
    if (!bg) return;
    wgpuBindGroupRelease(bg->bg);
    free(bg);
}

/* ------------------------------------------------------------------ submits */

static wgml_status ensure_timestamps(wgml_ctx *ctx) {
    if (ctx->timestamps) return WGML_OK;
    WGPUQuerySetDescriptor qd = WGPU_QUERY_SET_DESCRIPTOR_INIT;
    qd.type = WGPUQueryType_Timestamp;
    qd.count = 2;
    ctx->timestamps = wgpuDeviceCreateQuerySet(ctx->device, &qd);
    WGPUBufferDescriptor d = WGPU_BUFFER_DESCRIPTOR_INIT;
    d.size = 16;
    d.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
    ctx->ts_resolve = wgpuDeviceCreateBuffer(ctx->device, &d);
    d.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    ctx->ts_read = wgpuDeviceCreateBuffer(ctx->device, &d);
    return take_pending(ctx, "creating timestamp queries");
}

/* Records d[0..n), repeat times over, into one compute pass of enc (with its begin and end
 * timestamps written to queries q0 and q0 + 1 of qs when qs is not NULL). */
static void encode_pass(WGPUCommandEncoder enc, const gpu_dispatch *d, size_t n, size_t repeat, WGPUQuerySet qs,
                        uint32_t q0) {
    WGPUComputePassDescriptor pd = WGPU_COMPUTE_PASS_DESCRIPTOR_INIT;
    WGPUPassTimestampWrites tw = WGPU_PASS_TIMESTAMP_WRITES_INIT;
    if (qs) {
        tw.querySet = qs;
        tw.beginningOfPassWriteIndex = q0;
        tw.endOfPassWriteIndex = q0 + 1;
        pd.timestampWrites = &tw;
    }
    WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(enc, &pd);
    WGPUComputePipeline last = NULL;
    for (size_t r = 0; r < repeat; r++)
        for (size_t i = 0; i < n; i++) {
            if (d[i].pipeline->pipeline != last) {
                wgpuComputePassEncoderSetPipeline(pass, d[i].pipeline->pipeline);
                last = d[i].pipeline->pipeline;
            }
            wgpuComputePassEncoderSetBindGroup(pass, 0, d[i].bind_group->bg, 0, NULL);
            wgpuComputePassEncoderDispatchWorkgroups(pass, d[i].x, d[i].y, d[i].z);
        }
    wgpuComputePassEncoderEnd(pass);
    wgpuComputePassEncoderRelease(pass);
}

wgml_status gpu_submit(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, double *time_out) {
    wgml_status s = gpu_check_alive(ctx);
    if (s) return s;
    bool ts = time_out && ctx->caps.timestamps;
    if (ts && (s = ensure_timestamps(ctx))) return s;
    uint64_t c0 = thread_cpu_ns();
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
    encode_pass(enc, d, n, 1, ts ? ctx->timestamps : NULL, 0);
    if (ts) {
        wgpuCommandEncoderResolveQuerySet(enc, ctx->timestamps, 0, 2, ctx->ts_resolve, 0);
        wgpuCommandEncoderCopyBufferToBuffer(enc, ctx->ts_resolve, 0, ctx->ts_read, 0, 16);
    }
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
    uint64_t t0 = gpu_now_ns();
    wgpuQueueSubmit(ctx->queue, 1, &cmd);
    ctx->submits++;
    wgpuCommandBufferRelease(cmd);
    wgpuCommandEncoderRelease(enc);
    ctx->record_ns += thread_cpu_ns() - c0;
    ctx->recorded += n;
    if ((s = take_pending(ctx, "submitting GPU work"))) return s;
    if (!time_out) return WGML_OK;
    if ((s = gpu_wait_idle(ctx))) return s;
    double wall = (double)(gpu_now_ns() - t0) * 1e-9;
    if (!ts) {
        *time_out = wall;
        return WGML_OK;
    }
    uint64_t stamps[2];
    if ((s = map_read(ctx, ctx->ts_read, 16, stamps))) return s;
    double period = native_timestamp_period(ctx->queue);
    *time_out = stamps[1] > stamps[0] ? (double)(stamps[1] - stamps[0]) * period * 1e-9 : wall;
    return WGML_OK;
}

/* Profiling: each dispatch in its own compute pass with timestamps at its beginning and end,
 * PROFILE_CHUNK dispatches per submit (a query set holds 2 per dispatch). Separate passes
 * change the barriers wgpu places, so the sum is close to, not equal to, a normal run. */
#define PROFILE_CHUNK 1024
wgml_status gpu_submit_profile(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, double *seconds) {
    wgml_status s = gpu_check_alive(ctx);
    if (s) return s;
    if (!ctx->caps.timestamps)
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED, "graph profile: the adapter has no timestamp queries");
    WGPUQuerySetDescriptor qd = WGPU_QUERY_SET_DESCRIPTOR_INIT;
    qd.type = WGPUQueryType_Timestamp;
    qd.count = 2 * PROFILE_CHUNK;
    WGPUQuerySet qs = wgpuDeviceCreateQuerySet(ctx->device, &qd);
    WGPUBufferDescriptor bd = WGPU_BUFFER_DESCRIPTOR_INIT;
    bd.size = 16 * PROFILE_CHUNK;
    bd.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
    WGPUBuffer resolve = wgpuDeviceCreateBuffer(ctx->device, &bd);
    bd.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    WGPUBuffer readb = wgpuDeviceCreateBuffer(ctx->device, &bd);
    uint64_t *stamps = malloc(16 * PROFILE_CHUNK);
    s = take_pending(ctx, "creating profiling queries");
    if (!s && !stamps) s = wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    double period = native_timestamp_period(ctx->queue);
    for (size_t first = 0; !s && first < n; first += PROFILE_CHUNK) {
        size_t m = n - first < PROFILE_CHUNK ? n - first : PROFILE_CHUNK;
        WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
        for (size_t i = 0; i < m; i++) encode_pass(enc, &d[first + i], 1, 1, qs, (uint32_t)(2 * i));
        wgpuCommandEncoderResolveQuerySet(enc, qs, 0, (uint32_t)(2 * m), resolve, 0);
        wgpuCommandEncoderCopyBufferToBuffer(enc, resolve, 0, readb, 0, 16 * m);
        WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
        wgpuQueueSubmit(ctx->queue, 1, &cmd);
        ctx->submits++;
        wgpuCommandBufferRelease(cmd);
        wgpuCommandEncoderRelease(enc);
        if ((s = take_pending(ctx, "submitting a profiled run")) || (s = gpu_wait_idle(ctx)) ||
            (s = map_read(ctx, readb, 16 * m, stamps)))
            break;
        for (size_t i = 0; i < m; i++)
            seconds[first + i] =
                stamps[2 * i + 1] > stamps[2 * i] ? (double)(stamps[2 * i + 1] - stamps[2 * i]) * period * 1e-9 : 0.0;
    }
    free(stamps);
    if (readb) wgpuBufferRelease(readb);
    if (resolve) wgpuBufferRelease(resolve);
    if (qs) wgpuQuerySetRelease(qs);
    return s;
}

/* ------------------------------------------------------------------ asynchronous submits */

struct gpu_async {
    WGPUBuffer staging;    /* MapRead: [16 bytes of timestamps][the copied bytes] */
    WGPUQuerySet queries;  /* NULL without timestamps */
    WGPUBuffer resolve;
    uint64_t size;         /* bytes copied from the source */
    map_result *map;
};

void gpu_async_free(gpu_async *a) {
    if (!a) return;
    if (a->map) {
        if (a->map->done) free(a->map);
        else a->map->abandoned = true; /* the callback frees it when the release cancels the map */
    }
    if (a->staging) wgpuBufferRelease(a->staging);
    if (a->resolve) wgpuBufferRelease(a->resolve);
    if (a->queries) wgpuQuerySetRelease(a->queries);
    free(a);
}

gpu_async *gpu_submit_async(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, size_t repeat, gpu_buffer *src,
                            uint64_t offset, uint64_t size, bool timed) {
    if (gpu_check_alive(ctx)) return NULL;
    if (offset % 4 || size % 4 || offset + size > src->size) {
        wgml_set_error(ctx, WGML_ERR_ARG, "asynchronous readback of %llu bytes at %llu: not whole words inside the %llu-byte buffer",
                       (unsigned long long)size, (unsigned long long)offset, (unsigned long long)src->size);
        return NULL;
    }
    gpu_async *a = calloc(1, sizeof *a);
    map_result *r = calloc(1, sizeof *r);
    if (!a || !r) {
        free(a), free(r);
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    a->size = size;
    bool ts = timed && ctx->caps.timestamps;
    scope_push(ctx);
    WGPUBufferDescriptor bd = WGPU_BUFFER_DESCRIPTOR_INIT;
    bd.label = sv("async readback");
    bd.size = 16 + size;
    bd.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    a->staging = wgpuDeviceCreateBuffer(ctx->device, &bd);
    if (ts) {
        WGPUQuerySetDescriptor qd = WGPU_QUERY_SET_DESCRIPTOR_INIT;
        qd.type = WGPUQueryType_Timestamp;
        qd.count = 2;
        a->queries = wgpuDeviceCreateQuerySet(ctx->device, &qd);
        bd.label = sv("async timestamps");
        bd.size = 16;
        bd.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
        a->resolve = wgpuDeviceCreateBuffer(ctx->device, &bd);
    }
    wgml_status s = scope_pop(ctx, "allocating an asynchronous readback");
    if (s || !a->staging || (ts && (!a->queries || !a->resolve))) {
        free(r);
        gpu_async_free(a);
        if (!s) wgml_set_error(ctx, WGML_ERR_OOM, "allocating an asynchronous readback");
        return NULL;
    }
    uint64_t c0 = thread_cpu_ns();
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
    encode_pass(enc, d, n, repeat, a->queries, 0);
    if (ts) {
        wgpuCommandEncoderResolveQuerySet(enc, a->queries, 0, 2, a->resolve, 0);
        wgpuCommandEncoderCopyBufferToBuffer(enc, a->resolve, 0, a->staging, 0, 16);
    }
    if (size) wgpuCommandEncoderCopyBufferToBuffer(enc, src->buf, offset, a->staging, 16, size);
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
    wgpuQueueSubmit(ctx->queue, 1, &cmd);
    ctx->submits++;
    wgpuCommandBufferRelease(cmd);
    wgpuCommandEncoderRelease(enc);
    ctx->record_ns += thread_cpu_ns() - c0;
    ctx->recorded += n * repeat;
    if ((s = take_pending(ctx, "submitting GPU work"))) {
        free(r);
        gpu_async_free(a);
        return NULL;
    }
    /* the mapping completes once the GPU has run everything submitted up to here */
    a->map = r;
    WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = on_map;
    cb.userdata1 = r;
    wgpuBufferMapAsync(a->staging, WGPUMapMode_Read, 0, (size_t)(16 + size), cb);
    return a;
}

wgml_status gpu_async_wait(wgml_ctx *ctx, gpu_async *a, void *data, double *seconds) {
    wgml_status s = wait_flag(ctx, &a->map->done, "reading back from the GPU");
    if (s) {
        gpu_async_free(a);
        return s;
    }
    if (a->map->status != WGPUMapAsyncStatus_Success) {
        s = wgml_set_error(ctx, WGML_ERR_GPU, "reading back from the GPU: %s", a->map->msg);
        gpu_async_free(a);
        return s;
    }
    const uint8_t *p = wgpuBufferGetConstMappedRange(a->staging, 0, (size_t)(16 + a->size));
    if (!p) {
        gpu_async_free(a);
        return wgml_set_error(ctx, WGML_ERR_GPU, "reading back from the GPU: no mapped range");
    }
    uint64_t stamps[2];
    memcpy(stamps, p, 16);
    if (data) memcpy(data, p + 16, (size_t)a->size);
    ctx->read_bytes += a->size;
    wgpuBufferUnmap(a->staging);
    if (seconds)
        *seconds = a->queries && stamps[1] > stamps[0]
                       ? (double)(stamps[1] - stamps[0]) * native_timestamp_period(ctx->queue) * 1e-9
                       : -1.0;
    gpu_async_free(a);
    return take_pending(ctx, "reading back from the GPU");
}
