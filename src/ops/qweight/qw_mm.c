/* The tiled 4-bit GEMM (qw_mm.wgsl, qw_mm_db.wgsl; qw_mm_cpu.wgsl on CPU adapters): its
 * variants, the plan (variant and split-K) for a product, and the recording of one product,
 * forward or input gradient, fresh, accumulated, segmented or left in slices. */
#include "ops/qweight/qw_internal.h"
#include "ops/qweight/qw_xq.h"
#include "ops/matmul/matmul_into.h"
#include "gpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tile variants of the qweight GEMM: qw_mm (single-buffered: one step of A and dequantised W in
 * workgroup memory) and qw_mm_db (double-buffered; the next step's A and code words held in
 * registers during the FMAs). TM and TC are multiples of 4; BR divides 32 (a step stays in one
 * group). Names follow the matmul family's. */
typedef struct qw_variant {
    const char *name;
    const char *shader;
    uint32_t bm, bc, br, tm, tc;
} qw_variant;

/* Variant indices: the order is public ($WGML_QW_MM_VARIANT by index, the benches), so new
 * variants go at the end. */
typedef enum qw_variant_id {
    QWV_TILE64,
    QWV_TILE128X64,
    QWV_TILE128,
    QWV_DB128_K8,
    QWV_DB128_K16,
    QWV_DB128X64,
    QWV_DB128X64_K8,
    QWV_DB64,
    QWV_CPU,
    QW_N_VARIANTS
} qw_variant_id;

static const qw_variant QW_VARIANTS[QW_N_VARIANTS] = {
    [QWV_TILE64] = {.name = "tile64x64_k32_r4x4", .shader = "qw_mm", .bm = 64, .bc = 64, .br = 32, .tm = 4, .tc = 4},
    [QWV_TILE128X64] = {.name = "tile128x64_k16_r8x4", .shader = "qw_mm", .bm = 128, .bc = 64, .br = 16, .tm = 8,
                        .tc = 4},
    [QWV_TILE128] = {.name = "tile128x128_k16_r8x8", .shader = "qw_mm", .bm = 128, .bc = 128, .br = 16, .tm = 8,
                     .tc = 8},
    [QWV_DB128_K8] = {.name = "db128x128_k8_r8x8", .shader = "qw_mm_db", .bm = 128, .bc = 128, .br = 8, .tm = 8,
                      .tc = 8},
    [QWV_DB128_K16] = {.name = "db128x128_k16_r8x8", .shader = "qw_mm_db", .bm = 128, .bc = 128, .br = 16, .tm = 8,
                   .tc = 8},
    [QWV_DB128X64] = {.name = "db128x64_k16_r8x4", .shader = "qw_mm_db", .bm = 128, .bc = 64, .br = 16, .tm = 8,
                      .tc = 4},
    [QWV_DB128X64_K8] = {.name = "db128x64_k8_r8x4", .shader = "qw_mm_db", .bm = 128, .bc = 64, .br = 8, .tm = 8,
                         .tc = 4},
    [QWV_DB64] = {.name = "db64x64_k16_r4x4", .shader = "qw_mm_db", .bm = 64, .bc = 64, .br = 16, .tm = 4, .tc = 4},
    /* CPU adapters (qw_mm_cpu.wgsl): 64 threads, no workgroup memory; forward 4 rows x 8 columns
     * per thread (a 4 x 512 tile), input gradient 8 rows x one code word's columns (variant_tile) */
    [QWV_CPU] = {.name = "cpu_k32_r4x8", .shader = "qw_mm_cpu", .bm = 4, .bc = 512, .br = 32, .tm = 4, .tc = 4},
};
#define QW_MAX_SPLITS 64
#define QW_SPLIT_TARGET_WGS 1056

int qw_mm_variant_count(void) { return QW_N_VARIANTS; }
const char *qw_mm_variant_name(int v) { return v >= 0 && v < QW_N_VARIANTS ? QW_VARIANTS[v].name : "auto"; }

