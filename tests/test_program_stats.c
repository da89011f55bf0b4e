/* The op registry's statistics (src/program/ops_reduce.c: var.correction, var.dim,
 * var_mean.correction, max.dim/min.dim with their indices, max/min of every element, the batch
 * norm of the batch's own statistics, amax/amin/argmax/argmin of int and bool tensors;
 * src/program/ops_norm.c: native_layer_norm over several trailing dims) called as the program runner
 * calls them, on the GPU, against float64 references written here from PyTorch's definitions,
 * with fresh random shapes, dims, corrections, keepdim and inputs each run (WGML_SEED repeats
 * one), NaN-poisoned outputs; then the refusals, each a clear error naming the operator. */
#include "harness.h"
#include "program_slots.h"

#include <stdio.h>

static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)floor(th_uniform(0, 1) * (double)(hi - lo + 1) - 1e-12); }
static const char *vk_name(int vk) { return vk == VK_BOOL ? "bool" : vk == VK_FLOAT32 ? "float32" : "int64"; }

/* n random values of dtype vk in wgml's layout (float: [-2, 2] with NaN now and then when
 * nan), as doubles into ref. */
static void *fill(int vk, int64_t n, int nan, double *ref) {
    unsigned char *data = malloc((size_t)n * 4 + 4);
    for (int64_t i = 0; i < n; i++) {
        double v = vk == VK_FLOAT32 ? (double)(float)th_uniform(-2, 2) : vk == VK_BOOL ? (double)irand(0, 1) : (double)irand(-50, 50);
        if (vk == VK_FLOAT32 && nan && th_uniform(0, 1) < 0.04) v = NAN;
        if (vk == VK_FLOAT32) ((float *)data)[i] = (float)v;
        else if (vk == VK_BOOL) data[i] = (unsigned char)v;
        else ((int32_t *)data)[i] = (int32_t)v;
        ref[i] = v;
    }
    return data;
}

/* The output offset of input element i (coordinates of dims d) when the dims red[] are reduced
 * (kept as 1s: the offset is the same with or without keepdim). */
static int64_t out_index(int rank, const int64_t *d, const int *red, int64_t i) {
    int64_t o = 0, c[WGML_MAX_RANK];
    for (int k = rank - 1; k >= 0; k--) c[k] = i % d[k], i /= d[k];
    for (int k = 0; k < rank; k++) o = o * (red[k] ? 1 : d[k]) + (red[k] ? 0 : c[k]);
    return o;
}

/* Compares output slot id with ref: equal (infinities too) or |got − ref| <= tol·(1 + |ref|), NaN
 * only where ref is. */
static void compare(slots *s, int32_t id, const double *ref, double tol, const char *what) {
    double *got = s_read(s, id);
    if (!th_check(got != NULL, "%s: read back", what)) return;
    int64_t n = s_numel(s, id), bad = 0, at = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok = isnan(ref[i]) ? isnan(got[i]) : got[i] == ref[i] || fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i]));
        if (!isnan(ref[i]) && got[i] != ref[i]) worst = th_max_err(worst, fabs(got[i] - ref[i]));
        if (!ok && bad++ == 0) at = i;
    }
    th_check(bad == 0, "%s: %lld elements, %lld off, max abs err %.2e%s", what, (long long)n, (long long)bad, worst, bad ? " (first below)" : "");
    if (bad) printf("     element %lld: got %.9g, want %.9g\n", (long long)at, got[at], ref[at]);
    free(got);
}

static int built(slots *s, const char *op, const int32_t *a, int na, const char *what) {
    wgml_status st = s_call(s, op, a, na);
    return th_check(st == WGML_OK, "%s: builds%s%s", what, st ? ": " : "", st ? wgml_last_error(T.ctx) : "");
}

/* ---- var ---------------------------------------------------------------------------------- */

