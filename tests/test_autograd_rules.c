#define _POSIX_C_SOURCE 200809L
/* Autograd: every backward rule checked against central finite differences of a host fp64
 * forward (table-driven: each row builds a small composite on the GPU, loss = Σ out·R with a
 * fixed random R, and the same composite in double precision on the host), each in a built
 * graph compiled once and run twice with new inputs. Gradients into caller tensors, frozen
 * branches, bad input and the PyTorch cases: test_autograd.c. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd_util.h"

#define MAXIN 4
#define MAXN 4096

enum kind {
    K_MATMUL, K_LINEAR, K_ADDMM, K_BINARY, K_SCALARS, K_UNARY, K_CLAMP, K_WHERE, K_SUM, K_MEAN, K_AMAX, K_SOFTMAX,
    K_LOGSOFTMAX, K_RMS, K_LAYER, K_ROPE, K_SDPA, K_EMBED, K_GATHER, K_ISELECT, K_SLICE, K_CAT, K_PERMUTE,
    K_TRANSPOSE, K_EXPAND, K_CLONE, K_RESHAPE, K_VIEW, K_QW, K_LORA, K_REUSE
};

typedef struct tin {
    int rank;
    int64_t s[6];
    double lo, hi;
    bool train;
} tin;

typedef struct fdcase {
    const char *name;
    int kind, n;
    tin in[MAXIN];
    int ia, ib;
    float fa, fb;
    int dims[6];
    int nd;
} fdcase;

#define T2(a, b) {2, {a, b}, -1, 1, true}
#define T3(a, b, c) {3, {a, b, c}, -1, 1, true}
#define T4(a, b, c, d) {4, {a, b, c, d}, -1, 1, true}
#define T1(a) {1, {a}, -1, 1, true}
#define POS(t, lo_, hi_) {t.rank, {t.s[0], t.s[1], t.s[2], t.s[3]}, lo_, hi_, true}

static const fdcase CASES[] = {
    {"mm", K_MATMUL, 2, {T2(4, 8), T2(8, 4)}, 0, 0, 0, 0, {0}, 0},
    {"matmul_ta_tb_batch_bcast", K_MATMUL, 2, {T3(1, 8, 4), T3(2, 4, 8)}, 1, 1, 0, 0, {0}, 0},
    {"matmul_tb_rank2_b", K_MATMUL, 2, {T3(2, 4, 8), T2(4, 8)}, 0, 1, 0, 0, {0}, 0},
    {"matmul_ta", K_MATMUL, 2, {T2(8, 4), T3(2, 8, 4)}, 1, 0, 0, 0, {0}, 0},
    {"linear_bias", K_LINEAR, 3, {T3(2, 4, 8), T2(4, 8), T1(4)}, 0, 0, 0, 0, {0}, 0},
    {"linear", K_LINEAR, 2, {T2(4, 8), T2(8, 8)}, 0, 0, 0, 0, {0}, 0},
    {"addmm", K_ADDMM, 3, {T1(4), T2(4, 8), T2(8, 4)}, 0, 0, 0.5f, 2.0f, {0}, 0},
    {"addmm_col", K_ADDMM, 3, {T2(4, 1), T2(4, 8), T2(8, 4)}, 0, 0, 1.0f, 1.0f, {0}, 0},
    {"add_bcast", K_BINARY, 2, {T3(2, 3, 4), T2(3, 1)}, WGML_BIN_ADD, 0, 0.7f, 0, {0}, 0},
    {"sub_bcast", K_BINARY, 2, {T2(3, 1), T3(2, 3, 4)}, WGML_BIN_SUB, 0, 1.5f, 0, {0}, 0},
    {"mul_bcast", K_BINARY, 2, {T3(2, 3, 4), T1(4)}, WGML_BIN_MUL, 0, 1, 0, {0}, 0},
    {"div_bcast", K_BINARY, 2, {T2(3, 4), {2, {1, 4}, 0.5, 2, true}}, WGML_BIN_DIV, 0, 1, 0, {0}, 0},
    {"minimum", K_BINARY, 2, {T2(3, 4), T2(3, 4)}, WGML_BIN_MINIMUM, 0, 1, 0, {0}, 0},
    {"maximum_bcast", K_BINARY, 2, {T2(3, 4), T1(4)}, WGML_BIN_MAXIMUM, 0, 1, 0, {0}, 0},
    {"pow", K_BINARY, 2, {{2, {3, 4}, 0.5, 2, true}, {2, {3, 4}, -1, 2, true}}, WGML_BIN_POW, 0, 1, 0, {0}, 0},
    {"scalar_forms", K_SCALARS, 1, {{2, {3, 5}, 0.2, 2, true}}, 0, 0, 0, 0, {0}, 0},
    {"relu", K_UNARY, 1, {T2(4, 5)}, WGML_UN_RELU, 0, 0, 0, {0}, 0},
    {"sigmoid", K_UNARY, 1, {{2, {4, 5}, -3, 3, true}}, WGML_UN_SIGMOID, 0, 0, 0, {0}, 0},
    {"silu", K_UNARY, 1, {{2, {4, 5}, -3, 3, true}}, WGML_UN_SILU, 0, 0, 0, {0}, 0},
    {"gelu", K_UNARY, 1, {{2, {4, 5}, -3, 3, true}}, WGML_UN_GELU, 0, 0, 0, {0}, 0},
    {"gelu_small", K_UNARY, 1, {{1, {16}, -0.02, 0.02, true}}, WGML_UN_GELU, 0, 0, 0, {0}, 0},
    {"gelu_tanh", K_UNARY, 1, {{2, {4, 5}, -3, 3, true}}, WGML_UN_GELU_TANH, 0, 0, 0, {0}, 0},
    {"exp", K_UNARY, 1, {T2(4, 5)}, WGML_UN_EXP, 0, 0, 0, {0}, 0},
    {"log", K_UNARY, 1, {{2, {4, 5}, 0.3, 3, true}}, WGML_UN_LOG, 0, 0, 0, {0}, 0},
    {"neg", K_UNARY, 1, {T2(4, 5)}, WGML_UN_NEG, 0, 0, 0, {0}, 0},
    {"abs", K_UNARY, 1, {T2(4, 5)}, WGML_UN_ABS, 0, 0, 0, {0}, 0},
    {"sqrt", K_UNARY, 1, {{2, {4, 5}, 0.3, 3, true}}, WGML_UN_SQRT, 0, 0, 0, {0}, 0},
    {"rsqrt", K_UNARY, 1, {{2, {4, 5}, 0.3, 3, true}}, WGML_UN_RSQRT, 0, 0, 0, {0}, 0},
    {"tanh", K_UNARY, 1, {{2, {4, 5}, -2, 2, true}}, WGML_UN_TANH, 0, 0, 0, {0}, 0},
    {"clamp", K_CLAMP, 1, {T2(4, 5)}, 0, 0, -0.4f, 0.5f, {0}, 0},
    {"where_bcast", K_WHERE, 3, {{2, {3, 4}, -1, 1, false}, T2(3, 4), T1(4)}, 0, 0, 0, 0, {0}, 0},
    {"sum_dims", K_SUM, 1, {T3(2, 3, 4)}, 0, 0, 0, 0, {0, 2}, 2},
    {"sum_all_keep", K_SUM, 1, {T3(2, 3, 4)}, 1, 0, 0, 0, {0}, 0},
    {"amax", K_AMAX, 1, {T3(2, 3, 4)}, 0, 0, 0, 0, {1}, 1},
    {"mean_keep", K_MEAN, 1, {T3(2, 3, 4)}, 1, 0, 0, 0, {-2}, 1},
    {"softmax_dim1", K_SOFTMAX, 1, {{3, {2, 5, 3}, -2, 2, true}}, 1, 0, 0, 0, {0}, 0},
    {"softmax_last", K_SOFTMAX, 1, {{2, {3, 7}, -2, 2, true}}, -1, 0, 0, 0, {0}, 0},
    {"log_softmax", K_LOGSOFTMAX, 1, {{2, {3, 7}, -2, 2, true}}, -1, 0, 0, 0, {0}, 0},
    {"rms_norm_w", K_RMS, 2, {T3(2, 3, 8), T1(8)}, 0, 0, 1e-5f, 0, {0}, 0},
    {"rms_norm", K_RMS, 1, {T2(3, 6)}, 0, 0, 1e-3f, 0, {0}, 0},
    {"layer_norm_wb", K_LAYER, 3, {T2(3, 8), T1(8), T1(8)}, 0, 0, 1e-5f, 0, {0}, 0},
    {"layer_norm", K_LAYER, 1, {T3(2, 2, 5)}, 0, 0, 1e-5f, 0, {0}, 0},
    {"rope_half_bshd", K_ROPE, 1, {T4(2, 3, 2, 8)}, WGML_ROPE_HALF, WGML_ROPE_BSHD, 10000.0f, 0, {0}, 0},
    {"rope_inter_bhsd", K_ROPE, 1, {T4(1, 2, 4, 4)}, WGML_ROPE_INTERLEAVED, WGML_ROPE_BHSD, 500.0f, 0, {0}, 0},
    {"sdpa_gqa_causal", K_SDPA, 3, {T4(1, 4, 4, 4), T4(1, 2, 8, 4), T4(1, 2, 8, 4)}, 1, 0, 0, 0, {0}, 0},
    {"sdpa_mha", K_SDPA, 3, {T4(2, 2, 4, 4), T4(2, 2, 4, 4), T4(2, 2, 4, 4)}, 0, 0, 0.3f, 0, {0}, 0},
    {"sdpa_q_only", K_SDPA, 3, {T4(1, 2, 4, 4), {4, {1, 1, 4, 4}, -1, 1, false}, {4, {1, 1, 4, 4}, -1, 1, false}}, 1, 0, 0, 0, {0}, 0},
    {"embedding", K_EMBED, 1, {T2(6, 3)}, 0, 0, 0, 0, {0}, 0},
    {"gather", K_GATHER, 1, {T2(3, 4)}, 1, 0, 0, 0, {0}, 0},
    {"index_select", K_ISELECT, 1, {T2(4, 3)}, 0, 0, 0, 0, {0}, 0},
    {"slice", K_SLICE, 1, {T3(2, 5, 3)}, 1, 1, 0, 0, {4, 1}, 0},
    {"slice_step", K_SLICE, 1, {T2(3, 7)}, -1, -6, 0, 0, {7, 2}, 0},
    {"cat", K_CAT, 3, {T3(2, 1, 3), T3(2, 2, 3), T3(2, 3, 3)}, 1, 0, 0, 0, {0}, 0},
    {"permute", K_PERMUTE, 1, {T3(2, 3, 4)}, 0, 0, 0, 0, {2, 0, 1}, 3},
    {"transpose", K_TRANSPOSE, 1, {T3(2, 3, 4)}, 0, 2, 0, 0, {0}, 0},
    {"expand_copy", K_EXPAND, 1, {T2(3, 1)}, 0, 0, 0, 0, {2, 3, 4}, 3},
    {"clone", K_CLONE, 1, {T2(3, 4)}, 0, 0, 0, 0, {0}, 0},
    {"reshape", K_RESHAPE, 1, {T3(2, 3, 4)}, 0, 0, 0, 0, {4, 6}, 2},
    {"tensor_view", K_VIEW, 1, {T1(160)}, 64, 12, 0, 0, {3, 4}, 2},
    {"qlinear", K_QW, 1, {T2(3, 64)}, 8, 0, 0, 0, {0}, 0},
    {"qlinear_gemm", K_QW, 1, {T3(2, 5, 32)}, 6, 0, 0, 0, {0}, 0},
    {"reuse_summed", K_REUSE, 2, {T2(3, 4), T1(4)}, 0, 0, 0, 0, {0}, 0},
    {"lora_linear", K_LORA, 3, {T2(4, 8), T2(4, 8), T2(8, 4)}, 0, 0, 4.0f, 0, {0}, 0},
};
#define N_CASES (int)(sizeof CASES / sizeof CASES[0])

/* ------------------------------------------------------------------ host fp64 forwards */

