/* ExecuTorch program (.pte) reader: the extended header, the Program flatbuffer (schema
 * executorch_flatbuffer, identifier "ET12") decoded and verified through io/flatbuf.h, every
 * index checked against the list it names and every data range resolved to a pointer inside
 * the caller's bytes. The VulkanBackend delegate blob is read by pte_vk.c.
 *
 * File layout: bytes 0..3 the root offset, 4..7 "ET12", then (when present) the extended
 * header at 8: "eh00", u32 header length (>= 24), u64 program size (the flatbuffer's bytes,
 * from offset 0), u64 segment base offset, and when the length allows, u64 segment data size.
 * Segments (DataSegment{offset, size}) are relative to the segment base offset.
 *
 * Field slots below follow the schema order of program.fbs (a union takes two slots). */
#include "io/pte.h"
#include "io/flatbuf.h"
#include "io/pte_internal.h"
#include "io/errbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- type facts ----------------------------------------------------------------------------- */

size_t pte_scalar_type_size(int t) {
    switch (t) {
    case PTE_BYTE: case PTE_CHAR: case PTE_BOOL: case PTE_QINT8: case PTE_QUINT8: case PTE_QUINT4X2:
    case PTE_QUINT2X4: case PTE_FLOAT8E5M2: case PTE_FLOAT8E4M3FN: case PTE_FLOAT8E5M2FNUZ:
    case PTE_FLOAT8E4M3FNUZ: return 1;
    case PTE_SHORT: case PTE_HALF: case PTE_BFLOAT16: case PTE_BITS16: case PTE_UINT16: return 2;
    case PTE_INT: case PTE_FLOAT: case PTE_QINT32: case PTE_UINT32: return 4;
    case PTE_LONG: case PTE_DOUBLE: case PTE_UINT64: return 8;
    default: return 0;
    }
}

const char *pte_scalar_type_name(int t) {
    switch (t) {
    case PTE_BYTE: return "byte";
    case PTE_CHAR: return "char";
    case PTE_SHORT: return "short";
    case PTE_INT: return "int";
    case PTE_LONG: return "long";
    case PTE_HALF: return "half";
    case PTE_FLOAT: return "float";
    case PTE_DOUBLE: return "double";
    case PTE_BOOL: return "bool";
    case PTE_QINT8: return "qint8";
    case PTE_QUINT8: return "quint8";
    case PTE_QINT32: return "qint32";
    case PTE_BFLOAT16: return "bfloat16";
    case PTE_QUINT4X2: return "quint4x2";
    case PTE_QUINT2X4: return "quint2x4";
    case PTE_BITS16: return "bits16";
    case PTE_FLOAT8E5M2: return "float8_e5m2";
    case PTE_FLOAT8E4M3FN: return "float8_e4m3fn";
    case PTE_FLOAT8E5M2FNUZ: return "float8_e5m2fnuz";
    case PTE_FLOAT8E4M3FNUZ: return "float8_e4m3fnuz";
    case PTE_UINT16: return "uint16";
    case PTE_UINT32: return "uint32";
    case PTE_UINT64: return "uint64";
    default: return "?";
    }
}

/* A [ubyte] field as bytes inside the caller's file (not copied). */
static wgml_status bytes_field(fb_ctx *c, const fb_table *t, unsigned field, const char *what, pte_bytes *out) {
    fb_vec v;
    wgml_status s = fb_vector_field(c, t, field, 1, what, &v, NULL);
    if (s) return s;
    *out = (pte_bytes){.data = c->buf + v.pos, .size = v.n, .file_offset = c->base + v.pos};
    if (!v.n) out->data = NULL;
    return WGML_OK;
}

/* ---- the program ---------------------------------------------------------------------------- */

typedef struct pte_program_owned {
    pte_program pub; /* first: pte_free casts back */
    pte_arena arena;
} pte_program_owned;

typedef struct parser {
    fb_ctx c;
    pte_arena *a;
    pte_program *p;
} parser;

static void *alloc_n(parser *ps, uint64_t n, size_t each) { return pte_arena_alloc(ps->a, n * each); }

/* A byte range [off, off+len) of the whole file, overflow-safe. */
static bool in_file(const pte_program *p, uint64_t off, uint64_t len) {
    return off <= p->file_size && len <= p->file_size - off;
}

