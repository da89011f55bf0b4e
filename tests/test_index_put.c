/* index_put and its gather twin index_tensor (x[indices]) (f32 and i32 data; one to three index tensors on the leading dims, broadcast
 * together; negative indices; duplicates summed with accumulate, the last one winning without;
 * values broadcast) against a double-precision loop on fresh random inputs; a built graph
 * (indices taken modulo the dim's size); bad input. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shp {
    int rank;
    int64_t d[WGML_MAX_RANK];
} shp;

static int64_t numel_of(const shp *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->d[i];
    return n;
}

/* Row-major index into t of the element output element i (shape o, t broadcast to it) reads. */
static int64_t src_index(int64_t i, const shp *o, const shp *t) {
    int64_t c[WGML_MAX_RANK], idx = 0;
    for (int d = o->rank - 1; d >= 0; d--) c[d] = i % o->d[d], i /= o->d[d];
    for (int d = 0; d < t->rank; d++) {
        int od = d + (o->rank - t->rank);
        idx = idx * t->d[d] + (t->d[d] == 1 ? 0 : c[od]);
    }
    return idx;
}

static shp bshape(int n, const shp *in) {
    shp o = {0, {0}};
    for (int k = 0; k < n; k++)
        if (in[k].rank > o.rank) o.rank = in[k].rank;
    for (int d = 0; d < o.rank; d++) {
        int64_t v = 1;
        for (int k = 0; k < n; k++) {
            int td = d - (o.rank - in[k].rank);
            if (td >= 0 && in[k].d[td] != 1) v = in[k].d[td];
        }
        o.d[d] = v;
    }
    return o;
}

static wgml_tensor *upload(wgml_graph *g, wgml_dtype dt, const shp *s, const void *data) {
    wgml_tensor *t = wgml_tensor_new(g, dt, s->rank, s->d);
    if (t && data && wgml_tensor_write(t, data, wgml_tensor_nbytes(t))) {
        th_check(false, "upload: %s", wgml_last_error(T.ctx));
        return NULL;
    }
    return t;
}

/* One case: x of shape sx, k index tensors of shapes si[0..k), values of shape sv. */
static void case_put(wgml_dtype dt, shp sx, int k, const shp *si, shp sv, int accumulate, const char *label) {
    int64_t nx = numel_of(&sx), nv = numel_of(&sv);
    shp b = bshape(k, si);
    int64_t nb = numel_of(&b), inner = 1;
    for (int d = k; d < sx.rank; d++) inner *= sx.d[d];
    shp full = b; /* the broadcast values' shape: B + x.shape[k:] */
    for (int d = k; d < sx.rank; d++) full.d[full.rank++] = sx.d[d];
    float *hx = th_random((size_t)nx, -5, 5), *hv = th_random((size_t)nv, -5, 5);
    int32_t *ix = malloc(sizeof(int32_t) * (size_t)nx), *iv = malloc(sizeof(int32_t) * (size_t)nv);
    for (int64_t i = 0; i < nx; i++) ix[i] = (int32_t)floor(hx[i] * 100);
    for (int64_t i = 0; i < nv; i++) iv[i] = (int32_t)floor(hv[i] * 100);
    int32_t *hi[4];
    wgml_tensor *ti[4];
    for (int d = 0; d < k; d++) {
        int64_t n = numel_of(&si[d]);
        hi[d] = malloc(sizeof(int32_t) * (size_t)n);
        /* any index in [-size, size); small dims give duplicates */
        for (int64_t i = 0; i < n; i++) hi[d][i] = (int32_t)floor(th_uniform((double)-sx.d[d], (double)sx.d[d]));
        ti[d] = upload(T.g, WGML_I32, &si[d], hi[d]);
    }
    bool f = dt == WGML_F32;
    wgml_tensor *x = upload(T.g, dt, &sx, f ? (void *)hx : (void *)ix), *v = upload(T.g, dt, &sv, f ? (void *)hv : (void *)iv);
    /* reference: entries in order */
    double *ref = malloc(sizeof(double) * (size_t)nx);
    for (int64_t i = 0; i < nx; i++) ref[i] = f ? hx[i] : ix[i];
    for (int64_t p = 0; p < nb; p++) {
        int64_t row = 0;
        for (int d = 0; d < k; d++) {
            int64_t id = hi[d][src_index(p, &b, &si[d])];
            row = row * sx.d[d] + (id < 0 ? id + sx.d[d] : id);
        }
        for (int64_t j = 0; j < inner; j++) {
            int64_t vi = src_index(p * inner + j, &full, &sv);
            double w = f ? hv[vi] : iv[vi];
            ref[row * inner + j] = accumulate ? ref[row * inner + j] + w : w;
        }
    }
    wgml_tensor *o = wgml_index_put(T.g, x, ti, k, v, accumulate);
    char name[160];
    snprintf(name, sizeof name, "index_put %s k=%d %s%s", f ? "f32" : "i32", k, accumulate ? "accumulate " : "", label);
    if (th_check(o != NULL, "%s: %s", name, wgml_last_error(T.ctx))) {
        if (f) {
            float *got = th_read_f32(o);
            th_close(name, got, ref, (size_t)nx, 1e-5, 1e-6);
            free(got);
        } else {
            int32_t *got = malloc(sizeof(int32_t) * (size_t)nx);
            int bad = wgml_tensor_read(o, got, sizeof(int32_t) * (size_t)nx) ? -1 : 0;
            for (int64_t i = 0; !bad && i < nx; i++) bad += got[i] != (int32_t)ref[i];
            th_check(bad == 0, "%s: %d wrong", name, bad);
            free(got);
        }
    }
    for (int d = 0; d < k; d++) free(hi[d]), wgml_tensor_free(ti[d]);
    free(hx); free(hv); free(ix); free(iv); free(ref);
    wgml_tensor_free(x); wgml_tensor_free(v); wgml_tensor_free(o);
}

