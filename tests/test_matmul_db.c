#define _POSIX_C_SOURCE 200809L
/* The double-buffered tiled matmul variants (matmul_db.wgsl, names "db...") on every shape and
 * orientation of case_variant_shapes, against OpenBLAS cblas_dgemm in double precision. The
 * single-buffered ones: test_matmul_tile; split-K: test_matmul_splitk. */
#include "matmul_cases.h"

/* 0x3: B as stored (tb = 0), 0xC: B transposed; each half of a 128-wide tile's orientations is
 * about 40 s on Dawn's SwiftShader alone, the whole over the 90 s a test may take in CI. */
static void part_k8(void) { case_variant_shapes("db", false, 0, 0, 0xFu); }
static void part_k16_bn(void) { case_variant_shapes("db", false, 1, 1, 0x3u); }
static void part_k16_bt(void) { case_variant_shapes("db", false, 1, 1, 0xCu); }
static void part_128x64_bn(void) { case_variant_shapes("db", false, 2, 2, 0x3u); }
static void part_128x64_bt(void) { case_variant_shapes("db", false, 2, 2, 0xCu); }
static void part_64(void) { case_variant_shapes("db", false, 3, 3, 0xFu); }

/* Parts: each "db" variant in index order (128x128_k8, 128x128_k16, 128x64, 64x64), the middle
 * two by B's orientation. */
int main(int argc, char **argv) {
    th_init_args("test_matmul_db", argc, argv);
    static const th_part parts[] = {{"k8", part_k8},           {"k16-bn", part_k16_bn}, {"k16-bt", part_k16_bt},
                                    {"128x64-bn", part_128x64_bn}, {"128x64-bt", part_128x64_bt}, {"64", part_64}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
