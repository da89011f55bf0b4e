#define _POSIX_C_SOURCE 200809L
/* The integer-dot forward of quantised weights (qw_quant_x.wgsl + qw_mm_i8.wgsl, recorded in a
 * graph with graph_set_x8): every code kind that has it (4-bit symmetric with G = 32/64/128 and a
 * partial last group, Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K with G = 16), partial tiles, both
 * tiles, split-K, a bias, accumulation into an output. Three checks per case, all in fp64 on the host:
 *  - the quantiser: per 32-k block (16 for G = 16), d = max|x|/127, |q·d - x| <= d/2, codes
 *    past K zero, s = d·Σq;
 *  - the product against the kernel's own formula, Σ_blocks a·d·Σq·c + b·s, from the GPU's
 *    q, d, s and the weight's codes and (a, b) (its GPU layout's host image), to 1e-5 of Σ|terms|;
 *  - the product against the exact one (x·Wᵀ with the unquantised x), within the bound
 *    quantisation allows: Σ_blocks d/2·Σ|w|, the error the logits of a prefill carry. */
#include "harness.h"
#include "ops/qweight/qw_internal.h"
#include "ops/qweight/qw_concat.h"
#include "ops/qweight/qw_share.h"
#include "ops/qweight/qw_xq.h"
#include "ops/norm/norm_fused.h"
#include "qw_host.h"

/* the k (in its block) of byte c of packed word j: qw_quant_x.wgsl's order (pair: 4-bit codes,
 * whose words split into even and odd nibbles) */
static int64_t elem(bool pair, int64_t j, int c) { return pair ? (j / 2) * 8 + 2 * c + j % 2 : j * 4 + c; }

/* The GPU layout's host image of h (codes [n, kp/cpw], (a, b) per group) and the code of (n, k). */
typedef struct img {
    uint32_t *words;
    float *ab;
    int cpw;
    int64_t kp, ng;
} img;

static img make_img(const hw *h, int kind) {
    const wgml_qweight *w = h->w;
    img m = {.cpw = qw_kind_cpw(w->kind), .kp = w->kp, .ng = w->kp / w->group};
    m.words = calloc((size_t)(w->n * m.kp / m.cpw), sizeof(uint32_t));
    m.ab = calloc((size_t)(w->n * m.ng * 2), sizeof(float));
    if (kind == 0) qw_pack_q4gsw(h->codes, h->scales, w->n, w->k, w->group, m.words, m.ab);
    else qw_pack_gguf(kind_type(kind), h->blocks, w->n, w->k, m.words, m.ab);
    return m;
}

static int code_of(const img *m, const wgml_qweight *w, int64_t n, int64_t k) {
    uint32_t word = m->words[n * (m->kp / m->cpw) + k / m->cpw];
    int i = (int)(k % m->cpw);
    if (m->cpw == 8) return (int)((word >> (4 * i)) & 15u);
    int v = (int)((word >> (8 * i)) & 255u);
    return w->kind == WGML_Q8 && v > 127 ? v - 256 : v;
}

/* (a, b) of w = c·a + b for group g of row n, as qweight.c's ab_of reads the image */
static void ab_of(const img *m, const wgml_qweight *w, int64_t n, int64_t g, double *a, double *b) {
    if (w->has_min) {
        *a = m->ab[2 * (n * m->ng + g)];
        *b = m->ab[2 * (n * m->ng + g) + 1];
    } else {
        *a = m->ab[n * m->ng + g];
        *b = w->kind == WGML_Q4_SYM ? -8.0 * *a : 0.0;
    }
}

