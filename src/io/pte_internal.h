/* What pte.c (the program) and pte_vk.c (the Vulkan delegate graph) share: the arena that
 * holds a parse's decoded structure, and the decoding of vectors and strings over flatbuf.h.
 * Internal to src/io/pte*. */
#ifndef WGML_IO_PTE_INTERNAL_H
#define WGML_IO_PTE_INTERNAL_H

#include "io/flatbuf.h"
#include "io/pte.h"

/* Blocks of memory freed all at once: a failed parse frees everything with one call. */
typedef struct pte_arena {
    struct arena_block *head;
} pte_arena;

/* n zeroed bytes, 16-byte aligned; NULL when out of memory. */
void *pte_arena_alloc(pte_arena *a, uint64_t n);
void pte_arena_free(pte_arena *a);

/* Element kinds of a decoded vector: file element -> host array element. */
typedef enum pte_elem { PTE_EL_I32, PTE_EL_U32, PTE_EL_I64, PTE_EL_U64, PTE_EL_F64, PTE_EL_BOOL, PTE_EL_U8 } pte_elem;

/* Decodes the vector in field slot `field` of t into a host array in the arena (NULL and 0
 * when absent or empty); the elements count against the context's budget. */
wgml_status pte_decode_vec(fb_ctx *c, pte_arena *a, const fb_table *t, unsigned field, pte_elem kind,
                           const char *what, const void **out, uint32_t *n);
/* A string field as a pte_str ({"", 0} when absent). */
wgml_status pte_string(fb_ctx *c, const fb_table *t, unsigned field, const char *what, pte_str *out);
/* Writes "<prefix>: <what>: out of host memory" and returns WGML_ERR_OOM. */
wgml_status pte_oom(fb_ctx *c, const char *what);

#endif
