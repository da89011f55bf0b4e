/* The 4-bit GEMV (qw_gemv.wgsl) for the few rows of a decode step or a short prefill: its launch
 * shape per adapter, its prelude, one dispatch over 1-3 weights that read the same x, and the
 * grouping of more weights into dispatches (wgml_qlinear_multi). The fused forms' entry point
 * and fit rules (qw_gemv_fused: a norm or merge prologue, a residual or gated epilogue) are in
 * qw_gemv_fused.c. */
#include "ops/qweight/qw_gemv_internal.h"
#include "ops/qweight/qw_xq.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


long gemv_env_long(const char *name, long lo, long hi, long dflt) {
    const char *e = getenv(name);
    if (!e || !*e) return dflt;
    char *end;
    long v = strtol(e, &end, 10);
    return *end == '\0' && v >= lo && v <= hi ? v : dflt;
}

/* The most rows of x the GEMV takes (more go to the tiled GEMM): 4 on a GPU; 1 on a CPU adapter,
 * where the GEMM has its own kernel (qw_mm_cpu, 4-row tiles, no barriers) that runs a short
 * prefill as fast or faster (lavapipe, SmolLM2's 5-token prefill: 0.14 s against 0.31 s with
 * the GEMV's 5-row form) and is compiled once for every shape and row count, where the GEMV
 * compiles a kernel per weight shape and row count (bench/NOTES.md, 2026-12-04).
 * $WGML_QW_GEMV_MAX_M (1-8) sets it, as the tests of the GEMV's rows do on a CPU adapter. */
int qw_gemv_max_m(wgml_ctx *ctx) {
    return (int)gemv_env_long("WGML_QW_GEMV_MAX_M", 1, 8, gpu_get_caps(ctx)->is_cpu ? 1 : 4);
}

/* Threads a GEMV dispatch on a GPU aims for (the launch rule below): $WGML_QW_GEMV_THREADS
 * overrides it for sweeps. */
static long gemv_thread_target(void) {
    return gemv_env_long("WGML_QW_GEMV_THREADS", 1024, 1L << 24, 65536);
}

/* The least K, in 32-code blocks, where that rule applies: 128 (K = 4,096);
 * $WGML_QW_GEMV_THREADS_K (64 up) moves it for A/B runs. */
static int64_t gemv_thread_min_blocks(void) {
    return gemv_env_long("WGML_QW_GEMV_THREADS_K", 64, 1L << 20, 128);
}

/* The GEMV shape on a GPU for K of nblk 32-code blocks, a first weight of n0 rows and `rows`
 * output rows in all (the weights of one dispatch, a gated pair's gate and up rows both).
 * K >= 4,096 (128 blocks): RPT rows a thread (each x load serves RPT rows), 8 for the codes of
 * the integer form (4-bit codes and a scale per 16: one quantisation of x serves 8 rows) and 4
 * for the others; then threads per row along K (TPR) for about gemv_thread_target() (65,536)
 * threads in the dispatch: the power of two nearest 65,536 * RPT / rows, from 16 (32 for a
 * scale per 16) to 256 and at most nblk, in workgroups of max(64, TPR). The fixed 32 x 8 in 64
 * before it left a 4,096-row GEMV 32,768 threads (250 an SM of the H100) and ran
 * Llama-3.1-8B's decode shapes at 0.3-0.5 of the copy. On the H100 (bench/NOTES.md,
 * 2026-12-07, twenty-second session) Q4_K's integer form 14,336 -> 4,096 took 21.5 us at
 * 128 x 8 against 32.2, 4,096 -> 6,144 12.3 against 15.1, 8,192 -> 2,048 10.4 at 256 x 8
 * against 19.2, 4,096 -> 28,672 35.3 at 16 x 8 against 40.5 (Q6_K's there: 57.1 at 16 x 8
 * against 53.7 at 32); Q8_0's f32 form at 64 x 4 14,336 -> 4,096 31.9 against 40.0. This
 * form against the fixed shape (H100, twenty-third session): Llama-3.1-8B Q4_K_M decoded
 * 229.0-229.7 tokens/s against 221.4, Llama-3.2-1B 769.3-772.1 against 740.8-743.5. K of 2,048
 * .. 4,095 keeps 32 x 8 in 64, with fewer rows a thread while the first weight has fewer than
 * $WGML_QW_GEMV_MIN_WG (264: two per SM of a 132-SM GPU) workgroups: the rule there
 * ($WGML_QW_GEMV_THREADS_K=64) decoded the 1B at 732.5-734.6, with or without the norm
 * prologue. Shorter K: 64 threads per row with two blocks in flight, for the small, launch-bound
 * shapes. */
