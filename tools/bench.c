/* wgml bench: GPU throughput of the kernels, timed with timestamp queries.
 * Each timed run is a built graph of `reps` identical dispatches in one submit, so the
 * figure is kernel time, not launch or host time. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "wgml-model.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape3 {
    int64_t m, n, k;
    int trans; /* 0: the --trans list; else 1 + (a transposed) + 2·(b transposed) */
} shape3;

/* --shapes lora: the rank-16 LoRA products of SmolLM2-135M training (8 x 512 tokens, hidden
 * 576, FFN 1536), each in the orientation the trainer runs it: x·Aᵀ and h·Bᵀ (linear, NT),
 * dh = dy·B and dx = dh·A (NN), the weight gradients dB = dyᵀ·h and dA = dhᵀ·x (linear_dw,
 * TN), and the remaining orientations of the same shapes. */
#define T_NN 1
#define T_TN 2
#define T_NT 3
static const shape3 LORA_SHAPES[] = {
    {4096, 16, 576, T_NT},  {4096, 16, 1536, T_NT}, {4096, 576, 16, T_NT},  {4096, 1536, 16, T_NT},
    {4096, 16, 576, T_NN},  {4096, 16, 1536, T_NN}, {4096, 576, 16, T_NN},  {4096, 1536, 16, T_NN},
    {576, 16, 4096, T_TN},  {1536, 16, 4096, T_TN}, {16, 576, 4096, T_TN},  {16, 1536, 4096, T_TN},
};

static const shape3 DEFAULT_GPU[] = {{4096, 4096, 4096, 0}, {8192, 8192, 8192, 0}, {4096, 1536, 576, 0},
                                     {4096, 576, 1536, 0},  {2048, 2048, 2048, 0}, {1024, 1024, 1024, 0}};
static const shape3 DEFAULT_CPU[] = {{256, 256, 256, 0}, {512, 512, 512, 0}};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
float bench_frand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float frand(void) { return bench_frand(&rng); }

int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static wgml_tensor *random_tensor(wgml_graph *g, int64_t r, int64_t c, float **host) {
    int64_t shape[2] = {r, c};
    wgml_tensor *t = wgml_tensor_new(g, WGML_F32, 2, shape);
    float *h = malloc(sizeof(float) * (size_t)(r * c));
    if (!t || !h) {
        free(h);
        return NULL;
    }
    for (int64_t i = 0; i < r * c; i++) h[i] = frand();
    wgml_tensor_write(t, h, sizeof(float) * (size_t)(r * c));
    if (host) *host = h;
    else free(h);
    return t;
}

/* Spot-checks `samples` entries of out = op(a)·op(b) against a double-precision dot product
 * (a stored [K, M] when ta, b stored [N, K] when tb). */
static double spot_check(const float *a, const float *b, const float *out, shape3 s, int ta, int tb, int samples) {
    double worst = 0;
    for (int i = 0; i < samples; i++) {
        int64_t m = (int64_t)((frand() * 0.5f + 0.5f) * (float)(s.m - 1));
        int64_t n = (int64_t)((frand() * 0.5f + 0.5f) * (float)(s.n - 1));
        double ref = 0;
        for (int64_t k = 0; k < s.k; k++)
            ref += (double)a[ta ? k * s.m + m : m * s.k + k] * (double)b[tb ? n * s.k + k : k * s.n + n];
        double err = fabs(ref - out[m * s.n + n]) / (sqrt((double)s.k) * 1e-4 + 1e-3 * fabs(ref));
        if (err > worst || isnan(err)) worst = isnan(err) ? INFINITY : err;
    }
    return worst; /* <= 1: within the fp32 matmul tolerance */
}

int bench_cpu_adapter(wgml_ctx *ctx) {
    wgml_device_info info;
    wgml_device_get_info(ctx, &info);
    return strcmp(info.type, "CPU") == 0;
}

typedef struct matmul_sweep {
    int variants[64], n_variants; /* -1: auto */
    int splits[16], n_splits;     /* 0: auto */
    int trans[4], n_trans;        /* bit 0: a transposed, bit 1: b transposed */
} matmul_sweep;

/* One product's time with each of its dispatches alone (wgml_graph_profile over the graph of
 * `reps` products, divided by reps): what a chain of dependent products sees, where the "ms"
 * column (the graph's run / reps) lets the independent products overlap, so that a kernel that
 * fills a fraction of the GPU reads faster there than in a model's graph (bench/NOTES.md,
 * thirteenth session). 0 without timestamp queries. */
