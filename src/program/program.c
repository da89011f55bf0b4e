/* ExecuTorch programs on wgml: one method of a .pte file (read by src/io/pte) built into one
 * wgml built graph.
 *
 * The method's values are slots (pv); its chain is walked once at load:
 *   - a DelegateCall (VulkanBackend) parses the VkGraph, gives its inputs the slots of the
 *     call's arguments, uploads its constants, builds each OperatorCall through the op registry
 *     (ops_*.c) and hands its outputs back to the call's output slots;
 *   - a KernelCall (the glue a partitioned program keeps: view/copy ops and the like) goes
 *     through the same registry under its functional name ("aten::view_copy.out" builds as
 *     "aten.view_copy.default");
 *   - MoveCall copies a slot, FreeCall is nothing here (the graph compiler plans memory).
 * Before anything is built every operator name is looked up, so a program that needs what
 * wgml lacks is refused with the whole list. Method inputs are persistent tensors written by
 * wgml_program_set_input; outputs are kept by the graph and read back after a run.
 * Loaded for training (wgml_program_load_training), the parameters' constants are views into
 * an optimizer's flat buffer (src/optim) and the gradient copies and the optimizer step are
 * recorded after the method, in the same graph. */
#include "wgml-program.h"
#include "wgml-train.h"

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

static int vk_to_prog(int vk) {
    static const int m[] = {WGML_PROG_BOOL, WGML_PROG_U8, WGML_PROG_I8, WGML_PROG_I32, WGML_PROG_F16,
                            WGML_PROG_F32,  WGML_PROG_F64, WGML_PROG_I64};
    return vk >= 0 && vk < 8 ? m[vk] : -1;
}

/* Records an uploaded constant (host layout `from`) for wgml_program_constant_*. */
static wgml_status note_constant(wgml_program *p, const pv *s, int from, const char *name) {
    if (p->n_consts == p->cap_consts) {
        int nc = p->cap_consts ? 2 * p->cap_consts : 16;
        prog_const *n = realloc(p->consts, (size_t)nc * sizeof *n);
        if (!n) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
        p->consts = n, p->cap_consts = nc;
    }
    prog_const *c = &p->consts[p->n_consts++];
    memset(c, 0, sizeof *c);
    c->t = s->t;
    c->info.dtype = (wgml_program_dtype)vk_to_prog(from);
    c->info.rank = s->rank;
    memcpy(c->info.shape, s->dims, sizeof c->info.shape);
    c->info.numel = wgml_tensor_numel(s->t);
    c->info.nbytes = (size_t)c->info.numel * wgml_program_dtype_size(c->info.dtype);
    c->name = name ? name : "";
    return WGML_OK;
}

/* ---- dtypes -------------------------------------------------------------------------------- */

const char *wgml_program_dtype_name(int dtype) {
    switch (dtype) {
    case WGML_PROG_U8: return "uint8";
    case WGML_PROG_I8: return "int8";
    case WGML_PROG_I16: return "int16";
    case WGML_PROG_I32: return "int32";
    case WGML_PROG_I64: return "int64";
    case WGML_PROG_F16: return "float16";
    case WGML_PROG_F32: return "float32";
    case WGML_PROG_F64: return "float64";
    case WGML_PROG_BOOL: return "bool";
    default: return "unknown";
    }
}

size_t wgml_program_dtype_size(int dtype) {
    switch (dtype) {
    case WGML_PROG_U8: case WGML_PROG_I8: case WGML_PROG_BOOL: return 1;
    case WGML_PROG_I16: case WGML_PROG_F16: return 2;
    case WGML_PROG_I32: case WGML_PROG_F32: return 4;
    case WGML_PROG_I64: case WGML_PROG_F64: return 8;
    default: return 0;
    }
}

/* The VkTensor dtype code of an ExecuTorch scalar type (the pv slots speak the delegate's). */
static int scalar_to_vk(int st) {
    switch (st) {
    case PTE_BYTE: return VK_UINT8;
    case PTE_CHAR: return VK_INT8;
    case PTE_INT: return VK_INT32;
    case PTE_LONG: return VK_INT64;
    case PTE_HALF: return VK_FLOAT16;
    case PTE_FLOAT: return VK_FLOAT32;
    case PTE_DOUBLE: return VK_FLOAT64;
    case PTE_BOOL: return VK_BOOL;
    default: return -1;
    }
}

const char *const *wgml_program_op_names(size_t *n) {
    size_t k = 0;
    const char *const *names = prog_op_names(&k);
    if (n) *n = k;
    return names;
}

/* ---- slots --------------------------------------------------------------------------------- */

/* A tensor slot from the serialised type and shape. A shape wgml cannot hold (rank over 8, a
 * zero-size dimension, more than 2^40 elements) leaves the slot marked unsupported rather than
 * failing: the exporter writes such tensors for unused arguments, and only a use is an error. */
static void fill_tensor_slot(pv *s, int vk_dtype, uint32_t rank, const uint32_t *dims32, const int32_t *dimsi) {
    s->kind = PV_TENSOR;
    s->vk_dtype = vk_dtype;
    s->constant_id = -1;
    s->unsupported = rank > WGML_MAX_RANK;
    if (s->unsupported) return;
    s->rank = (int)rank;
    int64_t numel = 1;
    for (uint32_t i = 0; i < rank; i++) {
        s->dims[i] = dims32 ? (int64_t)dims32[i] : (int64_t)dimsi[i];
        if (s->dims[i] <= 0 || s->dims[i] > ((int64_t)1 << 40) / numel) {
            s->unsupported = 1;
            return;
        }
        numel *= s->dims[i];
    }
}

