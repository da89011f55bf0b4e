/* wgml: neural-network training and inference on any GPU through WebGPU.
 *
 * One public header. Everything is reached through opaque handles:
 *   wgml_ctx    - a GPU device, its caches and the last error message;
 *   wgml_graph  - a list of recorded ops. The context's eager graph runs each op as soon as
 *                 a result is needed; a graph made with wgml_graph_new is built once,
 *                 compiled (memory plan, bind groups) and run many times;
 *   wgml_tensor - a shaped, typed region of GPU memory.
 *
 * Errors: functions that return wgml_status return WGML_OK or an error code; functions that
 * return a pointer return NULL on error. Either way wgml_last_error(ctx) says what went wrong
 * (which op, which argument, which shapes). Nothing aborts the process on bad input, and an
 * op given a NULL input returns NULL, so a chain of calls can be checked once at its end.
 */
#ifndef WGML_H
#define WGML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WGML_MAX_RANK 8

typedef struct wgml_ctx wgml_ctx;
typedef struct wgml_graph wgml_graph;
typedef struct wgml_tensor wgml_tensor;

typedef enum wgml_status {
    WGML_OK = 0,
    WGML_ERR_ARG,          /* a bad argument: NULL, out of range, wrong count */
    WGML_ERR_SHAPE,        /* shapes that do not fit the op */
    WGML_ERR_DTYPE,        /* a dtype the op does not take */
    WGML_ERR_LIMIT,        /* over a device limit (binding size, buffer size) */
    WGML_ERR_OOM,          /* the device could not allocate */
    WGML_ERR_GPU,          /* a WebGPU validation or internal error */
    WGML_ERR_DEVICE_LOST,  /* the device is gone; only wgml_ctx_destroy is useful now */
    WGML_ERR_TIMEOUT,      /* a wait for the GPU did not finish in time */
    WGML_ERR_NO_ADAPTER,   /* no usable GPU adapter (or none matching WGML_ADAPTER) */
    WGML_ERR_VERSION,      /* the wgpu-native library found is not the expected one */
    WGML_ERR_IO,           /* a file could not be read or written */
    WGML_ERR_FORMAT,       /* a file's contents are malformed */
    WGML_ERR_UNSUPPORTED,  /* valid but not implemented */
    WGML_ERR_STATE         /* a call out of order (running a graph that is not compiled) */
} wgml_status;

typedef enum wgml_dtype {
    WGML_F32 = 0,
    WGML_I32,
    WGML_U32,
    WGML_BOOL /* one byte per element, 0 or 1 */
} wgml_dtype;

/* ---- context ---------------------------------------------------------------------------- */

typedef struct wgml_ctx_options {
    const char *adapter;      /* substring of the adapter name to pick; NULL: $WGML_ADAPTER, else
                                 prefer discrete GPU, then integrated, then CPU */
    int poison_outputs;       /* fill every newly allocated tensor with NaN bits (tests) */
    double timeout_s;         /* longest wait for the GPU before WGML_ERR_TIMEOUT; 0: $WGML_TIMEOUT_S or 600 */
    int verbose;              /* log the adapter and the limits obtained to stderr */
} wgml_ctx_options;

wgml_status wgml_ctx_create(const wgml_ctx_options *options, wgml_ctx **out);
void wgml_ctx_destroy(wgml_ctx *ctx);
/* The message of the last error on this context ("" when none). */
const char *wgml_last_error(const wgml_ctx *ctx);
wgml_status wgml_last_status(const wgml_ctx *ctx);
void wgml_clear_error(wgml_ctx *ctx);
const char *wgml_status_name(wgml_status s);
/* A message for a failure of wgml_ctx_create (when there is no context to ask). */
const char *wgml_create_error(void);

/* What the device is and offers. */
typedef struct wgml_device_info {
    char adapter[256], vendor[128], architecture[128], driver[256], backend[32], type[32];
    uint32_t wgpu_version; /* wgpuGetVersion(), e.g. 0x1D000101 for 29.0.1.1 */
    uint64_t max_storage_binding, max_buffer_size;
    uint32_t max_workgroup_storage, max_invocations, max_workgroup_size_x, max_workgroups_per_dim;
    uint32_t max_storage_buffers_per_stage, min_storage_offset_align, min_uniform_offset_align;
    int has_f16, has_subgroups, has_timestamps, has_f32_atomics;
    uint32_t subgroup_min, subgroup_max;
} wgml_device_info;
void wgml_device_get_info(const wgml_ctx *ctx, wgml_device_info *info);
/* Writes a readable report of the adapter, limits and features. */
void wgml_device_print(const wgml_ctx *ctx, void *file /* FILE* */);

