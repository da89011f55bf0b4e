/* The op registry: each operator name the WebGPU and Vulkan partitioners emit, mapped onto
 * wgml's public ops. Arguments come in schema order with the defaults present and the output
 * id(s) last; every builder checks the kinds it reads and the output's serialised shape and
 * dtype, so a graph that means something else than wgml computes fails at load, naming the op.
 * The builders live one family to a file (ops_*.c), each file with its table of names; this
 * file looks a name up across the tables and names the delegate's dtypes. */
#include "program/program.h"

#include <string.h>

/* Every table of the registry, in lookup order (a name is in one table only; test_program_ops
 * checks that every listed name finds its own builder). */
static const prog_op_table *const TABLES[] = {
    &prog_ops_elementwise, &prog_ops_matmul, &prog_ops_reduce, &prog_ops_norm, &prog_ops_shape, &prog_ops_index,
    &prog_ops_create,      &prog_ops_window, &prog_ops_arith,  &prog_ops_copy, &prog_ops_rope,
};
#define N_TABLES (sizeof TABLES / sizeof TABLES[0])

static const prog_op_entry *find_entry(const char *name) {
    for (size_t t = 0; t < N_TABLES; t++)
        for (size_t i = 0; i < TABLES[t]->n; i++)
            if (!strcmp(TABLES[t]->ops[i].name, name)) return &TABLES[t]->ops[i];
    return NULL;
}

prog_op_fn prog_op_find(const char *name) {
    const prog_op_entry *e = name ? find_entry(name) : NULL;
    return e ? e->fn : NULL;
}

const char *prog_op_find_out(const char *out_name) {
    for (size_t t = 0; out_name && t < N_TABLES; t++)
        for (size_t i = 0; i < TABLES[t]->n_outs; i++)
            if (!strcmp(TABLES[t]->outs[i].out, out_name)) return TABLES[t]->outs[i].name;
    return NULL;
}

#define MAX_NAMES 512
const char *const *prog_op_names(size_t *n) {
    static const char *names[MAX_NAMES];
    size_t k = 0;
    for (size_t t = 0; t < N_TABLES; t++)
        for (size_t i = 0; i < TABLES[t]->n && k < MAX_NAMES; i++) names[k++] = TABLES[t]->ops[i].name;
    *n = k;
    return names;
}

int prog_vk_to_wgml(int vk) {
    switch (vk) {
    case VK_BOOL: return WGML_BOOL;
    case VK_INT32: case VK_INT64: return WGML_I32;
    case VK_FLOAT32: case VK_FLOAT64: return WGML_F32;
    default: return -1;
    }
}

const char *prog_vk_dtype_name(int vk) {
    static const char *n[] = {"bool", "uint8", "int8", "int32", "float16", "float32", "float64", "int64"};
    return vk >= 0 && vk < 8 ? n[vk] : "unknown dtype";
}