/* form 0: var.correction, 1: var.dim (unbiased), 2: var_mean.correction */
static void var_case(int form) {
    int rank = (int)irand(0, 4), red[WGML_MAX_RANK] = {0}, nd = 0, keep = (int)irand(0, 1), mode = (int)irand(0, 3);
    int64_t d[WGML_MAX_RANK], dl[WGML_MAX_RANK], n = 1, od[WGML_MAX_RANK], on = 1, cnt = 1;
    for (int i = 0; i < rank; i++) d[i] = irand(1, 6), n *= d[i];
    for (int i = 0; i < rank; i++) /* mode 0: a random subset; 1: None; 2: []; 3: one dim */
        if (mode == 0 ? th_uniform(0, 1) < 0.5 : mode == 3 ? i == rank - 1 : 1) red[i] = 1, dl[nd++] = th_uniform(0, 1) < 0.5 ? i : i - rank;
    if (mode == 0 && nd == 0) mode = 2; /* an empty subset: every dim, as [] */
    if (mode == 1 || mode == 2) for (int i = 0; i < rank; i++) red[i] = 1;
    int orank = 0;
    for (int i = 0; i < rank; i++) {
        if (red[i]) cnt *= d[i];
        if (!red[i] || keep) od[orank++] = red[i] ? 1 : d[i], on *= red[i] ? 1 : d[i];
    }
    double corr = form == 1 ? (double)irand(0, 1) : (double)irand(0, 3) * (th_uniform(0, 1) < 0.2 ? 0.5 : 1.0);
    double *x = malloc((size_t)n * sizeof *x), *m = calloc((size_t)on, sizeof *m), *v = calloc((size_t)on, sizeof *v);
    void *data = fill(VK_FLOAT32, n, 0, x);
    for (int64_t i = 0; i < n; i++) m[out_index(rank, d, red, i)] += x[i] / (double)cnt;
    for (int64_t i = 0; i < n; i++) {
        int64_t o = out_index(rank, d, red, i);
        v[o] += (x[i] - m[o]) * (x[i] - m[o]);
    }
    double div = (double)cnt - corr;
    for (int64_t o = 0; o < on; o++) v[o] = div > 0 ? v[o] / div : v[o] == 0 ? NAN : INFINITY;
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t outs[2] = {s_tensor(&s, VK_FLOAT32, orank, od, NULL), s_tensor(&s, VK_FLOAT32, orank, od, NULL)};
    int32_t a[5] = {s_tensor(&s, VK_FLOAT32, rank, d, data), mode == 1 ? s_null(&s) : s_list(&s, mode == 2 ? 0 : nd, dl),
                    form == 1 ? s_bool(&s, corr != 0) : corr == 1 && th_uniform(0, 1) < 0.3 ? s_null(&s) : s_double(&s, corr),
                    s_bool(&s, keep), form == 2 ? s_vlist(&s, 2, outs) : outs[0]};
    const char *op = form == 0 ? "aten.var.correction" : form == 1 ? "aten.var.dim" : "aten.var_mean.correction";
    char what[160];
    snprintf(what, sizeof what, "%s rank %d, %s, correction %g, keepdim %d (%lld elements each)", op, rank,
             mode == 1 ? "dim None" : mode == 2 ? "dim []" : "dims listed", corr, keep, (long long)cnt);
    if (built(&s, op, a, 5, what)) {
        compare(&s, outs[0], v, 1e-5, what); /* a two-pass f32 variance of <= 1296 terms in [-2, 2] */
        if (form == 2) compare(&s, outs[1], m, 1e-6, what);
    }
    free(x), free(m), free(v), free(data);
}

/* ---- max / min ---------------------------------------------------------------------------- */