/* ---- graphs ----------------------------------------------------------------------------- */

/* The context's eager graph: ops record into it and run when a result is read or on wgml_sync. */
wgml_graph *wgml_eager(wgml_ctx *ctx);
/* Runs what the eager graph has recorded and waits for the device. */
wgml_status wgml_sync(wgml_ctx *ctx);

/* A graph built once and run many times. Record ops into it, then compile, then run. */
wgml_graph *wgml_graph_new(wgml_ctx *ctx);
void wgml_graph_free(wgml_graph *g);
/* Keep t alive (and readable) at the end of every run; others may share memory. */
wgml_status wgml_graph_keep(wgml_graph *g, wgml_tensor *t);
/* Plans memory (liveness-based arena), creates pipelines, uniforms and bind groups. */
wgml_status wgml_graph_compile(wgml_graph *g);
/* Records the whole graph into one command buffer and submits it once. Does not wait. */
wgml_status wgml_graph_run(wgml_graph *g);
/* As wgml_graph_run, then waits and reports the GPU time (timestamps) or, without timestamp
 * support, the wall time of the run. */
wgml_status wgml_graph_run_timed(wgml_graph *g, double *seconds);
size_t wgml_graph_dispatch_count(const wgml_graph *g);
uint64_t wgml_graph_arena_bytes(const wgml_graph *g);
/* Submits made on the context so far (a run is one). */
uint64_t wgml_submit_count(const wgml_ctx *ctx);

/* ---- tensors ---------------------------------------------------------------------------- */

/* A tensor that keeps its contents across runs (parameters, inputs, optimizer state). In the
 * eager graph every tensor is of this kind. Its contents are undefined until written. */
wgml_tensor *wgml_tensor_new(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape);
wgml_status wgml_tensor_write(wgml_tensor *t, const void *data, size_t bytes);
/* Reads back; waits for the work that produces t. */
wgml_status wgml_tensor_read(wgml_tensor *t, void *data, size_t bytes);
/* Releases t's memory now (eager graph; in a built graph tensors live as long as the graph). */
void wgml_tensor_free(wgml_tensor *t);

wgml_dtype wgml_tensor_dtype(const wgml_tensor *t);
int wgml_tensor_rank(const wgml_tensor *t);
int64_t wgml_tensor_dim(const wgml_tensor *t, int i); /* negative i counts from the end */
int64_t wgml_tensor_numel(const wgml_tensor *t);
size_t wgml_tensor_nbytes(const wgml_tensor *t);
size_t wgml_dtype_size(wgml_dtype d);
const char *wgml_dtype_name(wgml_dtype d);

/* ---- fill --------------------------------------------------------------------------------- */

wgml_tensor *wgml_full(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape, double value);
/* Writes value into every element of t (in place). */
wgml_status wgml_fill(wgml_graph *g, wgml_tensor *t, double value);

/* ---- dense linear algebra (fp32) ------------------------------------------------------- */

/* out[M,N] = a[M,K] · b[K,N] */
wgml_tensor *wgml_mm(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);
/* out[B,M,N] = a[B,M,K] · b[B,K,N] */
wgml_tensor *wgml_bmm(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);
/* out[...,N] = x[...,K] · w[N,K]ᵀ + bias[N]; bias may be NULL; leading dims flatten to M. */
wgml_tensor *wgml_linear(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias);
/* out[M,N] = beta·c + alpha·(a · b); c broadcasts to [M,N] ([N], [1,N], [M,1] or [M,N]). */
wgml_tensor *wgml_addmm(wgml_graph *g, wgml_tensor *c, wgml_tensor *a, wgml_tensor *b, float beta, float alpha);
/* The general product with transpose flags (for backward passes, without transpose copies):
 *   a is [.., M, K] (or [.., K, M] when trans_a), b is [.., K, N] (or [.., N, K] when trans_b);
 *   rank 2 or 3 (batched; a batch of 1 broadcasts). */
wgml_tensor *wgml_matmul(wgml_graph *g, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b);

/* Weight gradient of a linear layer: dw[N,K] = Σ_m d_out[m,N]ᵀ x[m,K] (leading dims of d_out
 * and x flatten to the same M), written into dw, or added to it when accumulate is set. */