static wgml_status parse_segments(parser *ps, const fb_table *root) {
    pte_program *p = ps->p;
    fb_vec v;
    wgml_status s = fb_vector_field(&ps->c, root, 4, 4, "Program.segments", &v, NULL);
    if (s || !v.n) return s;
    p->segments = alloc_n(ps, v.n, sizeof *p->segments);
    if (!p->segments) return pte_oom(&ps->c, "Program.segments");
    p->n_segments = v.n;
    for (uint32_t i = 0; i < v.n; i++) {
        char what[64];
        WHAT(what, "Program.segments[%u]", i);
        fb_table t;
        pte_segment *g = &p->segments[i];
        if ((s = fb_vec_table(&ps->c, &v, i, 1, what, &t)) || (s = fb_u64(&ps->c, &t, 0, 0, what, &g->offset)) ||
            (s = fb_u64(&ps->c, &t, 1, 0, what, &g->size)))
            return s;
        /* without the extended header there is no segment data: the exporter still writes an
         * empty segment there, so only empty segments are accepted */
        if (!p->has_header && g->size)
            return fb_fail(&ps->c, t.pos, "%s: a segment of %llu bytes but the file has no extended header", what,
                           (unsigned long long)g->size);
        uint64_t at = p->segment_base_offset + g->offset;
        if (g->offset > UINT64_MAX - p->segment_base_offset || !in_file(p, at, g->size))
            return fb_fail(&ps->c, t.pos,
                           "%s: range [%llu, %llu + %llu) (segment base %llu + offset %llu) outside the %llu-byte file",
                           what, (unsigned long long)at, (unsigned long long)at, (unsigned long long)g->size,
                           (unsigned long long)p->segment_base_offset, (unsigned long long)g->offset,
                           (unsigned long long)p->file_size);
        g->bytes = (pte_bytes){.data = g->size ? p->file + at : NULL, .size = g->size, .file_offset = at};
    }
    return WGML_OK;
}

static wgml_status parse_subsegments(parser *ps, const fb_table *t, const char *what, pte_subsegments *out) {
    wgml_status s = fb_u32(&ps->c, t, 0, 0, what, &out->segment_index);
    if (s) return s;
    const void *offs;
    if ((s = pte_decode_vec(&ps->c, ps->a, t, 1, PTE_EL_U64, what, &offs, &out->n_offsets))) return s;
    out->offsets = offs;
    if (out->n_offsets && out->segment_index >= ps->p->n_segments)
        return fb_fail(&ps->c, t->pos, "%s: segment_index %u out of range (%u segments)", what, out->segment_index,
                       ps->p->n_segments);
    return WGML_OK;
}

static wgml_status parse_program_lists(parser *ps, const fb_table *root) {
    pte_program *p = ps->p;
    fb_vec v;
    wgml_status s;
    char what[80];
    /* constant_buffer: [Buffer{storage: [ubyte]}] (legacy inline constants) */
    if ((s = fb_vector_field(&ps->c, root, 2, 4, "Program.constant_buffer", &v, NULL))) return s;
    if (v.n) {
        if (!(p->constant_buffer = alloc_n(ps, v.n, sizeof(pte_bytes)))) return pte_oom(&ps->c, "constant_buffer");
        p->n_constant_buffer = v.n;
        for (uint32_t i = 0; i < v.n; i++) {
            fb_table t;
            WHAT(what, "Program.constant_buffer[%u]", i);
            if ((s = fb_vec_table(&ps->c, &v, i, 1, what, &t)) ||
                (s = bytes_field(&ps->c, &t, 0, what, &p->constant_buffer[i])))
                return s;
        }
    }
    /* backend_delegate_data: [BackendDelegateInlineData{data: [ubyte]}] */
    if ((s = fb_vector_field(&ps->c, root, 3, 4, "Program.backend_delegate_data", &v, NULL))) return s;
    if (v.n) {
        if (!(p->backend_delegate_data = alloc_n(ps, v.n, sizeof(pte_bytes))))
            return pte_oom(&ps->c, "backend_delegate_data");
        p->n_backend_delegate_data = v.n;
        for (uint32_t i = 0; i < v.n; i++) {
            fb_table t;
            WHAT(what, "Program.backend_delegate_data[%u]", i);
            if ((s = fb_vec_table(&ps->c, &v, i, 1, what, &t)) ||
                (s = bytes_field(&ps->c, &t, 0, what, &p->backend_delegate_data[i])))
                return s;
        }
    }
    /* constant_segment: SubsegmentOffsets */
    fb_table t;
    if ((s = fb_table_field(&ps->c, root, 5, "Program.constant_segment", &t, &p->has_constant_segment))) return s;
    if (p->has_constant_segment &&
        (s = parse_subsegments(ps, &t, "Program.constant_segment", &p->constant_segment)))
        return s;
    if (p->constant_segment.n_offsets && p->n_constant_buffer)
        return fb_fail(&ps->c, root->pos, "Program: both constant_buffer (%u) and constant_segment.offsets (%u) are set",
                       p->n_constant_buffer, p->constant_segment.n_offsets);
    /* mutable_data_segments: [SubsegmentOffsets] */
    if ((s = fb_vector_field(&ps->c, root, 6, 4, "Program.mutable_data_segments", &v, NULL))) return s;
    if (v.n) {
        if (!(p->mutable_data_segments = alloc_n(ps, v.n, sizeof(pte_subsegments))))
            return pte_oom(&ps->c, "mutable_data_segments");
        p->n_mutable_data_segments = v.n;
        for (uint32_t i = 0; i < v.n; i++) {
            WHAT(what, "Program.mutable_data_segments[%u]", i);
            if ((s = fb_vec_table(&ps->c, &v, i, 1, what, &t)) ||
                (s = parse_subsegments(ps, &t, what, &p->mutable_data_segments[i])))
                return s;
        }
    }
    /* named_data: [NamedData{key, segment_index}] */
    if ((s = fb_vector_field(&ps->c, root, 7, 4, "Program.named_data", &v, NULL))) return s;
    if (v.n) {
        if (!(p->named_data = alloc_n(ps, v.n, sizeof(pte_named_data)))) return pte_oom(&ps->c, "named_data");
        p->n_named_data = v.n;
        for (uint32_t i = 0; i < v.n; i++) {
            pte_named_data *nd = &p->named_data[i];
            WHAT(what, "Program.named_data[%u]", i);
            if ((s = fb_vec_table(&ps->c, &v, i, 1, what, &t)) || (s = pte_string(&ps->c, &t, 0, what, &nd->key)) ||
                (s = fb_u32(&ps->c, &t, 1, 0, what, &nd->segment_index)))
                return s;
            if (nd->segment_index >= p->n_segments)
                return fb_fail(&ps->c, t.pos, "%s ('%s'): segment_index %u out of range (%u segments)", what, nd->key.s,
                               nd->segment_index, p->n_segments);
            nd->bytes = p->segments[nd->segment_index].bytes;
        }
    }
    return WGML_OK;
}

