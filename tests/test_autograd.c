#define _POSIX_C_SOURCE 200809L
/* Autograd: every backward rule checked against central finite differences of a host fp64
 * forward (table-driven: each row builds a small composite on the GPU, loss = Σ out·R with a
 * fixed random R, and the same composite in double precision on the host), each in a built
 * graph compiled once and run twice with new inputs; then gradients into caller-provided
 * tensors (flat buffer views, micro-batch accumulation), frozen branches (no backward
 * dispatches), bad input, and --dump cases (an MLP, a GQA + RoPE attention block, a Llama
 * block with 4-bit projections and LoRA) that tests/py/test_torch_autograd.py recomputes with
 * PyTorch float64 autograd. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

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

static int64_t numel(int rank, const int64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= s[i];
    return n;
}

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

static wgml_tensor *upload(wgml_graph *g, wgml_dtype dt, int rank, const int64_t *s, const void *data) {
    wgml_tensor *t = wgml_tensor_new(g, dt, rank, s);
    if (t && wgml_tensor_write(t, data, wgml_tensor_nbytes(t))) return NULL;
    return t;
}

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

/* ------------------------------------------------------------------ gradients into caller tensors */

static double *host_dw(const float *x, const float *R, int64_t M, int64_t N, int64_t K) {
    double *dw = calloc((size_t)(N * K), sizeof(double));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) dw[n * K + k] += (double)R[m * N + n] * x[m * K + k];
    return dw;
}

/* Two parameters whose gradients land in views of one flat buffer (overwritten each run), and
 * a third accumulated over two micro-batches. */
static void test_grad_tensors(void) {
    const int64_t M = 5, N = 4, K = 8;
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {M, K}, ws[2] = {N, K}, ys[2] = {M, N}, flat_n = 128;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *bias = wgml_tensor_new(g, WGML_F32, 1, &N), *w2 = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *R = wgml_tensor_new(g, WGML_F32, 2, ys);
    wgml_tensor *flat = wgml_tensor_new(g, WGML_F32, 1, &flat_n), *acc = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *gw = wgml_tensor_view(flat, 0, 2, ws), *gb = wgml_tensor_view(flat, 64, 1, &N);
    wgml_tensor_set_trainable(w, 1);
    wgml_tensor_set_trainable(bias, 1);
    wgml_tensor_set_trainable(w2, 1);
    wgml_tensor_set_grad(w, gw, 0);
    wgml_tensor_set_grad(bias, gb, 0);
    th_check(!wgml_tensor_set_grad(w2, acc, 1), "set_grad accumulate: %s", wgml_last_error(T.ctx));
    wgml_tensor *y = wgml_add(g, wgml_linear(g, x, w, bias), wgml_linear(g, x, w2, NULL), 1.0f);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, y, R), NULL, 0, 0);
    th_check(!wgml_backward(g, loss, 1.0f) && !wgml_graph_compile(g), "grad tensors: build: %s", wgml_last_error(T.ctx));
    th_check(wgml_tensor_grad(w) == gw && wgml_tensor_grad(w2) == acc, "grad tensors: wgml_tensor_grad gives the caller's");
    float zeros[32] = {0};
    wgml_tensor_write(acc, zeros, sizeof zeros);
    float *fl = th_random((size_t)flat_n, -1, 1); /* stale contents must be overwritten */
    wgml_tensor_write(flat, fl, sizeof(float) * (size_t)flat_n);
    double sum_dw[32] = {0};
    for (int run = 0; run < 2; run++) {
        float *hx = th_random((size_t)(M * K), -1, 1), *hw = th_random((size_t)(N * K), -1, 1), *hR = th_random((size_t)(M * N), -1, 1);
        wgml_tensor_write(x, hx, sizeof(float) * (size_t)(M * K));
        wgml_tensor_write(w, hw, sizeof(float) * (size_t)(N * K));
        wgml_tensor_write(w2, hw, sizeof(float) * (size_t)(N * K));
        wgml_tensor_write(bias, hw, sizeof(float) * (size_t)N);
        wgml_tensor_write(R, hR, sizeof(float) * (size_t)(M * N));
        th_check(!wgml_graph_run(g), "grad tensors: run");
        double *dw = host_dw(hx, hR, M, N, K), db[4] = {0};
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) db[n] += hR[m * N + n];
        for (int i = 0; i < 32; i++) sum_dw[i] += dw[i];
        float *gf = th_read_f32(flat), *ga = th_read_f32(acc);
        char name[64];
        snprintf(name, sizeof name, "flat view dw (run %d)", run);
        th_close(name, gf, dw, 32, 1e-5, 1e-5);
        snprintf(name, sizeof name, "flat view dbias (run %d)", run);
        th_close(name, gf + 64, db, 4, 1e-5, 1e-5);
        snprintf(name, sizeof name, "accumulated dw (after %d micro-batches)", run + 1);
        th_close(name, ga, sum_dw, 32, 1e-5, 1e-5);
        free(gf);
        free(ga);
        free(dw);
        free(hx);
        free(hw);
        free(hR);
    }
    free(fl);
    wgml_graph_free(g);
}

