/* Fuzz target: the ExecuTorch program reader (src/io/pte.c) and the VulkanBackend delegate
 * blob reader (src/io/pte_vk.c) over the verifying flatbuffer reader (src/io/flatbuf.c). The
 * input is a whole .pte file, or, when bytes 4..7 are "VH00", a bare delegate blob. It is
 * copied into a buffer of exactly its size (so ASan sees any read past the end). A rejection
 * must give a message and no handle; an accepted program is walked completely — every value,
 * list, string, instruction and delegate, each index used to index the list it names, every
 * byte range checked to lie inside the input and its first and last byte read — and every
 * delegate blob is parsed as a Vulkan graph (whatever its backend id) and walked the same way. */
#include "io/pte.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t *g_lo, *g_hi; /* the input */
static const pte_program *g_program; /* the program whose blobs are walked (NULL: a bare blob) */

static void check_bytes(const pte_bytes *b) {
    if (!b->size) return;
    if (b->data < g_lo || b->data > g_hi || b->size > (uint64_t)(g_hi - b->data)) abort();
    if ((uint64_t)(b->data - g_lo) != b->file_offset) abort();
    volatile uint8_t sink = b->data[0] ^ b->data[b->size - 1];
    (void)sink;
}

static void check_str(const pte_str *s) {
    if (!s->s || s->s[s->len] != 0) abort();
    if (s->len && ((const uint8_t *)s->s < g_lo || (const uint8_t *)s->s + s->len > g_hi)) abort();
}

static void walk_vk(const pte_vk_graph *g) {
    volatile uint64_t sink = 0; /* unsigned: the sums may wrap */
    check_bytes(&g->constant_bytes);
    check_str(&g->version);
    for (uint32_t i = 0; i < g->n_values; i++) {
        const pte_vk_value *v = &g->values[i];
        switch (v->type) {
        case PTE_VK_TENSOR: {
            const pte_vk_tensor *t = &v->u.tensor;
            uint64_t e = 1;
            for (uint32_t k = 0; k < t->rank; k++) e *= t->dims[k];
            if (e != t->numel || t->nbytes != e * pte_vk_dtype_size(t->datatype)) abort();
            if (t->constant_id >= 0) {
                if ((uint32_t)t->constant_id >= g->n_constants) abort();
                if (g->constants[t->constant_id].length < t->nbytes) abort();
            }
            break;
        }
        case PTE_VK_INT_LIST: for (uint32_t k = 0; k < v->u.int_list.n; k++) sink += (uint64_t)v->u.int_list.items[k]; break;
        case PTE_VK_DOUBLE_LIST: for (uint32_t k = 0; k < v->u.double_list.n; k++) sink += (uint64_t)(v->u.double_list.items[k] > 0); break;
        case PTE_VK_BOOL_LIST: for (uint32_t k = 0; k < v->u.bool_list.n; k++) sink += v->u.bool_list.items[k]; break;
        case PTE_VK_VALUE_LIST:
            for (uint32_t k = 0; k < v->u.value_list.n; k++) sink += g->values[v->u.value_list.items[k]].type;
            break;
        case PTE_VK_STRING: check_str(&v->u.str); break;
        default: break;
        }
    }
    for (uint32_t i = 0; i < g->n_chain; i++) {
        check_str(&g->chain[i].name);
        for (uint32_t k = 0; k < g->chain[i].n_args; k++) sink += g->values[g->chain[i].args[k]].type;
    }
    for (uint32_t i = 0; i < g->n_inputs; i++) sink += g->values[g->input_ids[i]].type;
    for (uint32_t i = 0; i < g->n_outputs; i++) sink += g->values[g->output_ids[i]].type;
    for (uint32_t i = 0; i < g->n_constants; i++) {
        check_str(&g->constants[i].named_key);
        check_bytes(&g->constants[i].data);
        /* a named constant of a bare blob (no program) stays unresolved */
        if (g->constants[i].data.size != (g->constants[i].named && !g_program ? 0 : g->constants[i].length)) abort();
    }
    (void)sink;
}