static double matmul_alone(wgml_graph *g, int reps) {
    size_t n = wgml_graph_dispatch_count(g);
    double *t = calloc(n ? n : 1, sizeof(double)), sum = 0;
    if (t && !wgml_graph_profile(g, t))
        for (size_t i = 0; i < n; i++) sum += t[i];
    free(t);
    return sum / reps;
}

/* Times every (shape, orientation, variant, split) of the sweep: a built graph of `reps`
 * products per configuration; with check, each configuration's output is spot-checked. */
static int bench_matmul(wgml_ctx *ctx, const shape3 *shapes, int n_shapes, int reps, int check, const matmul_sweep *sw) {
    printf("%-20s %-3s %-26s %5s %10s %9s %9s %s\n", "shape MxNxK", "op", "variant", "split", "ms", "TFLOP/s",
           "alone ms", check ? "check" : "");
    int failed = 0, first = 0; /* 1 + the shape last timed */
    for (int i = 0; i < n_shapes; i++)
        for (int ti = 0; ti < (shapes[i].trans ? 1 : sw->n_trans); ti++)
            for (int vi = 0; vi < sw->n_variants; vi++)
                for (int si = 0; si < sw->n_splits; si++) {
                    shape3 s = shapes[i];
                    int tr = s.trans ? s.trans - 1 : sw->trans[ti];
                    int ta = tr & 1, tb = tr >> 1;
                    wgml_matmul_force_variant(ctx, sw->variants[vi]);
                    char sk[16];
                    snprintf(sk, sizeof sk, "%d", sw->splits[si]);
                    if (sw->splits[si] > 0) setenv("WGML_MATMUL_SPLITK", sk, 1);
                    else unsetenv("WGML_MATMUL_SPLITK");
                    int used_v = 0, used_s = 1;
                    wgml_matmul_plan(ctx, 1, s.m, s.n, s.k, ta, tb, &used_v, &used_s);
                    wgml_graph *g = wgml_graph_new(ctx);
                    float *ha = NULL, *hb = NULL;
                    wgml_tensor *a = random_tensor(g, ta ? s.k : s.m, ta ? s.m : s.k, check ? &ha : NULL);
                    wgml_tensor *b = random_tensor(g, tb ? s.n : s.k, tb ? s.k : s.n, check ? &hb : NULL);
                    wgml_tensor *out = NULL;
                    for (int r = 0; r < reps && a && b; r++) out = wgml_matmul(g, a, b, ta, tb);
                    if (!out || wgml_graph_keep(g, out) || wgml_graph_compile(g)) {
                        fprintf(stderr, "bench: %s\n", wgml_last_error(ctx));
                        free(ha);
                        free(hb);
                        wgml_graph_free(g);
                        failed = 1;
                        continue;
                    }
                    double best = INFINITY;
                    /* warm the clocks on a new shape and after a long host set-up (random
                     * operands of over 8M elements), during which they may drop */
                    int long_setup = s.m * s.k + s.k * s.n > (8 << 20);
                    double warm = bench_cpu_adapter(ctx) ? 0.0 : first != i + 1 || long_setup ? 0.3 : 0.05;
                    first = i + 1;
                    if (wgml_graph_benchmark(g, warm, 3, &best, NULL)) fprintf(stderr, "bench: %s\n", wgml_last_error(ctx));
                    double per = best / reps, alone = matmul_alone(g, reps);
                    double tflops = 2.0 * (double)s.m * (double)s.n * (double)s.k / per * 1e-12;
                    char name[64];
                    snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)s.m, (long long)s.n, (long long)s.k);
                    char verdict[32] = "";
                    if (check) {
                        float *ho = malloc(sizeof(float) * (size_t)(s.m * s.n));
                        snprintf(verdict, sizeof verdict, "FAIL");
                        if (ho && !wgml_tensor_read(out, ho, sizeof(float) * (size_t)(s.m * s.n))) {
                            double w = spot_check(ha, hb, ho, s, ta, tb, 64);
                            snprintf(verdict, sizeof verdict, "%s", w <= 1 ? "ok" : "FAIL");
                        }
                        if (strcmp(verdict, "ok")) failed = 1;
                        free(ho);
                    }
                    static const char *const ops[4] = {"NN", "TN", "NT", "TT"};
                    char vname[48], sname[16];
                    snprintf(vname, sizeof vname, "%s%s", sw->variants[vi] < 0 ? "auto:" : "",
                             wgml_matmul_variant_name(used_v));
                    snprintf(sname, sizeof sname, "%s%d", sw->splits[si] > 0 ? "" : "a", used_s);
                    printf("%-20s %-3s %-26s %5s %10.3f %9.3f %9.3f %s\n", name, ops[tr], vname, sname, per * 1e3,
                           tflops, alone * 1e3, verdict);
                    fflush(stdout);
                    free(ha);
                    free(hb);
                    wgml_graph_free(g);
                }
    wgml_matmul_force_variant(ctx, -1);
    unsetenv("WGML_MATMUL_SPLITK");
    return failed;
}

