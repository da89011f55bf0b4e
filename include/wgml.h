/* wgml: neural-network training and inference on any GPU through WebGPU.
 *
 * This header is the core: the context, tensors, graphs, the ops by family and autograd; the
 * quantised weights (4-, 5-, 6-, 8-bit codes and f32: upload and the ops on them) are declared
 * in wgml-quant.h, which this header includes at its end.
 * Two headers build on it, one layer each, as the library's directories do:
 *   wgml-model.h - GGUF files, the tokenizer, the chat template, the Llama model, generation
 *                  and sampling;
 *   wgml-train.h - AdamW, the trainer, checkpoints, adapter files, training data and reports.
 * Everything is reached through opaque handles:
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

/* ---- context and device info ------------------------------------------------------------- */
/* A context owns one GPU device, its caches, its eager graph and the last error; every other
 * handle belongs to one context. */

typedef struct wgml_ctx_options {
    const char *adapter;      /* substring of the adapter name to pick; NULL: $WGML_ADAPTER, else
                                 prefer discrete GPU, then integrated, then CPU */
    int poison_outputs;       /* fill every newly allocated tensor with NaN bits (tests) */
    double timeout_s;         /* longest wait for the GPU before WGML_ERR_TIMEOUT; 0: $WGML_TIMEOUT_S or 600 */
    int verbose;              /* log the adapter and the limits obtained to stderr */
    int checked_shaders;      /* compile kernels with naga's runtime checks (bounds clamping, loop
                                 bounding); also $WGML_SHADER_CHECKS=1. Default: trusted kernels,
                                 which the tests run in both modes */
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

/* ---- measuring counters ------------------------------------------------------------------ */
/* Counters of the work a context has done, for tests and benchmarks that check what a call
 * costs (submits, host time, bytes read back). */

/* Submits made on the context so far (a run is one). */
uint64_t wgml_submit_count(const wgml_ctx *ctx);
/* CPU time (this thread's) spent recording and submitting graph runs on ctx so far, in ns, and
 * the number of dispatches recorded: the host cost of one dispatch is cpu_ns / dispatches. */
void wgml_record_stats(const wgml_ctx *ctx, uint64_t *cpu_ns, uint64_t *dispatches);
/* Bytes read back from the GPU to the host on the context so far (every wgml_tensor_read and
 * internal readback), next to wgml_submit_count: lets tests check what a step reads. */
uint64_t wgml_read_bytes(const wgml_ctx *ctx);
/* Device memory the context holds in buffers, in bytes: in_use counts every buffer it has not
 * released, pool_idle the part of it that freed tensors left in the pool for reuse (given back
 * when an allocation would pass the budget or the device runs out), peak the most in_use has
 * been. WGML_MEMORY_TRACE=BYTES (K, M, G suffixes) logs every new buffer at least that large to
 * stderr with what it is for (a tensor's op, "graph arena", ...). */
typedef struct wgml_memory_stats {
    uint64_t in_use, pool_idle, peak;
} wgml_memory_stats;
void wgml_memory_get(const wgml_ctx *ctx, wgml_memory_stats *out);
/* The device's peak rate for one kind of instruction (`wgml bench peak`; kernels that do nothing
 * else, src/ops/probe): kind 0 f32 FMA, 1 the integer dot product (dot4I8Packed), 2 the
 * int-to-float conversion, 3 the same through the mantissa of 2^23, 4 f16 FMA (shader-f16);
 * WGML_PEAK_KINDS kinds.
 * `threads` threads of `steps` steps (at most 32768) of 16 independent chains each, timed as the
 * best of `runs` runs after warm-up (warmup_s seconds); *seconds the best run's time and
 * *ops_per_s its rate (an FMA counts 2, a dot4I8Packed 8, a conversion 1). Every run's result is
 * checked against the host's for 64 threads spread over the grid (WGML_ERR_GPU when one
 * differs). WGML_ERR_UNSUPPORTED for a kind the adapter lacks (the integer dot product, f16). */
#define WGML_PEAK_KINDS 5
const char *wgml_peak_name(int kind);
wgml_status wgml_peak_measure(wgml_ctx *ctx, int kind, uint32_t threads, uint32_t steps, double warmup_s, int runs,
                              double *seconds, double *ops_per_s);

/* ---- tensors and views ------------------------------------------------------------------- */
/* Tensors of a graph: persistent ones (parameters, inputs, state) and views that share their
 * memory. */

/* A tensor that keeps its contents across runs (parameters, inputs, optimizer state). In the
 * eager graph every tensor is of this kind. Its contents are undefined until written. */
wgml_tensor *wgml_tensor_new(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape);
wgml_status wgml_tensor_write(wgml_tensor *t, const void *data, size_t bytes);
/* Reads back; waits for the work that produces t. */
wgml_status wgml_tensor_read(wgml_tensor *t, void *data, size_t bytes);
/* Releases t's memory now (eager graph; in a built graph tensors live as long as the graph). */
void wgml_tensor_free(wgml_tensor *t);

/* Views share memory with x (no copy; x's storage stays alive while views exist).
 * reshape: the same elements in a new shape (numel must match).
 * tensor_view: numel(shape) elements starting at element `offset` of x (offset·element size a
 * multiple of the device's storage offset alignment, e.g. 256 bytes; lets one buffer hold many
 * parameters, so one dispatch can update all of them). */
wgml_tensor *wgml_reshape(wgml_graph *g, wgml_tensor *x, int rank, const int64_t *shape);
wgml_tensor *wgml_tensor_view(wgml_tensor *x, int64_t offset, int rank, const int64_t *shape);

wgml_dtype wgml_tensor_dtype(const wgml_tensor *t);
int wgml_tensor_rank(const wgml_tensor *t);
int64_t wgml_tensor_dim(const wgml_tensor *t, int i); /* negative i counts from the end */
int64_t wgml_tensor_numel(const wgml_tensor *t);
size_t wgml_tensor_nbytes(const wgml_tensor *t);
size_t wgml_dtype_size(wgml_dtype d);
const char *wgml_dtype_name(wgml_dtype d);

/* A view, in graph g, of a persistent tensor x of another graph of the same context: lets
 * several built graphs use one copy of weights and caches. x's graph must outlive g. */
wgml_tensor *wgml_tensor_share(wgml_graph *g, wgml_tensor *x);

/* ---- graphs: eager and built ------------------------------------------------------------- */
/* Where ops are recorded: the eager graph runs them as results are needed; a built graph is
 * recorded once, compiled and run many times (also timed, benchmarked and profiled). */

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
/* Benchmarking: runs g repeatedly for at least warmup_s seconds (an idle GPU runs at a fraction
 * of its clock and a short run ends before it speeds up), then `runs` timed runs; writes the
 * best and the median time of one run (GPU timestamps, else wall time). */
wgml_status wgml_graph_benchmark(wgml_graph *g, double warmup_s, int runs, double *best, double *median);
size_t wgml_graph_dispatch_count(const wgml_graph *g);
/* Profiling: one run of a compiled graph with each dispatch in its own timestamped pass;
 * seconds[i] (wgml_graph_dispatch_count entries) receives the GPU time of dispatch i. Needs
 * timestamp queries (WGML_ERR_UNSUPPORTED otherwise). */
wgml_status wgml_graph_profile(wgml_graph *g, double *seconds);
/* The op that recorded dispatch i and (shader may be NULL) its kernel's name; NULL past the end. */
const char *wgml_graph_dispatch_name(const wgml_graph *g, size_t i, const char **shader);
/* Dispatch i's workgroup count (0 past the end) and, in words[0..n), the first n 32-bit words
 * of its uniform block (zeros past its size): a GEMM's sizes come first in its parameters, so
 * a profile can tell the products of one op apart. */
uint64_t wgml_graph_dispatch_detail(const wgml_graph *g, size_t i, uint32_t *words, size_t n);
uint64_t wgml_graph_arena_bytes(const wgml_graph *g); /* all arenas together */
/* Intermediates go to arenas of at most the device's buffer size ($WGML_ARENA_BYTES lowers the
 * cap); no tensor straddles two. */
int wgml_graph_arena_count(const wgml_graph *g);

/* ==== ops ===================================================================================
 * Ops record into a graph and return their output (NULL on error) or a status; they are
 * grouped by family below, each forward op with its gradient. The gradients are standalone ops
 * too (the autograd rules call them): all f32, and every reduction runs in a fixed order (no
 * float atomics), so the same inputs give the same bits on every run. */

/* ---- creation and fill ------------------------------------------------------------------- */
/* New tensors with a value in every element, and filling one in place. */

wgml_tensor *wgml_full(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape, double value);
/* Writes value into every element of t (in place). */
wgml_status wgml_fill(wgml_graph *g, wgml_tensor *t, double value);

/* Creation (through wgml_full). Rank 0 is allowed: a rank-0 tensor holds one element. */
wgml_tensor *wgml_full_like(wgml_graph *g, wgml_tensor *x, double value); /* x's dtype and shape */
wgml_tensor *wgml_zeros(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape);
wgml_tensor *wgml_ones(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape);
/* A rank-0 tensor holding value. */
wgml_tensor *wgml_scalar_tensor(wgml_graph *g, wgml_dtype dtype, double value);

/* ---- matmul ------------------------------------------------------------------------------ */
/* Dense fp32 products (the tiled matmul family) and the weight gradient of a linear layer. */

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
/* The kernel variant and split-K factor a product out[batch, m, n] over k would use now (the
 * forced variant, $WGML_MATMUL_VARIANT, $WGML_MATMUL_SPLITK, else the automatic rules), for
 * benchmark reports: *variant indexes the variant table, *splits is the number of K slices
 * (1: none). trans_a / trans_b as wgml_matmul's (the skinny kernel's choice depends on them). */
void wgml_matmul_plan(wgml_ctx *ctx, int64_t batch, int64_t m, int64_t n, int64_t k, int trans_a, int trans_b,
                      int *variant, int *splits);

/* ---- elementwise ------------------------------------------------------------------------- */
/* Binary, unary, comparison and logical ops, clamp and where, with their gradients. */

/* All f32 unless stated. Two-operand ops broadcast NumPy-style (shapes right-aligned, a missing
 * or size-1 dimension repeats; rank <= 8); the result has the broadcast shape. A tensor-scalar
 * form takes the number as a float and keeps a's shape. In a built graph the numbers (alpha,
 * scalars, clamp bounds) are fixed when the op is recorded. */

/* The op tables: one row per op, X(NAME, name, value) (binary: X(NAME, name, value, i32)). A row
 * gives the enum constant WGML_UN_NAME / WGML_BIN_NAME / WGML_CMP_NAME = value, the op's name
 * (error messages, wgml_*_op_name, the Python package's op names) and the WGSL constant
 * UN_NAME / BIN_NAME / CMP_NAME that the kernels switch on (src/ops/elementwise/ew_ops.h). The
 * values are ABI: a new op takes the next value; none is reordered or reused.
 *
 * wgml_binary / wgml_binary_scalar also take two i32 operands (i32 out, no gradient) for the
 * rows whose i32 column is 1 (add, sub, mul, minimum, maximum and the rounding divisions), with
 * PyTorch's integer semantics (wrapping; floor division rounds toward −∞); the scalar and
 * alpha must then be integers. */
#define WGML_BINARY_OPS(X)                                                                     \
    X(ADD, add, 0, 1)             /* a + alpha·b */                                              \
    X(SUB, sub, 1, 1)             /* a − alpha·b */                                              \
    X(MUL, mul, 2, 1)             /* a·b */                                                      \
    X(DIV, div, 3, 0)             /* a / b (true division; no special handling of zero) */      \
    X(MINIMUM, minimum, 4, 1)     /* min(a, b); NaN if either is NaN */                          \
    X(MAXIMUM, maximum, 5, 1)     /* max(a, b); NaN if either is NaN */                          \
    X(POW, pow, 6, 0)             /* a ** b (a negative base with an integral exponent gives the \
                                   * real power) */                                              \
    X(DIV_TRUNC, div_trunc, 7, 1) /* trunc(a / b) (PyTorch's rounding_mode "trunc"); zero       \
                                   * gradient */                                                 \
    X(DIV_FLOOR, div_floor, 8, 1) /* floor(a / b) (rounding_mode "floor", floor_divide): of the \
                                   * f32 quotient, so exact for integer-valued operands below   \
                                   * 2^22; b == 0 gives a / b; zero gradient */
#define WGML_BIN_ENUM_(NAME, name, value, i32) WGML_BIN_##NAME = value,
typedef enum wgml_binary_op { WGML_BINARY_OPS(WGML_BIN_ENUM_) } wgml_binary_op;
#undef WGML_BIN_ENUM_
/* The op's name ("add", ...; the row's second column), or NULL for a value not in the table. */
const char *wgml_binary_op_name(wgml_binary_op op);
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
wgml_tensor *wgml_div_trunc(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);        /* trunc(a / b) */
wgml_tensor *wgml_div_floor(wgml_graph *g, wgml_tensor *a, wgml_tensor *b);        /* ⌊a / b⌋ */
wgml_tensor *wgml_add_scalar(wgml_graph *g, wgml_tensor *a, float s, float alpha); /* a + alpha·s */
wgml_tensor *wgml_sub_scalar(wgml_graph *g, wgml_tensor *a, float s, float alpha); /* a − alpha·s */
wgml_tensor *wgml_mul_scalar(wgml_graph *g, wgml_tensor *a, float s);              /* a·s */
wgml_tensor *wgml_div_scalar(wgml_graph *g, wgml_tensor *a, float s);              /* a / s */
wgml_tensor *wgml_minimum_scalar(wgml_graph *g, wgml_tensor *a, float s);          /* min(a, s) */
wgml_tensor *wgml_maximum_scalar(wgml_graph *g, wgml_tensor *a, float s);          /* max(a, s) */
wgml_tensor *wgml_pow_scalar(wgml_graph *g, wgml_tensor *a, float s);              /* a ** s */

#define WGML_UNARY_OPS(X)                                                                      \
    X(RELU, relu, 0)           /* max(x, 0) */                                                  \
    X(SIGMOID, sigmoid, 1)     /* 1 / (1 + exp(−x)) */                                          \
    X(SILU, silu, 2)           /* x·sigmoid(x) */                                               \
    X(GELU, gelu, 3)           /* x·Φ(x) = x/2·(1 + erf(x/√2)), the exact form */               \
    X(GELU_TANH, gelu_tanh, 4) /* x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))) */                   \
    X(EXP, exp, 5)                                                                              \
    X(LOG, log, 6)             /* natural log */                                                \
    X(NEG, neg, 7)                                                                              \
    X(ABS, abs, 8)                                                                              \
    X(SQRT, sqrt, 9)                                                                            \
    X(RSQRT, rsqrt, 10)        /* 1 / sqrt(x) */                                                \
    X(TANH, tanh, 11)          /* accurate for every x (no overflow to NaN for large |x|) */    \
    X(FLOOR, floor, 12)        /* floor, ceil, trunc, round: zero gradient (as PyTorch) */      \
    X(CEIL, ceil, 13)                                                                           \
    X(TRUNC, trunc, 14)                                                                         \
    X(ROUND, round, 15)        /* to the nearest integer, halves to even (as PyTorch) */        \
    X(SIN, sin, 16)            /* sin, cos: argument reduced by 2π first (accurate for |x| up   \
                                * to ~2.5e4) */                                                 \
    X(COS, cos, 17)                                                                             \
    X(EXPM1, expm1, 18)        /* e^x − 1, with small relative error also near 0 */
#define WGML_UN_ENUM_(NAME, name, value) WGML_UN_##NAME = value,
typedef enum wgml_unary_op { WGML_UNARY_OPS(WGML_UN_ENUM_) } wgml_unary_op;
#undef WGML_UN_ENUM_
/* The op's name ("relu", ...), or NULL for a value not in the table. */
const char *wgml_unary_op_name(wgml_unary_op op);
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
wgml_tensor *wgml_floor(wgml_graph *g, wgml_tensor *x);   /* ⌊x⌋ */
wgml_tensor *wgml_ceil(wgml_graph *g, wgml_tensor *x);    /* ⌈x⌉ */
wgml_tensor *wgml_trunc(wgml_graph *g, wgml_tensor *x);   /* x rounded toward 0 */
wgml_tensor *wgml_round(wgml_graph *g, wgml_tensor *x);   /* nearest integer, halves to even */
wgml_tensor *wgml_sin(wgml_graph *g, wgml_tensor *x);
wgml_tensor *wgml_cos(wgml_graph *g, wgml_tensor *x);
wgml_tensor *wgml_expm1(wgml_graph *g, wgml_tensor *x);  /* e^x − 1 */
/* round(x, decimals) as PyTorch computes it in f32: decimals >= 0: round(x·10^d) / 10^d, else
 * round(x / 10^−d)·10^−d (halves to even); zero gradient. |decimals| <= 38. */
wgml_tensor *wgml_round_decimals(wgml_graph *g, wgml_tensor *x, int decimals);
/* out = min(max(x, lo), hi) (hi wins when lo > hi, NaN stays NaN, as in PyTorch). */
wgml_tensor *wgml_clamp(wgml_graph *g, wgml_tensor *x, float lo, float hi);

#define WGML_COMPARE_OPS(X) X(EQ, eq, 0) X(NE, ne, 1) X(LT, lt, 2) X(LE, le, 3) X(GT, gt, 4) X(GE, ge, 5)
#define WGML_CMP_ENUM_(NAME, name, value) WGML_CMP_##NAME = value,
typedef enum wgml_compare_op { WGML_COMPARE_OPS(WGML_CMP_ENUM_) } wgml_compare_op;
#undef WGML_CMP_ENUM_
/* The comparison's name ("eq", ...), or NULL for a value not in the table. */
const char *wgml_compare_op_name(wgml_compare_op op);
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
/* x converted to dtype (f32, i32 or bool from any of them), as PyTorch's .to(dtype): f32 -> i32
 * truncates toward zero (saturating; NaN gives 0), to bool is x != 0, bool gives 0 / 1. A new
 * tensor; not differentiable. */
wgml_tensor *wgml_cast(wgml_graph *g, wgml_tensor *x, wgml_dtype dtype);
/* dx = f'(x)·dy for the unary op (x the forward input, dy its shape). relu: 0 where x <= 0,
 * else dy (NaN included, as PyTorch); abs: sign(x)·dy (0 at 0); gelu / gelu_tanh: the derivative of the form the forward uses. */
wgml_tensor *wgml_unary_backward(wgml_graph *g, wgml_unary_op op, wgml_tensor *x, wgml_tensor *dy);
/* dx = dy where lo <= x <= hi, else 0 (PyTorch's rule). */
wgml_tensor *wgml_clamp_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *dy, float lo, float hi);