static float f32_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The quantiser's output for x against its rule; q [m, kp] (natural order), d and s [m, nb]. */
static void check_quant(const char *name, const float *x, const uint32_t *xq, const hw *h, int64_t m, int64_t k,
                        int qb, int8_t *q, double *d, double *s) {
    const wgml_qweight *w = h->w;
    bool pair = qw_kind_cpw(w->kind) == 8;
    int64_t kp = w->kp, nb = kp / qb, rs = kp / 4 + 2 * nb;
    double worst_q = 0, worst_d = 0, worst_s = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t b = 0; b < nb; b++) {
            const uint32_t *row = xq + i * rs;
            d[i * nb + b] = f32_bits(row[kp / 4 + b]);
            s[i * nb + b] = f32_bits(row[kp / 4 + nb + b]);
            for (int64_t j = 0; j < qb / 4; j++)
                for (int c = 0; c < 4; c++)
                    q[i * kp + b * qb + elem(pair, j, c)] = (int8_t)((row[b * qb / 4 + j] >> (8 * c)) & 255u);
            double amax = 0, db = d[i * nb + b];
            int64_t qsum = 0;
            for (int64_t kk = b * qb; kk < (b + 1) * qb; kk++) {
                double v = kk < k ? x[i * k + kk] : 0.0;
                amax = fmax(amax, fabs(v));
                qsum += q[i * kp + kk];
                double e = kk < k ? fabs(q[i * kp + kk] * db - v) - 0.5 * db * (1 + 1e-4) : fabs((double)q[i * kp + kk]);
                worst_q = fmax(worst_q, e);
            }
            worst_d = fmax(worst_d, fabs(db - amax / 127) - 1e-6 * amax / 127);
            worst_s = fmax(worst_s, fabs(s[i * nb + b] - db * (double)qsum) - 1e-6 * fabs(db * (double)qsum));
        }
    th_check(worst_q <= 0 && worst_d <= 0 && worst_s <= 0,
             "%s: quantiser (|q·d - x| - d/2 %.3g, d - max|x|/127 %.3g, s - d·Σq %.3g over their bounds)", name, worst_q,
             worst_d, worst_s);
}

/* The product got [m, n] of x (hx [m, k]) with h's weight through the integer dot product from x's
 * quantised rows gq (qw_quant_x's format for the weight), checked three ways: the quantiser's
 * rule, the kernel's formula, the exact product within the quantisation bound (h0: the output
 * accumulated into, or NULL). */
static void check_i8(const char *name, const float *hx, const uint32_t *gq, const hw *h, int kind, int64_t m, int64_t n,
                     int64_t k, const float *got, const float *h0) {
    const wgml_qweight *w = h->w;
    int qb = (int)qw_x8_block(w);
    int64_t kp = w->kp, nb = kp / qb;
    int8_t *q = calloc((size_t)(m * kp), 1);
    double *d = malloc(sizeof(double) * (size_t)(m * nb)), *s = malloc(sizeof(double) * (size_t)(m * nb));
    check_quant(name, hx, gq, h, m, k, qb, q, d, s);
    img im = make_img(h, kind);
    double *own = malloc(sizeof(double) * (size_t)(m * n)), *tol_own = malloc(sizeof(double) * (size_t)(m * n));
    double *exact = ref_forward(hx, h, m, n, k), *bound = malloc(sizeof(double) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double base = (h->bias ? h->bias[j] : 0.0) + (h0 ? h0[i * n + j] : 0.0), sum = base, mag = fabs(base),
                   qerr = 0, wabs = 0;
            for (int64_t b = 0; b < nb; b++) {
                double a, bb, db = d[i * nb + b], blk_w = 0;
                ab_of(&im, w, j, b * qb / w->group, &a, &bb);
                int64_t isum = 0;
                for (int64_t kk = b * qb; kk < (b + 1) * qb; kk++) {
                    isum += (int64_t)q[i * kp + kk] * code_of(&im, w, j, kk);
                    if (kk < k) blk_w += fabs(h->deq[j * k + kk]);
                }
                sum += a * db * (double)isum + bb * s[i * nb + b];
                mag += fabs(a * db * (double)isum) + fabs(bb * s[i * nb + b]);
                qerr += 0.5 * db * blk_w;
                wabs += blk_w;
            }
            own[i * n + j] = sum;
            tol_own[i * n + j] = 1e-5 * mag + 1e-6;
            exact[i * n + j] += h0 ? h0[i * n + j] : 0.0;
            bound[i * n + j] = qerr * 1.001 + 1e-5 * (mag + wabs) + 1e-6;
        }
    char nm[256];
    snprintf(nm, sizeof nm, "%s: against its formula", name);
    th_close_each(nm, got, own, (size_t)(m * n), tol_own, 0.0);
    snprintf(nm, sizeof nm, "%s: against the exact product, within the quantisation bound", name);
    th_close_each(nm, got, exact, (size_t)(m * n), bound, 0.0);
    free(q);
    free(d);
    free(s);
    free(im.words);
    free(im.ab);
    free(own);
    free(tol_own);
    free(exact);
    free(bound);
}

/* One product: the forward of x [m, k] with kind's weight [n, k] through wgml_qlinear (or
 * qw_mm_into, accumulating) in a graph with int8 activations, checked three ways (above). */