static void gemv_shape_gpu(int64_t nblk, int64_t n0, int64_t rows, int group, bool rpt8, int *tpr, int *rpt,
                           int *wg, int *bpi) {
    long min_wg = gemv_env_long("WGML_QW_GEMV_MIN_WG", 0, 1L << 20, 264);
    *bpi = 1;
    if (nblk < 64) {
        *tpr = 64, *rpt = 1, *wg = 256, *bpi = 2;
    } else if (nblk < gemv_thread_min_blocks()) {
        *tpr = 32, *rpt = 8, *wg = 64; /* two row groups a workgroup */
        while (*rpt > 1 && (n0 + 2 * *rpt - 1) / (2 * *rpt) < min_wg) *rpt /= 2;
    } else {
        *rpt = rpt8 ? 8 : 4;
        /* the power of two nearest want in log2: above want / sqrt(2), at most want * sqrt(2) */
        double want = (double)gemv_thread_target() * *rpt / (double)(rows > 0 ? rows : 1);
        *tpr = group == 16 ? 32 : 16;
        while (*tpr < 256 && *tpr * 2 <= nblk && (double)*tpr * 1.41421356 < want) *tpr *= 2;
        *wg = *tpr > 64 ? *tpr : 64;
        int64_t rg = *wg / *tpr; /* row groups per workgroup; at least min_wg x 64 threads */
        while (*rpt > 1 && (rows + rg * *rpt - 1) / (rg * *rpt) * *wg < min_wg * 64) *rpt /= 2;
    }
}

/* GEMV shape: threads per row along K (TPR), rows per thread (RPT, the reuse of each x load),
 * threads per workgroup (WG), blocks per iteration (BPI, loads in flight per thread). A CPU
 * adapter (lavapipe, SwiftShader) runs a workgroup's lanes a few at a time and pays for every
 * barrier, so there: one thread per row (no reduction at all: no workgroup memory, no barrier,
 * whatever the subgroup size), 8 rows per thread (each x load serves 8 rows), 16-thread
 * workgroups, at every K. SmolLM2's decode step on lavapipe: the GEMVs 181 ms (median of 7)
 * against 226 (of 5) for 4 threads x 4 rows in 64, whose 4-lane sums went through workgroup
 * memory (lavapipe reports no subgroup size); that shape was 3.7-7.6x faster than the GPU shapes
 * on lavapipe and 10-16x on SwiftShader (bench/NOTES.md, 2026-12-03 and 2026-12-05).
 * $WGML_QW_GEMV="TPR,RPT,WG[,BPI]" overrides it (benchmark sweeps): then true. */
static bool gemv_shape(bool cpu, int64_t nblk, int64_t n0, int64_t rows, int group, bool rpt8, int *tpr, int *rpt,
                       int *wg, int *bpi) {
    if (cpu) *tpr = 1, *rpt = 8, *wg = 16, *bpi = 1;
    else gemv_shape_gpu(nblk, n0, rows, group, rpt8, tpr, rpt, wg, bpi);
    const char *env = getenv("WGML_QW_GEMV");
    int a, b, c, d = 1;
    int got = env ? sscanf(env, "%d,%d,%d,%d", &a, &b, &c, &d) : 0;
    if (got >= 3 && a >= 1 && a <= 256 && (a & (a - 1)) == 0 && b >= 1 && b <= 16 && c >= a && c <= 256 && c % a == 0 &&
        d >= 1 && d <= 8) {
        *tpr = a;
        *rpt = b;
        *wg = c;
        *bpi = d;
        return true;
    }
    return false;
}

/* Whether the GEMV's final reduction uses subgroup operations, and the subgroup size known to
 * hold at least (*known, 0 when unknown). Only with the device's subgroups feature. Automatic:
 * when the device reports a minimum subgroup size >= TPR (then each row's TPR partial sums lie
 * in one subgroup and no workgroup memory is needed). $WGML_QW_GEMV_SUBGROUP=0 never, =1
 * whenever the feature is there (a subgroup size below TPR then adds one workgroup-memory step),
 * =S (a power of two >= 2) as 1 and takes S as the known minimum size (tests: only correct when
 * the device's subgroups really have at least S lanes). */
static bool gemv_subgroup(wgml_ctx *ctx, int tpr, uint32_t *known) {
    const gpu_caps *c = gpu_get_caps(ctx);
    *known = c->subgroup_min;
    if (!c->subgroups) return false;
    const char *env = getenv("WGML_QW_GEMV_SUBGROUP");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v <= 0) return false;
        if (v >= 2 && v <= 128 && (v & (v - 1)) == 0) *known = (uint32_t)v;
        return true;
    }
    return *known >= (uint32_t)tpr;
}

/* Bindings of one GEMV dispatch over ws[0..nw): x, codes, ab (and bias) per weight, outputs,
 * and the fusion's norm weight and residual. */
static int gemv_storage_bindings(const wgml_qweight *const *ws, int nw, const qw_gemv_fuse *f) {
    int n = 1 + nw;
    for (int i = 0; i < nw; i++) n += ws[i]->bias ? 3 : 2;
    if (f && f->norm_w) n++;
    if (f && f->residual) n++;
    if (f && f->ssq) n++;
    if (f && f->next_norm) n += 3; /* its weight, x * it and the sums of squares */
    if (f && (f->epi == QW_EPI_SWIGLU || f->epi == QW_EPI_GEGLU)) n--; /* one output */
    return n;
}

/* SSW_LEN: SSQ_OUT's row-group sums (RG * MR), else 1 */
static int64_t ssw_len(const gemv_cfg *c, int64_t m) { return fuse_ssq_out(c->f) ? (int64_t)(c->wg / c->tpr) * m : 1; }

/* XQS_LEN: the vec4<u32>s of x quantised in workgroup memory (XQSTAGE: m rows of w's qw_quant_x
 * format), else 1 */
static int64_t xqs_len(const gemv_cfg *c, const wgml_qweight *w, int64_t m) {
    return c->xq_stage ? m * qw_quant_x_row(w) / 4 : 1;
}

