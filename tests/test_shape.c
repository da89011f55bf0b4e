/* Shape ops and copies (clone, slice, cat, permute/transpose, expand_copy) and the creation
 * wrappers (full_like, zeros, ones, scalar_tensor), on every dtype, against plain-loop
 * references compared exactly; bool tails that are not a multiple of 4; a dispatch of more
 * than 65,535 workgroups; bad input. */
#include "copy_util.h"

#include <math.h>

/* ---------------------------------------------------------------- references */

static void *ref_slice(const void *x, size_t es, int rank, const int64_t *shape, int d, int64_t start, int64_t step,
                       const int64_t *oshape) {
    int64_t n = cu_numel(rank, oshape), c[WGML_MAX_RANK];
    unsigned char *o = malloc((size_t)n * es + 4);
    for (int64_t i = 0; i < n; i++) {
        cu_unravel(i, rank, oshape, c);
        c[d] = start + c[d] * step;
        memcpy(o + i * es, (const unsigned char *)x + cu_ravel(rank, shape, c) * es, es);
    }
    return o;
}

static void *ref_permute(const void *x, size_t es, int rank, const int64_t *shape, const int *dims) {
    int64_t n = cu_numel(rank, shape), oshape[WGML_MAX_RANK], c[WGML_MAX_RANK], xc[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) oshape[i] = shape[dims[i]];
    unsigned char *o = malloc((size_t)n * es + 4);
    for (int64_t i = 0; i < n; i++) {
        cu_unravel(i, rank, oshape, c);
        for (int k = 0; k < rank; k++) xc[dims[k]] = c[k];
        memcpy(o + i * es, (const unsigned char *)x + cu_ravel(rank, shape, xc) * es, es);
    }
    return o;
}

static void *ref_expand(const void *x, size_t es, int xr, const int64_t *xs, int r, const int64_t *os) {
    int64_t n = cu_numel(r, os), c[WGML_MAX_RANK], xc[WGML_MAX_RANK];
    unsigned char *o = malloc((size_t)n * es + 4);
    for (int64_t i = 0; i < n; i++) {
        cu_unravel(i, r, os, c);
        for (int k = 0; k < xr; k++) xc[k] = xs[k] == 1 ? 0 : c[k + r - xr];
        memcpy(o + i * es, (const unsigned char *)x + cu_ravel(xr, xs, xc) * es, es);
    }
    return o;
}

/* ---------------------------------------------------------------- clone */

static void test_clone(void) {
    static const int64_t shapes[][3] = {{7, 37, 129}, {37, 1, 1}, {4, 4, 4}, {1, 1, 7}};
    for (int t = 0; t < 4; t++)
        for (int s = 0; s < 4; s++) {
            wgml_dtype dt = CU_DTYPES[t];
            int rank = 3;
            int64_t n = cu_numel(rank, shapes[s]);
            void *h = cu_random(dt, n);
            wgml_tensor *x = cu_upload(T.g, dt, rank, shapes[s], h);
            char name[96];
            snprintf(name, sizeof name, "clone %s [%lld, %lld, %lld]", wgml_dtype_name(dt), (long long)shapes[s][0],
                     (long long)shapes[s][1], (long long)shapes[s][2]);
            wgml_tensor *o = wgml_clone(T.g, x);
            cu_check(name, o, rank, shapes[s], h);
            wgml_tensor_free(o);
            wgml_tensor_free(x);
            free(h);
        }
    /* rank 0 */
    int32_t v = -12345;
    wgml_tensor *x = cu_upload(T.g, WGML_I32, 0, NULL, &v);
    wgml_tensor *o = wgml_clone(T.g, x);
    cu_check("clone i32 rank 0", o, 0, NULL, &v);
    wgml_tensor_free(o);
    wgml_tensor_free(x);
    th_expect_error("clone NULL", wgml_clone(T.g, NULL) == NULL, WGML_ERR_ARG, "clone", "x is NULL", NULL);
}

/* ---------------------------------------------------------------- slice */

typedef struct slice_case {
    wgml_dtype dt;
    int rank;
    int64_t shape[3];
    int dim;
    int64_t start, end, step;
} slice_case;

