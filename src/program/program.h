/* The program layer's internal interface: the value slots of one delegate graph (a VkGraph of an
 * ExecuTorch program) while it is built into a wgml graph, and the op registry that builds it.
 *
 * A delegate graph is a list of values (tensors, numbers, lists) and a chain of operator calls,
 * each naming its operator by its fully qualified string ("aten.mm.default") and its arguments
 * by value id, in schema order with the defaulted arguments present and the output id(s) last
 * (a multi-output op gets one ValueList id). The registry maps each name onto wgml's public ops;
 * a builder reads its arguments from the slots and stores the tensor it made in the output slot,
 * which must then have exactly the shape and dtype the exporter serialised. */
#ifndef WGML_PROGRAM_INTERNAL_H
#define WGML_PROGRAM_INTERNAL_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

/* Value kinds, as the VkGraph union numbers them apart from PV_UNSET. */
typedef enum pv_kind {
    PV_NULL = 0,
    PV_INT,
    PV_DOUBLE,
    PV_BOOL,
    PV_TENSOR,
    PV_INTLIST,
    PV_DOUBLELIST,
    PV_BOOLLIST,
    PV_VALUELIST,
    PV_STRING,
    PV_SYMINT,
    PV_UNSET, /* a kind the reader did not give */
    PV_OPT_TENSOR_LIST /* Tensor?[] (a method value): ids, -1 for None */
} pv_kind;

/* VkTensor data types (the delegate's own numbering). */
enum { VK_BOOL = 0, VK_UINT8, VK_INT8, VK_INT32, VK_FLOAT16, VK_FLOAT32, VK_FLOAT64, VK_INT64 };

typedef struct pv {
    pv_kind kind;
    int64_t i;      /* Int, SymInt, Bool */
    double d;       /* Double */
    const char *s;  /* String (not owned) */
    /* IntList (list64), DoubleList (dlist), ValueList or optional tensor list (ids); not owned */
    const int64_t *list64;
    const int32_t *ids;
    const double *dlist; /* DoubleList items (not owned; NULL when n is 0) */
    size_t n;
    /* Tensor: the serialised type and shape, where its data comes from, and the wgml tensor
     * once built (NULL before). */
    int vk_dtype;
    int rank;
    int64_t dims[WGML_MAX_RANK];
    int unsupported;     /* a shape wgml cannot hold (fill_tensor_slot, program_values.c): any use is an error */
    int64_t constant_id; /* >= 0: a constant */
    wgml_tensor *t;
    /* A constant's bytes as stored (host layout host_vk, 64-bit types not yet narrowed), so
     * that a dtype conversion of a constant can be done on the host at load; NULL otherwise. */
    const uint8_t *host;
    int host_vk;
    /* The persistent tensor made for a method input, constant or mutable buffer (program
     * state that the host may rewrite between runs while t is still it); NULL otherwise. */
    wgml_tensor *state;
} pv;

typedef struct pbuild {
    wgml_ctx *ctx;
    wgml_graph *g;
    pv *v;
    size_t nv;
    const char *op; /* the op being built, for messages */
} pbuild;

/* An op builder: args[0..nargs) as serialised (outputs last). WGML_OK, or an error set on the
 * context naming the op. */
typedef wgml_status (*prog_op_fn)(pbuild *b, const int32_t *args, int nargs);

/* A registry entry: the fully qualified name and its builder. */
typedef struct prog_op_entry {
    const char *name;
    prog_op_fn fn;
} prog_op_entry;

/* A portable kernel's out variant whose name the rule of prog_kernel_name (program_delegate.c:
 * "<name>.out" is the default overload, "<name>.X_out" is .X) gets wrong, and the entry it is
 * the out variant of: "aten.any.out" is any.dim's, "aten.any.all_out" any.default's. */
typedef struct prog_op_out {
    const char *out;
    const char *name;
} prog_op_out;

/* The registry is one table per family of operators, each in its own file (ops_*.c); ops.c
 * looks names up across them. */
typedef struct prog_op_table {
    const prog_op_entry *ops;
    size_t n;
    const prog_op_out *outs;
    size_t n_outs;
} prog_op_table;
extern const prog_op_table prog_ops_elementwise; /* ops_elementwise.c: add, relu, eq, where, hardswish */
extern const prog_op_table prog_ops_matmul;      /* ops_matmul.c: mm, linear, sdpa */
extern const prog_op_table prog_ops_reduce;      /* ops_reduce.c: sum, argmax, median, any, all, cumsum */
extern const prog_op_table prog_ops_norm;        /* ops_norm.c: softmax, layer_norm, group_norm */
extern const prog_op_table prog_ops_shape;       /* ops_shape.c: view_copy, permute, cat, slice_scatter */
extern const prog_op_table prog_ops_index;       /* ops_index.c: embedding, gather, index.Tensor */
extern const prog_op_table prog_ops_create;      /* ops_create.c: full, zeros, arange */
extern const prog_op_table prog_ops_window;      /* ops_window.c: convolution, pools, upsampling */
extern const prog_op_table prog_ops_arith;       /* ops_arith.c: fmod, remainder */
extern const prog_op_table prog_ops_copy;        /* ops_copy.c: as_strided_copy, constant_pad_nd */
extern const prog_op_table prog_ops_rope;        /* ops_rope.c: et_vk.apply_rotary_emb{,_hf,_interleaved} */

/* The builder of a fully qualified op name, or NULL. */
prog_op_fn prog_op_find(const char *name);
/* The entry name an out variant that does not follow the naming rule belongs to
 * ("aten.any.out" -> "aten.any.dim"), or NULL. */
const char *prog_op_find_out(const char *out_name);
/* Every registered name, in table order (for listings and tests); *n gets the count. */
const char *const *prog_op_names(size_t *n);

/* The distinct operator names a program needs and the registry lacks, for the load error.
 * Names are compared whole (a substring test would drop aten.any.dim once aten.any.dims is
 * listed) and kept apart from the message, so the count stays exact when the message is cut
 * short. Zero-initialise; prog_missing_free releases it. */
typedef struct prog_missing {
    char **names;
    int n, cap;
} prog_missing;

/* Adds a copy of name unless it is already listed: 0, or -1 when out of host memory. */
int prog_missing_add(prog_missing *m, const char *name);
/* "name, name, ..." into buf (size n > 32, always NUL-terminated); a list that does not fit
 * ends after the last whole name that fits with ", ... (K more)". */
void prog_missing_text(const prog_missing *m, char *buf, size_t n);
void prog_missing_free(prog_missing *m);

/* The wgml dtype a VkTensor dtype is computed in (int64 narrowed to i32, float64 to f32);
 * -1 for types wgml does not compute (float16, int8, uint8). */
int prog_vk_to_wgml(int vk_dtype);
const char *prog_vk_dtype_name(int vk_dtype);

#endif