static void case_i8(int kind, int64_t m, int64_t n, int64_t k, int group, bool bias, const char *splitk, bool acc) {
    double t0 = now();
    th_setenv("WGML_QW_MM_SPLITK", splitk ? splitk : "", 1);
    hw h = make_weight(T.g, kind, n, k, group, bias);
    char name[160];
    snprintf(name, sizeof name, "i8 %s M=%lld N=%lld K=%lld G=%d%s%s%s%s", KIND_NAMES[kind], (long long)m, (long long)n,
             (long long)k, group, h.bias ? " bias" : "", splitk ? " S=" : "", splitk ? splitk : "", acc ? " acc" : "");
    if (!h.w) {
        free_weight(&h);
        return;
    }
    const wgml_qweight *w = h.w;
    int qb = (int)qw_x8_block(w);
    int64_t kp = w->kp, nb = kp / qb, rs = kp / 4 + 2 * nb;
    float *hx = th_random((size_t)(m * k), -1, 1), *h0 = th_random((size_t)(m * n), -2, 2);
    for (int64_t i = 0; i < m * k; i += 7) hx[i] *= 8.0f; /* outliers: blocks of unequal scales */
    int64_t xs[2] = {m, k}, os[2] = {m, n};
    wgml_tensor *x = th_tensor_f32(2, xs, hx), *o = NULL;
    graph_set_x8(T.g, true);
    wgml_tensor *xq = qw_quant_x(T.g, "test_i8", x, w, m);
    size_t nd0 = wgml_graph_dispatch_count(T.g); /* the product's dispatches from here */
    if (acc) {
        o = th_tensor_f32(2, os, h0);
        th_check(qw_mm_into(T.g, "test_i8", x, w, 0, m, o, true) == WGML_OK, "%s: recorded (%s)", name,
                 wgml_last_error(T.ctx));
    } else {
        o = wgml_qlinear(T.g, x, w);
    }
    graph_set_x8(T.g, false);
    if (m <= qw_gemv_max_m(T.ctx) && !acc) { /* the GEMV's I8X form, checked by the same formula */
        const char *shader = NULL;
        size_t nd = wgml_graph_dispatch_count(T.g);
        if (nd) wgml_graph_dispatch_name(T.g, nd - 1, &shader);
        th_check(shader && !strcmp(shader, "qw_gemv"), "%s: the GEMV ran (last kernel %s)", name, shader ? shader : "none");
        const char *e = getenv("WGML_QW_GEMV_XQ");
        if (e && !strcmp(e, "1") && rs % 4 == 0) { /* x quantised once: a qw_quant_x of the product's own */
            int nq = 0;
            for (size_t i = nd0; i < nd; i++) {
                const char *k = NULL;
                wgml_graph_dispatch_name(T.g, i, &k);
                nq += k && !strcmp(k, "qw_quant_x");
            }
            th_check(nq == 1, "%s: x quantised once for the GEMV (%d qw_quant_x dispatches)", name, nq);
        }
    }
    th_check(xq && o, "%s: recorded (%s)", name, wgml_last_error(T.ctx));
    uint32_t *gq = malloc(sizeof(uint32_t) * (size_t)(m * rs));
    float *got = o ? th_read_f32(o) : NULL;
    if (xq && got && wgml_tensor_read(xq, gq, sizeof(uint32_t) * (size_t)(m * rs)) == WGML_OK)
        check_i8(name, hx, gq, &h, kind, m, n, k, got, acc ? h0 : NULL);
    printf("  %-86s %.2f s\n", name, now() - t0);
    free(gq);
    free(got);
    free(hx);
    free(h0);
    wgml_tensor_free(x);
    wgml_tensor_free(xq);
    wgml_tensor_free(o);
    free_weight(&h);
    th_unsetenv("WGML_QW_MM_SPLITK");
}

/* The segmented output (qw_linear_concat: a weight's rows as parts, each part's product a
 * contiguous view, as the prefill's q, k, v) through the integer dot product: the same values as
 * the plain product of the whole weight (checked by case_i8's shapes), part by part. */
