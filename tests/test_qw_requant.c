#define _POSIX_C_SOURCE 200809L
/* 4-bit / 8-bit weights' requant (symmetric, with a minimum, and every GGUF kind at its frozen
 * scales: the codes bit-exact, the round trip, the forward reading them), the table dequantised
 * and looked up (the embedding) on the GPU bit for bit against the host's dequantisation, and the
 * closed training loop in a built graph. Host weights and fp64 references: qw_host.h. Forward,
 * input gradient, host formats and bad input: test_qw.c.
 * Parts (th_run_parts; CTest runs each as test_qw_requant_<part>): q4-q8 (requant, the embedding
 * and the closed loop on the 4-bit and 8-bit kinds), kquant (the GGUF 5-bit and K kinds). */
#include "harness.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qw_host.h"

/* ------------------------------------------------------------------ requant */

static const float FRACS[8] = {0.3f, -0.4f, 2.7f, -3.3f, 6.4f, -6.4f, 13.2f, -21.7f};

/* Packs host codes [n, k] (one per byte) into the GPU layout words [n, kp/8] with padding `pad`. */
static void pack_words(const uint8_t *c, int64_t n, int64_t k, int64_t kp, uint32_t pad, uint32_t *words) {
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < kp / 8; j++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) {
                int64_t kk = j * 8 + i;
                w |= (kk < k ? c[r * k + kk] : pad) << (4 * i);
            }
            words[r * (kp / 8) + j] = w;
        }
}

static uint32_t *read_codes(const wgml_qweight *w) {
    size_t bytes = wgml_tensor_nbytes(w->codes);
    uint32_t *h = malloc(bytes);
    if (wgml_tensor_read(w->codes, h, bytes)) {
        th_check(false, "read codes: %s", wgml_last_error(T.ctx));
        free(h);
        return NULL;
    }
    return h;
}

/* requant(lt) into w, then w's code words against want's nw words, word for word (no compare
 * when either read failed: read_codes has reported it) */
static void requant_expect(const char *name, wgml_tensor *lt, const wgml_qweight *w, const uint32_t *want, size_t nw) {
    th_check(wgml_qweight_requant(T.g, lt, w) == WGML_OK, "requant: %s", wgml_last_error(T.ctx));
    uint32_t *got = read_codes(w);
    if (got && want) th_exact_u32(name, got, want, nw);
    free(got);
}

/* Symmetric requant: latents at scale × FRACS (both clamps), zero scales; then the round trip. */
static void case_requant_sym(int64_t n, int64_t k, int group) {
    hw h = make_weight(T.g, 0, n, k, group, false);
    if (!h.w) {
        free_weight(&h);
        return;
    }
    int64_t ng = (k + group - 1) / group, pn = pad4(n), kp = h.w->kp;
    /* zero a few scales on the GPU side too: re-upload with them zeroed */
    for (int64_t r = 0; r < n; r += 5) h.scales[((r / 5) % ng) * pn + r] = 0.0f;
    wgml_qweight_free(h.w);
    h.w = wgml_qweight_upload_q4gsw(T.g, h.codes, h.scales, NULL, n, k, group);
    float *lat = malloc(sizeof(float) * (size_t)(n * k));
    uint8_t *want = malloc((size_t)(n * k));
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            float s = h.scales[(c / group) * pn + r];
            float l = th_uniform(0, 1) < 0.05 && s == 0 ? (float)th_uniform(-1, 1)
                                                         : s * FRACS[(int)th_uniform(0, 8) & 7];
            lat[r * k + c] = l;
            int code = 8;
            if (s != 0) code = (int)fminf(fmaxf(nearbyintf(l / s), -8.0f), 7.0f) + 8;
            want[r * k + c] = (uint8_t)code;
        }
    int64_t ls[2] = {n, k};
    wgml_tensor *lt = th_tensor_f32(2, ls, lat);
    uint32_t *ref = malloc(sizeof(uint32_t) * (size_t)(n * kp / 8));
    pack_words(want, n, k, kp, 8, ref);
    char name[128];
    snprintf(name, sizeof name, "q4sym requant N=%lld K=%lld G=%d", (long long)n, (long long)k, group);
    requant_expect(name, lt, h.w, ref, (size_t)(n * kp / 8));
    /* the forward now reads the requantised codes: compare with the host dequant of `want` */
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) h.deq[r * k + c] = (float)(want[r * k + c] - 8) * h.scales[(c / group) * pn + r];
    float *hx = th_random((size_t)(3 * k), -1, 1);
    int64_t xs[2] = {3, k};
    wgml_tensor *x = th_tensor_f32(2, xs, hx);
    wgml_tensor *o = wgml_qlinear(T.g, x, h.w);
    float *fo = th_read_f32(o);
    double *fr = ref_forward(hx, &h, 3, n, k);
    snprintf(name, sizeof name, "q4sym forward after requant N=%lld K=%lld", (long long)n, (long long)k);
    if (fo) th_close(name, fo, fr, (size_t)(3 * n), tol_abs(k), RTOL);
    free(fo);
    free(fr);
    /* round trip: requant(dequant(W)) gives W's codes back */
    wgml_tensor_write(lt, h.deq, sizeof(float) * (size_t)(n * k));
    snprintf(name, sizeof name, "q4sym requant(dequant(W)) N=%lld K=%lld", (long long)n, (long long)k);
    requant_expect(name, lt, h.w, ref, (size_t)(n * kp / 8));
    free(ref);
    free(lat);
    free(want);
    free(hx);
    wgml_tensor_free(lt);
    wgml_tensor_free(x);
    wgml_tensor_free(o);
    free_weight(&h);
}

