#define _POSIX_C_SOURCE 200809L
/* The outer-product matmul variants (matmul_outer.wgsl, short K) against OpenBLAS cblas_dgemm
 * in double precision: every orientation, unsplit and split-K, the epilogues, a grid over
 * 65,535 workgroups. The skinny variants and the automatic choice: test_matmul_skinny. */
#include "matmul_skinny_cases.h"

static void part_variants(void) { test_skinny_variants(4, 5, SKINNY_UNSPLIT); }

static void part_split(void) {
    test_skinny_variants(4, 5, SKINNY_SPLIT);
    test_skinny_epilogues(4);
}

static void part_huge(void) { test_skinny_huge_grid(1); }

/* Parts: the variants unsplit; split 3 and the epilogues; more than 65,535 workgroups. */
int main(int argc, char **argv) {
    th_init_args("test_matmul_outer", argc, argv);
    static const th_part parts[] = {{"variants", part_variants}, {"split", part_split}, {"huge", part_huge}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
