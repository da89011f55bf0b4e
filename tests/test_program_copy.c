/* The op registry's rearranging copies (src/program/ops_copy.c: as_strided_copy,
 * diagonal_copy, unfold_copy and constant_pad_nd) called as the program runner calls them, on
 * the GPU, against references written here from PyTorch's definitions (an element of the
 * output is storage[offset + Σ i·stride], a diagonal's or a window's element, the input's
 * element shifted by the pads, or the pad value), with fresh random shapes, strides, offsets,
 * pads (negative ones crop) and inputs of every dtype wgml computes (float32, int, bool) each
 * run (WGML_SEED repeats one), NaN-poisoned outputs; then the refusals (out of bounds, negative
 * strides, empty diagonals, odd pad lists, a padded size below 1), each a clear error naming
 * the operator. Also the argument rule every builder shares (src/program/ops_args.h): an integer
 * argument may come as a Double of an integral value (the Vulkan serialiser's shared scalars),
 * and a non-integral one is refused. */
#include "harness.h"
#include "program_slots.h"

#include <stdio.h>

static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)floor(th_uniform(0, 1) * (double)(hi - lo + 1) - 1e-12); }

static const int DTYPES[3] = {VK_FLOAT32, VK_INT64, VK_BOOL};
static const char *vk_name(int vk) { return vk == VK_BOOL ? "bool" : vk == VK_FLOAT32 ? "float32" : "int64"; }

/* n random elements of dtype vk in wgml's layout; ref gets them as doubles. */
static void *fill(int vk, int64_t n, double *ref) {
    unsigned char *data = malloc((size_t)n * 4 + 4);
    for (int64_t i = 0; i < n; i++) {
        double v = vk == VK_FLOAT32 ? (double)(float)th_uniform(-3, 3) : vk == VK_BOOL ? (double)irand(0, 1) : (double)irand(-1000, 1000);
        if (vk == VK_FLOAT32) ((float *)data)[i] = (float)v;
        else if (vk == VK_BOOL) data[i] = (unsigned char)v;
        else ((int32_t *)data)[i] = (int32_t)v;
        ref[i] = v;
    }
    return data;
}

/* Builds op and compares output slot `out` with ref exactly (copies do not round). */
static void run_exact(slots *s, const char *op, const int32_t *args, int nargs, const double *ref, const char *what) {
    wgml_status st = s_call(s, op, args, nargs);
    double *got = st ? NULL : s_read(s, args[nargs - 1]);
    if (!th_check(got != NULL, "%s: builds and runs%s%s", what, st ? ": " : "", st ? wgml_last_error(T.ctx) : "")) return;
    int64_t n = s_numel(s, args[nargs - 1]), bad = 0, at = -1;
    for (int64_t i = 0; i < n; i++)
        if (!(got[i] == ref[i]) && bad++ == 0) at = i;
    th_check(bad == 0, "%s: %lld elements, %lld differ%s", what, (long long)n, (long long)bad, bad ? " (first shown below)" : "");
    if (bad) printf("     element %lld: got %g, want %g\n", (long long)at, got[at], ref[at]);
    free(got);
}

/* ---- as_strided_copy ---------------------------------------------------------------------- */

static void as_strided_case(int identity) {
    int vk = DTYPES[irand(0, 2)], rank = (int)irand(0, 4);
    int64_t size[WGML_MAX_RANK], stride[WGML_MAX_RANK], numel = 1, extent = 0, off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        size[d] = irand(1, 5);
        stride[d] = identity ? numel : irand(0, 4);
        numel *= size[d], extent += (size[d] - 1) * stride[d];
    }
    int64_t storage = identity ? numel : extent + 1 + irand(0, 6), in_dims[2] = {1, storage};
    if (!identity) off = irand(0, storage - 1 - extent);
    if (storage % 2 == 0) in_dims[0] = 2, in_dims[1] = storage / 2; /* the input's own shape does not matter */
    double *x = malloc((size_t)storage * sizeof *x), *ref = malloc((size_t)numel * sizeof *ref);
    void *data = fill(vk, storage, x);
    for (int64_t i = 0; i < numel; i++) {
        int64_t r = i, at = off;
        for (int d = rank - 1; d >= 0; d--) at += (r % size[d]) * stride[d], r /= size[d];
        ref[i] = x[at];
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t a[5] = {s_tensor(&s, vk, 2, in_dims, data), s_list(&s, rank, size), s_list(&s, rank, stride),
                    off || th_uniform(0, 1) < 0.5 ? s_int(&s, off) : s_null(&s), 0};
    a[4] = s_tensor(&s, vk, rank, size, NULL);
    char what[160];
    snprintf(what, sizeof what, "aten.as_strided_copy.default %s storage %lld, rank %d, offset %lld%s", vk_name(vk),
             (long long)storage, rank, (long long)off, identity ? " (the identity: a view)" : "");
    run_exact(&s, "aten.as_strided_copy.default", a, 5, ref, what);
    free(x), free(ref), free(data);
}