/* Data of a tensor in a subsegment list entry: offsets[idx] inside the segment, nbytes long. */
static wgml_status subsegment_data(parser *ps, uint64_t at, const char *what, const pte_subsegments *ss,
                                   const char *list, uint32_t idx, uint64_t nbytes, pte_bytes *out) {
    if (idx >= ss->n_offsets)
        return fb_fail(&ps->c, at, "%s: data_buffer_idx %u out of range (%s has %u offsets)", what, idx, list,
                       ss->n_offsets);
    const pte_segment *g = &ps->p->segments[ss->segment_index];
    uint64_t off = ss->offsets[idx];
    if (off > g->size || nbytes > g->size - off)
        return fb_fail(&ps->c, at, "%s: data [%llu, %llu + %llu) outside segment %u of %llu bytes (%s)", what,
                       (unsigned long long)off, (unsigned long long)off, (unsigned long long)nbytes,
                       ss->segment_index, (unsigned long long)g->size, list);
    *out = (pte_bytes){.data = nbytes ? g->bytes.data + off : NULL, .size = nbytes, .file_offset = g->bytes.file_offset + off};
    return WGML_OK;
}

/* A tensor's shape facts: sizes not negative, dim_order as long as the rank and each entry below
 * it, and the element and byte counts within 64 bits. */
static wgml_status tensor_shape(fb_ctx *c, const fb_table *t, const char *what, size_t es, pte_tensor *x) {
    for (uint32_t i = 0; i < x->rank; i++)
        if (x->sizes[i] < 0) return fb_fail(c, t->pos, "%s: sizes[%u] = %d is negative", what, i, x->sizes[i]);
    if (x->n_dim_order && x->n_dim_order != x->rank)
        return fb_fail(c, t->pos, "%s: dim_order has %u entries for rank %u", what, x->n_dim_order, x->rank);
    for (uint32_t i = 0; i < x->n_dim_order; i++)
        if (x->dim_order[i] >= x->rank)
            return fb_fail(c, t->pos, "%s: dim_order[%u] = %u is not below the rank %u", what, i, x->dim_order[i], x->rank);
    /* the sizes are not negative (above), so read as uint32 they are the same numbers */
    return pte_shape_size(c, t->pos, what, "sizes", (const uint32_t *)x->sizes, x->rank, es, &x->numel, &x->nbytes);
}

/* Where a tensor's data is: outside the file (by its name), nowhere (data_buffer_idx 0), constant
 * (an entry of the constant buffer, or of the constant segment's offsets) or mutable (an entry
 * of a mutable data segment list); the range is checked to hold the tensor's bytes. */
