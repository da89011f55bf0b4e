/* The op registry's rotary embeddings (src/program/ops_rope.c: the Vulkan partitioner's fused
 * et_vk.apply_rotary_emb_hf, et_vk.apply_rotary_emb and et_vk.apply_rotary_emb_interleaved)
 * called as the program runner calls them, on the GPU, against float64 references written here
 * from the operators' reference implementations (backends/vulkan/custom_ops_lib.py: the table
 * rows start_pos .. start_pos + xq.size(1), unsqueezed at dim 1 and broadcast; rotate_half on
 * the first cos.size(-1) features; the pair rotations), with fresh random shapes (both the
 * [B, S, H, D] layout of ExecuTorch's llama and transformers' [B, H, S, D] with a [1, S, D]
 * table, partial rotation, start_pos > 0, [S, D/2] and [S, H, D/2] tables) and inputs each run
 * (WGML_SEED repeats one), NaN-poisoned outputs; then the refusals, each a clear error naming
 * the operator. */
#include "harness.h"
#include "program_slots.h"

#include <stdio.h>

static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)floor(th_uniform(0, 1) * (double)(hi - lo + 1) - 1e-12); }

/* The offset in a table of dims td (rank tr, right-aligned against x's rank xr) of x's element
 * with coordinates c: PyTorch's broadcasting (a size-1 table dim repeats). */
static int64_t bidx(int xr, const int64_t *c, int tr, const int64_t *td) {
    int64_t off = 0;
    for (int i = 0; i < tr; i++) {
        int xi = xr - tr + i;
        off = off * td[i] + (td[i] == 1 ? 0 : c[xi]);
    }
    return off;
}

static void coords(int r, const int64_t *d, int64_t i, int64_t *c) {
    for (int k = r - 1; k >= 0; k--) c[k] = i % d[k], i /= d[k];
}

static int64_t prod(int r, const int64_t *d) {
    int64_t p = 1;
    for (int i = 0; i < r; i++) p *= d[i];
    return p;
}

static float *rnd(int64_t n, double **ref) {
    float *f = th_random((size_t)n, -1, 1);
    *ref = malloc((size_t)n * sizeof **ref);
    for (int64_t i = 0; i < n; i++) (*ref)[i] = f[i];
    return f;
}

/* Builds op and checks each output slot against its reference (f32 products and sums of a few
 * terms of magnitude <= 1: 1e-6 absolute is ~8 ulps). */
static void run(slots *s, const char *op, const int32_t *args, int nargs, const int32_t *outs, double *const *refs, int nout,
                const char *what) {
    wgml_status st = s_call(s, op, args, nargs);
    for (int k = 0; k < nout; k++) {
        double *got = st ? NULL : s_read(s, outs[k]);
        if (!th_check(got != NULL, "%s: output %d builds and runs%s%s", what, k, st ? ": " : "", st ? wgml_last_error(T.ctx) : ""))
            return;
        int64_t n = s_numel(s, outs[k]), bad = 0;
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = fabs(got[i] - refs[k][i]);
            worst = th_max_err(worst, e);
            bad += !(e <= 1e-6);
        }
        th_check(bad == 0, "%s: output %d, %lld elements, max abs err %.2e", what, k, (long long)n, worst);
        free(got);
    }
}

/* ---- apply_rotary_emb_hf ---------------------------------------------------------------- */

/* out = x·cos + rotate_half(x)·sin on the first rd features (cos/sin broadcast from tables
 * td: rows start .. start + x.size(1) of dim 0, a dim of 1 inserted at 1). */
static void hf_ref(int xr, const int64_t *xd, const double *x, int tr, const int64_t *td, const double *cs, const double *sn,
                   int64_t start, int64_t seq, double *out) {
    int64_t rows = td[0] - start < seq ? td[0] - start : seq, ud[WGML_MAX_RANK], c[WGML_MAX_RANK];
    int ur = tr + 1; /* the sliced table, unsqueezed at 1 */
    ud[0] = rows, ud[1] = 1;
    for (int i = 1; i < tr; i++) ud[i + 1] = td[i];
    int64_t rd = td[tr - 1], h = rd / 2, row = prod(tr - 1, td + 1);
    for (int64_t i = 0; i < prod(xr, xd); i++) {
        coords(xr, xd, i, c);
        int64_t j = c[xr - 1];
        if (j >= rd) {
            out[i] = x[i];
            continue;
        }
        int64_t t = bidx(xr, c, ur, ud) + start * row; /* the unsqueezed view reads the same rows */
        double rh = j < h ? -x[i + h] : x[i - h];
        out[i] = x[i] * cs[t] + rh * sn[t];
    }
}

