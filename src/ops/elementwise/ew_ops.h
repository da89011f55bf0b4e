/* The elementwise kernels' op codes, from one table: the public rows of include/wgml.h
 * (WGML_UNARY_OPS, WGML_BINARY_OPS, WGML_COMPARE_OPS: the ABI values) and, below, the rows only
 * the kernels know (clamp and round to decimals in ew_unary, logical and/or/not in ew_bool).
 * Kernel-only codes start at 64 so that a new public op (the next public value) never meets
 * one.
 *
 * From the rows come, here: the WGSL constants a kernel's switch names (EW_WGSL_UNARY etc.,
 * put into the kernel's prelude: `const UN_RELU: u32 = 0u;` ... so ew_unary.wgsl writes
 * `case UN_RELU:`), the enum constants of the kernel-only rows (EW_UN_CLAMP, ...) and the
 * names (ew_unary_name etc.). tests/py/test_op_table.py checks that every row has its case in
 * each kernel of its family, that the public values are those of the ABI, and that the
 * Python package's names are the table's. */
#ifndef WGML_EW_OPS_H
#define WGML_EW_OPS_H
#include "wgml.h"

#define EW_KERNEL_CODE0 64 /* the first kernel-only code */

/* ew_unary / ew_unary_bwd only: clamp (lo, hi) and round to decimals (lo = 10^|d|, hi = 1
 * when d < 0) */
#define EW_UNARY_KERNEL_OPS(X) X(CLAMP, clamp, 64) X(ROUND_DEC, round_decimals, 65)
/* ew_bool only: the logical ops on bool operands, after the comparisons */
#define EW_BOOL_KERNEL_OPS(X) X(AND, logical_and, 64) X(OR, logical_or, 65) X(NOT, logical_not, 66)

#define EW_UN_ENUM_(NAME, name, value) EW_UN_##NAME = value,
#define EW_BOOL_ENUM_(NAME, name, value) EW_BOOL_##NAME = value,
enum { EW_UNARY_KERNEL_OPS(EW_UN_ENUM_) };
enum { EW_BOOL_KERNEL_OPS(EW_BOOL_ENUM_) };
#undef EW_UN_ENUM_
#undef EW_BOOL_ENUM_

/* Counts of the public rows (their values are 0 .. count − 1: test_op_table.py checks it). */
#define EW_COUNT_(...) +1
#define EW_N_UNARY (0 WGML_UNARY_OPS(EW_COUNT_))
#define EW_N_BINARY (0 WGML_BINARY_OPS(EW_COUNT_))
#define EW_N_COMPARE (0 WGML_COMPARE_OPS(EW_COUNT_))
_Static_assert(EW_N_UNARY <= EW_KERNEL_CODE0 && EW_N_BINARY <= EW_KERNEL_CODE0 && EW_N_COMPARE <= EW_KERNEL_CODE0,
               "public op values stay below the kernel-only codes");

/* The WGSL prelude lines, one `const PREFIX_NAME: u32 = value;` per row (string literals). */
#define EW_WGSL_UN_(NAME, name, value) "const UN_" #NAME ": u32 = " #value "u;\n"
#define EW_WGSL_BIN_(NAME, name, value, i32) "const BIN_" #NAME ": u32 = " #value "u;\n"
#define EW_WGSL_CMP_(NAME, name, value) "const CMP_" #NAME ": u32 = " #value "u;\n"
#define EW_WGSL_BOOL_(NAME, name, value) "const BOOL_" #NAME ": u32 = " #value "u;\n"
#define EW_WGSL_UNARY WGML_UNARY_OPS(EW_WGSL_UN_) EW_UNARY_KERNEL_OPS(EW_WGSL_UN_)
#define EW_WGSL_BINARY WGML_BINARY_OPS(EW_WGSL_BIN_)
#define EW_WGSL_BOOL WGML_COMPARE_OPS(EW_WGSL_CMP_) EW_BOOL_KERNEL_OPS(EW_WGSL_BOOL_)

/* A code's name (the table's second column), or NULL for a code not in the table. */
const char *ew_unary_name(int code);  /* public and kernel-only unary rows */
const char *ew_bool_name(int code);   /* comparisons and the logical ops */
/* 1 when the i32 kernel (ew_binary_int) computes binary op code, else 0 (the i32 column). */
int ew_binary_int_ok(int code);
#endif
