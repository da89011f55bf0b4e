/* Submission: timestamps, one-pass submits, profiled submits, asynchronous submits with
 * readback. */
#include "gpu/gpu_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    return gpu_take_pending(ctx, "creating timestamp queries");
}

void gpu_timestamps_release(wgml_ctx *ctx) {
    if (ctx->timestamps) wgpuQuerySetRelease(ctx->timestamps);
    if (ctx->ts_resolve) wgpuBufferRelease(ctx->ts_resolve);
    if (ctx->ts_read) wgpuBufferRelease(ctx->ts_read);
}

/* Records dispatches first .. first + count - 1 of d[0..n) repeated (dispatch i is d[i % n]) into
 * one compute pass of enc, with timestamps q_begin / q_end of qs (when qs is not NULL; either or
 * both may be WGPU_QUERY_SET_INDEX_UNDEFINED) at its beginning and end. */
static void encode_pass(WGPUCommandEncoder enc, const gpu_dispatch *d, size_t n, size_t first, size_t count,
                        WGPUQuerySet qs, uint32_t q_begin, uint32_t q_end) {
    WGPUComputePassDescriptor pd = WGPU_COMPUTE_PASS_DESCRIPTOR_INIT;
    WGPUPassTimestampWrites tw = WGPU_PASS_TIMESTAMP_WRITES_INIT;
    if (qs && (q_begin != WGPU_QUERY_SET_INDEX_UNDEFINED || q_end != WGPU_QUERY_SET_INDEX_UNDEFINED)) {
        tw.querySet = qs;
        tw.beginningOfPassWriteIndex = q_begin;
        tw.endOfPassWriteIndex = q_end;
        pd.timestampWrites = &tw;
    }
    WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(enc, &pd);
    WGPUComputePipeline last = NULL;
    for (size_t k = first; k < first + count; k++) {
        const gpu_dispatch *e = &d[k % n];
        if (e->pipeline->pipeline != last) {
            wgpuComputePassEncoderSetPipeline(pass, e->pipeline->pipeline);
            last = e->pipeline->pipeline;
        }
        wgpuComputePassEncoderSetBindGroup(pass, 0, e->bind_group->bg, 0, NULL);
        wgpuComputePassEncoderDispatchWorkgroups(pass, e->x, e->y, e->z);
    }
    wgpuComputePassEncoderEnd(pass);
    wgpuComputePassEncoderRelease(pass);
}

/* A run of d[0..n), repeat times over, submitted as command buffers of SUBMIT_FIRST dispatches,
 * then twice as many each time: the GPU starts on the first while the host records the rest
 * (wgpu-native records a dispatch in ~3 us on the H200's host, as long as a small kernel runs, so
 * a 700-dispatch prefill recorded whole left the GPU idle for 2.4 ms of its 14 ms; bench/NOTES.md).
 * Timestamps 0 and 1 of qs (when not NULL) at the beginning of the first pass and the end of the
 * last; tail (when not NULL) adds its copies to the last buffer. It counts as one submit. */
#define SUBMIT_FIRST 32
#define NO_QUERY WGPU_QUERY_SET_INDEX_UNDEFINED
typedef void (*submit_tail)(WGPUCommandEncoder enc, void *user);

/* One command buffer: dispatches first .. first + count - 1 of d (repeated), timestamps as
 * encode_pass takes them, then tail's copies (when not NULL). */
static void submit_buffer(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, size_t first, size_t count, WGPUQuerySet qs,
                          uint32_t q_begin, uint32_t q_end, submit_tail tail, void *user) {
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
    encode_pass(enc, d, n, first, count, qs, q_begin, q_end);
    if (tail) tail(enc, user);
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
    wgpuQueueSubmit(ctx->queue, 1, &cmd);
    wgpuCommandBufferRelease(cmd);
    wgpuCommandEncoderRelease(enc);
}

/* WGML_LOG_PIPELINES=2, a run with a pipeline's first dispatch: the run goes in pieces, the work
 * before that dispatch waited for, then the dispatch alone, waited for and timed, with a line on
 * stderr. A driver that compiles at the first dispatch (lavapipe) does it there, so the lines
 * say what a cold run pays per kernel (since the idle wait takes the queue's work-done answer:
 * with wgpuDevicePoll's "queue empty" the times landed one kernel late, bench/NOTES.md,
 * 2026-12-05). Diagnostic only: the run is serialised, and its timestamps are not written. */
static void submit_first_runs(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, size_t repeat, submit_tail tail,
                              void *user) {
    size_t total = n * repeat, start = 0;
    for (size_t k = 0; k < total; k++) {
        gpu_pipeline *p = d[k % n].pipeline;
        if (p->ran) continue;
        p->ran = true;
        if (k > start) submit_buffer(ctx, d, n, start, k - start, NULL, NO_QUERY, NO_QUERY, NULL, NULL);
        if (gpu_wait_flag(ctx, NULL, "WGML_LOG_PIPELINES' wait") != WGML_OK) return;
        uint64_t t0 = gpu_now_ns();
        submit_buffer(ctx, d, n, k, 1, NULL, NO_QUERY, NO_QUERY, NULL, NULL);
        if (gpu_wait_flag(ctx, NULL, "WGML_LOG_PIPELINES' wait") != WGML_OK) return;
        const char *bar = strchr(p->key, '|');
        fprintf(stderr, "wgml: pipeline %.*s (%zu bytes of WGSL) first run in %.1f ms\n",
                (int)(bar ? bar - p->key : (ptrdiff_t)strlen(p->key)), p->key, p->wgsl_bytes,
                (double)(gpu_now_ns() - t0) * 1e-6);
        start = k + 1;
    }
    submit_buffer(ctx, d, n, start, total - start, NULL, NO_QUERY, NO_QUERY, tail, user);
}

