/* Elementwise ops (binary with broadcasting and scalar forms, unary functions, comparisons,
 * logical ops, where) against plain double-precision loops; bool outputs compared exactly;
 * a dispatch of more than 65,535 workgroups; a built graph run twice; bad input. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wall_clock.h"

/* ------------------------------------------------------------------ helpers */

typedef struct shp {
    int rank;
    int64_t d[WGML_MAX_RANK];
} shp;

static int64_t numel_of(const shp *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->d[i];
    return n;
}

static void shp_str(const shp *s, char *buf, size_t n) {
    size_t u = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s->rank && u < n; i++) u += (size_t)snprintf(buf + u, n - u, "%s%lld", i ? "," : "", (long long)s->d[i]);
    if (u < n) snprintf(buf + u, n - u, "]");
}

/* NumPy broadcast of shapes (the test's own version). */
static shp bshape(int n, const shp *const *in) {
    shp o = {0, {0}};
    for (int k = 0; k < n; k++)
        if (in[k]->rank > o.rank) o.rank = in[k]->rank;
    for (int d = 0; d < o.rank; d++) {
        int64_t v = 1;
        for (int k = 0; k < n; k++) {
            int td = d - (o.rank - in[k]->rank);
            if (td >= 0 && in[k]->d[td] != 1) v = in[k]->d[td];
        }
        o.d[d] = v;
    }
    return o;
}

/* Row-major index into tensor t of the element that output element i (of shape o) reads. */
static int64_t src_index(int64_t i, const shp *o, const shp *t) {
    int64_t coord[WGML_MAX_RANK];
    for (int d = o->rank - 1; d >= 0; d--) {
        coord[d] = i % o->d[d];
        i /= o->d[d];
    }
    int64_t idx = 0;
    for (int d = 0; d < t->rank; d++) {
        int od = d + (o->rank - t->rank);
        idx = idx * t->d[d] + (t->d[d] == 1 ? 0 : coord[od]);
    }
    return idx;
}

static wgml_tensor *tf32(const shp *s, const float *x) { return th_tensor_f32(s->rank, s->d, x); }

static wgml_tensor *tbool(const shp *s, const uint8_t *x) {
    wgml_tensor *t = wgml_tensor_new(T.g, WGML_BOOL, s->rank, s->d);
    if (!t || wgml_tensor_write(t, x, wgml_tensor_nbytes(t))) {
        th_check(false, "bool upload: %s", wgml_last_error(T.ctx));
        return NULL;
    }
    return t;
}

static uint8_t *random_bools(size_t n) {
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = th_uniform(0, 1) < 0.5;
    return b;
}

/* Small integers in [-3, 3], so that comparisons see many ties. */
static float *random_ties(size_t n) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = (float)floor(th_uniform(-3, 4));
    return x;
}

/* Checks a bool tensor of n elements exactly against ref (0/1 per element). */
static void check_bool(const char *name, wgml_tensor *t, const uint8_t *ref, int64_t n) {
    if (!t) {
        th_check(false, "%s: no result: %s", name, wgml_last_error(T.ctx));
        return;
    }
    th_check(wgml_tensor_dtype(t) == WGML_BOOL && wgml_tensor_numel(t) == n, "%s: bool output of %lld elements", name,
             (long long)n);
    uint8_t *got = malloc((size_t)n);
    uint32_t *g32 = malloc(sizeof(uint32_t) * (size_t)n), *r32 = malloc(sizeof(uint32_t) * (size_t)n);
    if (wgml_tensor_read(t, got, (size_t)n)) {
        th_check(false, "%s: read: %s", name, wgml_last_error(T.ctx));
    } else {
        for (int64_t i = 0; i < n; i++) {
            g32[i] = got[i];
            r32[i] = ref[i];
        }
        th_exact_u32(name, g32, r32, (size_t)n);
    }
    free(got); free(g32); free(r32);
}

/* ------------------------------------------------------------------ binary */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_MIN, B_MAX, B_POW, N_B };
static const char *const BNAME[N_B] = {"add", "sub", "mul", "div", "minimum", "maximum", "pow"};

static double ref_binary(int op, double a, double b, double alpha) {
    switch (op) {
    case B_ADD: return a + alpha * b;
    case B_SUB: return a - alpha * b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_MIN: return a < b ? a : b;
    case B_MAX: return a > b ? a : b;
    default: return pow(a, b);
    }
}

static wgml_tensor *call_binary(int op, wgml_tensor *a, wgml_tensor *b, float alpha) {
    switch (op) {
    case B_ADD: return wgml_add(T.g, a, b, alpha);
    case B_SUB: return wgml_sub(T.g, a, b, alpha);
    case B_MUL: return wgml_mul(T.g, a, b);
    case B_DIV: return wgml_div(T.g, a, b);
    case B_MIN: return wgml_minimum(T.g, a, b);
    case B_MAX: return wgml_maximum(T.g, a, b);
    default: return wgml_pow(T.g, a, b);
    }
}

static wgml_tensor *call_binary_scalar(int op, wgml_tensor *a, float s, float alpha) {
    switch (op) {
    case B_ADD: return wgml_add_scalar(T.g, a, s, alpha);
    case B_SUB: return wgml_sub_scalar(T.g, a, s, alpha);
    case B_MUL: return wgml_mul_scalar(T.g, a, s);
    case B_DIV: return wgml_div_scalar(T.g, a, s);
    case B_MIN: return wgml_minimum_scalar(T.g, a, s);
    case B_MAX: return wgml_maximum_scalar(T.g, a, s);
    default: return wgml_pow_scalar(T.g, a, s);
    }
}