/* Bytes of workgroup memory the GEMV kernel declares (red, xsh, nred, mwt, mrange, ssw, xqsh). */
static uint64_t gemv_wg_bytes(const gemv_cfg *c, int64_t m, const wgml_qweight *w) {
    uint64_t red = c->direct ? 1 : (uint64_t)c->wg * (uint64_t)c->rpt * (uint64_t)m;
    uint64_t xsh = fuse_stage(c->f) ? (uint64_t)m * (uint64_t)(w->kp / 4) * 4 : 4;
    uint64_t nred = c->f && c->f->norm_w ? (uint64_t)c->wg : 1;
    return 4 * (red + xsh + nred + (uint64_t)merge_table_len(c->f) + 2 + (uint64_t)ssw_len(c, m) +
                4 * (uint64_t)xqs_len(c, w, m));
}

/* The prelude's constants, x's reader, the kind's dequantisation and the subgroup helpers. */
static size_t gemv_consts(char *prelude, size_t cap, const gemv_cfg *c, const wgml_qweight *w, int nw, int64_t m) {
    size_t len = 0;
#define EMIT(...) (len += (size_t)snprintf(prelude + len, len < cap ? cap - len : 0, __VA_ARGS__))
    const qw_gemv_fuse *f = c->f;
    bool stage = fuse_stage(f), pair = fuse_pair(f), merge = fuse_merge(f);
    bool norm = f && f->norm_w;
    int xv = w->k % 4 == 0 && !merge ? 4 : 1;
    /* KP4 sizes the staged rows only: 0 when nothing is staged, so that products of every K
     * share one pipeline (SmolLM2's decode compiled the same kernel twice, K = 576 and 1,536) */
    int64_t kp4 = stage ? w->kp / 4 : 0;
    /* no `enable subgroups;`: naga (wgpu-native 29) rejects the directive ("not yet
     * supported") and takes the subgroup builtins and functions without it, given the device's
     * subgroups feature */
    EMIT("alias XT = %s;\n"
         "const WG: u32 = %du; const TPR: u32 = %du; const RPT: u32 = %du; const MR: u32 = %du;\n"
         "const BPI: u32 = %du; const NW: u32 = %du; const SUBGROUP: bool = %s; const SG: u32 = %uu;\n"
         "const DIRECT: bool = %s; const RED_LEN: u32 = %du;\n"
         "const XSTAGE: bool = %s; const NORM: bool = %s; const KP4: u32 = %lldu; const XSH_LEN: u32 = %lldu;\n"
         "const NRED_LEN: u32 = %du; const EPI: u32 = %du; const PAIR: bool = %s; const RP: u32 = %du;\n"
         "const SSQ_IN: bool = %s; const SSQ_OUT: bool = %s; const SSW_LEN: u32 = %lldu;\n"
         "alias V = f32;\n"
         "fn x4(mm: u32, k: u32) -> vec4<f32> { %s }\n",
         xv == 4 ? "vec4<f32>" : "f32", c->wg, c->tpr, c->rpt, (int)m, c->bpi, nw, c->sg ? "true" : "false",
         c->sg ? c->sg_known : 0u, c->direct ? "true" : "false", c->direct ? 1 : c->wg * c->rpt * (int)m,
         stage ? "true" : "false", norm ? "true" : "false", (long long)kp4, stage ? (long long)(m * kp4) : 1LL,
         norm ? c->wg : 1, f ? (int)f->epi : 0, pair ? "true" : "false", pair ? c->rpt / 2 : c->rpt,
         fuse_ssq_in(f) ? "true" : "false", fuse_ssq_out(f) ? "true" : "false", (long long)ssw_len(c, m),
         stage ? "return xsh[mm * KP4 + k / 4u];" : "return x_load(mm, k / 4u);");
    /* x_load: x's vec4 i (zero past K); merged from the chunks' partials X [MH, MC, MD + 2] with
     * MERGE (x_merged in the kernel); xf: X's element i as f32 */
    EMIT("const MERGE: bool = %s; const MH: u32 = %lldu; const MC: u32 = %lldu; const MD: u32 = %lldu;\n"
         "fn xf(i: u32) -> f32 { return %s; }\n"
         "fn x_load(mm: u32, i: u32) -> vec4<f32> {\n%s}\n",
         merge ? "true" : "false", merge ? (long long)f->merge_heads : 1LL, merge ? (long long)f->merge_chunks : 1LL,
         merge ? (long long)f->merge_dim : 1LL, xv == 4 ? "X[i / 4u][i % 4u]" : "X[i]",
         merge     ? "  return x_merged(i);\n"
         : xv == 4 ? "  if (i * 4u < p.K) { return X[mm * (p.K / 4u) + i]; }\n  return vec4<f32>(0.0);\n"
                   : "  var v = vec4<f32>(0.0);\n"
                     "  for (var j = 0u; j < 4u; j++) { if (i * 4u + j < p.K) { v[j] = X[mm * p.K + i * 4u + j]; } }\n"
                     "  return v;\n");
    /* the integer forms (qw_gemv_i8.wgsl) only where the adapter has them; else stubs never called;
     * x quantised once: read from XQ, or from xqsh after the workgroup quantised its staged x */
    EMIT("const XQIN: bool = %s; const XQSTAGE: bool = %s; const XQS_LEN: u32 = %lldu;\n",
         c->xq || c->xq_stage ? "true" : "false", c->xq_stage ? "true" : "false", (long long)xqs_len(c, w, m));
    if (c->xq_stage)
        EMIT("fn xq_src(i: u32) -> f32 { return xsh[i / 4u][i %% 4u]; }\n"
             "fn xq_put(f: u32, i: u32, v: u32) { xqsh[i / 4u][i %% 4u] = v; }\n");
    else
        EMIT("fn xq_src(i: u32) -> f32 { return 0.0; }\nfn xq_put(f: u32, i: u32, v: u32) { }\n");
    if (c->i8x)
        EMIT("const I8X: bool = true;\n//!include qw_gemv_i8\n");
    else
        EMIT("const I8X: bool = false;\n"
             "fn quant_block(xs: array<vec4<f32>, 8>, a: f32, b: f32) -> array<u32, 8> { return array<u32, 8>(); }\n"
             "fn idot(cw: vec4<u32>, q: array<u32, 8>, h: u32) -> i32 { return 0; }\n"
             "fn qsum(q: array<u32, 8>, h: u32) -> i32 { return 0; }\n");
    if (len < cap) qw_kind_prelude_ex(prelude + len, cap - len, w, false);
    len += strlen(prelude + len);
    if (c->sg)
        /* the lane apart from the size: Tint takes a struct with a non-uniform member as
         * non-uniform, and the size must stay uniform for the subgroup operations after it */
        EMIT("struct SgIn { @builtin(subgroup_size) size: u32 }\n"
             "struct SgLane { @builtin(subgroup_invocation_id) lane: u32 }\n"
             "fn sg_size(s: SgIn) -> u32 { return s.size; }\n"
             "fn sg_lane(s: SgLane) -> u32 { return s.lane; }\n"
             "fn sg_sum(v: f32, seg: u32, sgs: u32) -> f32 {\n"
             "  if (seg == sgs) { return subgroupAdd(v); }\n"
             "  var s = v;\n"
             "  for (var h = 1u; h < seg; h = h * 2u) { s += subgroupShuffleXor(s, h); }\n"
             "  return s;\n}\n");
    else
        EMIT("struct SgIn { @builtin(local_invocation_id) unused: vec3<u32> }\n"
             "fn sg_size(s: SgIn) -> u32 { return 1u; }\n"
             "struct SgLane { @builtin(global_invocation_id) unused: vec3<u32> }\n"
             "fn sg_lane(s: SgLane) -> u32 { return 0u; }\n"
             "fn sg_sum(v: f32, seg: u32, sgs: u32) -> f32 { return v; }\n");
#undef EMIT
    return len;
}