static void walk_program(const pte_program *p) {
    volatile uint64_t sink = 0; /* unsigned: the sums may wrap */
    for (uint32_t i = 0; i < p->n_segments; i++) check_bytes(&p->segments[i].bytes);
    for (uint32_t i = 0; i < p->n_constant_buffer; i++) check_bytes(&p->constant_buffer[i]);
    for (uint32_t i = 0; i < p->n_backend_delegate_data; i++) check_bytes(&p->backend_delegate_data[i]);
    for (uint32_t i = 0; i < p->n_named_data; i++) {
        check_str(&p->named_data[i].key);
        check_bytes(&p->named_data[i].bytes);
        if (pte_find_named_data(p, p->named_data[i].key.s, p->named_data[i].key.len) == NULL) abort();
    }
    for (uint32_t pi = 0; pi < p->n_plans; pi++) {
        const pte_plan *pl = &p->plans[pi];
        check_str(&pl->name);
        for (uint32_t i = 0; i < pl->n_values; i++) {
            const pte_value *v = &pl->values[i];
            if (v->type == PTE_VAL_TENSOR) {
                const pte_tensor *t = &v->u.tensor;
                check_str(&t->fqn);
                check_bytes(&t->data);
                if (t->data_kind == PTE_DATA_CONSTANT || t->data_kind == PTE_DATA_MUTABLE) {
                    if (t->data.size != t->nbytes) abort();
                }
                for (uint32_t k = 0; k < t->n_dim_order; k++)
                    if (t->dim_order[k] >= t->rank) abort();
            } else if (v->type == PTE_VAL_STRING) {
                check_str(&v->u.str);
            } else if (v->type == PTE_VAL_TENSOR_LIST || v->type == PTE_VAL_OPTIONAL_TENSOR_LIST) {
                for (uint32_t k = 0; k < v->u.tensor_list.n; k++)
                    if (v->u.tensor_list.items[k] >= 0) sink += pl->values[v->u.tensor_list.items[k]].type;
            } else if (v->type == PTE_VAL_INT_LIST) {
                for (uint32_t k = 0; k < v->u.int_list.n; k++) sink += (uint64_t)v->u.int_list.items[k];
            }
        }
        for (uint32_t i = 0; i < pl->n_inputs; i++) sink += pl->values[pl->inputs[i]].type;
        for (uint32_t i = 0; i < pl->n_outputs; i++) sink += pl->values[pl->outputs[i]].type;
        for (uint32_t i = 0; i < pl->n_operators; i++) {
            check_str(&pl->operators[i].name);
            check_str(&pl->operators[i].overload);
        }
        for (uint32_t c = 0; c < pl->n_chains; c++) {
            const pte_chain *ch = &pl->chains[c];
            for (uint32_t k = 0; k < ch->n_instructions; k++) {
                const pte_instruction *in = &ch->instructions[k];
                switch (in->type) {
                case PTE_INSTR_KERNEL:
                    check_str(&pl->operators[in->u.kernel.op_index].name);
                    for (uint32_t a = 0; a < in->u.kernel.n_args; a++) sink += pl->values[in->u.kernel.args[a]].type;
                    break;
                case PTE_INSTR_DELEGATE:
                    check_str(&pl->delegates[in->u.delegate.delegate_index].id);
                    for (uint32_t a = 0; a < in->u.delegate.n_args; a++) sink += pl->values[in->u.delegate.args[a]].type;
                    break;
                case PTE_INSTR_MOVE: sink += pl->values[in->u.move.move_from].type + pl->values[in->u.move.move_to].type; break;
                case PTE_INSTR_JUMP_FALSE:
                    sink += pl->values[in->u.jump_false.cond_value_index].type;
                    if ((uint32_t)in->u.jump_false.destination_instruction > ch->n_instructions) abort();
                    break;
                case PTE_INSTR_FREE: sink += pl->values[in->u.free_call.value_index].type; break;
                default: abort();
                }
            }
        }
        for (uint32_t d = 0; d < pl->n_delegates; d++) {
            const pte_delegate *dl = &pl->delegates[d];
            check_str(&dl->id);
            check_bytes(&dl->processed);
            for (uint32_t k = 0; k < dl->n_compile_specs; k++) {
                check_str(&dl->compile_specs[k].key);
                check_bytes(&dl->compile_specs[k].value);
            }
            char err[512];
            err[0] = 0;
            pte_vk_graph *g = NULL;
            /* every blob as a Vulkan graph, whatever the id says, so mutations of the id do not
             * hide the blob from the fuzzer; then the checked entry point */
            wgml_status s = pte_vk_parse(p, dl->processed.data, dl->processed.size, dl->processed.file_offset,
                                         "delegate", &g, err, sizeof err);
            if (s != WGML_OK) {
                if (g || !err[0]) abort();
            } else {
                walk_vk(g);
                pte_vk_free(g);
            }
            err[0] = 0;
            s = pte_vk_parse_delegate(p, pl, d, &g, err, sizeof err);
            if (s != WGML_OK && (g || !err[0])) abort();
            pte_vk_free(g);
        }
    }
    (void)pte_find_plan(p, NULL);
    (void)pte_find_plan(p, "forward");
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    g_lo = buf;
    g_hi = buf + size;
    char err[512];
    err[0] = 0;
    if (size >= 8 && memcmp(buf + 4, "VH00", 4) == 0) {
        pte_vk_graph *g = NULL;
        wgml_status s = pte_vk_parse(NULL, buf, size, 0, "fuzz", &g, err, sizeof err);
        if (s != WGML_OK) {
            if (g || !err[0]) abort();
        } else {
            walk_vk(g);
            pte_vk_free(g);
        }
    } else {
        pte_program *p = NULL;
        wgml_status s = pte_parse(buf, size, &p, err, sizeof err);
        if (getenv("WGML_FUZZ_VERBOSE")) printf("pte: %s\n", s ? err : "accepted");
        if (s != WGML_OK) {
            if (p || !err[0]) abort();
        } else {
            g_program = p;
            walk_program(p);
            g_program = NULL;
            pte_free(p);
        }
    }
    free(buf);
    return 0;
}
