/* The VulkanBackend delegate blob: a VH00 header, the VkGraph flatbuffer (schema vkgraph,
 * identifier "VK00") and the constant bytes.
 *
 * Header (little-endian): bytes 0..3 zero padding, 4..7 "VH00", 8..9 u16 header length (30 as
 * written; at least 30 accepted), 10..13 u32 flatbuffer offset, 14..17 u32 flatbuffer size,
 * 18..21 u32 constant-bytes offset, 22..29 u64 constant-bytes size (0: the rest of the blob).
 * Checked: flatbuffer offset >= header length, flatbuffer size > 0, constant bytes after the
 * flatbuffer, every range inside the blob.
 *
 * Field slots follow the schema order of backends/vulkan/serialization/schema.fbs. */
#include "io/pte.h"
#include "io/pte_internal.h"
#include "io/errbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t pte_vk_dtype_size(int t) {
    switch (t) {
    case PTE_VK_BOOL: case PTE_VK_UINT8: case PTE_VK_INT8: return 1;
    case PTE_VK_FLOAT16: return 2;
    case PTE_VK_INT32: case PTE_VK_FLOAT32: return 4;
    case PTE_VK_FLOAT64: case PTE_VK_INT64: return 8;
    default: return 0;
    }
}

const char *pte_vk_dtype_name(int t) {
    switch (t) {
    case PTE_VK_BOOL: return "bool";
    case PTE_VK_UINT8: return "uint8";
    case PTE_VK_INT8: return "int8";
    case PTE_VK_INT32: return "int32";
    case PTE_VK_FLOAT16: return "float16";
    case PTE_VK_FLOAT32: return "float32";
    case PTE_VK_FLOAT64: return "float64";
    case PTE_VK_INT64: return "int64";
    case PTE_VK_UNSET: return "unset";
    default: return "?";
    }
}

typedef struct pte_vk_owned {
    pte_vk_graph pub; /* first: pte_vk_free casts back */
    pte_arena arena;
} pte_vk_owned;

static wgml_status parse_tensor(fb_ctx *c, pte_arena *a, const fb_table *t, const char *what, pte_vk_tensor *x) {
    wgml_status s;
    const void *v;
    if ((s = fb_i8(c, t, 0, 0, what, &x->datatype)) ||
        (s = pte_decode_vec(c, a, t, 1, PTE_EL_U32, what, &v, &x->rank)) ||
        (s = fb_i32(c, t, 2, 0, what, &x->constant_id)) || (s = fb_i32(c, t, 3, 0, what, &x->mem_obj_id)) ||
        (s = fb_u8(c, t, 4, 255, what, &x->storage_type)) || (s = fb_u8(c, t, 5, 255, what, &x->memory_layout)) ||
        (s = fb_i8(c, t, 6, PTE_VK_UNSET, what, &x->staging_datatype)))
        return s;
    x->dims = v;
    size_t es = pte_vk_dtype_size(x->datatype);
    if (!es) return fb_fail(c, t->pos, "%s: VkTensor.datatype %d is not a known type", what, x->datatype);
    if (x->staging_datatype != PTE_VK_UNSET && !pte_vk_dtype_size(x->staging_datatype))
        return fb_fail(c, t->pos, "%s: VkTensor.staging_datatype %d is not a known type", what, x->staging_datatype);
    return pte_shape_size(c, t->pos, what, "dims", x->dims, x->rank, es, &x->numel, &x->nbytes);
}

