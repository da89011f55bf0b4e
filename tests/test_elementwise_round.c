/* The rounding and trigonometric unary ops (floor, ceil, trunc, round with halves to even,
 * round to decimals, sin, cos), their gradients, and division with a rounding mode (trunc,
 * floor; tensor, broadcast and scalar forms) against double-precision loops on fresh random
 * inputs (halves, integers and near-integer quotients included); the integer kernel (i32
 * add, sub, mul, minimum, maximum and rounding divisions) against exact integer arithmetic;
 * bad input. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ unary */

static double ref_unary(wgml_unary_op op, double x) {
    switch (op) {
    case WGML_UN_FLOOR: return floor(x);
    case WGML_UN_CEIL: return ceil(x);
    case WGML_UN_TRUNC: return trunc(x);
    case WGML_UN_ROUND: return nearbyint(x); /* the default rounding mode: halves to even */
    case WGML_UN_SIN: return sin(x);
    default: return cos(x);
    }
}

static const char *uname(wgml_unary_op op) {
    static const char *const n[] = {"floor", "ceil", "trunc", "round", "sin", "cos"};
    return n[op - WGML_UN_FLOOR];
}

/* Random values with a third of them on the half-integer grid (ties for round) and some
 * integers and negative zeros. */
static float *rounding_inputs(int64_t n, double span) {
    float *x = th_random((size_t)n, -span, span);
    for (int64_t i = 0; i < n; i++) {
        double u = th_uniform(0, 1);
        if (u < 0.33) x[i] = (float)(0.5 * floor(2 * x[i]));
        else if (u < 0.4) x[i] = (float)floor(x[i]);
        else if (u < 0.42) x[i] = -0.0f;
    }
    return x;
}

static void case_unary(wgml_unary_op op, int64_t n) {
    bool trig = op == WGML_UN_SIN || op == WGML_UN_COS;
    float *hx = trig ? th_random((size_t)n, -100, 100) : rounding_inputs(n, 40);
    if (trig && n > 8) hx[0] = 2e4f, hx[1] = -3.14159265f, hx[2] = 0, hx[3] = 1e-7f;
    wgml_tensor *x = th_tensor_f32(1, &n, hx);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) ref[i] = ref_unary(op, hx[i]);
    float *got = th_read_f32(wgml_unary(T.g, op, x));
    char name[96];
    snprintf(name, sizeof name, "%s n=%lld", uname(op), (long long)n);
    /* rounding is exact; sin/cos after the 2 pi reduction to ~1 ulp of 1 */
    th_close(name, got, ref, (size_t)n, trig ? 1e-6 : 0, 0);
    if (!trig && got) {
        /* the sign of a zero result follows the input (-0.4 rounds to -0) as in C */
        int bad = 0;
        int64_t first = -1;
        for (int64_t i = 0; i < n; i++)
            if (ref[i] == 0 && !signbit(got[i]) != !signbit(ref[i])) bad++, first = first < 0 ? i : first;
        th_check(bad == 0, "%s: %d zero results with the wrong sign (first: %g gave %g)", name, bad,
                 first >= 0 ? hx[first] : 0, first >= 0 ? got[first] : 0);
    }
    free(hx); free(ref); free(got);
    wgml_tensor_free(x);
}

/* PyTorch's round(x, decimals) in f32: the product (or quotient) is rounded to f32 before it
 * is rounded to an integer, then scaled back in f32; emulated here with explicit float casts. */
static void case_round_decimals(int d, int64_t n) {
    float *hx = th_random((size_t)n, -50, 50);
    for (int64_t i = 0; i < n; i += 3) hx[i] = (float)(floor(hx[i] * 8) / 8); /* ties at d = 0..2 */
    wgml_tensor *x = th_tensor_f32(1, &n, hx);
    float ten = 1.0f;
    for (int i = 0; i < abs(d); i++) ten *= 10.0f;
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (d >= 0) ref[i] = (float)(nearbyint((double)(float)((double)hx[i] * ten)) / ten);
        else ref[i] = (float)(nearbyint((double)(float)((double)hx[i] / ten)) * ten);
    }
    float *got = th_read_f32(wgml_round_decimals(T.g, x, d));
    char name[96];
    snprintf(name, sizeof name, "round decimals=%d n=%lld", d, (long long)n);
    th_close(name, got, ref, (size_t)n, 0, 0);
    free(hx); free(ref); free(got);
    wgml_tensor_free(x);
}