/* With-minimum requant (Q4_1 weights): latent = m + d × (offsets around 0..15), clamps both ways. */
static void case_requant_min(int64_t n, int64_t k) {
    hw h = make_weight(T.g, 1, n, k, 32, false);
    if (!h.w) {
        free_weight(&h);
        return;
    }
    int64_t ng = k / 32;
    float *ab = malloc(wgml_tensor_nbytes(h.w->ab));
    wgml_tensor_read(h.w->ab, ab, wgml_tensor_nbytes(h.w->ab));
    /* one zero d per 7 rows */
    for (int64_t r = 0; r < n; r += 7) ab[2 * (r * ng + (r % ng))] = 0.0f;
    wgml_tensor_write(h.w->ab, ab, wgml_tensor_nbytes(h.w->ab));
    static const float OFFS[8] = {0.3f, 2.7f, 6.4f, 13.2f, 15.4f, 21.7f, -0.4f, -3.3f};
    float *lat = malloc(sizeof(float) * (size_t)(n * k));
    uint8_t *want = malloc((size_t)(n * k));
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            float d = ab[2 * (r * ng + c / 32)], mn = ab[2 * (r * ng + c / 32) + 1];
            float l = mn + d * OFFS[(int)th_uniform(0, 8) & 7];
            lat[r * k + c] = l;
            int code = 0;
            if (d != 0) code = (int)fminf(fmaxf(nearbyintf((l - mn) / d), 0.0f), 15.0f);
            want[r * k + c] = (uint8_t)code;
        }
    int64_t ls[2] = {n, k};
    wgml_tensor *lt = th_tensor_f32(2, ls, lat);
    uint32_t *ref = malloc(sizeof(uint32_t) * (size_t)(n * k / 8));
    pack_words(want, n, k, k, 0, ref);
    char name[128];
    snprintf(name, sizeof name, "q4min requant N=%lld K=%lld", (long long)n, (long long)k);
    requant_expect(name, lt, h.w, ref, (size_t)(n * k / 8));
    free(ref);
    free(ab);
    free(lat);
    free(want);
    wgml_tensor_free(lt);
    free_weight(&h);
}

/* Requant of a GGUF kind (1..7, 9..12: Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4) at its frozen
 * (a, b), against the fp32 host rule (wgml.h): signed kinds code = clamp(round_half_even(l / a),
 * -2^(bits-1), 2^(bits-1) - 1), kinds with a minimum clamp(round_half_even((l - b) / a), 0,
 * 2^bits - 1), a = 0 gives 0. First the round trip: requant(dequant(W)) gives W's codes back
 * (a group whose a is 0 gets code 0). Then latents b + a·frac with fracs at least 0.2 from a
 * tie and past both ends of every code range, a few zero a: the codes bit-exact, and the
 * forward reads them. */