static wgml_status parse_value(fb_ctx *c, pte_arena *a, const fb_table *vv, const char *what, pte_vk_value *out) {
    uint8_t type;
    fb_table t;
    const void *v;
    wgml_status s = fb_union_field(c, vv, 0, what, &type, &t);
    if (s) return s;
    out->type = (pte_vk_value_type)type;
    switch (type) {
    case PTE_VK_NULL: return WGML_OK;
    case PTE_VK_INT: return fb_i64(c, &t, 0, 0, what, &out->u.i);
    case PTE_VK_DOUBLE: return fb_f64(c, &t, 0, 0, what, &out->u.d);
    case PTE_VK_BOOLV: return fb_bool(c, &t, 0, what, &out->u.b);
    case PTE_VK_TENSOR: return parse_tensor(c, a, &t, what, &out->u.tensor);
    case PTE_VK_INT_LIST:
        s = pte_decode_vec(c, a, &t, 0, PTE_EL_I64, what, &v, &out->u.int_list.n);
        out->u.int_list.items = v;
        return s;
    case PTE_VK_DOUBLE_LIST:
        s = pte_decode_vec(c, a, &t, 0, PTE_EL_F64, what, &v, &out->u.double_list.n);
        out->u.double_list.items = v;
        return s;
    case PTE_VK_BOOL_LIST:
        s = pte_decode_vec(c, a, &t, 0, PTE_EL_BOOL, what, &v, &out->u.bool_list.n);
        out->u.bool_list.items = v;
        return s;
    case PTE_VK_VALUE_LIST:
        s = pte_decode_vec(c, a, &t, 0, PTE_EL_I32, what, &v, &out->u.value_list.n);
        out->u.value_list.items = v;
        return s;
    case PTE_VK_STRING: return pte_string(c, &t, 0, what, &out->u.str);
    case PTE_VK_SYMINT: return fb_i32(c, &t, 0, 0, what, &out->u.symint);
    case 0: return fb_fail(c, vv->pos, "%s: VkValue without a value (union type NONE)", what);
    default:
        if (c->err && c->errlen)
            snprintf(c->err, c->errlen, "%s: %s: unsupported VkValue type %u at file offset %llu", c->prefix, what, type,
                     (unsigned long long)(c->base + vv->pos));
        return WGML_ERR_UNSUPPORTED;
    }
}

/* ValueLists must not contain themselves, directly or through other lists (a consumer that
 * looks through lists would loop): a depth-first walk with an explicit stack, three colours. */
static wgml_status check_value_lists(fb_ctx *c, pte_arena *a, const pte_vk_graph *g, uint64_t at) {
    uint8_t *colour = pte_arena_alloc(a, g->n_values);
    uint32_t *stack = pte_arena_alloc(a, (uint64_t)g->n_values * 2 * sizeof(uint32_t));
    if (!colour || !stack) return pte_oom(c, "VkGraph.values");
    for (uint32_t r = 0; r < g->n_values; r++) {
        if (g->values[r].type != PTE_VK_VALUE_LIST || colour[r]) continue;
        uint32_t sp = 0;
        stack[sp++] = r; /* pairs: value id, next item index */
        stack[sp++] = 0;
        colour[r] = 1;
        while (sp) {
            uint32_t id = stack[sp - 2], k = stack[sp - 1];
            const pte_vk_value *v = &g->values[id];
            if (k == v->u.value_list.n) {
                colour[id] = 2;
                sp -= 2;
                continue;
            }
            stack[sp - 1] = k + 1;
            uint32_t to = (uint32_t)v->u.value_list.items[k];
            if (g->values[to].type != PTE_VK_VALUE_LIST) continue;
            if (colour[to] == 1)
                return fb_fail(c, at, "VkGraph.values[%u]: ValueList item %u refers to list %u, which contains it (a cycle)",
                               id, k, to);
            if (colour[to] == 2) continue;
            colour[to] = 1;
            stack[sp++] = to;
            stack[sp++] = 0;
        }
    }
    return WGML_OK;
}

/* VkGraph.values (field 2): every value, parsed by parse_value. */
static wgml_status parse_values(fb_ctx *c, pte_arena *a, const fb_table *root, pte_vk_graph *g) {
    fb_vec vec;
    char what[96];
    wgml_status s;
    if ((s = fb_vector_field(c, root, 2, 4, "VkGraph.values", &vec, NULL)) || !vec.n) return s;
    if (!(g->values = pte_arena_alloc(a, (uint64_t)vec.n * sizeof *g->values))) return pte_oom(c, "VkGraph.values");
    g->n_values = vec.n;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table t;
        WHAT(what, "VkGraph.values[%u]", i);
        if ((s = fb_vec_table(c, &vec, i, 1, what, &t)) || (s = parse_value(c, a, &t, what, &g->values[i]))) return s;
    }
    return WGML_OK;
}