/* The bindings (X, then per weight C, AB and BIAS, then the outputs, then the uniform) and the
 * readers over them, ro[0..*n_ro_out) the read-only tensors in binding order. */
static size_t gemv_bindings(char *prelude, size_t cap, const gemv_cfg *c, wgml_tensor *x, const wgml_qweight *const *ws,
                            int nw, wgml_tensor **ro, int *n_ro_out) {
    size_t len = 0;
#define EMIT(...) (len += (size_t)snprintf(prelude + len, len < cap ? cap - len : 0, __VA_ARGS__))
    const qw_gemv_fuse *f = c->f;
    bool resid = f && f->epi == QW_EPI_RESIDUAL, norm = f && f->norm_w;
    int n_out = fuse_outputs(f, nw);
    int n_ro = 0;
    ro[n_ro++] = x;
    EMIT("//!bindings read(X: array<XT>)\n");
    if (c->xq) {
        ro[n_ro++] = c->xq;
        EMIT("//!bindings read(XQ: array<vec4<u32>>)\n"
             "fn xq4(i: u32) -> vec4<u32> { return XQ[i]; }\nfn xqw(i: u32) -> u32 { return XQ[i / 4u][i %% 4u]; }\n");
    } else if (c->xq_stage) {
        EMIT("fn xq4(i: u32) -> vec4<u32> { return xqsh[i]; }\nfn xqw(i: u32) -> u32 { return xqsh[i / 4u][i %% 4u]; }\n");
    } else {
        EMIT("fn xq4(i: u32) -> vec4<u32> { return vec4<u32>(); }\nfn xqw(i: u32) -> u32 { return 0u; }\n");
    }
    if (norm) {
        ro[n_ro++] = f->norm_w;
        EMIT("//!bindings read(NRM: array<f32>)\n"
             "fn nw4(i: u32) -> vec4<f32> {\n  var v = vec4<f32>(0.0);\n"
             "  for (var j = 0u; j < 4u; j++) { if (i * 4u + j < p.K) { v[j] = NRM[i * 4u + j]; } }\n"
             "  return v;\n}\n");
    } else {
        EMIT("fn nw4(i: u32) -> vec4<f32> { return vec4<f32>(1.0); }\n");
    }
    if (fuse_ssq_in(f)) {
        ro[n_ro++] = f->ssq;
        EMIT("//!bindings read(SQ: array<f32>)\nfn ssq_in(i: u32) -> f32 { return SQ[i]; }\n");
    } else {
        EMIT("fn ssq_in(i: u32) -> f32 { return 0.0; }\n");
    }
    for (int i = 0; i < nw; i++) {
        EMIT("//!bindings read(C%d: array<vec4<u32>>, AB%d: array<ABT>)\n", i, i);
        ro[n_ro++] = ws[i]->codes;
        ro[n_ro++] = ws[i]->ab;
        if (ws[i]->bias) {
            EMIT("//!bindings read(BIAS%d: array<f32>)\n", i);
            ro[n_ro++] = ws[i]->bias;
        }
    }
    if (resid) {
        ro[n_ro++] = f->residual;
        EMIT("//!bindings read(R: array<f32>)\nfn resid(i: u32) -> f32 { return R[i]; }\n");
    } else {
        EMIT("fn resid(i: u32) -> f32 { return 0.0; }\n");
    }
    if (fuse_ssq_out(f)) {
        ro[n_ro++] = f->next_norm;
        EMIT("//!bindings read(NN: array<f32>)\n");
    }
    for (int i = 0; i < n_out; i++) EMIT("//!bindings write(O%d: array<f32>)\n", i);
    if (fuse_ssq_out(f))
        EMIT("fn ssq_store(i: u32, n: u32, v: f32) { O1[i] = v * NN[n]; }\n"
             "fn ssq_part(i: u32, v: f32) { O2[i] = v; }\n");
    else
        EMIT("fn ssq_store(i: u32, n: u32, v: f32) { }\nfn ssq_part(i: u32, v: f32) { }\n");
    EMIT("//!bindings uniform(p: Params)\n");
    /* readers: w is uniform across a workgroup, so these branches are too */
    EMIT("fn c_at(w: u32, i: u32) -> vec4<u32> { ");
    for (int i = nw - 1; i > 0; i--) EMIT("if (w == %du) { return C%d[i]; } ", i, i);
    EMIT("return C0[i]; }\n");
    for (int i = 0; i < nw; i++) {
        char fn[16], binding[16];
        snprintf(fn, sizeof fn, "ab_r%d", i);
        snprintf(binding, sizeof binding, "AB%d", i);
        len += (size_t)qw_ab_reader(prelude + len, len < cap ? cap - len : 0, ws[i], fn, binding);
    }
    EMIT("fn ab_at(w: u32, i: u32) -> vec2<f32> { ");
    for (int i = nw - 1; i > 0; i--) EMIT("if (w == %du) { return ab_r%d(i); } ", i, i);
    EMIT("return ab_r0(i); }\nfn bias_at(w: u32, n: u32) -> f32 { ");
    for (int i = 0; i < nw; i++)
        if (ws[i]->bias) EMIT("if (w == %du) { return BIAS%d[n]; } ", i, i);
    EMIT("return 0.0; }\nfn store(w: u32, i: u32, v: f32) { ");
    for (int i = (fuse_pair(f) ? 1 : nw) - 1; i > 0; i--) EMIT("if (w == %du) { O%d[i] = v; return; } ", i, i);
    EMIT("O0[i] = v; }\n");
#undef EMIT
    *n_ro_out = n_ro;
    return len;
}