/* The method's values as slots. Optional tensor lists (which may hold None) are not taken. */
static wgml_status method_slots(wgml_program *p) {
    const pte_plan *pl = p->plan;
    p->v = calloc(pl->n_values ? pl->n_values : 1, sizeof *p->v);
    p->lists = calloc(pl->n_values ? pl->n_values : 1, sizeof *p->lists);
    if (!p->v || !p->lists) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (uint32_t i = 0; i < pl->n_values; i++) {
        const pte_value *x = &pl->values[i];
        pv *s = &p->v[i];
        s->constant_id = -1;
        switch (x->type) {
        case PTE_VAL_NULL: s->kind = PV_NULL; break;
        case PTE_VAL_INT: s->kind = PV_INT, s->i = x->u.i; break;
        case PTE_VAL_BOOL: s->kind = PV_BOOL, s->i = x->u.b; break;
        case PTE_VAL_DOUBLE: s->kind = PV_DOUBLE, s->d = x->u.d; break;
        case PTE_VAL_STRING: s->kind = PV_STRING, s->s = x->u.str.s; break;
        case PTE_VAL_INT_LIST: {
            /* the items are value ids of Ints (so that sizes can be symbolic) */
            int64_t *l = malloc((x->u.int_list.n ? x->u.int_list.n : 1) * sizeof *l);
            if (!l) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
            p->lists[p->n_lists++] = l;
            for (uint32_t k = 0; k < x->u.int_list.n; k++) {
                int64_t id = x->u.int_list.items[k];
                if (id < 0 || id >= pl->n_values || pl->values[id].type != PTE_VAL_INT)
                    return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: value %u: int list item %u (value %lld) is not an Int", i, k, (long long)id);
                l[k] = pl->values[id].u.i;
            }
            s->kind = PV_INTLIST, s->list64 = l, s->n = x->u.int_list.n;
            break;
        }
        case PTE_VAL_DOUBLE_LIST: s->kind = PV_DOUBLELIST, s->dlist = x->u.double_list.items, s->n = x->u.double_list.n; break;
        case PTE_VAL_BOOL_LIST: s->kind = PV_BOOLLIST, s->n = x->u.bool_list.n; break;
        case PTE_VAL_TENSOR_LIST: s->kind = PV_VALUELIST, s->ids = x->u.tensor_list.items, s->n = x->u.tensor_list.n; break;
        /* items are value ids or -1 (None), checked by the reader */
        case PTE_VAL_OPTIONAL_TENSOR_LIST:
            s->kind = PV_OPT_TENSOR_LIST, s->ids = x->u.tensor_list.items, s->n = x->u.tensor_list.n;
            break;
        case PTE_VAL_TENSOR: {
            const pte_tensor *t = &x->u.tensor;
            fill_tensor_slot(s, scalar_to_vk(t->scalar_type), t->rank, NULL, t->sizes);
            break;
        }
        default: s->kind = PV_UNSET; break;
        }
    }
    return WGML_OK;
}

/* ---- uploads with the dtype policy --------------------------------------------------------- */

/* Converts n elements from host type `from` (a VkTensor code) to the wgml dtype `to` computes
 * in, into dst. int64 → int32 checks the range. */
static wgml_status convert_in(wgml_ctx *ctx, void *dst, const void *src, int64_t n, int from, const char *what) {
    switch (from) {
    case VK_INT64: {
        const uint8_t *s = src;
        int32_t *d = dst;
        for (int64_t i = 0; i < n; i++) {
            int64_t x;
            memcpy(&x, s + 8 * i, 8);
            if (x < INT32_MIN || x > INT32_MAX)
                return wgml_set_error(ctx, WGML_ERR_ARG, "program: %s: element %lld = %lld is out of the int32 range",
                                      what, (long long)i, (long long)x);
            d[i] = (int32_t)x;
        }
        return WGML_OK;
    }
    case VK_FLOAT64: {
        const uint8_t *s = src;
        float *d = dst;
        for (int64_t i = 0; i < n; i++) {
            double x;
            memcpy(&x, s + 8 * i, 8);
            d[i] = (float)x;
        }
        return WGML_OK;
    }
    case VK_BOOL: {
        const uint8_t *s = src;
        uint8_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = s[i] != 0;
        return WGML_OK;
    }
    case VK_INT32: case VK_FLOAT32: memcpy(dst, src, (size_t)n * 4); return WGML_OK;
    default: return wgml_set_error(ctx, WGML_ERR_DTYPE, "program: %s: dtype %s is not supported", what, prog_vk_dtype_name(from));
    }
}

static int64_t slot_numel(const pv *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

static const char *shape_text(char *buf, size_t n, const pv *s) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s->rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)s->dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* A persistent tensor for slot s holding `bytes` (host layout `from`, 64-bit types narrowed),
 * or uninitialised when data is NULL. */
static wgml_status make_persistent(wgml_program *p, pv *s, const void *data, size_t bytes, int from, const char *what) {
    if (s->unsupported)
        return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s: a zero-size dimension, rank over %d or too many elements",
                              what, WGML_MAX_RANK);
    int dt = prog_vk_to_wgml(s->vk_dtype);
    if (dt < 0)
        return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s: dtype %s is not supported", what,
                              prog_vk_dtype_name(s->vk_dtype));
    s->t = wgml_tensor_new(p->g, (wgml_dtype)dt, s->rank, s->dims);
    if (!s->t) return wgml_last_status(p->ctx);
    s->state = s->t;
    if (!data) return WGML_OK;
    int64_t n = slot_numel(s);
    size_t esize = from == VK_INT64 || from == VK_FLOAT64 ? 8 : from == VK_BOOL || from == VK_UINT8 || from == VK_INT8 ? 1 : 4;
    if (bytes != (size_t)n * esize)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: %zu bytes of data for %lld elements of %s", what,
                              bytes, (long long)n, prog_vk_dtype_name(from));
    size_t out_bytes = wgml_tensor_nbytes(s->t);
    void *tmp = malloc(out_bytes ? out_bytes : 1);
    if (!tmp) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    wgml_status st = convert_in(p->ctx, tmp, data, n, from, what);
    if (!st) st = wgml_tensor_write(s->t, tmp, out_bytes);
    free(tmp);
    return st;
}

/* ---- training: parameters as views into the optimizer ------------------------------------ */

/* The parameter that constant slot s (about to become constant number p->n_consts) is, or -1:
 * the one the caller named, else the first unpaired parameter whose gradient has its shape.
 * Mutable tensors are candidates too: the training export stores the parameters that stay
 * outside the delegates as mutable data (a norm's running statistics would be candidates as
 * well; such a program needs param_constants). */
static int param_of_constant(const wgml_program *p, const pv *s, int from) {
    if (!p->opt || s->vk_dtype != VK_FLOAT32 || from != VK_FLOAT32) return -1;
    for (int j = 0; j < p->n_params; j++) {
        if (p->p_const[j] >= 0) continue;
        if (p->tc.param_constants) {
            if (p->tc.param_constants[j] == p->n_consts) return j;
            continue;
        }
        const pv *gs = &p->v[p->plan->outputs[p->p_grad[j]]];
        if (gs->rank == s->rank && !memcmp(gs->dims, s->dims, sizeof(int64_t) * (size_t)s->rank)) return j;
    }
    return -1;
}

/* Uploads a constant (host layout `from`) into slot s and records it: a persistent tensor of
 * its own, or, for a parameter of a training program, a view into the optimizer's flat
 * parameter buffer (so that the optimizer's update is what the next run reads). */