/* VkGraph.chain (field 1): the operator calls, each named, its arguments value ids in range. */
static wgml_status parse_chain(fb_ctx *c, pte_arena *a, const fb_table *root, pte_vk_graph *g) {
    fb_vec vec;
    const void *v;
    char what[96];
    wgml_status s;
    if ((s = fb_vector_field(c, root, 1, 4, "VkGraph.chain", &vec, NULL)) || !vec.n) return s;
    if (!(g->chain = pte_arena_alloc(a, (uint64_t)vec.n * sizeof *g->chain))) return pte_oom(c, "VkGraph.chain");
    g->n_chain = vec.n;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table t;
        pte_vk_op *op = &g->chain[i];
        WHAT(what, "VkGraph.chain[%u]", i);
        if ((s = fb_vec_table(c, &vec, i, 1, what, &t)) || (s = fb_u32(c, &t, 0, 0, what, &op->node_id)) ||
            (s = pte_string(c, &t, 1, what, &op->name)) ||
            (s = pte_decode_vec(c, a, &t, 2, PTE_EL_I32, what, &v, &op->n_args)))
            return s;
        op->args = v;
        if (!op->name.len) return fb_fail(c, t.pos, "%s: OperatorCall without a name", what);
        char w[160];
        WHAT(w, "%s (%s).args", what, op->name.s);
        if ((s = pte_check_ids(c, t.pos, w, op->args, op->n_args, g->n_values, false))) return s;
    }
    return WGML_OK;
}

/* VkGraph.input_ids and output_ids (fields 3, 4): value ids in range. */
static wgml_status parse_io_ids(fb_ctx *c, pte_arena *a, const fb_table *root, pte_vk_graph *g) {
    const void *v;
    wgml_status s;
    if ((s = pte_decode_vec(c, a, root, 3, PTE_EL_U32, "VkGraph.input_ids", &v, &g->n_inputs))) return s;
    g->input_ids = v;
    if ((s = pte_decode_vec(c, a, root, 4, PTE_EL_U32, "VkGraph.output_ids", &v, &g->n_outputs))) return s;
    g->output_ids = v;
    for (int k = 0; k < 2; k++) {
        const uint32_t *ids = k ? g->output_ids : g->input_ids;
        uint32_t n = k ? g->n_outputs : g->n_inputs;
        for (uint32_t i = 0; i < n; i++)
            if (ids[i] >= g->n_values)
                return fb_fail(c, root->pos, "VkGraph.%s[%u]: value id %u out of range (%u values)",
                               k ? "output_ids" : "input_ids", i, ids[i], g->n_values);
    }
    return WGML_OK;
}

/* A constant's bytes: by name (offset UINT64_MAX) from the program's named data, else a range of
 * the blob's constant bytes; at pos for the error. */
static wgml_status resolve_constant(fb_ctx *c, const pte_program *p, const pte_vk_graph *g, uint64_t pos,
                                    const char *what, pte_vk_constant *k) {
    if (k->offset == UINT64_MAX) {
        k->named = true;
        if (!k->named_key.len) return fb_fail(c, pos, "%s: stored by name (offset UINT64_MAX) without a named_key", what);
        if (!p) return WGML_OK; /* a bare blob: no named data to resolve against (data stays empty) */
        const pte_named_data *nd = pte_find_named_data(p, k->named_key.s, k->named_key.len);
        if (!nd)
            return fb_fail(c, pos,
                           "%s: named_key '%s' is not in the program's named data (%u entries; external data files "
                           "are not read)",
                           what, k->named_key.s, p->n_named_data);
        if (k->length > nd->bytes.size)
            return fb_fail(c, pos, "%s: length %llu is more than the %llu bytes of named data '%s'", what,
                           (unsigned long long)k->length, (unsigned long long)nd->bytes.size, k->named_key.s);
        k->data = (pte_bytes){.data = k->length ? nd->bytes.data : NULL, .size = k->length,
                              .file_offset = nd->bytes.file_offset};
        return WGML_OK;
    }
    const pte_bytes *cb = &g->constant_bytes;
    if (k->offset > cb->size || k->length > cb->size - k->offset)
        return fb_fail(c, pos, "%s: range [%llu, %llu + %llu) outside the %llu constant bytes", what,
                       (unsigned long long)k->offset, (unsigned long long)k->offset, (unsigned long long)k->length,
                       (unsigned long long)cb->size);
    k->data = (pte_bytes){.data = k->length ? cb->data + k->offset : NULL, .size = k->length,
                          .file_offset = cb->file_offset + k->offset};
    return WGML_OK;
}