/* ---- reductions -------------------------------------------------------------------------- */
/* sum, mean, amax, argmax and the softmax family over chosen dims. */

/* Reductions of an f32 x over the dims listed in dims[0..n_dims) (any set, in any order;
 * negative dims count from the end; a repeated or out-of-range dim is an error; n_dims = 0
 * reduces over every dim). keepdim keeps the reduced dims with size 1; without it they are
 * removed (reducing every dim gives a rank-0 tensor of one element).
 * sum: Σ; mean: Σ / (number of reduced elements); amax: the maximum, NaN if any is NaN (f32
 * outputs). Deterministic: the same input gives the same bits every run. */
wgml_tensor *wgml_sum(wgml_graph *g, wgml_tensor *x, const int *dims, int n_dims, int keepdim);
/* The lower median along dim (PyTorch's median: the element at position (n − 1) / 2 of the
 * sorted row; a row holding a NaN gives NaN) of an f32 x; *indices (when not NULL) gets its i32
 * index along dim, ties resolved by a stable sort (the earlier of equal values first). keepdim as
 * the reductions. One workgroup per row, O(n²) comparisons: for rows up to a few thousand. No
 * gradient. */
wgml_tensor *wgml_median(wgml_graph *g, wgml_tensor *x, int dim, int keepdim, wgml_tensor **indices);
wgml_tensor *wgml_mean(wgml_graph *g, wgml_tensor *x, const int *dims, int n_dims, int keepdim);
wgml_tensor *wgml_amax(wgml_graph *g, wgml_tensor *x, const int *dims, int n_dims, int keepdim);
/* Index (i32) of the maximum of f32 x along dim; ties take the first index; a NaN counts as
 * the maximum (the first NaN wins). */