static void hf_case(int hf_layout) {
    int64_t b = irand(1, 2), hq = irand(1, 4), hk = irand(1, hq), s = irand(1, 6), d = 2 * irand(1, 6);
    int64_t rd = th_uniform(0, 1) < 0.5 ? d : 2 * irand(1, d / 2), start = 0, tr, td[3];
    int64_t qd[4], kd[4];
    if (hf_layout) { /* transformers: x [B, H, S, D], the table [1, S, rd]; the op's rows are B·0 + [0, H) */
        int64_t q4[4] = {b, hq, s, d}, k4[4] = {b, hk, s, d};
        memcpy(qd, q4, sizeof qd), memcpy(kd, k4, sizeof kd);
        tr = 3, td[0] = 1, td[1] = s, td[2] = rd;
    } else { /* ExecuTorch's llama: x [B, S, H, D], a table [T, rd] read from start_pos */
        int64_t q4[4] = {b, s, hq, d}, k4[4] = {b, s, hk, d};
        memcpy(qd, q4, sizeof qd), memcpy(kd, k4, sizeof kd);
        start = irand(0, 4), tr = 2, td[0] = start + s + irand(0, 3), td[1] = rd;
    }
    double *xq, *xk, *cs, *sn;
    float *fq = rnd(prod(4, qd), &xq), *fk = rnd(prod(4, kd), &xk), *fc = rnd(prod((int)tr, td), &cs), *fs = rnd(prod((int)tr, td), &sn);
    double *rq = malloc((size_t)prod(4, qd) * sizeof *rq), *rk = malloc((size_t)prod(4, kd) * sizeof *rk);
    /* the rows come from xq.size(1) for both (the reference implementation's seq_len) */
    hf_ref(4, qd, xq, (int)tr, td, cs, sn, start, qd[1], rq);
    hf_ref(4, kd, xk, (int)tr, td, cs, sn, start, qd[1], rk);
    slots sl;
    s_init(&sl, T.ctx, T.g);
    int32_t outs[2] = {s_tensor(&sl, VK_FLOAT32, 4, qd, NULL), s_tensor(&sl, VK_FLOAT32, 4, kd, NULL)};
    int32_t a[6] = {s_tensor(&sl, VK_FLOAT32, 4, qd, fq), s_tensor(&sl, VK_FLOAT32, 4, kd, fk), s_tensor(&sl, VK_FLOAT32, (int)tr, td, fc),
                    s_tensor(&sl, VK_FLOAT32, (int)tr, td, fs), s_int(&sl, start), s_vlist(&sl, 2, outs)};
    char what[160];
    snprintf(what, sizeof what, "et_vk.apply_rotary_emb_hf %s xq [%lld %lld %lld %lld] rd %lld start %lld",
             hf_layout ? "[B, H, S, D]" : "[B, S, H, D]", (long long)qd[0], (long long)qd[1], (long long)qd[2], (long long)qd[3],
             (long long)rd, (long long)start);
    double *refs[2] = {rq, rk};
    run(&sl, "et_vk.apply_rotary_emb_hf.default", a, 6, outs, refs, 2, what);
    free(fq), free(fk), free(fc), free(fs), free(xq), free(xk), free(cs), free(sn), free(rq), free(rk);
}

/* ---- the pair rotations ------------------------------------------------------------------- */

/* out pairs (x[2j], x[2j+1]) rotated by (cos, sin) at table offset t(i) of pair element i. */
static void pair_ref(int64_t n, const double *x, const double *cs, const double *sn, const int64_t *t, double *out) {
    for (int64_t p = 0; p < n / 2; p++) {
        double re = x[2 * p], im = x[2 * p + 1], c = cs[t[p]], s = sn[t[p]];
        out[2 * p] = re * c - im * s, out[2 * p + 1] = re * s + im * c;
    }
}