static wgml_status tensor_data(parser *ps, const fb_table *t, const char *what, pte_tensor *x) {
    fb_ctx *c = &ps->c;
    const pte_program *p = ps->p;
    if (x->has_extra && x->location == 1) {
        if (!x->fqn.len)
            return fb_fail(c, t->pos, "%s: external tensor (location EXTERNAL) without a fully_qualified_name", what);
        x->data_kind = PTE_DATA_EXTERNAL;
        return WGML_OK;
    }
    if (x->has_extra && x->location != 0)
        return fb_fail(c, t->pos, "%s: unknown extra_tensor_info.location %d", what, x->location);
    if (x->data_buffer_idx == 0) return WGML_OK;
    if (!x->has_allocation) {
        x->data_kind = PTE_DATA_CONSTANT;
        if (p->n_constant_buffer) {
            if (x->data_buffer_idx >= p->n_constant_buffer)
                return fb_fail(c, t->pos, "%s: data_buffer_idx %u out of range (constant_buffer has %u entries)", what,
                               x->data_buffer_idx, p->n_constant_buffer);
            const pte_bytes *b = &p->constant_buffer[x->data_buffer_idx];
            if (b->size < x->nbytes)
                return fb_fail(c, t->pos, "%s: constant_buffer[%u] has %llu bytes for a %s tensor of %llu bytes", what,
                               x->data_buffer_idx, (unsigned long long)b->size, pte_scalar_type_name(x->scalar_type),
                               (unsigned long long)x->nbytes);
            x->data = (pte_bytes){.data = x->nbytes ? b->data : NULL, .size = x->nbytes, .file_offset = b->file_offset};
            return WGML_OK;
        }
        if (!p->has_constant_segment || !p->constant_segment.n_offsets)
            return fb_fail(c, t->pos, "%s: data_buffer_idx %u but the program has no constant data", what,
                           x->data_buffer_idx);
        return subsegment_data(ps, t->pos, what, &p->constant_segment, "constant_segment", x->data_buffer_idx,
                               x->nbytes, &x->data);
    }
    x->data_kind = PTE_DATA_MUTABLE;
    uint64_t list = x->has_extra ? x->mutable_data_segments_idx : 0;
    if (list >= p->n_mutable_data_segments)
        return fb_fail(c, t->pos, "%s: mutable_data_segments_idx %llu out of range (%u lists)", what,
                       (unsigned long long)list, p->n_mutable_data_segments);
    char lname[48];
    WHAT(lname, "mutable_data_segments[%llu]", (unsigned long long)list);
    return subsegment_data(ps, t->pos, what, &p->mutable_data_segments[list], lname, x->data_buffer_idx, x->nbytes,
                           &x->data);
}

/* A Tensor table: its fields, then its shape facts (tensor_shape) and its data (tensor_data). */
static wgml_status parse_tensor(parser *ps, const fb_table *t, const char *what, pte_tensor *x) {
    fb_ctx *c = &ps->c;
    wgml_status s;
    const void *v;
    if ((s = fb_i8(c, t, 0, 0, what, &x->scalar_type)) || (s = fb_i32(c, t, 1, 0, what, &x->storage_offset)))
        return s;
    size_t es = pte_scalar_type_size(x->scalar_type);
    if (!es) return fb_fail(c, t->pos, "%s: unknown scalar_type %d", what, x->scalar_type);
    if ((s = pte_decode_vec(c, ps->a, t, 2, PTE_EL_I32, what, &v, &x->rank))) return s;
    x->sizes = v;
    if ((s = pte_decode_vec(c, ps->a, t, 3, PTE_EL_U8, what, &v, &x->n_dim_order))) return s;
    x->dim_order = v;
    if ((s = fb_bool(c, t, 4, what, &x->requires_grad)) || (s = fb_u32(c, t, 5, 0, what, &x->data_buffer_idx)))
        return s;
    fb_table sub;
    if ((s = fb_table_field(c, t, 6, what, &sub, &x->has_allocation))) return s;
    if (x->has_allocation) {
        uint32_t lo, hi;
        if ((s = fb_u32(c, &sub, 0, 0, what, &x->memory_id)) || (s = fb_u32(c, &sub, 1, 0, what, &lo)) ||
            (s = fb_u32(c, &sub, 2, 0, what, &hi)))
            return s;
        x->memory_offset = (uint64_t)hi << 32 | lo;
    }
    if ((s = fb_i8(c, t, 7, 0, what, &x->layout)) || (s = fb_i8(c, t, 8, 0, what, &x->shape_dynamism))) return s;
    if ((s = fb_table_field(c, t, 9, what, &sub, &x->has_extra))) return s;
    if (x->has_extra) {
        if ((s = fb_u64(c, &sub, 0, 0, what, &x->mutable_data_segments_idx)) ||
            (s = pte_string(c, &sub, 1, what, &x->fqn)) || (s = fb_i8(c, &sub, 2, 0, what, &x->location)))
            return s;
    } else {
        x->fqn = (pte_str){"", 0};
    }
    if ((s = tensor_shape(c, t, what, es, x))) return s;
    return tensor_data(ps, t, what, x);
}