wgml_tensor *wgml_argmax(wgml_graph *g, wgml_tensor *x, int dim, int keepdim);
/* softmax / log_softmax of f32 x along dim (negative counts from the end), max-stable (online
 * max and sum); output has x's shape. -inf entries give 0 (softmax) / -inf (log_softmax). */
wgml_tensor *wgml_softmax(wgml_graph *g, wgml_tensor *x, int dim);
wgml_tensor *wgml_log_softmax(wgml_graph *g, wgml_tensor *x, int dim);
/* softmax backward along dim: dx = y ⊙ (dy − Σ_dim(dy ⊙ y)), y = softmax(x, dim) (the forward
 * output); y and dy of one shape; dx has it. */
wgml_tensor *wgml_softmax_backward(wgml_graph *g, wgml_tensor *y, wgml_tensor *dy, int dim);
/* log_softmax backward along dim: dx = dy − exp(y) ⊙ Σ_dim dy, y = log_softmax(x, dim). */
wgml_tensor *wgml_log_softmax_backward(wgml_graph *g, wgml_tensor *y, wgml_tensor *dy, int dim);

/* ---- norms ------------------------------------------------------------------------------- */
/* RMS norm and layer norm over the last dim, with their gradients. */

/* out[..., :] = x[..., :] · rsqrt(mean(x[..., :]²) + eps) · w over the last dim of f32 x;
 * w is f32 [D] or NULL (taken as ones). */