/* Index into an input of shape (ir, is) broadcast to (orank, os) for the output element oi. */
static int64_t bidx(int orank, const int64_t *os, int64_t oi, int ir, const int64_t *is) {
    int64_t idx = 0, stride = 1;
    for (int d = orank - 1; d >= 0; d--) {
        int64_t c = oi % os[d];
        oi /= os[d];
        int k = d - (orank - ir);
        if (k >= 0) {
            if (is[k] != 1) idx += c * stride;
            stride *= is[k];
        }
    }
    return idx;
}

static void bshape(int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *o) {
    *r = ra > rb ? ra : rb;
    for (int i = 0; i < *r; i++) {
        int ia = i - (*r - ra), ib = i - (*r - rb);
        int64_t x = ia >= 0 ? a[ia] : 1, y = ib >= 0 ? b[ib] : 1;
        o[i] = x > y ? x : y;
    }
}

static double h_unary(int op, double x) {
    switch (op) {
    case WGML_UN_RELU: return x > 0 ? x : 0;
    case WGML_UN_SIGMOID: return 1 / (1 + exp(-x));
    case WGML_UN_SILU: return x / (1 + exp(-x));
    case WGML_UN_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case WGML_UN_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case WGML_UN_EXP: return exp(x);
    case WGML_UN_LOG: return log(x);
    case WGML_UN_NEG: return -x;
    case WGML_UN_ABS: return fabs(x);
    case WGML_UN_SQRT: return sqrt(x);
    case WGML_UN_RSQRT: return 1 / sqrt(x);
    default: return tanh(x);
    }
}