static const float FRACS_WIDE[16] = {0.3f,  -0.4f, 2.7f,  -3.3f,  6.4f,   -6.4f,  13.2f, -21.7f,
                                     29.6f, 40.2f, -40.3f, 200.3f, -200.4f, 15.4f, 31.3f, 30.7f};

/* A weight's (a, b) pairs, decoded here from its ab tensor in any ab form (include/wgml-quant.h's
 * layouts), and the tensor's raw words; zero_a sets group i's a to 0 in both (the K forms: the
 * group's scale bits, leaving its min), write_raw puts the words back. */
typedef struct ab_view {
    uint32_t *raw;
    float *pair; /* [groups, 2] */
    size_t nraw;
} ab_view;

static void ab_decode(const wgml_qweight *w, ab_view *v) {
    int64_t groups = w->n * (w->kp / w->group);
    for (int64_t i = 0; i < groups; i++) {
        float a, b = 0.0f;
        if (w->ab_form == WGML_AB_F32) {
            memcpy(&a, &v->raw[w->has_min ? 2 * i : i], 4);
            if (w->has_min) memcpy(&b, &v->raw[2 * i + 1], 4);
            else if (w->kind == WGML_Q4_SYM) b = -8.0f * a;
        } else if (w->ab_form == WGML_AB_K_MIN) {
            const uint32_t *e = v->raw + 6 * (i / 8);
            uint32_t h = e[2 + (i % 8) / 2] >> (16 * (i % 2));
            float d, dmin;
            memcpy(&d, &e[0], 4);
            memcpy(&dmin, &e[1], 4);
            a = d * (float)(h & 63);
            b = -(dmin * (float)((h >> 8) & 63));
        } else {
            const uint32_t *e = v->raw + 6 * (i / 16);
            float d;
            memcpy(&d, &e[0], 4);
            a = d * (float)((const int8_t *)(e + 1))[i % 16];
        }
        v->pair[2 * i] = a;
        v->pair[2 * i + 1] = b;
    }
}

static bool ab_read(const wgml_qweight *w, ab_view *v) {
    v->nraw = wgml_tensor_nbytes(w->ab) / 4;
    v->raw = malloc(4 * v->nraw);
    v->pair = malloc(sizeof(float) * 2 * (size_t)(w->n * (w->kp / w->group)));
    if (!th_check(v->raw && v->pair && wgml_tensor_read(w->ab, v->raw, 4 * v->nraw) == WGML_OK, "read ab"))
        return false;
    ab_decode(w, v);
    return true;
}

static void ab_zero_a(const wgml_qweight *w, ab_view *v, int64_t i) {
    if (w->ab_form == WGML_AB_F32) {
        v->raw[w->has_min ? 2 * i : i] = 0; /* +0.0f */
    } else if (w->ab_form == WGML_AB_K_MIN) {
        v->raw[6 * (i / 8) + 2 + (i % 8) / 2] &= ~(63u << (16 * (i % 2))); /* the scale, not the min */
    } else {
        ((uint8_t *)(v->raw + 6 * (i / 16) + 1))[i % 16] = 0;
    }
    ab_decode(w, v);
}