/* A frozen branch records no backward work: y = x·W1ᵀ + x·W2ᵀ with W2 frozen gives exactly
 * as many backward dispatches as y = x·W1ᵀ + C. */
static size_t backward_dispatches(bool frozen_branch, bool *w2_grad_null) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {6, 8}, ws[2] = {4, 8}, ys[2] = {6, 4};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w1 = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor *w2 = wgml_tensor_new(g, WGML_F32, 2, ws), *c = wgml_tensor_new(g, WGML_F32, 2, ys);
    wgml_tensor_set_trainable(w1, 1);
    wgml_tensor *other = frozen_branch ? wgml_gelu(g, wgml_linear(g, x, w2, NULL), 0) : c;
    wgml_tensor *loss = wgml_sum(g, wgml_add(g, wgml_linear(g, x, w1, NULL), other, 1.0f), NULL, 0, 0);
    size_t before = wgml_graph_dispatch_count(g);
    th_check(!wgml_backward(g, loss, 1.0f), "frozen: backward: %s", wgml_last_error(T.ctx));
    size_t n = wgml_graph_dispatch_count(g) - before;
    *w2_grad_null = wgml_tensor_grad(w2) == NULL;
    wgml_graph_free(g);
    return n;
}

/* A weight whose only use is a linear gets its gradient written by wgml_linear_dw straight into
 * the caller's tensor: no extra store dispatch. */
static size_t linear_backward_dispatches(bool into_caller) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {6, 8}, ws[2] = {4, 8};
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs), *w = wgml_tensor_new(g, WGML_F32, 2, ws);
    wgml_tensor_set_trainable(w, 1);
    if (into_caller) wgml_tensor_set_grad(w, wgml_tensor_new(g, WGML_F32, 2, ws), 1);
    wgml_tensor *loss = wgml_sum(g, wgml_linear(g, x, w, NULL), NULL, 0, 0);
    size_t before = wgml_graph_dispatch_count(g);
    wgml_backward(g, loss, 1.0f);
    size_t n = wgml_graph_dispatch_count(g) - before;
    wgml_graph_free(g);
    return n;
}

static void test_frozen(void) {
    size_t da = linear_backward_dispatches(false), db = linear_backward_dispatches(true);
    th_check(da == db, "linear weight gradient into the caller's tensor: %zu dispatches, %zu into an arena tensor", db, da);
    bool null_a, null_b;
    size_t a = backward_dispatches(true, &null_a), b = backward_dispatches(false, &null_b);
    th_check(a == b && a > 0, "frozen branch: %zu backward dispatches, %zu without the branch", a, b);
    th_check(null_a, "frozen branch: the frozen weight has no gradient");
}

