/* Indexing ops (gather, index_select, embedding) on every data dtype with int32 indices,
 * negative indices, exact comparison with plain-loop references; out-of-range indices (an
 * error naming the index in the eager graph, clamped in a built graph); bad input; and a
 * built graph embedding -> permute -> slice -> cat run twice with new indices. */
#include "copy_util.h"

/* PyTorch's wrap for an index known to be in range. */
static int64_t wrap(int64_t v, int64_t size) { return v < 0 ? v + size : v; }
/* The documented built-graph rule for any index: wrap negatives, then clamp into [0, size). */
static int64_t clamp_index(int64_t v, int64_t size) {
    if (v < 0) v += size;
    return v < 0 ? 0 : v >= size ? size - 1 : v;
}

static int32_t *random_indices(int64_t n, int64_t size) {
    int32_t *p = malloc(sizeof(int32_t) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)th_uniform((double)-size, (double)size);
    return p;
}

/* For the PyTorch comparison (tests/py/test_torch_index.py): x, index, params [dim], out. */
static void dump_case(const char *op, wgml_dtype dt, int xr, const int64_t *xs, const void *hx, int ir,
                      const int64_t *is, const int32_t *hi, int dim, wgml_tensor *o) {
    if (!th_dumping() || !o) return;
    static int counter;
    char cn[48];
    snprintf(cn, sizeof cn, "%s_%d", op, counter++);
    float prm[1] = {(float)dim};
    int64_t np = 1;
    th_dump(cn, "x", dt, xr, xs, hx);
    th_dump(cn, "index", WGML_I32, ir, is, hi);
    th_dump(cn, "params", WGML_F32, 1, &np, prm);
    th_dump_tensor(cn, "out", o);
}

/* ---------------------------------------------------------------- gather */

static void run_gather(wgml_dtype dt, int rank, const int64_t *xs, int dim, const int64_t *is) {
    size_t es = wgml_dtype_size(dt);
    int d = dim < 0 ? dim + rank : dim;
    int64_t n = cu_numel(rank, is), c[WGML_MAX_RANK];
    void *hx = cu_random(dt, cu_numel(rank, xs));
    int32_t *hi = random_indices(n, xs[d]);
    wgml_tensor *x = cu_upload(T.g, dt, rank, xs, hx), *idx = cu_upload(T.g, WGML_I32, rank, is, hi);
    unsigned char *ref = malloc((size_t)n * es + 4);
    for (int64_t e = 0; e < n; e++) {
        cu_unravel(e, rank, is, c);
        c[d] = wrap(hi[e], xs[d]);
        memcpy(ref + e * es, (unsigned char *)hx + cu_ravel(rank, xs, c) * es, es);
    }
    char name[200], b1[64], b2[64];
    snprintf(name, sizeof name, "gather %s x %s dim %d index %s", wgml_dtype_name(dt), tshape_host(b1, rank, xs), dim,
             tshape_host(b2, rank, is));
    wgml_tensor *o = wgml_gather(T.g, x, dim, idx);
    cu_check(name, o, rank, is, ref);
    dump_case("gather", dt, rank, xs, hx, rank, is, hi, dim, o);
    wgml_tensor_free(o); wgml_tensor_free(x); wgml_tensor_free(idx);
    free(hx); free(hi); free(ref);
}

static void test_gather(void) {
    int64_t xa[3] = {7, 37, 9}, ia[3] = {7, 20, 9}, ib[3] = {5, 3, 9}, ic[3] = {2, 5, 7};
    int64_t x1[1] = {129}, i1[1] = {37};
    int64_t x8[8] = {2, 3, 2, 1, 3, 2, 2, 3}, i8[8] = {2, 2, 2, 1, 5, 2, 1, 3};
    for (int t = 0; t < 4; t++) {
        wgml_dtype dt = CU_DTYPES[t];
        run_gather(dt, 3, xa, 1, ia);
        run_gather(dt, 3, xa, 0, ib);  /* smaller index in the other dims */
        run_gather(dt, 3, xa, -1, ic); /* last dim, negative dim */
        run_gather(dt, 1, x1, 0, i1);
        run_gather(dt, 8, x8, 4, i8);
    }
}

/* ---------------------------------------------------------------- index_select */