static void extreme_case(int is_min, int along) {
    int rank = (int)irand(0, 4), vk = (int[]){VK_FLOAT32, VK_INT64, VK_BOOL}[irand(0, 2)];
    int64_t d[WGML_MAX_RANK], n = 1, od[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = irand(1, 6), n *= d[i];
    int k = rank ? (int)irand(0, rank - 1) : 0, keep = along ? (int)irand(0, 1) : 0, red[WGML_MAX_RANK] = {0}, orank = 0;
    for (int i = 0; i < rank; i++) red[i] = along ? i == k : 1;
    for (int i = 0; i < rank; i++)
        if (!red[i] || keep) od[orank++] = red[i] ? 1 : d[i];
    int64_t on = 1;
    for (int i = 0; i < orank; i++) on *= od[i];
    double *x = malloc((size_t)n * sizeof *x), *val = malloc((size_t)on * sizeof *val), *idx = malloc((size_t)on * sizeof *idx);
    void *data = fill(vk, n, 1, x);
    int64_t st = 1;
    for (int i = rank - 1; i > k; i--) st *= d[i];
    for (int64_t o = 0; o < on; o++) val[o] = NAN, idx[o] = -1;
    for (int64_t i = 0; i < n; i++) { /* the first extreme, a NaN beating everything */
        int64_t o = out_index(rank, d, red, i), pos = rank ? (i / st) % d[k] : 0;
        double cur = val[o];
        int take = idx[o] < 0 || (!isnan(cur) && (isnan(x[i]) || (is_min ? x[i] < cur : x[i] > cur)));
        if (take) val[o] = x[i], idx[o] = (double)pos;
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t outs[2] = {s_tensor(&s, vk, orank, od, NULL), s_tensor(&s, VK_INT64, orank, od, NULL)};
    int32_t in = s_tensor(&s, vk, rank, d, data);
    int32_t a[4] = {in, s_int(&s, th_uniform(0, 1) < 0.5 || !rank ? k : k - rank), s_bool(&s, keep), s_vlist(&s, 2, outs)};
    int32_t a1[2] = {in, outs[0]};
    const char *op = along ? (is_min ? "aten.min.dim" : "aten.max.dim") : (is_min ? "aten.min.default" : "aten.max.default");
    char what[128];
    snprintf(what, sizeof what, "%s %s rank %d dim %d keepdim %d", op, vk_name(vk), rank, k, keep);
    if (built(&s, op, along ? a : a1, along ? 4 : 2, what)) {
        compare(&s, outs[0], val, 0, what);
        if (along) compare(&s, outs[1], idx, 0, what);
    }
    free(x), free(val), free(idx), free(data);
}

/* amax/amin (self, dims, keepdim) and argmax/argmin (self, dim, keepdim) of int and bool
 * tensors (through f32, exact to 2^24). */
static void int_extreme_case(int is_min, int arg) {
    int vk = irand(0, 1) ? VK_INT64 : VK_BOOL, keep = (int)irand(0, 1);
    int64_t d[2] = {irand(1, 5), irand(1, 6)}, n = d[0] * d[1], od[2] = {d[0], 1};
    double *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)d[0] * sizeof *ref);
    void *data = fill(vk, n, 0, x);
    for (int64_t r = 0; r < d[0]; r++) {
        int64_t best = 0;
        for (int64_t c = 1; c < d[1]; c++)
            if (is_min ? x[r * d[1] + c] < x[r * d[1] + best] : x[r * d[1] + c] > x[r * d[1] + best]) best = c;
        ref[r] = arg ? (double)best : x[r * d[1] + best];
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int64_t one = 1;
    int32_t a[4] = {s_tensor(&s, vk, 2, d, data), arg ? s_int(&s, 1) : s_list(&s, 1, &one), s_bool(&s, keep), 0};
    a[3] = s_tensor(&s, arg ? VK_INT64 : vk, keep ? 2 : 1, od, NULL);
    const char *op = arg ? (is_min ? "aten.argmin.default" : "aten.argmax.default") : (is_min ? "aten.amin.default" : "aten.amax.default");
    char what[96];
    snprintf(what, sizeof what, "%s of %s [%lld, %lld] keepdim %d", op, vk_name(vk), (long long)d[0], (long long)d[1], keep);
    if (built(&s, op, a, 4, what)) compare(&s, a[3], ref, 0, what);
    free(x), free(ref), free(data);
}

/* ---- norms -------------------------------------------------------------------------------- */

/* _native_batch_norm_legit.no_stats(x [N, C, *], w?, b?, training, momentum, eps) */
static void batch_norm_case(void) {
    int rank = (int)irand(2, 4), has_w = (int)irand(0, 1), has_b = (int)irand(0, 1);
    int64_t d[4] = {irand(1, 3), irand(1, 4), irand(1, 5), irand(1, 5)}, n = 1, c = d[1], cd[1] = {d[1]};
    for (int i = 0; i < rank; i++) n *= d[i];
    int64_t per = n / c, inner = n / (d[0] * c);
    double eps = 1e-5, *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)n * sizeof *ref), *w, *bb;
    double *m = calloc((size_t)c, sizeof *m), *is = calloc((size_t)c, sizeof *is);
    void *data = fill(VK_FLOAT32, n, 0, x);
    float *fw = th_random((size_t)c, 0.5, 1.5), *fb = th_random((size_t)c, -1, 1);
    w = malloc((size_t)c * sizeof *w), bb = malloc((size_t)c * sizeof *bb);
    for (int64_t k = 0; k < c; k++) w[k] = has_w ? fw[k] : 1, bb[k] = has_b ? fb[k] : 0;
    for (int64_t i = 0; i < n; i++) m[(i / inner) % c] += x[i] / (double)per;
    for (int64_t i = 0; i < n; i++) is[(i / inner) % c] += (x[i] - m[(i / inner) % c]) * (x[i] - m[(i / inner) % c]) / (double)per;
    for (int64_t k = 0; k < c; k++) is[k] = 1 / sqrt(is[k] + eps);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = (i / inner) % c;
        ref[i] = (x[i] - m[k]) * is[k] * w[k] + bb[k];
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t outs[3] = {s_tensor(&s, VK_FLOAT32, rank, d, NULL), s_tensor(&s, VK_FLOAT32, 1, cd, NULL), s_tensor(&s, VK_FLOAT32, 1, cd, NULL)};
    int32_t a[7] = {s_tensor(&s, VK_FLOAT32, rank, d, data), has_w ? s_tensor(&s, VK_FLOAT32, 1, cd, fw) : s_null(&s),
                    has_b ? s_tensor(&s, VK_FLOAT32, 1, cd, fb) : s_null(&s), s_bool(&s, 1), s_double(&s, 0.1),
                    s_double(&s, eps), 0};
    a[6] = s_vlist(&s, 3, outs);
    char what[128];
    snprintf(what, sizeof what, "aten._native_batch_norm_legit.no_stats [%lld, %lld, ..] rank %d, weight %d, bias %d",
             (long long)d[0], (long long)c, rank, has_w, has_b);
    if (built(&s, "aten._native_batch_norm_legit.no_stats", a, 7, what)) {
        compare(&s, outs[0], ref, 2e-5, what);
        compare(&s, outs[1], m, 1e-6, what);
        compare(&s, outs[2], is, 2e-5, what);
    }
    free(x), free(ref), free(w), free(bb), free(m), free(is), free(data), free(fw), free(fb);
}