/* Random operands suited to op: divisors away from 0, positive bases for pow (or, with
 * neg_int_pow, any base and small integral exponents). */
static void fill_operands(int op, float *a, size_t na, float *b, size_t nb, bool neg_int_pow) {
    if (op == B_POW && neg_int_pow) {
        th_fill_uniform(a, na, -3, 3);
        for (size_t i = 0; i < nb; i++) b[i] = (float)floor(th_uniform(-2, 4));
    } else if (op == B_POW) {
        th_fill_uniform(a, na, 0.2, 3);
        th_fill_uniform(b, nb, -2.5, 2.5);
    } else {
        th_fill_uniform(a, na, -2, 2);
        th_fill_uniform(b, nb, -2, 2);
        if (op == B_DIV)
            for (size_t i = 0; i < nb; i++) b[i] = (b[i] < 0 ? -0.5f : 0.5f) + 0.75f * b[i];
    }
}

static double btol_rel(int op) { return op == B_POW ? 2e-5 : op == B_DIV ? 1e-6 : 1e-6; }

/* One binary case; returns the output (for dumping) when keep is set, else frees it. */
static void case_binary(int op, const shp *sa, const shp *sb, float alpha, bool neg_int_pow, const char *dump) {
    const shp *in[2] = {sa, sb};
    shp so = bshape(2, in);
    int64_t na = numel_of(sa), nb = numel_of(sb), no = numel_of(&so);
    float *ha = malloc(sizeof(float) * (size_t)na), *hb = malloc(sizeof(float) * (size_t)nb);
    fill_operands(op, ha, (size_t)na, hb, (size_t)nb, neg_int_pow);
    wgml_tensor *a = tf32(sa, ha), *b = tf32(sb, hb);
    wgml_tensor *o = call_binary(op, a, b, alpha);
    double *ref = malloc(sizeof(double) * (size_t)no);
    for (int64_t i = 0; i < no; i++)
        ref[i] = ref_binary(op, ha[src_index(i, &so, sa)], hb[src_index(i, &so, sb)], alpha);
    char s1[64], s2[64], name[200];
    shp_str(sa, s1, sizeof s1);
    shp_str(sb, s2, sizeof s2);
    snprintf(name, sizeof name, "%s %s %s alpha %g%s", BNAME[op], s1, s2, alpha, neg_int_pow ? " (neg base)" : "");
    bool shape_ok = o && wgml_tensor_rank(o) == so.rank;
    for (int d = 0; shape_ok && d < so.rank; d++) shape_ok = wgml_tensor_dim(o, d) == so.d[d];
    th_check(shape_ok, "%s: output shape", name);
    float *got = th_read_f32(o);
    th_close(name, got, ref, (size_t)no, 1e-6, btol_rel(op));
    if (dump) {
        th_dump_tensor(dump, "a", a);
        th_dump_tensor(dump, "b", b);
        th_dump(dump, "alpha", WGML_F32, 1, (int64_t[]){1}, &alpha);
        th_dump_tensor(dump, "out", o);
    }
    free(ha); free(hb); free(ref); free(got);
    wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(o);
}

#define S(...) ((shp){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static void test_binary(void) {
    double t0 = now();
    const shp pairs[][2] = {
        {S(7), S(7)},                   /* same shape, not a multiple of 4 */
        {S(37), S(37)},
        {S(129), S(129)},
        {S(4, 33), S(4, 33)},           /* same shape, vec4 */
        {S(5, 6, 8), S(6, 8)},          /* leading broadcast, mixed rank */
        {S(5, 6, 8), S(1, 6, 8)},       /* leading broadcast, same rank */
        {S(1, 6, 7), S(5, 6, 7)},       /* leading broadcast of a */
        {S(3, 5, 7), S(3, 1, 7)},       /* middle */
        {S(4, 9, 6), S(4, 9, 1)},       /* trailing */
        {S(5, 1, 3), S(1, 4, 1)},       /* both broadcast */
        {S(37), S(1)},                  /* one-element b */
        {S(1), S(2, 3, 4)},             /* one-element a, vec4 */
        {S(2, 1, 3, 1, 5), S(4, 1)},    /* mixed rank 5 and 2 */
        {S(2, 1, 2, 1, 3, 1, 2, 3), S(2, 1, 3, 1, 2, 1)}, /* rank 8 */
        {S(3, 1), S(1, 129)},           /* outer product */
        {S(6, 8), S(6, 1)},             /* vec4 broadcast path, b splat along the row */
        {S(7, 4), S(4)},                /* vec4 broadcast path, every vector wraps the row */
        {S(3, 2, 12), S(2, 1)},         /* vec4 broadcast path, rank 3 */
    };
    int np = (int)(sizeof pairs / sizeof pairs[0]);
    for (int op = 0; op < N_B; op++)
        for (int i = 0; i < np; i++) {
            float alpha = (op == B_ADD || op == B_SUB) ? (i % 3 == 0 ? 1.0f : i % 3 == 1 ? 2.5f : -0.75f) : 1.0f;
            case_binary(op, &pairs[i][0], &pairs[i][1], alpha, false, NULL);
        }
    /* negative bases with integral exponents */
    case_binary(B_POW, &pairs[2][0], &pairs[2][1], 1.0f, true, NULL);
    case_binary(B_POW, &pairs[7][0], &pairs[7][1], 1.0f, true, NULL);
    /* dumped for the PyTorch comparison */
    shp a1 = S(4, 1, 6, 5), b1 = S(3, 1, 5), a2 = S(2, 7, 1), b2 = S(1, 1, 9);
    case_binary(B_ADD, &a1, &b1, -1.75f, false, "add_bcast");
    case_binary(B_POW, &a2, &b2, 1.0f, false, "pow_bcast");
    printf("  binary: %.2f s\n", now() - t0);
}