static int bench_matmul_main(wgml_ctx *ctx, int argc, char **argv);

double bench_wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A profile row: an (op, kernel) pair, or with $WGML_PROFILE_SHAPES=1 an (op, kernel,
 * workgroups, first four uniform words) group, so that a GEMM's products of different sizes
 * (their sizes lead their parameters) and plans (the grid) get rows of their own. */
typedef struct prof_row {
    const char *op, *shader;
    uint64_t wgs;
    uint32_t words[4];
    double s;
    int count;
} prof_row;

static int prof_cmp(const void *a, const void *b) {
    double x = ((const prof_row *)a)->s, y = ((const prof_row *)b)->s;
    return x < y ? 1 : x > y ? -1 : 0;
}

static bool prof_same(const prof_row *r, const prof_row *k) {
    return !strcmp(r->op, k->op) && !strcmp(r->shader, k->shader) && r->wgs == k->wgs &&
           !memcmp(r->words, k->words, sizeof r->words);
}

int bench_profile_print(wgml_graph *g, const char *title, int top) {
    size_t n = wgml_graph_dispatch_count(g);
    double *per = calloc(n ? n : 1, sizeof(double));
    prof_row *rows = calloc(n ? n : 1, sizeof(prof_row));
    const char *e = getenv("WGML_PROFILE_SHAPES");
    bool shapes = e && !strcmp(e, "1");
    int nr = 0, rc = 0;
    if (!per || !rows) {
        free(per);
        free(rows);
        return WGML_ERR_OOM;
    }
    if ((rc = (int)wgml_graph_profile(g, per))) goto done;
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        prof_row k = {0};
        k.op = wgml_graph_dispatch_name(g, i, &k.shader);
        if (shapes) k.wgs = wgml_graph_dispatch_detail(g, i, k.words, 4);
        total += per[i];
        int r = 0;
        while (r < nr && !prof_same(&rows[r], &k)) r++;
        if (r == nr) rows[nr++] = k;
        rows[r].s += per[i];
        rows[r].count++;
    }
    qsort(rows, (size_t)nr, sizeof *rows, prof_cmp);
    printf("profile %s: %zu dispatches, %.3f ms GPU in separate passes (each dispatch timed alone)\n", title, n,
           total * 1e3);
    printf("  %-28s %-22s %6s %10s %9s %6s%s\n", "op", "kernel", "count", "ms", "us/each", "share",
           shapes ? "  workgroups  uniform[0..4)" : "");
    for (int r = 0; r < nr && r < (shapes ? 4 * top : top); r++) {
        printf("  %-28s %-22s %6d %10.3f %9.1f %5.1f%%", rows[r].op, rows[r].shader, rows[r].count, rows[r].s * 1e3,
               rows[r].s / rows[r].count * 1e6, total > 0 ? 100 * rows[r].s / total : 0);
        if (shapes)
            printf("  %10llu  %u %u %u %u", (unsigned long long)rows[r].wgs, rows[r].words[0], rows[r].words[1],
                   rows[r].words[2], rows[r].words[3]);
        printf("\n");
    }
done:
    free(per);
    free(rows);
    return rc;
}

/* wgml bench generate --model FILE [--prompt-tokens N] [--decode-tokens N] [--decode-batch B]:
 * prefill tokens/s for an N-token prompt (default 128; best of 5 after 0.3 s of warm-up prefills) and greedy decode tokens/s over N steps
 * (default 64): line "decode" for the GPU-pipelined path (wgml_model_decode_greedy, B steps per
 * submit, default 16; timed after one untimed warm-up run), line "decode-step" for host-driven
 * steps (one submit and readback per token). GPU time from timestamps where the device has
 * them (else wall time); wall tokens/s over the whole decode; submits per generated token. */
typedef struct token_log {
    int32_t *ids;
    size_t n, cap;
} token_log;