/* VkGraph.constants (field 5), each resolved to its bytes. */
static wgml_status parse_constants(fb_ctx *c, pte_arena *a, const pte_program *p, const fb_table *root,
                                   pte_vk_graph *g) {
    fb_vec vec;
    char what[96];
    wgml_status s;
    if ((s = fb_vector_field(c, root, 5, 4, "VkGraph.constants", &vec, NULL)) || !vec.n) return s;
    if (!(g->constants = pte_arena_alloc(a, (uint64_t)vec.n * sizeof *g->constants)))
        return pte_oom(c, "VkGraph.constants");
    g->n_constants = vec.n;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table t;
        pte_vk_constant *k = &g->constants[i];
        WHAT(what, "VkGraph.constants[%u]", i);
        if ((s = fb_vec_table(c, &vec, i, 1, what, &t)) || (s = fb_u64(c, &t, 0, 0, what, &k->offset)) ||
            (s = fb_u64(c, &t, 1, 0, what, &k->length)) || (s = pte_string(c, &t, 2, what, &k->named_key)) ||
            (s = resolve_constant(c, p, g, t.pos, what, k)))
            return s;
    }
    return WGML_OK;
}

/* The cross-references that need every value and constant: list items are value ids, and a
 * tensor's constant exists and holds at least the tensor's bytes. */
static wgml_status check_value_refs(fb_ctx *c, const pte_vk_graph *g, uint64_t pos) {
    char what[96];
    wgml_status s;
    for (uint32_t i = 0; i < g->n_values; i++) {
        const pte_vk_value *x = &g->values[i];
        if (x->type == PTE_VK_VALUE_LIST) {
            WHAT(what, "VkGraph.values[%u].items", i);
            if ((s = pte_check_ids(c, pos, what, x->u.value_list.items, x->u.value_list.n, g->n_values, false))) return s;
        }
        if (x->type != PTE_VK_TENSOR || x->u.tensor.constant_id < 0) continue;
        const pte_vk_tensor *t = &x->u.tensor;
        if ((uint32_t)t->constant_id >= g->n_constants)
            return fb_fail(c, pos, "VkGraph.values[%u]: VkTensor.constant_id %d out of range (%u constants)", i,
                           t->constant_id, g->n_constants);
        /* at least the tensor's bytes: the exporter writes the whole storage of the parameter,
         * which for a view into a larger storage is more than the tensor's own bytes */
        const pte_vk_constant *k = &g->constants[t->constant_id];
        if (k->length < t->nbytes)
            return fb_fail(c, pos,
                           "VkGraph.values[%u]: a %s tensor of %llu elements (%llu bytes) has constant %d of %llu "
                           "bytes (a dtype or shape mismatch)",
                           i, pte_vk_dtype_name(t->datatype), (unsigned long long)t->numel,
                           (unsigned long long)t->nbytes, t->constant_id, (unsigned long long)k->length);
    }
    return WGML_OK;
}

static wgml_status parse_graph(fb_ctx *c, pte_arena *a, const pte_program *p, pte_vk_graph *g) {
    fb_table root;
    fb_vec vec;
    char what[96];
    wgml_status s;
    if ((s = fb_root(c, "VK00", "VkGraph", &root)) || (s = pte_string(c, &root, 0, "VkGraph.version", &g->version)) ||
        (s = parse_values(c, a, &root, g)) || (s = parse_chain(c, a, &root, g)) || (s = parse_io_ids(c, a, &root, g)) ||
        (s = parse_constants(c, a, p, &root, g)))
        return s;
    /* shaders: verified tables, counted (wgml has its own kernels) */
    if ((s = fb_vector_field(c, &root, 6, 4, "VkGraph.shaders", &vec, NULL))) return s;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table t;
        WHAT(what, "VkGraph.shaders[%u]", i);
        if ((s = fb_vec_table(c, &vec, i, 1, what, &t))) return s;
    }
    g->n_shaders = vec.n;
    if ((s = fb_u8(c, &root, 7, 255, "VkGraph.storage_type_override", &g->storage_type_override)) ||
        (s = fb_u8(c, &root, 8, 255, "VkGraph.memory_layout_override", &g->memory_layout_override)) ||
        (s = check_value_refs(c, g, root.pos)))
        return s;
    return check_value_lists(c, a, g, root.pos);
}