static void test_binary_scalar(void) {
    double t0 = now();
    const shp shapes[] = {S(7), S(129), S(8, 16)};
    const float scal[] = {0.75f, -1.5f, 2.0f};
    for (int op = 0; op < N_B; op++)
        for (int i = 0; i < 3; i++) {
            const shp *s = &shapes[i];
            int64_t n = numel_of(s);
            float *ha = malloc(sizeof(float) * (size_t)n), dummy;
            fill_operands(op, ha, (size_t)n, &dummy, 1, false);
            float sv = scal[i], alpha = (op == B_ADD || op == B_SUB) ? (i == 0 ? 1.0f : i == 1 ? -0.5f : 3.0f) : 1.0f;
            if (op == B_POW) sv = i == 0 ? 0.5f : i == 1 ? -1.5f : 3.0f;
            wgml_tensor *a = tf32(s, ha);
            wgml_tensor *o = call_binary_scalar(op, a, sv, alpha);
            double *ref = malloc(sizeof(double) * (size_t)n);
            for (int64_t k = 0; k < n; k++) ref[k] = ref_binary(op, ha[k], sv, alpha);
            char s1[64], name[160];
            shp_str(s, s1, sizeof s1);
            snprintf(name, sizeof name, "%s_scalar %s s %g alpha %g", BNAME[op], s1, sv, alpha);
            float *got = th_read_f32(o);
            th_close(name, got, ref, (size_t)n, 1e-6, btol_rel(op));
            free(ha); free(ref); free(got);
            wgml_tensor_free(a); wgml_tensor_free(o);
        }
    /* pow_scalar: odd and even integral powers of negative numbers, and 0 ** 0 = 1 */
    const float pw[] = {3.0f, 2.0f, 0.0f, -1.0f};
    for (int i = 0; i < 4; i++) {
        int64_t n = 37;
        float *ha = th_random((size_t)n, -3, 3);
        ha[0] = 0.0f;
        if (pw[i] < 0) ha[0] = 0.5f;
        wgml_tensor *a = th_tensor_f32(1, &n, ha);
        double ref[37];
        for (int k = 0; k < n; k++) ref[k] = pow(ha[k], pw[i]);
        char name[96];
        snprintf(name, sizeof name, "pow_scalar negative base ** %g", pw[i]);
        float *got = th_read_f32(wgml_pow_scalar(T.g, a, pw[i]));
        th_close(name, got, ref, (size_t)n, 1e-6, 2e-5);
        free(ha); free(got);
        wgml_tensor_free(a);
    }
    printf("  binary scalar: %.2f s\n", now() - t0);
}

/* ------------------------------------------------------------------ unary */

/* the ops tested here; U_RELU .. U_TANH have their wgml_unary_op values */
enum { U_RELU, U_SIGMOID, U_SILU, U_GELU, U_GELU_TANH, U_EXP, U_LOG, U_NEG, U_ABS, U_SQRT, U_RSQRT, U_TANH, U_EXPM1, U_CLAMP, N_U };
static const char *const UNAME[N_U] = {"relu", "sigmoid", "silu", "gelu",  "gelu_tanh", "exp",  "log",
                                       "neg",  "abs",     "sqrt", "rsqrt", "tanh",      "expm1", "clamp"};

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static double ref_unary(int op, double x, double lo, double hi) {
    switch (op) {
    case U_RELU: return x > 0 ? x : 0;
    case U_SIGMOID: return ref_sigmoid(x);
    case U_SILU: return x * ref_sigmoid(x);
    case U_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    case U_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_NEG: return -x;
    case U_ABS: return fabs(x);
    case U_SQRT: return sqrt(x);
    case U_RSQRT: return 1.0 / sqrt(x);
    case U_TANH: return tanh(x);
    case U_EXPM1: return expm1(x);
    default: return fmin(fmax(x, lo), hi);
    }
}

static wgml_tensor *call_unary(int op, wgml_tensor *x, float lo, float hi) {
    switch (op) {
    case U_RELU: return wgml_relu(T.g, x);
    case U_SIGMOID: return wgml_sigmoid(T.g, x);
    case U_SILU: return wgml_silu(T.g, x);
    case U_GELU: return wgml_gelu(T.g, x, 0);
    case U_GELU_TANH: return wgml_gelu(T.g, x, 1);
    case U_CLAMP: return wgml_clamp(T.g, x, lo, hi);
    case U_EXPM1: return wgml_expm1(T.g, x);
    default: return wgml_unary(T.g, (wgml_unary_op)op, x); /* U_EXP .. U_TANH: the enum's values */
    }
}

/* Input range and tolerances per op. */
static void unary_domain(int op, double *lo, double *hi, double *atol, double *rtol) {
    *atol = 1e-6;
    *rtol = 1e-5;
    switch (op) {
    /* outputs of magnitude <= 12: a plain absolute tolerance (rtol 0) of 1e-6 */
    case U_SIGMOID: case U_TANH: *lo = -30; *hi = 30; *rtol = 0; break;
    case U_SILU: *lo = -30; *hi = 30; break;
    case U_GELU: case U_GELU_TANH: *lo = -10; *hi = 10; *rtol = 0; break;
    case U_EXP: case U_EXPM1: *lo = -20; *hi = 20; *rtol = 3e-6; break;
    case U_LOG: *lo = 1e-3; *hi = 1e3; break;
    case U_SQRT: *lo = 0; *hi = 100; *rtol = 1e-6; break;
    case U_RSQRT: *lo = 1e-2; *hi = 100; *rtol = 2e-6; break;
    case U_RELU: case U_NEG: case U_ABS: case U_CLAMP: *lo = -3; *hi = 3; *atol = 0; *rtol = 0; break;
    default: *lo = -3; *hi = 3;
    }
}

