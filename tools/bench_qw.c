/* wgml bench qw (bench_qw): throughput of the 4-bit forward, timed with GPU timestamps over a built graph
 * of repeated dispatches (one submit per timed run; the best of 5 after 0.3 s of warm-up runs). Decode (M = 1, GEMV): effective GB/s of
 * the bytes one forward must move (codes + scales + activations in and out). Prefill/training
 * (M = 512, GEMM): GFLOP/s. Training mode (mode 2): the LoRA training step's 4-bit GEMMs,
 * forward O = A·Wᵀ and input gradient dX = dY·W, at M = 4096 and 512, and the LM head's chunk,
 * each with the tile variant and split-K count used ($WGML_QW_MM_VARIANT, $WGML_QW_MM_SPLITK).
 * The weight is flat q4gsw (symmetric, G = 32) unless $WGML_QW_BENCH_TYPE names a GGUF block
 * type (`wgml bench qw --type Q4_K`): random blocks of that type through wgml_qweight_upload_gguf
 * (shapes whose K is not whole blocks are skipped). */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "ops/qweight/qw_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

static uint64_t bench_rng = 0x2545F4914F6CDD1Dull;
static float bench_rand(void) {
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return (float)((bench_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* The GGUF block type of $WGML_QW_BENCH_TYPE (a name such as "Q4_K"), or -1 for flat q4gsw
 * (unset, "q4gsw" or unknown; an unknown name is reported once). */
static int bench_type(void) {
    const char *e = getenv("WGML_QW_BENCH_TYPE");
    if (!e || !*e || !strcmp(e, "q4gsw")) return -1;
    for (int t = 0; t < 64; t++)
        if (qw_gguf_gpu(t, NULL, NULL, NULL) && !strcmp(wgml_ggml_type_name((uint32_t)t), e)) return t;
    static bool warned = false;
    if (!warned) fprintf(stderr, "WGML_QW_BENCH_TYPE=%s is not a GPU block type; benchmarking q4gsw\n", e);
    warned = true;
    return -1;
}

/* The benchmarked weight's host form: flat q4gsw quantised from w (type -1), or random GGUF
 * blocks of `type` whose fp16 fields are about 2^-5 (so the weights stay near 1). Uploads
 * `copies` copies into q and dequantises into w (the check's reference). */
static bool bench_weights(wgml_graph *g, int type, int64_t n, int64_t k, float *w, wgml_qweight **q, int copies) {
    bool ok = false;
    if (type < 0) {
        int64_t kb = (k + 1) / 2, pn = (n + 3) / 4 * 4, ng = (k + 31) / 32;
        uint8_t *codes = malloc((size_t)(n * kb));
        float *scales = malloc(sizeof(float) * (size_t)(ng * pn));
        for (int64_t i = 0; i < n * k; i++) w[i] = bench_rand();
        ok = codes && scales && !wgml_q4gsw_quantize(w, n, k, 32, codes, scales);
        for (int cp = 0; ok && cp < copies; cp++) ok = (q[cp] = wgml_qweight_upload_q4gsw(g, codes, scales, NULL, n, k, 32));
        ok = ok && !wgml_q4gsw_dequantize(codes, scales, n, k, 32, w);
        free(codes);
        free(scales);
        return ok;
    }
    uint64_t be = 1, bb = 1;
    wgml_ggml_type_size((uint32_t)type, &be, &bb);
    size_t bytes = wgml_ggml_row_bytes((uint32_t)type, k) * (size_t)n;
    uint8_t *blocks = malloc(bytes ? bytes : 1);
    if (!blocks) return false;
    /* the fp16 fields: d (and m / dmin) first; Q6_K's and Q3_K's d, Q2_K's d and dmin last */
    size_t off = type == WGML_GGML_Q6_K ? 208 : type == WGML_GGML_Q3_K ? 108 : type == WGML_GGML_Q2_K ? 80 : 0;
    size_t nh = qw_gguf_has_min(type) ? 2 : 1;
    for (size_t i = 0; i < bytes; i++) blocks[i] = (uint8_t)((bench_rand() * 0.5f + 0.5f) * 255.99f);
    for (size_t b = 0; b < bytes / bb; b++)
        for (size_t h = 0; h < nh; h++) {
            uint16_t half = (uint16_t)((10u << 10) | (blocks[b * bb + off + 2 * h] & 0xFFu) << 2);
            blocks[b * bb + off + 2 * h] = (uint8_t)half;
            blocks[b * bb + off + 2 * h + 1] = (uint8_t)(half >> 8);
        }
    ok = !wgml_gguf_dequantize(type, blocks, bytes, n, k, w);
    for (int cp = 0; ok && cp < copies; cp++) ok = (q[cp] = wgml_qweight_upload_gguf(g, type, blocks, bytes, n, k));
    free(blocks);
    return ok;
}

/* Bytes one forward with W[n, k] moves on the GPU: the weight's codes and (a, b) as held, x and out. */
static double forward_bytes(int type, int64_t n, int64_t k) {
    double wb = (double)n * k / 2 + (double)n * (k / 32) * 4;
    wgml_qkind kind;
    int group;
    if (type >= 0 && qw_gguf_gpu(type, &kind, &group, NULL)) {
        bool eight = kind == WGML_Q8 || kind == WGML_Q8_MIN;
        wb = (double)n * k * (eight ? 1.0 : 0.5) +
             (double)n * 4.0 * (double)qw_ab_row_words(qw_gguf_ab_form(type), k, group, qw_gguf_has_min(type));
    }
    return wb + 4.0 * k + 4.0 * n;
}

/* Whether k is whole blocks of the benchmarked type. */
static bool bench_fits(int type, int64_t k) {
    uint64_t be = 32;
    if (type >= 0) wgml_ggml_type_size((uint32_t)type, &be, NULL);
    return k % (int64_t)be == 0;
}

/* Seconds per product with the weight W[n, k]: forward (trans = 0) x[m, k] · Wᵀ, or input
 * gradient (trans = 1) d[m, n] · W, or a negative value on error. The graph cycles through
 * `copies` distinct weights (same codes, separate buffers) so that a GPU cache larger than one
 * weight does not serve the repeated reads. After timing, 64 sampled outputs of the last
 * product are checked against a double-precision product with the dequantised weight
 * (*check_ok). */
static double time_mm(wgml_ctx *ctx, int64_t m, int64_t n, int64_t k, int trans, bool x8, int reps, int copies,
                      int *check_ok) {
    int64_t r = trans ? n : k, c = trans ? k : n; /* reduction and output columns */
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *x = malloc(sizeof(float) * (size_t)(m * r));
    wgml_qweight **q = calloc((size_t)copies, sizeof *q);
    double result = -1;
    *check_ok = 0;
    wgml_graph *g = wgml_graph_new(ctx);
    if (!w || !x || !q || !g) goto done;
    graph_set_x8(g, x8); /* the forward through the integer dot product (qw_mm_i8.wgsl) */
    if (!bench_weights(g, bench_type(), n, k, w, q, copies)) goto done;
    for (int64_t i = 0; i < m * r; i++) x[i] = bench_rand();
    int64_t xs[2] = {m, r};
    wgml_tensor *xt = wgml_tensor_new(g, WGML_F32, 2, xs);
    if (!xt || wgml_tensor_write(xt, x, sizeof(float) * (size_t)(m * r))) goto done;
    bool ok = true;
    wgml_tensor *last = NULL;
    for (int i = 0; i < reps && ok; i++) {
        wgml_tensor_free(last); /* only the last product is read back */
        last = trans ? wgml_qlinear_dx(g, xt, q[i % copies]) : wgml_qlinear(g, xt, q[i % copies]);
        ok = last != NULL;
    }
    double t = 0;
    bool cpu = bench_cpu_adapter(ctx);
    if (ok && !wgml_graph_keep(g, last) && !wgml_graph_compile(g) &&
        !wgml_graph_benchmark(g, cpu ? 0.0 : 0.3, cpu ? 1 : 5, &t, NULL))
        result = t / reps;
    float *got = result > 0 ? malloc(sizeof(float) * (size_t)(m * c)) : NULL;
    if (got && !wgml_tensor_read(last, got, sizeof(float) * (size_t)(m * c))) {
        /* the dequantised weight (independent host code) times x in double precision; with
         * int8 activations within what their quantisation allows: d/2 · Σ|w| per block of
         * qw_x8_block k, d = max |x| / 127 over the block (test_qw_i8 checks the kernel
         * against its own formula) */
        int qb = x8 ? (int)qw_x8_block(q[0]) : 0;
        *check_ok = 1;
        for (int smp = 0; smp < 64; smp++) {
            int64_t i = (int64_t)((bench_rand() * 0.5f + 0.5f) * (float)(m - 1));
            int64_t j = (int64_t)((bench_rand() * 0.5f + 0.5f) * (float)(c - 1));
            double ref = 0, mag = 0, bound = 0, amax = 0, wsum = 0;
            for (int64_t rr = 0; rr < r; rr++) {
                double wv = trans ? w[rr * k + j] : w[j * k + rr];
                ref += (double)x[i * r + rr] * wv;
                mag += fabs((double)x[i * r + rr] * wv);
                amax = fmax(amax, fabs((double)x[i * r + rr]));
                wsum += fabs(wv);
                if (qb && ((rr + 1) % qb == 0 || rr + 1 == r)) {
                    bound += amax / 127.0 / 2.0 * wsum * 1.001;
                    amax = wsum = 0;
                }
            }
            if (!(fabs(got[i * c + j] - ref) <= 1e-5 * (mag + bound) + bound + 1e-6)) *check_ok = 0;
        }
    }
    free(got);
done:
    for (int cp = 0; q && cp < copies; cp++) wgml_qweight_free(q[cp]);
    wgml_graph_free(g);
    free(q);
    free(w);
    free(x);
    return result;
}

static double time_forward(wgml_ctx *ctx, int64_t m, int64_t n, int64_t k, int reps, int copies, int *check_ok) {
    return time_mm(ctx, m, n, k, 0, false, reps, copies, check_ok);
}

/* The training shapes: the LoRA step's 4-bit GEMMs (K -> N of each frozen projection) at M =
 * 4096 and 512 tokens, forward and input gradient (TRANS), and the LM head's 8192-column
 * vocabulary chunk (lmhead_ce.c). On a CPU adapter only the small M = 512 shapes run, once. */
static int bench_train(wgml_ctx *ctx, FILE *out) {
    bool cpu = bench_cpu_adapter(ctx);
    static const int64_t shapes[][3] = {
        /* M, K, N */
        {4096, 576, 1536}, {4096, 1536, 576}, {4096, 576, 576}, {4096, 576, 192}, {4096, 576, 8192},
        {512, 576, 1536},  {512, 1536, 576},  {512, 576, 576},  {512, 576, 192},
    };
    int type = bench_type();
    char head[64];
    snprintf(head, sizeof head, "qweight training GEMMs (%s)", type < 0 ? "q4gsw G = 32" : wgml_ggml_type_name((uint32_t)type));
    fprintf(out, "%-40s %9s %9s  %-22s %3s %s\n", head, "ms", "TFLOP/s", "variant", "S", "check");
    int failed = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t m = shapes[i][0], k = shapes[i][1], n = shapes[i][2];
        if (cpu && (m > 512 || n > 576)) continue;
        if (!bench_fits(bench_type(), k)) {
            fprintf(out, "M=%lld %lld->%lld skipped: K is not whole %s blocks\n", (long long)m, (long long)k,
                    (long long)n, wgml_ggml_type_name((uint32_t)bench_type()));
            continue;
        }
        for (int trans = 0; trans < 2; trans++) {
            int64_t r = trans ? n : k, c = trans ? k : n;
            int vi, splits, check = 0;
            qw_mm_plan(ctx, m, r, c, false, &vi, &splits);
            double t = time_mm(ctx, m, n, k, trans, false, cpu ? 1 : 20, 1, &check);
            char label[80];
            snprintf(label, sizeof label, "M=%lld %lld->%lld %s", (long long)m, (long long)k, (long long)n,
                     trans ? "dx (TRANS)" : "fwd");
            if (t <= 0) {
                fprintf(out, "%-40s failed: %s\n", label, wgml_last_error(ctx));
                failed++;
                continue;
            }
            fprintf(out, "%-40s %9.3f %9.2f  %-22s %3d %s\n", label, t * 1e3, 2.0 * m * r * c / t * 1e-12,
                    qw_mm_variant_name(vi), splits, check ? "ok" : "FAIL");
            if (!check) failed++;
        }
    }
    return failed;
}

/* Prefill mode (mode 3): the forward GEMMs of a 512-token prefill at real models' shapes,
 * f32 (qw_mm) against the integer dot product (qw_mm_i8: activations quantised to int8, the
 * decoder's prefill on GPUs), each checked (the int8 one within its quantisation bound). The
 * rate counts 2·M·K·N operations either way. */
static int bench_prefill(wgml_ctx *ctx, FILE *out) {
    static const struct {
        const char *model;
        int64_t k, n;
    } shapes[] = {
        {"SmolLM2-135M", 576, 576},   {"SmolLM2-135M", 576, 1536},  {"SmolLM2-135M", 1536, 576},
        {"Llama-3.2-1B", 2048, 3072}, {"Llama-3.2-1B", 2048, 2048}, {"Llama-3.2-1B", 2048, 16384},
        {"Llama-3.2-1B", 8192, 2048}, {"Llama-3.1-8B", 4096, 6144}, {"Llama-3.1-8B", 4096, 4096},
        {"Llama-3.1-8B", 4096, 28672}, {"Llama-3.1-8B", 14336, 4096},
    };
    bool cpu = bench_cpu_adapter(ctx);
    int64_t m = cpu ? 64 : 512;
    int type = bench_type(), failed = 0;
    fprintf(out, "qweight prefill GEMMs, M = %lld (%s; q, k, v and gate, up as one product)\n", (long long)m,
            type < 0 ? "q4gsw G = 32" : wgml_ggml_type_name((uint32_t)type));
    fprintf(out, "%-34s %9s %9s %6s %9s %9s %6s %7s\n", "", "f32 ms", "TFLOP/s", "check", "int8 ms", "TOP/s", "check",
            "ratio");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !(cpu && i >= 3); i++) {
        int64_t k = shapes[i].k, n = shapes[i].n;
        if (!bench_fits(type, k)) continue;
        int c0 = 0, c1 = 0;
        double t0 = time_mm(ctx, m, n, k, 0, false, cpu ? 1 : 20, 1, &c0);
        double t1 = time_mm(ctx, m, n, k, 0, true, cpu ? 1 : 20, 1, &c1);
        char label[64];
        snprintf(label, sizeof label, "%s %lld->%lld", shapes[i].model, (long long)k, (long long)n);
        if (t0 <= 0 || t1 <= 0) {
            fprintf(out, "%-34s failed: %s\n", label, wgml_last_error(ctx));
            failed++;
            continue;
        }
        double ops = 2.0 * m * k * n;
        fprintf(out, "%-34s %9.3f %9.2f %6s %9.3f %9.2f %6s %6.2fx\n", label, t0 * 1e3, ops / t0 * 1e-12,
                c0 ? "ok" : "FAIL", t1 * 1e3, ops / t1 * 1e-12, c1 ? "ok" : "FAIL", t0 / t1);
        failed += !c0 + !c1;
    }
    return failed;
}

/* "KxN,KxN,..." into shapes (at most max pairs, each from 1 to 2^20); the count, or -1 */
static int parse_shapes(const char *s, int64_t (*shapes)[2], int max) {
    int n = 0;
    while (*s) {
        if (n == max || !bench_parse_dims(&s, 2, 1, 1 << 20, shapes[n]) || (*s && *s != ',')) return -1;
        n++;
        if (*s == ',') s++;
    }
    return n > 0 ? n : -1;
}

int bench_qw(wgml_ctx *ctx, void *out_file, int mode) {
    FILE *out = out_file ? (FILE *)out_file : stdout;
    if (!ctx) return 1;
    if (mode == 2) return bench_train(ctx, out);
    if (mode == 3) return bench_prefill(ctx, out);
    int gemv_only = mode == 1;
    bool cpu = bench_cpu_adapter(ctx);
    /* K -> N: 256 -> 256 moves 40 KB, so its time is the fixed cost of one GEMV dispatch in a
     * chain of them; SmolLM2's own; two mid-size; two large decode shapes (Llama-3-8B's
     * gate/up, a 70B-class one), whose time is mostly bytes (not on a CPU adapter) */
    static const int64_t fixed[][2] = {{256, 256},   {576, 1536},   {1536, 576}, {2048, 8192},
                                       {4096, 11008}, {4096, 14336}, {8192, 28672}};
    int64_t decode[16][2];
    int n_decode = cpu ? 5 : (int)(sizeof fixed / sizeof fixed[0]);
    memcpy(decode, fixed, sizeof fixed);
    /* $WGML_BENCH_QW_SHAPES="KxN,..." (up to 16) replaces the list, for the shapes of one model */
    const char *se = getenv("WGML_BENCH_QW_SHAPES");
    if (se && *se && (n_decode = parse_shapes(se, decode, 16)) < 0) {
        fprintf(stderr, "bench qw: WGML_BENCH_QW_SHAPES=\"%s\": want up to 16 KxN pairs (K and N from 1 to 2^20), "
                        "comma-separated\n", se);
        return 1;
    }
    int type = bench_type();
    char head[64];
    snprintf(head, sizeof head, "qweight forward (%s)", type < 0 ? "q4gsw G = 32" : wgml_ggml_type_name((uint32_t)type));
    fprintf(out, "%-34s %10s %10s %s\n", head, "us", "GB/s", "check");
    int failed = 0;
    for (int i = 0; i < n_decode; i++) {
        int64_t k = decode[i][0], n = decode[i][1];
        if (!bench_fits(type, k)) {
            fprintf(out, "M=1 %lld->%lld skipped: K is not whole %s blocks\n", (long long)k, (long long)n,
                    wgml_ggml_type_name((uint32_t)type));
            continue;
        }
        double bytes = forward_bytes(type, n, k);
        int reps = cpu ? 4 : 100;
        /* 256 MB of weights: past any cache ($WGML_BENCH_QW_MB changes it, for studying how the
         * placement of the copies affects the time) */
        const char *mb_env = getenv("WGML_BENCH_QW_MB");
        double mb = mb_env && atof(mb_env) > 0 ? atof(mb_env) : 256.0;
        int copies = cpu ? 1 : (int)(mb * 1e6 / bytes) + 1;
        /* the f32 form, then (where the adapter has them) int8 activations: the GEMV's I8X form,
         * forced (its rule takes fewer kinds and shapes) */
        int forms = cpu || !gpu_get_caps(ctx)->dot4i8 ? 1 : 2;
        for (int x8 = 0; x8 < forms; x8++) {
            int check = 0;
            if (x8) setenv("WGML_QW_GEMV_I8", "1", 1);
            double t = time_mm(ctx, 1, n, k, 0, x8, reps, copies < reps ? copies : reps, &check);
            if (x8) unsetenv("WGML_QW_GEMV_I8");
            char label[64];
            snprintf(label, sizeof label, "M=1 %lld->%lld (GEMV%s)", (long long)k, (long long)n, x8 ? " int8 x" : "");
            if (t <= 0) {
                fprintf(out, "%-34s failed: %s\n", label, wgml_last_error(ctx));
                failed++;
                break;
            }
            fprintf(out, "%-34s %10.1f %10.1f %s\n", label, t * 1e6, bytes / t * 1e-9, check ? "ok" : "FAIL");
            if (!check) failed++;
        }
    }
    static const int64_t gemm[][3] = {{512, 2048, 2048}, {512, 8192, 2048}}; /* M, N, K */
    fprintf(out, "%-34s %10s %10s %s\n", "", "ms", "GFLOP/s", "check");
    for (int i = 0; i < (gemv_only ? 0 : cpu ? 1 : 2); i++) {
        int64_t m = gemm[i][0], n = gemm[i][1], k = gemm[i][2];
        if (!bench_fits(type, k)) continue;
        int check = 0;
        double t = time_forward(ctx, m, n, k, cpu ? 1 : 20, 1, &check);
        char label[64];
        snprintf(label, sizeof label, "M=%lld %lld->%lld (GEMM)", (long long)m, (long long)k, (long long)n);
        if (t <= 0) {
            fprintf(out, "%-34s failed: %s\n", label, wgml_last_error(ctx));
            failed++;
            continue;
        }
        fprintf(out, "%-34s %10.2f %10.1f %s\n", label, t * 1e3, 2.0 * m * n * k / t * 1e-9, check ? "ok" : "FAIL");
        if (!check) failed++;
    }
    return failed;
}
