/* wgml_cast on the GPU: every conversion between f32, i32 and bool, against a host reference
 * of PyTorch's rules (truncation toward zero, x != 0, 0 / 1) with the edges pinned by wgml
 * (saturation, NaN -> 0), on fresh random inputs with the special values mixed in, sizes that
 * are and are not a multiple of four, the eager graph and a built graph; outputs come poisoned
 * (NaN) from the harness's context, so an element the kernel skips fails. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const wgml_dtype DT[3] = {WGML_F32, WGML_I32, WGML_BOOL};

/* Random input of dtype d: f32 uniform(-100, 100) with specials, i32 over the whole range
 * with small values and the extremes, bool bytes 0, 1 and other non-zero bytes. */
static void *make_input(wgml_dtype d, int64_t n) {
    if (d == WGML_BOOL) {
        uint8_t *b = malloc((size_t)n);
        for (int64_t i = 0; i < n; i++) b[i] = th_uniform(0, 1) < 0.5 ? 0 : th_uniform(0, 1) < 0.8 ? 1 : 7;
        return b;
    }
    uint32_t *w = malloc(sizeof(uint32_t) * (size_t)n);
    static const float fs[] = {0.0f, -0.0f, 2.5f, -2.5f, 0.7f, -0.7f, 3e9f, -3e9f, 2147483520.0f, -2147483648.0f,
                               INFINITY, -INFINITY, NAN, 16777217.0f};
    static const int32_t is[] = {0, 1, -1, 2147483647, -2147483647 - 1, 16777217, -16777217, 33554435};
    for (int64_t i = 0; i < n; i++) {
        double r = th_uniform(0, 1);
        if (d == WGML_F32) {
            float f = r < 0.2 ? fs[(int)(th_uniform(0, 1) * 14) % 14] : (float)th_uniform(-100, 100);
            memcpy(&w[i], &f, 4);
        } else {
            int32_t k = r < 0.2 ? is[(int)(th_uniform(0, 1) * 8) % 8]
                        : r < 0.6 ? (int32_t)th_uniform(-1000, 1000)
                                  : (int32_t)th_uniform(-2147483648.0, 2147483647.0);
            memcpy(&w[i], &k, 4);
        }
    }
    return w;
}

/* Element i of the input as the reference reads it. */
static double in_value(wgml_dtype d, const void *x, int64_t i, bool *nan) {
    *nan = false;
    if (d == WGML_BOOL) return ((const uint8_t *)x)[i] != 0;
    if (d == WGML_I32) return ((const int32_t *)x)[i];
    float f = ((const float *)x)[i];
    *nan = isnan(f);
    return f;
}

static int check_case(wgml_dtype from, wgml_dtype to, int64_t n, bool built) {
    char name[96];
    snprintf(name, sizeof name, "cast %s -> %s, n %lld%s", wgml_dtype_name(from), wgml_dtype_name(to), (long long)n,
             built ? ", built graph" : "");
    void *x = make_input(from, n);
    wgml_graph *g = built ? wgml_graph_new(T.ctx) : T.g;
    wgml_tensor *tx = wgml_tensor_new(g, from, 1, &n);
    size_t in_bytes = tx ? wgml_tensor_nbytes(tx) : 0;
    bool ok = tx && !wgml_tensor_write(tx, x, in_bytes);
    wgml_tensor *out = ok ? wgml_cast(g, tx, to) : NULL;
    if (built && out) ok = !wgml_graph_keep(g, out) && !wgml_graph_compile(g) && !wgml_graph_run(g);
    size_t out_bytes = out ? wgml_tensor_nbytes(out) : 0;
    uint8_t *got = malloc(out_bytes + 4);
    ok = ok && out && wgml_tensor_dtype(out) == to && !wgml_tensor_read(out, got, out_bytes);
    int bad = 0;
    for (int64_t i = 0; ok && i < n && bad < 5; i++) {
        bool nan;
        double v = in_value(from, x, i, &nan);
        bool fine;
        double shown = 0;
        if (to == WGML_BOOL) {
            uint8_t want = nan || v != 0, b = got[i];
            fine = b == want;
            shown = b;
        } else if (to == WGML_I32) {
            int32_t k;
            memcpy(&k, got + 4 * i, 4);
            double t = nan ? 0 : trunc(v);
            int64_t want = t >= 2147483647.0 ? 2147483647 : t <= -2147483648.0 ? INT32_MIN : (int64_t)t;
            fine = k == want;
            shown = k;
        } else {
            float f;
            memcpy(&f, got + 4 * i, 4);
            shown = f;
            if (nan) fine = isnan(f);
            else if (from == WGML_F32) fine = f == (float)v && !signbit(f) == !signbit(v);
            else { /* i32 -> f32: the nearest f32, either neighbour at a tie */
                double ulp = fabs(v) < 16777216.0 ? 0 : ldexp(1.0, ilogb(v) - 23);
                fine = fabs((double)f - v) <= ulp / 2;
            }
        }
        if (!fine) {
            bad++;
            printf("    %s: element %lld: input %.9g gives %.9g\n", name, (long long)i, v, shown);
        }
    }
    th_check(ok && bad == 0, "%s%s%s", name, ok ? "" : ": ", ok ? "" : wgml_last_error(T.ctx));
    free(got);
    free(x);
    if (built) wgml_graph_free(g);
    else {
        wgml_tensor_free(out);
        wgml_tensor_free(tx);
    }
    return bad;
}

int main(int argc, char **argv) {
    th_init_args("test_cast", argc, argv);
    static const int64_t sizes[] = {1, 7, 1024, 70001};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int s = 0; s < 4; s++) check_case(DT[a], DT[b], sizes[s], false);
    check_case(WGML_F32, WGML_I32, 4099, true);
    check_case(WGML_BOOL, WGML_F32, 4099, true);
    check_case(WGML_I32, WGML_BOOL, 4099, true);
    /* refusals: u32 is not a cast dtype; a NULL tensor */
    int64_t four = 4;
    wgml_tensor *u = wgml_tensor_new(T.g, WGML_U32, 1, &four);
    th_expect_error("cast of a u32 tensor", wgml_cast(T.g, u, WGML_F32) == NULL, WGML_ERR_DTYPE, "cast", "u32", NULL);
    wgml_tensor *f = th_tensor_f32(1, &four, (float[4]){0});
    th_expect_error("cast to u32", wgml_cast(T.g, f, WGML_U32) == NULL, WGML_ERR_DTYPE, "cast", "only f32, i32 and bool",
                    NULL);
    th_expect_error("cast of NULL", wgml_cast(T.g, NULL, WGML_F32) == NULL, WGML_ERR_ARG, "cast", NULL);
    wgml_tensor_free(u);
    wgml_tensor_free(f);
    return th_done();
}