/* ---- constant_pad_nd ---------------------------------------------------------------------- */

static void pad_case(void) {
    int vk = DTYPES[irand(0, 2)], rank = (int)irand(1, 4), np = (int)irand(1, rank);
    int64_t in[WGML_MAX_RANK], out[WGML_MAX_RANK], pad[2 * WGML_MAX_RANK], n_in = 1, n_out = 1;
    for (int d = 0; d < rank; d++) in[d] = irand(1, 5), out[d] = in[d];
    for (int k = 0; k < np; k++) {
        int d = rank - 1 - k;
        do pad[2 * k] = irand(-2, 3), pad[2 * k + 1] = irand(-2, 3);
        while (in[d] + pad[2 * k] + pad[2 * k + 1] < 1);
        out[d] = in[d] + pad[2 * k] + pad[2 * k + 1];
    }
    for (int d = 0; d < rank; d++) n_in *= in[d], n_out *= out[d];
    double value = vk == VK_FLOAT32 ? th_uniform(-5, 5) : (double)irand(-4, 4), v_as;
    v_as = vk == VK_BOOL ? value != 0 : vk == VK_INT64 ? trunc(value) : (double)(float)value;
    double *x = malloc((size_t)n_in * sizeof *x), *ref = malloc((size_t)n_out * sizeof *ref);
    void *data = fill(vk, n_in, x);
    for (int64_t o = 0; o < n_out; o++) { /* out[c] = x[c − before] inside x, the value outside */
        int64_t r = o, src = 0, mul = 1, inside = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int k = rank - 1 - d;
            int64_t c = r % out[d] - (k < np ? pad[2 * k] : 0);
            r /= out[d];
            inside &= c >= 0 && c < in[d];
            src += c * mul, mul *= in[d];
        }
        ref[o] = inside ? x[src] : v_as;
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t a[4] = {s_tensor(&s, vk, rank, in, data), s_list(&s, 2 * np, pad),
                    vk == VK_FLOAT32 ? s_double(&s, value) : s_int(&s, (int64_t)value), 0};
    a[3] = s_tensor(&s, vk, rank, out, NULL);
    char what[160];
    snprintf(what, sizeof what, "aten.constant_pad_nd.default %s rank %d, %d pads (last dim %lld, %lld), value %g",
             vk_name(vk), rank, 2 * np, (long long)pad[0], (long long)pad[1], v_as);
    run_exact(&s, "aten.constant_pad_nd.default", a, 4, ref, what);
    free(x), free(ref), free(data);
}

/* ---- diagonal_copy and unfold_copy --------------------------------------------------------- */

static void diagonal_case(void) {
    int vk = DTYPES[irand(0, 2)], rank = (int)irand(2, 4);
    int64_t d[4], n = 1, st[4];
    for (int i = 0; i < rank; i++) d[i] = irand(1, 5), n *= d[i];
    for (int i = rank - 1, m = 1; i >= 0; i--) st[i] = m, m *= (int)d[i];
    int d1 = (int)irand(0, rank - 1), d2;
    do d2 = (int)irand(0, rank - 1);
    while (d2 == d1);
    int64_t off, len;
    do off = irand(-3, 3), len = off >= 0 ? (d[d1] < d[d2] - off ? d[d1] : d[d2] - off) : (d[d1] + off < d[d2] ? d[d1] + off : d[d2]);
    while (len < 1);
    int64_t od[4], k = 0, onum = len;
    for (int i = 0; i < rank; i++)
        if (i != d1 && i != d2) od[k++] = d[i], onum *= d[i];
    od[k++] = len;
    double *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)onum * sizeof *ref);
    void *data = fill(vk, n, x);
    for (int64_t o = 0; o < onum; o++) { /* out[rest..., j] = x[.., d1: j + max(0, −off), d2: j + max(0, off)] */
        int64_t r = o, j = r % len, at = 0;
        r /= len;
        for (int i = rank - 1; i >= 0; i--)
            if (i != d1 && i != d2) at += (r % d[i]) * st[i], r /= d[i];
        at += (j + (off < 0 ? -off : 0)) * st[d1] + (j + (off > 0 ? off : 0)) * st[d2];
        ref[o] = x[at];
    }
    slots sl;
    s_init(&sl, T.ctx, T.g);
    int32_t a[5] = {s_tensor(&sl, vk, rank, d, data), s_int(&sl, off), s_int(&sl, th_uniform(0, 1) < 0.5 ? d1 : d1 - rank),
                    s_int(&sl, d2), 0};
    a[4] = s_tensor(&sl, vk, (int)k, od, NULL);
    char what[128];
    snprintf(what, sizeof what, "aten.diagonal_copy.default %s rank %d offset %lld dims (%d, %d)", vk_name(vk), rank, (long long)off, d1, d2);
    run_exact(&sl, "aten.diagonal_copy.default", a, 5, ref, what);
    free(x), free(ref), free(data);
}