static void case_seg(int kind, int64_t m, int64_t k, int group) {
    int64_t ns[3] = {64, 32, 32}, n = 128, xs[2] = {m, k};
    hw h = make_weight(T.g, kind, n, k, group, false);
    float *hx = th_random((size_t)(m * k), -1, 1);
    wgml_tensor *x = th_tensor_f32(2, xs, hx), *outs[3] = {0}, *whole = NULL;
    graph_set_x8(T.g, true);
    bool ok = h.w && qw_concat_applies(T.g, x, h.w, 3, ns);
    if (ok) ok = qw_linear_concat(T.g, "test_i8", x, h.w, 3, ns, outs) == WGML_OK;
    if (ok) ok = (whole = wgml_qlinear(T.g, x, h.w)) != NULL;
    graph_set_x8(T.g, false);
    char name[96];
    snprintf(name, sizeof name, "i8 segmented %s M=%lld K=%lld G=%d", KIND_NAMES[kind], (long long)m, (long long)k, group);
    if (th_check(ok, "%s: recorded (%s)", name, wgml_last_error(T.ctx))) {
        float *w = th_read_f32(whole);
        for (int p = 0, c0 = 0; p < 3; c0 += (int)ns[p], p++) {
            float *got = th_read_f32(outs[p]);
            double *ref = malloc(sizeof(double) * (size_t)(m * ns[p]));
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < ns[p]; j++) ref[i * ns[p] + j] = w[i * n + c0 + j];
            char nm[160];
            snprintf(nm, sizeof nm, "%s: part %d against the whole product", name, p);
            th_close(nm, got, ref, (size_t)(m * ns[p]), 1e-6, 1e-6);
            free(got);
            free(ref);
        }
        free(w);
    }
    for (int p = 0; p < 3; p++) wgml_tensor_free(outs[p]);
    wgml_tensor_free(whole);
    wgml_tensor_free(x);
    free(hx);
    free_weight(&h);
}

/* 4-bit codes: the symmetric kind at three group sizes (a partial last group at G = 64), Q4_1,
 * Q4_K; the 64 x 64 tile (the default) with partial tiles, the 128 x 64 and 128 x 128 tiles
 * ($WGML_QW_I8_TILE), split-K, a bias, accumulation, 2 and 4 blocks a stage, with the next
 * stage read ahead (the default) and without. */
static void test_4bit(void) {
    case_i8(0, 70, 100, 96, 32, true, NULL, false);
    case_i8(0, 133, 70, 200, 64, false, NULL, false);
    case_i8(0, 40, 72, 1024, 128, true, "3", false);
    case_i8(1, 65, 64, 64, 32, false, NULL, true);
    case_i8(5, 70, 64, 256, 32, false, NULL, false);
    th_setenv("WGML_QW_I8_TILE", "128x64", 1);
    case_i8(0, 300, 200, 64, 32, false, NULL, false);
    th_setenv("WGML_QW_I8_TILE", "128x128", 1);
    case_i8(1, 200, 300, 96, 32, false, NULL, false);
    th_unsetenv("WGML_QW_I8_TILE");
    case_seg(1, 70, 96, 32);
    /* 2 and 4 blocks a stage ($WGML_QW_I8_STAGE): stages that run past a split-K slice's end
     * (K = 1024 in 3 slices of 352) and past K (200 at G = 64; 96 at G = 32) */
    th_setenv("WGML_QW_I8_STAGE", "4", 1);
    case_i8(0, 40, 72, 1024, 128, true, "3", false);
    case_i8(0, 133, 70, 200, 64, false, NULL, false);
    th_setenv("WGML_QW_I8_STAGE", "2", 1);
    case_i8(1, 65, 64, 96, 32, false, "2", true);
    /* the default reads the next stage ahead; without it ($WGML_QW_I8_PREFETCH=0, load then
     * compute) at 2 and 1 blocks a stage, split-K */
    th_setenv("WGML_QW_I8_PREFETCH", "0", 1);
    case_i8(0, 133, 70, 200, 64, false, NULL, false);
    th_unsetenv("WGML_QW_I8_STAGE");
    case_i8(0, 40, 72, 1024, 128, true, "3", true);
    th_unsetenv("WGML_QW_I8_PREFETCH");
}

/* 8-bit fields: Q8_0 (signed), Q5_0 (signed 5-bit), Q5_1 and Q5_K (unsigned 5-bit with a
 * minimum), Q6_K (G = 16: 16-k blocks), Q2_K (G = 16 with a minimum), Q3_K (signed 3-bit, G =
 * 16), IQ4_NL and IQ4_XS (table values). */