wgml_tensor *wgml_rms_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, float eps);
/* out[..., :] = (x[..., :] − mean) · rstd · w + b over the last dim of f32 x, with mean and
 * the biased variance of the row and rstd = rsqrt(var + eps); w, b are f32 [D] or NULL (ones,
 * zeros). When mean_out / rstd_out are not NULL they receive the per-row mean and rstd, shaped
 * like x without its last dim ([1] for a rank-1 x); on error they are set to NULL. */
wgml_tensor *wgml_layer_norm(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *b, float eps,
                             wgml_tensor **mean_out, wgml_tensor **rstd_out);
/* rms_norm backward over the last dim of x [..., D] (w [D] or NULL for ones, dy x's shape):
 * *dx gets x's shape; *dw (skipped when dw is NULL) gets [D] = Σ_rows dy·x·rstd, summed over
 * rows in a fixed order. On error the outputs are set to NULL. */
wgml_status wgml_rms_norm_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *dy, float eps,
                                   wgml_tensor **dx, wgml_tensor **dw);
/* layer_norm backward: x [..., D], w [D] or NULL, mean and rstd as wgml_layer_norm returned
 * them (x's shape without the last dim, or any shape of rows elements), dy x's shape.
 * *dx x's shape; *dw = Σ_rows dy·(x − mean)·rstd and *db = Σ_rows dy, [D] each (dw, db may be
 * NULL to skip them). On error the outputs are set to NULL. */