static wgml_status upload_constant(wgml_program *p, pv *s, const void *data, size_t bytes, int from, const char *what,
                                   const char *name) {
    int j = param_of_constant(p, s, from);
    wgml_status st;
    const pv *gs = j < 0 ? NULL : &p->v[p->plan->outputs[p->p_grad[j]]];
    if (gs && (gs->rank != s->rank || memcmp(gs->dims, s->dims, sizeof(int64_t) * (size_t)s->rank))) {
        char a[160], b[160];
        return wgml_set_error(p->ctx, WGML_ERR_SHAPE,
                              "program: training: parameter %d (%s): constant %d has shape %s, its gradient (output %d) %s",
                              j, p->p_name[j], p->n_consts, shape_text(a, sizeof a, s), p->p_grad[j],
                              shape_text(b, sizeof b, gs));
    }
    /* a parameter that two delegates both use is two constants with one named-data key (the
     * SHA-256 of its bytes); the optimizer would step one copy and leave the other stale, so
     * a constant sharing a parameter's key that is not itself a parameter is refused */
    for (int i = 0; j < 0 && p->opt && name && *name && i < p->n_params; i++)
        if (p->p_const[i] >= 0 && !strcmp(p->consts[p->p_const[i]].name, name))
            return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED,
                                  "program: training: %s holds the same data as parameter %d (%s, constant %d): a "
                                  "parameter used by several delegates is not supported",
                                  what, i, p->p_name[i], p->p_const[i]);
    if (j < 0) {
        st = make_persistent(p, s, data, bytes, from, what);
    } else if (bytes != (size_t)slot_numel(s) * 4) {
        st = wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: %zu bytes of data for %lld f32 elements", what, bytes,
                            (long long)slot_numel(s));
    } else if (!(s->t = wgml_adamw_param(p->opt, s->rank, s->dims))) {
        st = wgml_last_status(p->ctx);
    } else {
        s->state = s->t;
        p->p_t[j] = s->t;
        p->p_const[j] = p->n_consts;
        st = wgml_tensor_write(s->t, data, bytes);
    }
    if (st) return st;
    s->host = data, s->host_vk = from;
    return note_constant(p, s, from, name);
}

/* The training export's metadata method <prefix><this method's name>, or NULL. */
static const pte_plan *meta_plan(const wgml_program *p, const char *prefix) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", prefix, p->plan->name.s ? p->plan->name.s : "");
    return pte_find_plan(p->pte, name);
}

/* Before anything is built: the parameters (count, gradient outputs, names) and the optimizer
 * sized for them, in the method's graph. */
static wgml_status train_prepare(wgml_program *p) {
    const wgml_program_train_config *c = &p->tc;
    const pte_plan *pl = p->plan, *gi = meta_plan(p, "__et_training_gradients_index_"),
                   *fq = meta_plan(p, "__et_training_fqn_");
    int first = -1, n = c->n_params;
    if (gi && gi->n_outputs == 1 && gi->values[gi->outputs[0]].type == PTE_VAL_INT &&
        gi->values[gi->outputs[0]].u.i >= 0 && gi->values[gi->outputs[0]].u.i < (int64_t)pl->n_outputs)
        first = (int)gi->values[gi->outputs[0]].u.i;
    if (n <= 0 && fq) n = (int)fq->n_outputs;
    if (n <= 0 || n > (int)pl->n_outputs)
        return wgml_set_error(p->ctx, WGML_ERR_ARG,
                              "program: training: %d parameters for %u outputs (give n_params, or a program "
                              "exported for training: its __et_training_fqn_%s method names them)",
                              n, pl->n_outputs, pl->name.s ? pl->name.s : "");
    if (!c->grad_outputs && first < 0)
        return wgml_set_error(p->ctx, WGML_ERR_ARG,
                              "program: training: no grad_outputs given and the program has no "
                              "__et_training_gradients_index_%s method",
                              pl->name.s ? pl->name.s : "");
    p->n_params = n;
    p->p_grad = calloc((size_t)n, sizeof *p->p_grad);
    p->p_const = calloc((size_t)n, sizeof *p->p_const);
    p->p_name = calloc((size_t)n, sizeof *p->p_name);
    p->p_t = calloc((size_t)n, sizeof *p->p_t);
    if (!p->p_grad || !p->p_const || !p->p_name || !p->p_t)
        return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    int64_t capacity = 0;
    for (int j = 0; j < n; j++) {
        int o = c->grad_outputs ? c->grad_outputs[j] : first + j;
        p->p_const[j] = -1;
        p->p_name[j] = "";
        if (fq && (int)fq->n_outputs == n && fq->values[fq->outputs[j]].type == PTE_VAL_STRING &&
            fq->values[fq->outputs[j]].u.str.s)
            p->p_name[j] = fq->values[fq->outputs[j]].u.str.s;
        if (o < 0 || o >= (int)pl->n_outputs)
            return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameter %d: gradient output %d out of range (%u outputs)",
                                  j, o, pl->n_outputs);
        const pv *gs = &p->v[pl->outputs[o]];
        if (gs->kind != PV_TENSOR || gs->unsupported || gs->vk_dtype != VK_FLOAT32)
            return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameter %d (%s): output %d is not an f32 tensor",
                                  j, p->p_name[j], o);
        if (c->param_constants && c->param_constants[j] < 0)
            return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameter %d: constant %d out of range", j,
                                  c->param_constants[j]);
        for (int i = 0; c->param_constants && i < j; i++)
            if (c->param_constants[i] == c->param_constants[j])
                return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameters %d and %d: both constant %d", i,
                                      j, c->param_constants[j]);
        p->p_grad[j] = o;
        capacity += wgml_adamw_padded(slot_numel(gs));
    }
    wgml_adamw_config oc = wgml_adamw_defaults();
    oc.lr = c->lr, oc.weight_decay = c->weight_decay, oc.max_grad_norm = c->max_grad_norm, oc.capacity = capacity;
    oc.momentum = c->optimizer == WGML_PROGRAM_SGD ? c->momentum : 0;
    if (c->optimizer == WGML_PROGRAM_ADAMW) oc.beta1 = c->beta1, oc.beta2 = c->beta2, oc.eps = c->eps;
    p->opt = wgml_adamw_new(p->g, &oc);
    return p->opt ? WGML_OK : wgml_last_status(p->ctx);
}

/* After the method: each gradient output copied into the optimizer's gradient buffer, then
 * the step, all recorded after the method's own dispatches. */
