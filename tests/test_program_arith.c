/* The op registry's arithmetic and logic forms (src/program/ops_arith.c: fmod and remainder,
 * .Tensor and .Scalar; reciprocal, pow.Scalar, clamp.Tensor, sign, erf; logical_xor and the
 * bool bitwise forms) called as the program runner calls them, on the GPU, against float64 references
 * (C's fmod, and Python's % as fmod plus the divisor when the signs differ), with fresh random
 * shapes, broadcast divisors, dtypes and inputs each run (WGML_SEED repeats one), NaN-poisoned
 * outputs: int tensors exactly (negative operands on either side), integer-valued floats
 * exactly (the index arithmetic of a decomposed torch.roll), other floats within f32 rounding of
 * the dividend, a zero float divisor giving NaN; then the refusals (an int tensor by zero or by
 * a fraction, an int result of a float operand), each a clear error naming the operator. */
#include "harness.h"
#include "program_slots.h"

#include <stdio.h>

static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)floor(th_uniform(0, 1) * (double)(hi - lo + 1) - 1e-12); }

static double ref_op(double a, double b, int is_rem) {
    double r = fmod(a, b);
    if (is_rem && r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
}

/* kind 0: int tensors, 1: integer-valued floats, 2: any floats (with zero divisors);
 * tensor divisor (broadcast from a random subset of dims) or a number. */
static void rem_case(int is_rem, int kind, int tensor_div) {
    int rank = (int)irand(0, 3);
    int64_t d[WGML_MAX_RANK], bd[WGML_MAX_RANK], n = 1, nb = 1, st[WGML_MAX_RANK], bst[WGML_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = irand(1, 6), bd[i] = th_uniform(0, 1) < 0.5 ? d[i] : 1;
    for (int i = rank - 1; i >= 0; i--) st[i] = n, n *= d[i], bst[i] = nb, nb *= bd[i];
    int vk = kind == 0 ? VK_INT64 : VK_FLOAT32;
    float *af = malloc((size_t)n * 4), *bf = malloc((size_t)nb * 4);
    int32_t *ai = (int32_t *)af, *bi = (int32_t *)bf;
    double *a = malloc((size_t)n * sizeof *a), *bv = malloc((size_t)nb * sizeof *bv), *ref = malloc((size_t)n * sizeof *ref);
    double *div = malloc((size_t)n * sizeof *div); /* each element's divisor */
    for (int64_t i = 0; i < n; i++) {
        a[i] = kind == 2 ? (double)(float)th_uniform(-20, 20) : (double)irand(-100, 100);
        if (kind == 0) ai[i] = (int32_t)a[i];
        else af[i] = (float)a[i];
    }
    double scalar = 0;
    for (int64_t i = 0; i < (tensor_div ? nb : 1); i++) {
        double v;
        do v = kind == 2 ? (double)(float)th_uniform(-5, 5) : (double)irand(-9, 9);
        while (v == 0 && (kind != 2 || th_uniform(0, 1) < 0.8)); /* float zero divisors now and then */
        if (!tensor_div) scalar = v;
        else if (kind == 0) bi[i] = (int32_t)v, bv[i] = v;
        else bf[i] = (float)v, bv[i] = v;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t j = 0;
        for (int k = 0; k < rank; k++) j += bd[k] == 1 ? 0 : (i / st[k]) % d[k] * bst[k];
        div[i] = tensor_div ? bv[j] : scalar;
        ref[i] = ref_op(a[i], div[i], is_rem);
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t args[3] = {s_tensor(&s, vk, rank, d, af),
                       tensor_div ? s_tensor(&s, vk, rank, bd, bf) : kind == 0 ? s_int(&s, (int64_t)scalar) : s_double(&s, scalar), 0};
    args[2] = s_tensor(&s, vk, rank, d, NULL);
    const char *op = is_rem ? (tensor_div ? "aten.remainder.Tensor" : "aten.remainder.Scalar")
                            : (tensor_div ? "aten.fmod.Tensor" : "aten.fmod.Scalar");
    char what[128];
    snprintf(what, sizeof what, "%s %s rank %d%s", op, kind == 0 ? "int64" : kind == 1 ? "integral float32" : "float32",
             rank, tensor_div ? " (broadcast divisor)" : "");
    wgml_status stt = s_call(&s, op, args, 3);
    double *got = stt ? NULL : s_read(&s, args[2]);
    if (th_check(got != NULL, "%s: builds and runs%s%s", what, stt ? ": " : "", stt ? wgml_last_error(T.ctx) : "")) {
        int64_t bad = 0, at = -1;
        for (int64_t i = 0; i < n; i++) {
            /* exact but for floats with a fraction: a − b·q within f32 rounding of a; a quotient
             * that rounds to an integer is a known edge (the remainder is then off by b): skipped */
            double b_i = div[i], q;
            q = a[i] / b_i;
            if (kind == 2 && b_i != 0 && fabs(q - nearbyint(q)) < 1e-5 * (1 + fabs(q))) continue;
            double tol = kind == 2 ? 4e-7 * (fabs(a[i]) + fabs(b_i)) : 0;
            int ok = isnan(ref[i]) ? isnan(got[i]) : fabs(got[i] - ref[i]) <= tol;
            if (!ok && bad++ == 0) at = i;
        }
        th_check(bad == 0, "%s: %lld elements, %lld off", what, (long long)n, (long long)bad);
        if (bad) printf("     element %lld: %g %% %g: got %.9g, want %.9g\n", (long long)at, a[at], div[at], got[at], ref[at]);
    }
    free(got), free(af), free(bf), free(a), free(bv), free(ref), free(div);
}

/* An int tensor (int64 in the program) by a float number: the result is float (PyTorch's
 * promotion), computed in f32. */
static void promoted_case(void) {
    int64_t d[1] = {7};
    int32_t x[7] = {-7, -3, -1, 0, 2, 5, 9};
    double ref[7];
    for (int i = 0; i < 7; i++) ref[i] = ref_op(x[i], 2.5, 0);
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t a[3] = {s_tensor(&s, VK_INT64, 1, d, x), s_double(&s, 2.5), 0};
    a[2] = s_tensor(&s, VK_FLOAT32, 1, d, NULL);
    wgml_status st = s_call(&s, "aten.fmod.Scalar", a, 3);
    double *got = st ? NULL : s_read(&s, a[2]);
    int bad = !got;
    for (int i = 0; got && i < 7; i++) bad += got[i] != ref[i];
    th_check(!bad, "aten.fmod.Scalar int64 by 2.5 -> float32: %s", st ? wgml_last_error(T.ctx) : bad ? "wrong values" : "exact");
    free(got);
}

/* ---- reciprocal, pow.Scalar, clamp.Tensor ------------------------------------------------ */

/* Builds op and compares output slot out with ref: equal, or within tol·(1 + |ref|). */
static void check_out(slots *s, const char *op, const int32_t *a, int na, int32_t out, const double *ref, double tol, const char *what) {
    wgml_status st = s_call(s, op, a, na);
    double *got = st ? NULL : s_read(s, out);
    if (!th_check(got != NULL, "%s: builds and runs%s%s", what, st ? ": " : "", st ? wgml_last_error(T.ctx) : "")) return;
    int64_t n = s_numel(s, out), bad = 0, at = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(got[i] == ref[i] || fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i]))) && bad++ == 0) at = i;
    th_check(bad == 0, "%s: %lld elements, %lld off", what, (long long)n, (long long)bad);
    if (bad) printf("     element %lld: got %.9g, want %.9g\n", (long long)at, got[at], ref[at]);
    free(got);
}