/* The qw_gemv prelude for x and the nw weights ws (M = m rows): constants, x's reader, the
 * kind's dequantisation, the subgroup helpers, the bindings (X, then per weight C, AB and BIAS,
 * then the outputs, then the uniform) and the readers over them. ro[0..*n_ro_out) receives the
 * read-only tensors in binding order. Returns the length the prelude needed (>= cap: too long). */
static size_t gemv_prelude(char *prelude, size_t cap, const gemv_cfg *c, wgml_tensor *x,
                           const wgml_qweight *const *ws, int nw, int64_t m, wgml_tensor **ro, int *n_ro_out) {
    size_t len = gemv_consts(prelude, cap, c, ws[0], nw, m);
    size_t at = len < cap ? len : cap;
    return len + gemv_bindings(prelude + at, cap - at, c, x, ws, nw, ro, n_ro_out);
}

/* The GEMV's launch shape and reduction for one dispatch over the nw weights ws (one K, kind and
 * group size; the rule counts their rows together) and fusion f; false when the kernel's
 * workgroup memory would not fit the device. The automatic shape halves its threads per row
 * (down to 32 in 64) while the reduction's array would not fit. */
bool gemv_config(wgml_ctx *ctx, const wgml_qweight *const *ws, int nw, int64_t m, const qw_gemv_fuse *f,
                        gemv_cfg *c) {
    const wgml_qweight *w = ws[0];
    const gpu_caps *caps = gpu_get_caps(ctx);
    int64_t rows = 0;
    for (int i = 0; i < nw; i++) rows += ws[i]->n;
    memset(c, 0, sizeof *c);
    bool rpt8 = qw_kind_cpw(w->kind) == 8 || w->group == 16;
    bool forced = gemv_shape(caps->is_cpu, w->kp / 32, w->n, rows, w->group, rpt8, &c->tpr, &c->rpt, &c->wg, &c->bpi);
    if (fuse_pair(f) && c->rpt % 2) c->rpt *= 2; /* a thread holds a gate row and its up row */
    c->f = f;
    for (;;) {
        c->sg = gemv_subgroup(ctx, c->tpr, &c->sg_known);
        c->direct = c->sg && c->sg_known >= (uint32_t)c->tpr;
        bool fits = gemv_wg_bytes(c, m, w) <= caps->max_workgroup_storage;
        if (fits || forced || caps->is_cpu || c->tpr <= 32) return fits;
        c->tpr /= 2;
        c->wg = c->tpr > 64 ? c->tpr : 64;
    }
}

/* Whether every weight of a GEMV group takes int8 activations in g (qw_x8_applies): the integer
 * form's condition, whichever way x is quantised. */