static double h_binary(int op, double a, double b, double alpha) {
    switch (op) {
    case WGML_BIN_ADD: return a + alpha * b;
    case WGML_BIN_SUB: return a - alpha * b;
    case WGML_BIN_MUL: return a * b;
    case WGML_BIN_DIV: return a / b;
    case WGML_BIN_MINIMUM: return a < b ? a : b;
    case WGML_BIN_MAXIMUM: return a > b ? a : b;
    default: return pow(a, b);
    }
}

/* out[batch, M, N] = op(a)·op(b); a, b rank 2 or 3 (batch 1 broadcasts). */
static void h_matmul(const double *a, int ra, const int64_t *as, const double *b, int rb, const int64_t *bs, int ta,
                     int tb, double *out, int *orank, int64_t *os) {
    int64_t ba = ra == 3 ? as[0] : 1, bb = rb == 3 ? bs[0] : 1, B = ba > bb ? ba : bb;
    const int64_t *a2 = as + ra - 2, *b2 = bs + rb - 2;
    int64_t M = ta ? a2[1] : a2[0], K = ta ? a2[0] : a2[1], N = tb ? b2[0] : b2[1];
    for (int64_t z = 0; z < B; z++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                const double *A = a + (ba == 1 ? 0 : z * M * K), *Bm = b + (bb == 1 ? 0 : z * K * N);
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? Bm[j * K + k] : Bm[k * N + j]);
                out[(z * M + i) * N + j] = s;
            }
    *orank = (ra == 3 || rb == 3) ? 3 : 2;
    int64_t t[3] = {B, M, N};
    memcpy(os, *orank == 3 ? t : t + 1, sizeof(int64_t) * (size_t)*orank);
}