/* native_layer_norm over the last k dims of x (k >= 2: the trailing dims as one row) */
static void layer_norm_case(void) {
    int rank = (int)irand(2, 4), k = (int)irand(2, rank);
    int64_t d[4], n = 1, row = 1, md[4];
    for (int i = 0; i < rank; i++) d[i] = irand(1, 5), n *= d[i];
    for (int i = rank - k; i < rank; i++) row *= d[i];
    for (int i = 0; i < rank; i++) md[i] = i < rank - k ? d[i] : 1;
    double *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)n * sizeof *ref), *m = calloc((size_t)(n / row), sizeof *m);
    double *rs = calloc((size_t)(n / row), sizeof *rs);
    void *data = fill(VK_FLOAT32, n, 0, x);
    float *fw = th_random((size_t)row, 0.5, 1.5), *fb = th_random((size_t)row, -1, 1);
    for (int64_t i = 0; i < n; i++) m[i / row] += x[i] / (double)row;
    for (int64_t i = 0; i < n; i++) rs[i / row] += (x[i] - m[i / row]) * (x[i] - m[i / row]) / (double)row;
    for (int64_t r = 0; r < n / row; r++) rs[r] = 1 / sqrt(rs[r] + 1e-5);
    for (int64_t i = 0; i < n; i++) ref[i] = (x[i] - m[i / row]) * rs[i / row] * fw[i % row] + fb[i % row];
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t outs[3] = {s_tensor(&s, VK_FLOAT32, rank, d, NULL), s_tensor(&s, VK_FLOAT32, rank, md, NULL), s_tensor(&s, VK_FLOAT32, rank, md, NULL)};
    int32_t list = s_vlist(&s, 3, outs);
    int32_t a[6] = {s_tensor(&s, VK_FLOAT32, rank, d, data), s_list(&s, k, d + rank - k), s_tensor(&s, VK_FLOAT32, k, d + rank - k, fw),
                    s_tensor(&s, VK_FLOAT32, k, d + rank - k, fb), s_double(&s, 1e-5), list};
    char what[96];
    snprintf(what, sizeof what, "aten.native_layer_norm.default over the last %d of %d dims", k, rank);
    if (built(&s, "aten.native_layer_norm.default", a, 6, what)) {
        compare(&s, outs[0], ref, 2e-5, what);
        compare(&s, outs[1], m, 1e-6, what);
        compare(&s, outs[2], rs, 2e-5, what);
    }
    free(x), free(ref), free(m), free(rs), free(data), free(fw), free(fb);
}

/* ---- refusals ----------------------------------------------------------------------------- */

static void refused(slots *s, const char *op, const int32_t *args, int nargs, wgml_status want, const char *msg) {
    wgml_status st = s_call(s, op, args, nargs);
    th_expect_error(op, st != WGML_OK, want, op, msg, NULL);
}

/* A ValueList of output slots: values (dtype vk) and int64 indices of dims d (rank r). */
static int32_t value_index_outs(slots *s, int vk, int r, const int64_t *d) {
    return s_vlist(s, 2, (int32_t[]){s_tensor(s, vk, r, d, NULL), s_tensor(s, VK_INT64, r, d, NULL)});
}

