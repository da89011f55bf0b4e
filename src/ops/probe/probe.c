/* The throughput probes (probe.h, probe_peak.wgsl): their dispatch and their results computed
 * on the host, step by step as the kernel does them (exact: integers in f32 under 2^24, i32
 * wrapping). */
#include "ops/probe/probe.h"
#include "gpu/gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the uniform's a and b for each kind: (1.0, 1.0) for both FMAs; the dot product's second
 * operand, the bytes 3, -5, 7, -2; the conversions' mask 15 and shift 19 (the mantissa's top 4
 * bits) */
static const uint32_t PROBE_A[PROBE_N] = {0x3F800000u, 0u, 15u, 15u, 0x3F800000u};
static const uint32_t PROBE_B[PROBE_N] = {0x3F800000u, 0xFE07FB03u, 19u, 19u, 0x3F800000u};

const char *probe_name(probe_kind k) {
    static const char *names[PROBE_N] = {"f32 fma", "dot4I8Packed", "u32 -> f32 convert", "u32 -> f32 via 2^23",
                                            "f16 fma"};
    return k < PROBE_N ? names[k] : "?";
}

double probe_ops_per_step(probe_kind k) {
    return k == PROBE_FMA || k == PROBE_FMA_F16 ? 2.0 : k == PROBE_DOT4I8 ? 8.0 : 1.0;
}

bool probe_supported(wgml_ctx *ctx, probe_kind k) {
    const gpu_caps *caps = gpu_get_caps(ctx);
    return k < PROBE_N && (k != PROBE_DOT4I8 || (caps && caps->dot4i8)) && (k != PROBE_FMA_F16 || (caps && caps->f16));
}

/* The prelude's kind-specific functions: what needs a feature (the packed dot product, f16) may
 * be named only where the adapter has it, so other kinds get stubs that are never called. The
 * f16 chains live wholly in h_run: 16 of them as 8 vec2<f16> (the pairs packed f16 arithmetic
 * holds), summed in f32 (exact). */
static const char DOT_STEP[] = "fn dot_step(x: vec4<i32>, b: u32) -> vec4<i32> {\n"
                               "  let u = bitcast<vec4<u32>>(x);\n"
                               "  return vec4<i32>(dot4I8Packed(u.x, b), dot4I8Packed(u.y, b), dot4I8Packed(u.z, b),"
                               " dot4I8Packed(u.w, b)) + x;\n}\n";
static const char DOT_STUB[] = "fn dot_step(x: vec4<i32>, b: u32) -> vec4<i32> { return x; }\n";
static const char H_RUN[] =
    "fn h_run(s0: f32, iters: u32, af: f32, bf: f32) -> f32 {\n"
    "  var x = array<vec2<f16>, 8>();\n"
    "  for (var v = 0u; v < 8u; v++) { x[v] = vec2<f16>(vec2<f32>(s0) + vec2<f32>(f32(2u * v), f32(2u * v + 1u))); }\n"
    "  let a = vec2<f16>(f16(af));\n"
    "  let b = vec2<f16>(f16(bf));\n"
    "  for (var i = 0u; i < iters; i++) { for (var v = 0u; v < 8u; v++) { x[v] = fma(x[v], a, b); } }\n"
    "  var s = vec2<f32>(0.0);\n"
    "  for (var v = 0u; v < 8u; v++) { s += vec2<f32>(x[v]); }\n"
    "  return s.x + s.y;\n}\n";
static const char H_STUB[] = "fn h_run(s0: f32, iters: u32, af: f32, bf: f32) -> f32 { return 0.0; }\n";