/* x[indices]: k index tensors (broadcast together, negative entries) on x's leading dims. */
static void case_index(shp sx, int k, const shp *si) {
    int64_t nx = numel_of(&sx);
    shp b = bshape(k, si);
    int64_t nb = numel_of(&b), inner = 1;
    for (int d = k; d < sx.rank; d++) inner *= sx.d[d];
    float *hx = th_random((size_t)nx, -5, 5);
    int32_t *hi[4];
    wgml_tensor *ti[4];
    for (int d = 0; d < k; d++) {
        int64_t n = numel_of(&si[d]);
        hi[d] = malloc(sizeof(int32_t) * (size_t)n);
        for (int64_t i = 0; i < n; i++) hi[d][i] = (int32_t)floor(th_uniform((double)-sx.d[d], (double)sx.d[d]));
        ti[d] = upload(T.g, WGML_I32, &si[d], hi[d]);
    }
    wgml_tensor *x = upload(T.g, WGML_F32, &sx, hx);
    double *ref = malloc(sizeof(double) * (size_t)(nb * inner));
    for (int64_t p = 0; p < nb; p++) {
        int64_t row = 0;
        for (int d = 0; d < k; d++) {
            int64_t id = hi[d][src_index(p, &b, &si[d])];
            row = row * sx.d[d] + (id < 0 ? id + sx.d[d] : id);
        }
        for (int64_t j = 0; j < inner; j++) ref[p * inner + j] = hx[row * inner + j];
    }
    wgml_tensor *o = wgml_index_tensor(T.g, x, ti, k);
    bool shape_ok = o && wgml_tensor_rank(o) == b.rank + sx.rank - k;
    for (int d = 0; shape_ok && d < b.rank + sx.rank - k; d++)
        shape_ok = wgml_tensor_dim(o, d) == (d < b.rank ? b.d[d] : sx.d[k + d - b.rank]);
    char name[96];
    snprintf(name, sizeof name, "index_tensor k=%d %lld entries", k, (long long)nb);
    th_check(shape_ok, "%s: output shape (%s)", name, wgml_last_error(T.ctx));
    float *got = th_read_f32(o);
    th_close(name, got, ref, (size_t)(nb * inner), 0, 0);
    for (int d = 0; d < k; d++) free(hi[d]), wgml_tensor_free(ti[d]);
    free(hx); free(ref); free(got);
    wgml_tensor_free(x); wgml_tensor_free(o);
}

#define S(...) ((shp){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* A built graph: indices change per run and are not checked; one outside [-size, size) is taken
 * modulo the size. */