static wgml_status parse_value(parser *ps, const fb_table *ev, const char *what, pte_value *out) {
    fb_ctx *c = &ps->c;
    uint8_t type;
    fb_table t;
    const void *v;
    wgml_status s = fb_union_field(c, ev, 0, what, &type, &t);
    if (s) return s;
    out->type = (pte_value_type)type;
    switch (type) {
    case PTE_VAL_NULL: return WGML_OK;
    case PTE_VAL_INT: return fb_i64(c, &t, 0, 0, what, &out->u.i);
    case PTE_VAL_BOOL: return fb_bool(c, &t, 0, what, &out->u.b);
    case PTE_VAL_DOUBLE: return fb_f64(c, &t, 0, 0, what, &out->u.d);
    case PTE_VAL_TENSOR: return parse_tensor(ps, &t, what, &out->u.tensor);
    case PTE_VAL_STRING: return pte_string(c, &t, 0, what, &out->u.str);
    case PTE_VAL_INT_LIST:
        s = pte_decode_vec(c, ps->a, &t, 0, PTE_EL_I64, what, &v, &out->u.int_list.n);
        out->u.int_list.items = v;
        return s;
    case PTE_VAL_DOUBLE_LIST:
        s = pte_decode_vec(c, ps->a, &t, 0, PTE_EL_F64, what, &v, &out->u.double_list.n);
        out->u.double_list.items = v;
        return s;
    case PTE_VAL_BOOL_LIST:
        s = pte_decode_vec(c, ps->a, &t, 0, PTE_EL_BOOL, what, &v, &out->u.bool_list.n);
        out->u.bool_list.items = v;
        return s;
    case PTE_VAL_TENSOR_LIST:
    case PTE_VAL_OPTIONAL_TENSOR_LIST:
        s = pte_decode_vec(c, ps->a, &t, 0, PTE_EL_I32, what, &v, &out->u.tensor_list.n);
        out->u.tensor_list.items = v;
        return s;
    case 0: return fb_fail(c, ev->pos, "%s: EValue without a value (union type NONE)", what);
    default:
        if (c->err && c->errlen)
            snprintf(c->err, c->errlen, "%s: %s: unsupported EValue type %u at file offset %llu", c->prefix, what, type,
                     (unsigned long long)(c->base + ev->pos));
        return WGML_ERR_UNSUPPORTED;
    }
}

/* A KernelCall or DelegateCall (`call`): field 0 an index (`field`) into `count` operators or
 * delegates (`things`), field 1 the argument value ids, each < nv. */
static wgml_status parse_call(parser *ps, const fb_table *t, const char *what, const char *call, const char *field,
                              uint32_t count, const char *things, uint32_t nv, int32_t *index, const int32_t **args,
                              uint32_t *n_args) {
    fb_ctx *c = &ps->c;
    const void *v;
    char w[160];
    wgml_status s;
    if ((s = fb_i32(c, t, 0, 0, what, index)) || (s = pte_decode_vec(c, ps->a, t, 1, PTE_EL_I32, what, &v, n_args))) return s;
    *args = v;
    if (*index < 0 || (uint32_t)*index >= count)
        return fb_fail(c, t->pos, "%s: %s.%s %d out of range (%u %s)", what, call, field, *index, count, things);
    WHAT(w, "%s: %s.args", what, call);
    return pte_check_ids(&ps->c, t->pos, w, *args, *n_args, nv, false);
}

static wgml_status parse_instruction(parser *ps, const fb_table *it, const char *what, const pte_plan *pl,
                                     uint32_t n_instr, pte_instruction *in) {
    fb_ctx *c = &ps->c;
    uint8_t type;
    fb_table t;
    char w[160];
    wgml_status s = fb_union_field(c, it, 0, what, &type, &t);
    if (s) return s;
    in->type = (pte_instr_type)type;
    uint32_t nv = pl->n_values;
    switch (type) {
    case PTE_INSTR_KERNEL:
        return parse_call(ps, &t, what, "KernelCall", "op_index", pl->n_operators, "operators", nv, &in->u.kernel.op_index,
                          &in->u.kernel.args, &in->u.kernel.n_args);
    case PTE_INSTR_DELEGATE:
        return parse_call(ps, &t, what, "DelegateCall", "delegate_index", pl->n_delegates, "delegates", nv,
                          &in->u.delegate.delegate_index, &in->u.delegate.args, &in->u.delegate.n_args);
    case PTE_INSTR_MOVE:
        if ((s = fb_i32(c, &t, 0, 0, what, &in->u.move.move_from)) ||
            (s = fb_i32(c, &t, 1, 0, what, &in->u.move.move_to)))
            return s;
        WHAT(w, "%s: MoveCall", what);
        return pte_check_ids(&ps->c, t.pos, w, &in->u.move.move_from, 2, nv, false);
    case PTE_INSTR_JUMP_FALSE:
        if ((s = fb_i32(c, &t, 0, 0, what, &in->u.jump_false.cond_value_index)) ||
            (s = fb_i32(c, &t, 1, 0, what, &in->u.jump_false.destination_instruction)))
            return s;
        WHAT(w, "%s: JumpFalseCall.cond_value_index", what);
        if ((s = pte_check_ids(&ps->c, t.pos, w, &in->u.jump_false.cond_value_index, 1, nv, false))) return s;
        if (in->u.jump_false.destination_instruction < 0 ||
            (uint32_t)in->u.jump_false.destination_instruction > n_instr)
            return fb_fail(c, t.pos, "%s: JumpFalseCall.destination_instruction %d out of range (%u instructions)",
                           what, in->u.jump_false.destination_instruction, n_instr);
        return WGML_OK;
    case PTE_INSTR_FREE:
        if ((s = fb_i32(c, &t, 0, 0, what, &in->u.free_call.value_index))) return s;
        WHAT(w, "%s: FreeCall.value_index", what);
        return pte_check_ids(&ps->c, t.pos, w, &in->u.free_call.value_index, 1, nv, false);
    case 0: return fb_fail(c, it->pos, "%s: instruction without arguments (union type NONE)", what);
    default:
        if (c->err && c->errlen)
            snprintf(c->err, c->errlen, "%s: %s: unsupported instruction type %u at file offset %llu", c->prefix, what,
                     type, (unsigned long long)(c->base + it->pos));
        return WGML_ERR_UNSUPPORTED;
    }
}

