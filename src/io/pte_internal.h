/* What pte.c (the program) and pte_vk.c (the Vulkan delegate graph) share, in pte_decode.c:
 * the arena that holds a parse's decoded structure, the decoding of vectors and strings over
 * flatbuf.h, and the value-id and shape-size checks. Internal to src/io/pte*. */
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
/* Value ids ids[0..n) each below n_values (or -1, None, when opt); fails at `at` naming the
 * first that is not. */
wgml_status pte_check_ids(fb_ctx *c, uint64_t at, const char *what, const int32_t *ids, uint32_t n, uint32_t n_values,
                          bool opt);
/* A shape's element count (the product of dims[0..rank)) and its bytes at elem_bytes each, into
 * *numel and *nbytes; fails at `at` naming the shape's field ("sizes", "dims") when either
 * overflows 64 bits. */
wgml_status pte_shape_size(fb_ctx *c, uint64_t at, const char *what, const char *field, const uint32_t *dims, uint32_t rank,
                           size_t elem_bytes, uint64_t *numel, uint64_t *nbytes);

/* A message's `what` written into buf (the result is used so that a message cut short at the
 * buffer size is not a warning). */
#define WHAT(buf, ...) ((void)(snprintf(buf, sizeof buf, __VA_ARGS__) < 0 && (buf[0] = 0)))

#endif