static bool group_x8(wgml_graph *g, const wgml_qweight *const *ws, int nw) {
    for (int i = 0; i < nw; i++)
        if (!qw_x8_applies(g, ws[i], 0)) return false;
    return true;
}

/* Whether the GEMV takes its integer form (I8X: x quantised to int8 per block, the codes
 * through dot4I8Packed), in a graph whose products take int8 activations (qw_x8_applies): where
 * it measured faster on the H200 (bench/NOTES.md, 2026-12-05), 4-bit codes (Q4_K 1.39-1.49x at
 * every shape of 64 or more blocks; Q4_0 1.08-1.16x at the 4,096-wide ones, 0.92x at 8,192 ->
 * 28,672; 8B Q4_0 decode 1.04x) in threads of 4 or more rows (one quantisation of x serves
 * them all; a one-row thread was up to 1.4x slower); and codes with a scale per 16 (Q6_K, Q3_K,
 * Q2_K), whose f32 form loads two scales a 32-k block: with Q4_K_M's Q6_K tensors (head, v, down)
 * in this form decode ran +2.3% at 8B and +1% at 1B on the H100 (bench/NOTES.md, 2026-12-07,
 * twenty-first session). Not the 8-bit codes of a scale per 32: a SmolLM2-shaped Q8_0 file
 * decoded 1.6% slower in this form. $WGML_QW_GEMV_I8=1 takes it wherever qw_x8_applies (tests,
 * sweeps), =0 never. */
static bool gemv_i8x(wgml_graph *g, const wgml_qweight *const *ws, int nw, const gemv_cfg *c) {
    if (!group_x8(g, ws, nw)) return false;
    const char *e = getenv("WGML_QW_GEMV_I8");
    if (e && *e) return strcmp(e, "0") != 0;
    return (qw_kind_cpw(ws[0]->kind) == 8 && c->rpt >= 4) || ws[0]->group == 16;
}

/* Storage buffers one GEMV dispatch may bind: the graph's limit (one binding is the uniform)
 * or the device's, the smaller. */
static int gemv_binding_limit(wgml_ctx *ctx) {
    int limit = GRAPH_MAX_BINDINGS - 1;
    const gpu_caps *caps = gpu_get_caps(ctx);
    return (uint32_t)limit > caps->max_storage_per_stage ? (int)caps->max_storage_per_stage : limit;
}

/* Whether the GEMV can read x quantised once (XQIN) instead of every row group quantising the
 * blocks it reads: not with a staged x (a norm prologue, attention's merge), and only where the
 * quantised row's words come in whole vec4s and one more binding fits. */
static bool gemv_xq_fits(wgml_graph *g, const wgml_qweight *const *ws, int nw, const gemv_cfg *c) {
    return !fuse_stage(c->f) && qw_quant_x_row(ws[0]) % 4 == 0 &&
           gemv_storage_bindings(ws, nw, c->f) + 1 <= gemv_binding_limit(graph_ctx(g));
}

/* x quantised by its producer in the group's format (qw_xq.h), where the GEMV can read it: then
 * the GEMV takes the integer form whatever gemv_i8x's rule says, as the rule weighs the
 * quantisation in every row group that x quantised once does not cost (every weight of a group
 * has one layout, so one format). NULL: none. */
static wgml_tensor *gemv_xq_given(wgml_graph *g, wgml_tensor *x, const wgml_qweight *const *ws, int nw,
                                  const gemv_cfg *c) {
    return group_x8(g, ws, nw) && gemv_xq_fits(g, ws, nw, c) ? qw_xq_given(g, x, ws[0]) : NULL;
}

/* Whether the GEMV quantises its staged x (a norm prologue, attention's merge) once per workgroup
 * into workgroup memory and reads it there as it reads a producer's rows (XQSTAGE), instead of
 * every row group quantising the blocks it reads: $WGML_QW_GEMV_XQ=2 or 3 (qw_xq.h), where the
 * weights take int8 activations, the row comes in whole vec4s and the workgroup memory fits.
 * Then the GEMV takes the integer form whatever gemv_i8x's rule says. */
static bool gemv_xq_stage(wgml_graph *g, const wgml_qweight *const *ws, int nw, int64_t m, const gemv_cfg *c) {
    if (!fuse_stage(c->f) || qw_xq_mode() < 2 || qw_quant_x_row(ws[0]) % 4 || !group_x8(g, ws, nw)) return false;
    gemv_cfg s = *c;
    s.xq_stage = true;
    return gemv_wg_bytes(&s, m, ws[0]) <= gpu_get_caps(graph_ctx(g))->max_workgroup_storage;
}

/* Whether the integer form quantises x once in a qw_quant_x dispatch of its own before it, where
 * no producer did: $WGML_QW_GEMV_XQ=1 or 2 (qw_xq.h), not the default until timed in a model
 * (bench/gemv_variants.py's xq bounds the gain: docs/PERFORMANCE.md, 2026-12-07). */
static bool gemv_xq(wgml_graph *g, const wgml_qweight *const *ws, int nw, const gemv_cfg *c) {
    int mode = qw_xq_mode();
    return c->i8x && (mode == 1 || mode == 2) && gemv_xq_fits(g, ws, nw, c);
}

/* outs[i] = x · W_iᵀ (+ bias_i) for the nw (1..3) weights ws of one kind, group size and K, in
 * one dispatch of the qw_gemv kernel (M <= qw_gemv_max_m rows of x) configured by c (its fusion:
 * c->f, whose gated epilogue gives one output and whose next_norm three, fuse_outputs); each
 * output is x's shape whose last dim is replaced by the weight's N, but the sums of squares'
 * [M, workgroups]. */