static wgml_status parse_delegate(parser *ps, const fb_table *t, const char *what, pte_delegate *d) {
    fb_ctx *c = &ps->c;
    const pte_program *p = ps->p;
    wgml_status s;
    fb_table r;
    bool present;
    if ((s = pte_string(c, t, 0, what, &d->id)) || (s = fb_table_field(c, t, 1, what, &r, &present))) return s;
    if (!present) return fb_fail(c, t->pos, "%s ('%s'): no processed data reference", what, d->id.s);
    if ((s = fb_i8(c, &r, 0, 0, what, &d->location)) || (s = fb_u32(c, &r, 1, 0, what, &d->index))) return s;
    if (d->location == 0) {
        if (d->index >= p->n_backend_delegate_data)
            return fb_fail(c, r.pos, "%s ('%s'): inline data index %u out of range (%u entries)", what, d->id.s,
                           d->index, p->n_backend_delegate_data);
        d->processed = p->backend_delegate_data[d->index];
    } else if (d->location == 1) {
        if (d->index >= p->n_segments)
            return fb_fail(c, r.pos, "%s ('%s'): segment index %u out of range (%u segments)", what, d->id.s, d->index,
                           p->n_segments);
        d->processed = p->segments[d->index].bytes;
    } else {
        return fb_fail(c, r.pos, "%s ('%s'): unknown data location %d", what, d->id.s, d->location);
    }
    fb_vec v;
    if ((s = fb_vector_field(c, t, 2, 4, what, &v, NULL))) return s;
    if (v.n) {
        if (!(d->compile_specs = alloc_n(ps, v.n, sizeof *d->compile_specs))) return pte_oom(c, what);
        d->n_compile_specs = v.n;
        for (uint32_t i = 0; i < v.n; i++) {
            fb_table cs;
            char w[160];
            WHAT(w, "%s.compile_specs[%u]", what, i);
            if ((s = fb_vec_table(c, &v, i, t->depth + 1, w, &cs)) ||
                (s = pte_string(c, &cs, 0, w, &d->compile_specs[i].key)) ||
                (s = bytes_field(c, &cs, 1, w, &d->compile_specs[i].value)))
                return s;
        }
    }
    return WGML_OK;
}

/* A vector of value ids (field of t, named what): decoded and each checked < n_values. */
static wgml_status value_ids(parser *ps, const fb_table *t, unsigned field, const char *what, uint32_t n_values,
                             const int32_t **ids, uint32_t *n) {
    const void *v;
    wgml_status s = pte_decode_vec(&ps->c, ps->a, t, field, PTE_EL_I32, what, &v, n);
    if (s) return s;
    *ids = v;
    return pte_check_ids(&ps->c, t->pos, what, *ids, *n, n_values, false);
}

/* The plan's values (field 2), then the tensor lists' items as value ids. */
static wgml_status plan_values(parser *ps, const fb_table *t, uint32_t pi, pte_plan *pl) {
    fb_ctx *c = &ps->c;
    wgml_status s;
    char what[128];
    fb_vec vec;
    WHAT(what, "execution_plan[%u].values", pi);
    if ((s = fb_vector_field(c, t, 2, 4, what, &vec, NULL)) || !vec.n) return s;
    if (!(pl->values = alloc_n(ps, vec.n, sizeof *pl->values))) return pte_oom(c, what);
    pl->n_values = vec.n;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table ev;
        WHAT(what, "execution_plan[%u].values[%u]", pi, i);
        if ((s = fb_vec_table(c, &vec, i, t->depth + 1, what, &ev)) || (s = parse_value(ps, &ev, what, &pl->values[i])))
            return s;
    }
    for (uint32_t i = 0; i < vec.n; i++) {
        pte_value *x = &pl->values[i];
        if (x->type != PTE_VAL_TENSOR_LIST && x->type != PTE_VAL_OPTIONAL_TENSOR_LIST) continue;
        WHAT(what, "execution_plan[%u].values[%u].items", pi, i);
        if ((s = pte_check_ids(&ps->c, t->pos, what, x->u.tensor_list.items, x->u.tensor_list.n, vec.n,
                               x->type == PTE_VAL_OPTIONAL_TENSOR_LIST)))
            return s;
    }
    return WGML_OK;
}