static void case_requant_gguf(int kind, int64_t n, int64_t k) {
    hw h = make_weight(T.g, kind, n, k, 32, false);
    if (!h.w) {
        free_weight(&h);
        return;
    }
    const wgml_qweight *w = h.w;
    bool pair = w->has_min, four = w->kind == WGML_Q4_MIN;
    int lo = w->kind == WGML_Q8 ? -(1 << (w->bits - 1)) : 0;
    int hi = w->kind == WGML_Q8 ? (1 << (w->bits - 1)) - 1 : (1 << w->bits) - 1;
    int64_t ng = w->kp / w->group, grp = w->group, cpw = four ? 8 : 4, width = 32 / cpw, wpr = k / cpw;
    uint32_t mask = (1u << width) - 1u;
    size_t nw = (size_t)(n * wpr);
    ab_view ab = {0};
    ab_read(w, &ab);
#define A_OF(r, c) ab.pair[2 * ((r) * ng + (c) / grp)]
#define B_OF(r, c) ab.pair[2 * ((r) * ng + (c) / grp) + 1]
    char name[128];
    /* the round trip */
    uint32_t *before = read_codes(w), *ref = malloc(sizeof(uint32_t) * nw);
    for (int64_t r = 0; before && r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            uint32_t *wd = &before[r * wpr + c / cpw];
            if (A_OF(r, c) == 0.0f) *wd &= ~(mask << (width * (c % cpw)));
        }
    int64_t ls[2] = {n, k};
    wgml_tensor *lt = th_tensor_f32(2, ls, h.deq);
    wgml_fill(T.g, w->codes, 0); /* forget the codes first */
    snprintf(name, sizeof name, "%s requant(dequant(W)) N=%lld K=%lld", KIND_NAMES[kind], (long long)n, (long long)k);
    requant_expect(name, lt, w, before, nw);
    /* latents around every code, clamps both ways, zero a */
    for (int64_t r = 0; r < n; r += 5) ab_zero_a(w, &ab, r * ng + ((r * 37) % k) / grp);
    th_check(wgml_tensor_write(w->ab, ab.raw, 4 * ab.nraw) == WGML_OK, "write ab");
    float *lat = malloc(sizeof(float) * (size_t)(n * k));
    memset(ref, 0, sizeof(uint32_t) * nw);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            float a = A_OF(r, c), b = B_OF(r, c);
            float l = b + a * FRACS_WIDE[(int)th_uniform(0, 16) & 15];
            if (a == 0.0f) l = (float)th_uniform(-1, 1);
            lat[r * k + c] = l;
            int code = 0;
            if (a != 0.0f) code = (int)fminf(fmaxf(nearbyintf(pair ? (l - b) / a : l / a), (float)lo), (float)hi);
            ref[r * wpr + c / cpw] |= ((uint32_t)code & mask) << (width * (c % cpw));
            float v = a * (float)code;
            h.deq[r * k + c] = pair ? v + b : v;
        }
    th_check(wgml_tensor_write(lt, lat, sizeof(float) * (size_t)(n * k)) == WGML_OK, "write latent");
    snprintf(name, sizeof name, "%s requant N=%lld K=%lld (codes %d..%d)", KIND_NAMES[kind], (long long)n, (long long)k,
             lo, hi);
    requant_expect(name, lt, w, ref, nw);
    /* the forward reads the requantised codes */
    float *hx = th_random((size_t)(3 * k), -1, 1);
    int64_t xs[2] = {3, k};
    wgml_tensor *x = th_tensor_f32(2, xs, hx);
    wgml_tensor *o = wgml_qlinear(T.g, x, w);
    float *fo = th_read_f32(o);
    double *fr = ref_forward(hx, &h, 3, n, k);
    snprintf(name, sizeof name, "%s forward after requant N=%lld K=%lld", KIND_NAMES[kind], (long long)n, (long long)k);
    if (fo) th_close(name, fo, fr, (size_t)(3 * n), tol_abs(k), RTOL);
#undef A_OF
#undef B_OF
    free(fo);
    free(fr);
    free(hx);
    free(lat);
    free(ab.raw);
    free(ab.pair);
    free(before);
    free(ref);
    wgml_tensor_free(x);
    wgml_tensor_free(o);
    wgml_tensor_free(lt);
    free_weight(&h);
}

static void test_requant(void) {
    case_requant_sym(37, 96, 32);
    case_requant_sym(29, 77, 32);   /* odd K, partial last group */
    case_requant_sym(16, 333, 64);  /* odd K, 6 groups */
    case_requant_sym(9, 1000, 128); /* 8 groups, partial */
    case_requant_min(23, 128);
    /* round trip on Q4_1: requant(dequant(W)) = W */
    hw h = make_weight(T.g, 1, 19, 96, 32, false);
    if (h.w) {
        uint32_t *before = read_codes(h.w);
        int64_t ls[2] = {19, 96};
        wgml_tensor *lt = th_tensor_f32(2, ls, h.deq);
        wgml_fill(T.g, h.w->codes, 0); /* forget the codes first */
        th_check(wgml_qweight_requant(T.g, lt, h.w) == WGML_OK, "requant: %s", wgml_last_error(T.ctx));
        uint32_t *after = read_codes(h.w);
        if (before && after) th_exact_u32("q4min requant(dequant(W))", after, before, 19 * 96 / 8);
        free(before);
        free(after);
        wgml_tensor_free(lt);
    }
    free_weight(&h);
}