/* The scatter kernel over more than 65,535 workgroups (2-D grid fold). */
static void test_big_scatter(void) {
    const int64_t cols = 8388736; /* 2·cols / 256 = 65,537 workgroups */
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t xs[2] = {2, cols}, one = 1;
    int32_t row = 1;
    wgml_tensor *x = wgml_tensor_new(g, WGML_F32, 2, xs);
    wgml_tensor_set_trainable(x, 1);
    wgml_tensor *idx = upload(g, WGML_I32, 1, &one, &row);
    wgml_tensor *loss = wgml_sum(g, wgml_index_select(g, x, 0, idx), NULL, 0, 0);
    bool ok = !wgml_backward(g, loss, 3.0f) && !wgml_graph_compile(g) && !wgml_graph_run(g);
    if (th_check(ok, "big scatter: %s", wgml_last_error(T.ctx))) {
        float *d = th_read_f32(wgml_tensor_grad(x));
        int64_t bad = 0;
        for (int64_t i = 0; d && i < 2 * cols; i++) bad += d[i] != (i < cols ? 0.0f : 3.0f);
        th_check(d && bad == 0, "big scatter (65,537 workgroups): %lld wrong elements", (long long)bad);
        free(d);
    }
    wgml_graph_free(g);
}

/* amax shares the gradient evenly among tied maxima (finite differences cannot see this). */
static void test_amax_ties(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t s[2] = {2, 4}, rs[2] = {2, 1};
    float hx[8] = {1, 3, 3, 2, 5, 5, 5, 5}, hr[2] = {2, -4};
    wgml_tensor *x = upload(g, WGML_F32, 2, s, hx), *r = upload(g, WGML_F32, 2, rs, hr);
    wgml_tensor_set_trainable(x, 1);
    int last = -1;
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, wgml_amax(g, x, &last, 1, 1), r), NULL, 0, 0);
    if (th_check(!wgml_backward(g, loss, 1) && !wgml_graph_compile(g) && !wgml_graph_run(g), "amax ties: %s",
                 wgml_last_error(T.ctx))) {
        float *d = th_read_f32(wgml_tensor_grad(x));
        double want[8] = {0, 1, 1, 0, -1, -1, -1, -1};
        th_close("amax ties: gradient split evenly", d, want, 8, 1e-6, 1e-6);
        free(d);
    }
    wgml_graph_free(g);
}

static void test_errors(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t s[2] = {2, 3};
    wgml_tensor *a = wgml_tensor_new(g, WGML_F32, 2, s), *f = wgml_tensor_new(g, WGML_F32, 2, s);
    th_expect_error("backward: loss not trainable", wgml_backward(g, wgml_sum(g, f, NULL, 0, 0), 1) != WGML_OK,
                    WGML_ERR_ARG, "does not depend", NULL);
    wgml_tensor_set_trainable(a, 1);
    th_expect_error("backward: loss of 6 elements", wgml_backward(g, wgml_mul(g, a, f), 1) != WGML_OK, WGML_ERR_SHAPE,
                    "wgml_backward", "one element", NULL);
    th_expect_error("backward: NULL loss", wgml_backward(g, NULL, 1) != WGML_OK, WGML_ERR_ARG, "loss is NULL", NULL);
    th_check(wgml_backward(NULL, a, 1) == WGML_ERR_ARG, "backward: NULL graph is an argument error");
    int64_t s3 = 5;
    th_expect_error("set_grad: element count", wgml_tensor_set_grad(a, wgml_tensor_new(g, WGML_F32, 1, &s3), 0) != WGML_OK,
                    WGML_ERR_SHAPE, "wgml_tensor_set_grad", "[5]", NULL);
    th_expect_error("set_grad: not persistent", wgml_tensor_set_grad(a, wgml_mul(g, f, f), 0) != WGML_OK, WGML_ERR_ARG,
                    "persistent", NULL);
    wgml_tensor *i32 = wgml_tensor_new(g, WGML_I32, 2, s);
    th_expect_error("set_trainable: i32", wgml_tensor_set_trainable(i32, 1) != WGML_OK, WGML_ERR_DTYPE, "set_trainable",
                    NULL);
    th_check(wgml_tensor_set_trainable(NULL, 1) == WGML_ERR_ARG, "set_trainable: NULL is an argument error");
    wgml_tensor *e = th_tensor_f32(2, s, (float[6]){0});
    th_expect_error("set_trainable: eager", wgml_tensor_set_trainable(e, 1) != WGML_OK, WGML_ERR_UNSUPPORTED, "eager",
                    NULL);
    wgml_tensor_free(e);
    th_check(!wgml_backward(g, wgml_sum(g, wgml_mul(g, a, f), NULL, 0, 0), 1), "backward: %s", wgml_last_error(T.ctx));
    th_expect_error("backward twice", wgml_backward(g, wgml_sum(g, a, NULL, 0, 0), 1) != WGML_OK, WGML_ERR_STATE,
                    "already ran", NULL);
    wgml_graph_compile(g);
    th_expect_error("set_trainable after compile", wgml_tensor_set_trainable(f, 1) != WGML_OK, WGML_ERR_STATE, "compiled",
                    NULL);
    wgml_graph_free(g);
}