wgml_tensor *probe_record(wgml_graph *g, probe_kind k, uint32_t threads, uint32_t iters) {
    wgml_ctx *ctx = graph_ctx(g);
    if (!probe_supported(ctx, k) || threads == 0 || iters > PROBE_MAX_ITERS) {
        wgml_set_error(ctx, WGML_ERR_ARG, "probe: kind %d, %u threads, %u steps (at most %u; kind supported: %s)",
                       (int)k, threads, iters, PROBE_MAX_ITERS, probe_supported(ctx, k) ? "yes" : "no");
        return NULL;
    }
    int64_t n = threads;
    wgml_tensor *out = graph_output(g, "probe", WGML_U32, 1, &n);
    if (!out) return NULL;
    struct {
        uint32_t n, iters, a, b;
    } p = {.n = threads, .iters = iters, .a = PROBE_A[k], .b = PROBE_B[k]};
    char pre[1024];
    snprintf(pre, sizeof pre, "%sconst KIND: u32 = %du;\n%s%s", k == PROBE_FMA_F16 ? "enable f16;\n" : "", (int)k,
             k == PROBE_DOT4I8 ? DOT_STEP : DOT_STUB, k == PROBE_FMA_F16 ? H_RUN : H_STUB);
    if (graph_dispatch(g, "probe", "probe_peak", pre, NULL, 0, &out, 1, &p, sizeof p, (threads + 255) / 256)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

static int32_t dot4i8(uint32_t a, uint32_t b) {
    int32_t s = 0;
    for (int i = 0; i < 4; i++) s += (int32_t)(int8_t)(uint8_t)(a >> (8 * i)) * (int32_t)(int8_t)(uint8_t)(b >> (8 * i));
    return s;
}

/* v rounded to the nearest f16 (ties to even), for the integers of the f16 chains (1 <= v < 65504) */
static float round_f16(double v) {
    double ulp = ldexp(1.0, ilogb(v) - 10);
    return (float)(nearbyint(v / ulp) * ulp);
}

uint32_t probe_expected(probe_kind k, uint32_t t, uint32_t iters) {
    uint32_t a = PROBE_A[k], b = PROBE_B[k], sum_i = 0;
    float sum_f = 0;
    for (int c = 0; c < PROBE_CHAINS; c++) {
        float x = (float)(t % 61u) + (float)c;
        uint32_t xi = (uint32_t)(int32_t)x;
        for (uint32_t i = 0; i < iters; i++) {
            uint32_t bits;
            memcpy(&bits, &x, 4);
            if (k == PROBE_FMA) x += 1.0f;
            else if (k == PROBE_FMA_F16) x = round_f16((double)x + 1.0); /* sticks at 2048: 2049 is a tie */
            else if (k == PROBE_DOT4I8) xi += (uint32_t)dot4i8(xi, b);
            else x += (float)((bits >> b) & a);
        }
        sum_f += x;
        sum_i += xi;
    }
    if (k == PROBE_DOT4I8) return sum_i;
    uint32_t bits;
    memcpy(&bits, &sum_f, 4);
    return bits;
}

const char *wgml_peak_name(int kind) { return kind >= 0 && kind < PROBE_N ? probe_name((probe_kind)kind) : "?"; }

wgml_status wgml_peak_measure(wgml_ctx *ctx, int kind, uint32_t threads, uint32_t steps, double warmup_s, int runs,
                              double *seconds, double *ops_per_s) {
    if (!ctx) return wgml_set_error(NULL, WGML_ERR_ARG, "peak: ctx is NULL");
    if (kind < 0 || kind >= PROBE_N || threads < 64 || steps < 1 || steps > PROBE_MAX_ITERS || runs < 1)
        return wgml_set_error(ctx, WGML_ERR_ARG, "peak: kind %d, %u threads, %u steps, %d runs (kinds 0..%d, >= 64 "
                                                 "threads, 1..%u steps, >= 1 run)",
                              kind, threads, steps, runs, PROBE_N - 1, PROBE_MAX_ITERS);
    if (!probe_supported(ctx, (probe_kind)kind))
        return wgml_set_error(ctx, WGML_ERR_UNSUPPORTED, "peak: %s: not supported by this adapter", probe_name(kind));
    wgml_graph *g = wgml_graph_new(ctx);
    wgml_tensor *out = g ? probe_record(g, (probe_kind)kind, threads, steps) : NULL;
    uint32_t *host = malloc(sizeof(uint32_t) * threads);
    double best = 0;
    wgml_status s = !g || !out ? wgml_last_status(ctx)
                    : !host    ? wgml_set_error(ctx, WGML_ERR_OOM, "peak: out of host memory")
                               : WGML_OK;
    if (!s) s = wgml_graph_keep(g, out);
    if (!s) s = wgml_graph_compile(g);
    if (!s) s = wgml_graph_benchmark(g, warmup_s, runs, &best, NULL);
    if (!s) s = wgml_tensor_read(out, host, sizeof(uint32_t) * threads);
    for (uint32_t i = 0; !s && i < 64; i++) {
        uint32_t t = (uint32_t)((uint64_t)i * (threads - 1) / 63), want = probe_expected((probe_kind)kind, t, steps);
        if (host[t] != want)
            s = wgml_set_error(ctx, WGML_ERR_GPU, "peak: %s: thread %u gave 0x%08x, the host 0x%08x",
                               probe_name(kind), t, host[t], want);
    }
    free(host);
    wgml_graph_free(g);
    if (s) return s;
    double steps_all = (double)threads * steps * PROBE_CHAINS;
    if (seconds) *seconds = best;
    if (ops_per_s) *ops_per_s = best > 0 ? steps_all * probe_ops_per_step((probe_kind)kind) / best : 0;
    return WGML_OK;
}