static int qw_variant_by_name(const char *e) {
    for (int v = 0; v < QW_N_VARIANTS; v++)
        if (!strcmp(e, QW_VARIANTS[v].name)) return v;
    return -1;
}

/* The tile of variant x in orientation trans with cpw codes per word: (BM, BC) of O and (TM, TC)
 * for the prelude. The CPU kernel's thread owns 4 rows and QW_CPU_RN columns forward, and 8
 * rows and one code word's columns (cpw) of the input gradient. On lavapipe the storage loads
 * per FMA and the registers (spills) set its speed; SmolLM2's 32-token training step, forward /
 * input-gradient GEMMs: 16 x 8 and 8 x cpw 1.41 / 0.46 s, 8 x 8 1.06 / 0.44, 4 x 8 0.44 / 0.34,
 * 4 x 4 and 4 x cpw 0.64 / 0.58 (bench/NOTES.md, 2026-12-03). */
#define QW_CPU_RN 8u
static void variant_tile(const qw_variant *x, int trans, int cpw, uint32_t t[4]) {
    bool cpu = x == &QW_VARIANTS[QWV_CPU];
    t[0] = cpu && trans ? 8u : x->bm;
    t[1] = cpu ? 64u * (trans ? (uint32_t)cpw : QW_CPU_RN) : x->bc;
    t[2] = cpu ? t[0] : x->tm;
    t[3] = x->tc;
}

static bool qw_variant_fits(wgml_ctx *ctx, int v) {
    const qw_variant *x = &QW_VARIANTS[v];
    if (v == QWV_CPU) return true; /* 64 threads, no workgroup memory */
    const gpu_caps *caps = gpu_get_caps(ctx);
    uint32_t bytes = x->br * (x->bm + x->bc) * 4u * (strcmp(x->shader, "qw_mm_db") ? 1u : 2u);
    uint32_t threads = (x->bm / x->tm) * (x->bc / x->tc);
    return !caps || (bytes <= caps->max_workgroup_storage && threads <= caps->max_invocations);
}

/* The variant: $WGML_QW_MM_VARIANT (a name or index) first; else a matmul variant forced on
 * the context (wgml_matmul_force_variant): the qweight variant of the same name, else the 128 x 128
 * tile for matmul's tile128x128_k8_r8x8 (which has no qweight form) and 64 x 64 for the others;
 * else automatic (below). A forced variant that does not fit the device falls back to the
 * automatic choice. */
static int qw_choose_splits(bool cpu, int64_t tiles, int64_t m, int64_t r, int64_t c);

static int qw_choose_variant(wgml_ctx *ctx, bool cpu, int64_t m, int64_t r, int64_t c, bool segmented) {
    int forced = -1;
    const char *e = getenv("WGML_QW_MM_VARIANT");
    if (e && *e && strcmp(e, "auto")) {
        forced = qw_variant_by_name(e);
        char *end;
        long v = strtol(e, &end, 10);
        if (forced < 0 && *end == 0 && v >= 0 && v < QW_N_VARIANTS) forced = (int)v;
    }
    int mv = graph_ctx_matmul_variant(ctx);
    if (forced < 0 && mv >= 0 && mv < wgml_matmul_variant_count()) {
        forced = qw_variant_by_name(wgml_matmul_variant_name(mv));
        if (forced < 0) forced = strcmp(wgml_matmul_variant_name(mv), "tile128x128_k8_r8x8") ? QWV_TILE64 : QWV_TILE128;
    }
    if (forced >= 0 && qw_variant_fits(ctx, forced)) return forced;
    /* automatic: on a CPU adapter the CPU kernel (no barriers: 6-15x the tiled kernels' speed on
     * lavapipe, bench/NOTES.md); on a GPU the single-buffered 128 x 64 tile where it gives at least 256 tiles (the best,
     * or within 3% of it, on every training shape measured on an H200, 4-bit and 8-bit codes:
     * bench/NOTES.md), else 64 x 64 (more tiles to fill the GPU; split-K covers long
     * reductions); but where even 64 x 64 gives fewer tiles than 128 x 64 would need and split-K
     * fills the GPU anyway (under 132 tiles of 128 x 64 and a reduction split-K takes), the larger
     * tile (SmolLM2's k/v forward, 4096 x 576 -> 192: 96 tiles in 4 slices 48.1 + 8.4 us against
     * 192 tiles of 64 x 64 unsplit 68.7, H100, bench/NOTES.md 2026-12-06). A segmented output
     * (qw_linear_concat) always 64 x 64: with the segments' index in its store the 128 x 64 tile
     * ran 7-14x slower on the H200. */
    if (cpu) return QWV_CPU;
    int64_t tiles_128x64 = ((m + 127) / 128) * ((c + 63) / 64);
    if (segmented) return QWV_TILE64;
    if (tiles_128x64 >= 256 || (tiles_128x64 < 132 && qw_choose_splits(false, tiles_128x64, m, r, c) > 1))
        return QWV_TILE128X64;
    return QWV_TILE64;
}