/* ------------------------------------------------------------------ embedding */

static void case_embedding(int kind, int64_t v, int64_t d, int group, int64_t t) {
    double t0 = now();
    hw h = make_weight(T.g, kind, v, d, group, false);
    if (!h.w) {
        free_weight(&h);
        return;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)t);
    for (int64_t i = 0; i < t; i++) ids[i] = (int32_t)th_uniform(0, (double)v) % (int32_t)v;
    ids[0] = -3;                 /* clamped to 0 */
    if (t > 1) ids[1] = (int32_t)(v + 5); /* clamped to V-1 */
    int64_t is[2] = {t > 4 && t % 2 == 0 ? 2 : 1, t > 4 && t % 2 == 0 ? t / 2 : t};
    wgml_tensor *it = th_tensor_i32(2, is, ids);
    wgml_tensor *o = wgml_qembedding(T.g, h.w, it);
    th_check(o && wgml_tensor_rank(o) == 3 && wgml_tensor_dim(o, 2) == d, "embedding output shape");
    float *got = th_read_f32(o);
    uint32_t *ref = malloc(sizeof(uint32_t) * (size_t)(t * d));
    for (int64_t i = 0; i < t; i++) {
        int64_t id = ids[i] < 0 ? 0 : ids[i] >= v ? v - 1 : ids[i];
        memcpy(ref + i * d, h.deq + id * d, sizeof(float) * (size_t)d);
    }
    char name[128];
    snprintf(name, sizeof name, "%s embedding V=%lld D=%lld T=%lld", KIND_NAMES[kind], (long long)v, (long long)d,
             (long long)t);
    if (got) th_exact_u32(name, (const uint32_t *)got, ref, (size_t)(t * d));
    printf("  %-60s %.2f s\n", name, now() - t0);
    free(got);
    free(ref);
    free(ids);
    wgml_tensor_free(it);
    wgml_tensor_free(o);
    free_weight(&h);
}

/* The whole table dequantised on the GPU equals the host dequantisation bit for bit. */
static void case_dequantize(int kind, int64_t n, int64_t k, int group) {
    hw h = make_weight(T.g, kind, n, k, group, false);
    if (!h.w) {
        free_weight(&h);
        return;
    }
    wgml_tensor *o = wgml_qweight_dequantize(T.g, h.w);
    th_check(o && wgml_tensor_rank(o) == 2 && wgml_tensor_dim(o, 0) == n && wgml_tensor_dim(o, 1) == k,
             "dequantize output shape");
    float *got = th_read_f32(o);
    char name[128];
    snprintf(name, sizeof name, "%s dequantize N=%lld K=%lld G=%d", KIND_NAMES[kind], (long long)n, (long long)k, group);
    if (got) th_exact_u32(name, (const uint32_t *)got, (const uint32_t *)h.deq, (size_t)(n * k));
    free(got);
    wgml_tensor_free(o);
    free_weight(&h);
}

static void test_embedding(void) {
    case_dequantize(0, 37, 77, 32);
    case_dequantize(0, 20, 300, 128);
    case_dequantize(1, 33, 96, 32);
    case_dequantize(2, 33, 96, 32);
    case_embedding(0, 50, 96, 32, 7);
    case_embedding(0, 31, 77, 64, 10); /* partial words and groups */
    case_embedding(1, 40, 64, 32, 12);
    case_embedding(2, 40, 96, 32, 12);
    case_embedding(2, 60, 128, 32, 5);
    case_embedding(0, 50, 36, 32, 70000); /* 70,000 workgroups: the grid folds into 2-D */
}

/* ------------------------------------------------------------------ the closed loop */

/* One built graph: out1 = forward(x); requant(latent); out2 = forward(x). The second forward
 * must read the codes that requant wrote in the same command buffer. Run twice. */