/* The gradients: sin' = cos, cos' = -sin, the rounding ops 0. */
static void case_unary_backward(wgml_unary_op op, int64_t n) {
    float *hx = th_random((size_t)n, -20, 20), *hdy = th_random((size_t)n, -2, 2);
    wgml_tensor *x = th_tensor_f32(1, &n, hx), *dy = th_tensor_f32(1, &n, hdy);
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        ref[i] = op == WGML_UN_SIN ? hdy[i] * cos(hx[i]) : op == WGML_UN_COS ? -hdy[i] * sin(hx[i]) : 0.0;
    float *got = th_read_f32(wgml_unary_backward(T.g, op, x, dy));
    char name[96];
    snprintf(name, sizeof name, "%s backward n=%lld", uname(op), (long long)n);
    th_close(name, got, ref, (size_t)n, 2e-6, 0);
    free(hx); free(hdy); free(ref); free(got);
    wgml_tensor_free(x); wgml_tensor_free(dy);
}

/* ------------------------------------------------------------------ division with rounding */

typedef struct shp {
    int rank;
    int64_t d[4];
} shp;

static int64_t numel_of(const shp *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->d[i];
    return n;
}

/* Row-major index into t of the element output element i (shape o, t broadcast to it) reads. */
static int64_t src_index(int64_t i, const shp *o, const shp *t) {
    int64_t c[4], idx = 0;
    for (int d = o->rank - 1; d >= 0; d--) c[d] = i % o->d[d], i /= o->d[d];
    for (int d = 0; d < t->rank; d++) {
        int od = d + (o->rank - t->rank);
        idx = idx * t->d[d] + (t->d[d] == 1 ? 0 : c[od]);
    }
    return idx;
}

/* Operands: integers (kind 0: exact quotients included), plain random values (1), and values
 * one ulp off k·b (2: quotients next to an integer). Divisors are kept away from 0. */
static void div_operands(float *a, int64_t na, float *b, int64_t nb, int kind) {
    for (int64_t i = 0; i < nb; i++) {
        double v = kind == 0 ? floor(th_uniform(-10, 10)) : th_uniform(-3, 3);
        if (fabs(v) < 0.25) v = v < 0 ? -1 : 1;
        b[i] = (float)v;
    }
    for (int64_t i = 0; i < na; i++)
        a[i] = kind == 0 ? (float)floor(th_uniform(-100, 100)) : (float)th_uniform(-30, 30);
    if (kind == 2 && na == nb) /* a = k·b ± 1 ulp: quotients next to an integer (k ≠ 0: no subnormals, which GPUs flush) */
        for (int64_t i = 0; i < na; i++) {
            float k = (float)floor(th_uniform(1, 20)) * (th_uniform(0, 1) < 0.5 ? -1 : 1), p = k * b[i];
            a[i] = nextafterf(p, th_uniform(0, 1) < 0.5 ? -INFINITY : INFINITY);
        }
}

/* Both modes round the f32 quotient (trunc mode is PyTorch's rule; floor mode differs from the
 * floor of the exact quotient only there): integer-valued operands (kind 0) must be exact, and
 * elsewhere, where the exact quotient is within a few roundings of an integer, either
 * neighbour is accepted. */