static void test_8bit(void) {
    case_i8(2, 70, 96, 96, 32, false, NULL, false);
    case_i8(3, 33, 40, 64, 32, false, "2", false);
    case_i8(4, 20, 64, 128, 32, false, NULL, true);
    case_i8(6, 17, 65, 256, 32, false, NULL, false);
    case_i8(7, 50, 70, 512, 16, false, NULL, false);
    case_i8(9, 21, 48, 512, 16, false, "2", false);
    case_i8(10, 33, 40, 256, 16, false, NULL, true);
    case_i8(11, 19, 64, 96, 32, false, NULL, false);
    case_i8(12, 40, 33, 512, 32, false, "2", false);
    th_setenv("WGML_QW_I8_PREFETCH", "0", 1); /* without the read-ahead: 8-bit words, 16-k blocks */
    case_i8(2, 70, 96, 96, 32, false, "2", false);
    case_i8(7, 50, 70, 512, 16, false, NULL, false);
    th_unsetenv("WGML_QW_I8_PREFETCH");
}

/* The GEMV's integer form (qw_gemv.wgsl's I8X: x quantised per block in registers, the codes
 * through dot4I8Packed) for the few rows of a decode step, every kind and 1 to 4 rows (the GPU
 * GEMV's limit, forced on a CPU adapter), a bias, a partial last group, the GPUs' launch shapes
 * (forced: a CPU adapter has its own): the same three checks, the quantiser's against the GEMM's
 * (qw_quant_x), whose formula the GEMV follows, and a check that the GEMV ran. */
static void test_gemv(void) {
    th_setenv("WGML_QW_GEMV_MAX_M", "4", 1);
    th_setenv("WGML_QW_GEMV_I8", "1", 1); /* every kind, every shape (the rule takes fewer) */
    case_i8(0, 1, 70, 96, 32, true, NULL, false);
    case_i8(0, 3, 40, 200, 64, false, NULL, false);
    th_setenv("WGML_QW_GEMV", "32,8,64,1", 1); /* the GPUs' large-K launch shape, forced */
    case_i8(0, 4, 33, 2048, 128, false, NULL, false);
    case_i8(7, 4, 24, 2048, 16, false, NULL, false);
    th_setenv("WGML_QW_GEMV", "128,8,128,1", 1); /* a GPU shape for few rows: 4 subgroups a row */
    case_i8(0, 4, 17, 4096, 128, false, NULL, false);
    case_i8(7, 2, 16, 4096, 16, false, NULL, false);
    th_setenv("WGML_QW_GEMV", "256,4,256,1", 1);
    case_i8(0, 1, 9, 8192, 64, true, NULL, false);
    th_setenv("WGML_QW_GEMV", "64,1,256,2", 1); /* the GPUs' small-K shape: two blocks in flight */
    case_i8(5, 2, 20, 512, 32, true, NULL, false);
    th_unsetenv("WGML_QW_GEMV");
    case_i8(1, 2, 64, 64, 32, true, NULL, false);
    case_i8(5, 1, 64, 2048, 32, false, NULL, false);
    case_i8(2, 4, 96, 96, 32, false, NULL, false);
    case_i8(3, 1, 40, 64, 32, false, NULL, false);
    case_i8(4, 3, 64, 128, 32, true, NULL, false);
    case_i8(6, 2, 65, 256, 32, false, NULL, false);
    case_i8(7, 1, 70, 512, 16, false, NULL, false);
    case_i8(9, 2, 48, 512, 16, false, NULL, false);
    case_i8(10, 1, 40, 256, 16, false, NULL, false);
    case_i8(11, 3, 64, 96, 32, false, NULL, false);
    case_i8(12, 4, 33, 512, 32, false, NULL, false);
    /* x quantised once by qw_quant_x and read by the GEMV ($WGML_QW_GEMV_XQ=1): 4-bit, 8-bit
     * and G = 16 codes, 1 to 4 rows, the large-K shape */
    th_setenv("WGML_QW_GEMV_XQ", "1", 1);
    case_i8(0, 1, 70, 128, 32, true, NULL, false);
    case_i8(6, 3, 65, 256, 32, false, NULL, false);
    case_i8(7, 4, 24, 2048, 16, false, NULL, false);
    th_setenv("WGML_QW_GEMV", "128,8,128,1", 1);
    case_i8(0, 2, 17, 4096, 128, true, NULL, false);
    case_i8(9, 1, 48, 4096, 16, false, NULL, false);
    th_unsetenv("WGML_QW_GEMV");
    th_unsetenv("WGML_QW_GEMV_XQ");
    th_unsetenv("WGML_QW_GEMV_MAX_M");
    th_unsetenv("WGML_QW_GEMV_I8");
}