static void case_unary(int op, int64_t n, const float *given, float clo, float chi, const char *label,
                       const char *dump) {
    double lo, hi, atol, rtol;
    unary_domain(op, &lo, &hi, &atol, &rtol);
    float *hx = th_random((size_t)n, lo, hi);
    if (given) memcpy(hx, given, sizeof(float) * (size_t)n);
    wgml_tensor *x = th_tensor_f32(1, &n, hx);
    wgml_tensor *o = call_unary(op, x, clo, chi);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) ref[i] = ref_unary(op, hx[i], clo, chi);
    char name[160];
    snprintf(name, sizeof name, "%s n=%lld%s%s", UNAME[op], (long long)n, label ? " " : "", label ? label : "");
    float *got = th_read_f32(o);
    th_close(name, got, ref, (size_t)n, atol, rtol);
    if (dump) {
        th_dump_tensor(dump, "x", x);
        th_dump_tensor(dump, "out", o);
    }
    free(hx); free(ref); free(got);
    wgml_tensor_free(x); wgml_tensor_free(o);
}

static void test_unary(void) {
    double t0 = now();
    const int64_t sizes[] = {7, 37, 129, 1024};
    for (int op = 0; op < N_U; op++)
        for (int i = 0; i < 4; i++) case_unary(op, sizes[i], NULL, -0.5f, 0.75f, NULL, NULL);
    /* clamp with lo > hi gives hi everywhere (as PyTorch) */
    case_unary(U_CLAMP, 37, NULL, 1.0f, -1.0f, "lo > hi", NULL);
    /* large magnitudes and tiny values: no overflow to NaN, relative accuracy near 0 */
    float special[40] = {-90, 90, -30, 30, -20, 20, -15, 15, -9.5f, 9.5f, -9, 9, -5, 5, -1, 1, 0, -0.0f,
                         1e-6f, -1e-6f, 1e-3f, -1e-3f, 0.3f, -0.3f, 0.55f, -0.55f, 0.56f, -0.56f, 1.2728f, -1.2728f,
                         2.5f, -2.5f, 4, -4, 7.5f, -7.5f, 13, -13, 40, -40};
    const int ops_special[] = {U_SIGMOID, U_SILU, U_GELU, U_GELU_TANH, U_TANH};
    for (int i = 0; i < 5; i++) case_unary(ops_special[i], 40, special, 0, 0, "special values", NULL);
    /* a dense sweep for the erf approximation in gelu and the polynomial/exp split of tanh */
    int64_t n = 8192;
    float *sweep = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) sweep[i] = (float)(-12.0 + 24.0 * (double)i / (double)(n - 1));
    case_unary(U_GELU, n, sweep, 0, 0, "sweep [-12, 12]", "gelu");
    case_unary(U_GELU_TANH, n, sweep, 0, 0, "sweep [-12, 12]", "gelu_tanh");
    case_unary(U_TANH, n, sweep, 0, 0, "sweep [-12, 12]", NULL);
    case_unary(U_SILU, n, sweep, 0, 0, "sweep [-12, 12]", "silu");
    case_unary(U_SIGMOID, n, sweep, 0, 0, "sweep [-12, 12]", "sigmoid");
    /* the negative tail of gelu keeps its relative accuracy (Phi from erfc, no 1 + erf cancellation) */
    for (int64_t i = 0; i < n; i++) sweep[i] = (float)(-9.0 + 6.0 * (double)i / (double)(n - 1));
    {
        wgml_tensor *x = th_tensor_f32(1, &n, sweep);
        float *got = th_read_f32(wgml_gelu(T.g, x, 0));
        double *ref = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) ref[i] = ref_unary(U_GELU, sweep[i], 0, 0);
        th_close("gelu relative accuracy on [-9, -3]", got, ref, (size_t)n, 0, 2e-5);
        free(got); free(ref);
        wgml_tensor_free(x);
    }
    for (int64_t i = 0; i < n; i++) sweep[i] = (float)(-1e-3 + 2e-3 * (double)i / (double)(n - 1));
    case_unary(U_TANH, n, sweep, 0, 0, "sweep [-1e-3, 1e-3]", NULL);
    free(sweep);
    /* expm1's relative accuracy near 0, where exp(x) - 1 cancels (the atol above would hide it):
     * fresh inputs across the series/exp switch at |x| = 0.5, tiny ones, and the special values
     * (0 and -0 exact, large x to inf and -1, NaN through) */
    {
        int64_t m = 4096;
        float *hx = th_random((size_t)m, -0.7, 0.7);
        for (int64_t i = 0; i < 256; i++) hx[i] *= 1e-4f;
        const float sp[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 0.5f, -0.5f, 0.49999997f, -0.49999997f, 90, -90, 88, NAN, INFINITY, -INFINITY};
        memcpy(hx + 256, sp, sizeof sp);
        wgml_tensor *x = th_tensor_f32(1, &m, hx);
        float *got = th_read_f32(wgml_expm1(T.g, x));
        double *ref = malloc(sizeof(double) * (size_t)m);
        for (int64_t i = 0; i < m; i++) { /* past f32's range the f32 result is inf */
            double r = expm1((double)hx[i]);
            ref[i] = r > 3.4028234663852886e38 ? INFINITY : r;
        }
        th_close("expm1 relative accuracy on [-0.7, 0.7]", got, ref, (size_t)m, 0, 2e-6);
        th_check(got && signbit(got[257]) && got[257] == 0.0f, "expm1(-0) is -0");
        free(hx); free(got); free(ref);
        wgml_tensor_free(x);
    }
    /* tanh's relative accuracy near 0 (the atol above would hide it) */
    {
        int64_t m = 64;
        float *hx = th_random((size_t)m, -0.5, 0.5);
        wgml_tensor *x = th_tensor_f32(1, &m, hx);
        float *got = th_read_f32(wgml_tanh(T.g, x));
        double *ref = malloc(sizeof(double) * (size_t)m);
        for (int64_t i = 0; i < m; i++) ref[i] = tanh(hx[i]);
        th_close("tanh relative accuracy on [-0.5, 0.5]", got, ref, (size_t)m, 0, 1e-6);
        free(hx); free(got); free(ref);
        wgml_tensor_free(x);
    }
    printf("  unary: %.2f s\n", now() - t0);
}