static wgml_status train_finish(wgml_program *p) {
    for (int j = 0; j < p->n_params; j++) {
        if (p->p_const[j] < 0) {
            char d[160];
            const pv *gs = &p->v[p->plan->outputs[p->p_grad[j]]];
            if (p->tc.param_constants)
                return wgml_set_error(p->ctx, WGML_ERR_ARG,
                                      "program: training: parameter %d (%s): constant %d is not an f32 constant of the "
                                      "method (%d constants)",
                                      j, p->p_name[j], p->tc.param_constants[j], p->n_consts);
            return wgml_set_error(p->ctx, WGML_ERR_ARG,
                                  "program: training: parameter %d (%s, gradient output %d): no f32 constant of shape %s "
                                  "left to pair it with",
                                  j, p->p_name[j], p->p_grad[j], shape_text(d, sizeof d, gs));
        }
        wgml_status s = wgml_adamw_copy_grad(p->g, p->opt, p->p_t[j], p->v[p->plan->outputs[p->p_grad[j]]].t);
        if (s) return s;
    }
    return p->tc.optimizer == WGML_PROGRAM_SGD ? wgml_sgd_step(p->g, p->opt) : wgml_adamw_step(p->g, p->opt);
}

/* ---- delegates ----------------------------------------------------------------------------- */

static wgml_status vk_slots(wgml_program *p, const pte_vk_graph *vg, pv *v, int di) {
    for (uint32_t i = 0; i < vg->n_values; i++) {
        const pte_vk_value *x = &vg->values[i];
        pv *s = &v[i];
        s->constant_id = -1;
        switch (x->type) {
        case PTE_VK_NULL: s->kind = PV_NULL; break;
        case PTE_VK_INT: s->kind = PV_INT, s->i = x->u.i; break;
        case PTE_VK_DOUBLE: s->kind = PV_DOUBLE, s->d = x->u.d; break;
        case PTE_VK_BOOLV: s->kind = PV_BOOL, s->i = x->u.b; break;
        case PTE_VK_SYMINT: s->kind = PV_SYMINT, s->i = x->u.symint; break;
        case PTE_VK_STRING: s->kind = PV_STRING, s->s = x->u.str.s; break;
        case PTE_VK_INT_LIST: s->kind = PV_INTLIST, s->list64 = x->u.int_list.items, s->n = x->u.int_list.n; break;
        case PTE_VK_DOUBLE_LIST: s->kind = PV_DOUBLELIST, s->dlist = x->u.double_list.items, s->n = x->u.double_list.n; break;
        case PTE_VK_BOOL_LIST: s->kind = PV_BOOLLIST, s->n = x->u.bool_list.n; break;
        case PTE_VK_VALUE_LIST: s->kind = PV_VALUELIST, s->ids = x->u.value_list.items, s->n = x->u.value_list.n; break;
        case PTE_VK_TENSOR: {
            const pte_vk_tensor *t = &x->u.tensor;
            fill_tensor_slot(s, t->datatype, t->rank, t->dims, NULL);
            s->constant_id = t->constant_id;
            break;
        }
        default: s->kind = PV_UNSET; break;
        }
    }
    return WGML_OK;
}

/* Binds method tensor `from` into delegate slot `to` (same element count and compute dtype). */
static wgml_status bind_tensor(wgml_program *p, pv *to, const pv *from, const char *what) {
    if (to->kind != PV_TENSOR || from->kind != PV_TENSOR || !from->t || to->unsupported)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: not a computed tensor of a supported shape", what);
    if (slot_numel(to) != wgml_tensor_numel(from->t) || prog_vk_to_wgml(to->vk_dtype) != (int)wgml_tensor_dtype(from->t))
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: %lld elements of %s given %lld of %s", what,
                              (long long)slot_numel(to), prog_vk_dtype_name(to->vk_dtype),
                              (long long)wgml_tensor_numel(from->t), wgml_dtype_name(wgml_tensor_dtype(from->t)));
    to->t = wgml_tensor_rank(from->t) == to->rank ? from->t : wgml_reshape(p->g, from->t, to->rank, to->dims);
    if (to->rank == wgml_tensor_rank(from->t))
        for (int i = 0; i < to->rank; i++)
            if (wgml_tensor_dim(from->t, i) != to->dims[i]) to->t = wgml_reshape(p->g, from->t, to->rank, to->dims);
    return to->t ? WGML_OK : wgml_last_status(p->ctx);
}

static wgml_status run_ops(wgml_program *p, pv *v, size_t nv, const pte_vk_op *ops, uint32_t n) {
    pbuild b = {.ctx = p->ctx, .g = p->g, .v = v, .nv = nv};
    for (uint32_t i = 0; i < n; i++) {
        b.op = ops[i].name.s;
        if (getenv("WGML_PROGRAM_TRACE")) {
            fprintf(stderr, "[program] %s(", b.op);
            for (uint32_t k = 0; k < ops[i].n_args; k++) {
                const pv *a = &v[ops[i].args[k]];
                fprintf(stderr, "%s%d:%d%s", k ? ", " : "", ops[i].args[k], (int)a->kind, a->kind == PV_TENSOR ? (a->t ? "T" : "t") : "");
            }
            fprintf(stderr, ")\n");
        }
        prog_op_fn fn = prog_op_find(b.op);
        if (!fn) return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: unsupported op %s", b.op);
        wgml_status s = fn(&b, ops[i].args, (int)ops[i].n_args);
        if (s) return s;
    }
    return WGML_OK;
}

/* Whether method value `arg` can be delegate input slot `in` (bind_tensor's rule). */
static int input_fits(const wgml_program *p, int32_t arg, const pv *in) {
    const pv *a = &p->v[arg];
    return in->kind == PV_TENSOR && !in->unsupported && a->kind == PV_TENSOR && a->t &&
           slot_numel(in) == wgml_tensor_numel(a->t) && prog_vk_to_wgml(in->vk_dtype) == (int)wgml_tensor_dtype(a->t);
}

/* take[i]: the call argument graph input i is bound to. The call passes the lowered module's
 * inputs, then its outputs; the Vulkan preprocess leaves out of the graph's inputs a placeholder
 * that no operator uses (vulkan_graph_builder.py, process_placeholder_node) while the call still
 * passes it: circular padding copies the input into a slice of an empty buffer, and once the
 * copy is simplified the buffer is an input nothing reads. So when the call has more inputs than
 * the graph, the graph's inputs are matched in order to the call's by element count and dtype
 * (the arguments in between are the unused ones); a match that is not unique is refused. */