static void llama_case(void) {
    int64_t b = irand(1, 2), s = irand(1, 5), hq = irand(1, 4), hk = irand(1, 4), d = 2 * irand(1, 5), h2 = d / 2;
    int three = th_uniform(0, 1) < 0.4 && hk == hq; /* a [S, H, D/2] table broadcasts over B only */
    int64_t qd[4] = {b, s, hq, d}, kd[4] = {b, s, hk, d}, td[3] = {s, three ? hq : h2, h2};
    int tr = three ? 3 : 2;
    double *xq, *xk, *cs, *sn;
    float *fq = rnd(prod(4, qd), &xq), *fk = rnd(prod(4, kd), &xk), *fc = rnd(prod(tr, td), &cs), *fs = rnd(prod(tr, td), &sn);
    double *ref[2] = {malloc((size_t)prod(4, qd) * sizeof(double)), malloc((size_t)prod(4, kd) * sizeof(double))};
    for (int w = 0; w < 2; w++) {
        const int64_t *xd = w ? kd : qd;
        int64_t np = prod(4, xd) / 2, *t = malloc((size_t)np * sizeof *t), c[4];
        for (int64_t p = 0; p < np; p++) { /* pair p of [B, S, H, D/2]: table (s, j) or (s, h, j) */
            coords(4, (int64_t[]){xd[0], xd[1], xd[2], h2}, p, c);
            t[p] = three ? (c[1] * hq + c[2]) * h2 + c[3] : c[1] * h2 + c[3];
        }
        pair_ref(2 * np, w ? xk : xq, cs, sn, t, ref[w]);
        free(t);
    }
    slots sl;
    s_init(&sl, T.ctx, T.g);
    int32_t outs[2] = {s_tensor(&sl, VK_FLOAT32, 4, qd, NULL), s_tensor(&sl, VK_FLOAT32, 4, kd, NULL)};
    int32_t a[5] = {s_tensor(&sl, VK_FLOAT32, 4, qd, fq), s_tensor(&sl, VK_FLOAT32, 4, kd, fk), s_tensor(&sl, VK_FLOAT32, tr, td, fc),
                    s_tensor(&sl, VK_FLOAT32, tr, td, fs), s_vlist(&sl, 2, outs)};
    char what[160];
    snprintf(what, sizeof what, "et_vk.apply_rotary_emb xq [%lld %lld %lld %lld], a rank-%d table", (long long)b, (long long)s,
             (long long)hq, (long long)d, tr);
    run(&sl, "et_vk.apply_rotary_emb.default", a, 5, outs, ref, 2, what);
    free(fq), free(fk), free(fc), free(fs), free(xq), free(xk), free(cs), free(sn), free(ref[0]), free(ref[1]);
}

static void interleaved_case(void) {
    int64_t b = irand(1, 3), n = irand(1, 6), c = 2 * irand(1, 5), xd[3] = {b, n, c};
    int four = th_uniform(0, 1) < 0.5;
    int64_t fd[4] = {1, n, c / 2, 2}, fd2[2] = {n, c};
    double *x, *f;
    float *fx = rnd(b * n * c, &x), *ff = rnd(n * c, &f);
    double *cs = malloc((size_t)(n * c / 2) * sizeof *cs), *sn = malloc((size_t)(n * c / 2) * sizeof *sn);
    double *ref = malloc((size_t)(b * n * c) * sizeof *ref);
    for (int64_t k = 0; k < n * c / 2; k++) cs[k] = f[2 * k], sn[k] = f[2 * k + 1];
    int64_t *t = malloc((size_t)(b * n * c / 2) * sizeof *t);
    for (int64_t p = 0; p < b * n * c / 2; p++) t[p] = p % (n * c / 2);
    pair_ref(b * n * c, x, cs, sn, t, ref);
    slots sl;
    s_init(&sl, T.ctx, T.g);
    int32_t a[3] = {s_tensor(&sl, VK_FLOAT32, 3, xd, fx), four ? s_tensor(&sl, VK_FLOAT32, 4, fd, ff) : s_tensor(&sl, VK_FLOAT32, 2, fd2, ff), 0};
    a[2] = s_tensor(&sl, VK_FLOAT32, 3, xd, NULL);
    char what[128];
    snprintf(what, sizeof what, "et_vk.apply_rotary_emb_interleaved x [%lld %lld %lld], freqs_cis of rank %d", (long long)b,
             (long long)n, (long long)c, four ? 4 : 2);
    run(&sl, "et_vk.apply_rotary_emb_interleaved.default", a, 3, &a[2], &ref, 1, what);
    free(fx), free(ff), free(x), free(f), free(cs), free(sn), free(ref), free(t);
}

