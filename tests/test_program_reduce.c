/* The op registry's logical reductions and scans (src/program/ops_reduce.c: any and all over
 * every element, one dim or a list of dims; cumsum) called as the program runner calls them,
 * on the GPU, against float64 references written here from PyTorch's definitions, with fresh
 * random shapes, dims, dtypes (float32 with NaNs, int, bool) and inputs each run (WGML_SEED
 * repeats one) and NaN-poisoned outputs; then the edge cases (an empty dim list reduces nothing,
 * None every dim, rank-0 inputs) and the refusals (a dim out of range or twice, a wrong output
 * shape, a dim too long), each a clear error naming the operator. */
#include "harness.h"
#include "program_slots.h"

#include <stdio.h>

#define MAXN 4096

static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)floor(th_uniform(0, 1) * (double)(hi - lo + 1) - 1e-12); }

/* A random input of n elements in the delegate dtype vk: mostly zeros (share p_zero), NaN now
 * and then in float; data in wgml's layout, ref the same values as doubles. */
static void fill(int vk, int64_t n, double p_zero, void *data, double *ref) {
    for (int64_t i = 0; i < n; i++) {
        int zero = th_uniform(0, 1) < p_zero;
        double v = zero ? 0 : vk == VK_BOOL ? 1 : vk == VK_FLOAT32 ? th_uniform(-2, 2) : (double)irand(-3, 3);
        if (vk == VK_FLOAT32 && !zero && th_uniform(0, 1) < 0.05) v = NAN;
        if (vk == VK_FLOAT32) ((float *)data)[i] = (float)v;
        else if (vk == VK_BOOL) ((unsigned char *)data)[i] = v != 0;
        else ((int32_t *)data)[i] = (int32_t)v;
        ref[i] = vk == VK_FLOAT32 ? (double)(float)v : v;
    }
}

/* Row-major strides of dims. */
static void strides(int rank, const int64_t *d, int64_t *st) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) st[i] = s, s *= d[i];
}

static const char *vk_name(int vk) { return vk == VK_BOOL ? "bool" : vk == VK_FLOAT32 ? "float32" : "int64"; }

/* ---- any / all ---------------------------------------------------------------------------- */

/* The reference: out[o] = OR (AND for all) of x != 0 over the reduced dims (red[d] set). */
static void any_ref(const double *x, int rank, const int64_t *d, const int *red, int is_all, double *out) {
    int64_t st[WGML_MAX_RANK], od[WGML_MAX_RANK], ost[WGML_MAX_RANK], n = 1, on = 1;
    strides(rank, d, st);
    for (int i = 0; i < rank; i++) od[i] = red[i] ? 1 : d[i], n *= d[i], on *= od[i];
    strides(rank, od, ost);
    for (int64_t o = 0; o < on; o++) out[o] = is_all;
    for (int64_t i = 0; i < n; i++) {
        int64_t o = 0;
        for (int k = 0; k < rank; k++) o += (red[k] ? 0 : (i / st[k]) % d[k]) * ost[k];
        int nz = x[i] != 0; /* NaN != 0 */
        out[o] = is_all ? (out[o] && nz) : (out[o] || nz);
    }
}

/* form 0: any/all.default, 1: .dim, 2: .dims (dims_mode 0 a random list, 1 an empty list, 2 None) */
static void any_case(int is_all, int form, int dims_mode) {
    int rank = (int)irand(form == 1 ? 1 : 0, 4), vk = (int[]){VK_FLOAT32, VK_INT64, VK_BOOL}[irand(0, 2)];
    int64_t d[WGML_MAX_RANK], n = 1, dl[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = irand(1, 5), n *= d[i];
    int red[WGML_MAX_RANK] = {0}, nd = 0, keep = (int)irand(0, 1);
    if (form == 0 || (form == 2 && dims_mode == 2)) {
        for (int i = 0; i < rank; i++) red[i] = 1;
    } else if (form == 1) {
        int k = (int)irand(0, rank - 1);
        red[k] = 1, dl[nd++] = th_uniform(0, 1) < 0.5 ? k : k - rank;
    } else if (dims_mode == 0) {
        for (int i = 0; i < rank; i++)
            if (th_uniform(0, 1) < 0.5) red[i] = 1, dl[nd++] = th_uniform(0, 1) < 0.5 ? i : i - rank;
    }
    if (form == 0) keep = 0;
    void *data = malloc((size_t)n * 4);
    double *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)n * sizeof *ref);
    fill(vk, n, is_all ? th_uniform(0, 0.3) : th_uniform(0.6, 1.0), data, x);
    any_ref(x, rank, d, red, is_all, ref);
    int64_t od[WGML_MAX_RANK];
    int orank = 0;
    for (int i = 0; i < rank; i++)
        if (!red[i] || keep) od[orank++] = red[i] ? 1 : d[i];
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t a[4];
    int na = 0;
    a[na++] = s_tensor(&s, vk, rank, d, data);
    if (form == 1) a[na++] = s_int(&s, dl[0]);
    if (form == 2) a[na++] = dims_mode == 2 ? s_null(&s) : s_list(&s, nd, dl);
    if (form) a[na++] = s_bool(&s, keep);
    a[na++] = s_tensor(&s, VK_BOOL, orank, od, NULL);
    static const char *ops[2][3] = {{"aten.any.default", "aten.any.dim", "aten.any.dims"},
                                    {"aten.all.default", "aten.all.dim", "aten.all.dims"}};
    char what[160];
    snprintf(what, sizeof what, "%s %s rank %d, %d dims listed%s, keepdim %d", ops[is_all][form], vk_name(vk), rank, nd,
             form == 2 && dims_mode == 2 ? " (None)" : "", keep);
    wgml_status st = s_call(&s, ops[is_all][form], a, na);
    double *got = st ? NULL : s_read(&s, a[na - 1]);
    if (!th_check(got != NULL, "%s: builds and runs%s%s", what, st ? ": " : "", st ? wgml_last_error(T.ctx) : "")) goto out;
    int64_t on = s_numel(&s, a[na - 1]), bad = 0;
    for (int64_t i = 0; i < on; i++) bad += got[i] != ref[i];
    th_check(bad == 0, "%s: %lld outputs, %lld differ from the reference", what, (long long)on, (long long)bad);