static wgml_status delegate_inputs(wgml_program *p, const pte_instruction *ins, const pte_vk_graph *vg, const pv *v,
                                   int di, uint32_t *take) {
    uint32_t n_args = ins->u.delegate.n_args, n_in = vg->n_inputs;
    if (n_args < n_in + vg->n_outputs)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: delegate %d: %u arguments for %u inputs and %u outputs", di,
                              n_args, n_in, vg->n_outputs);
    uint32_t n_call = n_args - vg->n_outputs, w = n_call + 1;
    if (n_call == n_in) {
        for (uint32_t i = 0; i < n_in; i++) take[i] = i;
        return WGML_OK;
    }
    /* ways[i·w + j]: the in-order matches of graph inputs 0..i-1 among call arguments 0..j-1 (capped at 2) */
    unsigned char *ways = calloc((size_t)(n_in + 1) * w, 1);
    if (!ways) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (uint32_t j = 0; j <= n_call; j++) ways[j] = 1;
    for (uint32_t i = 1; i <= n_in; i++)
        for (uint32_t j = 1; j <= n_call; j++) {
            int k = ways[i * w + j - 1] + (input_fits(p, ins->u.delegate.args[j - 1], &v[vg->input_ids[i - 1]]) ? ways[(i - 1) * w + j - 1] : 0);
            ways[i * w + j] = (unsigned char)(k > 2 ? 2 : k);
        }
    int n_ways = ways[n_in * w + n_call];
    for (uint32_t i = n_in, j = n_call; n_ways == 1 && i > 0; j--)
        if (ways[i * w + j - 1] == 0) take[--i] = j - 1; /* the one match uses argument j - 1 */
    free(ways);
    if (n_ways != 1)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT,
                              "program: delegate %d: %u inputs for a graph of %u, and %s of the graph's inputs to them", di,
                              n_call, n_in, n_ways ? "more than one matching" : "no matching");
    return WGML_OK;
}

static wgml_status build_delegate(wgml_program *p, const pte_instruction *ins) {
    int di = ins->u.delegate.delegate_index;
    pte_vk_graph *vg = p->vk[di];
    pv *v = calloc(vg->n_values ? vg->n_values : 1, sizeof *v);
    uint32_t *take = calloc(vg->n_inputs + 1, sizeof *take);
    if (!v || !take) {
        free(v), free(take);
        return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    }
    wgml_status s = vk_slots(p, vg, v, di);
    if (!s) s = delegate_inputs(p, ins, vg, v, di, take);
    char what[64];
    for (uint32_t i = 0; !s && i < vg->n_inputs; i++) {
        snprintf(what, sizeof what, "delegate %d input %u", di, i);
        s = bind_tensor(p, &v[vg->input_ids[i]], &p->v[ins->u.delegate.args[take[i]]], what);
    }
    for (uint32_t i = 0; !s && i < vg->n_values; i++) {
        if (v[i].kind != PV_TENSOR || v[i].constant_id < 0 || v[i].t || v[i].unsupported) continue;
        const pte_vk_constant *c = &vg->constants[v[i].constant_id];
        int from = v[i].vk_dtype;
        /* the exporter narrows int64/float64 graphs; constants stored 64-bit are narrowed here */
        if ((from == VK_INT32 || from == VK_FLOAT32) && c->data.size == (uint64_t)slot_numel(&v[i]) * 8)
            from = from == VK_INT32 ? VK_INT64 : VK_FLOAT64;
        snprintf(what, sizeof what, "delegate %d constant %d", di, (int)v[i].constant_id);
        s = upload_constant(p, &v[i], c->data.data, (size_t)c->data.size, from, what, c->named ? c->named_key.s : NULL);
    }
    if (!s) s = run_ops(p, v, vg->n_values, vg->chain, vg->n_chain);
    for (uint32_t i = 0; !s && i < vg->n_outputs; i++) {
        snprintf(what, sizeof what, "delegate %d output %u", di, i);
        pv *dst = &p->v[ins->u.delegate.args[ins->u.delegate.n_args - vg->n_outputs + i]];
        const pv *src = &v[vg->output_ids[i]];
        if (dst->kind != PV_TENSOR) {
            s = wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: not a tensor", what);
            break;
        }
        s = bind_tensor(p, dst, src, what);
    }
    free(v), free(take);
    return s;
}

/* ---- glue kernels -------------------------------------------------------------------------- */

/* The registry name of a method operator ("aten::view_copy" + "out" -> "aten.view_copy.default"),
 * written into buf; NULL when none is registered. */
static const char *kernel_name(const pte_operator *op, char *buf, size_t n) {
    char base[160];
    snprintf(base, sizeof base, "%s", op->name.s);
    for (char *c = strstr(base, "::"); c; c = strstr(base, "::")) memmove(c + 1, c + 2, strlen(c + 2) + 1), *c = '.';
    const char *ov = op->overload.s;
    /* an out variant named apart from the rule below (any.out is any.dim's): the registry says */
    snprintf(buf, n, "%s.%s", base, ov && *ov ? ov : "default");
    const char *named = prog_op_find_out(buf);
    if (named) {
        snprintf(buf, n, "%s", named);
        return prog_op_find(buf) ? buf : NULL;
    }
    char fn[64] = "default";
    if (ov && *ov && strcmp(ov, "out")) {
        snprintf(fn, sizeof fn, "%s", ov);
        size_t l = strlen(fn);
        if (l > 4 && !strcmp(fn + l - 4, "_out")) fn[l - 4] = 0;
    }
    /* an out variant's functional sibling: "<name>.out" is "<name>.default" or, failing that,
     * .Tensor/.int/.dims/.dim ("mean.out" is mean.dim); "<name>.X_out" is .X or .dim_X */
    static const char *const tries[] = {NULL, "Tensor", "int", "dims", "dim"};
    for (size_t k = 0; k < sizeof tries / sizeof tries[0]; k++) {
        if (k && strcmp(fn, "default")) break;
        snprintf(buf, n, "%s.%s", base, k ? tries[k] : fn);
        if (prog_op_find(buf)) return buf;
    }
    if (strcmp(fn, "default")) {
        snprintf(buf, n, "%s.dim_%s", base, fn);
        if (prog_op_find(buf)) return buf;
    }
    snprintf(buf, n, "%s.%s", base, fn);
    return NULL;
}

/* Out variants list the out argument(s) and then the return; the registry takes the schema's
 * other arguments and the outputs last, so the out arguments go. */
static int kernel_args(const wgml_program *p, const pte_instruction *ins, int32_t *args, int max) {
    int n = (int)ins->u.kernel.n_args;
    if (n > max) return -1;
    if (n < 2) {
        memcpy(args, ins->u.kernel.args, (size_t)n * sizeof *args);
        return n;
    }
    memcpy(args, ins->u.kernel.args, (size_t)n * sizeof *args);
    if (args[n - 2] == args[n - 1]) {
        args[n - 2] = args[n - 1];
        return n - 1;
    }
    const pv *last = &p->v[args[n - 1]];
    const pv *prev = &p->v[args[n - 2]];
    /* a list out argument (split_with_sizes_copy.out) and its return: two ValueLists of the
     * same tensors */
    if (last->kind == PV_VALUELIST && prev->kind == PV_VALUELIST && prev->n == last->n &&
        (last->n == 0 || !memcmp(prev->ids, last->ids, last->n * sizeof *last->ids))) {
        args[n - 2] = args[n - 1];
        return n - 1;
    }
    if (n >= 1 && last->kind == PV_VALUELIST && (int)last->n < n) {
        int k = (int)last->n, same = 1;
        for (int i = 0; i < k; i++)
            if (args[n - 1 - k + i] != last->ids[i]) same = 0;
        if (same) {
            args[n - 1 - k] = args[n - 1];
            return n - k;
        }
    }
    return n;
}

