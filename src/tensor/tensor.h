/* Tensors: shape, dtype, storage, and the argument checks every op shares. */
#ifndef WGML_TENSOR_H
#define WGML_TENSOR_H

#include "gpu/gpu.h"

struct wgml_tensor {
    wgml_graph *graph;
    wgml_dtype dtype;
    int rank;
    int64_t shape[WGML_MAX_RANK];
    int64_t numel;
    uint64_t nbytes;     /* numel * element size */
    bool persistent;     /* owns its buffer; keeps contents across runs */
    bool keep;           /* arena tensor kept alive to the end of each run */
    gpu_buffer *buf;     /* NULL for an arena tensor until its graph is compiled */
    uint64_t offset;     /* byte offset in buf */
    int arena;           /* an intermediate of a built graph: which of the graph's arenas */
    int first_use, last_use; /* node indices (graph planning) */
    wgml_tensor *base;   /* a view: the tensor whose memory it shares (never itself a view) */
    uint64_t view_offset; /* a view: byte offset into base */
    int n_views;         /* views of this tensor still alive (eager freeing waits for them) */
    bool freed;          /* freed by the user while views were alive */
    wgml_tensor *prev, *next; /* the graph's list of tensors */
    /* autograd (src/autograd/autograd.c) */
    bool requires_grad;  /* trainable, or computed from a tensor that requires a gradient */
    bool trainable;      /* a leaf whose gradient wgml_backward delivers */
    bool grad_accumulate; /* grad_dest: add into it instead of overwriting */
    wgml_tensor *grad;   /* the delivered gradient (grad_dest when set) */
    wgml_tensor *grad_dest; /* caller-provided persistent gradient tensor, or NULL */
    wgml_tensor *grad_sum; /* during wgml_backward: the gradient summed so far */
    bool grad_sum_owned; /* during wgml_backward: grad_sum aliases nothing else (a rule may add into it) */
    bool grad_fresh;     /* during wgml_backward: a rule's new gradient, returned for one input only */
    int grad_uses;       /* during wgml_backward: op records that take this tensor */
};

/* Storage bytes a binding of t covers: nbytes rounded up to whole 4-byte words. */
static inline uint64_t tensor_binding_size(const wgml_tensor *t) { return (t->nbytes + 3) & ~3ull; }

/* Validation shared by every op. Each returns WGML_OK or sets the context's error with a
 * message that starts with the op's name. */
wgml_status check_tensor(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t);
wgml_status check_dtype(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t, wgml_dtype want);
wgml_status check_rank(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t, int lo, int hi);
/* The usual input check in one call: present, of dtype, rank in lo..hi, recorded in graph g. */
wgml_status check_operand(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t,
                          wgml_dtype dtype, int lo, int hi);
/* t (present) is recorded in graph g; the error names op and the argument. */
wgml_status check_graph(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t);
wgml_status check_same_graph(wgml_ctx *ctx, const char *op, const wgml_tensor *a, const wgml_tensor *b);
/* A backward op's saved tensor t (named arg) and the incoming gradient dy: both present and f32
 * (t's checks first), t recorded in graph g and dy in t's graph. */
wgml_status check_grad_pair(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t,
                            const wgml_tensor *dy);
wgml_status check_shape(wgml_ctx *ctx, const char *op, int rank, const int64_t *shape);
/* "[2, 3, 4]" into buf; returns buf. */
char *shape_str(char *buf, size_t n, int rank, const int64_t *shape);
#define SHAPE_STR_LEN 128
/* Shape of t as text, in a small rotating buffer (valid for a few calls). */
const char *tshape(const wgml_tensor *t);
int64_t shape_numel(int rank, const int64_t *shape);
/* Row-major (contiguous) element strides of shape into str. */
void shape_strides(int rank, const int64_t *shape, int64_t *str);
/* NumPy broadcast of two shapes; WGML_ERR_SHAPE on mismatch. */
wgml_status broadcast_shapes(int ra, const int64_t *a, int rb, const int64_t *b, int *rank_out, int64_t *out);

#endif