static void unary_forms_case(void) {
    int64_t d[2] = {irand(1, 4), irand(1, 6)}, n = d[0] * d[1], bd[2] = {1, d[1]};
    int as_int = th_uniform(0, 1) < 0.3;
    float *xf = malloc((size_t)n * 4), *lo = malloc((size_t)d[1] * 4), *hi = malloc((size_t)n * 4);
    int32_t *xi = malloc((size_t)n * 4), *loi = malloc((size_t)d[1] * 4);
    double *rec = malloc((size_t)n * sizeof *rec), *pw = malloc((size_t)n * sizeof *pw), *cl = malloc((size_t)n * sizeof *cl);
    double base = th_uniform(0, 1) < 0.5 ? 2.0 : 10000.0, e;
    for (int64_t j = 0; j < d[1]; j++) lo[j] = (float)th_uniform(-1, 0), loi[j] = (int32_t)irand(-5, 0);
    for (int64_t i = 0; i < n; i++) {
        double v;
        do v = as_int ? (double)irand(-9, 9) : (double)(float)th_uniform(-3, 3);
        while (v == 0);
        xf[i] = (float)v, xi[i] = (int32_t)v, hi[i] = (float)th_uniform(0, 1);
        rec[i] = 1.0 / v;
        e = as_int ? fabs(v) : v / 4; /* 2 ** (int) is an int; 10000 ** (x / 4) a rotary table's kind */
        pw[i] = pow(base, e);
        double l = as_int ? (double)loi[i % d[1]] : (double)lo[i % d[1]];
        cl[i] = as_int ? (v < l ? l : v) : fmin(fmax(v, l), (double)hi[i]);
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int vk = as_int ? VK_INT64 : VK_FLOAT32;
    const void *xd = as_int ? (const void *)xi : (const void *)xf;
    int32_t a[3] = {s_tensor(&s, vk, 2, d, xd), 0, 0};
    a[1] = s_tensor(&s, VK_FLOAT32, 2, d, NULL);
    check_out(&s, "aten.reciprocal.default", a, 2, a[1], rec, 2e-7, as_int ? "reciprocal of int64" : "reciprocal of float32");
    /* pow.Scalar(base, e): float exponents x/4 (10000 ** 0.75 is 1000: the relative error of
     * exp·log in f32 is ~|e·ln(base)|·2^-24), int exponents |x| exact (2^9) */
    float *ef = malloc((size_t)n * 4);
    int32_t *ei = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) ef[i] = as_int ? 0 : xf[i] / 4, ei[i] = abs(xi[i]);
    s_init(&s, T.ctx, T.g);
    int32_t p[3] = {as_int ? s_int(&s, (int64_t)base) : s_double(&s, base), s_tensor(&s, vk, 2, d, as_int ? (const void *)ei : (const void *)ef), 0};
    p[2] = s_tensor(&s, vk, 2, d, NULL);
    if (!(as_int && base > 2)) /* 10000 ** int would overflow int32 */
        check_out(&s, "aten.pow.Scalar", p, 3, p[2], pw, as_int ? 0 : 4e-6,
                  as_int ? "pow.Scalar 2 ** int64" : "pow.Scalar base ** float32");
    /* clamp.Tensor(x, lo [1, C] broadcast, hi [R, C] or None for ints) */
    s_init(&s, T.ctx, T.g);
    int32_t c[4] = {s_tensor(&s, vk, 2, d, xd), s_tensor(&s, vk, 2, bd, as_int ? (const void *)loi : (const void *)lo),
                    as_int ? s_null(&s) : s_tensor(&s, VK_FLOAT32, 2, d, hi), 0};
    c[3] = s_tensor(&s, vk, 2, d, NULL);
    check_out(&s, "aten.clamp.Tensor", c, 4, c[3], cl, 0, as_int ? "clamp.Tensor int64, min only" : "clamp.Tensor float32, min [1, C] and max");
    free(xf), free(lo), free(hi), free(xi), free(loi), free(rec), free(pw), free(cl), free(ef), free(ei);
}

