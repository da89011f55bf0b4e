#define _POSIX_C_SOURCE 200809L
/* The double-buffered tiled matmul variants (matmul_db.wgsl, names "db...") on every shape and
 * orientation of case_variant_shapes, against OpenBLAS cblas_dgemm in double precision. The
 * single-buffered ones: test_matmul_tile; split-K: test_matmul_splitk. */
#include "matmul_cases.h"

int main(int argc, char **argv) {
    th_init_args("test_matmul_db", argc, argv);
    case_variant_shapes("db", false);
    return th_done();
}