/* The plan's operators (field 6: name, overload) and delegates (field 7). */
static wgml_status plan_calls(parser *ps, const fb_table *t, uint32_t pi, pte_plan *pl) {
    fb_ctx *c = &ps->c;
    wgml_status s;
    char what[128];
    fb_vec vec;
    WHAT(what, "execution_plan[%u].operators", pi);
    if ((s = fb_vector_field(c, t, 6, 4, what, &vec, NULL))) return s;
    if (vec.n && !(pl->operators = alloc_n(ps, vec.n, sizeof *pl->operators))) return pte_oom(c, what);
    pl->n_operators = vec.n;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table ot;
        WHAT(what, "execution_plan[%u].operators[%u]", pi, i);
        if ((s = fb_vec_table(c, &vec, i, t->depth + 1, what, &ot)) ||
            (s = pte_string(c, &ot, 0, what, &pl->operators[i].name)) ||
            (s = pte_string(c, &ot, 1, what, &pl->operators[i].overload)))
            return s;
    }
    WHAT(what, "execution_plan[%u].delegates", pi);
    if ((s = fb_vector_field(c, t, 7, 4, what, &vec, NULL))) return s;
    if (vec.n && !(pl->delegates = alloc_n(ps, vec.n, sizeof *pl->delegates))) return pte_oom(c, what);
    pl->n_delegates = vec.n;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table dt;
        WHAT(what, "execution_plan[%u].delegates[%u]", pi, i);
        if ((s = fb_vec_table(c, &vec, i, t->depth + 1, what, &dt)) ||
            (s = parse_delegate(ps, &dt, what, &pl->delegates[i])))
            return s;
    }
    return WGML_OK;
}

/* Chain i of plan pi (table ct, named what): inputs, outputs, instructions. */
static wgml_status plan_chain(parser *ps, const fb_table *ct, uint32_t pi, uint32_t i, const char *what, pte_plan *pl,
                              pte_chain *ch) {
    fb_ctx *c = &ps->c;
    wgml_status s;
    char w[160];
    fb_vec iv;
    WHAT(w, "%s.inputs", what);
    if ((s = value_ids(ps, ct, 0, w, pl->n_values, &ch->inputs, &ch->n_inputs))) return s;
    WHAT(w, "%s.outputs", what);
    if ((s = value_ids(ps, ct, 1, w, pl->n_values, &ch->outputs, &ch->n_outputs))) return s;
    WHAT(w, "%s.instructions", what);
    if ((s = fb_vector_field(c, ct, 2, 4, w, &iv, NULL)) || !iv.n) return s;
    if (!(ch->instructions = alloc_n(ps, iv.n, sizeof *ch->instructions))) return pte_oom(c, w);
    ch->n_instructions = iv.n;
    for (uint32_t k = 0; k < iv.n; k++) {
        fb_table it;
        WHAT(w, "execution_plan[%u].chains[%u].instructions[%u]", pi, i, k);
        if ((s = fb_vec_table(c, &iv, k, ct->depth + 1, w, &it)) ||
            (s = parse_instruction(ps, &it, w, pl, iv.n, &ch->instructions[k])))
            return s;
    }
    return WGML_OK;
}

static wgml_status parse_plan(parser *ps, const fb_table *t, uint32_t pi, pte_plan *pl) {
    fb_ctx *c = &ps->c;
    wgml_status s;
    const void *v;
    char what[128];
    fb_vec vec;
    WHAT(what, "execution_plan[%u]", pi);
    if ((s = pte_string(c, t, 0, what, &pl->name)) || (s = plan_values(ps, t, pi, pl))) return s;
    WHAT(what, "execution_plan[%u].inputs", pi);
    if ((s = value_ids(ps, t, 3, what, pl->n_values, &pl->inputs, &pl->n_inputs))) return s;
    WHAT(what, "execution_plan[%u].outputs", pi);
    if ((s = value_ids(ps, t, 4, what, pl->n_values, &pl->outputs, &pl->n_outputs)) ||
        (s = plan_calls(ps, t, pi, pl)))
        return s;
    /* chains (after values, operators and delegates: instructions index them) */
    WHAT(what, "execution_plan[%u].chains", pi);
    if ((s = fb_vector_field(c, t, 5, 4, what, &vec, NULL))) return s;
    if (vec.n && !(pl->chains = alloc_n(ps, vec.n, sizeof *pl->chains))) return pte_oom(c, what);
    pl->n_chains = vec.n;
    for (uint32_t i = 0; i < vec.n; i++) {
        fb_table ct;
        WHAT(what, "execution_plan[%u].chains[%u]", pi, i);
        if ((s = fb_vec_table(c, &vec, i, t->depth + 1, what, &ct)) ||
            (s = plan_chain(ps, &ct, pi, i, what, pl, &pl->chains[i])))
            return s;
    }
    WHAT(what, "execution_plan[%u].non_const_buffer_sizes", pi);
    if ((s = pte_decode_vec(c, ps->a, t, 8, PTE_EL_I64, what, &v, &pl->n_non_const_buffer_sizes))) return s;
    pl->non_const_buffer_sizes = v;
    return WGML_OK;
}

/* The extended header "eh00" at 8, when there is one: its length, the program size and the
 * segments' base and size, each checked against the file. */
