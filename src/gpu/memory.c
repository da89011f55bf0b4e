/* Device memory: buffers, the pool and its device-memory budget, queue writes and staged
 * reads. */
#include "gpu/gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ buffers */


/* Releases the pool's idle buffers (their device memory goes back to the device). */
void gpu_pool_release(wgml_ctx *ctx) {
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
        gpu_pool_release(ctx); /* give the pool's idle buffers back first */
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
        gpu_scope_push(ctx);
        b->buf = wgpuDeviceCreateBuffer(ctx->device, &d);
        wgml_status s = gpu_scope_pop(ctx, during);
        if (!s && b->buf) break;
        if (b->buf) wgpuBufferRelease(b->buf);
        b->buf = NULL;
        /* the device is out of memory: give the pool's idle buffers back and try once more */
        if (attempt == 0 && s == WGML_ERR_OOM && ctx->free_buffers) {
            gpu_pool_release(ctx);
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
    if (ctx->mem_used > ctx->mem_peak) ctx->mem_peak = ctx->mem_used;
    if (ctx->mem_trace && size >= ctx->mem_trace)
        fprintf(stderr, "wgml memory: %10.2f MiB  %s (in use %.2f MiB)\n", (double)size / 1048576.0, what,
                (double)ctx->mem_used / 1048576.0);
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
    /* A queue write is staged by the implementation until the next submit, so a model's weights
     * written between two submits were all held twice (wgpu-native: staging memory as large as
     * the weights, freed only after that submit). Past ctx->upload_flush bytes of writes (64 MiB,
     * WGML_UPLOAD_FLUSH), an empty submit hands them to the GPU, and natively the wait frees
     * their staging. Steps that write less between their submits never reach it. */
    ctx->written += size;
    if (ctx->upload_flush && ctx->written >= ctx->upload_flush) {
        wgpuQueueSubmit(ctx->queue, 0, NULL);
        ctx->submits++;
        ctx->written = 0; /* the submit flushes the queue writes before it */
        if (native_upload_wait()) native_poll(ctx->device, true);
    }
    return gpu_take_pending(ctx, "uploading to the GPU");
}

void gpu_on_map(WGPUMapAsyncStatus status, WGPUStringView msg, void *u1, void *u2) {
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

wgml_status gpu_map_read(wgml_ctx *ctx, WGPUBuffer staging, uint64_t size, void *data) {
    map_result *r = calloc(1, sizeof *r);
    if (!r) return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = gpu_on_map;
    cb.userdata1 = r;
    wgpuBufferMapAsync(staging, WGPUMapMode_Read, 0, (size_t)size, cb);
    wgml_status s = gpu_wait_flag(ctx, &r->done, "reading back from the GPU");
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
    gpu_scope_push(ctx);
    WGPUBuffer staging = wgpuDeviceCreateBuffer(ctx->device, &d);
    if ((s = gpu_scope_pop(ctx, "allocating a readback buffer")) || !staging) {
        if (staging) wgpuBufferRelease(staging);
        return s ? s : wgml_set_error(ctx, WGML_ERR_OOM, "allocating a readback buffer");
    }
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
    wgpuCommandEncoderCopyBufferToBuffer(enc, b->buf, start, staging, 0, n);
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, NULL);
    wgpuQueueSubmit(ctx->queue, 1, &cmd);
    ctx->submits++;
    ctx->written = 0; /* the submit flushes the queue writes before it */
    wgpuCommandBufferRelease(cmd);
    wgpuCommandEncoderRelease(enc);
    uint8_t *tmp = malloc((size_t)n);
    if (!tmp) {
        wgpuBufferRelease(staging);
        return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory for a readback of %llu bytes",
                              (unsigned long long)n);
    }
    s = gpu_map_read(ctx, staging, n, tmp);
    if (!s) memcpy(data, tmp + (offset - start), (size_t)size);
    if (!s) ctx->read_bytes += size;
    free(tmp);
    wgpuBufferRelease(staging);
    if (!s) s = gpu_take_pending(ctx, "reading back from the GPU");
    return s;
}