static void built_graph(void) {
    wgml_graph *g = wgml_graph_new(T.ctx);
    shp sx = S(5, 3), si = S(4), sv = S(4, 3);
    wgml_tensor *x = upload(g, WGML_F32, &sx, NULL), *i0 = upload(g, WGML_I32, &si, NULL), *v = upload(g, WGML_F32, &sv, NULL);
    wgml_tensor *o = wgml_index_put(g, x, &i0, 1, v, 1);
    if (o) wgml_graph_keep(g, o);
    if (!th_check(o && !wgml_graph_compile(g), "built index_put: %s", wgml_last_error(T.ctx))) {
        wgml_graph_free(g);
        return;
    }
    float *hx = th_random(15, -1, 1), *hv = th_random(12, -1, 1);
    int32_t idx[4] = {7, -2, 3, -11}; /* 7 -> 2, -2 -> 3, -11 -> 4 */
    const int rows[4] = {2, 3, 3, 4};
    wgml_tensor_write(x, hx, sizeof(float) * 15);
    wgml_tensor_write(v, hv, sizeof(float) * 12);
    wgml_tensor_write(i0, idx, sizeof idx);
    double ref[15];
    for (int i = 0; i < 15; i++) ref[i] = hx[i];
    for (int p = 0; p < 4; p++)
        for (int j = 0; j < 3; j++) ref[rows[p] * 3 + j] += hv[p * 3 + j];
    if (th_check(!wgml_graph_run(g), "built index_put run: %s", wgml_last_error(T.ctx))) {
        float *got = th_read_f32(o);
        th_close("index_put built graph, indices modulo the size", got, ref, 15, 1e-6, 1e-6);
        free(got);
    }
    free(hx); free(hv);
    wgml_graph_free(g);
}

static void bad_input(void) {
    shp sx = S(5, 2), si = S(2), sv = S(3, 2);
    float hx[10] = {0};
    int32_t good[2] = {0, 1}, far[2] = {1, 5};
    wgml_tensor *x = upload(T.g, WGML_F32, &sx, hx), *i0 = upload(T.g, WGML_I32, &si, good),
                *i1 = upload(T.g, WGML_I32, &si, far), *v = upload(T.g, WGML_F32, &sv, NULL);
    th_expect_error("values that do not broadcast", wgml_index_put(T.g, x, &i0, 1, v, 0) == NULL, WGML_ERR_SHAPE,
                    "index_put", "values [3, 2]", "[2, 2]", NULL);
    wgml_tensor *v2 = upload(T.g, WGML_F32, &si, good); /* shape [2] broadcasts to [2, 2] */
    th_expect_error("index out of range (eager)", wgml_index_put(T.g, x, &i1, 1, v2, 0) == NULL, WGML_ERR_ARG,
                    "index_put", "indices[0][1] = 5", "[-5, 5)", NULL);
    th_expect_error("f32 index", wgml_index_put(T.g, x, &x, 1, v2, 0) == NULL, WGML_ERR_DTYPE, "indices[0]", NULL);
    wgml_tensor *three[3] = {i0, i0, i0};
    th_expect_error("more index tensors than dims", wgml_index_put(T.g, x, three, 3, v2, 0) == NULL, WGML_ERR_ARG,
                    "index_put", "3 index tensors", NULL);
    th_expect_error("values of another dtype", wgml_index_put(T.g, x, &i0, 1, i0, 0) == NULL, WGML_ERR_DTYPE,
                    "values", NULL);
    wgml_tensor_free(x); wgml_tensor_free(i0); wgml_tensor_free(i1); wgml_tensor_free(v); wgml_tensor_free(v2);
}

int main(int argc, char **argv) {
    th_init_args("test_index_put", argc, argv);
    for (int acc = 0; acc < 2; acc++)
        for (int t = 0; t < 2; t++) {
            wgml_dtype dt = t ? WGML_I32 : WGML_F32;
            case_put(dt, S(5, 2), 1, (shp[]){S(2)}, S(2, 2), acc, "[5,2] rows");
            case_put(dt, S(5), 1, (shp[]){S(4)}, S(4), acc, "[5] duplicates likely");
            case_put(dt, S(5, 2), 2, (shp[]){S(2), S(2)}, S(2), acc, "two indices");
            case_put(dt, S(5, 3, 2), 3, (shp[]){S(2), S(2), S(2)}, S(1), acc, "three indices, one value");
            case_put(dt, S(5, 3, 2, 4), 2, (shp[]){S(3, 1), S(1, 4)}, S(4, 2, 4), acc, "broadcast indices");
            case_put(dt, S(7, 33), 1, (shp[]){S(40)}, S(33), acc, "many duplicates, values broadcast");
        }
    case_index(S(5, 2), 1, (shp[]){S(3)});
    case_index(S(5, 3, 2), 2, (shp[]){S(4), S(4)});
    case_index(S(5, 3, 2, 4), 2, (shp[]){S(3, 1), S(1, 4)});
    case_index(S(6, 7), 2, (shp[]){S(2, 3), S(1)});
    built_graph();
    bad_input();
    return th_done();
}