static wgml_status parse_header(pte_program *p, const uint8_t *data, size_t size, char *err, size_t errlen) {
    if (size < 16 || memcmp(data + 8, "eh00", 4) != 0) return WGML_OK;
    uint32_t len = fb_rd32(data + 12);
    if (len < 24)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "pte: extended header length %u is less than 24 at file offset 12", len);
    if ((uint64_t)len > size - 8)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: extended header of %u bytes at 8 runs past the %zu-byte file at file offset 12", len, size);
    p->has_header = true;
    p->program_size = fb_rd64(data + 16);
    p->segment_base_offset = fb_rd64(data + 24);
    p->segment_data_size = len >= 32 ? fb_rd64(data + 32) : 0;
    if (p->program_size > size || p->program_size < 8 + (uint64_t)len)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: extended header: program size %llu outside [%u, %zu] (the file has %zu bytes) at file offset 16",
                          (unsigned long long)p->program_size, 8 + len, size, size);
    if (p->segment_base_offset > size || (p->segment_base_offset && p->segment_base_offset < p->program_size))
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: extended header: segment base offset %llu outside [program size %llu, file size %zu] "
                          "at file offset 24",
                          (unsigned long long)p->segment_base_offset, (unsigned long long)p->program_size, size);
    if (p->segment_data_size > size - p->segment_base_offset)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: extended header: segment data [%llu, %llu + %llu) outside the %zu-byte file (truncated?) "
                          "at file offset 32",
                          (unsigned long long)p->segment_base_offset, (unsigned long long)p->segment_base_offset,
                          (unsigned long long)p->segment_data_size, size);
    return WGML_OK;
}

/* Program.execution_plan: every plan, parsed by parse_plan. */
static wgml_status parse_plans(parser *ps, const fb_table *root) {
    pte_program *p = ps->p;
    fb_vec plans;
    wgml_status s;
    if ((s = fb_vector_field(&ps->c, root, 1, 4, "Program.execution_plan", &plans, NULL)) || !plans.n) return s;
    if (!(p->plans = alloc_n(ps, plans.n, sizeof *p->plans))) return pte_oom(&ps->c, "execution_plan");
    p->n_plans = plans.n;
    for (uint32_t i = 0; i < plans.n; i++) {
        fb_table t;
        char what[48];
        WHAT(what, "execution_plan[%u]", i);
        if ((s = fb_vec_table(&ps->c, &plans, i, 1, what, &t)) || (s = parse_plan(ps, &t, i, &p->plans[i]))) return s;
    }
    return WGML_OK;
}

wgml_status pte_parse(const uint8_t *data, size_t size, pte_program **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!out || (!data && size)) return errbuf_set(err, errlen, WGML_ERR_ARG, "pte_parse: NULL argument");
    if (err && errlen) err[0] = 0;
    if (size < 8)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "pte: file of %zu bytes is too short for a program (8 bytes at least) at file offset 0",
                          size);
    if (memcmp(data + 4, "ET12", 4) != 0) {
        char got[5] = {0};
        for (int i = 0; i < 4; i++) got[i] = (char)(data[4 + i] >= 32 && data[4 + i] < 127 ? data[4 + i] : '?');
        return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                          "pte: file identifier '%s' at file offset 4 is not 'ET12' (not an ExecuTorch program)", got);
    }
    pte_program_owned *own = calloc(1, sizeof *own);
    if (!own) return errbuf_set(err, errlen, WGML_ERR_OOM, "pte: out of host memory");
    pte_program *p = &own->pub;
    p->file = data;
    p->file_size = size;
    p->program_size = size;
    parser ps = {.a = &own->arena, .p = p};
    fb_table root;
    wgml_status s = parse_header(p, data, size, err, errlen);
    if (s) goto fail;
    fb_init(&ps.c, data, p->program_size, 0, "pte", err, errlen);
    if ((s = fb_root(&ps.c, "ET12", "Program", &root)) || (s = fb_u32(&ps.c, &root, 0, 0, "Program.version", &p->version)) ||
        (s = parse_segments(&ps, &root)) || (s = parse_program_lists(&ps, &root)) || (s = parse_plans(&ps, &root)))
        goto fail;
    *out = p;
    return WGML_OK;
fail:
    pte_arena_free(&own->arena);
    free(own);
    return s;
}

void pte_free(pte_program *p) {
    if (!p) return;
    pte_program_owned *own = (pte_program_owned *)p;
    pte_arena_free(&own->arena);
    free(own);
}

const pte_plan *pte_find_plan(const pte_program *p, const char *name) {
    if (!p || !p->n_plans) return NULL;
    if (!name) return &p->plans[0];
    for (uint32_t i = 0; i < p->n_plans; i++)
        if (strlen(name) == p->plans[i].name.len && memcmp(name, p->plans[i].name.s, p->plans[i].name.len) == 0)
            return &p->plans[i];
    return NULL;
}

const pte_named_data *pte_find_named_data(const pte_program *p, const char *key, size_t key_len) {
    if (!p || !key) return NULL;
    for (uint32_t i = 0; i < p->n_named_data; i++)
        if (p->named_data[i].key.len == key_len && memcmp(p->named_data[i].key.s, key, key_len) == 0)
            return &p->named_data[i];
    return NULL;
}
