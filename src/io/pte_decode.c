/* What the ExecuTorch readers share (pte_internal.h): the arena a parse's decoded structure
 * lives in, vectors and strings decoded over flatbuf.h, value-id and shape-size checks. The
 * program (pte.c) and the Vulkan delegate graph (pte_vk.c) each call these, so one rule holds
 * for both and each message reads the same. */
#include "io/pte_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena: every allocation of a parse, freed at once ------------------------------------ */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_block;

void *pte_arena_alloc(pte_arena *a, uint64_t n) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + 15) & ~(uint64_t)15;
    arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? (size_t)n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += (size_t)n;
    memset(p, 0, (size_t)n);
    return p;
}

void pte_arena_free(pte_arena *a) {
    arena_block *b = a->head;
    while (b) {
        arena_block *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

/* ---- decoding helpers ------------------------------------------------------------------------ */

wgml_status pte_oom(fb_ctx *c, const char *what) {
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "%s: %s: out of host memory", c->prefix, what);
    return WGML_ERR_OOM;
}

wgml_status pte_decode_vec(fb_ctx *c, pte_arena *a, const fb_table *t, unsigned field, pte_elem kind,
                           const char *what, const void **out, uint32_t *n) {
    static const uint32_t file_bytes[] = {[PTE_EL_I32] = 4, [PTE_EL_U32] = 4, [PTE_EL_I64] = 8, [PTE_EL_U64] = 8,
                                          [PTE_EL_F64] = 8, [PTE_EL_BOOL] = 1, [PTE_EL_U8] = 1};
    static const size_t host_bytes[] = {[PTE_EL_I32] = 4, [PTE_EL_U32] = 4, [PTE_EL_I64] = 8, [PTE_EL_U64] = 8,
                                        [PTE_EL_F64] = 8, [PTE_EL_BOOL] = sizeof(bool), [PTE_EL_U8] = 1};
    fb_vec v;
    *out = NULL;
    *n = 0;
    wgml_status s = fb_vector_field(c, t, field, file_bytes[kind], what, &v, NULL);
    if (s || v.n == 0) return s;
    if ((s = fb_spend(c, v.n, v.pos, what))) return s;
    void *dst = pte_arena_alloc(a, (uint64_t)v.n * host_bytes[kind]);
    if (!dst) return pte_oom(c, what);
    for (uint32_t i = 0; i < v.n; i++) {
        uint64_t raw = fb_vec_raw(c, &v, i);
        switch (kind) {
        case PTE_EL_I32: ((int32_t *)dst)[i] = (int32_t)(uint32_t)raw; break;
        case PTE_EL_U32: ((uint32_t *)dst)[i] = (uint32_t)raw; break;
        case PTE_EL_I64: ((int64_t *)dst)[i] = (int64_t)raw; break;
        case PTE_EL_U64: ((uint64_t *)dst)[i] = raw; break;
        case PTE_EL_F64: memcpy((double *)dst + i, &raw, 8); break;
        case PTE_EL_BOOL: ((bool *)dst)[i] = raw != 0; break;
        case PTE_EL_U8: ((uint8_t *)dst)[i] = (uint8_t)raw; break;
        }
    }
    *out = dst;
    *n = v.n;
    return WGML_OK;
}

wgml_status pte_string(fb_ctx *c, const fb_table *t, unsigned field, const char *what, pte_str *out) {
    return fb_string_field(c, t, field, what, &out->s, &out->len, NULL);
}

wgml_status pte_check_ids(fb_ctx *c, uint64_t at, const char *what, const int32_t *ids, uint32_t n, uint32_t n_values,
                          bool opt) {
    for (uint32_t i = 0; i < n; i++)
        if (!(ids[i] >= 0 && (uint32_t)ids[i] < n_values) && !(opt && ids[i] == -1))
            return fb_fail(c, at, "%s[%u]: value id %d out of range (%u values)", what, i, ids[i], n_values);
    return WGML_OK;
}

wgml_status pte_shape_size(fb_ctx *c, uint64_t at, const char *what, const char *field, const uint32_t *dims, uint32_t rank,
                           size_t elem_bytes, uint64_t *numel, uint64_t *nbytes) {
    uint64_t e = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] && e > UINT64_MAX / dims[i]) return fb_fail(c, at, "%s: element count of the %s overflows", what, field);
        e *= dims[i];
    }
    if (e > UINT64_MAX / elem_bytes) return fb_fail(c, at, "%s: byte size of the %s overflows", what, field);
    *numel = e;
    *nbytes = e * elem_bytes;
    return WGML_OK;
}
