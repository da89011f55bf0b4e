/* A loaded method's values: the dtype codes (the public WGML_PROG_* codes are ExecuTorch's
 * scalar types; the slots speak the delegate's VkTensor codes), the slots of the method and of
 * each delegate graph, and the uploads of host data into persistent tensors under the dtype
 * policy (int64 narrowed to int32 with a range check, float64 to float32, bools as 0 or 1),
 * with the record of every uploaded constant that wgml_program_constant_* reads. */
#include "program/program_internal.h"

static int vk_to_prog(int vk) {
    static const int m[] = {WGML_PROG_BOOL, WGML_PROG_U8, WGML_PROG_I8, WGML_PROG_I32, WGML_PROG_F16,
                            WGML_PROG_F32,  WGML_PROG_F64, WGML_PROG_I64};
    return vk >= 0 && vk < 8 ? m[vk] : -1;
}

/* Records an uploaded constant (host layout `from`) for wgml_program_constant_*. */
wgml_status prog_note_constant(wgml_program *p, const pv *s, int from, const char *name) {
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

/* The VkTensor dtype code of an ExecuTorch scalar type (the pv slots speak the delegate's). */
int prog_scalar_to_vk(int st) {
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
wgml_status prog_method_slots(wgml_program *p) {
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
            fill_tensor_slot(s, prog_scalar_to_vk(t->scalar_type), t->rank, NULL, t->sizes);
            break;
        }
        default: s->kind = PV_UNSET; break;
        }
    }
    return WGML_OK;
}

wgml_status prog_vk_slots(wgml_program *p, const pte_vk_graph *vg, pv *v, int di) {
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

/* ---- uploads with the dtype policy --------------------------------------------------------- */

/* Converts n elements from host type `from` (a VkTensor code) to the wgml dtype `to` computes
 * in, into dst. int64 → int32 checks the range. */
wgml_status prog_convert_in(wgml_ctx *ctx, void *dst, const void *src, int64_t n, int from, const char *what) {
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

int64_t prog_slot_numel(const pv *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

const char *prog_shape_text(char *buf, size_t n, const pv *s) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s->rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)s->dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* A persistent tensor for slot s holding `bytes` (host layout `from`, 64-bit types narrowed),
 * or uninitialised when data is NULL. */
wgml_status prog_make_persistent(wgml_program *p, pv *s, const void *data, size_t bytes, int from, const char *what) {
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
    int64_t n = prog_slot_numel(s);
    size_t esize = from == VK_INT64 || from == VK_FLOAT64 ? 8 : from == VK_BOOL || from == VK_UINT8 || from == VK_INT8 ? 1 : 4;
    if (bytes != (size_t)n * esize)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: %zu bytes of data for %lld elements of %s", what,
                              bytes, (long long)n, prog_vk_dtype_name(from));
    size_t out_bytes = wgml_tensor_nbytes(s->t);
    void *tmp = malloc(out_bytes ? out_bytes : 1);
    if (!tmp) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    wgml_status st = prog_convert_in(p->ctx, tmp, data, n, from, what);
    if (!st) st = wgml_tensor_write(s->t, tmp, out_bytes);
    free(tmp);
    return st;
}