wgml_status record_gemv_cfg(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int nw,
                            int64_t m, const gemv_cfg *c, wgml_tensor **outs) {
    wgml_ctx *ctx = graph_ctx(g);
    const wgml_qweight *w = ws[0];
    bool pair = fuse_pair(c->f);
    int n_rng = pair ? 1 : nw, n_out = fuse_outputs(c->f, nw);
    int64_t nblk = w->kp / 32;
    int64_t rows = gemv_wg_rows(c);
    char prelude[8192];
    wgml_tensor *ro[GRAPH_MAX_BINDINGS];
    int n_ro = 0;
    gemv_cfg cx = *c;
    wgml_tensor *given = gemv_xq_given(g, x, ws, nw, c), *own = NULL; /* x quantised by its producer, by us */
    cx.xq_stage = !given && gemv_xq_stage(g, ws, nw, m, c);
    cx.i8x = given || cx.xq_stage || gemv_i8x(g, ws, nw, c);
    if (!given && gemv_xq(g, ws, nw, &cx) && !(own = qw_quant_x(g, op, x, w, m)))
        return wgml_last_status(ctx) ? wgml_last_status(ctx) : WGML_ERR_OOM;
    cx.xq = given ? given : own;
    c = &cx;
    if (gemv_prelude(prelude, sizeof prelude, c, x, ws, nw, m, ro, &n_ro) >= sizeof prelude) {
        wgml_tensor_free(own);
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: the GEMV kernel's prelude is too long", op);
    }
    struct {
        uint32_t nrow[4], rg_end[4];
        uint32_t m, k, vpr, ng, nblk, row_groups;
        float eps;
        uint32_t ssq_n;
    } params;
    memset(&params, 0, sizeof params);
    int64_t total = 0;
    for (int i = 0; i < n_rng; i++) { /* a pair is one range of workgroups over the common N */
        total += (ws[i]->n + rows - 1) / rows;
        params.nrow[i] = (uint32_t)ws[i]->n;
        params.rg_end[i] = (uint32_t)total;
    }
    params.m = (uint32_t)m;
    params.k = (uint32_t)w->k;
    params.vpr = (uint32_t)(qw_words_per_row(w) / 4);
    params.ng = (uint32_t)(w->kp / w->group);
    params.nblk = (uint32_t)nblk;
    params.row_groups = (uint32_t)total;
    params.eps = c->f ? c->f->eps : 0.0f;
    params.ssq_n = fuse_ssq_in(c->f) ? (uint32_t)c->f->ssq->shape[c->f->ssq->rank - 1] : 0;
    /* the outputs: x's shape with N last; [1, N] when x is attention's chunks to merge */
    int64_t shape[WGML_MAX_RANK] = {1};
    int rank = fuse_merge(c->f) ? 2 : x->rank;
    if (!fuse_merge(c->f)) memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    for (int i = 0; i < n_out; i++) {
        int64_t sq[2] = {m, total}; /* next_norm's third output: the sums of squares */
        shape[rank - 1] = ws[i < nw ? i : 0]->n;
        outs[i] = i == 2 && fuse_ssq_out(c->f) ? graph_output(g, op, WGML_F32, 2, sq)
                                               : graph_output(g, op, WGML_F32, rank, shape);
    }
    wgml_status s = WGML_OK;
    for (int i = 0; i < n_out && !s; i++)
        if (!outs[i]) s = wgml_last_status(ctx) ? wgml_last_status(ctx) : WGML_ERR_OOM;
    if (!s)
        s = graph_dispatch(g, op, "qw_gemv", prelude, ro, n_ro, outs, n_out, &params, sizeof params, (uint64_t)total);
    wgml_tensor_free(own); /* eager: the recorded dispatches hold its range; built graph: no-op */
    if (s)
        for (int i = 0; i < n_out; i++) {
            wgml_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}

/* record_gemv_cfg without fusion, in the automatic configuration. */
wgml_status qw_record_gemv(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int nw,
                           int64_t m, wgml_tensor **outs) {
    gemv_cfg c;
    gemv_config(graph_ctx(g), ws, nw, m, NULL, &c); /* without a prologue it fits at 32 x 8 in 64 */
    return record_gemv_cfg(g, op, x, ws, nw, m, &c, outs);
}



/* Whether a gated pair (gate ws[0], up ws[1]) goes in one fused dispatch: one layout, the
 * binding limit, the workgroup memory of its config (*c, at m rows of x). */
bool pair_fits(wgml_ctx *ctx, const wgml_qweight *const *ws, int64_t m, const qw_gemv_fuse *f, gemv_cfg *c) {
    return qw_same_layout(ws[0], ws[1]) && gemv_storage_bindings(ws, 2, f) <= gemv_binding_limit(ctx) &&
           gemv_config(ctx, ws, 2, m, f, c);
}

/* The plan for ws; PLAN_BINDINGS when one weight alone passes the binding limit, PLAN_MEMORY when
 * a group's kernel does not fit the workgroup memory. */
plan_result gemv_plan_make(wgml_ctx *ctx, const wgml_qweight *const *ws, int n, int64_t m,
                                  const qw_gemv_fuse *f, gemv_plan *p) {
    int limit = gemv_binding_limit(ctx);
    bool done[WGML_QLINEAR_MULTI_MAX] = {false};
    p->n_grp = 0;
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        const wgml_qweight *grp[WGML_QLINEAR_MULTI_MAX];
        int *idx = p->idx[p->n_grp], ng = 0;
        grp[ng] = ws[i], idx[ng++] = i;
        for (int j = i + 1; j < n; j++) {
            if (done[j] || !qw_same_layout(ws[j], ws[i])) continue;
            grp[ng] = ws[j];
            if (gemv_storage_bindings(grp, ng + 1, f) > limit) continue;
            idx[ng++] = j;
        }
        if (gemv_storage_bindings(grp, ng, f) > limit) return PLAN_BINDINGS;
        if (!gemv_config(ctx, grp, ng, m, f, &p->c[p->n_grp])) return PLAN_MEMORY;
        for (int j = 0; j < ng; j++) done[idx[j]] = true;
        p->ng[p->n_grp++] = ng;
    }
    return PLAN_OK;
}

