/* Graphs: the one path by which every op reaches the GPU.
 *
 * An op handler validates its arguments, makes its outputs with graph_output and records one
 * or more dispatches with graph_dispatch. In the eager graph the outputs get memory at once and
 * the dispatches run at the next read or sync (many per submit); in a built graph outputs get a
 * place in the arena at compile time, and each run replays all dispatches in one submit. */
#ifndef WGML_GRAPH_H
#define WGML_GRAPH_H

#include "tensor/tensor.h"

#define GRAPH_MAX_BINDINGS 12
#define GRAPH_MAX_UNIFORM 256

wgml_ctx *graph_ctx(const wgml_graph *g);
bool graph_is_eager(const wgml_graph *g);
/* Whether the forwards of quantised weights recorded into g from now on quantise their
 * activations to int8 and multiply with the integer dot product (qw_mm_i8.wgsl; set by the
 * decoder for its prefill graphs). Off by default: training and the other graphs stay f32. */
void graph_set_x8(wgml_graph *g, bool on);
bool graph_x8(const wgml_graph *g);

/* A tensor derived from src under a key (another form of src that an op made along with it, e.g.
 * x quantised for the integer-dot GEMVs: ops/qweight/qw_xq.h), so that a later op takes it instead
 * of deriving it again. Built graphs only (an eager graph's tensors come and go, and their
 * addresses with them): graph_derived_set does nothing there and graph_derived finds nothing.
 * graph_derived_set returns false when out of host memory (then nothing is recorded: the later
 * op derives its own). */
bool graph_derived_set(wgml_graph *g, const wgml_tensor *src, uint64_t key, wgml_tensor *t);
wgml_tensor *graph_derived(const wgml_graph *g, const wgml_tensor *src, uint64_t key);

/* ---- the context's graph-layer state (context.c): wgml_ctx_create makes the device, then
 * this state; the gpu layer only stores the pointer. */
/* The context's eager graph (made by wgml_ctx_create, freed by wgml_ctx_destroy). */
wgml_graph *graph_ctx_eager(const wgml_ctx *ctx);
void graph_ctx_set_eager(wgml_ctx *ctx, wgml_graph *g);
/* Frees the eager graph g (wgml_ctx_destroy, before the device goes). */
void graph_eager_destroy(wgml_graph *g);
/* The matmul variant forced on this context (wgml_matmul_force_variant), or -1. */
int graph_ctx_matmul_variant(const wgml_ctx *ctx);

/* A new output tensor of an op (shape already validated by the op). NULL on error. */
wgml_tensor *graph_output(wgml_graph *g, const char *op, wgml_dtype dtype, int rank, const int64_t *shape);
/* A view of x (of x's base when x is itself a view) at byte_offset with the given shape, recorded
 * in g (x's own graph, or another graph of the same context for a shared persistent tensor): no
 * memory and no dispatch of its own; in a built graph its uses count as uses of its base. The
 * caller has checked the shape, the bounds and the alignment. NULL when out of host memory. */
wgml_tensor *graph_view(wgml_graph *g, wgml_tensor *x, const char *op, uint64_t byte_offset, int rank,
                        const int64_t *shape);

/* Records one dispatch of WGSL kernel `shader` (entry "main") with `prelude` prepended.
 * Bindings in order: ro[0..n_ro) read-only, rw[0..n_rw) read-write, then the uniform (when
 * ubytes > 0). `workgroups` is the total count; it is folded into a 2-D grid when above the
 * per-dimension limit, so kernels compute their linear workgroup index as
 * wid.x + wid.y * nwg.x and return when it is past their work. */
/* WebGPU's aliasing rule: within one dispatch a writable storage binding may not overlap any
 * other binding of the same buffer, and a buffer may not be both read-only and writable (a
 * built graph's arena then uses the kernel's all-writable form, where every binding counts as
 * writable). graph_dispatch keeps it for its callers: a read-only binding whose bytes overlap
 * another binding of the dispatch (the same tensor twice, overlapping views, an input that is
 * also written) is bound to a copy made by a dispatch just before (graph_copy.wgsl), when the
 * pair could break the rule. Ops that update a tensor in place should bind it once, read-write.
 * A binding slot the kernel never touches (an optional input or output that is absent) is
 * given as GRAPH_UNUSED: it gets a small range of its own in a per-context buffer.
 * $WGML_CHECK_ALIASING=1 checks every dispatch's final ranges at compile and at the eager flush
 * and fails the compile or the flush with an error naming the op, the kernel and the bindings. */
extern wgml_tensor graph_unused_binding;
#define GRAPH_UNUSED (&graph_unused_binding)