static void check_div(const char *name, bool floor_mode, bool exact, const float *got, const float *ha, const float *hb,
                      const int64_t *ia, const int64_t *ib, int64_t n) {
    if (!got) return;
    int bad = 0;
    int64_t first = -1;
    for (int64_t i = 0; i < n; i++) {
        double a = ha[ia[i]], b = hb[ib[i]], q = a / b;
        double want = floor_mode ? floor(q) : trunc(q);
        bool ok = got[i] == want;
        if (!ok && !exact && fabs(q - nearbyint(q)) <= 1e-6 * fabs(q)) ok = fabs(got[i] - want) == 1;
        if (!ok && first < 0) first = i;
        bad += !ok;
    }
    th_check(bad == 0, "%s: %d of %lld wrong (first at %lld: %.9g / %.9g gave %.9g)", name, bad, (long long)n,
             (long long)first, first >= 0 ? ha[ia[first]] : 0, first >= 0 ? hb[ib[first]] : 0,
             first >= 0 ? got[first] : 0);
}

static void case_div(bool floor_mode, shp sa, shp sb, int kind) {
    shp so = sa.rank >= sb.rank ? sa : sb;
    for (int d = 0; d < so.rank; d++) {
        int da = d - (so.rank - sa.rank), db = d - (so.rank - sb.rank);
        int64_t x = da >= 0 ? sa.d[da] : 1, y = db >= 0 ? sb.d[db] : 1;
        so.d[d] = x > y ? x : y;
    }
    int64_t na = numel_of(&sa), nb = numel_of(&sb), no = numel_of(&so);
    float *ha = malloc(sizeof(float) * (size_t)na), *hb = malloc(sizeof(float) * (size_t)nb);
    div_operands(ha, na, hb, nb, kind);
    wgml_tensor *a = th_tensor_f32(sa.rank, sa.d, ha), *b = th_tensor_f32(sb.rank, sb.d, hb);
    float *got = th_read_f32(floor_mode ? wgml_div_floor(T.g, a, b) : wgml_div_trunc(T.g, a, b));
    int64_t *ia = malloc(sizeof(int64_t) * (size_t)no), *ib = malloc(sizeof(int64_t) * (size_t)no);
    for (int64_t i = 0; i < no; i++) ia[i] = src_index(i, &so, &sa), ib[i] = src_index(i, &so, &sb);
    char name[96];
    snprintf(name, sizeof name, "div_%s %lld/%lld elements kind %d", floor_mode ? "floor" : "trunc", (long long)na,
             (long long)nb, kind);
    check_div(name, floor_mode, kind == 0, got, ha, hb, ia, ib, no);
    /* the scalar form with the divisor's first element */
    if (nb == 1 || kind == 0) {
        float *gs = th_read_f32(wgml_binary_scalar(T.g, floor_mode ? WGML_BIN_DIV_FLOOR : WGML_BIN_DIV_TRUNC, a, hb[0], 1));
        for (int64_t i = 0; i < na; i++) ia[i] = i, ib[i] = 0;
        char sname[120];
        snprintf(sname, sizeof sname, "%s (scalar %g)", name, hb[0]);
        check_div(sname, floor_mode, kind == 0, gs, ha, hb, ia, ib, na);
        free(gs);
    }
    free(ha); free(hb); free(ia); free(ib); free(got);
    wgml_tensor_free(a); wgml_tensor_free(b);
}

/* Division by zero gives a / b (±inf), as PyTorch's float floor division. */
static void div_by_zero(void) {
    int64_t n = 4;
    float ha[4] = {3, -2, 5.5f, -0.5f}, hb[4] = {0, 0, -0.0f, 0};
    wgml_tensor *a = th_tensor_f32(1, &n, ha), *b = th_tensor_f32(1, &n, hb);
    float *got = th_read_f32(wgml_div_floor(T.g, a, b));
    double ref[4] = {INFINITY, -INFINITY, -INFINITY, -INFINITY};
    th_close("div_floor by zero", got, ref, 4, 0, 0);
    free(got);
    wgml_tensor_free(a); wgml_tensor_free(b);
}

/* Through autograd on a built graph: d/da sum(div_floor(a, b) + round(a, 1) + sin(a)) is cos(a)
 * (the division modes and rounding have zero gradient, as PyTorch). */