static bool has_first_run(const gpu_dispatch *d, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!d[i].pipeline->ran) return true;
    return false;
}

static void submit_run(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, size_t repeat, WGPUQuerySet qs,
                       submit_tail tail, void *user) {
    size_t total = n * repeat, chunk = SUBMIT_FIRST;
    uint64_t c0 = gpu_thread_cpu_ns();
    if (gpu_log_pipelines() >= 2 && has_first_run(d, n)) submit_first_runs(ctx, d, n, repeat, tail, user);
    else
        for (size_t first = 0; first < total || first == 0; first += chunk, chunk *= 2) {
            size_t count = total - first < chunk ? total - first : chunk;
            bool is_last = first + count >= total;
            submit_buffer(ctx, d, n, first, count, qs, first == 0 ? 0 : NO_QUERY, is_last ? 1 : NO_QUERY,
                          is_last ? tail : NULL, user);
            if (is_last) break;
        }
    ctx->submits++;
    ctx->written = 0; /* the submit flushes the queue writes before it */
    ctx->record_ns += gpu_thread_cpu_ns() - c0;
    ctx->recorded += total;
}

static void resolve_timestamps(WGPUCommandEncoder enc, void *user) {
    wgml_ctx *ctx = user;
    wgpuCommandEncoderResolveQuerySet(enc, ctx->timestamps, 0, 2, ctx->ts_resolve, 0);
    wgpuCommandEncoderCopyBufferToBuffer(enc, ctx->ts_resolve, 0, ctx->ts_read, 0, 16);
}

wgml_status gpu_submit(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, double *time_out) {
    wgml_status s = gpu_check_alive(ctx);
    if (s) return s;
    bool ts = time_out && ctx->caps.timestamps;
    if (ts && (s = ensure_timestamps(ctx))) return s;
    uint64_t t0 = gpu_now_ns();
    submit_run(ctx, d, n, 1, ts ? ctx->timestamps : NULL, ts ? resolve_timestamps : NULL, ctx);
    if ((s = gpu_take_pending(ctx, "submitting GPU work"))) return s;
    if (!time_out) return WGML_OK;
    if ((s = gpu_wait_idle(ctx))) return s;
    double wall = (double)(gpu_now_ns() - t0) * 1e-9;
    if (!ts) {
        *time_out = wall;
        return WGML_OK;
    }
    uint64_t stamps[2];
    if ((s = gpu_map_read(ctx, ctx->ts_read, 16, stamps))) return s;
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
    s = gpu_take_pending(ctx, "creating profiling queries");
    if (!s && !stamps) s = wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    double period = native_timestamp_period(ctx->queue);
    for (size_t first = 0; !s && first < n; first += PROFILE_CHUNK) {
        size_t m = n - first < PROFILE_CHUNK ? n - first : PROFILE_CHUNK;
        WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
        for (size_t i = 0; i < m; i++) encode_pass(enc, d, n, first + i, 1, qs, (uint32_t)(2 * i), (uint32_t)(2 * i + 1));
        wgpuCommandEncoderResolveQuerySet(enc, qs, 0, (uint32_t)(2 * m), resolve, 0);
        wgpuCommandEncoderCopyBufferToBuffer(enc, resolve, 0, readb, 0, 16 * m);
        WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
        wgpuQueueSubmit(ctx->queue, 1, &cmd);
        ctx->submits++;
        ctx->written = 0; /* the submit flushes the queue writes before it */
        wgpuCommandBufferRelease(cmd);
        wgpuCommandEncoderRelease(enc);
        if ((s = gpu_take_pending(ctx, "submitting a profiled run")) || (s = gpu_wait_idle(ctx)) ||
            (s = gpu_map_read(ctx, readb, 16 * m, stamps)))
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
    WGPUBuffer src;        /* the source and the offset of those bytes (borrowed until submitted) */
    uint64_t src_offset;
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

/* The last buffer's copies of an asynchronous run: its timestamps, then the range read back. */
static void async_readback(WGPUCommandEncoder enc, void *user) {
    gpu_async *a = user;
    if (a->queries) {
        wgpuCommandEncoderResolveQuerySet(enc, a->queries, 0, 2, a->resolve, 0);
        wgpuCommandEncoderCopyBufferToBuffer(enc, a->resolve, 0, a->staging, 0, 16);
    }
    if (a->size) wgpuCommandEncoderCopyBufferToBuffer(enc, a->src, a->src_offset, a->staging, 16, a->size);
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
    gpu_scope_push(ctx);
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
    wgml_status s = gpu_scope_pop(ctx, "allocating an asynchronous readback");
    if (s || !a->staging || (ts && (!a->queries || !a->resolve))) {
        free(r);
        gpu_async_free(a);
        if (!s) wgml_set_error(ctx, WGML_ERR_OOM, "allocating an asynchronous readback");
        return NULL;
    }
    a->src = src->buf;
    a->src_offset = offset;
    submit_run(ctx, d, n, repeat, a->queries, async_readback, a);
    if ((s = gpu_take_pending(ctx, "submitting GPU work"))) {
        free(r);
        gpu_async_free(a);
        return NULL;
    }
    /* the mapping completes once the GPU has run everything submitted up to here */
    a->map = r;
    WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = gpu_on_map;
    cb.userdata1 = r;
    wgpuBufferMapAsync(a->staging, WGPUMapMode_Read, 0, (size_t)(16 + size), cb);
    return a;
}

wgml_status gpu_async_wait(wgml_ctx *ctx, gpu_async *a, void *data, double *seconds) {
    wgml_status s = gpu_wait_flag(ctx, &a->map->done, "reading back from the GPU");
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
    return gpu_take_pending(ctx, "reading back from the GPU");
}

