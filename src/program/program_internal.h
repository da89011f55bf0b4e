/* What the files of a loaded program share: the program itself and the steps of its load that
 * live outside program.c, which walks the method at load. program_values.c holds the values
 * (dtype codes, slots, uploads with the dtype policy), program_delegate.c builds the method's
 * calls, program_train.c pairs the parameters of a training program with an optimizer and
 * program_run.c writes inputs, runs and reads outputs and constants. The op registry's
 * interface is program.h. */
#ifndef WGML_PROGRAM_PROGRAM_INTERNAL_H
#define WGML_PROGRAM_PROGRAM_INTERNAL_H

#include "wgml-program.h"
#include "wgml-optim.h"

#include "gpu/gpu.h"
#include "io/pte.h"
#include "program/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prog_io {
    int value;              /* method value id */
    wgml_program_io info;
} prog_io;

typedef struct prog_const {
    wgml_tensor *t;
    wgml_program_io info;   /* host dtype: the dtype the bytes were stored in */
    const char *name;       /* named-data key, or "" */
} prog_const;

struct wgml_program {
    wgml_ctx *ctx;
    uint8_t *bytes;
    size_t size;
    pte_program *pte;
    const pte_plan *plan;
    pv *v;                  /* method values */
    int64_t **lists;        /* the method's int lists, resolved (owned) */
    uint32_t n_lists;
    pte_vk_graph **vk;      /* parsed delegates (their lists back the delegate slots) */
    uint32_t n_vk;
    wgml_graph *g;
    prog_io *in, *out;
    int n_in, n_out;
    prog_const *consts;     /* every uploaded constant, in load order */
    int n_consts, cap_consts;
    /* training (wgml_program_load_training): the optimizer over the parameter constants */
    wgml_program_train_config tc;
    wgml_optimizer *opt;
    int n_params;
    int *p_grad, *p_const;  /* per parameter: its gradient output, its constant (-1: none yet) */
    const char **p_name;
    wgml_tensor **p_t;      /* its constant's tensor: a view into the optimizer's flat params */
};

/* ---- values (program_values.c) ------------------------------------------------------------- */

/* The VkTensor dtype code of an ExecuTorch scalar type (the pv slots speak the delegate's). */
int prog_scalar_to_vk(int st);
/* The method's values as slots (p->v; its int lists resolved into p->lists). */
wgml_status prog_method_slots(wgml_program *p);
/* The values of delegate graph vg as slots v[0..vg->n_values). */
wgml_status prog_vk_slots(wgml_program *p, const pte_vk_graph *vg, pv *v, int di);
/* Converts n elements from host type `from` (a VkTensor code) to the wgml dtype it is computed
 * in, into dst; int64 -> int32 checks the range, `what` names the data in the error. */
wgml_status prog_convert_in(wgml_ctx *ctx, void *dst, const void *src, int64_t n, int from, const char *what);
/* The element count of a tensor slot's serialised shape. */
int64_t prog_slot_numel(const pv *s);
/* "[d0, d1, ...]" of a slot's shape into buf. */
const char *prog_shape_text(char *buf, size_t n, const pv *s);
/* A persistent tensor for slot s holding `bytes` (host layout `from`, 64-bit types narrowed),
 * or uninitialised when data is NULL. */
wgml_status prog_make_persistent(wgml_program *p, pv *s, const void *data, size_t bytes, int from, const char *what);
/* Records an uploaded constant (host layout `from`) for wgml_program_constant_*. */
wgml_status prog_note_constant(wgml_program *p, const pv *s, int from, const char *name);

/* ---- training (program_train.c) ------------------------------------------------------------ */

/* Uploads a constant (host layout `from`) into slot s and records it: a persistent tensor of
 * its own, or, for a parameter of a training program, a view into the optimizer's flat
 * parameter buffer. `name` is its named-data key or fqn (NULL: none). */
wgml_status prog_upload_constant(wgml_program *p, pv *s, const void *data, size_t bytes, int from, const char *what,
                                 const char *name);
/* Before anything is built: the parameters and the optimizer sized for them. */
wgml_status prog_train_prepare(wgml_program *p);
/* After the method: the gradient copies and the optimizer step. */
wgml_status prog_train_finish(wgml_program *p);

/* ---- calls (program_delegate.c) ------------------------------------------------------------ */

/* Builds a DelegateCall instruction's graph into p->g. */
wgml_status prog_build_delegate(wgml_program *p, const pte_instruction *ins);
/* Builds a KernelCall instruction (glue) through the registry. */
wgml_status prog_build_kernel(wgml_program *p, const pte_instruction *ins);
/* The registry name of a method operator ("aten::view_copy" + "out" -> "aten.view_copy.default"),
 * written into buf; NULL when none is registered. */
const char *prog_kernel_name(const pte_operator *op, char *buf, size_t n);

#endif