/* ------------------------------------------------------------------ bool */

enum { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, N_C };
static const char *const CNAME[N_C] = {"eq", "ne", "lt", "le", "gt", "ge"};

static uint8_t ref_cmp(int op, float a, float b) {
    switch (op) {
    case C_EQ: return a == b;
    case C_NE: return a != b;
    case C_LT: return a < b;
    case C_LE: return a <= b;
    case C_GT: return a > b;
    default: return a >= b;
    }
}

static wgml_tensor *call_cmp(int op, wgml_tensor *a, wgml_tensor *b) {
    switch (op) {
    case C_EQ: return wgml_eq(T.g, a, b);
    case C_NE: return wgml_ne(T.g, a, b);
    case C_LT: return wgml_lt(T.g, a, b);
    case C_LE: return wgml_le(T.g, a, b);
    case C_GT: return wgml_gt(T.g, a, b);
    default: return wgml_ge(T.g, a, b);
    }
}

static wgml_tensor *call_cmp_scalar(int op, wgml_tensor *a, float s) {
    switch (op) {
    case C_EQ: return wgml_eq_scalar(T.g, a, s);
    case C_NE: return wgml_ne_scalar(T.g, a, s);
    case C_LT: return wgml_lt_scalar(T.g, a, s);
    case C_LE: return wgml_le_scalar(T.g, a, s);
    case C_GT: return wgml_gt_scalar(T.g, a, s);
    default: return wgml_ge_scalar(T.g, a, s);
    }
}

static const shp BOOL_PAIRS[][2] = {
    {S(7), S(7)},           {S(37), S(37)},       {S(129), S(129)}, {S(132), S(132)},
    {S(3, 5, 7), S(5, 1)},  /* mixed rank, 105 outputs: partial last word */
    {S(2, 1, 9), S(1, 3, 1)}, /* 54 outputs */
    {S(1), S(37)},
};
#define N_BOOL_PAIRS (int)(sizeof BOOL_PAIRS / sizeof BOOL_PAIRS[0])

static void test_compare(void) {
    double t0 = now();
    for (int op = 0; op < N_C; op++) {
        for (int i = 0; i < N_BOOL_PAIRS; i++) {
            const shp *sa = &BOOL_PAIRS[i][0], *sb = &BOOL_PAIRS[i][1];
            const shp *in[2] = {sa, sb};
            shp so = bshape(2, in);
            int64_t na = numel_of(sa), nb = numel_of(sb), no = numel_of(&so);
            float *ha = random_ties((size_t)na), *hb = random_ties((size_t)nb);
            wgml_tensor *a = tf32(sa, ha), *b = tf32(sb, hb);
            uint8_t *ref = malloc((size_t)no);
            for (int64_t k = 0; k < no; k++) ref[k] = ref_cmp(op, ha[src_index(k, &so, sa)], hb[src_index(k, &so, sb)]);
            char s1[64], s2[64], name[160];
            shp_str(sa, s1, sizeof s1);
            shp_str(sb, s2, sizeof s2);
            snprintf(name, sizeof name, "%s %s %s", CNAME[op], s1, s2);
            wgml_tensor *o = call_cmp(op, a, b);
            check_bool(name, o, ref, no);
            free(ha); free(hb); free(ref);
            wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(o);
        }
        const int64_t sizes[] = {7, 37, 129, 132};
        for (int i = 0; i < 4; i++) {
            int64_t n = sizes[i];
            float *ha = random_ties((size_t)n), s = i == 3 ? 0.5f : 1.0f;
            wgml_tensor *a = th_tensor_f32(1, &n, ha);
            uint8_t *ref = malloc((size_t)n);
            for (int64_t k = 0; k < n; k++) ref[k] = ref_cmp(op, ha[k], s);
            char name[96];
            snprintf(name, sizeof name, "%s_scalar n=%lld s=%g", CNAME[op], (long long)n, s);
            wgml_tensor *o = call_cmp_scalar(op, a, s);
            check_bool(name, o, ref, n);
            free(ha); free(ref);
            wgml_tensor_free(a); wgml_tensor_free(o);
        }
    }
    printf("  compare: %.2f s\n", now() - t0);
}

