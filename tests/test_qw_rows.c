/* wgml_qembedding_rows: the lookup in one row part of a table (the model holds a vocabulary
 * matrix over the storage-binding limit in parts). Random Q8_0 and Q4_1 tables of V rows are
 * uploaded as two or three parts; each part's lookup of random ids (some outside every part's
 * range, some negative) is checked against the dequantised rows written out here in double
 * (zero rows for ids outside the part), and the parts' sum against the whole table's lookup.
 * Bad input: a negative row0. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint16_t f2h(float f) { /* normal values only */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int e = (int)((x >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(e <= 0 ? sign : sign | ((uint32_t)e << 10) | ((x >> 13) & 0x3ff));
}
static double h2d(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

/* Random blocks of type (Q8_0: d, 32 int8; Q4_1: d, m, 16 bytes of nibbles) for [n, k]; w gets
 * the dequantised values. */
static uint8_t *make_table(int type, int64_t n, int64_t k, double *w, size_t *bytes) {
    size_t bb = type == WGML_GGML_Q8_0 ? 34 : 20;
    *bytes = (size_t)(n * k / 32) * bb;
    uint8_t *data = calloc(1, *bytes), *p = data;
    for (int64_t b = 0; b < n * k / 32; b++, p += bb) {
        double *o = w + b * 32;
        uint16_t d = f2h((float)th_uniform(0.01, 0.03));
        memcpy(p, &d, 2);
        if (type == WGML_GGML_Q8_0) {
            for (int j = 0; j < 32; j++) {
                int8_t q = (int8_t)floor(th_uniform(-127, 128));
                p[2 + j] = (uint8_t)q;
                o[j] = h2d(d) * q;
            }
        } else {
            uint16_t mn = f2h((float)th_uniform(-0.2, -0.05));
            memcpy(p + 2, &mn, 2);
            for (int j = 0; j < 16; j++) {
                int lo = (int)floor(th_uniform(0, 16)) & 15, hi = (int)floor(th_uniform(0, 16)) & 15;
                p[4 + j] = (uint8_t)(lo | hi << 4);
                o[j] = h2d(d) * lo + h2d(mn);
                o[j + 16] = h2d(d) * hi + h2d(mn);
            }
        }
    }
    return data;
}

static void case_rows(int type, int64_t V, int64_t D, int parts, int64_t NT) {
    double *w = malloc(sizeof(double) * (size_t)(V * D));
    size_t bytes;
    uint8_t *data = make_table(type, V, D, w, &bytes);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)NT);
    for (int64_t t = 0; t < NT; t++) ids[t] = (int32_t)floor(th_uniform(-3, (double)V + 3)); /* some outside [0, V) */
    wgml_tensor *it = th_tensor_i32(1, &NT, ids);
    size_t row = bytes / (size_t)V;
    int64_t per = (V + parts - 1) / parts;
    double *ref = malloc(sizeof(double) * (size_t)(NT * D)), *sum = calloc((size_t)(NT * D), sizeof(double));
    float *acc = calloc((size_t)(NT * D), sizeof(float));
    char name[128];
    for (int p = 0; p < parts; p++) {
        int64_t r0 = p * per, rn = V - r0 < per ? V - r0 : per;
        wgml_qweight *q = wgml_qweight_upload_gguf(T.g, type, data + row * (size_t)r0, row * (size_t)rn, rn, D);
        if (!th_check(q != NULL, "upload part %d: %s", p, wgml_last_error(T.ctx))) continue;
        float *got = th_read_f32(wgml_qembedding_rows(T.g, q, it, r0));
        for (int64_t t = 0; t < NT; t++)
            for (int64_t c = 0; c < D; c++) {
                int in = ids[t] >= r0 && ids[t] < r0 + rn;
                ref[t * D + c] = in ? w[(int64_t)ids[t] * D + c] : 0.0;
                sum[t * D + c] += ref[t * D + c];
            }
        snprintf(name, sizeof name, "qembedding_rows %s V%lld D%lld part %d of %d (rows %lld..%lld)",
                 type == WGML_GGML_Q8_0 ? "Q8_0" : "Q4_1", (long long)V, (long long)D, p, parts, (long long)r0,
                 (long long)(r0 + rn - 1));
        if (got) {
            th_close(name, got, ref, (size_t)(NT * D), 1e-6, 1e-6); /* dequantisation: exact, or one f32 rounding */
            for (int64_t i = 0; i < NT * D; i++) acc[i] += got[i];
        }
        free(got);
        wgml_qweight_free(q);
    }
    /* the parts' sum is the whole table's lookup for ids in range (clamped ids aside) */
    for (int64_t t = 0; t < NT; t++)
        if (ids[t] < 0 || ids[t] >= V)
            for (int64_t c = 0; c < D; c++) sum[t * D + c] = 0;
    snprintf(name, sizeof name, "qembedding_rows %s V%lld: the parts' sum", type == WGML_GGML_Q8_0 ? "Q8_0" : "Q4_1",
             (long long)V);
    th_close(name, acc, sum, (size_t)(NT * D), 1e-6, 1e-6);
    free(w), free(data), free(ids), free(ref), free(sum), free(acc);
    wgml_tensor_free(it);
}

int main(int argc, char **argv) {
    th_init_args("test_qw_rows", argc, argv);
    case_rows(WGML_GGML_Q8_0, 300, 64, 2, 97);
    case_rows(WGML_GGML_Q4_1, 257, 96, 3, 70000); /* more tokens than one grid dimension holds */
    case_rows(WGML_GGML_Q8_0, 50, 640, 4, 33);    /* Gemma 3's width */
    double w[32 * 32];
    size_t bytes;
    uint8_t *data = make_table(WGML_GGML_Q8_0, 32, 32, w, &bytes);
    wgml_qweight *q = wgml_qweight_upload_gguf(T.g, WGML_GGML_Q8_0, data, bytes, 32, 32);
    int64_t one = 1;
    int32_t id = 0;
    wgml_tensor *it = th_tensor_i32(1, &one, &id);
    th_expect_error("qembedding_rows: row0 -1", wgml_qembedding_rows(T.g, q, it, -1) == NULL, WGML_ERR_ARG,
                    "qembedding_rows", "row0", NULL);
    wgml_qweight_free(q);
    wgml_tensor_free(it);
    free(data);
    return th_done();
}