/* ------------------------------------------------------------------ PyTorch comparison cases */

typedef struct param {
    const char *name;
    wgml_tensor *t;
    int64_t n;
    bool train;
} param;

static wgml_tensor *new_param(wgml_graph *g, param *ps, int *np, const char *name, int rank, const int64_t *s, bool train) {
    wgml_tensor *t = wgml_tensor_new(g, WGML_F32, rank, s);
    if (train) wgml_tensor_set_trainable(t, 1);
    ps[(*np)++] = (param){name, t, numel(rank, s), train};
    return t;
}

/* Writes fresh values into every parameter, runs, dumps inputs and gradients under case name. */
static void run_and_dump(wgml_graph *g, param *ps, int np, const char *case_name, double scale, wgml_tensor *loss) {
    for (int i = 0; i < np; i++) {
        float *h = th_random((size_t)ps[i].n, -scale, scale);
        if (!strncmp(ps[i].name, "normw", 5))
            for (int64_t j = 0; j < ps[i].n; j++) h[j] += 1.0f;
        wgml_tensor_write(ps[i].t, h, sizeof(float) * (size_t)ps[i].n);
        free(h);
    }
    th_check(!wgml_graph_run(g), "%s: run: %s", case_name, wgml_last_error(T.ctx));
    float l = 0;
    wgml_tensor_read(loss, &l, sizeof l);
    th_check(isfinite(l), "%s: finite loss %g", case_name, (double)l);
    char name[64];
    for (int i = 0; i < np; i++) {
        th_dump_tensor(case_name, ps[i].name, ps[i].t);
        if (ps[i].train) {
            snprintf(name, sizeof name, "grad_%s", ps[i].name);
            th_dump_tensor(case_name, name, wgml_tensor_grad(ps[i].t));
        }
    }
    th_dump_tensor(case_name, "loss", loss);
}

/* MLP: loss = mean(silu(linear(gelu(linear(x, W1, b1)), W2, b2))²). */
static void dump_mlp(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    param ps[8];
    int np = 0;
    int64_t xs[2] = {6, 8}, w1s[2] = {16, 8}, b1s = 16, w2s[2] = {8, 16}, b2s = 8;
    wgml_tensor *x = new_param(g, ps, &np, "x", 2, xs, true);
    wgml_tensor *w1 = new_param(g, ps, &np, "w1", 2, w1s, true), *b1 = new_param(g, ps, &np, "b1", 1, &b1s, true);
    wgml_tensor *w2 = new_param(g, ps, &np, "w2", 2, w2s, true), *b2 = new_param(g, ps, &np, "b2", 1, &b2s, true);
    wgml_tensor *y = wgml_silu(g, wgml_linear(g, wgml_gelu(g, wgml_linear(g, x, w1, b1), 0), w2, b2));
    wgml_tensor *loss = wgml_mean(g, wgml_mul(g, y, y), NULL, 0, 0);
    wgml_graph_keep(g, loss);
    if (th_check(!wgml_backward(g, loss, 1) && !wgml_graph_compile(g), "mlp: build: %s", wgml_last_error(T.ctx))) {
        run_and_dump(g, ps, np, "mlp_run0", 1, loss);
        run_and_dump(g, ps, np, "mlp_run1", 1, loss);
    }
    wgml_graph_free(g);
}

