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

/* ---- elementwise ---- */
/* All f32 unless stated. Two-operand ops broadcast NumPy-style (shapes right-aligned, a missing
 * or size-1 dimension repeats; rank <= 8); the result has the broadcast shape. A tensor-scalar
 * form takes the number as a float and keeps a's shape. In a built graph the numbers (alpha,
 * scalars, clamp bounds) are fixed when the op is recorded. */

typedef enum wgml_binary_op {
    WGML_BIN_ADD = 0, /* a + alpha·b */
    WGML_BIN_SUB,     /* a − alpha·b */
    WGML_BIN_MUL,     /* a·b */
    WGML_BIN_DIV,     /* a / b (true division; no special handling of zero) */
    WGML_BIN_MINIMUM, /* min(a, b); NaN if either is NaN */
    WGML_BIN_MAXIMUM, /* max(a, b); NaN if either is NaN */
    WGML_BIN_POW      /* a ** b (a negative base with an integral exponent gives the real power) */
} wgml_binary_op;
/* out = a (op) b with broadcasting; alpha is used by add and sub only. */
wgml_tensor *wgml_binary(wgml_graph *g, wgml_binary_op op, wgml_tensor *a, wgml_tensor *b, float alpha);
/* out = a (op) s, a tensor and a number (b replaced by s above); alpha: add and sub only. */
wgml_tensor *wgml_binary_scalar(wgml_graph *g, wgml_binary_op op, wgml_tensor *a, float s, float alpha);
wgml_tensor *wgml_add(wgml_graph *g, wgml_tensor *a, wgml_tensor *b, float alpha); /* a + alpha·b */
wgml_tensor *wgml_sub(wgml_graph *g, wgml_tensor *a, wgml_tensor *b, float alpha); /* a − alpha·b */
wgml_tensor *wgml_mul(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);              /* a·b */
wgml_tensor *wgml_div(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);              /* a / b */
wgml_tensor *wgml_minimum(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);          /* min(a, b) */
wgml_tensor *wgml_maximum(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);          /* max(a, b) */
wgml_tensor *wgml_pow(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);              /* a ** b */
wgml_tensor *wgml_add_scalar(wgml_graph *g, wgml_tensor *a, float s, float alpha); /* a + alpha·s */
wgml_tensor *wgml_sub_scalar(wgml_graph *g, wgml_tensor *a, float s, float alpha); /* a − alpha·s */
wgml_tensor *wgml_mul_scalar(wgml_graph *g, wgml_tensor *a, float s);              /* a·s */
wgml_tensor *wgml_div_scalar(wgml_graph *g, wgml_tensor *a, float s);              /* a / s */
wgml_tensor *wgml_minimum_scalar(wgml_graph *g, wgml_tensor *a, float s);          /* min(a, s) */
wgml_tensor *wgml_maximum_scalar(wgml_graph *g, wgml_tensor *a, float s);          /* max(a, s) */
wgml_tensor *wgml_pow_scalar(wgml_graph *g, wgml_tensor *a, float s);              /* a ** s */

