/* wgml bench attention --decode: one decode step's attention alone (attn_decode_step: q and the
 * new key rotated, the key and value written into the caches' row len - 1, every query head
 * attending over the cache rows [0, len) in key chunks, and the chunks' merge) at a model's
 * shape, by default Llama-3.2-1B's at 577 positions of a 640-row cache (32 query heads over 8 kv
 * heads of 64), the shape of `wgml bench generate --prompt-tokens 512 --decode-tokens 128`'s
 * steps. Times a built graph of --reps steps back to back (wgml_graph_benchmark: 0.3 s warm-up,
 * best of 5) after checking every head's output against a double-precision reference over the
 * caches as the GPU left them. --kv f16: the caches' f16 form (random binary16 values in
 * [-1, 1]); --profile: each dispatch of one step timed alone; $WGML_DECODE_KPT: the keys per
 * thread (attn_decode.c). The bytes per step are the cache rows read (keys and values). */
#include "bench.h"
#include "ops/attention/attn_decode.h"
#include "ops/rope/rope_fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dec_opts {
    int64_t Hq, Hk, D, smax, len;
    int f16, reps, profile;
    float theta;
} dec_opts;

static int parse_dec(int argc, char **argv, dec_opts *o) {
    *o = (dec_opts){.Hq = 32, .Hk = 8, .D = 64, .smax = 640, .len = 577, .reps = 20, .theta = 500000.0f};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--decode")) continue;
        if (!strcmp(argv[i], "--heads") && i + 1 < argc) o->Hq = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--kv-heads") && i + 1 < argc) o->Hk = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc) o->D = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) o->smax = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--len") && i + 1 < argc) o->len = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
            const char *t = argv[++i];
            if (strcmp(t, "f16") && strcmp(t, "f32")) o->reps = 0; /* refused below */
            o->f16 = !strcmp(t, "f16");
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) o->reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile")) o->profile = 1;
        else o->reps = 0;
    }
    if (o->reps < 1 || o->reps > 1000 || o->Hk < 1 || o->Hq < 1 || o->Hq % o->Hk || o->D < 4 || o->D > 1024 || o->D % 4 ||
        o->smax < 1 || o->smax > (1 << 20) || o->len < 1 || o->len > o->smax) {
        fprintf(stderr, "usage: wgml bench attention --decode [--heads H] [--kv-heads H] [--dim D] [--cache ROWS] "
                        "[--len N] [--kv f16|f32] [--reps N] [--profile]\n"
                        "(heads a multiple of kv-heads, D a multiple of 4 up to 1024, 1 <= len <= cache <= 2^20, reps "
                        "1..1000)\n");
        return 2;
    }
    return 0;
}

/* a binary16 value's double */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* a random binary16 in [-1, 1] away from 0 (exponents 2^-8 .. 2^-1), its bits */
static uint16_t half_rand(uint64_t *s) {
    float u = bench_frand(s), w = bench_frand(s);
    uint16_t e = (uint16_t)(7 + (int)((w * 0.5f + 0.5f) * 7.99f)), m = (uint16_t)((u * 0.5f + 0.5f) * 1023.99f);
    return (uint16_t)((u < 0 ? 0x8000 : 0) | e << 10 | m);
}

/* x (one head) rotated in place at position pos, pairs (i, i + D/2), angle pos theta^(-2i/D) */
static void rope_ref(double *x, int64_t D, int64_t pos, double theta) {
    for (int64_t i = 0; i < D / 2; i++) {
        double ang = (double)pos * pow(theta, -(double)(2 * i) / (double)D), a = x[i], b = x[i + D / 2];
        x[i] = a * cos(ang) - b * sin(ang);
        x[i + D / 2] = a * sin(ang) + b * cos(ang);
    }
}

/* The caches read back (as doubles, [Hk, smax, D]) and the query heads' reference outputs
 * against got: 1 when every element is within 1e-4 of the row's largest |ref|; *worst. */
static int dec_check(const dec_opts *o, const float *hq, const double *kc, const double *vc, const float *got, double *worst) {
    int64_t G = o->Hq / o->Hk, D = o->D, L = o->len;
    double *sc = malloc(sizeof(double) * (size_t)L), q[1024];
    int ok = sc != NULL;
    for (int64_t h = 0; ok && h < o->Hq; h++) {
        const double *kh = kc + h / G * o->smax * D, *vh = vc + h / G * o->smax * D;
        double mx = -INFINITY, z = 0, mag = 0, out[1024];
        for (int64_t d = 0; d < D; d++) q[d] = hq[h * D + d];
        rope_ref(q, D, L - 1, o->theta);
        for (int64_t j = 0; j < L; j++) {
            double s = 0;
            for (int64_t d = 0; d < D; d++) s += q[d] * kh[j * D + d];
            sc[j] = s / sqrt((double)D);
            mx = fmax(mx, sc[j]);
        }
        for (int64_t j = 0; j < L; j++) z += (sc[j] = exp(sc[j] - mx));
        for (int64_t d = 0; d < D; d++) {
            out[d] = 0;
            for (int64_t j = 0; j < L; j++) out[d] += sc[j] * vh[j * D + d];
            out[d] /= z;
            mag = fmax(mag, fabs(out[d]));
        }
        for (int64_t d = 0; d < D; d++) {
            double e = fabs((double)got[h * D + d] - out[d]) / (mag + 1e-6);
            if (!(e <= 1e-4)) ok = 0;
            if (!(e <= *worst)) *worst = e;
        }
    }
    free(sc);
    return ok;
}