static void h_reduce(const double *x, int r, const int64_t *s, const bool *red, bool mean, double *out) {
    int64_t n = numel(r, s), on = 1, cnt = 1;
    int64_t ks[8];
    for (int i = 0; i < r; i++) {
        ks[i] = red[i] ? 1 : s[i];
        on *= ks[i];
        if (red[i]) cnt *= s[i];
    }
    for (int64_t i = 0; i < on; i++) out[i] = 0;
    for (int64_t i = 0; i < n; i++) out[bidx(r, s, i, r, ks)] += x[i];
    if (mean)
        for (int64_t i = 0; i < on; i++) out[i] /= (double)cnt;
}

/* softmax over dim d (log form optional) */
static void h_softmax(const double *x, int r, const int64_t *s, int d, bool lg, double *out) {
    int64_t outer = 1, n = s[d], inner = 1;
    for (int i = 0; i < d; i++) outer *= s[i];
    for (int i = d + 1; i < r; i++) inner *= s[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j < n; j++) m = fmax(m, x[(o * n + j) * inner + in]);
            for (int64_t j = 0; j < n; j++) z += exp(x[(o * n + j) * inner + in] - m);
            for (int64_t j = 0; j < n; j++) {
                double v = x[(o * n + j) * inner + in] - m;
                out[(o * n + j) * inner + in] = lg ? v - log(z) : exp(v) / z;
            }
        }
}

static void h_rope(const double *x, int64_t B, int64_t S, int64_t H, int64_t D, bool bhsd, bool inter, double theta,
                   const int32_t *pos, double *out) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                int64_t base = bhsd ? ((b * H + h) * S + s) * D : ((b * S + s) * H + h) * D;
                for (int64_t i = 0; i < D / 2; i++) {
                    double ang = pos[s] * pow(theta, -2.0 * (double)i / (double)D);
                    int64_t i0 = inter ? 2 * i : i, i1 = inter ? 2 * i + 1 : i + D / 2;
                    double a = x[base + i0], c = x[base + i1];
                    out[base + i0] = a * cos(ang) - c * sin(ang);
                    out[base + i1] = a * sin(ang) + c * cos(ang);
                }
            }
}

static void h_sdpa(const double *q, const double *k, const double *v, const int64_t *qs, const int64_t *ks, int causal,
                   double scale, double *out) {
    int64_t B = qs[0], Hq = qs[1], Sq = qs[2], D = qs[3], Hk = ks[1], Sk = ks[2];
    if (scale <= 0) scale = 1 / sqrt((double)D);
    double p[64];
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / (Hq / Hk);
            for (int64_t i = 0; i < Sq; i++) {
                double m = -INFINITY, z = 0;
                for (int64_t j = 0; j < Sk; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++) s += q[((b * Hq + h) * Sq + i) * D + d] * k[((b * Hk + hk) * Sk + j) * D + d];
                    p[j] = causal && j > Sk - Sq + i ? -INFINITY : s * scale;
                    m = fmax(m, p[j]);
                }
                for (int64_t j = 0; j < Sk; j++) z += (p[j] = exp(p[j] - m));
                for (int64_t d = 0; d < D; d++) {
                    double o = 0;
                    for (int64_t j = 0; j < Sk; j++) o += p[j] / z * v[((b * Hk + hk) * Sk + j) * D + d];
                    out[((b * Hq + h) * Sq + i) * D + d] = o;
                }
            }
        }
}

static const int32_t EMBED_IDX[6] = {2, 5, 0, 2, -1, 3};  /* [2, 3], a repeat and a negative */
static const int32_t GATHER_IDX[6] = {3, 0, 1, 1, 2, -4}; /* [2, 3] into x [3, 4] along dim 1 */
static const int32_t SELECT_IDX[5] = {1, 3, 1, -1, 0};    /* [5] into x [4, 3] along dim 0 */
static const int32_t ROPE_POS[4] = {0, 3, 7, 12};
static float *QW_W;   /* the dequantised 4-bit weight of the current case [N, K] */
static int64_t QW_N;

