/* The GPU layer: the only part of wgml that includes webgpu.h, and the interface the layers
 * above use. The device and its errors (device.c), buffers and a pool (memory.c), pipelines,
 * cached, and bind groups (pipeline.c), one-pass submits, readback and timestamps (submit.c);
 * wgpu-native's own extensions (native.c). Layers above see opaque handles only; this layer
 * knows nothing of graphs or ops. */
#ifndef WGML_GPU_H
#define WGML_GPU_H

#include "wgml.h"
#include <stdarg.h>
#include <stdbool.h>

/* ---- the device ---- */
/* Creates the WebGPU instance, picks the adapter, creates the device with the adapter's
 * limits (wgml_ctx_create's options). WGML_OK and *out, or the error (wgml_create_error). The
 * public wgml_ctx_create / wgml_ctx_destroy (graph layer) call these. */
wgml_status gpu_device_create(const wgml_ctx_options *options, wgml_ctx **out);
/* Waits for queued work (unless the device is lost), releases the pool, the pipelines and the
 * device, frees ctx. What the layers above keep in layer_state must be freed first. */
void gpu_device_destroy(wgml_ctx *ctx);
/* A pointer the layers above keep per context (the graph layer's context state); the gpu
 * layer stores it and never reads it. NULL until set. */
void *gpu_ctx_layer_state(const wgml_ctx *ctx);
void gpu_ctx_set_layer_state(wgml_ctx *ctx, void *state);

/* ---- errors (kept on the context) ---- */
/* The bytes of a context's message, NUL included: a longer one is cut (wgml_set_error). */
#define WGML_ERROR_MAX 1024
wgml_status wgml_set_error(wgml_ctx *ctx, wgml_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* WGML_OK, or the sticky device-lost status. */
wgml_status gpu_check_alive(wgml_ctx *ctx);

/* ---- capabilities ---- */
typedef struct gpu_caps {
    uint64_t max_storage_binding, max_buffer_size;
    uint32_t max_workgroup_storage, max_invocations, max_wg_x, max_wg_per_dim;
    uint32_t storage_align, uniform_align, max_storage_per_stage;
    bool f16, subgroups, timestamps, f32_atomics, is_cpu;
    bool dot4i8; /* WGSL's packed_4x8_integer_dot_product (dot4I8Packed) */
    uint32_t subgroup_min, subgroup_max;
} gpu_caps;
const gpu_caps *gpu_get_caps(const wgml_ctx *ctx);
double gpu_timeout(const wgml_ctx *ctx);
bool gpu_poison_outputs(const wgml_ctx *ctx);

/* ---- buffers ---- */
typedef struct gpu_buffer gpu_buffer;
/* A storage buffer (also copy source/destination) of at least size bytes, from the pool. */
gpu_buffer *gpu_buffer_get(wgml_ctx *ctx, uint64_t size, const char *what);
/* Back to the pool. */
void gpu_buffer_put(wgml_ctx *ctx, gpu_buffer *b);
/* A uniform buffer (not pooled); release with gpu_buffer_release. */
gpu_buffer *gpu_uniform_create(wgml_ctx *ctx, uint64_t size);
void gpu_buffer_release(gpu_buffer *b);
uint64_t gpu_buffer_size(const gpu_buffer *b);
wgml_status gpu_write(wgml_ctx *ctx, gpu_buffer *b, uint64_t offset, const void *data, uint64_t size);
/* Submits a copy of b[offset, offset+size) into a staging buffer and waits for it. */
wgml_status gpu_read(wgml_ctx *ctx, gpu_buffer *b, uint64_t offset, void *data, uint64_t size);

/* ---- pipelines ---- */
typedef struct gpu_pipeline gpu_pipeline;
/* The compute pipeline of WGSL file `shader` (entry point "main") with `prelude` (WGSL text,
 * typically `const X: u32 = ...;` lines that pick a variant) prepended. Bindings: n_ro
 * read-only storage buffers at 0.., then n_rw read-write storage buffers, then, when
 * has_uniform, one uniform buffer. Cached by (shader, prelude, bindings).
 * With all_writable every storage binding is read-write (the WGSL's `var<storage, read>` is
 * rewritten): WebGPU forbids one buffer bound read-only and writable in one dispatch, which
 * happens when inputs and outputs share a graph's arena. With ahead (a built graph's kernel,
 * not to run at once), a CPU adapter's driver may be given it to compile ahead (ahead.c). */
gpu_pipeline *gpu_pipeline_get(wgml_ctx *ctx, const char *shader, const char *prelude,
                               int n_ro, int n_rw, bool has_uniform, bool all_writable, bool ahead);

/* Compiling ahead on CPU adapters (ahead.c): whether the context's thread is on; the kernels
 * given to it and those it compiled. With wait_s > 0 it first waits, up to wait_s seconds, for
 * the thread to finish what it has. For tests and diagnostics. */
bool gpu_ahead_stats(wgml_ctx *ctx, double wait_s, uint64_t *given, uint64_t *compiled);

/* ---- bind groups and dispatches ---- */
typedef struct gpu_bind_group gpu_bind_group;
typedef struct gpu_range {
    gpu_buffer *buf;
    uint64_t offset, size;
} gpu_range;
gpu_bind_group *gpu_bind_group_create(wgml_ctx *ctx, gpu_pipeline *p, const gpu_range *ranges, int n);
void gpu_bind_group_release(gpu_bind_group *bg);

typedef struct gpu_dispatch {
    gpu_pipeline *pipeline;
    gpu_bind_group *bind_group;
    uint32_t x, y, z;
} gpu_dispatch;

/* Records all dispatches into one compute pass of one command buffer and submits it once.
 * With time_out != NULL, waits and writes the GPU time of the pass in seconds (timestamps;
 * wall time when the device has none). */
wgml_status gpu_submit(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, double *time_out);
/* Profiled run: each dispatch in its own timestamped pass; seconds[i] = GPU time of d[i]. */
wgml_status gpu_submit_profile(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, double *seconds);
/* Asynchronous submit with readback (for work kept on the GPU across submits, such as greedy
 * decoding): records d[0..n) `repeat` times over into one compute pass (timestamped at its
 * start and end when timed and the device has timestamps), then a copy of src[offset, offset +
 * size) (whole words) into a staging buffer, submits, starts mapping the staging buffer and
 * returns without waiting. NULL on error. Later submits queue behind it, so the host can keep
 * the GPU busy while it waits for an earlier one.
 * gpu_async_wait waits until the mapping completes (the submit has run), copies the bytes to
 * data (may be NULL) and the pass's GPU seconds to *seconds (-1 without timestamps), and frees
 * a (also on error). gpu_async_free drops one without waiting (its results are lost). */
typedef struct gpu_async gpu_async;
gpu_async *gpu_submit_async(wgml_ctx *ctx, const gpu_dispatch *d, size_t n, size_t repeat, gpu_buffer *src,
                            uint64_t offset, uint64_t size, bool timed);
wgml_status gpu_async_wait(wgml_ctx *ctx, gpu_async *a, void *data, double *seconds);
void gpu_async_free(gpu_async *a);
/* Waits until the queue is empty (bounded by the context's timeout). */
wgml_status gpu_wait_idle(wgml_ctx *ctx);

/* ---- shaders ---- */
/* The embedded WGSL source of a kernel file (name without .wgsl), or NULL. */
const char *gpu_shader_source(const char *name);

/* ---- time ---- */
/* Monotonic wall time in nanoseconds. */
uint64_t gpu_now_ns(void);

#endif