/* sign (float with NaN and ±0, int) and erf (float, with 0, ±inf, NaN and the saturated tails) */
static void sign_erf_case(void) {
    int64_t n = irand(8, 40), d[1] = {n};
    int as_int = th_uniform(0, 1) < 0.3;
    float *xf = malloc((size_t)n * 4);
    int32_t *xi = malloc((size_t)n * 4);
    double *sg = malloc((size_t)n * sizeof *sg), *ef = malloc((size_t)n * sizeof *ef);
    static const float special[6] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 7.5f};
    for (int64_t i = 0; i < n; i++) {
        xf[i] = i < 6 ? special[i] : (float)(th_uniform(-4.5, 4.5) * (th_uniform(0, 1) < 0.3 ? 0.01 : 1));
        xi[i] = (int32_t)irand(-3, 3);
        double v = as_int ? xi[i] : xf[i];
        sg[i] = isnan(v) ? 0 : (v > 0) - (v < 0);
        ef[i] = erf((double)xf[i]);
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int vk = as_int ? VK_INT64 : VK_FLOAT32;
    int32_t a[2] = {s_tensor(&s, vk, 1, d, as_int ? (const void *)xi : (const void *)xf), 0};
    a[1] = s_tensor(&s, vk, 1, d, NULL);
    check_out(&s, "aten.sign.default", a, 2, a[1], sg, 0, as_int ? "sign of int64" : "sign of float32 (NaN, +-0, +-inf)");
    s_init(&s, T.ctx, T.g);
    int32_t e[2] = {s_tensor(&s, VK_FLOAT32, 1, d, xf), 0};
    e[1] = s_tensor(&s, VK_FLOAT32, 1, d, NULL);
    /* 2·Φ − 1 with Φ to ~1.4e-7: 4e-7 absolute (check_out's tol scales with 1 + |ref| <= 2) */
    double *got = s_call(&s, "aten.erf.default", e, 2) ? NULL : s_read(&s, e[1]);
    int64_t bad = !got;
    double worst = 0;
    for (int64_t i = 0; got && i < n; i++) {
        double err = isnan(ef[i]) ? (isnan(got[i]) ? 0 : INFINITY) : fabs(got[i] - ef[i]);
        worst = th_max_err(worst, err);
        bad += !(err <= 4e-7) || (ef[i] == 0 && signbit(ef[i]) != signbit(got[i]));
    }
    th_check(!bad, "aten.erf.default float32 (NaN, +-0, +-inf, tails): %lld elements, max abs err %.2e%s", (long long)n, worst,
             got ? "" : wgml_last_error(T.ctx));
    free(got), free(xf), free(xi), free(sg), free(ef);
}