static void grads(void) {
    int64_t n = 8;
    float *ha = th_random(8, -5, 5), *hb = th_random(8, 1, 3);
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *a = wgml_tensor_new(g, WGML_F32, 1, &n), *b = wgml_tensor_new(g, WGML_F32, 1, &n);
    wgml_tensor_set_trainable(a, 1);
    wgml_tensor *y = wgml_add(g, wgml_div_floor(g, a, b), wgml_round_decimals(g, a, 1), 1);
    wgml_tensor *loss = wgml_sum(g, wgml_add(g, y, wgml_sin(g, a), 1), NULL, 0, 0);
    bool ok = !wgml_backward(g, loss, 1) && !wgml_graph_compile(g) && !wgml_tensor_write(a, ha, sizeof(float) * 8) &&
              !wgml_tensor_write(b, hb, sizeof(float) * 8) && !wgml_graph_run(g);
    if (th_check(ok, "gradients: %s", wgml_last_error(T.ctx))) {
        float *ga = th_read_f32(wgml_tensor_grad(a));
        double ref[8];
        for (int i = 0; i < 8; i++) ref[i] = cos(ha[i]);
        th_close("gradient of div_floor + round + sin", ga, ref, 8, 1e-6, 0);
        free(ga);
    }
    free(ha); free(hb);
    wgml_graph_free(g);
}

/* ------------------------------------------------------------------ i32 operands */

static int64_t ref_int(wgml_binary_op op, int64_t a, int64_t b, int64_t alpha) {
    switch (op) {
    case WGML_BIN_ADD: return a + alpha * b;
    case WGML_BIN_SUB: return a - alpha * b;
    case WGML_BIN_MUL: return a * b;
    case WGML_BIN_MINIMUM: return a < b ? a : b;
    case WGML_BIN_MAXIMUM: return a > b ? a : b;
    case WGML_BIN_DIV_TRUNC: return a / b; /* C truncates */
    default: return a / b - (a % b != 0 && (a < 0) != (b < 0));
    }
}

static int32_t *read_i32(wgml_tensor *t, int64_t n) {
    int32_t *h = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!t || wgml_tensor_read(t, h, sizeof(int32_t) * (size_t)n)) {
        th_check(false, "i32 readback: %s", wgml_last_error(T.ctx));
        free(h);
        return NULL;
    }
    return h;
}

/* Integer operands of both signs (divisors non-zero), tensor-tensor with broadcasting and the
 * scalar form, against exact integer arithmetic. */
static void case_int(wgml_binary_op op, shp sa, shp sb) {
    shp so = sa.rank >= sb.rank ? sa : sb;
    for (int d = 0; d < so.rank; d++) {
        int da = d - (so.rank - sa.rank), db = d - (so.rank - sb.rank);
        int64_t x = da >= 0 ? sa.d[da] : 1, y = db >= 0 ? sb.d[db] : 1;
        so.d[d] = x > y ? x : y;
    }
    int64_t na = numel_of(&sa), nb = numel_of(&sb), no = numel_of(&so);
    int32_t *ha = malloc(sizeof(int32_t) * (size_t)na), *hb = malloc(sizeof(int32_t) * (size_t)nb);
    for (int64_t i = 0; i < na; i++) ha[i] = (int32_t)floor(th_uniform(-1000, 1000));
    for (int64_t i = 0; i < nb; i++) {
        hb[i] = (int32_t)floor(th_uniform(-12, 12));
        if (hb[i] == 0) hb[i] = 7;
    }
    wgml_tensor *a = th_tensor_i32(sa.rank, sa.d, ha), *b = th_tensor_i32(sb.rank, sb.d, hb);
    int32_t alpha = op == WGML_BIN_ADD || op == WGML_BIN_SUB ? 3 : 1;
    wgml_tensor *o = wgml_binary(T.g, op, a, b, (float)alpha);
    int32_t *got = read_i32(o, no);
    int bad = 0;
    for (int64_t i = 0; got && i < no; i++)
        bad += got[i] != ref_int(op, ha[src_index(i, &so, &sa)], hb[src_index(i, &so, &sb)], alpha);
    th_check(got && o && wgml_tensor_dtype(o) == WGML_I32 && bad == 0, "i32 binary op %d, %lld/%lld elements: %d wrong",
             (int)op, (long long)na, (long long)nb, bad);
    free(got);
    /* scalar form with b's first element */
    wgml_tensor *os = wgml_binary_scalar(T.g, op, a, (float)hb[0], (float)alpha);
    got = read_i32(os, na);
    bad = 0;
    for (int64_t i = 0; got && i < na; i++) bad += got[i] != ref_int(op, ha[i], hb[0], alpha);
    th_check(got && bad == 0, "i32 binary op %d scalar %d: %d wrong", (int)op, hb[0], bad);
    free(got); free(ha); free(hb);
    wgml_tensor_free(a); wgml_tensor_free(b); wgml_tensor_free(o); wgml_tensor_free(os);
}