static int count_token(void *user, int32_t id) {
    token_log *l = user;
    if (l->n < l->cap) l->ids[l->n] = id;
    l->n++;
    return 0;
}

typedef struct gen_opts {
    const char *path;
    int n_prompt, n_decode, batch, profile;
} gen_opts;

/* 0, or 2 after the usage line. */
static int parse_gen_opts(int argc, char **argv, gen_opts *o) {
    *o = (gen_opts){.n_prompt = 128, .n_decode = 64};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) o->path = argv[++i];
        else if (!strcmp(argv[i], "--prompt-tokens") && i + 1 < argc) o->n_prompt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--decode-tokens") && i + 1 < argc) o->n_decode = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--decode-batch") && i + 1 < argc) o->batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--profile")) o->profile = 1;
        else o->path = NULL, i = argc;
    }
    if (!o->path || o->n_prompt < 1 || o->n_decode < 1 || o->batch < 0) {
        fprintf(stderr, "usage: wgml bench generate --model FILE [--prompt-tokens N] [--decode-tokens N] [--decode-batch B] "
                        "[--profile]\n");
        return 2;
    }
    return 0;
}

/* What a run measured, for its report. */
typedef struct gen_times {
    double load, first;            /* model load; the first prefill (graph build + run) */
    uint64_t mem_load;             /* device memory in wgml's buffers after the load */
    double pre_wall, pre_gpu;      /* the best of 5 prefills */
    uint64_t rec0, rec1;           /* recording nanoseconds around those 5 */
    double step_wall, step_gpu;    /* host-driven decode steps */
    double step_sub;               /* their submits per token */
    double dec_wall, dec_gpu;      /* GPU-pipelined greedy decode */
    size_t got;                    /* tokens it read back */
    wgml_decode_stats ds;
} gen_times;

/* The prompt: the text's tokens repeated to n_prompt, or fixed ids where the model's tokenizer is
 * not built (the speed is the same). 0, or 1 after a message. */
static int gen_prompt(wgml_model *m, int n_prompt, int32_t *prompt, int32_t **ids) {
    const char *text = "The King James Bible begins: In the beginning God created the heaven and the earth. "
                       "And the earth was without form, and void; and darkness was upon the face of the deep. ";
    size_t n_ids = 0;
    if (!wgml_model_tokenizer(m)) {
        fprintf(stderr, "bench generate: no tokenizer (%s); the prompt is ids 1000..\n", wgml_model_tokenizer_error(m));
        for (int i = 0; i < n_prompt; i++) prompt[i] = 1000 + i;
    } else if (wgml_tokenizer_encode(wgml_model_tokenizer(m), text, strlen(text), 0, ids, &n_ids) || !n_ids) {
        fprintf(stderr, "bench generate: cannot tokenize\n");
        return 1;
    } else {
        for (int i = 0; i < n_prompt; i++) prompt[i] = (*ids)[(size_t)i % n_ids];
    }
    return 0;
}

/* The first prefill (it builds the bucket's graph), timed alone; then, as an idle GPU's clock
 * ramps only under load and one prefill is too short to ramp it, prefills for at least 0.3 s;
 * then the best of 5 (wall and GPU). *next: the token after the prompt. */
static int gen_time_prefill(wgml_ctx *ctx, wgml_model *m, const int32_t *prompt, size_t n, int32_t *next, gen_times *tm) {
    double t0 = bench_wall_now();
    if (wgml_model_prefill(m, prompt, n, NULL, next)) return 1;
    tm->first = bench_wall_now() - t0;
    tm->pre_wall = 1e30, tm->pre_gpu = 1e30;
    for (double tw = bench_wall_now(); bench_wall_now() - tw < 0.3;) {
        wgml_model_reset(m);
        if (wgml_model_prefill(m, prompt, n, NULL, next)) return 1;
    }
    wgml_record_stats(ctx, &tm->rec0, NULL);
    for (int r = 0; r < 5; r++) {
        wgml_model_reset(m);
        t0 = bench_wall_now();
        if (wgml_model_prefill(m, prompt, n, NULL, next)) return 1;
        double w = bench_wall_now() - t0, gs = wgml_model_last_run_seconds(m);
        if (w < tm->pre_wall) tm->pre_wall = w;
        if (gs < tm->pre_gpu) tm->pre_gpu = gs;
    }
    wgml_record_stats(ctx, &tm->rec1, NULL);
    return 0;
}