/* ---- exclusive or and the bool bitwise forms ---------------------------------------------- */

static void logic_case(void) {
    int64_t d[2] = {irand(1, 4), irand(1, 6)}, n = d[0] * d[1];
    int vk = (int[]){VK_FLOAT32, VK_INT64, VK_BOOL}[irand(0, 2)];
    float *af = malloc((size_t)n * 4);
    int32_t *ai = malloc((size_t)n * 4);
    unsigned char *ab = malloc((size_t)n), *bb = malloc((size_t)n);
    double *ref = malloc((size_t)n * sizeof *ref), *refb = malloc((size_t)n * sizeof *refb);
    for (int64_t i = 0; i < n; i++) {
        int z = th_uniform(0, 1) < 0.5;
        af[i] = z ? 0.0f : th_uniform(0, 1) < 0.1 ? NAN : (float)th_uniform(-2, 2), ai[i] = z ? 0 : (int32_t)irand(1, 5), ab[i] = !z;
        bb[i] = th_uniform(0, 1) < 0.5;
        ref[i] = (double)(!z != (bb[i] != 0)); /* a NaN is true */
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    const void *ad = vk == VK_FLOAT32 ? (const void *)af : vk == VK_INT64 ? (const void *)ai : (const void *)ab;
    int32_t a[3] = {s_tensor(&s, vk, 2, d, ad), s_tensor(&s, VK_BOOL, 2, d, bb), 0};
    a[2] = s_tensor(&s, VK_BOOL, 2, d, NULL);
    char what[64];
    snprintf(what, sizeof what, "logical_xor %s with bool", vk == VK_FLOAT32 ? "float32" : vk == VK_INT64 ? "int64" : "bool");
    check_out(&s, "aten.logical_xor.default", a, 3, a[2], ref, 0, what);
    s_init(&s, T.ctx, T.g);
    int32_t x[3] = {s_tensor(&s, VK_BOOL, 2, d, ab), s_tensor(&s, VK_BOOL, 2, d, bb), 0};
    x[2] = s_tensor(&s, VK_BOOL, 2, d, NULL);
    check_out(&s, "aten.bitwise_xor.Tensor", x, 3, x[2], ref, 0, "bitwise_xor of bools");
    static const char *ops[3] = {"aten.bitwise_and.Scalar", "aten.bitwise_or.Scalar", "aten.bitwise_xor.Scalar"};
    for (int op = 0; op < 3; op++)
        for (int sv = 0; sv < 2; sv++) {
            for (int64_t i = 0; i < n; i++) refb[i] = op == 0 ? (ab[i] && sv) : op == 1 ? (ab[i] || sv) : (ab[i] != sv);
            s_init(&s, T.ctx, T.g);
            int32_t y[3] = {s_tensor(&s, VK_BOOL, 2, d, ab), sv && th_uniform(0, 1) < 0.5 ? s_int(&s, 1) : s_bool(&s, sv), 0};
            y[2] = s_tensor(&s, VK_BOOL, 2, d, NULL);
            snprintf(what, sizeof what, "%s of bools with %d", ops[op], sv);
            check_out(&s, ops[op], y, 3, y[2], refb, 0, what);
        }
    free(af), free(ai), free(ab), free(bb), free(ref), free(refb);
}

static void refused(slots *s, const char *op, const int32_t *args, int nargs, wgml_status want, const char *msg) {
    wgml_status st = s_call(s, op, args, nargs);
    th_expect_error(op, st != WGML_OK, want, op, msg, NULL);
}

static void edge_cases(void) {
    int64_t d3[1] = {3};
    int32_t xi[3] = {1, 2, 3};
    float xf[3] = {1, 2, 3};
    slots s;
#define XI() (s_init(&s, T.ctx, T.g), s_tensor(&s, VK_INT64, 1, d3, xi))
    int32_t x = XI();
    refused(&s, "aten.fmod.Scalar", (int32_t[]){x, s_int(&s, 0), s_tensor(&s, VK_INT64, 1, d3, NULL)}, 3, WGML_ERR_ARG,
            "integer division by zero");
    x = XI();
    refused(&s, "aten.remainder.Scalar", (int32_t[]){x, s_double(&s, 1.5), s_tensor(&s, VK_INT64, 1, d3, NULL)}, 3, WGML_ERR_ARG,
            "must be an integer");
    x = XI();
    int32_t f = s_tensor(&s, VK_FLOAT32, 1, d3, xf);
    refused(&s, "aten.fmod.Tensor", (int32_t[]){x, f, s_tensor(&s, VK_INT64, 1, d3, NULL)}, 3, WGML_ERR_DTYPE,
            "an int result needs int operands");
    x = XI();
    refused(&s, "aten.fmod.Tensor", (int32_t[]){x, s_tensor(&s, VK_INT64, 1, d3, NULL), s_tensor(&s, VK_INT64, 1, d3, NULL)}, 3,
            WGML_ERR_ARG, "tensor used before it is computed");
    x = XI();
    refused(&s, "aten.fmod.Scalar", (int32_t[]){x, s_int(&s, 2), s_tensor(&s, VK_BOOL, 1, d3, NULL)}, 3, WGML_ERR_DTYPE,
            "the output must be a float or an int tensor");
    x = XI();
    refused(&s, "aten.bitwise_and.Scalar", (int32_t[]){x, s_int(&s, 3), s_tensor(&s, VK_INT64, 1, d3, NULL)}, 3, WGML_ERR_UNSUPPORTED,
            "integer bitwise operations are not supported");
    x = XI();
    refused(&s, "aten.bitwise_xor.Tensor", (int32_t[]){x, x, s_tensor(&s, VK_INT64, 1, d3, NULL)}, 3, WGML_ERR_UNSUPPORTED,
            "integer bitwise operations are not supported");
    x = XI();
    refused(&s, "aten.clamp.Tensor", (int32_t[]){x, s_null(&s), s_null(&s), s_tensor(&s, VK_INT64, 1, d3, NULL)}, 4, WGML_ERR_ARG,
            "clamp needs at least one bound");
    x = XI();
    refused(&s, "aten.clamp.Tensor", (int32_t[]){x, s_tensor(&s, VK_FLOAT32, 1, d3, xf), s_null(&s), s_tensor(&s, VK_INT64, 1, d3, NULL)}, 4,
            WGML_ERR_DTYPE, "an int clamp needs int operands and output");
#undef XI
}

int main(int argc, char **argv) {
    th_init_args("program_arith", argc, argv);
    for (int rep = 0; rep < 2; rep++)
        for (int is_rem = 0; is_rem < 2; is_rem++)
            for (int kind = 0; kind < 3; kind++)
                for (int td = 0; td < 2; td++) rem_case(is_rem, kind, td);
    promoted_case();
    for (int rep = 0; rep < 6; rep++) unary_forms_case(), logic_case(), sign_erf_case();
    edge_cases();
    return th_done();
}
