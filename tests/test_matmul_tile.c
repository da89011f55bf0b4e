#define _POSIX_C_SOURCE 200809L
/* The single-buffered tiled matmul variants (matmul.wgsl, names "tile...") and the automatic
 * choice, on every shape and orientation of case_variant_shapes, against OpenBLAS cblas_dgemm
 * in double precision. The double-buffered ones: test_matmul_db; split-K: test_matmul_splitk;
 * the ops themselves: test_matmul. */
#include "matmul_cases.h"

static void part_auto(void) { case_variant_shapes("tile", true, 0, -1, 0xFu); }
static void part_0(void) { case_variant_shapes("tile", false, 0, 0, 0xFu); }
static void part_1(void) { case_variant_shapes("tile", false, 1, 1, 0xFu); }
static void part_2(void) { case_variant_shapes("tile", false, 2, 2, 0xFu); }
static void part_3(void) { case_variant_shapes("tile", false, 3, 3, 0xFu); }
static void part_4(void) { case_variant_shapes("tile", false, 4, 4, 0xFu); }

/* Parts: the automatic choice, then each "tile" variant in index order (128x128_k8, 64x64,
 * 32x32, 128x128_k16, 128x64). */
int main(int argc, char **argv) {
    th_init_args("test_matmul_tile", argc, argv);
    static const th_part parts[] = {{"auto", part_auto}, {"k8", part_0},   {"64", part_1},
                                    {"32", part_2},      {"128", part_3}, {"128x64", part_4}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