static void bad_input(void) {
    int64_t n = 4;
    int32_t hi[4] = {1, 2, 3, 4};
    wgml_tensor *xi = th_tensor_i32(1, &n, hi);
    float hx[4] = {1, 2, 3, 4};
    wgml_tensor *x = th_tensor_f32(1, &n, hx);
    th_expect_error("round decimals out of range", wgml_round_decimals(T.g, x, 39) == NULL, WGML_ERR_ARG,
                    "round_decimals", "39", NULL);
    th_expect_error("floor of i32", wgml_floor(T.g, xi) == NULL, WGML_ERR_DTYPE, "floor", "f32", NULL);
    th_expect_error("true division of i32", wgml_div(T.g, xi, xi) == NULL, WGML_ERR_DTYPE, "div", "i32", NULL);
    th_expect_error("i32 with a fractional scalar", wgml_binary_scalar(T.g, WGML_BIN_DIV_FLOOR, xi, 2.5f, 1) == NULL,
                    WGML_ERR_ARG, "div_floor_scalar", "integer", NULL);
    th_expect_error("i32 with f32", wgml_div_floor(T.g, xi, x) == NULL, WGML_ERR_DTYPE, "div_floor", NULL);
    th_expect_error("sin NULL", wgml_sin(T.g, NULL) == NULL, WGML_ERR_ARG, "sin", NULL);
    th_expect_error("unary_backward unknown", wgml_unary_backward(T.g, (wgml_unary_op)40, x, x) == NULL, WGML_ERR_ARG,
                    "unknown", NULL);
    wgml_tensor_free(xi); wgml_tensor_free(x);
}

#define S(...) ((shp){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

int main(int argc, char **argv) {
    th_init_args("test_elementwise_round", argc, argv);
    const int64_t sizes[] = {7, 37, 1024};
    for (int op = WGML_UN_FLOOR; op <= WGML_UN_COS; op++)
        for (int i = 0; i < 3; i++) case_unary((wgml_unary_op)op, sizes[i]);
    for (int d = -2; d <= 3; d++) case_round_decimals(d, d == 0 ? 37 : 256);
    for (int op = WGML_UN_FLOOR; op <= WGML_UN_COS; op++) case_unary_backward((wgml_unary_op)op, 129);
    for (int fm = 0; fm < 2; fm++) {
        for (int kind = 0; kind < 3; kind++) case_div(fm, S(10, 10), S(10, 10), kind);
        case_div(fm, S(3, 4, 5), S(5), 0);
        case_div(fm, S(2, 1, 6), S(3, 1), 1);
        case_div(fm, S(37), S(1), 1);
    }
    const wgml_binary_op iops[] = {WGML_BIN_ADD, WGML_BIN_SUB, WGML_BIN_MUL, WGML_BIN_MINIMUM, WGML_BIN_MAXIMUM,
                                   WGML_BIN_DIV_TRUNC, WGML_BIN_DIV_FLOOR};
    for (int k = 0; k < 7; k++) {
        case_int(iops[k], S(10, 10), S(10, 10));
        case_int(iops[k], S(3, 4, 5), S(4, 1));
        case_int(iops[k], S(37), S(37));
    }
    div_by_zero();
    grads();
    bad_input();
    return th_done();
}