static void test_logical(void) {
    double t0 = now();
    for (int op = 0; op < 2; op++)
        for (int i = 0; i < N_BOOL_PAIRS; i++) {
            const shp *sa = &BOOL_PAIRS[i][0], *sb = &BOOL_PAIRS[i][1];
            const shp *in[2] = {sa, sb};
            shp so = bshape(2, in);
            int64_t na = numel_of(sa), nb = numel_of(sb), no = numel_of(&so);
            uint8_t *ha = random_bools((size_t)na), *hb = random_bools((size_t)nb);
            wgml_tensor *a = tbool(sa, ha), *b = tbool(sb, hb);
            uint8_t *ref = malloc((size_t)no);
            for (int64_t k = 0; k < no; k++) {
                uint8_t x = ha[src_index(k, &so, sa)], y = hb[src_index(k, &so, sb)];
                ref[k] = op == 0 ? (x && y) : (x || y);
            }
            char s1[64], s2[64], name[160];
            shp_str(sa, s1, sizeof s1);
            shp_str(sb, s2, sizeof s2);
            snprintf(name, sizeof name, "%s %s %s", op == 0 ? "logical_and" : "logical_or", s1, s2);
            wgml_tensor *o = op == 0 ? wgml_logical_and(T.g, a, b) : wgml_logical_or(T.g, a, b);
            check_bool(name, o, ref, no);
            free(ha); free(hb); free(ref);
            wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(o);
        }
    const int64_t sizes[] = {7, 37, 129, 132};
    for (int i = 0; i < 4; i++) {
        int64_t n = sizes[i];
        uint8_t *ha = random_bools((size_t)n), *ref = malloc((size_t)n);
        for (int64_t k = 0; k < n; k++) ref[k] = !ha[k];
        wgml_tensor *a = tbool(&(shp){1, {n}}, ha);
        char name[64];
        snprintf(name, sizeof name, "logical_not n=%lld", (long long)n);
        wgml_tensor *o = wgml_logical_not(T.g, a);
        check_bool(name, o, ref, n);
        /* a chain: not(not(a)) == a, reading the first result's words (padding included) */
        wgml_tensor *o2 = wgml_logical_not(T.g, o);
        snprintf(name, sizeof name, "logical_not twice n=%lld", (long long)n);
        check_bool(name, o2, ha, n);
        free(ha); free(ref);
        wgml_tensor_free(a); wgml_tensor_free(o); wgml_tensor_free(o2);
    }
    printf("  logical: %.2f s\n", now() - t0);
}

static void case_where(const shp *sc, const shp *sa, const shp *sb, const char *dump) {
    const shp *in[3] = {sc, sa, sb};
    shp so = bshape(3, in);
    int64_t nc = numel_of(sc), na = numel_of(sa), nb = numel_of(sb), no = numel_of(&so);
    uint8_t *hc = random_bools((size_t)nc);
    float *ha = th_random((size_t)na, -1, 1), *hb = th_random((size_t)nb, 2, 3);
    wgml_tensor *c = tbool(sc, hc), *a = tf32(sa, ha), *b = tf32(sb, hb);
    double *ref = malloc(sizeof(double) * (size_t)no);
    for (int64_t k = 0; k < no; k++)
        ref[k] = hc[src_index(k, &so, sc)] ? ha[src_index(k, &so, sa)] : hb[src_index(k, &so, sb)];
    char s1[64], s2[64], s3[64], name[200];
    shp_str(sc, s1, sizeof s1);
    shp_str(sa, s2, sizeof s2);
    shp_str(sb, s3, sizeof s3);
    snprintf(name, sizeof name, "where %s %s %s", s1, s2, s3);
    wgml_tensor *o = wgml_where(T.g, c, a, b);
    bool shape_ok = o && wgml_tensor_rank(o) == so.rank;
    for (int d = 0; shape_ok && d < so.rank; d++) shape_ok = wgml_tensor_dim(o, d) == so.d[d];
    th_check(shape_ok, "%s: output shape", name);
    float *got = th_read_f32(o);
    th_close(name, got, ref, (size_t)no, 0, 0);
    if (dump) {
        th_dump_tensor(dump, "cond", c);
        th_dump_tensor(dump, "a", a);
        th_dump_tensor(dump, "b", b);
        th_dump_tensor(dump, "out", o);
    }
    free(hc); free(ha); free(hb); free(ref); free(got);
    wgml_tensor_free(c); wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(o);
}

static void test_where(void) {
    double t0 = now();
    const shp cases[][3] = {
        {S(7), S(7), S(7)},
        {S(37), S(37), S(37)},
        {S(129), S(129), S(129)},
        {S(4, 33), S(4, 33), S(4, 33)},    /* vec4 */
        {S(4, 1, 6), S(1, 5, 1), S(6)},    /* three-way, mixed rank */
        {S(1), S(3, 7), S(7)},             /* one-element cond */
        {S(5, 1), S(3, 1, 1), S(1, 7)},    /* 105 outputs */
        {S(2, 3, 4), S(1), S(2, 3, 4)},    /* one-element a, vec4 */
        {S(1), S(4, 6), S(4, 6)},          /* one-element cond, vec4 */
        {S(1, 1), S(37), S(1)},            /* one-element cond and b, scalar lanes */
        {S(4, 1, 8), S(5, 1), S(8)},       /* vec4 broadcast path: cond words, a splat */
        {S(3, 4, 1), S(3, 4, 12), S(12)},  /* vec4 broadcast path: cond splat */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) case_where(&cases[i][0], &cases[i][1], &cases[i][2], NULL);
    shp c = S(3, 1, 5), a = S(4, 1), b = S(2, 1, 1, 1);
    case_where(&c, &a, &b, "where_bcast");
    printf("  where: %.2f s\n", now() - t0);
}