/* Split-K: $WGML_QW_MM_SPLITK forces a count (1: never split); else split when the tiles fill
 * fewer than four waves of a 132-SM GPU (< 528) and R >= 1024, or fewer than one (< 132) and
 * R >= 512, into enough slices for about eight waves (1056 workgroups), each slice at least 256
 * deep (128 under R = 1024), at most 16, and only for products of at least 2^24 multiply-adds
 * (H200 sweep: 288 tiles with R = 1536 or 8192 gain 15-35% at S = 4; R = 576 with 288 tiles
 * loses; 96 tiles with R = 576 gain 25%). The partial buffer [S, M, C] stays within 32-bit
 * indexing. */
static int qw_choose_splits(bool cpu, int64_t tiles, int64_t m, int64_t r, int64_t c) {
    int s = 1;
    const char *e = getenv("WGML_QW_MM_SPLITK");
    long f = e && *e ? strtol(e, NULL, 10) : 0;
    if (f >= 1) s = f > QW_MAX_SPLITS ? QW_MAX_SPLITS : (int)f;
    else if (cpu) {
        /* a CPU has a few cores: split only a long reduction over fewer than 32 tiles (the LM
         * head's input gradient: R = the vocabulary, C = the width), into about 32 workgroups
         * of at least 256 steps, at most 16 slices */
        if (tiles < 32 && r >= 1024) {
            int64_t x = (32 + tiles - 1) / tiles;
            if (x > r / 256) x = r / 256;
            s = x > 16 ? 16 : (int)x;
        }
    } else if (m * r * c >= (1ll << 24) && ((tiles < 528 && r >= 1024) || (tiles < 132 && r >= 512))) {
        int64_t x = (QW_SPLIT_TARGET_WGS + tiles - 1) / tiles, by_depth = r >= 1024 ? r / 256 : r / 128;
        if (x > by_depth) x = by_depth;
        if (x > 16) x = 16;
        s = x < 2 ? 1 : (int)x;
    }
    while (s > 1 && (int64_t)s * m * c > 0x7FFFFFFFll) s /= 2;
    return s;
}

void qw_mm_plan_for(wgml_ctx *ctx, bool cpu, int64_t m, int64_t r, int64_t c, bool segmented, int *variant,
                    int *splits) {
    int vi = qw_choose_variant(ctx, cpu, m, r, c, segmented);
    const qw_variant *v = &QW_VARIANTS[vi];
    int64_t tiles = ((m + v->bm - 1) / v->bm) * ((c + v->bc - 1) / v->bc);
    int s = qw_choose_splits(cpu, tiles, m, r, c);
    /* each slice a whole number of BR steps and not empty */
    int64_t steps = (r + v->br - 1) / v->br;
    if (s > steps) s = (int)steps;
    *variant = vi;
    *splits = s < 1 ? 1 : s;
}

void qw_mm_plan(wgml_ctx *ctx, int64_t m, int64_t r, int64_t c, bool segmented, int *variant, int *splits) {
    qw_mm_plan_for(ctx, gpu_get_caps(ctx)->is_cpu, m, r, c, segmented, variant, splits);
}