static int64_t host_forward(const fdcase *c, double **x, double *out) {
    const tin *in = c->in;
    int r;
    int64_t os[8];
    switch (c->kind) {
    case K_MATMUL:
        h_matmul(x[0], in[0].rank, in[0].s, x[1], in[1].rank, in[1].s, c->ia, c->ib, out, &r, os);
        return numel(r, os);
    case K_LINEAR:
    case K_LORA: {
        int64_t K = in[0].s[in[0].rank - 1], M = numel(in[0].rank, in[0].s) / K, N = in[1].s[0];
        if (c->kind == K_LORA) N = in[2].s[0];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                if (c->kind == K_LINEAR) {
                    for (int64_t k = 0; k < K; k++) s += x[0][i * K + k] * x[1][j * K + k];
                    out[i * N + j] = s + (c->n == 3 ? x[2][j] : 0);
                } else { /* base W = 0.1·(j - k) pattern, plus the adapter */
                    int64_t R = in[1].s[0];
                    for (int64_t k = 0; k < K; k++) s += x[0][i * K + k] * (0.05 * (double)((j * 3 + k) % 7) - 0.15);
                    for (int64_t q = 0; q < R; q++) {
                        double h = 0;
                        for (int64_t k = 0; k < K; k++) h += x[0][i * K + k] * x[1][q * K + k];
                        s += c->fa / (double)R * h * x[2][j * R + q];
                    }
                    out[i * N + j] = s;
                }
            }
        return M * N;
    }
    case K_ADDMM: {
        h_matmul(x[1], 2, in[1].s, x[2], 2, in[2].s, 0, 0, out, &r, os);
        for (int64_t i = 0; i < numel(2, os); i++) out[i] = c->fb * out[i] + c->fa * x[0][bidx(2, os, i, in[0].rank, in[0].s)];
        return numel(2, os);
    }
    case K_BINARY:
        bshape(in[0].rank, in[0].s, in[1].rank, in[1].s, &r, os);
        for (int64_t i = 0; i < numel(r, os); i++)
            out[i] = h_binary(c->ia, x[0][bidx(r, os, i, in[0].rank, in[0].s)], x[1][bidx(r, os, i, in[1].rank, in[1].s)], c->fa);
        return numel(r, os);
    case K_SCALARS: {
        int64_t n = numel(in[0].rank, in[0].s);
        for (int64_t i = 0; i < n; i++) {
            double v = x[0][i];
            v = v + 2 * 0.3;   /* add_scalar(0.3, alpha 2) */
            v = v - 0.5 * 0.2; /* sub_scalar(0.2, alpha 0.5) */
            v = v * 1.7;
            v = v / 0.8;
            v = fmin(v, 3.0);
            v = fmax(v, 1.8);
            out[i] = pow(v, 1.5);
        }
        return n;
    }
    case K_UNARY:
    case K_CLAMP: {
        int64_t n = numel(in[0].rank, in[0].s);
        for (int64_t i = 0; i < n; i++)
            out[i] = c->kind == K_UNARY ? h_unary(c->ia, x[0][i]) : fmin(fmax(x[0][i], c->fa), c->fb);
        return n;
    }
    case K_WHERE: {
        bshape(in[1].rank, in[1].s, in[2].rank, in[2].s, &r, os);
        for (int64_t i = 0; i < numel(r, os); i++)
            out[i] = x[0][bidx(r, os, i, in[0].rank, in[0].s)] > 0 ? x[1][bidx(r, os, i, in[1].rank, in[1].s)]
                                                                   : x[2][bidx(r, os, i, in[2].rank, in[2].s)];
        return numel(r, os);
    }
    case K_SUM:
    case K_MEAN: {
        bool red[8] = {false};
        for (int i = 0; i < in[0].rank; i++) red[i] = c->nd == 0;
        for (int i = 0; i < c->nd; i++) red[c->dims[i] < 0 ? c->dims[i] + in[0].rank : c->dims[i]] = true;
        h_reduce(x[0], in[0].rank, in[0].s, red, c->kind == K_MEAN, out);
        int64_t n = 1;
        for (int i = 0; i < in[0].rank; i++) n *= red[i] ? 1 : in[0].s[i];
        return n;
    }
    case K_AMAX: { /* max over dims[0] (one dim) */
        int r0 = in[0].rank, d = c->dims[0] < 0 ? c->dims[0] + r0 : c->dims[0];
        int64_t outer = 1, n = in[0].s[d], inner = 1;
        for (int i = 0; i < d; i++) outer *= in[0].s[i];
        for (int i = d + 1; i < r0; i++) inner *= in[0].s[i];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t q = 0; q < inner; q++) {
                double m = -INFINITY;
                for (int64_t j = 0; j < n; j++) m = fmax(m, x[0][(o * n + j) * inner + q]);
                out[o * inner + q] = m;
            }
        return outer * inner;
    }
    case K_SOFTMAX:
    case K_LOGSOFTMAX:
        h_softmax(x[0], in[0].rank, in[0].s, c->ia < 0 ? c->ia + in[0].rank : c->ia, c->kind == K_LOGSOFTMAX, out);
        return numel(in[0].rank, in[0].s);
    case K_RMS:
    case K_LAYER: {
        int64_t D = in[0].s[in[0].rank - 1], rows = numel(in[0].rank, in[0].s) / D;
        for (int64_t q = 0; q < rows; q++) {
            const double *xr = x[0] + q * D;
            double m = 0, v = 0;
            if (c->kind == K_LAYER)
                for (int64_t j = 0; j < D; j++) m += xr[j] / (double)D;
            for (int64_t j = 0; j < D; j++) v += (xr[j] - m) * (xr[j] - m) / (double)D;
            double rs = 1 / sqrt(v + c->fa);
            for (int64_t j = 0; j < D; j++)
                out[q * D + j] = (xr[j] - m) * rs * (c->n > 1 ? x[1][j] : 1) + (c->n > 2 ? x[2][j] : 0);
        }
        return rows * D;
    }
    case K_ROPE: {
        const int64_t *s = in[0].s;
        bool bhsd = c->ib == WGML_ROPE_BHSD;
        h_rope(x[0], s[0], bhsd ? s[2] : s[1], bhsd ? s[1] : s[2], s[3], bhsd, c->ia == WGML_ROPE_INTERLEAVED, c->fa,
               ROPE_POS, out);
        return numel(4, s);
    }
    case K_SDPA:
        h_sdpa(x[0], x[1], x[2], in[0].s, in[1].s, c->ia, c->fa, out);
        return numel(4, in[0].s);
    case K_EMBED:
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 3; j++) out[i * 3 + j] = x[0][((EMBED_IDX[i] + 6) % 6) * 3 + j];
        return 18;
    case K_GATHER:
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) out[i * 3 + j] = x[0][i * 4 + (GATHER_IDX[i * 3 + j] + 4) % 4];
        return 6;
    case K_ISELECT:
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 3; j++) out[i * 3 + j] = x[0][((SELECT_IDX[i] + 4) % 4) * 3 + j];
        return 15;
    case K_SLICE: {
        int d = c->ia < 0 ? c->ia + in[0].rank : c->ia;
        int64_t size = in[0].s[d], st = c->ib < 0 ? c->ib + size : c->ib, en = c->dims[0] > size ? size : c->dims[0];
        int64_t step = c->dims[1], len = (en - st + step - 1) / step, outer = 1, inner = 1, n = 0;
        for (int i = 0; i < d; i++) outer *= in[0].s[i];
        for (int i = d + 1; i < in[0].rank; i++) inner *= in[0].s[i];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < len; j++)
                for (int64_t q = 0; q < inner; q++) out[n++] = x[0][(o * size + st + j * step) * inner + q];
        return n;
    }
    case K_CAT: {
        int64_t n = 0;
        for (int64_t o = 0; o < 2; o++)
            for (int t = 0; t < 3; t++)
                for (int64_t j = 0; j < in[t].s[1] * 3; j++) out[n++] = x[t][o * in[t].s[1] * 3 + j];
        return n;
    }
    case K_PERMUTE:
    case K_TRANSPOSE: {
        int p[3] = {c->dims[0], c->dims[1], c->dims[2]};
        if (c->kind == K_TRANSPOSE) { p[0] = 2; p[1] = 1; p[2] = 0; }
        const int64_t *s = in[0].s;
        int64_t st[3] = {s[1] * s[2], s[2], 1}, n = 0;
        for (int64_t a = 0; a < s[p[0]]; a++)
            for (int64_t b = 0; b < s[p[1]]; b++)
                for (int64_t e = 0; e < s[p[2]]; e++) out[n++] = x[0][a * st[p[0]] + b * st[p[1]] + e * st[p[2]]];
        return n;
    }
    case K_EXPAND: {
        int64_t ts[3] = {c->dims[0], c->dims[1], c->dims[2]};
        for (int64_t i = 0; i < numel(3, ts); i++) out[i] = x[0][bidx(3, ts, i, in[0].rank, in[0].s)];
        return numel(3, ts);
    }
    case K_CLONE:
    case K_RESHAPE:
        for (int64_t i = 0; i < numel(in[0].rank, in[0].s); i++) out[i] = x[0][i];
        return numel(in[0].rank, in[0].s);
    case K_VIEW:
        for (int64_t i = 0; i < c->ib; i++) out[i] = x[0][c->ia + i];
        return c->ib;
    case K_REUSE: /* x·x + silu(x)·b + x: x reaches the loss by four paths */
        for (int64_t i = 0; i < 12; i++) out[i] = x[0][i] * x[0][i] + h_unary(WGML_UN_SILU, x[0][i]) * x[1][i % 4] + x[0][i];
        return 12;
    case K_QW: {
        int64_t K = in[0].s[in[0].rank - 1], M = numel(in[0].rank, in[0].s) / K;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < QW_N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += x[0][i * K + k] * QW_W[j * K + k];
                out[i * QW_N + j] = s;
            }
        return M * QW_N;
    }
    }
    return 0;
}