static void test_closed_loop(void) {
    const int64_t n = 48, k = 160, m = 6;
    const int group = 32;
    wgml_graph *g = wgml_graph_new(T.ctx);
    hw h = make_weight(g, 0, n, k, group, true);
    int64_t xs[2] = {m, k}, ls[2] = {n, k};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_tensor *lat = wgml_tensor_new(g, WGML_F32, 2, ls);
    wgml_tensor *x1 = wgml_tensor_new(g, WGML_F32, 1, &k); /* an M = 1 decode row too */
    int64_t ds[2] = {m, n};
    wgml_tensor *dout = wgml_tensor_new(g, WGML_F32, 2, ds);
    wgml_tensor *dw = wgml_tensor_new(g, WGML_F32, 2, ls);
    wgml_tensor *o1 = wgml_qlinear(g, x, h.w);
    /* the backward of one step: d_x through the frozen codes, dW for the latent */
    wgml_tensor *gx = wgml_qlinear_dx(g, dout, h.w);
    wgml_status ws = wgml_linear_dw(g, dout, x, dw, 0);
    wgml_status rs = wgml_qweight_requant(g, lat, h.w);
    wgml_tensor *o2 = wgml_qlinear(g, x, h.w);
    wgml_tensor *o3 = wgml_qlinear(g, x1, h.w);
    bool ok = h.w && x && lat && o1 && o2 && o3 && gx && rs == WGML_OK && ws == WGML_OK && !wgml_graph_keep(g, o1) &&
              !wgml_graph_keep(g, o2) && !wgml_graph_keep(g, gx) &&
              !wgml_graph_keep(g, o3) && !wgml_graph_compile(g);
    th_check(ok, "closed loop graph built: %s", wgml_last_error(T.ctx));
    if (!ok) {
        free_weight(&h);
        wgml_graph_free(g);
        return;
    }
    int64_t pn = pad4(n);
    uint32_t *orig = read_codes(h.w);
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(m * k), -1, 1);
        float *lt = malloc(sizeof(float) * (size_t)(n * k));
        float *deq2 = malloc(sizeof(float) * (size_t)(n * k));
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < k; c++) {
                float s = h.scales[(c / group) * pn + r];
                lt[r * k + c] = s * FRACS[(int)th_uniform(0, 8) & 7];
                int code = s != 0 ? (int)fminf(fmaxf(nearbyintf(lt[r * k + c] / s), -8.0f), 7.0f) + 8 : 8;
                deq2[r * k + c] = (float)(code - 8) * s;
            }
        float *hd = th_random((size_t)(m * n), -1, 1);
        wgml_tensor_write(dout, hd, sizeof(float) * (size_t)(m * n));
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)(m * k));
        wgml_tensor_write(x1, hx + k, sizeof(float) * (size_t)k);
        wgml_tensor_write(lat, lt, sizeof(float) * (size_t)(n * k));
        wgml_tensor_write(h.w->codes, orig, wgml_tensor_nbytes(h.w->codes)); /* the frozen codes again */
        uint64_t submits = wgml_submit_count(T.ctx);
        th_check(wgml_graph_run(g) == WGML_OK, "closed loop run %d: %s", run, wgml_last_error(T.ctx));
        th_check(wgml_submit_count(T.ctx) == submits + 1, "closed loop run %d is one submit", run);
        float *g1 = th_read_f32(o1), *g2 = th_read_f32(o2), *g3 = th_read_f32(o3);
        double *r1 = ref_forward(hx, &h, m, n, k);
        double *rdx = ref_dx(hd, &h, m, n, k); /* the codes before requant */
        double *rdw = malloc(sizeof(double) * (size_t)(n * k));
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < k; j++) {
                double acc = 0;
                for (int64_t r = 0; r < m; r++) acc += (double)hd[r * n + i] * hx[r * k + j];
                rdw[i * k + j] = acc;
            }
        float *gdx = th_read_f32(gx), *gdw = th_read_f32(dw);
        float *keep = h.deq;
        h.deq = deq2;
        double *r2 = ref_forward(hx, &h, m, n, k);
        double *r3 = ref_forward(hx + k, &h, 1, n, k);
        h.deq = keep;
        char name[96];
        snprintf(name, sizeof name, "closed loop run %d: forward before requant", run);
        if (g1) th_close(name, g1, r1, (size_t)(m * n), tol_abs(k), RTOL);
        snprintf(name, sizeof name, "closed loop run %d: forward after requant", run);
        if (g2) th_close(name, g2, r2, (size_t)(m * n), tol_abs(k), RTOL);
        snprintf(name, sizeof name, "closed loop run %d: M=1 forward after requant", run);
        if (g3) th_close(name, g3, r3, (size_t)n, tol_abs(k), RTOL);
        snprintf(name, sizeof name, "closed loop run %d: d_x (frozen codes)", run);
        if (gdx) th_close(name, gdx, rdx, (size_t)(m * k), tol_abs(n), RTOL);
        snprintf(name, sizeof name, "closed loop run %d: dW (linear_dw)", run);
        if (gdw) th_close(name, gdw, rdw, (size_t)(n * k), tol_abs(m), RTOL);
        free(gdx); free(gdw); free(rdx); free(rdw); free(hd);
        /* the two forwards must differ (the requant changed codes), and by finite amounts: th_max_err
         * makes a NaN +inf, which must not pass for a change */
        double diff = 0;
        for (int64_t i = 0; g1 && g2 && i < m * n; i++) diff = th_max_err(diff, fabs((double)g1[i] - g2[i]));
        th_check(isfinite(diff) && diff > 1e-3, "closed loop run %d: requant changed the forward, no NaN (max diff %g)", run,
                 diff);
        free(g1); free(g2); free(g3); free(r1); free(r2); free(r3); free(hx); free(lt); free(deq2);
    }
    free(orig);
    free_weight(&h);
    wgml_graph_free(g);
}