/* The epilogue's flags as prelude constants (qw_mm_head.wgsl's store_tile): the bias (added by
 * slice 0) and ACC (O += the product when unsplit). Constants, not the Params' flag bits, so that
 * each combination compiles its own store: read at run time they cost the 128 x 64 tile up to 4% and
 * the 128 x 128 tiles 15x (H100, bench/NOTES.md 2026-12-06). The CPU kernel (qw_mm_cpu.wgsl)
 * reads the bits, so that one pipeline serves every combination where compiling is what costs;
 * it is given the false form (store_tile, unused there, names the constants). */
static const char *qw_flag_consts(bool bias, bool acc) {
    static const char *const forms[4] = {
        "const QW_BIAS: bool = false; const QW_ACC: bool = false;\n",
        "const QW_BIAS: bool = true; const QW_ACC: bool = false;\n",
        "const QW_BIAS: bool = false; const QW_ACC: bool = true;\n",
        "const QW_BIAS: bool = true; const QW_ACC: bool = true;\n",
    };
    return forms[(bias ? 1 : 0) | (acc ? 2 : 0)];
}

/* The uniform of qw_mm_head.wgsl. */
typedef struct qw_mm_params {
    uint32_t m, r, c, wpr, ng, tiles_c, tiles_m, kp, r_chunk, splits, flags, seg1, seg2, lr, lscale, pad;
} qw_mm_params;

/* One tiled product's dispatch (kernel shader with prelude, A bound as a) and its split-K
 * reduction: p's tile counts and slices set, the output by d (or a new tensor of shape).
 * Split-K goes into a partial buffer [S, M, C] summed in order by the matmul family's reduction
 * (which adds out with acc; elementwise, so a segmented output is summed alike). */