typedef enum wgml_unary_op {
    WGML_UN_RELU = 0,  /* max(x, 0) */
    WGML_UN_SIGMOID,   /* 1 / (1 + exp(−x)) */
    WGML_UN_SILU,      /* x·sigmoid(x) */
    WGML_UN_GELU,      /* x·Φ(x) = x/2·(1 + erf(x/√2)), the exact form */
    WGML_UN_GELU_TANH, /* x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))) */
    WGML_UN_EXP,
    WGML_UN_LOG,       /* natural log */
    WGML_UN_NEG,
    WGML_UN_ABS,
    WGML_UN_SQRT,
    WGML_UN_RSQRT,     /* 1 / sqrt(x) */
    WGML_UN_TANH       /* accurate for every x (no overflow to NaN for large |x|) */
} wgml_unary_op;
/* out = f(x), same shape. */
wgml_tensor *wgml_unary(wgml_graph *g, wgml_unary_op op, wgml_tensor *x);
wgml_tensor *wgml_relu(wgml_graph *g, wgml_tensor *x);    /* max(x, 0) */
wgml_tensor *wgml_sigmoid(wgml_graph *g, wgml_tensor *x); /* 1 / (1 + exp(−x)) */
wgml_tensor *wgml_silu(wgml_graph *g, wgml_tensor *x);    /* x·sigmoid(x) */
/* gelu: the exact erf form, or the tanh approximation when tanh_form is set. */
wgml_tensor *wgml_gelu(wgml_graph *g, wgml_tensor *x, int tanh_form);
wgml_tensor *wgml_exp(wgml_graph *g, wgml_tensor *x);     /* e^x */
wgml_tensor *wgml_log(wgml_graph *g, wgml_tensor *x);     /* ln x */
wgml_tensor *wgml_neg(wgml_graph *g, wgml_tensor *x);     /* −x */
wgml_tensor *wgml_abs(wgml_graph *g, wgml_tensor *x);     /* |x| */
wgml_tensor *wgml_sqrt(wgml_graph *g, wgml_tensor *x);    /* √x */
wgml_tensor *wgml_rsqrt(wgml_graph *g, wgml_tensor *x);   /* 1 / √x */
wgml_tensor *wgml_tanh(wgml_graph *g, wgml_tensor *x);    /* tanh x */
/* out = min(max(x, lo), hi) (hi wins when lo > hi, NaN stays NaN, as in PyTorch). */
wgml_tensor *wgml_clamp(wgml_graph *g, wgml_tensor *x, float lo, float hi);

typedef enum wgml_compare_op { WGML_CMP_EQ = 0, WGML_CMP_NE, WGML_CMP_LT, WGML_CMP_LE, WGML_CMP_GT, WGML_CMP_GE } wgml_compare_op;
/* bool out = a (op) b for f32 a and b, with broadcasting (NaN: false, except ne). */
wgml_tensor *wgml_compare(wgml_graph *g, wgml_compare_op op, wgml_tensor *a, wgml_tensor *b);
/* bool out = a (op) s for f32 a, a's shape. */
wgml_tensor *wgml_compare_scalar(wgml_graph *g, wgml_compare_op op, wgml_tensor *a, float s);
wgml_tensor *wgml_eq(wgml_graph *g, wgml_tensor *a, wgml_tensor *b); /* a == b */
wgml_tensor *wgml_ne(wgml_graph *g, wgml_tensor *a, wgml_tensor *b); /* a != b */
wgml_tensor *wgml_lt(wgml_graph *g, wgml_tensor *a, wgml_tensor *b); /* a < b */
wgml_tensor *wgml_le(wgml_graph *g, wgml_tensor *a, wgml_tensor *b); /* a <= b */
wgml_tensor *wgml_gt(wgml_graph *g, wgml_tensor *a, wgml_tensor *b); /* a > b */
wgml_tensor *wgml_ge(wgml_graph *g, wgml_tensor *a, wgml_tensor *b); /* a >= b */
wgml_tensor *wgml_eq_scalar(wgml_graph *g, wgml_tensor *a, float s); /* a == s */
wgml_tensor *wgml_ne_scalar(wgml_graph *g, wgml_tensor *a, float s); /* a != s */
wgml_tensor *wgml_lt_scalar(wgml_graph *g, wgml_tensor *a, float s); /* a < s */
wgml_tensor *wgml_le_scalar(wgml_graph *g, wgml_tensor *a, float s); /* a <= s */
wgml_tensor *wgml_gt_scalar(wgml_graph *g, wgml_tensor *a, float s); /* a > s */
wgml_tensor *wgml_ge_scalar(wgml_graph *g, wgml_tensor *a, float s); /* a >= s */
/* Logical ops on bool tensors (a non-zero byte is true); bool out; and/or broadcast. */
wgml_tensor *wgml_logical_not(wgml_graph *g, wgml_tensor *a);                 /* !a */
wgml_tensor *wgml_logical_and(wgml_graph *g, wgml_tensor *a, wgml_tensor *b); /* a && b */
wgml_tensor *wgml_logical_or(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);  /* a || b */
/* out = cond ? a : b elementwise; cond bool, a and b f32; the three broadcast together. */
wgml_tensor *wgml_where(wgml_graph *g, wgml_tensor *cond, wgml_tensor *a, wgml_tensor *b);

#ifdef __cplusplus
}
#endif
#endif
