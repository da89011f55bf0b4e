/* median along a dim (values and indices; keepdim; rows longer than a workgroup; ties, resolved
 * by a stable sort; rows holding NaN) against a stable sort in double on fresh random inputs;
 * bad input. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float *KEY;
static int cmp_stable(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    double x = KEY[i], y = KEY[j];
    return x < y ? -1 : x > y ? 1 : (i > j) - (i < j);
}

/* x of the given shape, median along dim; ties: values on a coarse grid; nan: some rows get one. */
static void case_median(int rank, const int64_t *shape, int dim, int keepdim, bool ties, bool nan) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    float *hx = th_random((size_t)n, -3, 3);
    if (ties)
        for (int64_t i = 0; i < n; i++) hx[i] = (float)floor(hx[i] * 2) / 2;
    if (nan)
        for (int64_t i = 0; i < n; i += 7) hx[i] = NAN;
    int64_t len = shape[dim], inner = 1;
    for (int i = dim + 1; i < rank; i++) inner *= shape[i];
    int64_t rows = n / len;
    wgml_tensor *x = th_tensor_f32(rank, shape, hx), *ti = NULL;
    wgml_tensor *v = wgml_median(T.g, x, dim, keepdim, &ti);
    char name[128];
    snprintf(name, sizeof name, "median rank %d dim %d len %lld%s%s%s", rank, dim, (long long)len,
             keepdim ? " keepdim" : "", ties ? " ties" : "", nan ? " nan" : "");
    if (!th_check(v && ti, "%s: %s", name, wgml_last_error(T.ctx))) {
        free(hx);
        wgml_tensor_free(x);
        return;
    }
    int want_rank = keepdim ? rank : rank - 1;
    bool shape_ok = wgml_tensor_rank(v) == want_rank && wgml_tensor_rank(ti) == want_rank;
    for (int i = 0, r = 0; shape_ok && i < rank; i++) {
        if (i == dim && !keepdim) continue;
        shape_ok = wgml_tensor_dim(v, r) == (i == dim ? 1 : shape[i]);
        r++;
    }
    th_check(shape_ok, "%s: output shape", name);
    float *got = th_read_f32(v);
    int32_t *gi = malloc(sizeof(int32_t) * (size_t)rows);
    if (wgml_tensor_read(ti, gi, sizeof(int32_t) * (size_t)rows)) th_check(false, "%s: index readback", name);
    float *row = malloc(sizeof(float) * (size_t)len);
    int *ord = malloc(sizeof(int) * (size_t)len);
    int bad = 0;
    for (int64_t r = 0; got && r < rows; r++) {
        int64_t base = (r / inner) * len * inner + r % inner;
        int first_nan = -1;
        for (int64_t j = 0; j < len; j++) {
            row[j] = hx[base + j * inner];
            ord[j] = (int)j;
            if (isnan(row[j]) && first_nan < 0) first_nan = (int)j;
        }
        if (first_nan >= 0) {
            bad += !isnan(got[r]) || gi[r] != first_nan;
            continue;
        }
        KEY = row;
        qsort(ord, (size_t)len, sizeof *ord, cmp_stable); /* the index breaks ties: a stable order */
        int k = ord[(len - 1) / 2];
        bad += got[r] != row[k] || gi[r] != k;
    }
    th_check(bad == 0, "%s: %d of %lld rows wrong", name, bad, (long long)rows);
    free(hx); free(got); free(gi); free(row); free(ord);
    wgml_tensor_free(x); wgml_tensor_free(v); wgml_tensor_free(ti);
}

int main(int argc, char **argv) {
    th_init_args("test_median", argc, argv);
    case_median(2, (int64_t[]){10, 10}, 1, 0, false, false);
    case_median(2, (int64_t[]){10, 10}, 0, 1, false, false);
    case_median(4, (int64_t[]){2, 3, 4, 5}, 2, 1, false, false);
    case_median(4, (int64_t[]){2, 3, 4, 5}, 3, 0, true, false);
    case_median(1, (int64_t[]){1}, 0, 0, false, false);
    case_median(1, (int64_t[]){2}, 0, 0, false, false);
    case_median(1, (int64_t[]){600}, 0, 0, true, false); /* a row longer than the workgroup */
    case_median(3, (int64_t[]){3, 517, 2}, 1, 0, false, false);
    case_median(2, (int64_t[]){6, 9}, 1, 0, true, true);
    /* bad input */
    int64_t s = 4;
    float h[4] = {1, 2, 3, 4};
    int32_t hi[4] = {1, 2, 3, 4};
    wgml_tensor *x = th_tensor_f32(1, &s, h), *xi = th_tensor_i32(1, &s, hi);
    th_expect_error("median dim out of range", wgml_median(T.g, x, 1, 0, NULL) == NULL, WGML_ERR_ARG, "median",
                    "dim 1", NULL);
    th_expect_error("median of i32", wgml_median(T.g, xi, 0, 0, NULL) == NULL, WGML_ERR_DTYPE, "median", "f32", NULL);
    wgml_tensor_free(x); wgml_tensor_free(xi);
    return th_done();
}