/* A norm's output list: out [2, 3] and two [3] statistics. */
static int32_t norm_outs(slots *s) {
    int64_t d23[2] = {2, 3}, d3[1] = {3};
    return s_vlist(s, 3, (int32_t[]){s_tensor(s, VK_FLOAT32, 2, d23, NULL), s_tensor(s, VK_FLOAT32, 1, d3, NULL),
                                     s_tensor(s, VK_FLOAT32, 1, d3, NULL)});
}

static void edge_cases(void) {
    static const float x6[6] = {1, 0, 2, 0, 0, 3};
    static const int32_t i6[6] = {1, 0, 2, 0, 0, 3};
    int64_t d23[2] = {2, 3}, d2[1] = {2}, d3[1] = {3}, twice[2] = {0, -2}, ns[2] = {3, 2};
    slots s;
    int32_t x;
#define X(vk, data) (s_init(&s, T.ctx, T.g), x = s_tensor(&s, vk, 2, d23, data))
#define SCALAR_OUT s_tensor(&s, VK_FLOAT32, 0, d2, NULL)
    X(VK_INT64, i6);
    refused(&s, "aten.var.correction", (int32_t[]){x, s_null(&s), s_null(&s), s_bool(&s, 0), SCALAR_OUT}, 5, WGML_ERR_DTYPE,
            "var takes a float tensor");
    X(VK_FLOAT32, x6);
    refused(&s, "aten.var.correction", (int32_t[]){x, s_list(&s, 2, twice), s_null(&s), s_bool(&s, 0), SCALAR_OUT}, 5,
            WGML_ERR_ARG, "a dim appears twice");
    X(VK_FLOAT32, x6);
    refused(&s, "aten.max.dim", (int32_t[]){x, s_int(&s, 2), s_bool(&s, 0), value_index_outs(&s, VK_FLOAT32, 1, d2)}, 4,
            WGML_ERR_ARG, "dim out of range");
    X(VK_FLOAT32, x6);
    refused(&s, "aten.min.dim", (int32_t[]){x, s_int(&s, 1), s_bool(&s, 0), s_vlist(&s, 1, (int32_t[]){SCALAR_OUT})}, 4,
            WGML_ERR_ARG, "expected 2 outputs");
    X(VK_FLOAT32, x6);
    refused(&s, "aten.max.dim", (int32_t[]){x, s_int(&s, 1), s_bool(&s, 0), value_index_outs(&s, VK_FLOAT32, 1, d3)}, 4,
            WGML_ERR_SHAPE, "output shape [2], the program says [3]");
    X(VK_FLOAT32, x6);
    refused(&s, "aten._native_batch_norm_legit.no_stats",
            (int32_t[]){x, s_null(&s), s_null(&s), s_bool(&s, 0), s_double(&s, 0.1), s_double(&s, 1e-5), norm_outs(&s)}, 7,
            WGML_ERR_ARG, "without running statistics the norm needs training");
    X(VK_FLOAT32, x6);
    refused(&s, "aten._native_batch_norm_legit.no_stats",
            (int32_t[]){x, s_tensor(&s, VK_FLOAT32, 1, d2, x6), s_null(&s), s_bool(&s, 1), s_double(&s, 0.1), s_double(&s, 1e-5),
                        norm_outs(&s)}, 7,
            WGML_ERR_SHAPE, "weight and bias must have C elements");
    X(VK_FLOAT32, x6);
    refused(&s, "aten.native_layer_norm.default",
            (int32_t[]){x, s_list(&s, 2, ns), s_null(&s), s_null(&s), s_double(&s, 1e-5), norm_outs(&s)}, 6, WGML_ERR_SHAPE,
            "normalized_shape is not x's trailing dims");
#undef SCALAR_OUT
#undef X
}

int main(int argc, char **argv) {
    th_init_args("program_stats", argc, argv);
    for (int rep = 0; rep < 5; rep++)
        for (int form = 0; form < 3; form++) var_case(form);
    for (int rep = 0; rep < 4; rep++)
        for (int is_min = 0; is_min < 2; is_min++) extreme_case(is_min, 1), extreme_case(is_min, 0);
    for (int rep = 0; rep < 2; rep++)
        for (int is_min = 0; is_min < 2; is_min++) int_extreme_case(is_min, 0), int_extreme_case(is_min, 1);
    for (int rep = 0; rep < 6; rep++) batch_norm_case();
    for (int rep = 0; rep < 4; rep++) layer_norm_case();
    edge_cases();
    return th_done();
}