static wgml_tensor *mm_dispatch(wgml_graph *g, const char *op, const char *shader, const char *prelude,
                                wgml_tensor *a, const wgml_qweight *w, qw_mm_params *p, int rank, const int64_t *shape,
                                const qw_mm_dest *d, const qw_lora_term *lora) {
    int splits = (int)p->splits;
    int64_t m = p->m, c = p->c;
    wgml_tensor *into = d ? d->into : NULL;
    bool acc = d && d->acc, keep_parts = d && d->parts && splits > 1;
    if (d && d->parts) *d->parts = splits;
    wgml_tensor *out = keep_parts ? NULL : into ? into : graph_output(g, op, WGML_F32, rank, shape);
    if (!out && !keep_parts) return NULL;
    wgml_tensor *part = NULL;
    if (splits > 1) {
        int64_t pn = (int64_t)splits * m * c, ps[WGML_MAX_RANK + 1] = {splits};
        for (int i = 0; i < rank && keep_parts; i++) ps[i + 1] = shape[i];
        if (!(part = keep_parts ? graph_output(g, op, WGML_F32, rank + 1, ps) : graph_output(g, op, WGML_F32, 1, &pn))) {
            if (!into) wgml_tensor_free(out);
            return NULL;
        }
    }
    wgml_tensor *ro[6] = {a, w->codes, w->ab, p->flags & 1u ? w->bias : GRAPH_UNUSED, lora ? lora->l : NULL,
                          lora ? lora->r : NULL};
    wgml_status s = graph_dispatch(g, op, shader, prelude, ro, lora ? 6 : 4, part ? &part : &out, 1, p, sizeof *p,
                                   (uint64_t)p->tiles_m * p->tiles_c * (uint64_t)splits);
    if (keep_parts) {
        if (!s) return part;
        wgml_tensor_free(part);
        return NULL;
    }
    /* the bias is in slice 0's partial; the reduction adds out itself with acc */
    if (!s && part) s = matmul_splitk_record(g, op, part, splits, m * c, m * c, c, NULL, 0, 0, 0, 1.0f, 1.0f, acc, out);
    wgml_tensor_free(part); /* eager: the recorded dispatches hold its range; built graph: no-op */
    if (s) {
        if (!into) wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

/* The integer-dot forward applies (qw_internal.h): w's codes fit an int8 (4-bit codes, GGUF
 * 8-bit signed codes, unsigned codes of up to 7 bits; not f32) and a 32-k block (16 when
 * G = 16) lies in one group. */
bool qw_x8_applies(wgml_graph *g, const wgml_qweight *w, int trans) {
    if (trans || !graph_x8(g) || w->kind == WGML_QF32 || (w->kind == WGML_Q8_MIN && w->bits > 7)) return false;
    const char *e = getenv("WGML_QW_INT8");
    if (e && !strcmp(e, "0")) return false;
    const gpu_caps *caps = gpu_get_caps(graph_ctx(g));
    return caps && caps->dot4i8 && (w->group % 32 == 0 || w->group == 16);
}

uint32_t qw_x8_block(const wgml_qweight *w) { return w->group == 16 ? 16u : 32u; }

int64_t qw_quant_x_row(const wgml_qweight *w) {
    qw_xq_fmt f = qw_xq_format(w);
    return qw_xq_row(&f);
}

wgml_tensor *qw_quant_x(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w, int64_t m) {
    qw_xq_fmt f = qw_xq_format(w);
    int64_t nb = w->kp / f.qb, rs = qw_xq_row(&f), n = m * rs;
    wgml_tensor *xq = graph_output(g, op, WGML_I32, 1, &n);
    if (!xq) return NULL;
    struct {
        uint32_t m, k, kp, nb, rs, pad[3];
    } p = {.m = (uint32_t)m, .k = (uint32_t)w->k, .kp = (uint32_t)w->kp, .nb = (uint32_t)nb, .rs = (uint32_t)rs};
    char pre[80];
    snprintf(pre, sizeof pre, "const QB: u32 = %uu; const PAIR: bool = %s;\n", f.qb, f.pair ? "true" : "false");
    if (graph_dispatch(g, op, "qw_quant_x", pre, &a, 1, &xq, 1, &p, sizeof p, (uint64_t)((m * nb + 63) / 64))) {
        wgml_tensor_free(xq);
        return NULL;
    }
    return xq;
}

/* The forward through the integer dot product: x quantised, then the 64 x 64 tile (4 x 4 per
 * thread; on the H200 it beat 128 x 64 and 128 x 128 on every prefill shape of SmolLM2, 1B and
 * 8B: 1.39-1.72x the f32 GEMM at 1B/8B where 128 x 64 gave 1.05-1.28x, bench/NOTES.md
 * 2026-12-04); split-K by the f32 GEMM's rule, in whole 32-k steps. */
static wgml_tensor *qw_record_mm_i8(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w, int64_t m,
                                    int rank, const int64_t *shape, const qw_mm_dest *d) {
    uint32_t qb = qw_x8_block(w);
    /* x quantised by its producer (qw_xq.h: the add + RMSNorm before it), else here */
    wgml_tensor *given = qw_xq_given(g, a, w), *xq = given ? given : qw_quant_x(g, op, a, w, m);
    if (!xq) return NULL;
    const int64_t *seg = d ? d->seg : NULL;
    int64_t r = w->k, c = w->n;
    uint32_t bm = 64, bc = 64, tm = 4, tc = 4;
    /* $WGML_QW_I8_TILE=64x64|128x64|128x128 forces a tile (measurements) */
    const char *e = getenv("WGML_QW_I8_TILE");
    if (e && (!strcmp(e, "64x64") || !strcmp(e, "128x64") || !strcmp(e, "128x128"))) {
        bm = e[0] == '6' ? 64 : 128;
        bc = strcmp(e, "128x128") ? 64 : 128;
        tm = bm / 16;
        tc = bc / 16;
    }
    /* $WGML_QW_I8_STAGE=1|2|4: blocks staged per pair of barriers (measurements; default 1) */
    const char *se = getenv("WGML_QW_I8_STAGE");
    uint32_t sb = se && (!strcmp(se, "2") || !strcmp(se, "4")) ? (uint32_t)(se[0] - '0') : 1u;
    /* The next stage's global reads issued before this stage's dot products: 1.03-1.06x the
     * GEMMs of 1B and 8B at M = 512 on the H100, prefill +3-4% (bench/NOTES.md, 2026-12-07,
     * twenty-first session). $WGML_QW_I8_PREFETCH=0 gives the old load-then-compute order
     * (measurements, tests). */
    const char *pe = getenv("WGML_QW_I8_PREFETCH");
    bool pf = !(pe && !strcmp(pe, "0"));
    int64_t tiles_m = (m + bm - 1) / bm, tiles_c = (c + bc - 1) / bc, steps = (r + 31) / 32;
    int splits = qw_choose_splits(false, tiles_m * tiles_c, m, r, c);
    if (splits > steps) splits = (int)steps;
    int64_t r_chunk = splits == 1 ? r : ((r + splits - 1) / splits + 31) / 32 * 32;
    char prelude[2048];
    int len = snprintf(prelude, sizeof prelude,
                       "const TRANS: bool = false; const VA: u32 = 1u; const SEG: bool = %s; const QB: u32 = %uu;\n"
                       "const BM: u32 = %uu; const BC: u32 = %uu; const BR: u32 = 32u; const TM: u32 = %uu; "
                       "const TC: u32 = %uu; const SB: u32 = %uu; const PF: bool = %s;\nalias AV = u32;\n%s",
                       seg ? "true" : "false", qb, bm, bc, tm, tc, sb, pf ? "true" : "false",
                       qw_flag_consts(w->bias != NULL, d && d->acc));
    qw_kind_prelude(prelude + len, sizeof prelude - (size_t)len, w);
    qw_mm_params p = {.m = (uint32_t)m, .r = (uint32_t)r, .c = (uint32_t)c, .wpr = (uint32_t)qw_words_per_row(w),
                      .ng = (uint32_t)(w->kp / w->group), .tiles_c = (uint32_t)tiles_c, .tiles_m = (uint32_t)tiles_m,
                      .kp = (uint32_t)w->kp, .r_chunk = (uint32_t)r_chunk, .splits = (uint32_t)splits,
                      .flags = (w->bias ? 1u : 0u) | (d && d->acc ? 2u : 0u), .seg1 = (uint32_t)(seg ? seg[0] : c),
                      .seg2 = (uint32_t)(seg ? seg[1] : c)};
    wgml_tensor *out = mm_dispatch(g, op, "qw_mm_i8", prelude, xq, w, &p, rank, shape, d, NULL);
    if (!given) wgml_tensor_free(xq); /* eager: the recorded dispatches hold its range; built graph: no-op */
    return out;
}

wgml_status qw_lora_add(wgml_graph *g, const char *op, const qw_lora_term *lt, int trans, int64_t m, int64_t c,
                        wgml_tensor *out) {
    return matmul_scaled(g, op, lt->l, lt->r, 0, !trans, m, c, lt->rank, lt->scale, out, true)
               ? WGML_OK
               : wgml_last_status(graph_ctx(g));
}

/* The product without its LoRA term, then the term as one more product accumulated into it
 * (where the kernel cannot fold it). */
static wgml_tensor *record_mm_then_lora(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w,
                                        int trans, int64_t m, int rank, const int64_t *shape, const qw_mm_dest *d) {
    qw_mm_dest plain = *d;
    plain.lora = NULL;
    wgml_tensor *out = qw_record_mm(g, op, a, w, trans, m, rank, shape, &plain);
    if (out && qw_lora_add(g, op, d->lora, trans, m, trans ? w->k : w->n, out)) {
        if (!d->into) wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

/* out[M, C] through the tiled kernel: forward (trans = 0: C = N, reduction over K) or input
 * gradient (trans = 1: C = K, reduction over N), through the integer dot product where it
 * applies (qw_x8_applies). */
wgml_tensor *qw_record_mm(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w, int trans,
                          int64_t m, int rank, const int64_t *shape, const qw_mm_dest *d) {
    const qw_lora_term *lora = d ? d->lora : NULL;
    if (lora && (d->seg || d->parts)) {
        wgml_set_error(graph_ctx(g), WGML_ERR_UNSUPPORTED, "%s: a LoRA term with a segmented or sliced output", op);
        return NULL;
    }
    bool x8 = qw_x8_applies(g, w, trans);
    if (lora && x8) return record_mm_then_lora(g, op, a, w, trans, m, rank, shape, d);
    if (x8) return qw_record_mm_i8(g, op, a, w, m, rank, shape, d);
    int64_t r = trans ? w->n : w->k, c = trans ? w->k : w->n;
    bool bias = !trans && w->bias;
    const int64_t *seg = d ? d->seg : NULL;
    int va = r % 4 == 0 ? 4 : 1;
    int vi, splits;
    qw_mm_plan(graph_ctx(g), m, r, c, seg != NULL, &vi, &splits);
    const qw_variant *v = &QW_VARIANTS[vi];
    bool tiles = !strcmp(v->shader, "qw_mm"); /* the kernel with the LORA steps */
    if (lora && !tiles) return record_mm_then_lora(g, op, a, w, trans, m, rank, shape, d);
    uint32_t tile[4]; /* BM BC TM TC */
    variant_tile(v, trans, qw_kind_cpw(w->kind), tile);
    int64_t r_chunk = (r + splits - 1) / splits;
    r_chunk = splits == 1 ? r : (r_chunk + v->br - 1) / v->br * v->br;
    char prelude[2048];
    int len = snprintf(prelude, sizeof prelude,
                       "const TRANS: bool = %s; const VA: u32 = %du; const SEG: bool = %s;\n"
                       "const BM: u32 = %uu; const BC: u32 = %uu; const BR: u32 = %uu; const TM: u32 = %uu; "
                       "const TC: u32 = %uu;\n"
                       "const RN: u32 = %uu;\nalias AV = %s;\nfn a_at(v: AV, c: u32) -> f32 { return %s; }\n%s",
                       trans ? "true" : "false", va, seg ? "true" : "false", tile[0], tile[1], v->br, tile[2], tile[3], QW_CPU_RN,
                       va == 4 ? "vec4<f32>" : "f32", va == 4 ? "v[c]" : "v",
                       vi == QWV_CPU ? qw_flag_consts(false, false) : qw_flag_consts(bias, d && d->acc));
    if (tiles)
        len += snprintf(prelude + len, sizeof prelude - (size_t)len, "%s",
                        lora ? "const LORA: bool = true;\n//!include qw_mm_lora\n"
                             : "const LORA: bool = false;\nfn lora_a(m: u32, j: u32) -> f32 { return 0.0; }\n"
                               "fn lora_w(j: u32, c: u32) -> f32 { return 0.0; }\n");
    qw_kind_prelude(prelude + len, sizeof prelude - (size_t)len, w);
    float ls = lora ? lora->scale : 0.0f;
    uint32_t lbits;
    memcpy(&lbits, &ls, sizeof lbits);
    qw_mm_params p = {.m = (uint32_t)m, .r = (uint32_t)r, .c = (uint32_t)c, .wpr = (uint32_t)qw_words_per_row(w),
                      .ng = (uint32_t)(w->kp / w->group), .tiles_c = (uint32_t)((c + tile[1] - 1) / tile[1]),
                      .tiles_m = (uint32_t)((m + tile[0] - 1) / tile[0]), .kp = (uint32_t)w->kp,
                      .r_chunk = (uint32_t)r_chunk, .splits = (uint32_t)splits,
                      .flags = (bias ? 1u : 0u) | (d && d->acc ? 2u : 0u), .seg1 = (uint32_t)(seg ? seg[0] : c),
                      .seg2 = (uint32_t)(seg ? seg[1] : c), .lr = (uint32_t)(lora ? lora->rank : 0), .lscale = lbits};
    return mm_dispatch(g, op, v->shader, prelude, a, w, &p, rank, shape, d, lora);
}

wgml_status qw_mm_into(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w, int trans, int64_t m,
                       wgml_tensor *into, bool accumulate) {
    qw_mm_dest d = {.into = into, .acc = accumulate};
    return qw_record_mm(g, op, a, w, trans, m, into->rank, into->shape, &d) ? WGML_OK : wgml_last_status(graph_ctx(g));
}