/* ---- load ---------------------------------------------------------------------------------- */

/* Every operator name the method needs that the registry lacks, as one message (each distinct
 * name once, prog_missing); WGML_OK when none. Delegates are parsed here (kept in p->vk). */
static wgml_status check_ops(wgml_program *p) {
    const pte_plan *pl = p->plan;
    prog_missing miss = {0};
    int oom = 0;
    char err[512];
    p->vk = calloc(pl->n_delegates ? pl->n_delegates : 1, sizeof *p->vk);
    if (!p->vk) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    p->n_vk = pl->n_delegates;
    for (uint32_t d = 0; d < pl->n_delegates; d++) {
        wgml_status s = pte_vk_parse_delegate(p->pte, pl, d, &p->vk[d], err, sizeof err);
        if (s) {
            prog_missing_free(&miss);
            return wgml_set_error(p->ctx, s, "program: %s", err);
        }
        for (uint32_t i = 0; i < p->vk[d]->n_chain; i++) {
            const char *name = p->vk[d]->chain[i].name.s;
            if (!prog_op_find(name)) oom |= prog_missing_add(&miss, name);
        }
    }
    for (uint32_t c = 0; c < pl->n_chains; c++)
        for (uint32_t i = 0; i < pl->chains[c].n_instructions; i++) {
            const pte_instruction *ins = &pl->chains[c].instructions[i];
            char name[256];
            if (ins->type == PTE_INSTR_JUMP_FALSE) {
                snprintf(name, sizeof name, "(control flow)");
            } else if (ins->type != PTE_INSTR_KERNEL) {
                continue;
            } else {
                const pte_operator *op = &pl->operators[ins->u.kernel.op_index];
                if (kernel_name(op, name, sizeof name)) continue;
                snprintf(name, sizeof name, "%s.%s (portable kernel)", op->name.s,
                         op->overload.len ? op->overload.s : "default");
            }
            oom |= prog_missing_add(&miss, name);
        }
    wgml_status s = WGML_OK;
    if (oom) {
        s = wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    } else if (miss.n) {
        /* the list ends on a whole name within the context's message (the prefix is < 64) */
        char text[WGML_ERROR_MAX - 64];
        prog_missing_text(&miss, text, sizeof text);
        s = wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %d unsupported operator%s: %s", miss.n,
                           miss.n > 1 ? "s" : "", text);
    }
    prog_missing_free(&miss);
    return s;
}

static wgml_status io_info(wgml_program *p, int value, wgml_program_io *info, const char *what) {
    const pv *s = &p->v[value];
    if (s->kind != PV_TENSOR || p->plan->values[value].type != PTE_VAL_TENSOR || s->unsupported)
        return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s (value %d) is not a tensor", what, value);
    int st = p->plan->values[value].u.tensor.scalar_type;
    if (st != PTE_FLOAT && st != PTE_DOUBLE && st != PTE_INT && st != PTE_LONG && st != PTE_BOOL)
        return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s: dtype %s is not supported", what,
                              pte_scalar_type_name(st));
    info->dtype = (wgml_program_dtype)st;
    info->rank = s->rank;
    memcpy(info->shape, s->dims, sizeof info->shape);
    info->numel = slot_numel(s);
    info->nbytes = (size_t)info->numel * wgml_program_dtype_size(st);
    return WGML_OK;
}

static wgml_status build(wgml_program *p) {
    const pte_plan *pl = p->plan;
    char what[64];
    wgml_status s = method_slots(p);
    if (!s) s = check_ops(p);
    if (s) return s;
    p->g = wgml_graph_new(p->ctx);
    if (!p->g) return wgml_last_status(p->ctx);
    p->n_in = (int)pl->n_inputs, p->n_out = (int)pl->n_outputs;
    p->in = calloc(pl->n_inputs + 1, sizeof *p->in);
    p->out = calloc(pl->n_outputs + 1, sizeof *p->out);
    if (!p->in || !p->out) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    if (p->tc.optimizer && (s = train_prepare(p))) return s;
    for (uint32_t i = 0; i < pl->n_inputs; i++) {
        snprintf(what, sizeof what, "input %u", i);
        p->in[i].value = pl->inputs[i];
        if ((s = io_info(p, pl->inputs[i], &p->in[i].info, what))) return s;
        if (!p->v[pl->inputs[i]].t && (s = make_persistent(p, &p->v[pl->inputs[i]], NULL, 0, 0, what))) return s;
    }
    /* constant and mutable method tensors with data */
    for (uint32_t i = 0; i < pl->n_values; i++) {
        const pte_value *x = &pl->values[i];
        if (x->type != PTE_VAL_TENSOR || p->v[i].t || p->v[i].unsupported) continue;
        const pte_tensor *t = &x->u.tensor;
        if (t->data_kind == PTE_DATA_CONSTANT || t->data_kind == PTE_DATA_MUTABLE) {
            snprintf(what, sizeof what, "constant value %u", i);
            if ((s = upload_constant(p, &p->v[i], t->data.data, (size_t)t->data.size, p->v[i].vk_dtype, what,
                                     t->fqn.len ? t->fqn.s : NULL)))
                return s;
        } else if (t->data_kind == PTE_DATA_EXTERNAL) {
            return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: value %u: data in an external file (.ptd)", i);
        }
    }
    for (uint32_t c = 0; c < pl->n_chains && !s; c++) {
        for (uint32_t i = 0; i < pl->chains[c].n_instructions && !s; i++) {
            const pte_instruction *ins = &pl->chains[c].instructions[i];
            if (ins->type == PTE_INSTR_DELEGATE) {
                s = build_delegate(p, ins);
            } else if (ins->type == PTE_INSTR_MOVE) {
                pv *to = &p->v[ins->u.move.move_to];
                *to = p->v[ins->u.move.move_from];
            } else if (ins->type == PTE_INSTR_KERNEL) {
                char name[256];
                int32_t args[64];
                const pte_operator *op = &pl->operators[ins->u.kernel.op_index];
                int n = kernel_args(p, ins, args, 64);
                if (n < 0) return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s: too many arguments", op->name.s);
                pbuild b = {.ctx = p->ctx, .g = p->g, .v = p->v, .nv = pl->n_values, .op = kernel_name(op, name, sizeof name)};
                if (getenv("WGML_PROGRAM_TRACE")) {
                    fprintf(stderr, "[program] %s (kernel %s, %u arguments):", b.op ? b.op : "?", op->name.s,
                            ins->u.kernel.n_args);
                    for (uint32_t k = 0; k < ins->u.kernel.n_args; k++) {
                        const pv *a = &p->v[ins->u.kernel.args[k]];
                        fprintf(stderr, " %d:%d(n %zu)", ins->u.kernel.args[k], (int)a->kind, a->n);
                    }
                    fprintf(stderr, "\n");
                }
                s = b.op ? prog_op_find(b.op)(&b, args, n) : WGML_ERR_UNSUPPORTED;
            }
        }
    }
    if (s) return s;
    for (uint32_t i = 0; i < pl->n_outputs; i++) {
        snprintf(what, sizeof what, "output %u", i);
        p->out[i].value = pl->outputs[i];
        if ((s = io_info(p, pl->outputs[i], &p->out[i].info, what))) return s;
        if (!p->v[pl->outputs[i]].t)
            return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: output %u (value %d) is never computed", i, pl->outputs[i]);
        if ((s = wgml_graph_keep(p->g, p->v[pl->outputs[i]].t))) return s;
    }
    if (p->opt && (s = train_finish(p))) return s;
    return wgml_graph_compile(p->g);
}