/* ---- refusals ----------------------------------------------------------------------------- */

static void refused(slots *s, const char *op, const int32_t *args, int nargs, wgml_status want, const char *msg) {
    wgml_status st = s_call(s, op, args, nargs);
    th_expect_error(op, st != WGML_OK, want, op, msg, NULL);
}

static void edge_cases(void) {
    static float z[256];
    int64_t qd[4] = {1, 2, 2, 4}, t2[2] = {4, 4}, t3[2] = {4, 3}, t6[2] = {4, 6}, h2[2] = {2, 2};
    slots s;
    int32_t o[2], q, k;
#define QK() (s_init(&s, T.ctx, T.g), q = s_tensor(&s, VK_FLOAT32, 4, qd, z), k = s_tensor(&s, VK_FLOAT32, 4, qd, z), \
              o[0] = s_tensor(&s, VK_FLOAT32, 4, qd, NULL), o[1] = s_tensor(&s, VK_FLOAT32, 4, qd, NULL))
    QK();
    refused(&s, "et_vk.apply_rotary_emb_hf.default",
            (int32_t[]){q, k, s_tensor(&s, VK_FLOAT32, 2, t3, z), s_tensor(&s, VK_FLOAT32, 2, t3, z), s_int(&s, 0), s_vlist(&s, 2, o)}, 6,
            WGML_ERR_SHAPE, "must be even");
    QK();
    refused(&s, "et_vk.apply_rotary_emb_hf.default",
            (int32_t[]){q, k, s_tensor(&s, VK_FLOAT32, 2, t6, z), s_tensor(&s, VK_FLOAT32, 2, t6, z), s_int(&s, 0), s_vlist(&s, 2, o)}, 6,
            WGML_ERR_SHAPE, "at most xq's and xk's");
    QK();
    refused(&s, "et_vk.apply_rotary_emb_hf.default",
            (int32_t[]){q, k, s_tensor(&s, VK_FLOAT32, 2, t2, z), s_tensor(&s, VK_FLOAT32, 2, t2, z), s_int(&s, 4), s_vlist(&s, 2, o)}, 6,
            WGML_ERR_ARG, "start_pos outside the tables");
    QK();
    refused(&s, "et_vk.apply_rotary_emb_hf.default",
            (int32_t[]){q, k, s_tensor(&s, VK_FLOAT32, 2, t2, z), s_tensor(&s, VK_FLOAT32, 2, t2, z), s_int(&s, 0), s_vlist(&s, 1, o)}, 6,
            WGML_ERR_ARG, "expected 2 outputs");
    QK();
    refused(&s, "et_vk.apply_rotary_emb.default",
            (int32_t[]){q, k, s_tensor(&s, VK_FLOAT32, 2, t2, z), s_tensor(&s, VK_FLOAT32, 2, t2, z), s_vlist(&s, 2, o)}, 5,
            WGML_ERR_SHAPE, "the tables must be [S, D/2] or [S, H, D/2]");
    QK();
    refused(&s, "et_vk.apply_rotary_emb.default",
            (int32_t[]){q, k, s_tensor(&s, VK_FLOAT32, 2, h2, z), s_tensor(&s, VK_FLOAT32, 2, h2, z),
                        s_vlist(&s, 2, (int32_t[]){o[0], s_tensor(&s, VK_FLOAT32, 4, (int64_t[]){1, 2, 2, 2}, NULL)})}, 5,
            WGML_ERR_SHAPE, "output shape [1, 2, 2, 4], the program says [1, 2, 2, 2]");
    s_init(&s, T.ctx, T.g);
    refused(&s, "et_vk.apply_rotary_emb_interleaved.default",
            (int32_t[]){s_tensor(&s, VK_FLOAT32, 3, (int64_t[]){1, 2, 3}, z), s_tensor(&s, VK_FLOAT32, 2, (int64_t[]){2, 3}, z),
                        s_tensor(&s, VK_FLOAT32, 3, (int64_t[]){1, 2, 3}, NULL)}, 3,
            WGML_ERR_SHAPE, "C even");
#undef QK
}

int main(int argc, char **argv) {
    th_init_args("program_rope", argc, argv);
    for (int rep = 0; rep < 6; rep++) hf_case(0), hf_case(1);
    for (int rep = 0; rep < 8; rep++) llama_case();
    for (int rep = 0; rep < 6; rep++) interleaved_case();
    edge_cases();
    return th_done();
}