wgml_status wgml_linear_dw(wgml_graph *g, wgml_tensor *d_out, wgml_tensor *x, wgml_tensor *dw, int accumulate);

/* Kernel variant selection for tests and benchmarks: -1 automatic (default), else an index
 * into the matmul variant table (see wgml_matmul_variant_name). */
void wgml_matmul_force_variant(wgml_ctx *ctx, int variant);
int wgml_matmul_variant_count(void);
const char *wgml_matmul_variant_name(int variant);

/* ---- rope and attention ------------------------------------------------------------------ */

/* Rotary position embedding. x is f32 [B, S, H, D] (row-major, D fastest: batch, sequence,
 * head, head dimension; D even); positions is an i32 tensor [S] (every batch entry) or [B, S]
 * (a tensor, so a built graph can be replayed with new positions). Pair i (0 <= i < D/2) is
 * rotated by the angle pos * theta^(-2i/D):
 *   (a, b) -> (a cos - b sin, a sin + b cos).
 * WGML_ROPE_HALF pairs elements i and i + D/2 (Hugging Face Llama); WGML_ROPE_INTERLEAVED
 * pairs 2i and 2i + 1 (GGML's normal mode, used with GGUF Llama weights). The angle is reduced
 * modulo 2pi in extended precision (error ~1e-7 rad for |pos| < 2^24). Returns a new tensor. */
typedef enum wgml_rope_style { WGML_ROPE_HALF = 0, WGML_ROPE_INTERLEAVED = 1 } wgml_rope_style;
wgml_tensor *wgml_rope(wgml_graph *g, wgml_tensor *x, wgml_tensor *positions, float theta, wgml_rope_style style);
/* Backward of wgml_rope: dx = dy rotated by -angle (same shapes and arguments). */
wgml_tensor *wgml_rope_backward(wgml_graph *g, wgml_tensor *dy, wgml_tensor *positions, float theta,
                                wgml_rope_style style);
/* Either direction (backward != 0: rotation by -angle) on either layout: WGML_ROPE_BSHD is
 * x [B, S, H, D] as above; WGML_ROPE_BHSD is x [B, H, S, D], the layout of wgml_sdpa's q and
 * k, so rope can be applied after the heads are split out without a transpose copy. */
typedef enum wgml_rope_layout { WGML_ROPE_BSHD = 0, WGML_ROPE_BHSD = 1 } wgml_rope_layout;
wgml_tensor *wgml_rope_ex(wgml_graph *g, wgml_tensor *x, wgml_tensor *positions, float theta, wgml_rope_style style,
                          wgml_rope_layout layout, int backward);

/* Scaled dot-product attention with grouped-query heads:
 *   out[b, h] = softmax(q[b, h] · k[b, h / (Hq/Hkv)]ᵀ · scale + mask) · v[b, h / (Hq/Hkv)]
 * q f32 [B, Hq, Sq, D], k and v f32 [B, Hkv, Skv, D] with Hq % Hkv == 0; out [B, Hq, Sq, D].
 * causal: the mask is aligned to the end: query i sits at position Skv - Sq + i and sees keys
 * 0 .. Skv - Sq + i (needs Sq <= Skv). scale <= 0 means the default 1/sqrt(D). */
wgml_tensor *wgml_sdpa(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, int causal, float scale);

/* KV cache for generation. A cache is an f32 tensor [B, Hkv, Smax, D] (made with
 * wgml_tensor_new). wgml_kv_append writes new [B, Hkv, Snew, D] into cache rows pos .. pos +
 * Snew - 1, where pos is read on the GPU from the i32 tensor pos (one element), so a built
 * graph can be replayed with a new position each step. Rows outside 0 .. Smax - 1 are skipped,
 * never written. */
wgml_status wgml_kv_append(wgml_graph *g, wgml_tensor *cache, wgml_tensor *new_rows, wgml_tensor *pos);
/* Attention of q [B, Hq, Sq, D] over the first len rows of the caches k_cache, v_cache
 * [B, Hkv, Smax, D], len read on the GPU from the i32 tensor len (one element, clamped to
 * 0 .. Smax). As wgml_sdpa with Skv = len (causal: query i sits at position len - Sq + i); a
 * query that sees no key (len - Sq + i < 0, or len = 0) gets zeros. */
wgml_tensor *wgml_sdpa_cached(wgml_graph *g, wgml_tensor *q, wgml_tensor *k_cache, wgml_tensor *v_cache,
                              wgml_tensor *len, int causal, float scale);

#ifdef __cplusplus
}
#endif
#endif