static void test_slice(void) {
    static const slice_case cases[] = {
        {WGML_F32, 3, {7, 37, 129}, 1, 3, 30, 1},          /* whole rows, u32 units */
        {WGML_F32, 3, {7, 37, 129}, 1, -5, INT64_MAX, 3},  /* negative start, step */
        {WGML_F32, 3, {7, 37, 129}, 2, -100, -1, 2},       /* innermost with a step */
        {WGML_I32, 3, {7, 37, 129}, -3, -1000, 1000, 1},   /* clamped to the whole dim */
        {WGML_U32, 2, {8, 16}, 0, 2, 6, 1},                /* vec4 rows */
        {WGML_U32, 2, {8, 16}, 1, 4, 12, 1},               /* vec4 rows with stride */
        {WGML_BOOL, 2, {37, 7}, 1, 1, 6, 1},               /* bool, rows of 5 bytes */
        {WGML_BOOL, 1, {129}, 0, 4, 129, 1},               /* bool, 125 elements */
        {WGML_BOOL, 2, {8, 16}, 0, 2, 7, 1},               /* bool, whole words */
        {WGML_BOOL, 3, {7, 37, 9}, 1, 0, 37, 4},           /* bool with a step */
        {WGML_F32, 1, {129}, 0, 5, 6, 1},                  /* one element */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const slice_case *c = &cases[k];
        size_t es = wgml_dtype_size(c->dt);
        int64_t n = cu_numel(c->rank, c->shape);
        void *h = cu_random(c->dt, n);
        wgml_tensor *x = cu_upload(T.g, c->dt, c->rank, c->shape, h);
        int d = c->dim < 0 ? c->dim + c->rank : c->dim;
        int64_t size = c->shape[d], s = c->start, e = c->end;
        if (s < 0) s += size;
        if (e < 0) e += size;
        s = s < 0 ? 0 : s > size ? size : s;
        e = e < 0 ? 0 : e > size ? size : e;
        int64_t os[3] = {c->shape[0], c->shape[1], c->shape[2]};
        os[d] = (e - s + c->step - 1) / c->step;
        void *ref = ref_slice(h, es, c->rank, c->shape, d, s, c->step, os);
        char name[128];
        snprintf(name, sizeof name, "slice %s rank %d dim %d [%lld:%lld:%lld]", wgml_dtype_name(c->dt), c->rank, c->dim,
                 (long long)c->start, (long long)c->end, (long long)c->step);
        wgml_tensor *o = wgml_slice(T.g, x, c->dim, c->start, c->end, c->step);
        cu_check(name, o, c->rank, os, ref);
        if (th_dumping() && o) {
            char cn[32];
            snprintf(cn, sizeof cn, "slice_%zu", k);
            float prm[4] = {(float)c->dim, (float)c->start, (float)c->end, (float)c->step};
            int64_t np = 4;
            th_dump(cn, "x", c->dt, c->rank, c->shape, h);
            th_dump(cn, "params", WGML_F32, 1, &np, prm);
            th_dump_tensor(cn, "out", o);
        }
        wgml_tensor_free(o);
        wgml_tensor_free(x);
        free(h);
        free(ref);
    }
    int64_t sh[2] = {7, 37};
    wgml_tensor *x = cu_upload(T.g, WGML_F32, 2, sh, NULL);
    th_expect_error("slice step 0", !wgml_slice(T.g, x, 1, 0, 5, 0), WGML_ERR_ARG, "slice", "step 0", NULL);
    th_expect_error("slice step -1", !wgml_slice(T.g, x, 1, 0, 5, -1), WGML_ERR_ARG, "slice", "step -1", NULL);
    th_expect_error("slice dim 2", !wgml_slice(T.g, x, 2, 0, 5, 1), WGML_ERR_ARG, "slice", "dim 2", "[7, 37]", NULL);
    th_expect_error("slice empty", !wgml_slice(T.g, x, 1, 30, 10, 1), WGML_ERR_SHAPE, "slice", "empty", NULL);
    th_expect_error("slice NULL", !wgml_slice(T.g, NULL, 0, 0, 1, 1), WGML_ERR_ARG, "slice", "x is NULL", NULL);
    wgml_tensor_free(x);
}