/* Records plan p (made by gemv_plan_make with result r) of the GEMVs of x with ws into outs, or
 * sets r's error. */
wgml_status gemv_plan_record(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws,
                                    int64_t m, const gemv_plan *p, plan_result r, wgml_tensor **outs) {
    wgml_ctx *ctx = graph_ctx(g);
    if (r == PLAN_BINDINGS)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: the device allows %u storage buffers per kernel", op,
                              gpu_get_caps(ctx)->max_storage_per_stage);
    if (r == PLAN_MEMORY)
        return wgml_set_error(ctx, WGML_ERR_LIMIT, "%s: x %s does not fit the GEMV's workgroup memory", op, tshape(x));
    wgml_status s = WGML_OK;
    for (int k = 0; k < p->n_grp && !s; k++) {
        const wgml_qweight *grp[WGML_QLINEAR_MULTI_MAX];
        wgml_tensor *o[WGML_QLINEAR_MULTI_MAX];
        for (int j = 0; j < p->ng[k]; j++) grp[j] = ws[p->idx[k][j]];
        s = record_gemv_cfg(g, op, x, grp, p->ng[k], m, &p->c[k], o);
        for (int j = 0; j < p->ng[k] && !s; j++) outs[p->idx[k][j]] = o[j];
    }
    return s;
}

/* outs[i] = the GEMV of x with ws[i], as gemv_plan_make groups them. */
static wgml_status gemv_groups(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int n,
                               int64_t m, const qw_gemv_fuse *f, wgml_tensor **outs) {
    gemv_plan p;
    plan_result r = gemv_plan_make(graph_ctx(g), ws, n, m, f, &p);
    return gemv_plan_record(g, op, x, ws, m, &p, r, outs);
}

wgml_status gemv_multi_args(wgml_graph *g, wgml_ctx *ctx, const char *op, wgml_tensor *x,
                              const wgml_qweight *const *weights, int n) {
    if (n < 1 || n > WGML_QLINEAR_MULTI_MAX)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %d weights; 1 to %d can share x", op, n, WGML_QLINEAR_MULTI_MAX);
    if (!weights) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: weights is NULL", op);
    if (check_operand(ctx, g, op, "x", x, WGML_F32, 1, WGML_MAX_RANK)) return wgml_last_status(ctx);
    int64_t k = x->shape[x->rank - 1];
    for (int i = 0; i < n; i++) {
        char arg[32];
        snprintf(arg, sizeof arg, "weights[%d]", i);
        const wgml_qweight *w = weights[i];
        if (!qw_weight_valid(ctx, op, arg, w)) return wgml_last_status(ctx);
        if (w->codes->graph != g || w->ab->graph != g || (w->bias && w->bias->graph != g))
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s [%lld, %lld] and x %s belong to different graphs", op, arg,
                                  (long long)w->n, (long long)w->k, tshape(x));
        if (w->k != k)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s [%lld, %lld] has K = %lld; x %s ends in K = %lld", op, arg,
                                  (long long)w->n, (long long)w->k, (long long)w->k, tshape(x), (long long)k);
    }
    return WGML_OK;
}

wgml_status wgml_qlinear_multi(wgml_graph *g, wgml_tensor *x, const wgml_qweight *const *weights, int n,
                               wgml_tensor **outs) {
    const char *op = "qlinear_multi";
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: graph is NULL", op);
    wgml_ctx *ctx = graph_ctx(g);
    if (!outs) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: outs is NULL", op);
    for (int i = 0; i < n && i < WGML_QLINEAR_MULTI_MAX; i++) outs[i] = NULL;
    if (gemv_multi_args(g, ctx, op, x, weights, n)) return wgml_last_status(ctx);
    int64_t k = x->shape[x->rank - 1];
    int64_t m = x->numel / k;
    wgml_status s = WGML_OK;
    if (m > qw_gemv_max_m(ctx) || graph_grad_enabled(g, &x, 1)) {
        /* the tiled GEMM (one dispatch each), or the autograd record of each product */
        for (int i = 0; i < n && !s; i++)
            if (!(outs[i] = wgml_qlinear(g, x, weights[i]))) s = wgml_last_status(ctx);
    } else {
        s = gemv_groups(g, op, x, weights, n, m, NULL, outs);
    }
    if (s)
        for (int i = 0; i < n; i++) {
            wgml_tensor_free(outs[i]);
            outs[i] = NULL;
        }
    return s;
}