/* Attention: out = x + Wo·merge(sdpa(rope(q), rope(k), v)), q/k/v linear projections, GQA
 * (4 query heads, 2 kv heads), causal; loss = Σ out·R. q gets rope in [B,S,H,D] before the
 * head split, k after it ([B,H,S,D]); both the half-split style. */
static void dump_attention(void) {
    const int64_t S = 8, Hq = 4, Hkv = 2, D = 4, Dm = Hq * D;
    wgml_graph *g = wgml_graph_new(T.ctx);
    param ps[10];
    int np = 0;
    int64_t xs[3] = {1, S, Dm}, wq[2] = {Hq * D, Dm}, wk[2] = {Hkv * D, Dm}, wo[2] = {Dm, Hq * D};
    wgml_tensor *x = new_param(g, ps, &np, "x", 3, xs, true);
    wgml_tensor *Wq = new_param(g, ps, &np, "wq", 2, wq, true), *Wk = new_param(g, ps, &np, "wk", 2, wk, true);
    wgml_tensor *Wv = new_param(g, ps, &np, "wv", 2, wk, true), *Wo = new_param(g, ps, &np, "wo", 2, wo, true);
    wgml_tensor *R = new_param(g, ps, &np, "r", 3, xs, false);
    int32_t pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    wgml_tensor *positions = upload(g, WGML_I32, 1, &S, pos);
    int64_t q4s[4] = {1, S, Hq, D}, k4s[4] = {1, S, Hkv, D};
    int heads_first[4] = {0, 2, 1, 3};
    wgml_tensor *q = wgml_rope(g, wgml_reshape(g, wgml_linear(g, x, Wq, NULL), 4, q4s), positions, 10000, WGML_ROPE_HALF);
    q = wgml_permute(g, q, heads_first);
    wgml_tensor *k = wgml_permute(g, wgml_reshape(g, wgml_linear(g, x, Wk, NULL), 4, k4s), heads_first);
    k = wgml_rope_ex(g, k, positions, 10000, WGML_ROPE_HALF, WGML_ROPE_BHSD, 0);
    wgml_tensor *v = wgml_permute(g, wgml_reshape(g, wgml_linear(g, x, Wv, NULL), 4, k4s), heads_first);
    wgml_tensor *a = wgml_permute(g, wgml_sdpa(g, q, k, v, 1, 0), heads_first);
    wgml_tensor *out = wgml_add(g, x, wgml_linear(g, wgml_reshape(g, a, 3, xs), Wo, NULL), 1.0f);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, out, R), NULL, 0, 0);
    wgml_graph_keep(g, loss);
    if (th_check(!wgml_backward(g, loss, 1) && !wgml_graph_compile(g), "attention: build: %s", wgml_last_error(T.ctx))) {
        run_and_dump(g, ps, np, "attn_run0", 1, loss);
        run_and_dump(g, ps, np, "attn_run1", 1, loss);
    }
    wgml_graph_free(g);
}

/* One Llama block with every projection a frozen 4-bit linear plus a LoRA adapter:
 *   h = x + o(attn(rope(q(n1)), rope(k(n1)), v(n1))), n1 = rms_norm(x, normw1)
 *   out = h + down(silu(gate(n2))·up(n2)), n2 = rms_norm(h, normw2); loss = Σ out·R.
 * Gradients: x and every adapter's A and B (B starts random here, so A gets a gradient). */