/* ------------------------------------------------------------------ NaN */

/* NaN propagates through minimum, maximum, clamp and relu (as in PyTorch); comparisons with NaN
 * are false except ne. */
static void test_nan(void) {
    int64_t n = 8;
    float ha[8] = {NAN, 1, -2, NAN, 0.5f, -8, 0, INFINITY}, hb[8] = {1, NAN, 0.5f, NAN, 3, 1, 0, 1};
    wgml_tensor *a = th_tensor_f32(1, &n, ha), *b = th_tensor_f32(1, &n, hb);
    for (int op = B_MIN; op <= B_MAX; op++) {
        float *got = th_read_f32(call_binary(op, a, b, 1));
        bool ok = got != NULL;
        for (int i = 0; ok && i < 8; i++) {
            bool want_nan = isnan(ha[i]) || isnan(hb[i]);
            double want = ref_binary(op, ha[i], hb[i], 1);
            ok = want_nan ? isnan(got[i]) : got[i] == want;
        }
        th_check(ok, "%s propagates NaN", BNAME[op]);
        free(got);
    }
    float *got = th_read_f32(wgml_clamp(T.g, a, -1, 1));
    th_check(got && isnan(got[0]) && isnan(got[3]) && got[1] == 1 && got[2] == -1 && got[7] == 1, "clamp keeps NaN");
    free(got);
    got = th_read_f32(wgml_relu(T.g, a));
    th_check(got && isnan(got[0]) && isnan(got[3]) && got[2] == 0 && got[7] == INFINITY, "relu keeps NaN");
    free(got);
    for (int op = 0; op < N_C; op++) {
        uint8_t ref[8];
        for (int i = 0; i < 8; i++) ref[i] = ref_cmp(op, ha[i], hb[i]);
        char name[64];
        snprintf(name, sizeof name, "%s with NaN operands", CNAME[op]);
        wgml_tensor *o = call_cmp(op, a, b);
        check_bool(name, o, ref, 8);
        wgml_tensor_free(o);
    }
    wgml_tensor_free(a); wgml_tensor_free(b);
}

/* ------------------------------------------------------------------ large grid */

/* 18,000,002 outputs on the broadcast path; the innermost dim (2) is short, so one element per
 * thread, 256 per workgroup: 70,313 workgroups, more than one grid dimension holds. */
static void test_huge_grid(void) {
    double t0 = now();
    int64_t m = 9000001, sa[2] = {m, 2}, sb[1] = {2};
    size_t n = (size_t)(m * 2);
    float *ha = th_random(n, -1, 1), hb[2] = {0.25f, -3.0f};
    wgml_tensor *a = th_tensor_f32(2, sa, ha), *b = th_tensor_f32(1, sb, hb);
    float *got = th_read_f32(wgml_add(T.g, a, b, 2.0f));
    size_t bad = 0, first = 0;
    for (size_t i = 0; got && i < n; i++) {
        double ref = (double)ha[i] + 2.0 * hb[i % 2];
        if (!(fabs(got[i] - ref) <= 1e-6)) {
            if (!bad) first = i;
            bad++;
        }
    }
    th_check(got && bad == 0, "add [9000001, 2] + [2] (70,313 workgroups): %zu of %zu off, first at %zu", bad, n, first);
    if (got && !bad) printf("  ok %-48s n=%zu\n", "add over 70,313 workgroups", n);
    free(got);
    free(ha);
    wgml_tensor_free(a); wgml_tensor_free(b);
    printf("  huge grid: %.2f s\n", now() - t0);
}

/* ------------------------------------------------------------------ built graph */

/* y = where(not(not(gt(x, 0) and lt(x, 2))), 1.5·silu(x), mul(x, w)) + alpha·relu(x): recorded
 * in a built graph, compiled, run twice with new inputs. The scalar and one-operand forms read
 * arena intermediates (their inputs and outputs share the arena: the all-writable bindings). */
static void test_graph(void) {
    double t0 = now();
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {6, 37}, ws[1] = {37};
    int64_t n = xs[0] * xs[1];
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w = wgml_tensor_new(g, WGML_F32, 1, ws);
    wgml_tensor *c1 = wgml_gt_scalar(g, x, 0.0f);
    wgml_tensor *c2 = wgml_lt_scalar(g, x, 2.0f);
    wgml_tensor *c = wgml_logical_not(g, wgml_logical_not(g, wgml_logical_and(g, c1, c2)));
    wgml_tensor *s = wgml_mul_scalar(g, wgml_silu(g, x), 1.5f);
    wgml_tensor *m = wgml_mul(g, x, w);
    wgml_tensor *y0 = wgml_where(g, c, s, m);
    wgml_tensor *y = wgml_add(g, y0, wgml_relu(g, x), 0.5f);
    th_check(y && !wgml_graph_keep(g, y) && !wgml_graph_compile(g), "elementwise graph compiles: %s",
             wgml_last_error(T.ctx));
    float *hw = th_random((size_t)xs[1], -1, 1);
    wgml_tensor_write(w, hw, wgml_tensor_nbytes(w));
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)n, -3, 3);
        wgml_tensor_write(x, hx, wgml_tensor_nbytes(x));
        th_check(!wgml_graph_run(g), "graph run: %s", wgml_last_error(T.ctx));
        double *ref = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            double v = hx[i];
            double sel = (v > 0 && v < 2) ? 1.5 * v * ref_sigmoid(v) : v * hw[i % xs[1]];
            ref[i] = sel + 0.5 * (v > 0 ? v : 0);
        }
        float *got = malloc(wgml_tensor_nbytes(y));
        th_check(!wgml_tensor_read(y, got, wgml_tensor_nbytes(y)), "read graph output");
        th_close(run ? "graph run 2" : "graph run 1", got, ref, (size_t)n, 1e-6, 1e-5);
        free(got); free(hx); free(ref);
    }
    free(hw);
    wgml_graph_free(g);
    printf("  graph: %.2f s\n", now() - t0);
}