wgml_status wgml_layer_norm_backward(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *mean,
                                     wgml_tensor *rstd, wgml_tensor *dy, wgml_tensor **dx, wgml_tensor **dw,
                                     wgml_tensor **db);

/* ---- pooling ----------------------------------------------------------------------------- */
/* Max and average pooling over a window of the last nd (1-3) dims of f32 x [..., in...]. Output
 * position o reads, per window dim, the input coordinates o·stride − padding + j·dilation for j
 * in [0, kernel), or with `adaptive` PyTorch's [floor(o·in/out), ceil((o+1)·in/out)); the
 * coordinates outside the input are padding, which is skipped (it never wins a maximum). The
 * output extents are the caller's (PyTorch's floor or ceil_mode rule); a window may not start
 * past the padded input's end. Max: the largest value (a NaN wins, the first of equal maxima
 * otherwise) and, when `indices` is not NULL, an i32 tensor of the chosen element's row-major
 * offset within its [in...] plane (PyTorch's indices). Average: the sum of the elements inside
 * divided by `divisor` when > 0, else by the window clipped to the padded input
 * (count_include_pad) or by the elements inside (adaptive: always the latter). Output
 * [..., out...]. One dispatch. */
typedef struct wgml_pool_desc {
    int nd;  /* window dims: 1, 2 or 3 */
    int max; /* 1: maximum, 0: average */
    int adaptive;
    int count_include_pad;
    int64_t out[3]; /* output extent per window dim */
    int64_t kernel[3], stride[3], padding[3], dilation[3]; /* unused when adaptive */
    int64_t divisor;
} wgml_pool_desc;
wgml_tensor *wgml_pool(wgml_graph *g, wgml_tensor *x, const wgml_pool_desc *desc, wgml_tensor **indices);

/* ---- convolution ------------------------------------------------------------------------- */
/* PyTorch's convolution over nd (1-3) spatial dims, all f32: torch.nn.functional.conv{1,2,3}d
 * and, with `transposed`, conv_transpose{1,2,3}d. x [N, C, in...] (or [C, in...] unbatched),
 * w [Cout, C/groups, k...] (transposed: [C, Cout/groups, k...]), bias [Cout] or NULL.
 * stride, padding, dilation and output_padding are nd values each, or NULL for PyTorch's
 * defaults (1, 0, 1, 0); output_padding only for a transposed convolution, each smaller than
 * the stride or the dilation of its dim. Output [N, Cout, out...] (unbatched: [Cout, out...]),
 * out = (in + 2·padding − dilation·(k − 1) − 1) / stride + 1 rounded down, transposed
 * (in − 1)·stride − 2·padding + dilation·(k − 1) + output_padding + 1. Built from gather and
 * matmul ops (src/ops/conv), so gradients reach x, w and bias through their rules. Bad
 * arguments give an error naming the argument and the shapes. */
wgml_tensor *wgml_conv(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias, int nd, const int64_t *stride,
                       const int64_t *padding, const int64_t *dilation, int transposed, const int64_t *output_padding,
                       int64_t groups);

/* ---- indexing and shape ------------------------------------------------------------------ */
/* Gather, embedding and index_select (with gradients), slices, concatenation, permutes and
 * copies. */

/* Indexing. Index tensors are i32; an index must lie in [-size, size) (negative counts from
 * the end). In the eager graph the indices are read back (a sync and a small copy) and an
 * index out of range is an error naming it ("embedding: idx[3] = 50000 is out of range
 * [-49152, 49152)"). In a built graph indices change per run and are not checked: a negative
 * index is wrapped by +size and the result clamped into [0, size - 1]; nothing is ever read
 * outside a tensor. Data tensors may be of any dtype (f32, i32, u32, bool). */

/* out[c] = x[c with c[dim] := index[c]]; index has x's rank and, outside dim, sizes <= x's;
 * out has index's shape and x's dtype. dim may be negative. */
wgml_tensor *wgml_gather(wgml_graph *g, wgml_tensor *x, int dim, wgml_tensor *index);
/* out[..., :] = weight[idx[...], :]; weight [V, D], idx of rank 0..7; out [idx..., D]. */
wgml_tensor *wgml_embedding(wgml_graph *g, wgml_tensor *weight, wgml_tensor *idx);
/* x with dim replaced by the entries index[0..n) (index rank 1, or rank 0 as one entry). */
wgml_tensor *wgml_index_select(wgml_graph *g, wgml_tensor *x, int dim, wgml_tensor *index);
/* x.index_put(indices, values, accumulate) (PyTorch's) with k index tensors on x's leading dims
 * (f32 or i32 x; the k i32 index tensors broadcast to a shape B; values broadcast to
 * B + x.shape[k:]): entry p puts values[p] at x[idx0[p], ..., idx(k-1)[p]]; accumulate adds
 * instead (duplicates summed in entry order); without it the last duplicate wins. In a built
 * graph an index outside [-size, size) is not checked: it is taken modulo its dim's size. No
 * gradient. */