/* ---------------------------------------------------------------- cat */

static void run_cat(const char *label, wgml_dtype dt, int n, int rank, const int64_t (*shapes)[3], int dim) {
    size_t es = wgml_dtype_size(dt);
    void *h[8];
    wgml_tensor *t[8];
    int d = dim < 0 ? dim + rank : dim;
    int64_t os[3] = {shapes[0][0], shapes[0][1], shapes[0][2]};
    os[d] = 0;
    for (int i = 0; i < n; i++) {
        h[i] = cu_random(dt, cu_numel(rank, shapes[i]));
        t[i] = cu_upload(T.g, dt, rank, shapes[i], h[i]);
        os[d] += shapes[i][d];
    }
    int64_t total = cu_numel(rank, os), c[3];
    unsigned char *ref = malloc((size_t)total * es + 4);
    for (int64_t e = 0; e < total; e++) {
        cu_unravel(e, rank, os, c);
        int i = 0;
        while (c[d] >= shapes[i][d]) c[d] -= shapes[i++][d];
        memcpy(ref + e * es, (unsigned char *)h[i] + cu_ravel(rank, shapes[i], c) * es, es);
    }
    char name[128];
    snprintf(name, sizeof name, "cat %s %s (%d tensors, dim %d)", label, wgml_dtype_name(dt), n, dim);
    wgml_tensor *o = wgml_cat(T.g, t, n, dim);
    cu_check(name, o, rank, os, ref);
    if (th_dumping() && o) {
        static int counter;
        char cn[32], tn[16];
        snprintf(cn, sizeof cn, "cat_%d", counter++);
        float prm[2] = {(float)dim, (float)n};
        int64_t np = 2;
        for (int i = 0; i < n; i++) {
            snprintf(tn, sizeof tn, "t%d", i);
            th_dump(cn, tn, dt, rank, shapes[i], h[i]);
        }
        th_dump(cn, "params", WGML_F32, 1, &np, prm);
        th_dump_tensor(cn, "out", o);
    }
    wgml_tensor_free(o);
    for (int i = 0; i < n; i++) {
        wgml_tensor_free(t[i]);
        free(h[i]);
    }
    free(ref);
}

static void test_cat(void) {
    static const int64_t a[3][3] = {{7, 37, 1}, {3, 37, 1}, {129, 37, 1}};
    static const int64_t b[2][3] = {{7, 5, 4}, {7, 3, 4}};
    static const int64_t c[3][3] = {{3, 7, 1}, {3, 2, 1}, {3, 5, 1}};
    static const int64_t e[2][3] = {{4, 4, 1}, {8, 4, 1}};
    static const int64_t f[3][3] = {{2, 3, 7}, {2, 3, 1}, {2, 3, 37}};
    for (int t = 0; t < 4; t++) {
        run_cat("dim 0", CU_DTYPES[t], 3, 2, a, 0);
        run_cat("middle dim", CU_DTYPES[t], 2, 3, b, 1);
        run_cat("odd widths", CU_DTYPES[t], 3, 2, c, 1);
        run_cat("last dim (negative)", CU_DTYPES[t], 3, 3, f, -1);
    }
    run_cat("whole words", WGML_BOOL, 2, 2, e, 0);
    run_cat("single", WGML_F32, 1, 2, e, 1);

    int64_t s1[2] = {3, 4}, s2[2] = {3, 5}, s3[2] = {2, 5};
    wgml_tensor *x = cu_upload(T.g, WGML_F32, 2, s1, NULL), *y = cu_upload(T.g, WGML_F32, 2, s2, NULL);
    wgml_tensor *z = cu_upload(T.g, WGML_F32, 2, s3, NULL), *w = cu_upload(T.g, WGML_I32, 2, s1, NULL);
    wgml_tensor *l1[2] = {x, y}, *l2[2] = {x, w}, *l3[3] = {x, y, z}, *l4[2] = {x, NULL};
    th_expect_error("cat mismatched shapes", !wgml_cat(T.g, l1, 2, 0), WGML_ERR_SHAPE, "cat", "tensors[1] [3, 5]",
                    "tensors[0] [3, 4]", NULL);
    th_expect_error("cat mismatched in other dim", !wgml_cat(T.g, l3, 3, 1), WGML_ERR_SHAPE, "cat", "tensors[2] [2, 5]",
                    NULL);
    th_expect_error("cat dtypes", !wgml_cat(T.g, l2, 2, 0), WGML_ERR_DTYPE, "cat", "i32", "f32", NULL);
    th_expect_error("cat NULL entry", !wgml_cat(T.g, l4, 2, 0), WGML_ERR_ARG, "cat", "tensors[1] is NULL", NULL);
    th_expect_error("cat no tensors", !wgml_cat(T.g, l1, 0, 0), WGML_ERR_ARG, "cat", NULL);
    th_expect_error("cat dim 2", !wgml_cat(T.g, l1, 2, 2), WGML_ERR_ARG, "cat", "dim 2", "tensors[0] [3, 4]", NULL);
    wgml_tensor_free(x); wgml_tensor_free(y); wgml_tensor_free(z); wgml_tensor_free(w);
}

