#define _POSIX_C_SOURCE 200809L
/* Split-K on every tiled matmul variant (matmul.wgsl, matmul_db.wgsl) against OpenBLAS
 * cblas_dgemm in double precision. The unsplit variants: test_matmul_tile, test_matmul_db; the
 * epilogues through the reduction and split-K in a built graph: test_matmul. */
#include "matmul_cases.h"

/* Split-K ($WGML_MATMUL_SPLITK) in 3 slices on the tiled variants first..last (in index
 * order), every transpose, K not a multiple of the slice and K = 1 (empty slices write zero
 * partials). */
static void split3(int first, int last) {
    static const int64_t shapes[][3] = {{129, 37, 65}, {33, 17, 1}, {132, 136, 36}};
    th_setenv("WGML_MATMUL_SPLITK", "3", 1);
    int seen = 0;
    for (int v = 0; v < wgml_matmul_variant_count(); v++) {
        if (!is_tiled(v) || seen++ < first || seen - 1 > last) continue;
        wgml_matmul_force_variant(T.ctx, v);
        char label[96];
        snprintf(label, sizeof label, "split3 %s", wgml_matmul_variant_name(v));
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int t = 0; t < 4; t++) case_matmul(label, 0, 0, shapes[i][0], shapes[i][1], shapes[i][2], t & 1, t >> 1);
    }
    wgml_matmul_force_variant(T.ctx, -1);
    th_unsetenv("WGML_MATMUL_SPLITK");
    th_check(seen > last, "tiled variants %d..%d: only %d exist", first, last, seen);
}

/* Slice counts 2 and 7 with batch and broadcast batch, and the variant override by name. (The
 * epilogues through the reduction: test_matmul.) */
static void split_counts(void) {
    static const char *const counts[] = {"2", "7"};
    for (int c = 0; c < 2; c++) {
        th_setenv("WGML_MATMUL_SPLITK", counts[c], 1);
        char label[64];
        snprintf(label, sizeof label, "split%s", counts[c]);
        case_matmul(label, 0, 0, 70, 50, 333, 1, 0);
        case_matmul(label, 3, 3, 33, 17, 29, 0, 0);
        case_matmul(label, 4, 4, 20, 24, 100, 1, 1);
        case_matmul(label, 1, 5, 9, 11, 13, 0, 1);
        case_matmul(label, 5, 0, 9, 11, 13, 0, 0);
    }
    th_setenv("WGML_MATMUL_SPLITK", "4", 1);
    th_setenv("WGML_MATMUL_VARIANT", "db128x64_k16_r8x4", 1);
    case_matmul("split4 by $WGML_MATMUL_VARIANT", 0, 0, 40, 30, 50, 0, 1);
    th_unsetenv("WGML_MATMUL_VARIANT");
    th_unsetenv("WGML_MATMUL_SPLITK");
}

static void part_tile_a(void) { split3(0, 2); }
static void part_tile_b(void) { split3(3, 3); }
static void part_tile_c(void) { split3(4, 4); }
static void part_db_a(void) { split3(5, 5); }
static void part_db_b(void) { split3(6, 6); }
static void part_db_c(void) { split3(7, 7); }
static void part_db_d(void) { split3(8, 8); }

/* Parts: 3 slices on the tiled variants 0-2, 3, 4 (the single-buffered), 5, 6, 7, 8 (the
 * double-buffered: each its own part, about a minute in the browser); the other slice counts
 * and the override. */
int main(int argc, char **argv) {
    th_init_args("test_matmul_splitk", argc, argv);
    static const th_part parts[] = {
        {"tile-a", part_tile_a}, {"tile-b", part_tile_b}, {"tile-c", part_tile_c}, {"db-a", part_db_a},
        {"db-b", part_db_b},     {"db-c", part_db_c},     {"db-d", part_db_d},     {"counts", split_counts}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