/* PyTorch's embedding_bag forward: out [B, D], bag b reduces weight [V, D] rows indices[i] for i
 * from offsets[b] to offsets[b + 1] (the last bag to the end of indices; include_last_offset:
 * offsets has B + 1 entries and its last ends the last bag; the mean of that bag divides by the
 * count to the end of indices, as PyTorch's CPU kernel does). mode 0 sum, 1 mean, 2 max; an empty
 * bag gives 0; entries whose index is padding_idx (>= 0; negative: none) are skipped and not
 * counted; per_sample_weights (f32, one per index, mode sum only; may be NULL) scale the rows.
 * indices and offsets are 1-D i32; at run time offsets are clamped into [0, #indices] and indices
 * wrapped once and clamped into [0, V). No gradient. */
wgml_tensor *wgml_embedding_bag(wgml_graph *g, wgml_tensor *weight, wgml_tensor *indices, wgml_tensor *offsets, int mode,
                                wgml_tensor *per_sample_weights, int include_last_offset, int64_t padding_idx);
/* x[indices] (PyTorch's advanced indexing, index.Tensor) with k index tensors on x's leading
 * dims: out of shape B + x.shape[k:], entry p = x[idx0[p], ..., idx(k-1)[p]]; index rules as
 * wgml_index_put. Any dtype; no gradient through the indices. */
wgml_tensor *wgml_index_tensor(wgml_graph *g, wgml_tensor *x, wgml_tensor *const *indices, int k);
wgml_tensor *wgml_index_put(wgml_graph *g, wgml_tensor *x, wgml_tensor *const *indices, int k, wgml_tensor *values,
                            int accumulate);

/* Shape ops and copies; every dtype. dims may be negative (count from the end). */
/* x[..., start:end:step, ...] along dim, PyTorch's rules: negative start/end count from the
 * end, then both are clamped into [0, size]; step >= 1 (else an error); an empty result is an
 * error (zero-size tensors are not supported). Use INT64_MAX as end for "to the end". */
wgml_tensor *wgml_slice(wgml_graph *g, wgml_tensor *x, int dim, int64_t start, int64_t end, int64_t step);
/* Concatenation of tensors[0..n) along dim: same dtype, same shape except in dim. */
wgml_tensor *wgml_cat(wgml_graph *g, wgml_tensor *const *tensors, int n, int dim);
/* out.shape[i] = x.shape[dims[i]], a contiguous copy; dims is a permutation of 0..rank-1. */
wgml_tensor *wgml_permute(wgml_graph *g, wgml_tensor *x, const int *dims);
/* Swaps dims d0 and d1 (a copy). */
wgml_tensor *wgml_transpose(wgml_graph *g, wgml_tensor *x, int d0, int d1);
/* Materialises x broadcast (NumPy rules) to shape[0..rank); -1 keeps x's size in that dim
 * (not allowed for new leading dims). */
wgml_tensor *wgml_expand_copy(wgml_graph *g, wgml_tensor *x, int rank, const int64_t *shape);
/* A copy of x. */
wgml_tensor *wgml_clone(wgml_graph *g, wgml_tensor *x);
/* dW [num_embeddings, D] of wgml_embedding: dW[v, :] = Σ over positions p with idx[p] == v of
 * dy[p, :], added in increasing p; rows never indexed are 0. idx i32 of any shape (N
 * positions), dy [idx..., D]. Index range rules as wgml_embedding (checked in the eager graph;
 * wrapped and clamped in a built graph). Cost: O(N + V) for a count, a scan and a bucket fill,
 * O(Σ_v count_v²) to order each bucket by position, O(V·D + N·D) for the sums. */
wgml_tensor *wgml_embedding_backward(wgml_graph *g, wgml_tensor *idx, wgml_tensor *dy, int64_t num_embeddings);
/* dx of wgml_gather(x, dim, index): zeros of x's shape (x only gives the shape; any dtype) with
 * dy (f32, index's shape) added at c with c[dim] := index[c], in increasing c[dim]
 * (deterministic). Cost: numel(x) · index.shape[dim]. Index rules as wgml_gather. */
wgml_tensor *wgml_gather_backward(wgml_graph *g, wgml_tensor *x, int dim, wgml_tensor *index, wgml_tensor *dy);

/* ---- transformer: rope, attention, KV cache ---------------------------------------------- */
/* The attention block's ops: rotary embeddings, scaled dot-product attention (and its
 * gradient) and the KV cache of generation. */

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
 * wgml_tensor_new), or its f16 form: a u32 tensor [B, Hkv, Smax, D / 2] whose words each hold
 * two f16 elements, element 2i in the low half (WGSL's pack2x16float; half the memory and the
 * bytes attention reads; D a multiple of 4 for attention; values are rounded to f16 as they are
 * written). wgml_kv_append writes new [B, Hkv, Snew, D] into cache rows pos .. pos +
 * Snew - 1, where pos is read on the GPU from the i32 tensor pos (one element), so a built
 * graph can be replayed with a new position each step. Rows outside 0 .. Smax - 1 are skipped,
 * never written. */
wgml_status wgml_kv_append(wgml_graph *g, wgml_tensor *cache, wgml_tensor *new_rows, wgml_tensor *pos);
/* Attention of q [B, Hq, Sq, D] over the first len rows of the caches k_cache, v_cache
 * [B, Hkv, Smax, D] (both f32 or both the f16 form), len read on the GPU from the i32 tensor len (one element, clamped to
 * 0 .. Smax). As wgml_sdpa with Skv = len (causal: query i sits at position len - Sq + i); a
 * query that sees no key (len - Sq + i < 0, or len = 0) gets zeros. */