/* ---------------------------------------------------------------- permute, transpose */

static void run_permute(wgml_dtype dt, int rank, const int64_t *shape, const int *dims, bool as_transpose, int d0,
                        int d1) {
    size_t es = wgml_dtype_size(dt);
    int64_t n = cu_numel(rank, shape), os[WGML_MAX_RANK];
    void *h = cu_random(dt, n);
    wgml_tensor *x = cu_upload(T.g, dt, rank, shape, h);
    int pd[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) pd[i] = dims ? (dims[i] < 0 ? dims[i] + rank : dims[i]) : i;
    if (as_transpose) {
        int a = d0 < 0 ? d0 + rank : d0, b = d1 < 0 ? d1 + rank : d1;
        pd[a] = b;
        pd[b] = a;
    }
    for (int i = 0; i < rank; i++) os[i] = shape[pd[i]];
    void *ref = ref_permute(h, es, rank, shape, pd);
    char name[160], *p = name;
    p += snprintf(p, 40, "%s %s rank %d (", as_transpose ? "transpose" : "permute", wgml_dtype_name(dt), rank);
    for (int i = 0; i < rank; i++) p += snprintf(p, 8, "%s%d", i ? "," : "", pd[i]);
    snprintf(p, 4, ")");
    wgml_tensor *o = as_transpose ? wgml_transpose(T.g, x, d0, d1) : wgml_permute(T.g, x, dims);
    cu_check(name, o, rank, os, ref);
    if (th_dumping() && o) {
        static int counter;
        char cn[32];
        snprintf(cn, sizeof cn, "permute_%d", counter++);
        float prm[WGML_MAX_RANK];
        int64_t np = rank;
        for (int i = 0; i < rank; i++) prm[i] = (float)pd[i];
        th_dump(cn, "x", dt, rank, shape, h);
        th_dump(cn, "params", WGML_F32, 1, &np, prm);
        th_dump_tensor(cn, "out", o);
    }
    wgml_tensor_free(o);
    wgml_tensor_free(x);
    free(h);
    free(ref);
}

