/* The names of the elementwise op tables' rows (ew_ops.h): one switch per family, made from
 * the rows, so a new row has its name with nothing more written. */
#include "ops/elementwise/ew_ops.h"

#include <stddef.h>

#define EW_NAME_CASE_(NAME, name, value) \
    case value: return #name;
#define EW_BIN_NAME_CASE_(NAME, name, value, i32) \
    case value: return #name;
#define EW_BIN_INT_CASE_(NAME, name, value, i32) \
    case value: return i32;

const char *ew_unary_name(int code) {
    switch (code) {
        WGML_UNARY_OPS(EW_NAME_CASE_)
        EW_UNARY_KERNEL_OPS(EW_NAME_CASE_)
    default: return NULL;
    }
}

const char *ew_bool_name(int code) {
    switch (code) {
        WGML_COMPARE_OPS(EW_NAME_CASE_)
        EW_BOOL_KERNEL_OPS(EW_NAME_CASE_)
    default: return NULL;
    }
}

int ew_binary_int_ok(int code) {
    switch (code) {
        WGML_BINARY_OPS(EW_BIN_INT_CASE_)
    default: return 0;
    }
}

/* The public lookups see the public rows only. */
const char *wgml_unary_op_name(wgml_unary_op op) {
    return (unsigned)op < (unsigned)EW_N_UNARY ? ew_unary_name((int)op) : NULL;
}

const char *wgml_binary_op_name(wgml_binary_op op) {
    switch ((int)op) {
        WGML_BINARY_OPS(EW_BIN_NAME_CASE_)
    default: return NULL;
    }
}

const char *wgml_compare_op_name(wgml_compare_op op) {
    return (unsigned)op < (unsigned)EW_N_COMPARE ? ew_bool_name((int)op) : NULL;
}