/* ------------------------------------------------------------------ bad input */

static void test_bad_input(void) {
    float z[64] = {0};
    uint8_t zb[64] = {0};
    shp s23 = S(2, 3), s4 = S(4), s3 = S(3);
    wgml_tensor *a = tf32(&s23, z), *b = tf32(&s4, z), *c3 = tf32(&s3, z);
    wgml_tensor *bl = tbool(&s23, zb);
    int32_t zi[8] = {0};
    wgml_tensor *ai = th_tensor_i32(2, s23.d, zi);
    th_expect_error("add shape mismatch", wgml_add(T.g, a, b, 1) == NULL, WGML_ERR_SHAPE, "add", "a [2, 3]", "b [4]",
                    "broadcast", NULL);
    th_expect_error("pow shape mismatch", wgml_pow(T.g, b, a) == NULL, WGML_ERR_SHAPE, "pow", "[4]", "[2, 3]", NULL);
    th_expect_error("gt shape mismatch", wgml_gt(T.g, a, b) == NULL, WGML_ERR_SHAPE, "gt", "[2, 3]", "[4]", NULL);
    th_expect_error("where shape mismatch", wgml_where(T.g, bl, c3, b) == NULL, WGML_ERR_SHAPE, "where", "cond [2, 3]",
                    "a [3]", "b [4]", NULL);
    th_expect_error("add NULL b", wgml_add(T.g, a, NULL, 1) == NULL, WGML_ERR_ARG, "add", "b is NULL", NULL);
    th_expect_error("relu NULL", wgml_relu(T.g, NULL) == NULL, WGML_ERR_ARG, "relu", "x is NULL", NULL);
    th_expect_error("where NULL a", wgml_where(T.g, bl, NULL, a) == NULL, WGML_ERR_ARG, "where", "a is NULL", NULL);
    th_expect_error("mul_scalar NULL", wgml_mul_scalar(T.g, NULL, 2) == NULL, WGML_ERR_ARG, "mul_scalar", NULL);
    th_check(wgml_add(NULL, a, a, 1) == NULL, "NULL graph gives NULL");
    th_expect_error("logical_and of f32", wgml_logical_and(T.g, a, a) == NULL, WGML_ERR_DTYPE, "logical_and",
                    "must be bool", "f32", NULL);
    th_expect_error("logical_not of f32", wgml_logical_not(T.g, a) == NULL, WGML_ERR_DTYPE, "logical_not", "bool", NULL);
    th_expect_error("where cond f32", wgml_where(T.g, a, a, a) == NULL, WGML_ERR_DTYPE, "where", "cond must be bool",
                    NULL);
    th_expect_error("where a bool", wgml_where(T.g, bl, bl, a) == NULL, WGML_ERR_DTYPE, "where", "a must be f32", NULL);
    th_expect_error("lt of bool", wgml_lt(T.g, bl, a) == NULL, WGML_ERR_DTYPE, "lt", "a must be f32", "bool", NULL);
    th_expect_error("eq_scalar of i32", wgml_eq_scalar(T.g, ai, 1) == NULL, WGML_ERR_DTYPE, "eq_scalar", "i32", NULL);
    th_expect_error("add of i32", wgml_add(T.g, ai, a, 1) == NULL, WGML_ERR_DTYPE, "add", "a must be f32", "i32", NULL);
    th_expect_error("gelu of bool", wgml_gelu(T.g, bl, 0) == NULL, WGML_ERR_DTYPE, "gelu", "must be f32", NULL);
    th_expect_error("unknown unary op", wgml_unary(T.g, (wgml_unary_op)99, a) == NULL, WGML_ERR_ARG, "unknown", NULL);
    th_expect_error("unknown binary op", wgml_binary(T.g, (wgml_binary_op)-1, a, a, 1) == NULL, WGML_ERR_ARG, "unknown",
                    NULL);
    wgml_graph *other = wgml_graph_new(T.ctx);
    wgml_tensor *foreign = wgml_tensor_new(other, WGML_F32, 2, s23.d);
    th_expect_error("operand of another graph", wgml_add(T.g, a, foreign, 1) == NULL, WGML_ERR_ARG, "add",
                    "another graph", NULL);
    wgml_graph_free(other);
    /* the context still works */
    float ones[6] = {1, 2, 3, 4, 5, 6};
    wgml_tensor *t = tf32(&s23, ones);
    float *got = th_read_f32(wgml_add(T.g, t, t, 1));
    double ref[6] = {2, 4, 6, 8, 10, 12};
    th_close("add after errors", got, ref, 6, 0, 0);
    free(got);
    wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(c3); wgml_tensor_free(bl);
    wgml_tensor_free(ai); wgml_tensor_free(t);
}

int main(int argc, char **argv) {
    th_init_args("test_elementwise", argc, argv);
    double t0 = now();
    test_binary();
    test_binary_scalar();
    test_unary();
    test_compare();
    test_logical();
    test_where();
    test_nan();
    test_graph();
    test_bad_input();
    if (!th_dumping()) test_huge_grid();
    printf("  total: %.2f s\n", now() - t0);
    return th_done();
}