static void run_select(wgml_dtype dt, int rank, const int64_t *xs, int dim, int64_t nsel, bool rank0) {
    size_t es = wgml_dtype_size(dt);
    int d = dim < 0 ? dim + rank : dim;
    int64_t os[WGML_MAX_RANK], c[WGML_MAX_RANK];
    memcpy(os, xs, sizeof(int64_t) * (size_t)rank);
    os[d] = nsel;
    int64_t n = cu_numel(rank, os);
    void *hx = cu_random(dt, cu_numel(rank, xs));
    int32_t *hi = random_indices(nsel, xs[d]);
    wgml_tensor *x = cu_upload(T.g, dt, rank, xs, hx), *idx = cu_upload(T.g, WGML_I32, rank0 ? 0 : 1, &nsel, hi);
    unsigned char *ref = malloc((size_t)n * es + 4);
    for (int64_t e = 0; e < n; e++) {
        cu_unravel(e, rank, os, c);
        c[d] = wrap(hi[c[d]], xs[d]);
        memcpy(ref + e * es, (unsigned char *)hx + cu_ravel(rank, xs, c) * es, es);
    }
    char name[200], b1[64];
    snprintf(name, sizeof name, "index_select %s x %s dim %d, %lld indices%s", wgml_dtype_name(dt),
             tshape_host(b1, rank, xs), dim, (long long)nsel, rank0 ? " (rank-0 index)" : "");
    wgml_tensor *o = wgml_index_select(T.g, x, dim, idx);
    cu_check(name, o, rank, os, ref);
    dump_case("index_select", dt, rank, xs, hx, rank0 ? 0 : 1, &nsel, hi, dim, o);
    wgml_tensor_free(o); wgml_tensor_free(x); wgml_tensor_free(idx);
    free(hx); free(hi); free(ref);
}

static void test_index_select(void) {
    int64_t a[2] = {37, 129}, b[3] = {7, 37, 12}, c[3] = {5, 7, 3};
    for (int t = 0; t < 4; t++) {
        wgml_dtype dt = CU_DTYPES[t];
        run_select(dt, 2, a, 0, 7, false);   /* rows of 129: u32 units */
        run_select(dt, 2, a, -1, 37, false); /* columns */
        run_select(dt, 3, b, 1, 20, false);  /* inner 12: vec4 units */
        run_select(dt, 3, c, 2, 5, false);   /* odd inner, bool tails */
        run_select(dt, 3, c, 0, 1, true);
    }
}

/* ---------------------------------------------------------------- embedding */

static void run_embedding(wgml_dtype dt, int64_t v, int64_t dm, int irank, const int64_t *is) {
    size_t es = wgml_dtype_size(dt);
    int64_t n = cu_numel(irank, is), ws[2] = {v, dm}, os[WGML_MAX_RANK];
    if (irank) memcpy(os, is, sizeof(int64_t) * (size_t)irank);
    os[irank] = dm;
    void *hw = cu_random(dt, v * dm);
    int32_t *hi = random_indices(n, v);
    wgml_tensor *w = cu_upload(T.g, dt, 2, ws, hw), *idx = cu_upload(T.g, WGML_I32, irank, is, hi);
    unsigned char *ref = malloc((size_t)(n * dm) * es + 4);
    for (int64_t r = 0; r < n; r++)
        memcpy(ref + r * dm * es, (unsigned char *)hw + wrap(hi[r], v) * dm * es, (size_t)dm * es);
    char name[200], b1[64];
    snprintf(name, sizeof name, "embedding %s weight [%lld, %lld] idx %s", wgml_dtype_name(dt), (long long)v,
             (long long)dm, tshape_host(b1, irank, is));
    wgml_tensor *o = wgml_embedding(T.g, w, idx);
    cu_check(name, o, irank + 1, os, ref);
    if (n * dm < 1000000) dump_case("embedding", dt, 2, ws, hw, irank, is, hi, 0, o);
    wgml_tensor_free(o); wgml_tensor_free(w); wgml_tensor_free(idx);
    free(hw); free(hi); free(ref);
}