#define LL_S 8
#define LL_DM 32
#define LL_HQ 4
#define LL_HKV 2
#define LL_D 8
#define LL_FF 64
static void dump_llama(void) {
    const char *names[7] = {"q", "k", "v", "o", "gate", "up", "down"};
    const int64_t shapes[7][2] = {{LL_HQ * LL_D, LL_DM}, {LL_HKV * LL_D, LL_DM}, {LL_HKV * LL_D, LL_DM}, {LL_DM, LL_HQ * LL_D},
                                  {LL_FF, LL_DM},        {LL_FF, LL_DM},         {LL_DM, LL_FF}};
    wgml_graph *g = wgml_graph_new(T.ctx);
    param ps[32];
    int np = 0;
    int64_t xs[3] = {1, LL_S, LL_DM}, dm = LL_DM, S = LL_S;
    wgml_tensor *x = new_param(g, ps, &np, "x", 3, xs, true);
    wgml_tensor *n1w = new_param(g, ps, &np, "normw1", 1, &dm, false), *n2w = new_param(g, ps, &np, "normw2", 1, &dm, false);
    wgml_tensor *R = new_param(g, ps, &np, "r", 3, xs, false);
    wgml_qweight *W[7];
    wgml_lora *L[7];
    for (int i = 0; i < 7; i++) {
        int64_t n = shapes[i][0], k = shapes[i][1];
        float *w = th_random((size_t)(n * k), -0.3, 0.3), *wd = malloc(sizeof(float) * (size_t)(n * k));
        uint8_t *codes = malloc((size_t)(n * k / 2));
        float *scales = calloc((size_t)(k / 32 * ((n + 3) / 4 * 4)), sizeof(float));
        wgml_q4gsw_quantize(w, n, k, 32, codes, scales);
        wgml_q4gsw_dequantize(codes, scales, n, k, 32, wd);
        W[i] = wgml_qweight_upload_q4gsw(g, codes, scales, NULL, n, k, 32);
        char nm[32];
        snprintf(nm, sizeof nm, "w_%s", names[i]);
        th_dump("llama", nm, WGML_F32, 2, shapes[i], wd);
        L[i] = wgml_lora_new(g, n, k, 4, 8.0f, 1000 + (uint64_t)i);
        snprintf(nm, sizeof nm, "a_%s", names[i]);
        ps[np++] = (param){strdup(nm), L[i]->a, 4 * k, true};
        snprintf(nm, sizeof nm, "b_%s", names[i]);
        ps[np++] = (param){strdup(nm), L[i]->b, n * 4, true};
        free(w);
        free(wd);
        free(codes);
        free(scales);
    }
    int32_t pos[LL_S];
    for (int i = 0; i < LL_S; i++) pos[i] = i;
    wgml_tensor *positions = upload(g, WGML_I32, 1, &S, pos);
    int hf[4] = {0, 2, 1, 3};
    int64_t q4s[4] = {1, LL_S, LL_HQ, LL_D}, k4s[4] = {1, LL_S, LL_HKV, LL_D};
    wgml_tensor *n1 = wgml_rms_norm(g, x, n1w, 1e-5f);
    wgml_tensor *q = wgml_reshape(g, wgml_lora_qlinear(g, n1, W[0], L[0]), 4, q4s);
    wgml_tensor *k = wgml_reshape(g, wgml_lora_qlinear(g, n1, W[1], L[1]), 4, k4s);
    wgml_tensor *v = wgml_reshape(g, wgml_lora_qlinear(g, n1, W[2], L[2]), 4, k4s);
    q = wgml_permute(g, wgml_rope(g, q, positions, 10000, WGML_ROPE_HALF), hf);
    k = wgml_permute(g, wgml_rope(g, k, positions, 10000, WGML_ROPE_HALF), hf);
    v = wgml_permute(g, v, hf);
    wgml_tensor *a = wgml_reshape(g, wgml_permute(g, wgml_sdpa(g, q, k, v, 1, 0), hf), 3, xs);
    wgml_tensor *h = wgml_add(g, x, wgml_lora_qlinear(g, a, W[3], L[3]), 1.0f);
    wgml_tensor *n2 = wgml_rms_norm(g, h, n2w, 1e-5f);
    wgml_tensor *act = wgml_mul(g, wgml_silu(g, wgml_lora_qlinear(g, n2, W[4], L[4])), wgml_lora_qlinear(g, n2, W[5], L[5]));
    wgml_tensor *out = wgml_add(g, h, wgml_lora_qlinear(g, act, W[6], L[6]), 1.0f);
    wgml_tensor *loss = wgml_sum(g, wgml_mul(g, out, R), NULL, 0, 0);
    wgml_graph_keep(g, loss);
    size_t fwd = wgml_graph_dispatch_count(g);
    bool ok = !wgml_backward(g, loss, 1) && !wgml_graph_compile(g);
    if (th_check(ok, "llama: build: %s", wgml_last_error(T.ctx))) {
        printf("llama block: %zu forward + %zu backward dispatches, arena %.1f KiB\n", fwd,
               wgml_graph_dispatch_count(g) - fwd, (double)wgml_graph_arena_bytes(g) / 1024);
        run_and_dump(g, ps, np, "llama_run0", 0.5, loss);
        run_and_dump(g, ps, np, "llama_run1", 0.5, loss);
    }
    for (int i = 0; i < 7; i++) {
        wgml_qweight_free(W[i]);
        wgml_lora_free(L[i]);
    }
    for (int i = 4; i < np; i++) free((char *)ps[i].name);
    wgml_graph_free(g);
}

