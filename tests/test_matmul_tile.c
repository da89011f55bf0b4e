#define _POSIX_C_SOURCE 200809L
/* The single-buffered tiled matmul variants (matmul.wgsl, names "tile...") and the automatic
 * choice, on every shape and orientation of case_variant_shapes, against OpenBLAS cblas_dgemm
 * in double precision. The double-buffered ones: test_matmul_db; split-K: test_matmul_splitk;
 * the ops themselves: test_matmul. */
#include "matmul_cases.h"

int main(int argc, char **argv) {
    th_init_args("test_matmul_tile", argc, argv);
    case_variant_shapes("tile", true);
    return th_done();
}