/* x quantised once by its producer (qw_xq.h) in a built graph: norm_add_rms_parts (post: after a
 * post-norm of y, as Gemma's blocks) writes its normed rows h in the formats of the two weights
 * of kinds ka, kb that read it (qw_xq_formats: two when they differ, as a Q4_K_M q/k/v group's
 * Q4_K and Q6_K), and the products of h with them (wgml_qlinear_multi: one GEMV per kind for the
 * GEMV's rows, else one integer GEMM each) read those rows: the graph holds no qw_quant_x, and
 * each product passes case_i8's three checks against h as read back (so it took the integer form
 * with the producer's quantisation, which the GEMV's rule alone would not choose at these
 * shapes); h itself against fp64. */
static void case_norm_xq(int ka, int ga, int kb, int gb, int64_t m, int64_t k, bool post, int want_nf) {
    double t0 = now();
    int kinds[2] = {ka, kb};
    int64_t ns[2] = {48, 40}, xs[2] = {m, k}, ws1[1] = {k};
    hw hs[2] = {make_weight(T.g, ka, ns[0], k, ga, false), make_weight(T.g, kb, ns[1], k, gb, false)};
    char name[160];
    snprintf(name, sizeof name, "norm xq %s G=%d + %s G=%d M=%lld K=%lld%s", KIND_NAMES[ka], ga, KIND_NAMES[kb], gb,
             (long long)m, (long long)k, post ? " post" : "");
    float *hx = th_random((size_t)(m * k), -1, 1), *hy = th_random((size_t)(m * k), -1, 1);
    float *hn = th_random((size_t)k, 0.5, 1.5), *hwy = th_random((size_t)k, 0.5, 1.5);
    for (int64_t i = 0; i < m * k; i += 7) hy[i] *= 8.0f; /* outliers: blocks of unequal scales */
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *y = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_tensor *nw = wgml_tensor_new(g, WGML_F32, 1, ws1), *wy = wgml_tensor_new(g, WGML_F32, 1, ws1);
    bool ok = x && y && nw && wy && !wgml_tensor_write(x, hx, sizeof(float) * (size_t)(m * k)) &&
              !wgml_tensor_write(y, hy, sizeof(float) * (size_t)(m * k)) && !wgml_tensor_write(nw, hn, sizeof(float) * (size_t)k) &&
              !wgml_tensor_write(wy, hwy, sizeof(float) * (size_t)k);
    wgml_qweight q[2];
    const wgml_qweight *qp[2] = {&q[0], &q[1]};
    ok = ok && hs[0].w && hs[1].w && !qw_weight_share(g, hs[0].w, &q[0]) && !qw_weight_share(g, hs[1].w, &q[1]);
    graph_set_x8(g, true);
    qw_xq_fmt f[QW_XQ_MAX];
    int nf = ok ? qw_xq_formats(g, qp, 2, m, f) : -1;
    th_check(nf == want_nf, "%s: %d formats (want %d)", name, nf, want_nf);
    wgml_tensor *sum = NULL, *h = ok ? norm_add_rms_parts(g, x, y, 1, post ? wy : NULL, nw, 1e-5f, f, nf, &sum) : NULL;
    wgml_tensor *xq[2] = {h ? qw_xq_given(g, h, &q[0]) : NULL, h ? qw_xq_given(g, h, &q[1]) : NULL}, *o[2] = {0};
    ok = h && xq[0] && xq[1] && !wgml_qlinear_multi(g, h, qp, 2, o);
    graph_set_x8(g, false);
    for (int i = 0; ok && i < 2; i++) ok = !wgml_graph_keep(g, xq[i]) && !wgml_graph_keep(g, o[i]);
    ok = ok && !wgml_graph_keep(g, h) && !wgml_graph_compile(g) && !wgml_graph_run(g);
    if (th_check(ok, "%s: recorded and run (%s)", name, wgml_last_error(T.ctx))) {
        const char *prod = m <= qw_gemv_max_m(T.ctx) ? "qw_gemv" : "qw_mm_i8"; /* the GEMV, or the GEMM */
        int nq = 0, nprod = 0;
        for (size_t i = 0; i < wgml_graph_dispatch_count(g); i++) {
            const char *kn = NULL;
            wgml_graph_dispatch_name(g, i, &kn);
            nq += kn && !strcmp(kn, "qw_quant_x");
            nprod += kn && !strcmp(kn, prod);
        }
        th_check(nq == 0 && nprod == 2, "%s: %d qw_quant_x and %d %s dispatches (want 0 and 2)", name, nq, nprod, prod);
        float *hh = th_read_f32(h);
        double *ref = malloc(sizeof(double) * (size_t)(m * k));
        for (int64_t i = 0; i < m; i++) { /* h = rms_norm(x + y'), y' = y or rms_norm(y) * wy */
            double sy = 0, ss = 0;
            for (int64_t j = 0; j < k; j++) sy += (double)hy[i * k + j] * hy[i * k + j];
            double ry = post ? 1.0 / sqrt(sy / (double)k + 1e-5) : 1.0;
            for (int64_t j = 0; j < k; j++) {
                double v = hx[i * k + j] + hy[i * k + j] * (post ? ry * hwy[j] : 1.0);
                ref[i * k + j] = v;
                ss += v * v;
            }
            double r = 1.0 / sqrt(ss / (double)k + 1e-5);
            for (int64_t j = 0; j < k; j++) ref[i * k + j] *= r * hn[j];
        }
        char nm[200];
        snprintf(nm, sizeof nm, "%s: the normed row", name);
        th_close(nm, hh, ref, (size_t)(m * k), 1e-5, 1e-5);
        for (int i = 0; i < 2; i++) {
            int64_t rs = qw_quant_x_row(hs[i].w);
            uint32_t *gq = malloc(sizeof(uint32_t) * (size_t)(m * rs));
            float *got = th_read_f32(o[i]);
            snprintf(nm, sizeof nm, "%s: %s", name, KIND_NAMES[kinds[i]]);
            if (got && !wgml_tensor_read(xq[i], gq, sizeof(uint32_t) * (size_t)(m * rs)))
                check_i8(nm, hh, gq, &hs[i], kinds[i], m, ns[i], k, got, NULL);
            free(gq);
            free(got);
        }
        free(hh);
        free(ref);
    }
    printf("  %-86s %.2f s\n", name, now() - t0);
    wgml_graph_free(g);
    free(hx), free(hy), free(hn), free(hwy);
    free_weight(&hs[0]), free_weight(&hs[1]);
}