/* LoRA init: A within ±1/√K and not constant, B zero, scale alpha/r. */
static void test_lora_init(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    wgml_lora *l = wgml_lora_new(g, 6, 16, 4, 8.0f, 7);
    if (th_check(l != NULL, "lora_new: %s", wgml_last_error(T.ctx))) {
        wgml_graph_compile(g);
        float *a = th_read_f32(l->a), *b = th_read_f32(l->b);
        double lo = 1, hi = -1, bmax = 0;
        for (int i = 0; i < 64; i++) {
            lo = fmin(lo, a[i]);
            hi = fmax(hi, a[i]);
        }
        for (int i = 0; i < 24; i++) bmax = fmax(bmax, fabs(b[i]));
        th_check(lo >= -0.25 && hi <= 0.25 && hi - lo > 0.2 && bmax == 0 && l->scale == 2.0f,
                 "lora init: A in [%g, %g] (bound 0.25), max|B| %g, scale %g", lo, hi, bmax, (double)l->scale);
        free(a);
        free(b);
    }
    th_expect_error("lora_new: r 0", wgml_lora_new(g, 6, 16, 0, 8, 1) == NULL, WGML_ERR_ARG, "lora_new", NULL);
    { /* the adapter's output must match the base output's shape [..., N = 6] */
        wgml_graph *g2 = wgml_graph_new(T.ctx);
        wgml_lora *l2 = wgml_lora_new(g2, 6, 16, 4, 8.0f, 7);
        int64_t xs[2] = {3, 16}, bs[2] = {3, 5};
        wgml_tensor *x = wgml_tensor_new(g2, WGML_F32, 2, xs), *base = wgml_tensor_new(g2, WGML_F32, 2, bs);
        th_check(l2 && x && base, "lora_apply operands: %s", wgml_last_error(T.ctx));
        th_expect_error("lora_apply: base_out [3, 5] for N = 6", wgml_lora_apply(g2, x, base, l2) == NULL,
                        WGML_ERR_SHAPE, "lora_apply", "[3, 5]", NULL);
        th_expect_error("lora_apply: NULL base_out", wgml_lora_apply(g2, x, NULL, l2) == NULL, WGML_ERR_ARG, NULL);
        wgml_lora_free(l2);
        wgml_graph_free(g2);
    }
    wgml_lora_free(l);
    wgml_graph_free(g);
}

int main(int argc, char **argv) {
    th_init_args("test_autograd", argc, argv);
    double t0 = now();
    for (int i = 0; i < N_CASES; i++) {
        double tc = now();
        run_case(&CASES[i]);
        if (getenv("WGML_AG_TIMES")) printf("  %-28s %.2f s\n", CASES[i].name, now() - tc);
    }
    double t1 = now();
    printf("finite-difference checks: %d rules in %.2f s\n", N_CASES, t1 - t0);
    test_grad_tensors();
    test_frozen();
    test_errors();
    test_amax_ties();
    test_lora_init();
    double t2 = now();
    test_big_scatter();
    double t3 = now();
    printf("big scatter: %.2f s\n", t3 - t2);
    dump_mlp();
    dump_attention();
    dump_llama();
    printf("model blocks: %.2f s\n", now() - t3);
    return th_done();
}
