/* The op registry (src/program/ops*.c) against bad arguments: every registered builder is called
 * with argument lists drawn at random from a pool of values of every kind (tensors of several
 * dtypes and shapes, numbers, int and double lists, strings, nulls, uncomputed and unsupported tensors), of
 * every length from 0 to 10. Each call must either succeed or fail with a message naming the
 * op; never crash or read outside the argument list (the ASan build runs it too). A few
 * well-formed calls are checked to succeed, so the test can fail in both directions. */
#include "program/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NV 17

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void tensor_slot(pv *s, wgml_graph *g, int vk, int rank, const int64_t *dims, int built) {
    memset(s, 0, sizeof *s);
    s->kind = PV_TENSOR, s->vk_dtype = vk, s->rank = rank, s->constant_id = -1;
    memcpy(s->dims, dims, (size_t)rank * sizeof *dims);
    if (built) s->t = wgml_tensor_new(g, (wgml_dtype)prog_vk_to_wgml(vk), rank, dims);
}

int main(void) {
    wgml_ctx *ctx;
    wgml_ctx_options o = {.poison_outputs = 1};
    if (wgml_ctx_create(&o, &ctx)) {
        fprintf(stderr, "no device: %s\n", wgml_create_error());
        return 1;
    }
    const char *seed_env = getenv("WGML_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
    rng ^= seed * 0xBF58476D1CE4E5B9ull;
    printf("seed %llu (WGML_SEED to repeat)\n", (unsigned long long)seed);
    static const int64_t d23[] = {2, 3}, d6[] = {6}, d3[] = {3}, d232[] = {2, 3, 2};
    static const int64_t il[] = {0, 1}, il_bad[] = {5, -9, 1 << 30};
    static const double dl2[] = {2.0, 0.5};
    static const int32_t vl[] = {0, 1}, vl3[] = {4, 5, 6};
    static const int32_t ol[] = {-1, 2}, ol3[] = {2, -1, 6}; /* Tensor?[]: -1 is None */
    size_t n_ops;
    const char *const *names = prog_op_names(&n_ops);
    int failures = 0, calls = 0, oks = 0;
    for (size_t op = 0; op < n_ops; op++) {
        prog_op_fn fn = prog_op_find(names[op]);
        if (!fn) {
            printf("FAIL %s: listed but not found\n", names[op]);
            failures++;
            continue;
        }
        for (int trial = 0; trial < 60; trial++) {
            wgml_graph *g = wgml_graph_new(ctx);
            pv v[NV];
            tensor_slot(&v[0], g, VK_FLOAT32, 2, d23, 1);
            tensor_slot(&v[1], g, VK_FLOAT32, 1, d3, 1);
            tensor_slot(&v[2], g, VK_INT32, 1, d3, 1);
            tensor_slot(&v[3], g, VK_BOOL, 2, d23, 1);
            tensor_slot(&v[4], g, VK_FLOAT32, 2, d23, 0); /* outputs: uncomputed */
            tensor_slot(&v[5], g, VK_FLOAT32, 3, d232, 0);
            tensor_slot(&v[6], g, VK_INT32, 1, d6, 0);
            memset(&v[7], 0, sizeof v[7]), v[7].kind = PV_NULL;
            memset(&v[8], 0, sizeof v[8]), v[8].kind = PV_INT, v[8].i = (int64_t)(next() % 5) - 2;
            memset(&v[9], 0, sizeof v[9]), v[9].kind = PV_DOUBLE, v[9].d = 0.5;
            if (trial & 4) v[9].kind = PV_DOUBLELIST, v[9].dlist = dl2, v[9].n = 2; /* scale factors */
            memset(&v[10], 0, sizeof v[10]), v[10].kind = PV_INTLIST, v[10].list64 = il, v[10].n = 2;
            memset(&v[11], 0, sizeof v[11]), v[11].kind = PV_INTLIST, v[11].list64 = il_bad, v[11].n = 3;
            memset(&v[12], 0, sizeof v[12]), v[12].kind = PV_VALUELIST, v[12].ids = trial & 1 ? vl : vl3,
                                              v[12].n = trial & 1 ? 2 : 3;
            memset(&v[13], 0, sizeof v[13]), v[13].kind = PV_STRING, v[13].s = trial & 2 ? "tanh" : "bogus";
            memset(&v[14], 0, sizeof v[14]), v[14].kind = PV_BOOL, v[14].i = 1;
            tensor_slot(&v[15], g, VK_FLOAT32, 2, d23, 0);
            v[15].unsupported = 1;
            memset(&v[16], 0, sizeof v[16]), v[16].kind = PV_OPT_TENSOR_LIST, v[16].ids = trial & 4 ? ol : ol3,
                                              v[16].n = trial & 4 ? 2 : 3;
            int32_t args[10];
            int nargs = (int)(next() % 11);
            for (int i = 0; i < nargs; i++) args[i] = (int32_t)(next() % NV);
            pbuild b = {.ctx = ctx, .g = g, .v = v, .nv = NV, .op = names[op]};
            wgml_clear_error(ctx);
            wgml_status s = fn(&b, args, nargs);
            calls++;
            if (s == WGML_OK) {
                oks++;
            } else if (!wgml_last_error(ctx)[0]) {
                printf("FAIL %s: error %s without a message (nargs %d)\n", names[op], wgml_status_name(s), nargs);
                failures++;
            }
            wgml_graph_free(g);
        }
    }
    /* well-formed calls succeed and give the serialised output shape */
    struct {
        const char *op;
        int n;
        int32_t args[6];
    } good[] = {
        {"aten.add.Tensor", 4, {0, 1, 8, 4}},     /* [2,3] + [3], alpha */
        {"aten.relu.default", 2, {0, 4}},         /* [2,3] */
        {"aten.floor.default", 2, {0, 4}},
        {"aten.sin.default", 2, {0, 4}},
        {"aten.expm1.default", 2, {0, 4}},
        {"aten.floor_divide.default", 3, {0, 1, 4}}, /* [2,3] // [3] */
        {"aten.permute_copy.default", 3, {0, 10, 4}},
        {"aten.sum.dim_IntList", 5, {0, 10, 14, 7, 4}},
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        wgml_graph *g = wgml_graph_new(ctx);
        pv v[NV];
        memset(v, 0, sizeof v);
        tensor_slot(&v[0], g, VK_FLOAT32, 2, d23, 1);
        tensor_slot(&v[1], g, VK_FLOAT32, 1, d3, 1);
        static const int64_t d32[] = {3, 2}, d1[] = {1}, il10[] = {1, 0};
        if (!strcmp(good[k].op, "aten.permute_copy.default")) tensor_slot(&v[4], g, VK_FLOAT32, 2, d32, 0);
        else if (!strcmp(good[k].op, "aten.sum.dim_IntList")) tensor_slot(&v[4], g, VK_FLOAT32, 0, d1, 0);
        else tensor_slot(&v[4], g, VK_FLOAT32, 2, d23, 0);
        v[7].kind = PV_NULL;
        v[8].kind = PV_INT, v[8].i = 2;
        v[10].kind = PV_INTLIST, v[10].list64 = strcmp(good[k].op, "aten.permute_copy.default") ? il : il10, v[10].n = 2;
        v[14].kind = PV_BOOL, v[14].i = 0;
        pbuild b = {.ctx = ctx, .g = g, .v = v, .nv = NV, .op = good[k].op};
        wgml_status s = prog_op_find(good[k].op)(&b, good[k].args, good[k].n);
        if (s || !v[4].t) {
            printf("FAIL %s: a well-formed call fails: %s\n", good[k].op, wgml_last_error(ctx));
            failures++;
        }
        wgml_graph_free(g);
    }
    printf("%zu ops, %d calls with random arguments (%d accepted), %d failures\n", n_ops, calls, oks, failures);
    wgml_ctx_destroy(ctx);
    return failures ? 1 : 0;
}