/* The decode from the prompt's next token `first`, both ways: host-driven steps (one submit and
 * one argmax readback per token, into step_ids), then GPU-pipelined greedy decoding (into pipe;
 * a warm-up run, then the timed one, each from the same prefill). */
static int gen_time_decode(wgml_ctx *ctx, wgml_model *m, const gen_opts *o, const int32_t *prompt, int32_t first,
                           int32_t *step_ids, token_log *pipe, gen_times *tm) {
    int32_t next = first;
    tm->step_gpu = 0;
    uint64_t sub0 = wgml_submit_count(ctx);
    double t0 = bench_wall_now();
    for (int i = 0; i < o->n_decode; i++) {
        if (wgml_model_decode(m, next, NULL, &next)) return 1;
        step_ids[i] = next;
        tm->step_gpu += wgml_model_last_run_seconds(m);
    }
    tm->step_wall = bench_wall_now() - t0;
    tm->step_sub = (double)(wgml_submit_count(ctx) - sub0) / o->n_decode;
    for (int run = 0; run < 2; run++) {
        wgml_model_reset(m);
        if (wgml_model_prefill(m, prompt, (size_t)o->n_prompt, NULL, &next)) return 1;
        pipe->n = 0;
        t0 = bench_wall_now();
        if (wgml_model_decode_greedy(m, first, (size_t)o->n_decode, o->batch, count_token, pipe, &tm->ds)) return 1;
        tm->got = pipe->n;
        tm->dec_wall = bench_wall_now() - t0;
    }
    tm->dec_gpu = tm->ds.gpu_s >= 0 ? tm->ds.gpu_s : tm->dec_wall;
    return 0;
}

/* The table of the three phases, and the check that the pipelined tokens (from the same first
 * token) are the step-by-step path's, token for token: 1 when they are. */
static int gen_report(wgml_ctx *ctx, const gen_opts *o, const gen_times *tm, const token_log *pipe, const int32_t *step_ids) {
    int n_prompt = o->n_prompt, n_decode = o->n_decode;
    wgml_device_info info;
    wgml_device_get_info(ctx, &info);
    printf("model load %.2f s; first prefill (graph build + run) %.2f s; time: %s\n", tm->load, tm->first,
           info.has_timestamps ? "GPU timestamps" : "wall time (no timestamps)");
    printf("decode: GPU-pipelined greedy, %d steps per submit (%zu tokens read back), %zu dispatches per step, host "
           "recording + submitting %.3f ms per token; decode-step: one submit and readback per token\n",
           o->batch > 0 ? o->batch : 16, tm->got, tm->ds.dispatches_per_step, 1e3 * tm->ds.submit_s / n_decode);
    printf("%-11s %8s %12s %12s %12s %12s\n", "phase", "tokens", "GPU s", "tokens/s", "wall tok/s", "submits/tok");
    printf("%-11s %8d %12.3f %12.1f %12.1f %12s\n", "prefill", n_prompt, tm->pre_gpu, n_prompt / tm->pre_gpu,
           n_prompt / tm->pre_wall, "-");
    printf("%-11s %8d %12.3f %12.1f %12.1f %12.3f\n", "decode", n_decode, tm->dec_gpu, n_decode / tm->dec_gpu,
           n_decode / tm->dec_wall, (double)tm->ds.submits / n_decode);
    printf("%-11s %8d %12.3f %12.1f %12.1f %12.3f\n", "decode-step", n_decode, tm->step_gpu, n_decode / tm->step_gpu,
           n_decode / tm->step_wall, tm->step_sub);
    int same = pipe->n == (size_t)n_decode;
    for (size_t i = 0; same && i < (size_t)n_decode; i++) same = pipe->ids[i] == step_ids[i];
    wgml_memory_stats ms;
    wgml_memory_get(ctx, &ms);
    printf("device memory in wgml's buffers: %.1f MiB after the load (weights, KV cache); %.1f MiB now (%.1f idle in the pool), "
           "peak %.1f MiB (WGML_MEMORY_TRACE=1M lists them)\n",
           (double)tm->mem_load / 1048576.0, (double)ms.in_use / 1048576.0, (double)ms.pool_idle / 1048576.0,
           (double)ms.peak / 1048576.0);
    printf("generate check %s (GPU-pipelined greedy tokens equal the step-by-step ones)\n", same ? "ok" : "FAIL");
    return same;
}

/* Where a prefill's wall time goes beyond its GPU time: the graph run alone (submit, wait,
 * timestamp readback) against its GPU time, and the host's recording; with --profile, the
 * decode step's and the prefill's graphs once more, each dispatch timed alone. */