/* ------------------------------------------------------------------ the GGUF 5-bit and K kinds */

/* test_qw_requant --part kquant (CTest's test_qw_requant_kquant): requant of every GGUF kind, and
 * the kinds of GGUF Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (make_weight kinds 3..7), Q2_K, Q3_K, IQ4_NL
 * and IQ4_XS (9..12) and F16 dequantised
 * and looked up (their forward: test_qw --part kquant-linear). */
static void test_kquant_requant(void) {
    double t0 = now();
    /* every GGUF kind: Q4_1 and Q4_K (4 bits with a minimum), Q8_0, Q5_0 and Q6_K (signed 8-bit
     * fields, Q6_K with G = 16), Q5_1 and Q5_K (unsigned 8-bit with a minimum) */
    case_requant_gguf(1, 13, 96);
    case_requant_gguf(2, 11, 96);
    case_requant_gguf(3, 17, 160);
    case_requant_gguf(4, 15, 96);
    case_requant_gguf(5, 9, 512);
    case_requant_gguf(6, 7, 512);
    case_requant_gguf(7, 11, 512);
    /* Q2_K (2-bit with a minimum, G = 16), Q3_K (signed 3-bit, G = 16), IQ4_NL and IQ4_XS (the
     * table's values as codes: requant keeps them, clamping to int8) */
    case_requant_gguf(9, 9, 512);
    case_requant_gguf(10, 11, 256);
    case_requant_gguf(11, 13, 96);
    case_requant_gguf(12, 7, 512);
    printf("requant: %.2f s\n", now() - t0);
    t0 = now();
    for (int kind = 3; kind <= 8; kind++) { /* the GGUF 5-bit and K kinds, F16 as f32 */
        case_dequantize(kind, 9, kind >= 5 && kind <= 7 ? 512 : 96, kind == 7 ? 16 : 32);
        case_embedding(kind, 21, kind >= 5 && kind <= 7 ? 256 : kind == 8 ? 45 : 64, kind == 7 ? 16 : 32, 6);
    }
    for (int kind = 9; kind <= 12; kind++) { /* Q2_K, Q3_K, IQ4_NL, IQ4_XS */
        case_dequantize(kind, 9, kind == 11 ? 96 : 512, kind <= 10 ? 16 : 32);
        case_embedding(kind, 21, kind == 11 ? 64 : 256, kind <= 10 ? 16 : 32, 6);
    }
    printf("dequantize / embedding: %.2f s\n", now() - t0);
}

/* requant, the embedding, the closed loop in a built graph */
static void test_q4_q8(void) {
    test_requant();
    test_embedding();
    test_closed_loop();
}

int main(int argc, char **argv) {
    th_init_args("test_qw_requant", argc, argv);
    static const th_part parts[] = {
        {"q4-q8", test_q4_q8},
        {"kquant", test_kquant_requant},
    };
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
