/* The C side of the ExecuTorch program tests (tests/py/test_pte_reader.py):
 *   tool_pte dump FILE    parse the program and every VulkanBackend delegate; print the parsed
 *                         structure as JSON (bulk data as its size and FNV-1a 64 hash);
 *                         a delegate of another backend or a blob that fails gets "vk_error"
 *   tool_pte check FILE   parse the program and every delegate as VulkanBackend; print "ok"
 * Exit 0 on success, 3 with the error on stderr when the file is malformed or unsupported
 * (check: any delegate that fails), 2 on usage or I/O errors. */
#include "io/pte.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(const uint8_t *p, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* A JSON string; bytes outside printable ASCII as \u00XX, so the output is valid for any input. */
static void jstr(const char *s, uint32_t n) {
    putchar('"');
    for (uint32_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 32 || ch >= 127) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

static void jnum(double d) {
    if (isnan(d)) printf("\"nan\"");
    else if (isinf(d)) printf(d > 0 ? "\"inf\"" : "\"-inf\"");
    else printf("%.17g", d);
}

static void jbytes(const pte_bytes *b) {
    printf("{\"size\": %" PRIu64 ", \"file_offset\": %" PRIu64 ", \"fnv\": \"%016" PRIx64 "\"}", b->size,
           b->file_offset, fnv(b->data, b->size));
}

#define JLIST(NAME, T, FMT)                                                                                     \
    static void NAME(const T *v, uint32_t n) {                                                                  \
        putchar('[');                                                                                           \
        for (uint32_t i = 0; i < n; i++) printf("%s" FMT, i ? ", " : "", v[i]);                               \
        putchar(']');                                                                                           \
    }
JLIST(ji32, int32_t, "%" PRId32)
JLIST(ju32, uint32_t, "%" PRIu32)
JLIST(ji64, int64_t, "%" PRId64)
JLIST(ju64, uint64_t, "%" PRIu64)
JLIST(ju8, uint8_t, "%u")

static void jdoubles(const double *v, uint32_t n) {
    putchar('[');
    for (uint32_t i = 0; i < n; i++) {
        if (i) printf(", ");
        jnum(v[i]);
    }
    putchar(']');
}

static void jbools(const bool *v, uint32_t n) {
    putchar('[');
    for (uint32_t i = 0; i < n; i++) printf("%s%s", i ? ", " : "", v[i] ? "true" : "false");
    putchar(']');
}

static void dump_value(const pte_value *v) {
    static const char *names[] = {"none", "null", "int", "bool", "double", "tensor", "string",
                                  "int_list", "double_list", "bool_list", "tensor_list", "optional_tensor_list"};
    printf("{\"type\": \"%s\"", names[v->type]);
    switch (v->type) {
    case PTE_VAL_INT: printf(", \"v\": %" PRId64, v->u.i); break;
    case PTE_VAL_BOOL: printf(", \"v\": %s", v->u.b ? "true" : "false"); break;
    case PTE_VAL_DOUBLE: printf(", \"v\": "); jnum(v->u.d); break;
    case PTE_VAL_STRING: printf(", \"v\": "); jstr(v->u.str.s, v->u.str.len); break;
    case PTE_VAL_INT_LIST: printf(", \"v\": "); ji64(v->u.int_list.items, v->u.int_list.n); break;
    case PTE_VAL_DOUBLE_LIST: printf(", \"v\": "); jdoubles(v->u.double_list.items, v->u.double_list.n); break;
    case PTE_VAL_BOOL_LIST: printf(", \"v\": "); jbools(v->u.bool_list.items, v->u.bool_list.n); break;
    case PTE_VAL_TENSOR_LIST:
    case PTE_VAL_OPTIONAL_TENSOR_LIST: printf(", \"v\": "); ji32(v->u.tensor_list.items, v->u.tensor_list.n); break;
    case PTE_VAL_TENSOR: {
        const pte_tensor *t = &v->u.tensor;
        printf(", \"scalar_type\": %d, \"storage_offset\": %d, \"sizes\": ", t->scalar_type, t->storage_offset);
        ji32(t->sizes, t->rank);
        printf(", \"dim_order\": ");
        ju8(t->dim_order, t->n_dim_order);
        printf(", \"requires_grad\": %s, \"data_buffer_idx\": %u", t->requires_grad ? "true" : "false",
               t->data_buffer_idx);
        if (t->has_allocation)
            printf(", \"allocation\": {\"memory_id\": %u, \"memory_offset\": %" PRIu64 "}", t->memory_id,
                   t->memory_offset);
        else
            printf(", \"allocation\": null");
        printf(", \"layout\": %d, \"shape_dynamism\": %d", t->layout, t->shape_dynamism);
        if (t->has_extra) {
            printf(", \"extra\": {\"mutable_data_segments_idx\": %" PRIu64 ", \"fqn\": ", t->mutable_data_segments_idx);
            jstr(t->fqn.s, t->fqn.len);
            printf(", \"location\": %d}", t->location);
        } else {
            printf(", \"extra\": null");
        }
        printf(", \"numel\": %" PRIu64 ", \"nbytes\": %" PRIu64 ", \"data_kind\": %d, \"data\": ", t->numel, t->nbytes,
               (int)t->data_kind);
        jbytes(&t->data);
        break;
    }
    default: break;
    }
    putchar('}');
}

static void dump_vk_value(const pte_vk_value *v) {
    static const char *names[] = {"none", "null", "int", "double", "bool", "tensor", "int_list",
                                  "double_list", "bool_list", "value_list", "string", "symint"};
    printf("{\"type\": \"%s\"", names[v->type]);
    switch (v->type) {
    case PTE_VK_INT: printf(", \"v\": %" PRId64, v->u.i); break;
    case PTE_VK_DOUBLE: printf(", \"v\": "); jnum(v->u.d); break;
    case PTE_VK_BOOLV: printf(", \"v\": %s", v->u.b ? "true" : "false"); break;
    case PTE_VK_INT_LIST: printf(", \"v\": "); ji64(v->u.int_list.items, v->u.int_list.n); break;
    case PTE_VK_DOUBLE_LIST: printf(", \"v\": "); jdoubles(v->u.double_list.items, v->u.double_list.n); break;
    case PTE_VK_BOOL_LIST: printf(", \"v\": "); jbools(v->u.bool_list.items, v->u.bool_list.n); break;
    case PTE_VK_VALUE_LIST: printf(", \"v\": "); ji32(v->u.value_list.items, v->u.value_list.n); break;
    case PTE_VK_STRING: printf(", \"v\": "); jstr(v->u.str.s, v->u.str.len); break;
    case PTE_VK_SYMINT: printf(", \"v\": %d", v->u.symint); break;
    case PTE_VK_TENSOR: {
        const pte_vk_tensor *t = &v->u.tensor;
        printf(", \"datatype\": %d, \"dims\": ", t->datatype);
        ju32(t->dims, t->rank);
        printf(", \"constant_id\": %d, \"mem_obj_id\": %d, \"storage_type\": %u, \"memory_layout\": %u, "
               "\"staging_datatype\": %d, \"numel\": %" PRIu64 ", \"nbytes\": %" PRIu64,
               t->constant_id, t->mem_obj_id, t->storage_type, t->memory_layout, t->staging_datatype, t->numel,
               t->nbytes);
        break;
    }
    default: break;
    }
    putchar('}');
}

static void dump_vk(const pte_vk_graph *g) {
    printf("{\"header_length\": %u, \"flatbuffer_offset\": %u, \"flatbuffer_size\": %u, \"bytes_offset\": %u, "
           "\"bytes_size\": %" PRIu64 ", \"constant_bytes\": ",
           g->header_length, g->flatbuffer_offset, g->flatbuffer_size, g->bytes_offset, g->bytes_size);
    jbytes(&g->constant_bytes);
    printf(", \"version\": ");
    jstr(g->version.s, g->version.len);
    printf(", \"values\": [");
    for (uint32_t i = 0; i < g->n_values; i++) {
        printf(i ? ",\n  " : "\n  ");
        dump_vk_value(&g->values[i]);
    }
    printf("], \"chain\": [");
    for (uint32_t i = 0; i < g->n_chain; i++) {
        printf("%s{\"node_id\": %u, \"name\": ", i ? ",\n  " : "\n  ", g->chain[i].node_id);
        jstr(g->chain[i].name.s, g->chain[i].name.len);
        printf(", \"args\": ");
        ji32(g->chain[i].args, g->chain[i].n_args);
        putchar('}');
    }
    printf("], \"input_ids\": ");
    ju32(g->input_ids, g->n_inputs);
    printf(", \"output_ids\": ");
    ju32(g->output_ids, g->n_outputs);
    printf(", \"constants\": [");
    for (uint32_t i = 0; i < g->n_constants; i++) {
        const pte_vk_constant *k = &g->constants[i];
        printf("%s{\"offset\": %" PRIu64 ", \"length\": %" PRIu64 ", \"named\": %s, \"named_key\": ", i ? ", " : "",
               k->offset, k->length, k->named ? "true" : "false");
        jstr(k->named_key.s, k->named_key.len);
        printf(", \"data\": ");
        jbytes(&k->data);
        putchar('}');
    }
    printf("], \"n_shaders\": %u, \"storage_type_override\": %u, \"memory_layout_override\": %u}", g->n_shaders,
           g->storage_type_override, g->memory_layout_override);
}

static void dump_subsegments(const pte_subsegments *s) {
    printf("{\"segment_index\": %u, \"offsets\": ", s->segment_index);
    ju64(s->offsets, s->n_offsets);
    putchar('}');
}

static void dump_instr(const pte_instruction *in) {
    switch (in->type) {
    case PTE_INSTR_KERNEL:
        printf("{\"type\": \"kernel\", \"op_index\": %d, \"args\": ", in->u.kernel.op_index);
        ji32(in->u.kernel.args, in->u.kernel.n_args);
        break;
    case PTE_INSTR_DELEGATE:
        printf("{\"type\": \"delegate\", \"delegate_index\": %d, \"args\": ", in->u.delegate.delegate_index);
        ji32(in->u.delegate.args, in->u.delegate.n_args);
        break;
    case PTE_INSTR_MOVE:
        printf("{\"type\": \"move\", \"move_from\": %d, \"move_to\": %d", in->u.move.move_from, in->u.move.move_to);
        break;
    case PTE_INSTR_JUMP_FALSE:
        printf("{\"type\": \"jump_false\", \"cond_value_index\": %d, \"destination_instruction\": %d",
               in->u.jump_false.cond_value_index, in->u.jump_false.destination_instruction);
        break;
    case PTE_INSTR_FREE: printf("{\"type\": \"free\", \"value_index\": %d", in->u.free_call.value_index); break;
    }
    putchar('}');
}

static void dump(const pte_program *p) {
    printf("{\"has_header\": %s, \"program_size\": %" PRIu64 ", \"segment_base_offset\": %" PRIu64
           ", \"segment_data_size\": %" PRIu64 ", \"version\": %u,\n\"segments\": [",
           p->has_header ? "true" : "false", p->program_size, p->segment_base_offset, p->segment_data_size, p->version);
    for (uint32_t i = 0; i < p->n_segments; i++) {
        printf("%s{\"offset\": %" PRIu64 ", \"size\": %" PRIu64 ", \"bytes\": ", i ? ", " : "", p->segments[i].offset,
               p->segments[i].size);
        jbytes(&p->segments[i].bytes);
        putchar('}');
    }
    printf("],\n\"constant_buffer\": [");
    for (uint32_t i = 0; i < p->n_constant_buffer; i++) {
        printf(i ? ", " : "");
        jbytes(&p->constant_buffer[i]);
    }
    printf("],\n\"backend_delegate_data\": [");
    for (uint32_t i = 0; i < p->n_backend_delegate_data; i++) {
        printf(i ? ", " : "");
        jbytes(&p->backend_delegate_data[i]);
    }
    printf("],\n\"constant_segment\": ");
    if (p->has_constant_segment) dump_subsegments(&p->constant_segment);
    else printf("null");
    printf(",\n\"mutable_data_segments\": [");
    for (uint32_t i = 0; i < p->n_mutable_data_segments; i++) {
        printf(i ? ", " : "");
        dump_subsegments(&p->mutable_data_segments[i]);
    }
    printf("],\n\"named_data\": [");
    for (uint32_t i = 0; i < p->n_named_data; i++) {
        printf("%s{\"key\": ", i ? ", " : "");
        jstr(p->named_data[i].key.s, p->named_data[i].key.len);
        printf(", \"segment_index\": %u, \"bytes\": ", p->named_data[i].segment_index);
        jbytes(&p->named_data[i].bytes);
        putchar('}');
    }
    printf("],\n\"plans\": [");
    for (uint32_t pi = 0; pi < p->n_plans; pi++) {
        const pte_plan *pl = &p->plans[pi];
        printf("%s{\"name\": ", pi ? ",\n" : "\n");
        jstr(pl->name.s, pl->name.len);
        printf(",\n\"values\": [");
        for (uint32_t i = 0; i < pl->n_values; i++) {
            printf(i ? ",\n  " : "\n  ");
            dump_value(&pl->values[i]);
        }
        printf("],\n\"inputs\": ");
        ji32(pl->inputs, pl->n_inputs);
        printf(", \"outputs\": ");
        ji32(pl->outputs, pl->n_outputs);
        printf(",\n\"operators\": [");
        for (uint32_t i = 0; i < pl->n_operators; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            jstr(pl->operators[i].name.s, pl->operators[i].name.len);
            printf(", \"overload\": ");
            jstr(pl->operators[i].overload.s, pl->operators[i].overload.len);
            putchar('}');
        }
        printf("],\n\"chains\": [");
        for (uint32_t i = 0; i < pl->n_chains; i++) {
            const pte_chain *ch = &pl->chains[i];
            printf("%s{\"inputs\": ", i ? ", " : "");
            ji32(ch->inputs, ch->n_inputs);
            printf(", \"outputs\": ");
            ji32(ch->outputs, ch->n_outputs);
            printf(", \"instructions\": [");
            for (uint32_t k = 0; k < ch->n_instructions; k++) {
                printf(k ? ",\n  " : "\n  ");
                dump_instr(&ch->instructions[k]);
            }
            printf("]}");
        }
        printf("],\n\"non_const_buffer_sizes\": ");
        ji64(pl->non_const_buffer_sizes, pl->n_non_const_buffer_sizes);
        printf(",\n\"delegates\": [");
        for (uint32_t i = 0; i < pl->n_delegates; i++) {
            const pte_delegate *d = &pl->delegates[i];
            printf("%s{\"id\": ", i ? ",\n" : "\n");
            jstr(d->id.s, d->id.len);
            printf(", \"location\": %d, \"index\": %u, \"processed\": ", d->location, d->index);
            jbytes(&d->processed);
            printf(", \"compile_specs\": [");
            for (uint32_t k = 0; k < d->n_compile_specs; k++) {
                printf("%s{\"key\": ", k ? ", " : "");
                jstr(d->compile_specs[k].key.s, d->compile_specs[k].key.len);
                printf(", \"value\": ");
                ju8(d->compile_specs[k].value.data, (uint32_t)d->compile_specs[k].value.size);
                putchar('}');
            }
            printf("],\n\"vk\": ");
            pte_vk_graph *g = NULL;
            char err[512];
            if (pte_vk_parse_delegate(p, pl, i, &g, err, sizeof err) == WGML_OK) {
                dump_vk(g);
                pte_vk_free(g);
            } else {
                printf("null, \"vk_error\": ");
                jstr(err, (uint32_t)strlen(err));
            }
            putchar('}');
        }
        printf("]}");
    }
    printf("]}\n");
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "dump") && strcmp(argv[1], "check"))) {
        fprintf(stderr, "usage: tool_pte dump|check FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "tool_pte: cannot open %s\n", argv[2]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* exactly n bytes (not rounded up), so that ASan sees any read past the end */
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "tool_pte: cannot read %s\n", argv[2]);
        fclose(f);
        free(buf);
        return 2;
    }
    fclose(f);
    pte_program *p = NULL;
    char err[512];
    wgml_status s = pte_parse(buf, (size_t)n, &p, err, sizeof err);
    int rc = 0;
    if (s != WGML_OK) {
        fprintf(stderr, "%s: %s\n", wgml_status_name(s), err);
        rc = 3;
    } else if (!strcmp(argv[1], "dump")) {
        dump(p);
    } else {
        for (uint32_t pi = 0; pi < p->n_plans && !rc; pi++)
            for (uint32_t i = 0; i < p->plans[pi].n_delegates && !rc; i++) {
                pte_vk_graph *g = NULL;
                s = pte_vk_parse_delegate(p, &p->plans[pi], i, &g, err, sizeof err);
                if (s != WGML_OK) {
                    fprintf(stderr, "%s: %s\n", wgml_status_name(s), err);
                    rc = 3;
                }
                pte_vk_free(g);
            }
        if (!rc) printf("ok\n");
    }
    pte_free(p);
    free(buf);
    return rc;
}