static void test_permute(void) {
    int64_t s8[8] = {2, 3, 1, 2, 3, 2, 1, 2};
    int p8[8] = {7, 3, 5, 0, 6, 1, 4, 2};
    int64_t s3[3] = {7, 37, 129};
    int p3[3] = {2, 0, 1}, p3b[3] = {-1, -3, -2};
    int64_t s4[4] = {3, 5, 7, 3};
    int p4[4] = {3, 1, 0, 2}, id4[4] = {0, 1, 2, 3};
    for (int t = 0; t < 4; t++) {
        wgml_dtype dt = CU_DTYPES[t];
        run_permute(dt, 8, s8, p8, false, 0, 0);
        run_permute(dt, 4, s4, p4, false, 0, 0);
        run_permute(dt, 2, s3 + 1, NULL, true, 0, 1);
    }
    /* a random rank-8 permutation of sizes up to 4 */
    int64_t r8[8];
    int q8[8];
    for (int i = 0; i < 8; i++) {
        r8[i] = 1 + (int64_t)th_uniform(0, 4);
        q8[i] = i;
    }
    for (int i = 7; i > 0; i--) {
        int j = (int)th_uniform(0, i + 1), tmp = q8[i];
        q8[i] = q8[j];
        q8[j] = tmp;
    }
    run_permute(WGML_F32, 8, r8, q8, false, 0, 0);
    run_permute(WGML_BOOL, 8, r8, q8, false, 0, 0);
    run_permute(WGML_F32, 3, s3, p3, false, 0, 0);
    run_permute(WGML_I32, 3, s3, p3b, false, 0, 0);
    run_permute(WGML_BOOL, 3, s3, NULL, true, -1, 0);
    run_permute(WGML_U32, 4, s4, id4, false, 0, 0); /* identity: a clone */
    /* the last dim kept: moved in vec4 units where it is a multiple of 4 (attention's heads-first
     * layout, [B, S, H, D] -> [B, H, S, D]), element by element where it is not */
    int64_t h4[4] = {2, 7, 3, 8}, h4odd[4] = {2, 7, 3, 6}, h3[3] = {5, 9, 4};
    int ph4[4] = {0, 2, 1, 3}, ph3[3] = {1, 0, 2};
    for (int t = 0; t < 4; t++) {
        run_permute(CU_DTYPES[t], 4, h4, ph4, false, 0, 0);
        run_permute(CU_DTYPES[t], 4, h4odd, ph4, false, 0, 0);
        run_permute(CU_DTYPES[t], 3, h3, ph3, false, 0, 0);
    }
    /* tiled path (4-byte data, both tile dims >= 16), partial tiles, batch dims around */
    int64_t t4[4] = {2, 64, 3, 48}, t5[5] = {3, 17, 2, 33, 20};
    int pt4[4] = {0, 3, 2, 1}, pt4b[4] = {3, 1, 0, 2}, pt5[5] = {0, 4, 2, 3, 1};
    for (int t = 0; t < 4; t++) {
        run_permute(CU_DTYPES[t], 4, t4, pt4, false, 0, 0);
        run_permute(CU_DTYPES[t], 4, t4, pt4b, false, 0, 0);
        run_permute(CU_DTYPES[t], 5, t5, pt5, false, 0, 0);
        run_permute(CU_DTYPES[t], 2, t4 + 1, NULL, true, 1, 0);
    }

    wgml_tensor *x = cu_upload(T.g, WGML_F32, 3, s3, NULL);
    int dup[3] = {0, 1, 1}, bad[3] = {0, 1, 3};
    th_expect_error("permute duplicate dim", !wgml_permute(T.g, x, dup), WGML_ERR_ARG, "permute", "twice", NULL);
    th_expect_error("permute dim 3", !wgml_permute(T.g, x, bad), WGML_ERR_ARG, "permute", "3", "[7, 37, 129]", NULL);
    th_expect_error("permute NULL dims", !wgml_permute(T.g, x, NULL), WGML_ERR_ARG, "permute", "dims", NULL);
    th_expect_error("transpose d1 -4", !wgml_transpose(T.g, x, 0, -4), WGML_ERR_ARG, "transpose", "d1 -4", NULL);
    th_expect_error("transpose NULL", !wgml_transpose(T.g, NULL, 0, 1), WGML_ERR_ARG, "transpose", "x is NULL", NULL);
    wgml_tensor_free(x);
}

/* ---------------------------------------------------------------- expand_copy */

static void run_expand(wgml_dtype dt, int xr, const int64_t *xs, int r, const int64_t *want, const int64_t *os) {
    size_t es = wgml_dtype_size(dt);
    void *h = cu_random(dt, cu_numel(xr, xs));
    wgml_tensor *x = cu_upload(T.g, dt, xr, xs, h);
    void *ref = ref_expand(h, es, xr, xs, r, os);
    char name[200], b1[64], b2[64];
    wgml_tensor *o = wgml_expand_copy(T.g, x, r, want);
    snprintf(name, sizeof name, "expand_copy %s %s -> %s", wgml_dtype_name(dt), tshape_host(b1, xr, xs),
             tshape_host(b2, r, os));
    cu_check(name, o, r, os, ref);
    if (th_dumping() && o) {
        static int counter;
        char cn[32];
        snprintf(cn, sizeof cn, "expand_%d", counter++);
        float prm[WGML_MAX_RANK];
        int64_t np = r;
        for (int i = 0; i < r; i++) prm[i] = (float)want[i];
        th_dump(cn, "x", dt, xr, xs, h);
        th_dump(cn, "params", WGML_F32, 1, &np, prm);
        th_dump_tensor(cn, "out", o);
    }
    wgml_tensor_free(o);
    wgml_tensor_free(x);
    free(h);
    free(ref);
}