out:
    free(got), free(data), free(x), free(ref);
}

/* ---- cumsum ------------------------------------------------------------------------------- */

static void cumsum_case(int64_t force_len) {
    int rank = force_len ? 1 : (int)irand(0, 4), vk = (int[]){VK_FLOAT32, VK_INT64, VK_BOOL}[irand(0, 2)];
    int64_t d[WGML_MAX_RANK], n = 1, st[WGML_MAX_RANK] = {0};
    for (int i = 0; i < rank; i++) d[i] = force_len ? force_len : irand(1, i == rank - 1 ? 40 : 5), n *= d[i];
    int k = rank ? (int)irand(0, rank - 1) : 0;
    int64_t dim = th_uniform(0, 1) < 0.5 ? k : k - (rank ? rank : 1);
    /* PyTorch: a float input sums to float, int and bool to int64, unless dtype says */
    int out_vk = vk == VK_FLOAT32 || th_uniform(0, 1) < 0.3 ? VK_FLOAT32 : VK_INT64;
    void *data = malloc((size_t)n * 4);
    double *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)n * sizeof *ref);
    fill(vk, n, 0.3, data, x);
    for (int64_t i = 0; i < n; i++)
        if (isnan(x[i])) x[i] = 0.5, ((float *)data)[i] = 0.5f; /* NaN propagation is the matmul's */
    strides(rank, d, st);
    int64_t len = rank ? d[k] : 1, step = rank ? st[k] : 1;
    double *mag = malloc((size_t)n * sizeof *mag); /* the running sum of |x|, for the tolerance */
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = (i / step) % len;
        ref[i] = pos ? ref[i - step] + x[i] : x[i];
        mag[i] = pos ? mag[i - step] + fabs(x[i]) : fabs(x[i]);
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t a[4] = {s_tensor(&s, vk, rank, d, data), s_int(&s, dim),
                    out_vk != VK_FLOAT32 || vk == VK_FLOAT32 ? s_null(&s) : s_int(&s, 6), 0};
    a[3] = s_tensor(&s, out_vk, rank, d, NULL);
    char what[128];
    snprintf(what, sizeof what, "aten.cumsum.default %s -> %s rank %d dim %lld (length %lld)", vk_name(vk),
             vk_name(out_vk), rank, (long long)dim, (long long)len);
    wgml_status s_ = s_call(&s, "aten.cumsum.default", a, 4);
    double *got = s_ ? NULL : s_read(&s, a[3]);
    if (th_check(got != NULL, "%s: builds and runs%s%s", what, s_ ? ": " : "", s_ ? wgml_last_error(T.ctx) : "")) {
        /* an f32 dot product of the row with a column of ones: its rounding error is bounded by
         * (terms)·2^-24·Σ|x|; 1e-6·Σ|x| (17 ulps of the magnitude) is far above what blocked
         * sums reach and far below a wrong term (>= 1e-3 here); integers are exact */
        int64_t bad = 0, at = 0;
        for (int64_t i = 0; i < n; i++) {
            double tol = vk == VK_FLOAT32 ? 1e-6 * mag[i] : 0;
            if (!(fabs(got[i] - ref[i]) <= tol) && bad++ == 0) at = i;
        }
        th_check(bad == 0, "%s: %lld elements, %lld off (first at %lld: got %.9g, want %.9g)", what, (long long)n,
                 (long long)bad, (long long)at, got[at], ref[at]);
    }
    free(got), free(data), free(x), free(ref), free(mag);
}