static void test_embedding(void) {
    int64_t i2[2] = {7, 5}, i1[1] = {129}, i3[3] = {2, 3, 7};
    for (int t = 0; t < 4; t++) {
        wgml_dtype dt = CU_DTYPES[t];
        run_embedding(dt, 129, 37, 2, i2);
        run_embedding(dt, 37, 64, 1, i1);
        run_embedding(dt, 7, 3, 3, i3);
        run_embedding(dt, 37, 8, 0, NULL);
    }
    /* more than 65,535 workgroups: bool data goes through the general kernel, one thread per
     * output word of 4, 256 threads per workgroup: 525,000 rows of 129 = 67.7 million
     * elements (68 MB), 66,138 workgroups. */
    double t0 = now();
    int64_t big[1] = {525000};
    run_embedding(WGML_BOOL, 50, 129, 1, big);
    printf("  [embedding with 66,138 workgroups: %.2f s]\n", now() - t0);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void) {
    int64_t ws[2] = {49152, 4}, is[1] = {6};
    wgml_tensor *w = cu_upload(T.g, WGML_F32, 2, ws, NULL);
    int32_t hi[6] = {0, 5, -49152, 50000, 49151, -49153};
    wgml_tensor *idx = cu_upload(T.g, WGML_I32, 1, is, hi);
    th_expect_error("embedding index 50000", !wgml_embedding(T.g, w, idx), WGML_ERR_ARG,
                    "embedding: idx[3] = 50000 is out of range [-49152, 49152)", NULL);
    hi[3] = 3;
    wgml_tensor_write(idx, hi, sizeof hi);
    th_expect_error("embedding index -49153", !wgml_embedding(T.g, w, idx), WGML_ERR_ARG,
                    "embedding: idx[5] = -49153 is out of range [-49152, 49152)", NULL);
    int64_t xs[2] = {3, 4}, gs[2] = {2, 2};
    wgml_tensor *x = cu_upload(T.g, WGML_F32, 2, xs, NULL);
    int32_t gi[4] = {0, 1, 3, 4};
    wgml_tensor *gidx = cu_upload(T.g, WGML_I32, 2, gs, gi);
    th_expect_error("gather index 4", !wgml_gather(T.g, x, 1, gidx), WGML_ERR_ARG,
                    "gather: index[1, 1] = 4 is out of range [-4, 4)", NULL);
    th_expect_error("index_select index 4", !wgml_index_select(T.g, x, 1, idx), WGML_ERR_ARG,
                    "index_select: index[1] = 5 is out of range [-4, 4)", NULL);
    wgml_tensor *fidx = cu_upload(T.g, WGML_F32, 1, is, NULL);
    th_expect_error("embedding f32 idx", !wgml_embedding(T.g, w, fidx), WGML_ERR_DTYPE, "embedding", "idx", "i32", "f32",
                    NULL);
    th_expect_error("gather f32 index", !wgml_gather(T.g, x, 0, fidx), WGML_ERR_DTYPE, "gather", "index", "f32", NULL);
    th_expect_error("index_select f32 index", !wgml_index_select(T.g, x, 0, fidx), WGML_ERR_DTYPE, "index_select",
                    "index", NULL);
    th_expect_error("embedding NULL weight", !wgml_embedding(T.g, NULL, idx), WGML_ERR_ARG, "embedding",
                    "weight is NULL", NULL);
    th_expect_error("embedding NULL idx", !wgml_embedding(T.g, w, NULL), WGML_ERR_ARG, "embedding", "idx is NULL", NULL);
    th_expect_error("gather NULL x", !wgml_gather(T.g, NULL, 0, gidx), WGML_ERR_ARG, "gather", "x is NULL", NULL);
    th_expect_error("index_select NULL index", !wgml_index_select(T.g, x, 0, NULL), WGML_ERR_ARG, "index_select",
                    "index is NULL", NULL);
    th_expect_error("gather dim 2", !wgml_gather(T.g, x, 2, gidx), WGML_ERR_ARG, "gather", "dim 2", "[3, 4]", NULL);
    th_expect_error("index_select dim -3", !wgml_index_select(T.g, x, -3, idx), WGML_ERR_ARG, "index_select",
                    "dim -3", NULL);
    th_expect_error("gather rank", !wgml_gather(T.g, x, 0, idx), WGML_ERR_SHAPE, "gather", "index [6]", "x [3, 4]",
                    NULL);
    int64_t big[2] = {4, 4};
    wgml_tensor *bidx = cu_upload(T.g, WGML_I32, 2, big, NULL);
    th_expect_error("gather index too large", !wgml_gather(T.g, x, 1, bidx), WGML_ERR_SHAPE, "gather", "[4, 4]",
                    "[3, 4]", NULL);
    th_expect_error("index_select rank-2 index", !wgml_index_select(T.g, x, 0, bidx), WGML_ERR_SHAPE, "index_select",
                    "index", "[4, 4]", NULL);
    th_expect_error("embedding weight rank 1", !wgml_embedding(T.g, idx, idx), WGML_ERR_SHAPE, "embedding", "weight",
                    NULL);
    wgml_tensor_free(w); wgml_tensor_free(idx); wgml_tensor_free(x); wgml_tensor_free(gidx);
    wgml_tensor_free(fidx); wgml_tensor_free(bidx);
}