static wgml_program *load_bytes(wgml_ctx *ctx, const void *data, size_t size, const char *method,
                                const wgml_program_train_config *tc) {
    if (!ctx) return NULL;
    if (!data || !size) {
        wgml_set_error(ctx, WGML_ERR_ARG, "program: no bytes");
        return NULL;
    }
    wgml_program *p = calloc(1, sizeof *p);
    uint8_t *copy = malloc(size);
    if (!p || !copy) {
        free(p), free(copy);
        wgml_set_error(ctx, WGML_ERR_OOM, "program: out of host memory");
        return NULL;
    }
    memcpy(copy, data, size);
    p->ctx = ctx, p->bytes = copy, p->size = size;
    if (tc) p->tc = *tc; /* its pairing arrays are the caller's: read during the load only */
    char err[512];
    wgml_status s = pte_parse(p->bytes, p->size, &p->pte, err, sizeof err);
    if (s) {
        wgml_set_error(ctx, s, "program: %s", err);
    } else if (!(p->plan = pte_find_plan(p->pte, method))) {
        s = wgml_set_error(ctx, WGML_ERR_ARG, "program: no method named '%s'", method ? method : "(first)");
    } else {
        s = build(p);
    }
    p->tc.grad_outputs = NULL, p->tc.param_constants = NULL;
    if (s) {
        wgml_program_free(p);
        return NULL;
    }
    return p;
}

wgml_program *wgml_program_load_bytes(wgml_ctx *ctx, const void *data, size_t size, const char *method) {
    return load_bytes(ctx, data, size, method, NULL);
}

wgml_program_train_config wgml_program_train_defaults(wgml_program_optimizer optimizer) {
    return (wgml_program_train_config){.optimizer = optimizer, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                       .weight_decay = optimizer == WGML_PROGRAM_ADAMW ? 1e-2 : 0};
}

wgml_program *wgml_program_load_training(wgml_ctx *ctx, const void *data, size_t size, const char *method,
                                         const wgml_program_train_config *cfg) {
    if (!ctx) return NULL;
    if (!cfg || (cfg->optimizer != WGML_PROGRAM_SGD && cfg->optimizer != WGML_PROGRAM_ADAMW) ||
        ((cfg->grad_outputs || cfg->param_constants) && cfg->n_params <= 0)) {
        wgml_set_error(ctx, WGML_ERR_ARG,
                       "program: training: %s", !cfg ? "no config" : cfg->optimizer != WGML_PROGRAM_SGD && cfg->optimizer != WGML_PROGRAM_ADAMW
                                                                    ? "unknown optimizer (WGML_PROGRAM_SGD or WGML_PROGRAM_ADAMW)"
                                                                    : "grad_outputs or param_constants given without n_params");
        return NULL;
    }
    return load_bytes(ctx, data, size, method, cfg);
}

wgml_program *wgml_program_load(wgml_ctx *ctx, const char *path, const char *method) {
    if (!ctx) return NULL;
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        wgml_set_error(ctx, WGML_ERR_IO, "program: cannot open '%s'", path ? path : "(null)");
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            size_t nc = cap ? 2 * cap : 1 << 16;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) {
                free(buf), fclose(f);
                wgml_set_error(ctx, WGML_ERR_OOM, "program: out of host memory reading '%s'", path);
                return NULL;
            }
            buf = nb, cap = nc;
        }
        size_t r = fread(buf + size, 1, cap - size, f);
        size += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        wgml_set_error(ctx, WGML_ERR_IO, "program: error reading '%s'", path);
        return NULL;
    }
    wgml_program *p = wgml_program_load_bytes(ctx, buf, size, method);
    free(buf);
    return p;
}

void wgml_program_free(wgml_program *p) {
    if (!p) return;
    wgml_adamw_free(p->opt); /* host records only: its tensors belong to p->g */
    if (p->g) wgml_graph_free(p->g);
    free(p->p_grad), free(p->p_const), free(p->p_name), free(p->p_t);
    for (uint32_t i = 0; p->vk && i < p->n_vk; i++) pte_vk_free(p->vk[i]);
    free(p->vk);
    if (p->pte) pte_free(p->pte);
    for (uint32_t i = 0; i < p->n_lists; i++) free(p->lists[i]);
    free(p->lists);
    free(p->consts);
    free(p->v), free(p->in), free(p->out), free(p->bytes), free(p);
}

/* ---- I/O and runs -------------------------------------------------------------------------- */

int wgml_program_input_count(const wgml_program *p) { return p ? p->n_in : 0; }
int wgml_program_output_count(const wgml_program *p) { return p ? p->n_out : 0; }

wgml_status wgml_program_input_info(const wgml_program *p, int i, wgml_program_io *info) {
    if (!p || !info) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_in)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: input %d out of range (the method has %d)", i, p->n_in);
    *info = p->in[i].info;
    return WGML_OK;
}

wgml_status wgml_program_output_info(const wgml_program *p, int i, wgml_program_io *info) {
    if (!p || !info) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_out)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: output %d out of range (the method has %d)", i, p->n_out);
    *info = p->out[i].info;
    return WGML_OK;
}