static void unfold_case(void) {
    int vk = DTYPES[irand(0, 2)], rank = (int)irand(0, 3);
    int64_t d[4], n = 1;
    for (int i = 0; i < rank; i++) d[i] = irand(1, 7), n *= d[i];
    int dim = rank ? (int)irand(0, rank - 1) : 0;
    int64_t len = rank ? d[dim] : 1, size = irand(1, len), step = irand(1, 3), cnt = (len - size) / step + 1;
    int64_t od[5], onum = 1;
    for (int i = 0; i < rank; i++) od[i] = i == dim ? cnt : d[i], onum *= od[i];
    od[rank] = size, onum *= size;
    double *x = malloc((size_t)n * sizeof *x), *ref = malloc((size_t)onum * sizeof *ref);
    void *data = fill(vk, n, x);
    for (int64_t o = 0; o < onum; o++) { /* out[.., w, .., j] = x[.., w·step + j, ..] */
        int64_t j = o % size, r = o / size, at = 0, mul = 1;
        for (int i = rank - 1; i >= 0; i--) {
            int64_t c = r % od[i];
            r /= od[i];
            at += (i == dim ? c * step + j : c) * mul, mul *= d[i];
        }
        if (!rank) at = 0;
        ref[o] = x[at];
    }
    slots sl;
    s_init(&sl, T.ctx, T.g);
    int32_t a[5] = {s_tensor(&sl, vk, rank, d, data), s_int(&sl, dim), s_int(&sl, size), s_int(&sl, step), 0};
    a[4] = s_tensor(&sl, vk, rank + 1, od, NULL);
    char what[128];
    snprintf(what, sizeof what, "aten.unfold_copy.default %s rank %d dim %d size %lld step %lld", vk_name(vk), rank, dim,
             (long long)size, (long long)step);
    run_exact(&sl, "aten.unfold_copy.default", a, 5, ref, what);
    free(x), free(ref), free(data);
}

/* ---- refusals and the integer rule -------------------------------------------------------- */

static void refused(slots *s, const char *op, const int32_t *args, int nargs, wgml_status want, const char *msg) {
    wgml_status st = s_call(s, op, args, nargs);
    th_expect_error(op, st != WGML_OK, want, op, msg, NULL);
}