/* ---- edge cases and refusals -------------------------------------------------------------- */

/* A [2, 3] float32 input in a fresh set of slots. */
static int32_t x23(slots *s) {
    static const float x6[6] = {1, 0, 2, 0, 0, 3};
    s_init(s, T.ctx, T.g);
    return s_tensor(s, VK_FLOAT32, 2, (int64_t[]){2, 3}, x6);
}

static void refused(slots *s, const char *op, const int32_t *args, int nargs, wgml_status want, const char *msg) {
    wgml_status st = s_call(s, op, args, nargs);
    th_expect_error(op, st != WGML_OK, want, op, msg, NULL);
}

static void edge_cases(void) {
    slots s;
    int64_t d2[1] = {2}, d1[1] = {1}, d23[2] = {2, 3}, twice[2] = {1, -1};
    int32_t x;
    x = x23(&s);
    refused(&s, "aten.any.dim", (int32_t[]){x, s_int(&s, 2), s_bool(&s, 0), s_tensor(&s, VK_BOOL, 1, d2, NULL)}, 4,
            WGML_ERR_ARG, "dim out of range");
    x = x23(&s);
    refused(&s, "aten.all.dims", (int32_t[]){x, s_list(&s, 2, twice), s_bool(&s, 0), s_tensor(&s, VK_BOOL, 1, d2, NULL)}, 4,
            WGML_ERR_ARG, "a dim appears twice");
    x = x23(&s);
    refused(&s, "aten.all.dim", (int32_t[]){x, s_int(&s, 1), s_bool(&s, 0), s_tensor(&s, VK_BOOL, 1, d1, NULL)}, 4,
            WGML_ERR_SHAPE, "output shape [2], the program says [1]");
    x = x23(&s);
    refused(&s, "aten.any.dim", (int32_t[]){x, s_null(&s), s_bool(&s, 0), s_tensor(&s, VK_BOOL, 1, d2, NULL)}, 4,
            WGML_ERR_ARG, "expected an integer dim");
    x = x23(&s);
    refused(&s, "aten.any.default", (int32_t[]){x, s_tensor(&s, VK_FLOAT32, 0, d1, NULL)}, 2, WGML_ERR_DTYPE,
            "output is bool, the program says float32");
    x = x23(&s);
    refused(&s, "aten.any.dims", (int32_t[]){x, s_bool(&s, 0), s_tensor(&s, VK_BOOL, 0, d1, NULL)}, 3, WGML_ERR_ARG,
            "3 arguments, expected 4");
    x = x23(&s);
    refused(&s, "aten.cumsum.default", (int32_t[]){x, s_int(&s, -3), s_null(&s), s_tensor(&s, VK_FLOAT32, 2, d23, NULL)}, 4,
            WGML_ERR_ARG, "dim out of range");
    {
        int64_t dl[1] = {MAXN + 1};
        float *z = calloc(MAXN + 1, sizeof *z);
        s_init(&s, T.ctx, T.g);
        int32_t in = s_tensor(&s, VK_FLOAT32, 1, dl, z);
        refused(&s, "aten.cumsum.default", (int32_t[]){in, s_int(&s, 0), s_null(&s), s_tensor(&s, VK_FLOAT32, 1, dl, NULL)}, 4,
                WGML_ERR_UNSUPPORTED, "longer than 4096");
        free(z);
    }
    /* PyTorch's out-variant names: any.out is any.dim's, any.all_out any.default's; any.dims_out
     * follows the rule (any.dims) and is not listed */
    const char *m1 = prog_op_find_out("aten.any.out"), *m2 = prog_op_find_out("aten.any.all_out");
    th_check(m1 && !strcmp(m1, "aten.any.dim") && m2 && !strcmp(m2, "aten.any.default") && !prog_op_find_out("aten.any.dims_out"),
             "out variants: aten.any.out -> %s, aten.any.all_out -> %s", m1 ? m1 : "(none)", m2 ? m2 : "(none)");
}

int main(int argc, char **argv) {
    th_init_args("program_reduce", argc, argv);
    for (int rep = 0; rep < 4; rep++)
        for (int is_all = 0; is_all < 2; is_all++) {
            any_case(is_all, 0, 0);
            any_case(is_all, 1, 0);
            for (int m = 0; m < 3; m++) any_case(is_all, 2, m);
        }
    for (int rep = 0; rep < 12; rep++) cumsum_case(0);
    cumsum_case(MAXN); /* the longest dim taken */
    edge_cases();
    return th_done();
}
