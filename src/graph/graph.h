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

/* A new output tensor of an op (shape already validated by the op). NULL on error. */
wgml_tensor *graph_output(wgml_graph *g, const char *op, wgml_dtype dtype, int rank, const int64_t *shape);

/* Records one dispatch of WGSL kernel `shader` (entry "main") with `prelude` prepended.
 * Bindings in order: ro[0..n_ro) read-only, rw[0..n_rw) read-write, then the uniform (when
 * ubytes > 0). `workgroups` is the total count; it is folded into a 2-D grid when above the
 * per-dimension limit, so kernels compute their linear workgroup index as
 * wid.x + wid.y * nwg.x and return when it is past their work. */
wgml_status graph_dispatch(wgml_graph *g, const char *op, const char *shader, const char *prelude,
                           wgml_tensor *const *ro, int n_ro, wgml_tensor *const *rw, int n_rw,
                           const void *uniform, size_t ubytes, uint64_t workgroups);

/* Fills t's words with the 32-bit pattern `bits` (t's bytes rounded up to whole words). */
wgml_status graph_fill_bits(wgml_graph *g, wgml_tensor *t, uint32_t bits);

#endif