static int gen_prefill_host(wgml_model *m, const gen_opts *o, const gen_times *tm) {
    double run_wall = 1e30, run_gpu = 1e30;
    size_t n_graph = o->n_prompt < 512 ? (size_t)o->n_prompt : 512;
    wgml_model_reset(m);
    wgml_graph *pg = wgml_model_prefill_graph(m, n_graph);
    for (int r = 0; pg && r < 5; r++) {
        double gs = 0, t0 = bench_wall_now();
        if (wgml_graph_run_timed(pg, &gs)) return 1;
        double w = bench_wall_now() - t0;
        if (w < run_wall) run_wall = w;
        if (gs < run_gpu) run_gpu = gs;
    }
    if (pg)
        printf("prefill host: recording %.3f ms per prefill (CPU); the %zu-token graph run alone: %.3f ms wall, %.3f ms "
               "GPU, %zu dispatches\n",
               (double)(tm->rec1 - tm->rec0) * 1e-6 / 5, n_graph, run_wall * 1e3, run_gpu * 1e3, wgml_graph_dispatch_count(pg));
    if (o->profile && wgml_model_decode_graph(m) && bench_profile_print(wgml_model_decode_graph(m), "decode step", 30))
        return 1;
    if (o->profile && pg && bench_profile_print(pg, "prefill", 30)) return 1;
    return 0;
}

static int bench_generate(wgml_ctx *ctx, int argc, char **argv) {
    gen_opts o;
    if (parse_gen_opts(argc, argv, &o)) return 2;
    gen_times tm = {0};
    wgml_model_options mo = {.n_ctx = o.n_prompt + o.n_decode + 1};
    double t0 = bench_wall_now();
    wgml_model *m = wgml_model_load(ctx, o.path, &mo);
    if (!m) {
        fprintf(stderr, "bench generate: %s\n", wgml_last_error(ctx));
        return 1;
    }
    tm.load = bench_wall_now() - t0;
    const wgml_llama_config *cfg = wgml_model_config(m);
    printf("KV cache: %s, %lld positions ($WGML_KV)\n", cfg->kv_f16 ? "f16" : "f32", (long long)cfg->n_ctx);
    wgml_memory_stats ms;
    wgml_memory_get(ctx, &ms);
    tm.mem_load = ms.in_use;
    int32_t *ids = NULL, *prompt = malloc(sizeof(int32_t) * (size_t)o.n_prompt), *step_ids = NULL;
    token_log pipe = {0};
    int rc = 1;
    if (!prompt || gen_prompt(m, o.n_prompt, prompt, &ids)) goto done;
    int32_t next = 0;
    if (gen_time_prefill(ctx, m, prompt, (size_t)o.n_prompt, &next, &tm)) goto fail;
    step_ids = malloc(sizeof(int32_t) * (size_t)o.n_decode);
    pipe.ids = malloc(sizeof(int32_t) * (size_t)o.n_decode);
    pipe.cap = (size_t)o.n_decode;
    if (!step_ids || !pipe.ids || gen_time_decode(ctx, m, &o, prompt, next, step_ids, &pipe, &tm)) goto fail;
    int same = gen_report(ctx, &o, &tm, &pipe, step_ids);
    if (gen_prefill_host(m, &o, &tm)) goto fail;
    rc = same ? 0 : 1;
    goto done;
fail:
    fprintf(stderr, "bench generate: %s\n", wgml_last_error(ctx));
done:
    free(step_ids);
    free(pipe.ids);
    free(ids);
    free(prompt);
    wgml_model_free(m);
    return rc;
}