/* ------------------------------------------------------------------ GPU composites */

static wgml_qweight *QW;
static wgml_lora *LORA;

static wgml_tensor *gpu_forward(wgml_graph *g, const fdcase *c, wgml_tensor **x) {
    switch (c->kind) {
    case K_MATMUL: return wgml_matmul(g, x[0], x[1], c->ia, c->ib);
    case K_LINEAR: return wgml_linear(g, x[0], x[1], c->n == 3 ? x[2] : NULL);
    case K_ADDMM: return wgml_addmm(g, x[0], x[1], x[2], c->fa, c->fb);
    case K_BINARY: return wgml_binary(g, (wgml_binary_op)c->ia, x[0], x[1], c->fa);
    case K_SCALARS: {
        wgml_tensor *v = wgml_add_scalar(g, x[0], 0.3f, 2.0f);
        v = wgml_sub_scalar(g, v, 0.2f, 0.5f);
        v = wgml_mul_scalar(g, v, 1.7f);
        v = wgml_div_scalar(g, v, 0.8f);
        v = wgml_minimum_scalar(g, v, 3.0f);
        v = wgml_maximum_scalar(g, v, 1.8f);
        return wgml_pow_scalar(g, v, 1.5f);
    }
    case K_UNARY: return wgml_unary(g, (wgml_unary_op)c->ia, x[0]);
    case K_CLAMP: return wgml_clamp(g, x[0], c->fa, c->fb);
    case K_WHERE: return wgml_where(g, wgml_gt_scalar(g, x[0], 0.0f), x[1], x[2]);
    case K_SUM: return wgml_sum(g, x[0], c->dims, c->nd, c->ia);
    case K_MEAN: return wgml_mean(g, x[0], c->dims, c->nd, c->ia);
    case K_AMAX: return wgml_amax(g, x[0], c->dims, c->nd, c->ia);
    case K_SOFTMAX: return wgml_softmax(g, x[0], c->ia);
    case K_LOGSOFTMAX: return wgml_log_softmax(g, x[0], c->ia);
    case K_RMS: return wgml_rms_norm(g, x[0], c->n > 1 ? x[1] : NULL, c->fa);
    case K_LAYER: return wgml_layer_norm(g, x[0], c->n > 1 ? x[1] : NULL, c->n > 2 ? x[2] : NULL, c->fa, NULL, NULL);
    case K_ROPE: {
        int64_t S = c->in[0].s[c->ib == WGML_ROPE_BHSD ? 2 : 1];
        wgml_tensor *pos = upload(g, WGML_I32, 1, &S, ROPE_POS);
        return wgml_rope_ex(g, x[0], pos, c->fa, (wgml_rope_style)c->ia, (wgml_rope_layout)c->ib, 0);
    }
    case K_SDPA: return wgml_sdpa(g, x[0], x[1], x[2], c->ia, c->fa);
    case K_EMBED: {
        int64_t s[2] = {2, 3};
        return wgml_embedding(g, x[0], upload(g, WGML_I32, 2, s, EMBED_IDX));
    }
    case K_GATHER: {
        int64_t s[2] = {2, 3};
        return wgml_gather(g, x[0], 1, upload(g, WGML_I32, 2, s, GATHER_IDX));
    }
    case K_ISELECT: {
        int64_t s = 5;
        return wgml_index_select(g, x[0], 0, upload(g, WGML_I32, 1, &s, SELECT_IDX));
    }
    case K_SLICE: return wgml_slice(g, x[0], c->ia, c->ib, c->dims[0], c->dims[1]);
    case K_CAT: return wgml_cat(g, x, 3, c->ia);
    case K_PERMUTE: return wgml_permute(g, x[0], c->dims);
    case K_TRANSPOSE: return wgml_transpose(g, x[0], c->ia, c->ib);
    case K_EXPAND: {
        int64_t s[3] = {c->dims[0], c->dims[1], c->dims[2]};
        return wgml_expand_copy(g, x[0], 3, s);
    }
    case K_CLONE: return wgml_clone(g, x[0]);
    case K_REUSE:
        return wgml_add(g, wgml_add(g, wgml_mul(g, x[0], x[0]), wgml_mul(g, wgml_silu(g, x[0]), x[1]), 1.0f), x[0], 1.0f);
    case K_RESHAPE: {
        int64_t s[2] = {c->dims[0], c->dims[1]};
        return wgml_reshape(g, x[0], 2, s);
    }
    case K_VIEW: {
        int64_t s[2] = {c->dims[0], c->dims[1]};
        return wgml_tensor_view(x[0], c->ia, 2, s);
    }
    case K_QW: {
        int64_t K = c->in[0].s[c->in[0].rank - 1], N = c->ia;
        float *w = th_random((size_t)(N * K), -1, 1);
        uint8_t *codes = malloc((size_t)(N * ((K + 1) / 2)));
        int64_t ng = (K + 31) / 32, np = (N + 3) / 4 * 4;
        float *scales = calloc((size_t)(ng * np), sizeof(float));
        QW_W = malloc(sizeof(float) * (size_t)(N * K));
        QW_N = N;
        wgml_q4gsw_quantize(w, N, K, 32, codes, scales);
        wgml_q4gsw_dequantize(codes, scales, N, K, 32, QW_W);
        QW = wgml_qweight_upload_q4gsw(g, codes, scales, NULL, N, K, 32);
        free(w);
        free(codes);
        free(scales);
        return wgml_qlinear(g, x[0], QW);
    }
    case K_LORA: { /* inputs: x, A, B; the base a fixed fp32 weight, frozen */
        int64_t K = c->in[0].s[1], N = c->in[2].s[0], R = c->in[1].s[0], ws[2] = {N, K};
        float *w = malloc(sizeof(float) * (size_t)(N * K));
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++) w[j * K + k] = (float)(0.05 * (double)((j * 3 + k) % 7) - 0.15);
        LORA = calloc(1, sizeof *LORA);
        *LORA = (wgml_lora){x[1], x[2], N, K, R, c->fa / (float)R};
        wgml_tensor *out = wgml_lora_linear(g, x[0], upload(g, WGML_F32, 2, ws, w), NULL, LORA);
        free(w);
        return out;
    }
    }
    return NULL;
}

