/* Private to src/gpu/: the context struct and the helpers that device.c, memory.c,
 * pipeline.c and submit.c share. Layers above include gpu/gpu.h only. */
#ifndef WGML_GPU_INTERNAL_H
#define WGML_GPU_INTERNAL_H

#include "gpu/gpu.h"
#include "gpu/native.h"

#include <string.h>

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
    size_t wgsl_bytes; /* for WGML_LOG_PIPELINES */
    bool ran;          /* dispatched before (WGML_LOG_PIPELINES=2 times the first run) */
    gpu_pipeline *next;
};

struct gpu_bind_group {
    WGPUBindGroup bg;
};

/* The public wgml_ctx is the device: the gpu layer defines it. The last error lives here too,
 * because the gpu layer is where device errors (loss, out of memory, validation, timeouts)
 * are reported, and every layer above reaches it through wgml_set_error. What the layers
 * above keep per context (the graph layer's eager graph and op settings) hangs off
 * layer_state, which this layer stores and never reads. */
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

    wgml_status status;
    char error[WGML_ERROR_MAX];
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
    uint64_t written;    /* bytes of queue writes since the last submit (gpu_write) */
    uint64_t upload_flush; /* written past which gpu_write submits (WGML_UPLOAD_FLUSH; 0: never) */
    uint64_t record_ns, recorded; /* CPU time recording + submitting passes, dispatches recorded */
    /* device memory in buffers (pooled ones included), its peak, and the budget:
     * WGML_DEVICE_MEMORY_LIMIT bytes (0: none; the device's own out-of-memory errors still
     * apply); WGML_MEMORY_TRACE bytes: each new buffer at least that large is logged to stderr */
    uint64_t mem_used, mem_peak, mem_limit, mem_trace;
    void *layer_state; /* owned by the layers above (gpu_ctx_set_layer_state) */
    struct gpu_ahead *ahead; /* the compile-ahead thread (ahead.c), or NULL */
};

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

static inline void sv_copy(char *dst, size_t n, WGPUStringView v) {
    size_t len = v.data ? (v.length == WGPU_STRLEN ? strlen(v.data) : v.length) : 0;
    if (len >= n) len = n - 1;
    if (len) memcpy(dst, v.data, len);
    dst[len] = 0;
}

static inline WGPUStringView sv(const char *s) { return (WGPUStringView){s, s ? strlen(s) : 0}; }

/* ---- device.c */
/* Turns an error reported by a callback since the last check into the context's error. */
wgml_status gpu_take_pending(wgml_ctx *ctx, const char *during);
/* Error scopes around the creation of something: push before, pop after to learn whether it
 * failed (the error becomes the context's, with `during` in front). */
void gpu_scope_push(wgml_ctx *ctx);
wgml_status gpu_scope_pop(wgml_ctx *ctx, const char *during);
/* Sleeps us microseconds (resumed when a signal cuts it short). */
void gpu_nap_us(long us);
/* A device of adapter as d describes, its request's answer awaited through the instance's events
 * for up to timeout_s: WGML_OK and *out, or the status (out of memory, timeout, refused) with
 * why (a sentence) and *out NULL. Both the context's device and ahead.c's come this way. */
wgml_status gpu_request_device(WGPUInstance instance, WGPUAdapter adapter, const WGPUDeviceDescriptor *d,
                               double timeout_s, WGPUDevice *out, char *why, size_t why_n);
/* The queue's work-done answer for the work submitted so far, into a heap record (NULL when out
 * of memory): done turns true once the device's events run after the work finished. A waiter
 * that stops waiting gives the record back with gpu_idle_release, which frees it or leaves it to
 * the answer. Not wgpuDevicePoll's "queue empty" (device.c). */
typedef struct idle_wait {
    volatile bool done;
    bool abandoned;
} idle_wait;
idle_wait *gpu_idle_watch(WGPUQueue queue);
void gpu_idle_release(idle_wait *w);
/* Polls until *flag is set (a callback sets it) or, with flag NULL, the work submitted before
 * the call has finished (the queue's work-done answer), within the context's timeout. */
wgml_status gpu_wait_flag(wgml_ctx *ctx, volatile bool *flag, const char *what);
/* $WGML_LOG_PIPELINES: 0 off, 1 a line per pipeline created, 2 also a line per pipeline's first
 * run (pipeline.c, submit.c). */
int gpu_log_pipelines(void);
/* CPU time of the calling thread. */
uint64_t gpu_thread_cpu_ns(void);

/* ---- memory.c */
/* Releases the pool's idle buffers. */
void gpu_pool_release(wgml_ctx *ctx);
/* The buffer-map callback (userdata1: a heap map_result). */
void gpu_on_map(WGPUMapAsyncStatus status, WGPUStringView msg, void *u1, void *u2);
/* Maps staging (MapRead) and copies its first size bytes to data, within the timeout. */
wgml_status gpu_map_read(wgml_ctx *ctx, WGPUBuffer staging, uint64_t size, void *data);

/* ---- pipeline.c */
/* Releases every cached pipeline. */
void gpu_pipelines_release(wgml_ctx *ctx);
/* A compute pipeline of code (entry "main", naga's runtime checks when checked) on device,
 * whose one bind group layout (*layout_out) has nb bindings: n_ro read-only storage (read-write
 * with all_writable), n_rw read-write storage, then a uniform. No error scope: the caller's. */
WGPUComputePipeline gpu_make_pipeline(WGPUDevice device, const char *label, const char *code, int n_ro, int n_rw,
                                      int nb, bool all_writable, bool checked, WGPUBindGroupLayout *layout_out);

/* ---- ahead.c: compiling a built graph's kernels ahead on CPU adapters */
/* Starts the thread when the adapter is a CPU (or $WGML_COMPILE_AHEAD says so); nothing on
 * failure. */
void gpu_ahead_start(wgml_ctx *ctx);
/* Gives the thread one kernel's code and layout (the newest goes first), id its pipeline;
 * nothing when not started. */
void gpu_ahead_push(wgml_ctx *ctx, const void *id, const char *label, const char *code, int n_ro, int n_rw,
                    bool has_uniform, bool all_writable);
/* Moves the job of pipeline id, if not started, to the top: a newer graph records it again. */
void gpu_ahead_touch(wgml_ctx *ctx, const void *id);
/* Drops the kernels not started, waits for the one in progress and ends the thread. */
void gpu_ahead_stop(wgml_ctx *ctx);

/* ---- submit.c */
/* Releases the timestamp queries of timed submits. */
void gpu_timestamps_release(wgml_ctx *ctx);

#endif