/* ---------------------------------------------------------------- built graph */

/* emb = embedding(weight[V, D], idx[B, S]) -> [B, S, D]; p = permute(emb, (2, 0, 1)) -> [D, B, S];
 * s = slice(p, 2, 1, S, 2) -> [D, B, S2]; out = cat(p2 = gather-free index_select(p, 0, sel), s)
 * along dim 2. Run twice with new indices, the second time with out-of-range ones, which the
 * kernels clamp (wrap negatives, then clamp into [0, V)). */
static void test_graph(void) {
    const int64_t V = 37, D = 12, B = 3, S = 7, NS = 5;
    const int64_t S2 = (S - 1 + 1) / 2; /* slice 1:S:2 */
    wgml_graph *g = wgml_graph_new(T.ctx);
    int64_t ws[2] = {V, D}, is[2] = {B, S}, ss[1] = {NS};
    wgml_tensor *w = wgml_tensor_new(g, WGML_F32, 2, ws), *idx = wgml_tensor_new(g, WGML_I32, 2, is);
    wgml_tensor *sel = wgml_tensor_new(g, WGML_I32, 1, ss);
    int perm[3] = {2, 0, 1};
    wgml_tensor *emb = wgml_embedding(g, w, idx);
    wgml_tensor *p = wgml_permute(g, emb, perm);                     /* [D, B, S] */
    wgml_tensor *s = wgml_slice(g, p, 2, 1, INT64_MAX, 2);           /* [D, B, S2] */
    wgml_tensor *q = wgml_index_select(g, p, 2, sel);                /* [D, B, NS] */
    wgml_tensor *parts[2] = {q, s};
    wgml_tensor *out = wgml_cat(g, parts, 2, 2);                     /* [D, B, NS + S2] */
    th_check(out && !wgml_graph_keep(g, out) && !wgml_graph_compile(g), "graph builds and compiles: %s",
             wgml_last_error(T.ctx));
    float *hw = (float *)cu_random(WGML_F32, V * D);
    if (w) wgml_tensor_write(w, hw, sizeof(float) * (size_t)(V * D));
    int64_t W = NS + S2, os[3] = {D, B, W};
    for (int run = 0; run < 2 && out; run++) {
        int32_t hi[21], hs[5];
        for (int i = 0; i < B * S; i++) hi[i] = (int32_t)th_uniform(-V, V);
        for (int i = 0; i < NS; i++) hs[i] = (int32_t)th_uniform(-S, S);
        if (run == 1) { /* out of range: clamped */
            hi[0] = 50000; hi[4] = -50000; hi[9] = (int32_t)V; hi[20] = (int32_t)(-V - 1);
            hs[1] = 7; hs[3] = -8;
        }
        wgml_tensor_write(idx, hi, sizeof hi);
        wgml_tensor_write(sel, hs, sizeof hs);
        th_check(!wgml_graph_run(g), "graph run %d: %s", run, wgml_last_error(T.ctx));
        float *ref = malloc(sizeof(float) * (size_t)(D * B * W));
        for (int64_t dd = 0; dd < D; dd++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < W; j++) {
                    int64_t sp = j < NS ? clamp_index(hs[j], S) : 1 + 2 * (j - NS);
                    int64_t row = clamp_index(hi[b * S + sp], V);
                    ref[(dd * B + b) * W + j] = hw[row * D + dd];
                }
        cu_check(run ? "graph embedding->permute->slice/index_select->cat, clamped indices"
                     : "graph embedding->permute->slice/index_select->cat",
                 out, 3, os, ref);
        free(ref);
    }
    free(hw);
    wgml_graph_free(g);
}

int main(int argc, char **argv) {
    th_init_args("test_index", argc, argv);
    struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {{"gather", test_gather},       {"index_select", test_index_select}, {"errors", test_errors},
                 {"graph", test_graph},         {"embedding", test_embedding}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        double t0 = now();
        parts[i].fn();
        printf("[%s: %.2f s]\n", parts[i].name, now() - t0);
    }
    return th_done();
}