wgml_tensor *wgml_sdpa_cached(wgml_graph *g, wgml_tensor *q, wgml_tensor *k_cache, wgml_tensor *v_cache,
                              wgml_tensor *len, int causal, float scale);
/* Gradients of wgml_sdpa (same layouts, GQA and end-aligned causal mask, scale <= 0 meaning
 * 1/sqrt(D)): q, out, dout [B, Hq, Sq, D]; k, v [B, Hkv, Skv, D]; out is wgml_sdpa's output
 * (rowsum(dout ⊙ out) enters dS). *dq gets q's shape, *dk and *dv k's (summed over the Hq/Hkv
 * query heads that share a kv head, in a fixed order). The attention probabilities are
 * recomputed from q and k with matmuls into two [B, Hq, Sq, Skv] scratch tensors (meant for
 * training lengths up to a few thousand); where those pass the device's storage binding limit
 * the same steps run over slices of the B·Hkv kv heads, or of one kv head's query heads, one
 * slice's scratch at a time (WGML_ERR_LIMIT only when one query head's [Sq, Skv] does not fit).
 * On error the outputs are set to NULL. */
wgml_status wgml_sdpa_backward(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *out,
                               wgml_tensor *dout, int causal, float scale, wgml_tensor **dq, wgml_tensor **dk,
                               wgml_tensor **dv);
/* Sliding-window causal attention (Gemma 3's local layers): as the causal wgml_sdpa,
 * wgml_sdpa_cached and wgml_sdpa_backward, but the query at position p sees only the keys at
 * positions p - window + 1 .. p (the last `window` keys, itself included). window >= 1; a
 * window of at least Skv is plain causal attention. wgml_sdpa_window is differentiable. */
wgml_tensor *wgml_sdpa_window(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, int64_t window,
                              float scale);
wgml_tensor *wgml_sdpa_cached_window(wgml_graph *g, wgml_tensor *q, wgml_tensor *k_cache, wgml_tensor *v_cache,
                                     wgml_tensor *len, int64_t window, float scale);
wgml_status wgml_sdpa_backward_window(wgml_graph *g, wgml_tensor *q, wgml_tensor *k, wgml_tensor *v, wgml_tensor *out,
                                      wgml_tensor *dout, int64_t window, float scale, wgml_tensor **dq,
                                      wgml_tensor **dk, wgml_tensor **dv);

/* ---- quantised weights: include/wgml-quant.h ------------------------------------------- */
/* Frozen quantised weights (4-, 5-, 6- and 8-bit codes and f32), their upload and the ops that
 * read them are declared in wgml-quant.h, included at the end of this header; the losses and
 * LoRA below take one (wgml_lmhead_ce_qweight, wgml_lora_qlinear). */
typedef struct wgml_qweight wgml_qweight;

/* ---- losses ------------------------------------------------------------------------------ */
/* Cross-entropy over logits, and the fused LM head + cross-entropy that never holds them. */

/* Fused cross-entropy over the last dim of logits [..., V] (f32) with i32 labels [...] (logits'
 * shape without its last dim; R rows in all). A row whose label is negative (-100 included) is
 * ignored. n_valid, the number of rows with 0 <= label < V, is counted on the GPU, and
 *   loss = Σ_valid (logsumexp(row) − row[label]) / n_valid            (f32 [1])
 *   dlogits[r, j] = (softmax(row)[j] − [j == label]) · grad_scale / n_valid for valid rows,
 *                   0 for ignored rows                                  (f32, logits' shape)
 * computed in one pass over the logits (one workgroup per row) and a fixed-order reduction of
 * the per-row losses (the same bits every run). When every row is ignored the loss is 0 and
 * dlogits are 0 (PyTorch gives NaN there). dlogits_out may be NULL: loss only, no dlogits
 * written. A label >= V is an error: in the eager graph the labels are read back and the call
 * fails naming the first such row; in a built graph (where the host cannot look) such a row is
 * treated as ignored, never read out of bounds, and reported in the optional status tensor. */
typedef struct wgml_ce_options {
    /* f32, one element, or NULL (1): multiplies dlogits (not the loss), read on the GPU, e.g.
     * 1 / number of micro-batches for gradient accumulation. */
    wgml_tensor *grad_scale;
    /* i32 [3] or NULL; written by every run of the op: [0] rows whose label is >= V, [1] the
     * first such row (-1 when none), [2] n_valid. Make it with wgml_tensor_new to read it after
     * a run of a built graph (calls that share one: the last to run wins). */
    wgml_tensor *status;
} wgml_ce_options;
wgml_tensor *wgml_cross_entropy(wgml_graph *g, wgml_tensor *logits, wgml_tensor *labels, wgml_tensor **dlogits_out);
/* As wgml_cross_entropy; opt may be NULL. */
wgml_tensor *wgml_cross_entropy_ex(wgml_graph *g, wgml_tensor *logits, wgml_tensor *labels,
                                   const wgml_ce_options *opt, wgml_tensor **dlogits_out);