static void test_expand(void) {
    int64_t a[2] = {37, 1}, aw[3] = {3, 37, 129};
    int64_t b[3] = {4, 1, 7}, bw[3] = {4, 5, -1}, bo[3] = {4, 5, 7};
    int64_t c[2] = {1, 5}, cw[2] = {7, 5};
    int64_t d[2] = {3, 4}, dw[2] = {-1, -1};
    int64_t e[1] = {1}, ew[4] = {2, 3, 1, 9};
    int64_t rw1[1] = {16}, rw3[3] = {3, 37, 16}, rx2[2] = {1, 12}, rx3[3] = {7, 5, 12};
    int64_t v3[3] = {4, 1, 8}, v3w[3] = {4, 5, 8};
    for (int t = 0; t < 4; t++) {
        wgml_dtype dt = CU_DTYPES[t];
        run_expand(dt, 2, a, 3, aw, aw);
        run_expand(dt, 3, b, 3, bw, bo);
        run_expand(dt, 2, c, 2, cw, cw);
        run_expand(dt, 2, d, 2, dw, d); /* no broadcast: a plain copy */
        run_expand(dt, 1, e, 4, ew, ew);
        run_expand(dt, 0, NULL, 2, cw, cw); /* rank 0 to [7, 5] */
        run_expand(dt, 1, rw1, 3, rw3, rw3); /* whole rows repeated: block path (vec4) */
        run_expand(dt, 2, rx2, 3, rx3, rx3); /* [1, 12] rows (words for every dtype) */
        run_expand(dt, 3, v3, 3, v3w, v3w);  /* a middle dim repeated, the last moved in vec4s */
    }
    wgml_tensor *x = cu_upload(T.g, WGML_F32, 2, a, NULL);
    int64_t bad[2] = {37, 0}, bad2[2] = {36, 4}, lead[3] = {-1, 37, 4};
    th_expect_error("expand_copy zero", !wgml_expand_copy(T.g, x, 2, bad), WGML_ERR_SHAPE, "expand_copy", "[37, 1]",
                    "[37, 0]", NULL);
    th_expect_error("expand_copy mismatch", !wgml_expand_copy(T.g, x, 2, bad2), WGML_ERR_SHAPE, "expand_copy",
                    "[36, 4]", NULL);
    th_expect_error("expand_copy -1 leading", !wgml_expand_copy(T.g, x, 3, lead), WGML_ERR_SHAPE, "expand_copy", NULL);
    th_expect_error("expand_copy lower rank", !wgml_expand_copy(T.g, x, 1, a), WGML_ERR_SHAPE, "expand_copy", "rank 1",
                    NULL);
    wgml_tensor_free(x);
}

/* More than 65,535 workgroups: a bool expand of 67.1 million elements, one thread per word of
 * four, 256 threads per workgroup: 65,537 workgroups. */
static void test_huge(void) {
    int64_t xs[2] = {1, 64}, os[2] = {1048577, 64};
    unsigned char *h = cu_random(WGML_BOOL, 64);
    wgml_tensor *x = cu_upload(T.g, WGML_BOOL, 2, xs, h);
    double t0 = now();
    wgml_tensor *o = wgml_expand_copy(T.g, x, 2, os);
    unsigned char *got = cu_read(o);
    double t1 = now();
    int64_t bad = 0;
    for (int64_t i = 0; got && i < os[0] * os[1]; i++) bad += got[i] != h[i % 64];
    th_check(got && bad == 0, "expand_copy bool [1, 64] -> [1048577, 64] (65,537 workgroups): %lld wrong",
             (long long)bad);
    printf("  ok %-60s (%.2f s)\n", "expand_copy bool, 65,537 workgroups", t1 - t0);
    free(got);
    free(h);
    wgml_tensor_free(o);
    wgml_tensor_free(x);
}