int bench_main(wgml_ctx *ctx, int argc, char **argv) {
    if (argc >= 1 && !strcmp(argv[0], "generate")) return bench_generate(ctx, argc, argv);
    if (argc >= 1 && !strcmp(argv[0], "matmul")) return bench_matmul_main(ctx, argc, argv);
    if (argc >= 1 && !strcmp(argv[0], "ops")) return bench_ops_main(ctx, argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "peak")) return bench_peak_main(ctx, argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "train")) return bench_train_main(ctx, argc - 1, argv + 1);
    /* --type NAME (a GGUF block type, e.g. Q4_K) benchmarks that weight type: bench_qw reads
     * it from $WGML_QW_BENCH_TYPE */
    int qw = argc >= 1 && (!strcmp(argv[0], "qw") || !strcmp(argv[0], "q4")); /* q4: its name before */
    if (qw && argc >= 3 && !strcmp(argv[argc - 2], "--type")) {
        setenv("WGML_QW_BENCH_TYPE", argv[argc - 1], 1);
        argc -= 2;
    }
    if (qw && argc == 1) return bench_qw(ctx, stdout, 0);
    if (qw && argc == 2 && !strcmp(argv[1], "--gemv")) return bench_qw(ctx, stdout, 1);
    if (qw && argc == 2 && !strcmp(argv[1], "--train")) return bench_qw(ctx, stdout, 2);
    if (qw && argc == 2 && !strcmp(argv[1], "--prefill")) return bench_qw(ctx, stdout, 3);
    if (argc >= 1 && !strcmp(argv[0], "lmhead")) return bench_lmhead_main(ctx, argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[0], "attention") && !strcmp(argv[1], "--decode"))
        return bench_attn_decode_main(ctx, argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "attention")) return bench_attn_main(ctx, argc - 1, argv + 1);
    fprintf(stderr, "usage: wgml bench matmul [--shapes MxNxK[:XY],...|lora] [--reps N] [--variant NAME,...|all|auto]\n"
                    "                         [--splitk S,...] [--trans NN,TN,NT,TT] [--check]\n"
                    "       wgml bench ops [--rows N] [--reps N] [--profile]\n"
                    "       wgml bench peak [--threads N] [--steps N]\n"
                    "       wgml bench qw [--gemv|--train|--prefill] [--type Q4_0|Q4_1|Q5_0|Q5_1|Q8_0|Q2_K|Q3_K|Q4_K|Q5_K|Q6_K|IQ4_NL|IQ4_XS]  (q4: an alias)\n"
                    "                         (--train: WGML_QW_MM_VARIANT, WGML_QW_MM_SPLITK)\n"
                    "       wgml bench attention [--batch B] [--seq S] [--heads H] [--kv-heads H] [--dim D] [--forward] [--reps N] [--profile]\n"
                    "       wgml bench attention --decode [--heads H] [--kv-heads H] [--dim D] [--cache ROWS] [--len N] [--kv f16|f32] [--reps N] [--profile]\n"
                    "       wgml bench lmhead [--rows N] [--dim D] [--vocab V] [--chunk C] [--weight q8|f32]\n"
                    "       wgml bench train --model FILE [--batch N] [--seq-len N] [--rank R] [--steps N] [--profile]\n"
                    "       wgml bench generate --model FILE [--prompt-tokens N] [--decode-tokens N] [--decode-batch B] [--profile]\n");
    return 2;
}

int bench_parse_dims(const char **p, int nd, long long lo, long long hi, int64_t *dims) {
    for (int i = 0; i < nd; i++) {
        if (i && *(*p)++ != 'x') return 0;
        if (**p < '0' || **p > '9') return 0; /* digits only: no sign, no space */
        char *end;
        errno = 0;
        long long v = strtoll(*p, &end, 10);
        if (errno || v < lo || v > hi) return 0;
        dims[i] = v;
        *p = end;
    }
    return 1;
}

/* --shapes LIST into shapes[*n..] (up to 64 in all; "lora": LORA_SHAPES in place of what is
 * there): 0, or 2 after a message. */
static int parse_shapes(const char *arg, shape3 *shapes, int *n) {
    const char *p = arg;
    if (!strcmp(p, "lora")) {
        *n = (int)(sizeof LORA_SHAPES / sizeof LORA_SHAPES[0]);
        memcpy(shapes, LORA_SHAPES, sizeof LORA_SHAPES);
        return 0;
    }
    while (*p && *n < 64) {
        int64_t d[3];
        if (!bench_parse_dims(&p, 3, 1, 1LL << 40, d)) {
            fprintf(stderr, "bench: bad shape list '%s' (want MxNxK[,MxNxK...])\n", arg);
            return 2;
        }
        int64_t m = d[0], nn = d[1], k = d[2];
        int tr = 0;
        if (*p == ':') { /* MxNxK:XY, X and Y in N/T: this shape's own orientation */
            if (!strchr("NT", p[1]) || !p[1] || !strchr("NT", p[2]) || !p[2]) {
                fprintf(stderr, "bench: bad orientation in '%s' (want MxNxK:NN, :TN, :NT or :TT)\n", arg);
                return 2;
            }
            tr = 1 + (p[1] == 'T') + 2 * (p[2] == 'T');
            p += 3;
        }
        shapes[(*n)++] = (shape3){m, nn, k, tr};
        if (*p == ',') p++;
    }
    return 0;
}

