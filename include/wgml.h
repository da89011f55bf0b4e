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

/* ---- q4 ---------------------------------------------------------------------------------- */
/* Frozen 4-bit (and 8-bit) weights W[N, K] (N outputs, K inputs) and the operators on them.
 *
 * Meaning (see the 4-bit spec): K is cut into groups of G consecutive elements; each element
 * has a code c and each (row, group) a pair (a, b):
 *   WGML_Q4_SYM  w = (c - 8)·scale          (ExecuTorch q4gsw, GGUF Q4_0; a = scale)
 *   WGML_Q4_MIN  w = c·d + m                (GGUF Q4_1; a = d, b = m)
 *   WGML_Q8      w = c·d, c a signed int8   (GGUF Q8_0, G = 32; a = d)
 *
 * GPU layout (the one layout every 4-bit operator reads and requant writes):
 *   Kp = K rounded up to G; G is a positive multiple of 32 (so a block of 32 codes never
 *   straddles two groups).
 *   codes: u32 [N, Kp/8] for 4 bits: word j of row n holds k = 8j+i in bits 4i..4i+3
 *          (i = 0..7); codes of the padding k >= K are 8 (SYM) or 0 (MIN).
 *          u32 [N, Kp/4] for Q8: word j holds k = 4j+i as an int8 in bits 8i..8i+7.
 *   ab:    f32 [N, Kp/G] (SYM: the scale; Q8: d), or f32 [N, Kp/G, 2] (MIN: d, m pairs),
 *          row-major, so the groups of one output row are contiguous.
 *   bias:  f32 [N] or NULL.
 * A weight is only tensors of one graph; free the struct with wgml_q4_free (before freeing a
 * built graph; in a built graph the tensors live as long as the graph). */
typedef enum wgml_qkind { WGML_Q4_SYM = 0, WGML_Q4_MIN = 1, WGML_Q8 = 2 } wgml_qkind;
typedef struct wgml_q4_weight {
    wgml_tensor *codes, *ab, *bias;
    int64_t n, k, kp; /* outputs, inputs, inputs padded to the group size */
    int group;        /* G */
    int has_min;      /* kind == WGML_Q4_MIN */
    wgml_qkind kind;
} wgml_q4_weight;

/* GGUF (ggml) tensor type numbers the 4-bit code knows by name. */
enum {
    WGML_GGUF_F32 = 0, WGML_GGUF_F16 = 1, WGML_GGUF_Q4_0 = 2, WGML_GGUF_Q4_1 = 3,
    WGML_GGUF_Q8_0 = 8, WGML_GGUF_BF16 = 30
};

/* Host side (no GPU; errors are read with wgml_last_error(NULL)). */
/* The ggml name of a type number ("Q4_0", ...; "type <n>" in a static buffer when unknown). */
const char *wgml_gguf_type_name(int type);
/* Bytes of one row of k elements of a GGUF type (0 when unsupported or k does not fit the
 * type's block of 32). */
size_t wgml_gguf_row_bytes(int type, int64_t k);
/* Dequantises a GGUF tensor of n rows of k elements (ne = [k, n]) into out[n*k] exactly as the
 * gguf Python package does (F32, F16, BF16, Q4_0, Q4_1, Q8_0); bytes must be n rows' worth. */
wgml_status wgml_gguf_dequantize(int type, const void *data, size_t bytes, int64_t n, int64_t k, float *out);
/* Dequantises ExecuTorch flat q4gsw tensors: codes uint8 [n, ceil(k/2)] (k = 2j low nibble,
 * k = 2j+1 high nibble), scales f32 [ceil(k/G), round_up(n, 4)]; out f32 [n, k]. */
wgml_status wgml_q4gsw_dequantize(const uint8_t *codes, const float *scales, int64_t n, int64_t k, int group,
                                  float *out);
/* Quantises w[n, k] into the flat q4gsw tensors (same shapes as above; scale padding is 0):
 * per (row, group) scale = max|w| / 7 (fp32), code = clamp(round_half_even(w / scale), -8, 7)
 * + 8 with the division in fp32; an all-zero group has scale 0 and codes 8. */
wgml_status wgml_q4gsw_quantize(const float *w, int64_t n, int64_t k, int group, uint8_t *codes, float *scales);

/* Upload (GPU layout above). Each returns a malloc'ed weight whose tensors are persistent
 * tensors of g, or NULL with the error on g's context. */
/* From flat q4gsw: codes [n, ceil(k/2)], scales [ceil(k/G), round_up(n,4)], bias [n] or NULL. */
wgml_q4_weight *wgml_q4_upload_q4gsw(wgml_graph *g, const uint8_t *codes, const float *scales, const float *bias,
                                     int64_t n, int64_t k, int group);
/* From GGUF blocks of a weight W[n, k] (ne = [k, n]): Q4_0, Q4_1 or Q8_0; k a multiple of 32;
 * bytes must equal n * wgml_gguf_row_bytes(type, k). */
wgml_q4_weight *wgml_q4_upload_gguf(wgml_graph *g, int type, const void *data, size_t bytes, int64_t n, int64_t k);
/* Quantises fp32 w[n, k] with wgml_q4gsw_quantize and uploads it (symmetric, group G). */
wgml_q4_weight *wgml_q4_quantize(wgml_graph *g, const float *w, int64_t n, int64_t k, int group);
/* Frees the struct and (in the eager graph) its tensors. NULL is fine. Call it before
 * wgml_graph_free of the weight's graph. */
void wgml_q4_free(wgml_q4_weight *w);

/* Operators (any kind unless said). */
/* out[..., N] = x[..., K] · dequant(W)ᵀ (+ W's bias); leading dims flatten to M. M <= 4 uses
 * the GEMV kernel, larger M the tiled GEMM kernel. */
wgml_tensor *wgml_q4_linear(wgml_graph *g, wgml_tensor *x, const wgml_q4_weight *w);
/* Input gradient: d_x[..., K] = d_out[..., N] · dequant(W). No gradient for codes or scales. */
wgml_tensor *wgml_q4_linear_dx(wgml_graph *g, wgml_tensor *d_out, const wgml_q4_weight *w);
/* Straight-through requant (4-bit kinds): rewrites w->codes in place from the fp32 latent
 * [N, K] at the frozen (a, b). SYM: code = clamp(round_half_even(latent / scale), -8, 7) + 8,
 * scale 0 gives 8. MIN: code = clamp(round_half_even((latent - m) / d), 0, 15), d 0 gives 0
 * (every code is then the weight m). The weight gradient is wgml_linear_dw. */
wgml_status wgml_q4_requant(wgml_graph *g, wgml_tensor *latent, const wgml_q4_weight *w);
/* Embedding lookup in a quantised table W[V, D]: out[..., D] = dequant(W)[ids[...], :] with
 * ids i32 of any shape; ids outside [0, V) are clamped into it on the GPU. */
wgml_tensor *wgml_q4_embedding(wgml_graph *g, const wgml_q4_weight *table, wgml_tensor *ids);
/* The whole weight dequantised: f32 [N, K], exactly the host dequantisation (e.g. to start
 * an fp32 latent for straight-through training without a host round trip). */
wgml_tensor *wgml_q4_dequantize(wgml_graph *g, const wgml_q4_weight *w);
/* Times the M = 1 decode shapes (effective GB/s) and the M = 512 GEMM (GFLOP/s) with built
 * graphs of repeated dispatches; writes a table to out (a FILE*). Returns 0 on success. */
int wgml_q4_bench(wgml_ctx *ctx, void *out);

#ifdef __cplusplus
}
#endif
#endif