/* The producer's quantisation (case_norm_xq, $WGML_QW_GEMV_XQ=3: the producers' only): a Q4_K_M
 * q/k/v group's two formats (Q4_K's 32-k pairs, Q6_K's 16-k blocks), one format shared by two
 * group sizes (4-bit at G = 32 and 64), 8-bit codes with a post-norm, 1 to 4 rows and a
 * prefill's 20 (the GEMMs); and a GEMV row that does not come in whole vec4s (K = 96: none, the
 * GEMVs quantise for themselves). */
static void test_producer(void) {
    th_setenv("WGML_QW_GEMV_MAX_M", "4", 1);
    th_setenv("WGML_QW_GEMV_XQ", "3", 1);
    case_norm_xq(5, 32, 7, 16, 1, 512, false, 2);
    case_norm_xq(0, 32, 0, 64, 3, 192, false, 1);
    case_norm_xq(2, 32, 7, 16, 4, 256, true, 2);
    case_norm_xq(5, 32, 7, 16, 20, 256, false, 2); /* a prefill's rows: the integer GEMMs */
    hw h = make_weight(T.g, 0, 8, 96, 32, false);
    const wgml_qweight *w1[1] = {h.w};
    qw_xq_fmt f[QW_XQ_MAX];
    graph_set_x8(T.g, true);
    int nf = h.w ? qw_xq_formats(T.g, w1, 1, 1, f) : -1;
    graph_set_x8(T.g, false);
    th_check(nf == 0, "norm xq: K = 96 (rows of 30 words): %d formats (want 0)", nf);
    free_weight(&h);
    th_unsetenv("WGML_QW_GEMV_XQ");
    th_unsetenv("WGML_QW_GEMV_MAX_M");
}

int main(int argc, char **argv) {
    th_init_args("test_qw_i8", argc, argv);
    static const th_part parts[] = {{"4bit", test_4bit}, {"8bit", test_8bit}, {"gemv", test_gemv}, {"producer", test_producer}};
    return th_run_parts(parts, sizeof parts / sizeof parts[0]);
}
