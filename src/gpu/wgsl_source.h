/* The WGSL a kernel compiles from (wgsl_source.c). A kernel file may use two directives:
 *   //!include NAME   the embedded NAME.wgsl in its place (shared functions, entry points);
 *   //!bindings read(x: array<f32>, ...) write(y: array<f32>, ...) uniform(p: Params)
 *                     its bindings, by name and type. The numbers come from the one bind group
 *                     layout of every pipeline (graph_dispatch: read-only storage, read-write
 *                     storage, then the uniform): reads, then writes, then the uniform, each in
 *                     the order the lines come in the file (its includes in place), then in
 *                     the prelude (what the op adds at dispatch). A kernel may declare bindings
 *                     on several lines; none is numbered by hand. */
#ifndef WGML_GPU_WGSL_SOURCE_H
#define WGML_GPU_WGSL_SOURCE_H

#include "gpu/gpu.h"

/* The bind group layout a pipeline is compiled for. all_writable: every read binding is
 * declared read_write (a built graph's arena, where a buffer is bound writable elsewhere). */
typedef struct gpu_layout {
    int n_ro, n_rw;
    bool has_uniform, all_writable;
} gpu_layout;

/* The code compiled for kernel `shader`: the platform's enable directives, prelude, a newline,
 * the source, with includes expanded, then the declarations of its bindings. Fails (NULL, error
 * set) when the kernel is unknown, a directive is malformed, a binding is numbered by hand, or
 * the bindings declared are not those of layout. Malloc'd. */
char *gpu_kernel_code(wgml_ctx *ctx, const char *shader, const char *prelude, const gpu_layout *layout);

#endif