/* the cache c (f32 or its f16 form) read back as doubles into out [Hk * smax * D] */
static int read_cache(const dec_opts *o, wgml_tensor *c, double *out) {
    size_t n = (size_t)(o->Hk * o->smax * o->D);
    void *raw = malloc(o->f16 ? 2 * n : 4 * n);
    int ok = raw && !wgml_tensor_read(c, raw, o->f16 ? 2 * n : 4 * n);
    for (size_t i = 0; ok && i < n; i++) out[i] = o->f16 ? half_value(((uint16_t *)raw)[i]) : ((float *)raw)[i];
    free(raw);
    return ok;
}

/* The inputs: q, k, v random in [-1, 1); the caches random, f32 or binary16 words. */
static wgml_tensor *dec_input(wgml_graph *g, int rank, const int64_t *shape, int f16, uint64_t *s) {
    int64_t sh[4];
    memcpy(sh, shape, sizeof(int64_t) * (size_t)rank);
    if (f16) sh[rank - 1] /= 2;
    wgml_tensor *t = wgml_tensor_new(g, f16 ? WGML_U32 : WGML_F32, rank, sh);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)shape[i];
    float *h = malloc(4 * n);
    uint16_t *hh = (uint16_t *)h;
    for (size_t i = 0; h && i < n; i++) {
        if (f16) hh[i] = half_rand(s);
        else h[i] = bench_frand(s);
    }
    if (!h || !t || wgml_tensor_write(t, h, f16 ? 2 * n : 4 * n)) t = NULL;
    free(h);
    return t;
}

int bench_attn_decode_main(wgml_ctx *ctx, int argc, char **argv) {
    dec_opts o;
    if (parse_dec(argc, argv, &o)) return 2;
    uint64_t seed = 0x2545F4914F6CDD1Dull;
    wgml_graph *g = wgml_graph_new(ctx);
    int64_t qs[4] = {1, 1, o.Hq, o.D}, ks[4] = {1, 1, o.Hk, o.D}, cs[4] = {1, o.Hk, o.smax, o.D}, one[1] = {1};
    int32_t pos = (int32_t)(o.len - 1), len = (int32_t)o.len;
    wgml_tensor *q = dec_input(g, 4, qs, 0, &seed), *k = dec_input(g, 4, ks, 0, &seed), *v = dec_input(g, 4, ks, 0, &seed);
    wgml_tensor *kc = dec_input(g, 4, cs, o.f16, &seed), *vc = dec_input(g, 4, cs, o.f16, &seed);
    wgml_tensor *tp = wgml_tensor_new(g, WGML_I32, 1, one), *tl = wgml_tensor_new(g, WGML_I32, 1, one);
    wgml_tensor *tab = rope_freq_table(g, "bench attention", o.D, o.theta, NULL), *out = NULL;
    int ok = q && k && v && kc && vc && tp && tl && tab && !wgml_tensor_write(tp, &pos, 4) && !wgml_tensor_write(tl, &len, 4);
    for (int r = 0; ok && r < o.reps; r++) /* each step writes the same row again */
        ok = (out = attn_decode_step(g, q, k, v, tp, tl, tab, kc, vc, WGML_ROPE_HALF, 0, 0.0f, NULL, NULL, 0.0f)) != NULL;
    double best = 0;
    ok = ok && !wgml_graph_keep(g, out) && !wgml_graph_compile(g) &&
         !wgml_graph_benchmark(g, bench_cpu_adapter(ctx) ? 0.0 : 0.3, bench_cpu_adapter(ctx) ? 1 : 5, &best, NULL);
    size_t n = (size_t)(o.Hk * o.smax * o.D);
    double *hk = ok ? malloc(sizeof(double) * n) : NULL, *hv = ok ? malloc(sizeof(double) * n) : NULL, worst = 0;
    float *hq = malloc(sizeof(float) * (size_t)(o.Hq * o.D)), *got = malloc(sizeof(float) * (size_t)(o.Hq * o.D));
    ok = ok && hk && hv && hq && got && read_cache(&o, kc, hk) && read_cache(&o, vc, hv) &&
         !wgml_tensor_read(q, hq, sizeof(float) * (size_t)(o.Hq * o.D)) &&
         !wgml_tensor_read(out, got, sizeof(float) * (size_t)(o.Hq * o.D));
    int failed = !ok;
    if (!ok) {
        fprintf(stderr, "bench attention --decode: %s\n", wgml_last_error(ctx));
    } else {
        int good = dec_check(&o, hq, hk, hv, got, &worst);
        double per = best / o.reps, bytes = 2.0 * (double)(o.Hk * o.len * o.D) * (o.f16 ? 2 : 4);
        printf("attn_decode_step Hq=%lld Hk=%lld D=%lld cache %lld rows (%s), len %lld: %lld chunks, %d steps per graph run\n",
               (long long)o.Hq, (long long)o.Hk, (long long)o.D, (long long)o.smax, o.f16 ? "f16" : "f32",
               (long long)o.len, (long long)attn_decode_chunks(ctx, o.Hq, o.Hk, o.D, o.smax), o.reps);
        printf("step %.2f us, %.1f GB/s of cache rows read, check %s (max rel. error %.1e)\n", per * 1e6, bytes / per * 1e-9,
               good ? "ok" : "FAIL", worst);
        failed = !good;
        if (o.profile && bench_profile_print(g, "attention decode steps", 10)) failed = 1;
    }
    free(hk), free(hv), free(hq), free(got);
    wgml_graph_free(g);
    return failed;
}