wgml_status graph_dispatch(wgml_graph *g, const char *op, const char *shader, const char *prelude,
                           wgml_tensor *const *ro, int n_ro, wgml_tensor *const *rw, int n_rw,
                           const void *uniform, size_t ubytes, uint64_t workgroups);

/* Fills t's words with the 32-bit pattern `bits` (t's bytes rounded up to whole words), with
 * the graph layer's own kernel (graph_fill.c); ops/fill builds wgml_fill and wgml_full on it. */
wgml_status graph_fill_bits(wgml_graph *g, wgml_tensor *t, uint32_t bits);

/* Submits the compiled graph g `repeat` times over in one pass, followed by a copy of bytes
 * [byte_offset, byte_offset + bytes) of persistent tensor out, without waiting (gpu_submit_async:
 * finish with gpu_async_wait). The runs see each other's writes in order, so a graph that
 * updates its own input tensors (e.g. a decode step that feeds its output token back) runs
 * several steps per submit. NULL on error. */
gpu_async *graph_run_async(wgml_graph *g, size_t repeat, wgml_tensor *out, uint64_t byte_offset, uint64_t bytes,
                           bool timed);

/* ------------------------------------------------------------------ autograd
 * An op-level record beside the dispatch records. A differentiable op, after recording its
 * dispatches, describes itself with one graph_record_op call; nothing is kept when no input
 * requires a gradient (so frozen branches cost nothing at backward time). wgml_backward walks
 * the records in reverse and calls each one's backward function, which emits the gradient
 * ops by calling public ops into the same graph. Each op family keeps its rules in its own
 * folder (<family>_grad.c). */
/* graph.c <-> tape.c (the records; tape.h) and autograd.c (the backward engine) */
void **graph_autograd_slot(wgml_graph *g);
bool graph_is_compiled(const wgml_graph *g);
void graph_tape_release(wgml_graph *g);
#define GRAPH_OP_MAX_IN 8
#define GRAPH_OP_ATTR_BYTES 160

typedef struct graph_op graph_op;
/* Fills grad_in[i] for each input i with graph_op_wants(op, i) (NULL where none flows);
 * grad_out[0] is the gradient of op->out (never NULL). */
typedef wgml_status (*graph_backward_fn)(wgml_graph *g, const graph_op *op, wgml_tensor *grad_out,
                                         wgml_tensor **grad_in);
struct graph_op {
    const char *name;
    graph_backward_fn backward;
    int n_in;
    wgml_tensor *in[GRAPH_OP_MAX_IN]; /* NULL entries allowed (optional inputs) */
    wgml_tensor *out;
    uint8_t attrs[GRAPH_OP_ATTR_BYTES]; /* the rule's own small struct, copied */
};

/* Records op when autograd is on for g and an input requires a gradient; then op->out requires
 * one too. Returns op->out, or NULL (with the error set) when it is NULL or on failure, so a
 * handler can end with `return graph_record_op(g, &op);`. */
wgml_tensor *graph_record_op(wgml_graph *g, const graph_op *op);
/* Whether any of ts[0..n) requires a gradient (and g is not building a backward pass):
 * handlers skip building the record when it is false. */
bool graph_grad_enabled(const wgml_graph *g, wgml_tensor *const *ts, int n);
static inline bool graph_op_wants(const graph_op *op, int i) {
    return op->in[i] && op->in[i]->requires_grad;
}
/* When input i of op is a trainable leaf whose gradient goes to a caller's tensor
 * (wgml_tensor_set_grad) of the same shape and op is its only use, that tensor (and *accumulate): the rule may
 * write the gradient straight into it (e.g. wgml_linear_dw with accumulate) and return it as
 * dx[i], saving a copy. NULL otherwise. */
wgml_tensor *graph_grad_sink(const graph_op *op, int i, bool *accumulate);
/* The running sum of input i's gradient when a rule may add its own term into it in place
 * (a product with an accumulating epilogue, qw_mm_into's acc) and return it as dx[i], which
 * saves the engine's add: the sum is a contiguous f32 tensor of input i's shape that aliases
 * nothing else (a term marked with graph_grad_fresh, or an add of the engine's). NULL otherwise. */
wgml_tensor *graph_grad_accum(const graph_op *op, int i);
/* Marks d, a new tensor a rule returns as the gradient of one input only (no other reference
 * to its memory), so that later rules may add into it (graph_grad_accum). */
void graph_grad_fresh(wgml_tensor *d);
/* The status a backward function returns: WGML_OK when every wanted input got a gradient,
 * else the context's last error. */
wgml_status grad_result(wgml_graph *g, const graph_op *op, wgml_tensor *const *dx);

#endif