static int host_vk(int st) { return scalar_to_vk(st); }

/* Writes host data (the io's host dtype, narrowed) into a persistent tensor. */
static wgml_status write_io(wgml_program *p, const char *kind, int i, const prog_io *pio, const void *data, size_t bytes) {
    const wgml_program_io *io = &pio->info;
    if (!data || bytes != io->nbytes)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: %s %d: %zu bytes given, it takes %zu (%lld elements of %s)",
                              kind, i, data ? bytes : 0, io->nbytes, (long long)io->numel, wgml_program_dtype_name(io->dtype));
    wgml_tensor *t = p->v[pio->value].t;
    size_t nb = wgml_tensor_nbytes(t);
    void *tmp = malloc(nb ? nb : 1);
    if (!tmp) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    char what[32];
    snprintf(what, sizeof what, "%s %d", kind, i);
    wgml_status s = convert_in(p->ctx, tmp, data, io->numel, host_vk(io->dtype), what);
    if (!s) s = wgml_tensor_write(t, tmp, nb);
    free(tmp);
    return s;
}

wgml_status wgml_program_set_input(wgml_program *p, int i, const void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_in)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: input %d out of range (the method has %d)", i, p->n_in);
    return write_io(p, "input", i, &p->in[i], data, bytes);
}

wgml_status wgml_program_write_output(wgml_program *p, int i, const void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_out)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: output %d out of range (the method has %d)", i, p->n_out);
    const pv *s = &p->v[p->out[i].value];
    if (!s->state || s->t != s->state)
        return wgml_set_error(p->ctx, WGML_ERR_ARG,
                              "program: output %d is computed by the method, not program state: it cannot be written", i);
    return write_io(p, "output", i, &p->out[i], data, bytes);
}

wgml_status wgml_program_run(wgml_program *p, double *seconds) {
    if (!p) return WGML_ERR_ARG;
    return seconds ? wgml_graph_run_timed(p->g, seconds) : wgml_graph_run(p->g);
}

/* numel values of t (held narrowed: i32 for an int64 dtype, f32 for float64) into data widened
 * back to the host dtype's 8 bytes. */
static wgml_status read_widened(wgml_program *p, wgml_tensor *t, int dtype, int64_t numel, void *data) {
    size_t nb = wgml_tensor_nbytes(t);
    void *tmp = malloc(nb ? nb : 1);
    if (!tmp) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    wgml_status s = wgml_tensor_read(t, tmp, nb);
    for (int64_t k = 0; !s && k < numel; k++) {
        if (dtype == WGML_PROG_I64) {
            int64_t x = ((const int32_t *)tmp)[k];
            memcpy((uint8_t *)data + 8 * k, &x, 8);
        } else {
            double x = ((const float *)tmp)[k];
            memcpy((uint8_t *)data + 8 * k, &x, 8);
        }
    }
    free(tmp);
    return s;
}

wgml_status wgml_program_get_output(wgml_program *p, int i, void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_out)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: output %d out of range (the method has %d)", i, p->n_out);
    const wgml_program_io *io = &p->out[i].info;
    if (!data || bytes != io->nbytes)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: output %d: %zu bytes given, it takes %zu", i,
                              data ? bytes : 0, io->nbytes);
    wgml_tensor *t = p->v[p->out[i].value].t;
    if (io->dtype != WGML_PROG_I64 && io->dtype != WGML_PROG_F64) return wgml_tensor_read(t, data, bytes);
    return read_widened(p, t, io->dtype, io->numel, data);
}

/* ---- constants ----------------------------------------------------------------------------- */

int wgml_program_constant_count(const wgml_program *p) { return p ? p->n_consts : 0; }

wgml_status wgml_program_constant_info(const wgml_program *p, int i, wgml_program_io *info, const char **name) {
    if (!p || !info) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_consts)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: constant %d out of range (%d constants)", i, p->n_consts);
    *info = p->consts[i].info;
    if (name) *name = p->consts[i].name;
    return WGML_OK;
}

wgml_status wgml_program_write_constant(wgml_program *p, int i, const void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_consts)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: constant %d out of range (%d constants)", i, p->n_consts);
    const prog_const *c = &p->consts[i];
    if (!data || bytes != c->info.nbytes)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: constant %d: %zu bytes given, it takes %zu", i,
                              data ? bytes : 0, c->info.nbytes);
    size_t nb = wgml_tensor_nbytes(c->t);
    void *tmp = malloc(nb ? nb : 1);
    if (!tmp) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    char what[32];
    snprintf(what, sizeof what, "constant %d", i);
    wgml_status s = convert_in(p->ctx, tmp, data, c->info.numel, host_vk(c->info.dtype), what);
    if (!s) s = wgml_tensor_write(c->t, tmp, nb);
    free(tmp);
    return s;
}

wgml_status wgml_program_read_constant(wgml_program *p, int i, void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (i < 0 || i >= p->n_consts)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: constant %d out of range (%d constants)", i, p->n_consts);
    const prog_const *c = &p->consts[i];
    if (!data || bytes != c->info.nbytes)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: constant %d: %zu bytes given, it takes %zu", i,
                              data ? bytes : 0, c->info.nbytes);
    size_t nb = wgml_tensor_nbytes(c->t);
    if (nb == bytes) return wgml_tensor_read(c->t, data, bytes);
    return read_widened(p, c->t, c->info.dtype, c->info.numel, data); /* stored 64-bit, held narrowed */
}

/* ---- training ------------------------------------------------------------------------------ */

int wgml_program_param_count(const wgml_program *p) { return p ? p->n_params : 0; }

wgml_status wgml_program_param_info(const wgml_program *p, int j, int *constant, int *grad_output, const char **name) {
    if (!p) return WGML_ERR_ARG;
    if (j < 0 || j >= p->n_params)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: parameter %d out of range (%d parameters)", j, p->n_params);
    if (constant) *constant = p->p_const[j];
    if (grad_output) *grad_output = p->p_grad[j];
    if (name) *name = p->p_name[j];
    return WGML_OK;
}

wgml_status wgml_program_set_lr(wgml_program *p, double lr) {
    if (!p) return WGML_ERR_ARG;
    if (!p->opt) return wgml_set_error(p->ctx, WGML_ERR_STATE, "program: set_lr: the program was not loaded for training");
    return wgml_adamw_set_lr(p->opt, lr);
}

wgml_status wgml_program_steps(wgml_program *p, int64_t *steps) {
    if (!p) return WGML_ERR_ARG;
    if (!p->opt) return wgml_set_error(p->ctx, WGML_ERR_STATE, "program: steps: the program was not loaded for training");
    return wgml_adamw_stats(p->opt, steps, NULL, NULL);
}