/* Fused LM head + cross-entropy: loss = wgml_cross_entropy(h · Wᵀ, labels) (same meaning: mean
 * over the n_valid rows whose label is in [0, V), ignored rows (negative labels, -100) give 0,
 * a label >= V is an error in the eager graph and an ignored row counted in opt->status in a
 * built graph) without ever holding the [R, V] logits: the vocabulary is cut into chunks of
 * `chunk` columns (a positive multiple of 64; 0: 8192), each chunk's logits [R, chunk] go
 * through one reused scratch with an online logsumexp per row.
 *   h       f32 [..., D] (R rows), labels i32 [...] (h's shape without its last dim);
 *   w       the head weight W [V, D]: f32 (wgml_lmhead_ce; must not require a gradient) or a
 *           4-bit/8-bit weight (wgml_lmhead_ce_qweight, any kind, bias included), on h's graph;
 *   opt     NULL or as for wgml_cross_entropy_ex (grad_scale multiplies d_h, status i32 [3]).
 * Returns the loss f32 [1]. d_h_out (may be NULL): d_h = d(loss)/dh · grad_scale, f32 with
 * h's shape, computed in the same call by a second pass over the chunks (the logits of each
 * chunk are recomputed, turned into (softmax − onehot)·scale/n_valid in place, and
 * d_h += G_chunk · W_chunk). W is frozen: no weight gradient is ever formed.
 * Autograd: when d_h_out is NULL and h requires a gradient in a built graph, the op records a
 * rule, and wgml_backward gives h the same d_h times d(loss) (and grad_scale). */
wgml_tensor *wgml_lmhead_ce(wgml_graph *g, wgml_tensor *h, wgml_tensor *w, wgml_tensor *labels, int64_t chunk,
                            const wgml_ce_options *opt, wgml_tensor **d_h_out);
wgml_tensor *wgml_lmhead_ce_qweight(wgml_graph *g, wgml_tensor *h, const wgml_qweight *w, wgml_tensor *labels,
                                    int64_t chunk, const wgml_ce_options *opt, wgml_tensor **d_h_out);

/* ---- LoRA -------------------------------------------------------------------------------- */
/* Low-rank adapters on a frozen linear (dense or 4-bit). */

/* LoRA adapter of a linear layer W [N, K]: y = base(x) + scale·(x·Aᵀ)·Bᵀ, A [r, K], B [N, r],
 * scale = alpha / r. A ~ U(−1/√K, 1/√K) from a splitmix64 stream seeded with seed (PyTorch's
 * nn.Linear init, PEFT's default for lora_A), B = 0. A and B are persistent tensors of g and,
 * in a built graph, trainable; the base is frozen. */
typedef struct wgml_lora {
    wgml_tensor *a, *b;
    int64_t n, k, r;
    float scale;
} wgml_lora;
wgml_lora *wgml_lora_new(wgml_graph *g, int64_t n, int64_t k, int r, float alpha, uint64_t seed);
void wgml_lora_free(wgml_lora *l); /* frees the struct (and, eager, the tensors); NULL is fine */
/* base_out + scale·(x·Aᵀ)·Bᵀ; x [..., K], base_out [..., N]. */
wgml_tensor *wgml_lora_apply(wgml_graph *g, wgml_tensor *x, wgml_tensor *base_out, const wgml_lora *l);
/* wgml_linear(x, w, bias) plus the adapter. */
wgml_tensor *wgml_lora_linear(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias, const wgml_lora *l);
/* wgml_qlinear(x, w) plus the adapter (QLoRA). */
wgml_tensor *wgml_lora_qlinear(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, const wgml_lora *l);

/* ---- autograd ---------------------------------------------------------------------------- */
/* Gradients recorded into a built graph by one call, over the ops above. */

/* Reverse-mode autograd on built graphs (wgml_graph_new; not the eager graph). Mark the leaves
 * to train, record the forward, call wgml_backward once: it records the gradient ops into the
 * same graph (before wgml_graph_compile), and every later run computes forward and backward in
 * one submit. An op's output requires a gradient when any input does, so frozen branches record
 * no backward work. Ops recorded after wgml_backward (an optimizer) are not differentiated.
 * Gradients of a tensor used by several ops are summed. Tensors used by the recorded ops (and
 * quantised weights' tensors) must stay alive until wgml_backward has run.
 * Differentiable: matmul/mm/bmm/linear/addmm, binary ops and their scalar forms, unary ops,
 * clamp, where (not cond), sum/mean/amax, softmax/log_softmax, rms_norm, layer_norm (through
 * its output only), rope/rope_ex, sdpa, sdpa_window, embedding/gather/index_select (not the indices),
 * slice, cat, permute/transpose, expand_copy, clone, reshape, tensor_view, qlinear (input
 * only; the 4-bit base is frozen), cross_entropy (logits only, when dlogits_out is NULL). Other ops (sdpa_cached, qembedding, comparisons, argmax,
 * in-place ops) pass no gradient: their outputs count as constants. */

/* Marks an f32 tensor of a built graph as a leaf whose gradient wgml_backward delivers (a
 * parameter or an input); 0 unmarks it. Call before recording the ops that use it. */
wgml_status wgml_tensor_set_trainable(wgml_tensor *t, int trainable);
/* Makes t's gradient land in the caller's persistent f32 tensor grad (same element count; e.g. a
 * wgml_tensor_view of one flat gradient buffer): each run stores it, or adds it when accumulate
 * is set (micro-batches; the caller zeroes grad, e.g. with wgml_fill in another graph). NULL
 * returns to the default (an arena tensor kept readable to the end of each run). */
wgml_status wgml_tensor_set_grad(wgml_tensor *param, wgml_tensor *grad, int accumulate);
/* Records the backward graph of the one-element loss into g, seeding d(loss) = loss_scale. */
wgml_status wgml_backward(wgml_graph *g, wgml_tensor *loss, float loss_scale);
/* The gradient of a trainable tensor after wgml_backward (readable after each run), or NULL. */
wgml_tensor *wgml_tensor_grad(const wgml_tensor *t);

#ifdef __cplusplus
}
#endif

/* The quantised weights, declared here before they had their own header. */
#include "wgml-quant.h"

#endif