static void edge_cases(void) {
    static const float x6[6] = {1, 2, 3, 4, 5, 6};
    int64_t d23[2] = {2, 3}, d3[1] = {3}, d2[1] = {2}, d33[2] = {3, 3}, st_oob[2] = {3, 1}, st_neg[1] = {-1}, one[1] = {1};
    slots s;
    int32_t x;
#define X() (s_init(&s, T.ctx, T.g), x = s_tensor(&s, VK_FLOAT32, 2, d23, x6))
    X();
    refused(&s, "aten.as_strided_copy.default",
            (int32_t[]){x, s_list(&s, 2, d33), s_list(&s, 2, st_oob), s_null(&s), s_tensor(&s, VK_FLOAT32, 2, d33, NULL)}, 5,
            WGML_ERR_ARG, "element 8 of a storage of 6 is out of bounds");
    X();
    refused(&s, "aten.as_strided_copy.default",
            (int32_t[]){x, s_list(&s, 1, d3), s_list(&s, 1, st_neg), s_int(&s, 4), s_tensor(&s, VK_FLOAT32, 1, d3, NULL)}, 5,
            WGML_ERR_ARG, "a stride below 0");
    X();
    refused(&s, "aten.as_strided_copy.default",
            (int32_t[]){x, s_list(&s, 2, d23), s_list(&s, 1, one), s_int(&s, 0), s_tensor(&s, VK_FLOAT32, 2, d23, NULL)}, 5,
            WGML_ERR_ARG, "stride and size differ in length");
    X();
    refused(&s, "aten.as_strided_copy.default",
            (int32_t[]){x, s_list(&s, 1, d3), s_list(&s, 1, one), s_int(&s, 4), s_tensor(&s, VK_FLOAT32, 1, d3, NULL)}, 5,
            WGML_ERR_ARG, "element 6 of a storage of 6 is out of bounds");
    X();
    refused(&s, "aten.constant_pad_nd.default",
            (int32_t[]){x, s_list(&s, 3, (int64_t[]){1, 1, 1}), s_int(&s, 0), s_tensor(&s, VK_FLOAT32, 2, d23, NULL)}, 4,
            WGML_ERR_ARG, "even length");
    X();
    refused(&s, "aten.constant_pad_nd.default",
            (int32_t[]){x, s_list(&s, 6, (int64_t[]){1, 1, 1, 1, 1, 1}), s_int(&s, 0), s_tensor(&s, VK_FLOAT32, 2, d23, NULL)}, 4,
            WGML_ERR_ARG, "at most twice the rank");
    X();
    refused(&s, "aten.constant_pad_nd.default",
            (int32_t[]){x, s_list(&s, 2, (int64_t[]){-2, -1}), s_int(&s, 0), s_tensor(&s, VK_FLOAT32, 2, d23, NULL)}, 4,
            WGML_ERR_UNSUPPORTED, "a padded size below 1");
    X();
    refused(&s, "aten.constant_pad_nd.default",
            (int32_t[]){x, s_list(&s, 2, (int64_t[]){1, 0}), s_int(&s, 0), s_tensor(&s, VK_FLOAT32, 2, d23, NULL)}, 4,
            WGML_ERR_SHAPE, "output shape [2, 4], the program says [2, 3]");
    X();
    refused(&s, "aten.diagonal_copy.default", (int32_t[]){x, s_int(&s, 3), s_int(&s, 0), s_int(&s, 1), s_tensor(&s, VK_FLOAT32, 1, one, NULL)}, 5,
            WGML_ERR_UNSUPPORTED, "an empty diagonal");
    X();
    refused(&s, "aten.diagonal_copy.default", (int32_t[]){x, s_int(&s, 0), s_int(&s, 1), s_int(&s, -1), s_tensor(&s, VK_FLOAT32, 1, one, NULL)}, 5,
            WGML_ERR_ARG, "dim1 and dim2 must be two dims of x");
    X();
    refused(&s, "aten.unfold_copy.default", (int32_t[]){x, s_int(&s, 1), s_int(&s, 4), s_int(&s, 1), s_tensor(&s, VK_FLOAT32, 1, one, NULL)}, 5,
            WGML_ERR_ARG, "size must be in [1, the dim's length]");
    X();
    refused(&s, "aten.unfold_copy.default", (int32_t[]){x, s_int(&s, 1), s_int(&s, 2), s_int(&s, 0), s_tensor(&s, VK_FLOAT32, 1, one, NULL)}, 5,
            WGML_ERR_ARG, "step must be positive");
    /* select_copy(x, 0.0, 1.0): integral Doubles for the integers; then 0.5 is refused */
    X();
    int32_t a[4] = {x, s_double(&s, 0.0), s_double(&s, 1.0), s_tensor(&s, VK_FLOAT32, 1, d3, NULL)};
    run_exact(&s, "aten.select_copy.int", a, 4, (double[]){4, 5, 6}, "aten.select_copy.int with Double dim and index");
    X();
    refused(&s, "aten.select_copy.int", (int32_t[]){x, s_double(&s, 0.5), s_int(&s, 1), s_tensor(&s, VK_FLOAT32, 1, d2, NULL)}, 4,
            WGML_ERR_ARG, "argument 1: expected an integer");
#undef X
}

int main(int argc, char **argv) {
    th_init_args("program_copy", argc, argv);
    for (int rep = 0; rep < 12; rep++) as_strided_case(0);
    for (int rep = 0; rep < 3; rep++) as_strided_case(1);
    for (int rep = 0; rep < 16; rep++) pad_case();
    for (int rep = 0; rep < 10; rep++) diagonal_case(), unfold_case();
    edge_cases();
    return th_done();
}
