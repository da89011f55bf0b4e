/* The op registry's elementwise operators with a wgml kernel of their own
 * (src/program/ops_elementwise.c), called as the program runner calls them, on the GPU, against
 * float64 references, with fresh random shapes and inputs each run (WGML_SEED repeats one) and
 * NaN-poisoned outputs: aten.expm1.default (tiny inputs, where exp(x) - 1 would cancel, and
 * the special values). */
#include "harness.h"
#include "program_slots.h"

#include <math.h>
#include <stdio.h>

static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)floor(th_uniform(0, 1) * (double)(hi - lo + 1) - 1e-12); }

/* expm1 of a random [rows, cols] float32 tensor: relative error 2e-6 (f32 rounding and the
 * kernel's series / exp switch at |x| = 0.5), inf past f32's range, -0 and NaN kept */
static void expm1_case(void) {
    int64_t d[2] = {irand(1, 5), irand(1, 40)}, n = d[0] * d[1];
    float *x = malloc((size_t)n * sizeof *x);
    double *ref = malloc((size_t)n * sizeof *ref);
    static const float special[6] = {-0.0f, 0.0f, 100.0f, -100.0f, NAN, 1e-20f};
    for (int64_t i = 0; i < n; i++) {
        double scale = th_uniform(0, 1) < 0.3 ? 1e-3 : th_uniform(0, 1) < 0.5 ? 1 : 10;
        x[i] = i < 6 && th_uniform(0, 1) < 0.5 ? special[i] : (float)(th_uniform(-1, 1) * scale);
        double r = expm1((double)x[i]);
        ref[i] = r > 3.4028234663852886e38 ? INFINITY : r;
    }
    slots s;
    s_init(&s, T.ctx, T.g);
    int32_t a[2] = {s_tensor(&s, VK_FLOAT32, 2, d, x), 0};
    a[1] = s_tensor(&s, VK_FLOAT32, 2, d, NULL);
    double *got = s_call(&s, "aten.expm1.default", a, 2) ? NULL : s_read(&s, a[1]);
    int64_t bad = !got;
    double worst = 0;
    for (int64_t i = 0; got && i < n; i++) {
        double err = isnan(ref[i]) ? (isnan(got[i]) ? 0 : INFINITY)
                     : isinf(ref[i]) ? (got[i] == ref[i] ? 0 : INFINITY)
                                     : fabs(got[i] - ref[i]) / fmax(fabs(ref[i]), 1e-38);
        worst = th_max_err(worst, err);
        bad += !(err <= 2e-6) || (ref[i] == 0 && signbit(ref[i]) != signbit(got[i]));
    }
    th_check(!bad, "aten.expm1.default float32 [%lld, %lld]: max rel err %.2e%s", (long long)d[0], (long long)d[1], worst,
             got ? "" : wgml_last_error(T.ctx));
    free(got), free(x), free(ref);
}

int main(int argc, char **argv) {
    th_init_args("program_elementwise", argc, argv);
    for (int rep = 0; rep < 6; rep++) expm1_case();
    return th_done();
}