/* ------------------------------------------------------------------ the FD runner */

static double host_loss(const fdcase *c, double **x, const float *R, double *tmp) {
    int64_t n = host_forward(c, x, tmp);
    double l = 0;
    for (int64_t i = 0; i < n; i++) l += tmp[i] * R[i];
    return l;
}

static void run_case(const fdcase *c) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_tensor *x[MAXIN] = {0};
    for (int i = 0; i < c->n; i++) {
        x[i] = wgml_tensor_new(g, WGML_F32, c->in[i].rank, c->in[i].s);
        if (c->in[i].train) wgml_tensor_set_trainable(x[i], 1);
    }
    wgml_tensor *out = gpu_forward(g, c, x);
    if (!th_check(out != NULL, "%s: forward: %s", c->name, wgml_last_error(T.ctx))) goto done;
    int64_t on = wgml_tensor_numel(out);
    float *R = th_random((size_t)on, -1, 1);
    int64_t rs[WGML_MAX_RANK];
    for (int i = 0; i < wgml_tensor_rank(out); i++) rs[i] = wgml_tensor_dim(out, i);
    wgml_tensor *Rt = upload(g, WGML_F32, wgml_tensor_rank(out), rs, R);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, out, Rt), NULL, 0, 0);
    float scale = c->kind == K_MATMUL ? 2.0f : 1.0f; /* the loss scale is honoured */
    wgml_status s = wgml_backward(g, loss, scale);
    if (!th_check(!s && !wgml_graph_compile(g), "%s: backward/compile: %s", c->name, wgml_last_error(T.ctx))) {
        free(R);
        goto done;
    }
    double *tmp = malloc(sizeof(double) * MAXN);
    for (int run = 0; run < 2; run++) { /* compiled once, run twice with new inputs */
        float *hf[MAXIN];
        double *hd[MAXIN];
        for (int i = 0; i < c->n; i++) {
            int64_t n = numel(c->in[i].rank, c->in[i].s);
            hf[i] = th_random((size_t)n, c->in[i].lo, c->in[i].hi);
            hd[i] = malloc(sizeof(double) * (size_t)n);
            for (int64_t j = 0; j < n; j++) hd[i][j] = hf[i][j];
            wgml_tensor_write(x[i], hf[i], sizeof(float) * (size_t)n);
        }
        th_check(!wgml_graph_run(g), "%s: run: %s", c->name, wgml_last_error(T.ctx));
        for (int i = 0; i < c->n; i++) {
            if (!c->in[i].train) continue;
            int64_t n = numel(c->in[i].rank, c->in[i].s);
            wgml_tensor *gt = wgml_tensor_grad(x[i]);
            float *got = gt ? th_read_f32(gt) : NULL;
            double *ref = malloc(sizeof(double) * (size_t)n), amax = 0;
            for (int64_t j = 0; j < n; j++) {
                double keep = hd[i][j], h = 1e-6 * fmax(1.0, fabs(keep));
                hd[i][j] = keep + h;
                double lp = host_loss(c, hd, R, tmp);
                hd[i][j] = keep - h;
                double lm = host_loss(c, hd, R, tmp);
                hd[i][j] = keep;
                ref[j] = scale * (lp - lm) / (2 * h);
                amax = fmax(amax, fabs(ref[j]));
            }
            char name[96];
            snprintf(name, sizeof name, "%s: d%d (run %d)", c->name, i, run);
            if (th_check(got != NULL, "%s: gradient read", name)) th_close(name, got, ref, (size_t)n, 2e-4 + 1e-3 * amax, 1e-3);
            free(got);
            free(ref);
        }
        for (int i = 0; i < c->n; i++) {
            free(hf[i]);
            free(hd[i]);
        }
    }
    free(tmp);
    free(R);
done:
    if (QW) wgml_qweight_free(QW);
    QW = NULL;
    free(QW_W);
    QW_W = NULL;
    free(LORA);
    LORA = NULL;
    wgml_graph_free(g);
}


int main(int argc, char **argv) {
    th_init_args("test_autograd_rules", argc, argv);
    double t0 = now();
    for (int i = 0; i < N_CASES; i++) {
        double tc = now();
        run_case(&CASES[i]);
        if (getenv("WGML_AG_TIMES")) printf("  %-28s %.2f s\n", CASES[i].name, now() - tc);
    }
    printf("finite-difference checks: %d rules in %.2f s\n", N_CASES, now() - t0);
    return th_done();
}