/* ---------------------------------------------------------------- creation */

static void test_creation(void) {
    int64_t s[2] = {7, 37};
    int64_t n = 7 * 37;
    wgml_tensor *x = cu_upload(T.g, WGML_F32, 2, s, NULL);
    float *rf = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) rf[i] = 2.5f;
    wgml_tensor *o = wgml_full_like(T.g, x, 2.5);
    cu_check("full_like f32 [7, 37] 2.5", o, 2, s, rf);
    wgml_tensor_free(o);
    int64_t bs[1] = {37};
    wgml_tensor *xb = cu_upload(T.g, WGML_BOOL, 1, bs, NULL);
    unsigned char rb[37];
    memset(rb, 1, sizeof rb);
    o = wgml_full_like(T.g, xb, 1);
    cu_check("full_like bool [37] true", o, 1, bs, rb);
    wgml_tensor_free(o);
    int32_t *ri = calloc((size_t)n, sizeof(int32_t));
    o = wgml_zeros(T.g, WGML_I32, 2, s);
    cu_check("zeros i32 [7, 37]", o, 2, s, ri);
    wgml_tensor_free(o);
    memset(rb, 0, sizeof rb);
    o = wgml_zeros(T.g, WGML_BOOL, 1, bs);
    cu_check("zeros bool [37]", o, 1, bs, rb);
    wgml_tensor_free(o);
    for (int64_t i = 0; i < n; i++) rf[i] = 1.0f;
    o = wgml_ones(T.g, WGML_F32, 2, s);
    cu_check("ones f32 [7, 37]", o, 2, s, rf);
    wgml_tensor_free(o);
    uint32_t ru[37];
    for (int i = 0; i < 37; i++) ru[i] = 1;
    o = wgml_ones(T.g, WGML_U32, 1, bs);
    cu_check("ones u32 [37]", o, 1, bs, ru);
    wgml_tensor_free(o);
    float fv = -3.25f;
    o = wgml_scalar_tensor(T.g, WGML_F32, -3.25);
    th_check(o && wgml_tensor_rank(o) == 0 && wgml_tensor_numel(o) == 1, "scalar_tensor is rank 0 with one element");
    cu_check("scalar_tensor f32 -3.25", o, 0, NULL, &fv);
    wgml_tensor_free(o);
    int32_t iv = 7;
    o = wgml_scalar_tensor(T.g, WGML_I32, 7);
    cu_check("scalar_tensor i32 7", o, 0, NULL, &iv);
    /* a rank-0 tensor goes through the copies too */
    int64_t es[2] = {3, 5};
    int32_t r15[15];
    for (int i = 0; i < 15; i++) r15[i] = 7;
    wgml_tensor *o2 = wgml_expand_copy(T.g, o, 2, es);
    cu_check("expand_copy of scalar_tensor", o2, 2, es, r15);
    wgml_tensor_free(o2);
    wgml_tensor_free(o);
    th_expect_error("full_like NULL", !wgml_full_like(T.g, NULL, 1), WGML_ERR_ARG, "full_like", "x is NULL", NULL);
    th_expect_error("zeros rank -1", !wgml_zeros(T.g, WGML_F32, -1, s), WGML_ERR_SHAPE, "rank -1", NULL);
    th_expect_error("ones NULL shape", !wgml_ones(T.g, WGML_F32, 2, NULL), WGML_ERR_ARG, "shape is NULL", NULL);
    th_expect_error("scalar_tensor i32 0.5", !wgml_scalar_tensor(T.g, WGML_I32, 0.5), WGML_ERR_ARG, "not an i32", NULL);
    free(rf);
    free(ri);
    wgml_tensor_free(x);
    wgml_tensor_free(xb);
}

int main(int argc, char **argv) {
    th_init_args("test_shape", argc, argv);
    struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {{"clone", test_clone},     {"slice", test_slice},   {"cat", test_cat},
                 {"permute", test_permute}, {"expand", test_expand}, {"creation", test_creation},
                 {"huge grid", test_huge}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        double t0 = now();
        parts[i].fn();
        printf("[%s: %.2f s]\n", parts[i].name, now() - t0);
    }
    return th_done();
}
