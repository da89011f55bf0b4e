#define _POSIX_C_SOURCE 200809L
/* The double-buffered tiled matmul variants (matmul_db.wgsl, names "db...") on every shape and
 * orientation of case_variant_shapes, against OpenBLAS cblas_dgemm in double precision. The
 * single-buffered ones: test_matmul_tile; split-K: test_matmul_splitk. */
#include "matmul_cases.h"

static void part_0(void) { case_variant_shapes("db", false, 0, 0); }
static void part_1(void) { case_variant_shapes("db", false, 1, 1); }
static void part_2(void) { case_variant_shapes("db", false, 2, 2); }
static void part_3(void) { case_variant_shapes("db", false, 3, 3); }

/* Parts: each "db" variant in index order (128x128_k8, 128x128_k16, 128x64, 64x64). */
int main(int argc, char **argv) {
    th_init_args("test_matmul_db", argc, argv);
    static const th_part parts[] = {{"k8", part_0}, {"k16", part_1}, {"128x64", part_2}, {"64", part_3}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