/* --variant NAME[,NAME...], "auto" or "all" into sw: 0, or 2 after a message. */
static int parse_variants(const char *arg, matmul_sweep *sw) {
    char list[1024];
    snprintf(list, sizeof list, "%s", arg);
    sw->n_variants = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "all")) {
            for (int j = 0; j < wgml_matmul_variant_count() && sw->n_variants < 64; j++) sw->variants[sw->n_variants++] = j;
            continue;
        }
        int v = -1;
        for (int j = 0; j < wgml_matmul_variant_count(); j++)
            if (!strcmp(tok, wgml_matmul_variant_name(j))) v = j;
        if ((v < 0 && strcmp(tok, "auto")) || sw->n_variants >= 64) {
            fprintf(stderr, "bench: unknown variant '%s'; one of: auto all", tok);
            for (int j = 0; j < wgml_matmul_variant_count(); j++) fprintf(stderr, " %s", wgml_matmul_variant_name(j));
            fprintf(stderr, "\n");
            return 2;
        }
        sw->variants[sw->n_variants++] = v;
    }
    return 0;
}

/* --splitk S[,S...]: K slices (1: no split, 0 or "auto": the automatic choice) into sw: 0, or 2
 * after a message. */
static int parse_splits(const char *arg, matmul_sweep *sw) {
    char list[256];
    snprintf(list, sizeof list, "%s", arg);
    sw->n_splits = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (!strcmp(tok, "auto")) v = 0, end = tok + 4;
        if (*end || v < 0 || v > 64 || sw->n_splits >= 16) {
            fprintf(stderr, "bench: --splitk wants counts 0..64 (0: auto), got '%s'\n", tok);
            return 2;
        }
        sw->splits[sw->n_splits++] = (int)v;
    }
    return 0;
}

/* --trans NN,TN,NT,TT: whether a (first letter) and b are stored transposed, into sw: 0, or 2
 * after a message. */
static int parse_trans(const char *arg, matmul_sweep *sw) {
    char list[64];
    snprintf(list, sizeof list, "%s", arg);
    sw->n_trans = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (strlen(tok) != 2 || !strchr("NT", tok[0]) || !strchr("NT", tok[1]) || sw->n_trans >= 4) {
            fprintf(stderr, "bench: --trans wants NN, TN, NT or TT, got '%s'\n", tok);
            return 2;
        }
        sw->trans[sw->n_trans++] = (tok[0] == 'T') | (tok[1] == 'T') << 1;
    }
    return 0;
}

static int bench_matmul_main(wgml_ctx *ctx, int argc, char **argv) {
    wgml_device_info info;
    wgml_device_get_info(ctx, &info);
    int cpu = strcmp(info.type, "CPU") == 0;
    shape3 shapes[64];
    int n = 0;
    int reps = cpu ? 2 : 10, check = 0;
    matmul_sweep sw = {.variants = {-1}, .n_variants = 1, .splits = {0}, .n_splits = 1, .trans = {0}, .n_trans = 1};
    for (int i = 1; i < argc; i++) {
        int bad = 0;
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) bad = parse_shapes(argv[++i], shapes, &n);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 1000) {
                fprintf(stderr, "bench: --reps must be 1..1000\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--variant") && i + 1 < argc) bad = parse_variants(argv[++i], &sw);
        else if (!strcmp(argv[i], "--splitk") && i + 1 < argc) bad = parse_splits(argv[++i], &sw);
        else if (!strcmp(argv[i], "--trans") && i + 1 < argc) bad = parse_trans(argv[++i], &sw);
        else if (!strcmp(argv[i], "--check")) check = 1;
        else {
            fprintf(stderr, "bench: unknown option '%s'\n", argv[i]);
            return 2;
        }
        if (bad) return bad;
    }
    if (n == 0) {
        const shape3 *d = cpu ? DEFAULT_CPU : DEFAULT_GPU;
        n = cpu ? (int)(sizeof DEFAULT_CPU / sizeof *d) : (int)(sizeof DEFAULT_GPU / sizeof *d);
        memcpy(shapes, d, sizeof(shape3) * (size_t)n);
    }
    printf("adapter: %s (%s, %s), timing: %s, %d reps per submit\n", info.adapter, info.backend, info.type,
           info.has_timestamps ? "GPU timestamps" : "wall clock", reps);
    return bench_matmul(ctx, shapes, n, reps, check, &sw);
}
