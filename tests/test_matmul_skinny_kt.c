#define _POSIX_C_SOURCE 200809L
/* The skinny matmul kernel's other variants (matmul_skinny.wgsl with other rows per slot R and
 * k-threads KT: skinny_r2_kt16, skinny_r1_kt32, skinny_r4_kt4) against OpenBLAS cblas_dgemm in
 * double precision, every orientation, unsplit and split-K. The automatic variant, the
 * epilogues and the built graph: test_matmul_skinny. */
#include "matmul_skinny_cases.h"

static void part_unsplit(void) { test_skinny_variants(1, 3, SKINNY_UNSPLIT); }
static void part_split(void) { test_skinny_variants(1, 3, SKINNY_SPLIT); }

/* Parts: unsplit, split 3. */
int main(int argc, char **argv) {
    th_init_args("test_matmul_skinny_kt", argc, argv);
    static const th_part parts[] = {{"unsplit", part_unsplit}, {"split", part_split}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