wgml_status pte_vk_parse(const pte_program *p, const uint8_t *blob, size_t size, uint64_t file_offset,
                         const char *label, pte_vk_graph **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!out || (!blob && size)) return errbuf_set(err, errlen, WGML_ERR_ARG, "pte_vk_parse: NULL argument");
    if (!label) label = "delegate";
    if (size < 30)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: %s blob: %zu bytes is too short for a VH00 header (30 bytes) at file offset %llu", label,
                          size, (unsigned long long)file_offset);
    if (memcmp(blob + 4, "VH00", 4) != 0)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: %s blob: no VH00 magic at bytes 4..7 (not a Vulkan delegate blob) at file offset %llu",
                          label, (unsigned long long)file_offset + 4);
    pte_vk_graph h = {
        .header_length = fb_rd16(blob + 8),
        .flatbuffer_offset = fb_rd32(blob + 10),
        .flatbuffer_size = fb_rd32(blob + 14),
        .bytes_offset = fb_rd32(blob + 18),
        .bytes_size = fb_rd64(blob + 22),
    };
    uint64_t fb_end = (uint64_t)h.flatbuffer_offset + h.flatbuffer_size;
    if (h.header_length < 30)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "pte: %s blob: VH00 header length %u is less than 30 at file offset %llu",
                          label, h.header_length, (unsigned long long)file_offset + 8);
    if (h.flatbuffer_offset < h.header_length || h.flatbuffer_size == 0 || fb_end > size)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: %s blob: VH00 flatbuffer range [%u, %llu) outside blob of %zu bytes (or inside the "
                          "%u-byte header, or empty) at file offset %llu",
                          label, h.flatbuffer_offset, (unsigned long long)fb_end, size, h.header_length,
                          (unsigned long long)file_offset + 10);
    if (h.bytes_offset < fb_end || h.bytes_offset > size)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: %s blob: VH00 constant bytes offset %u is before the end of the flatbuffer (%llu) or "
                          "past the blob of %zu bytes at file offset %llu",
                          label, h.bytes_offset, (unsigned long long)fb_end, size, (unsigned long long)file_offset + 18);
    uint64_t nbytes = h.bytes_size ? h.bytes_size : size - h.bytes_offset;
    if (nbytes > size - h.bytes_offset)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: %s blob: VH00 constant bytes [%u, %u + %llu) outside blob of %zu bytes at file offset %llu",
                          label, h.bytes_offset, h.bytes_offset, (unsigned long long)h.bytes_size, size,
                          (unsigned long long)file_offset + 22);
    h.constant_bytes = (pte_bytes){.data = nbytes ? blob + h.bytes_offset : NULL, .size = nbytes,
                                   .file_offset = file_offset + h.bytes_offset};
    pte_vk_owned *own = calloc(1, sizeof *own);
    if (!own) return errbuf_set(err, errlen, WGML_ERR_OOM, "pte: %s blob: out of host memory", label);
    own->pub = h;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "pte: %s blob: VK00", label);
    fb_ctx c;
    fb_init(&c, blob + h.flatbuffer_offset, h.flatbuffer_size, file_offset + h.flatbuffer_offset, prefix, err, errlen);
    wgml_status s = parse_graph(&c, &own->arena, p, &own->pub);
    if (s) {
        pte_arena_free(&own->arena);
        free(own);
        return s;
    }
    *out = &own->pub;
    return WGML_OK;
}

wgml_status pte_vk_parse_delegate(const pte_program *p, const pte_plan *plan, uint32_t index, pte_vk_graph **out,
                                  char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!p || !plan || !out) return errbuf_set(err, errlen, WGML_ERR_ARG, "pte_vk_parse_delegate: NULL argument");
    if (index >= plan->n_delegates)
        return errbuf_set(err, errlen, WGML_ERR_ARG, "pte_vk_parse_delegate: delegate %u out of range (%u delegates)",
                          index, plan->n_delegates);
    const pte_delegate *d = &plan->delegates[index];
    if (d->id.len != 13 || memcmp(d->id.s, "VulkanBackend", 13) != 0)
        return errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED,
                          "pte: delegate %u: backend '%s' is not supported (only VulkanBackend blobs are read)", index,
                          d->id.s);
    char label[32];
    snprintf(label, sizeof label, "delegate %u", index);
    return pte_vk_parse(p, d->processed.data, d->processed.size, d->processed.file_offset, label, out, err, errlen);
}

void pte_vk_free(pte_vk_graph *g) {
    if (!g) return;
    pte_vk_owned *own = (pte_vk_owned *)g;
    pte_arena_free(&own->arena);
    free(own);
}
