/* fp32 matrix products: mm, bmm, linear, addmm and the transposed-operand forms, all through
 * one tiled kernel (matmul.wgsl) whose tile shape is chosen from the problem's shape. */
#include "graph/graph.h"
#include "ops/matmul/matmul_grad.h"
#include "ops/matmul/matmul_into.h"
#include "ops/matmul/matmul_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_TILE, K_SKINNY, K_OUTER };

typedef struct matmul_variant {
    const char *name;
    const char *shader; /* "matmul" (single-buffered), "matmul_db" (double-buffered),
                           "matmul_skinny" or "matmul_outer" */
    int kind;           /* K_TILE (the two tiled kernels), K_SKINNY, K_OUTER */
    /* K_TILE: the tile BM x BN, k-step BK, registers TM x TN per thread.
     * K_SKINNY: tm = R rows per slot, tn = KT k-threads per slot (256 / KT slots).
     * K_OUTER: tm = TM rows per thread (a block of 8·TM x 128). */
    uint32_t bm, bn, bk, tm, tn;
} matmul_variant;

/* Variant indices: the order is public (wgml_matmul_variant_name, $WGML_MATMUL_VARIANT by index,
 * the benches' --variant), so new variants go at the end. */
typedef enum matmul_variant_id {
    V_TILE128_K8,
    V_TILE64,
    V_TILE32,
    V_TILE128,
    V_TILE128X64,
    V_DB128_K8,
    V_DB128_K16,
    V_DB128X64,
    V_DB64,
    V_SKINNY_R4_KT16,
    V_SKINNY_R2,
    V_SKINNY_R1,
    V_SKINNY_R4_KT4,
    V_OUTER_R4,
    V_OUTER_R8,
    N_VARIANTS
} matmul_variant_id;

/* TM and TN are multiples of 4 (the kernels read workgroup memory as vec4). The db variants keep
 * two k-tiles per operand in workgroup memory (2·BK·(BM+BN)·4 bytes: 32 KiB for 128x128 at BK
 * 16). The skinny variants (matmul_skinny.wgsl) own a short side of at most 32 whole (longer
 * short sides in blocks of 32) and split K over threads and, for long K, over workgroups; the
 * outer variants (matmul_outer.wgsl) are for short K. */
static const matmul_variant VARIANTS[N_VARIANTS] = {
    [V_TILE128_K8] = {.name = "tile128x128_k8_r8x8", .shader = "matmul", .kind = K_TILE, .bm = 128, .bn = 128, .bk = 8,
                      .tm = 8, .tn = 8},
    [V_TILE64] = {.name = "tile64x64_k16_r4x4", .shader = "matmul", .kind = K_TILE, .bm = 64, .bn = 64, .bk = 16,
                  .tm = 4, .tn = 4},
    [V_TILE32] = {.name = "tile32x32_k16_r4x4", .shader = "matmul", .kind = K_TILE, .bm = 32, .bn = 32, .bk = 16,
                  .tm = 4, .tn = 4},
    [V_TILE128] = {.name = "tile128x128_k16_r8x8", .shader = "matmul", .kind = K_TILE, .bm = 128, .bn = 128, .bk = 16,
                   .tm = 8, .tn = 8},
    [V_TILE128X64] = {.name = "tile128x64_k16_r8x4", .shader = "matmul", .kind = K_TILE, .bm = 128, .bn = 64, .bk = 16,
                      .tm = 8, .tn = 4},
    [V_DB128_K8] = {.name = "db128x128_k8_r8x8", .shader = "matmul_db", .kind = K_TILE, .bm = 128, .bn = 128, .bk = 8,
                    .tm = 8, .tn = 8},
    [V_DB128_K16] = {.name = "db128x128_k16_r8x8", .shader = "matmul_db", .kind = K_TILE, .bm = 128, .bn = 128, .bk = 16,
                 .tm = 8, .tn = 8},
    [V_DB128X64] = {.name = "db128x64_k16_r8x4", .shader = "matmul_db", .kind = K_TILE, .bm = 128, .bn = 64, .bk = 16,
                    .tm = 8, .tn = 4},
    [V_DB64] = {.name = "db64x64_k16_r4x4", .shader = "matmul_db", .kind = K_TILE, .bm = 64, .bn = 64, .bk = 16,
                .tm = 4, .tn = 4},
    [V_SKINNY_R4_KT16] = {.name = "skinny_r4_kt16", .shader = "matmul_skinny", .kind = K_SKINNY, .bk = 4, .tm = 4,
                          .tn = 16},
    [V_SKINNY_R2] = {.name = "skinny_r2_kt16", .shader = "matmul_skinny", .kind = K_SKINNY, .bk = 4, .tm = 2, .tn = 16},
    [V_SKINNY_R1] = {.name = "skinny_r1_kt32", .shader = "matmul_skinny", .kind = K_SKINNY, .bk = 4, .tm = 1, .tn = 32},
    [V_SKINNY_R4_KT4] = {.name = "skinny_r4_kt4", .shader = "matmul_skinny", .kind = K_SKINNY, .bk = 4, .tm = 4,
                         .tn = 4},
    [V_OUTER_R4] = {.name = "outer_r4", .shader = "matmul_outer", .kind = K_OUTER, .bm = 32, .bn = 128, .bk = 16,
                    .tm = 4, .tn = 4},
    [V_OUTER_R8] = {.name = "outer_r8", .shader = "matmul_outer", .kind = K_OUTER, .bm = 64, .bn = 128, .bk = 16,
                    .tm = 8, .tn = 4},
};
#define MAX_SPLITS 64

int wgml_matmul_variant_count(void) { return N_VARIANTS; }
const char *wgml_matmul_variant_name(int v) { return v >= 0 && v < N_VARIANTS ? VARIANTS[v].name : "auto"; }

/* $WGML_MATMUL_VARIANT: a variant name or index (used when wgml_matmul_force_variant has not
 * forced one); -1 when unset or unknown. */
static int env_variant(void) {
    const char *e = getenv("WGML_MATMUL_VARIANT");
    if (!e || !*e || !strcmp(e, "auto")) return -1;
    for (int v = 0; v < N_VARIANTS; v++)
        if (!strcmp(e, VARIANTS[v].name)) return v;
    char *end;
    long v = strtol(e, &end, 10);
    return *end == 0 && v >= 0 && v < N_VARIANTS ? (int)v : -1;
}

/* $WGML_MATMUL_SPLITK: a forced number of K slices (1: never split); 0 when unset (auto). */
static int env_splits(void) {
    const char *e = getenv("WGML_MATMUL_SPLITK");
    if (!e || !*e) return 0;
    long s = strtol(e, NULL, 10);
    return s < 1 ? 0 : s > MAX_SPLITS ? MAX_SPLITS : (int)s;
}

/* Whether variant v fits the device: workgroup memory (two k-tiles per operand in the db
 * kernels) and threads per workgroup. */
static bool variant_fits(wgml_ctx *ctx, int v) {
    const matmul_variant *x = &VARIANTS[v];
    const gpu_caps *caps = gpu_get_caps(ctx);
    if (x->kind == K_SKINNY) /* JR (<= 8) outputs x 256 threads of partial sums */
        return !caps || (8u * 256u * 4u <= caps->max_workgroup_storage && 256u <= caps->max_invocations);
    if (x->kind == K_OUTER) /* 16 k x (BM + 128) */
        return !caps || (16u * (x->bm + 128u) * 4u <= caps->max_workgroup_storage && 256u <= caps->max_invocations);
    uint32_t bytes = x->bk * (x->bm + x->bn) * 4u * (strcmp(x->shader, "matmul_db") ? 1u : 2u);
    uint32_t threads = (x->bm / x->tm) * (x->bn / x->tn);
    return !caps || (bytes <= caps->max_workgroup_storage && threads <= caps->max_invocations);
}

/* The automatic choice (measured on an H200; the sweeps that set it are in bench/NOTES.md). A
 * forced variant (wgml_matmul_force_variant, else $WGML_MATMUL_VARIANT) wins when it fits the
 * device. Otherwise, in order:
 * - products of at least SKINNY_MIN_MACS multiply-adds with a short K (<= 32) and an output
 *   wider than 32 take the outer-product kernel (outer_r8), and those with an output side
 *   <= 32 and a long K (>= 2048: weight gradients), or a side <= 16 and K >= 128 whose short
 *   operand is read a k at a time (ty false: LoRA's dy·B at rank 16), the skinny kernel
 *   (skinny_r2_kt16): the tiled kernels leave most of such a tile idle. In SmolLM2's training
 *   step on an H100 (each product timed alone) dy·B took 28.6 us this way against 32.0 + 6.7
 *   on the 32 x 32 tile split; x·Aᵀ (ty) took 59.4 unsplit and 34.2 + 6.1 in 5 slices against
 *   23.1 + 6.4 tiled, so it stays tiled (bench/NOTES.md, thirteenth session). Smaller products
 *   are over in microseconds either way, and the small models of the parity tests keep the
 *   tiled kernels' summation.
 * - the double-buffered 128 x 128 tile where it gives at least 256 tiles and K >= 256: the
 *   most work per byte once the GPU is full;
 * - 128 x 64 where that gives 256 tiles, or K is long (>= 1024, split-K then fills the GPU);
 * - 32 x 32 for an output side <= 32 (LoRA's rank), with split-K for a moderate K;
 * - else 64 x 64, or 32 x 32 when even 64 x 64 gives too few tiles. */
#define SKINNY_MIN_MACS (1ll << 22)
static int choose_variant(wgml_ctx *ctx, int64_t batch, int64_t m, int64_t n, int64_t k, bool ty) {
    int forced = graph_ctx_matmul_variant(ctx);
    if (forced < 0 || forced >= N_VARIANTS) forced = env_variant();
    if (forced >= 0 && variant_fits(ctx, forced)) return forced; /* else the automatic choice */
    int64_t small = m < n ? m : n;
    if (batch * m * n * k >= SKINNY_MIN_MACS) {
        if (k <= 32 && n > 32 && variant_fits(ctx, V_OUTER_R8)) return V_OUTER_R8;
        if ((small <= 32 && k >= 2048) || (small <= 16 && k >= 128 && !ty))
            if (variant_fits(ctx, V_SKINNY_R2)) return V_SKINNY_R2;
    }
    int64_t tiles_128 = batch * ((m + 127) / 128) * ((n + 127) / 128);
    int64_t tiles_128x64 = batch * ((m + 127) / 128) * ((n + 63) / 64);
    int64_t tiles_64x64 = batch * ((m + 63) / 64) * ((n + 63) / 64);
    if (tiles_128 >= 256 && k >= 256 && variant_fits(ctx, V_DB128_K8)) return V_DB128_K8;
    if (tiles_128x64 >= 256 || (k >= 1024 && tiles_128x64 >= 32)) return V_TILE128X64;
    if (m <= 32 || n <= 32) return V_TILE32;
    if (tiles_64x64 >= 32 || (m >= 64 && n >= 64)) return V_TILE64;
    return V_TILE32;
}

/* Split-K: how many K slices, each a separate set of workgroups writing a partial product,
 * summed by a second dispatch. Auto: when the tiles fill fewer than four waves of a 132-SM GPU
 * and K is long (>= 1024; skinny products, a side <= 32, from K >= 128): enough slices for
 * about eight waves (1056 workgroups), each slice at least 256 deep (64 for skinny ones), at
 * most 16, and only for products of at least 2^24 multiply-adds. K = 576 products ran slower
 * split at every factor. $WGML_MATMUL_SPLITK forces a count (1: off). */
#define SPLIT_TARGET_WGS 1056
static int choose_splits(int64_t tiles, int64_t k, bool skinny, int64_t macs) {
    int forced = env_splits();
    if (forced > 0) return forced;
    /* below 2^24 multiply-adds a product is over in a few microseconds on a large GPU and the
     * reduction dispatch would cost as much as it saves (and the summation order would differ
     * from the plain one for nothing) */
    if (macs < (1ll << 24)) return 1;
    if (tiles >= SPLIT_TARGET_WGS / 2 || k < (skinny ? 128 : 1024)) return 1;
    int64_t s = (SPLIT_TARGET_WGS + tiles - 1) / tiles;
    int64_t by_depth = k / (skinny ? 64 : 256);
    if (s > by_depth) s = by_depth;
    if (s > 16) s = 16;
    return s < 2 ? 1 : (int)s;
}

/* The skinny kernel's K slices: none when its blocks already give two workgroups per SM of a
 * 132-SM GPU (264); else enough for about four per SM (528), each slice at least one 4-deep
 * step per k-thread (K / (4·KT)) where the long operand is stored [K, P] (the weight
 * gradients) and SKINNY_MIN_STEPS where it is stored [P, K] (dy·B: 150 fewer dispatches in
 * SmolLM2's training step, which took 147.0 ms against 147.1 with one step a slice on an
 * H100), at most MAX_SPLITS; none under 2^22 multiply-adds. The outer kernel is never split
 * automatically (its K is short). $WGML_MATMUL_SPLITK forces. */
#define SKINNY_MIN_WGS 264
#define SKINNY_TARGET_WGS 528
#define SKINNY_MIN_STEPS 6
static int choose_splits_skinny(int64_t blocks, int64_t k, uint32_t kt, int64_t macs, bool tx) {
    int forced = env_splits();
    if (forced > 0) return forced;
    if (macs < SKINNY_MIN_MACS || blocks >= SKINNY_MIN_WGS) return 1;
    int64_t s = (SKINNY_TARGET_WGS + blocks - 1) / blocks;
    int64_t by_depth = k / (4 * (int64_t)kt * (tx ? 1 : SKINNY_MIN_STEPS));
    if (s > by_depth) s = by_depth;
    if (s > MAX_SPLITS) s = MAX_SPLITS;
    return s < 2 ? 1 : (int)s;
}

/* The skinny kernel's view of a product out[m, n] with A and B stored as trans_a, trans_b say:
 * X the long side's operand, Y the short side's (swap when the short side is M, as
 * skinny_shape); tx: X stored [K, P]; ty: Y stored [Q, K]. The plan reads it (the choice and
 * the split depend on tx and ty) and so does the kernel's set-up. */
typedef struct skinny_orient {
    bool swap, tx, ty;
} skinny_orient;

static skinny_orient skinny_orientation(int64_t m, int64_t n, int trans_a, int trans_b) {
    bool swap = n > m;
    return (skinny_orient){.swap = swap, .tx = swap ? !trans_b : trans_a, .ty = swap ? !trans_a : trans_b};
}

/* The skinny kernel's geometry: P the long output side, Q <= QP the short one (SWAP when the
 * short side is M), blocks of ROWS = (256 / KT)·R rows of P by QP columns of Q. */
typedef struct skinny_geom {
    bool swap;
    int64_t p, q, qp, tiles_p, tiles_q;
} skinny_geom;

static skinny_geom skinny_shape(const matmul_variant *v, int64_t m, int64_t n) {
    skinny_geom g;
    g.swap = n > m;
    g.p = g.swap ? n : m;
    g.q = g.swap ? m : n;
    g.qp = (g.q + 3) / 4 * 4;
    if (g.qp > 32) g.qp = 32;
    int64_t rows = (int64_t)(256 / v->tn) * v->tm;
    g.tiles_p = (g.p + rows - 1) / rows;
    g.tiles_q = (g.q + g.qp - 1) / g.qp;
    return g;
}

/* Workgroups of one K slice. */
static int64_t variant_tiles(const matmul_variant *v, int64_t batch, int64_t m, int64_t n) {
    if (v->kind == K_SKINNY) {
        skinny_geom sg = skinny_shape(v, m, n);
        return batch * sg.tiles_p * sg.tiles_q;
    }
    return batch * ((m + v->bm - 1) / v->bm) * ((n + v->bn - 1) / v->bn);
}

void matmul_plan(wgml_ctx *ctx, int64_t batch, int64_t m, int64_t n, int64_t k, int trans_a, int trans_b,
                 int *variant, int *splits) {
    skinny_orient o = skinny_orientation(m, n, trans_a, trans_b);
    int vi = choose_variant(ctx, batch, m, n, k, o.ty);
    const matmul_variant *v = &VARIANTS[vi];
    int64_t tiles = variant_tiles(v, batch, m, n), macs = batch * m * n * k;
    int s;
    if (v->kind == K_SKINNY) s = choose_splits_skinny(tiles, k, v->tn, macs, o.tx);
    else if (v->kind == K_OUTER) s = env_splits() > 0 ? env_splits() : 1;
    /* the 128 x 128 tile is chosen only where it fills the GPU; split, it ran slower (2048³:
     * 31.8 TFLOP/s at split 5 against 33.6 unsplit) */
    else s = vi == V_DB128_K8 && env_splits() <= 0 ? 1 : choose_splits(tiles, k, m <= 32 || n <= 32, macs);
    /* the partial buffer [S, batch, M, N] stays within 32-bit indexing */
    while (s > 1 && (int64_t)s * batch * m * n > 0x7FFFFFFFll) s /= 2;
    *variant = vi;
    *splits = s;
}

/* The orientation and epilogue flags. On GPUs each is a constant of the prelude and every
 * combination its own pipeline (the untaken branches compile out). On CPU adapters (lavapipe,
 * SwiftShader) compiling is what costs (the README's example spent 10 s compiling 8 matmul
 * forms), so there they are runtime values: bit i of the Params' flags word for RT_FLAGS[i],
 * read into private variables by matmul_flags_init() at the start of the kernel, and one
 * pipeline serves them all. The kernels test them only in branches without a barrier (the
 * uniformity analysis counts a private variable as non-uniform), never in a const-expression;
 * the flags that shape loops around barriers or types (VA/VB, the skinny kernel's
 * TX/TY/U/SWAP) stay constants, except the tiled kernel's causal band (BAND), which on
 * CPU adapters band_mode() reads from p.flags >> F_BAND_SHIFT directly: a uniform value. */
static const char *const RT_FLAGS[] = {"TRANS_A", "TRANS_B", "HAS_C", "C_IS_OUT", "SPLITK"};
enum { F_TRANS_A = 1, F_TRANS_B = 2, F_HAS_C = 4, F_C_IS_OUT = 8, F_SPLITK = 16, F_ALL = 31, F_BAND_SHIFT = 5 };
static const char *const TF[2] = {"false", "true"}; /* a C bool as a WGSL literal */

/* Whether the flags are runtime values: on CPU adapters, unless $WGML_MATMUL_FLAGS says `const`
 * or `runtime` (the tests check the GPUs' constant forms on lavapipe that way). */
static bool runtime_flags(wgml_ctx *ctx) {
    const char *e = getenv("WGML_MATMUL_FLAGS");
    if (e && !strcmp(e, "const")) return false;
    if (e && !strcmp(e, "runtime")) return true;
    const gpu_caps *caps = gpu_get_caps(ctx);
    return caps && caps->is_cpu;
}

/* Appends to a prelude the flags of `which` (F_* bits) and matmul_flags_init(): on GPUs
 * `const NAME: bool = v;` with v from word, and an empty init; with runtime `var<private> NAME:
 * bool;`, which the init sets from p.flags (the caller stores word there). */
static void append_flags(char *prelude, size_t cap, uint32_t word, uint32_t which, bool runtime) {
    size_t len = strlen(prelude);
#define PUT(...) (len += (size_t)snprintf(prelude + len, len < cap ? cap - len : 0, __VA_ARGS__))
    for (int i = 0; i < (int)(sizeof RT_FLAGS / sizeof *RT_FLAGS); i++) {
        if (!(which >> i & 1)) continue;
        if (runtime) PUT("var<private> %s: bool;\n", RT_FLAGS[i]);
        else PUT("const %s: bool = %s;\n", RT_FLAGS[i], TF[word >> i & 1]);
    }
    PUT("fn matmul_flags_init() {");
    for (int i = 0; runtime && i < (int)(sizeof RT_FLAGS / sizeof *RT_FLAGS); i++)
        if (which >> i & 1) PUT(" %s = (p.flags & %uu) != 0u;", RT_FLAGS[i], 1u << i);
    PUT(" }\n");
#undef PUT
}

/* The ordered split-K reduction (matmul_splitk.wgsl): out[i] = alpha * sum_s part[s * total + i]
 * + beta * (out[i] when c_is_out, else C through its strides when c is given). */
wgml_status matmul_splitk_record(wgml_graph *g, const char *op, wgml_tensor *part, int splits, int64_t total,
                                 int64_t mn, int64_t n, wgml_tensor *c, int64_t c_bs, int64_t c_sm, int64_t c_sn,
                                 float alpha, float beta, bool c_is_out, wgml_tensor *out) {
    char rp[256] = "";
    uint32_t word = (c ? F_HAS_C : 0u) | (c_is_out ? F_C_IS_OUT : 0u);
    append_flags(rp, sizeof rp, word, F_HAS_C | F_C_IS_OUT, runtime_flags(graph_ctx(g)));
    struct {
        uint32_t total, mn, n, splits, c_bs, c_sm, c_sn;
        float alpha, beta;
        uint32_t flags, pad[2];
    } rpar = {.total = (uint32_t)total, .mn = (uint32_t)mn, .n = (uint32_t)n, .splits = (uint32_t)splits,
              .c_bs = (uint32_t)c_bs, .c_sm = (uint32_t)c_sm, .c_sn = (uint32_t)c_sn, .alpha = alpha, .beta = beta,
              .flags = word};
    wgml_tensor *rro[2] = {part, c ? c : GRAPH_UNUSED};
    return graph_dispatch(g, op, "matmul_splitk", rp, rro, 2, &out, 1, &rpar, sizeof rpar, ((uint64_t)total + 255) / 256);
}

typedef struct matmul_args {
    wgml_tensor *a, *b, *c;
    int trans_a, trans_b;
    int64_t batch, m, n, k;
    int64_t a_bs, b_bs;            /* batch strides in elements (0: broadcast) */
    int64_t c_bs, c_sm, c_sn;      /* strides of C over (batch, m, n) */
    float alpha, beta;
    wgml_tensor *into;             /* write into this tensor instead of a new one */
    bool accumulate;               /* into = alpha·op(a)·op(b) + beta·into */
    const matmul_band *band;       /* causal band of attention's products (NULL: none) */
} matmul_args;

/* matmul_params.wgsl's Params as matmul_record fills it (the skinny kernel reads the same
 * layout under its own names: P Q K batch x_bs y_bs c_bs c_sm c_sn tiles_p tiles_q alpha beta
 * k_chunk splits N). */
typedef struct matmul_params {
    uint32_t m, n, k, batch, a_bs, b_bs, c_bs, c_sm, c_sn, tiles_n, tiles_m;
    float alpha, beta;
    uint32_t k_chunk, splits;
    uint32_t out_n; /* the skinny kernel's N (O's row length; its m, n hold P, Q); else unused */
    uint32_t flags;  /* flags_word: read on CPU adapters only */
    uint32_t band_sq, band_off, pad2;
} matmul_params;

/* The Params' flags word: RT_FLAGS' bits and the band's mode above them (read on CPU adapters). */
static uint32_t flags_word(const matmul_args *x, int splits, uint32_t band) {
    return (x->trans_a ? F_TRANS_A : 0) | (x->trans_b ? F_TRANS_B : 0) | (x->c ? F_HAS_C : 0) |
           (x->accumulate ? F_C_IS_OUT : 0) | (splits > 1 ? F_SPLITK : 0) | band << F_BAND_SHIFT;
}

/* The skinny kernel (matmul_skinny.wgsl): X = the long side's operand, Y = the short side's;
 * *swap when the short side is M. */
static void skinny_setup(const matmul_variant *v, const matmul_args *x, matmul_params *pr, char *prelude, size_t cap,
                         bool *swap) {
    skinny_geom sg = skinny_shape(v, x->m, x->n);
    skinny_orient o = skinny_orientation(x->m, x->n, x->trans_a, x->trans_b);
    *swap = sg.swap;
    bool tx = o.tx, ty = o.ty;
    uint32_t r = v->tm, kt = v->tn, qp = (uint32_t)sg.qp;
    int vx = (tx ? r == 4 && sg.p % 4 == 0 : x->k % 4 == 0) ? 4 : 1;
    int vy = (ty ? x->k % 4 == 0 : sg.q % 4 == 0) ? 4 : 1;
    uint32_t jr = (r * qp) % 8 == 0 && kt >= 8 ? 8 : 4;
    /* two steps a pass where Y is read a q at a time ([65536, 576] x [16, 576]ᵀ on an H100: 135
     * us against 216 with one), one where it is read a k at a time (two took 3x as long in the
     * benchmark's overlapped products at [4096, 576] x [576, 16]; bench/NOTES.md, thirteenth
     * session) */
    uint32_t u = ty ? 2 : 1;
    snprintf(prelude, cap,
             "const R: u32 = %uu; const KT: u32 = %uu; const QP: u32 = %uu; const JR: u32 = %uu;\n"
             "const VX: u32 = %du; const VY: u32 = %du; const TX: bool = %s; const TY: bool = %s;\n"
             "const SWAP: bool = %s; const U: u32 = %uu;\n"
             "alias XV = %s; alias YV = %s;\n"
             "fn x_at(v: XV, c: u32) -> f32 { return %s; }\n"
             "fn y_at(v: YV, c: u32) -> f32 { return %s; }\n"
             "fn y_vec(v: YV) -> vec4<f32> { return vec4<f32>(v); }\n",
             r, kt, qp, jr, vx, vy, TF[tx], TF[ty], TF[*swap], u, vx == 4 ? "vec4<f32>" : "f32",
             vy == 4 ? "vec4<f32>" : "f32", vx == 4 ? "v[c]" : "v",
             vy == 4 ? "v[c]" : "v");
    pr->m = (uint32_t)sg.p;
    pr->n = (uint32_t)sg.q;
    pr->a_bs = (uint32_t)(*swap ? x->b_bs : x->a_bs);
    pr->b_bs = (uint32_t)(*swap ? x->a_bs : x->b_bs);
    pr->tiles_n = (uint32_t)sg.tiles_p;
    pr->tiles_m = (uint32_t)sg.tiles_q;
    pr->out_n = (uint32_t)x->n;
}

/* The outer-product kernel (matmul_outer.wgsl). */
static void outer_setup(const matmul_variant *v, const matmul_args *x, matmul_params *pr, char *prelude, size_t cap) {
    int vo = x->n % 4 == 0 ? 4 : 1;
    snprintf(prelude, cap,
             "const TM: u32 = %uu; const VO: u32 = %du;\n"
             "alias OV = %s;\n"
             "fn o_at(v: OV, c: u32) -> f32 { return %s; }\n"
             "fn o_put4(i: u32, v: vec4<f32>) { %s }\n",
             v->tm, vo, vo == 4 ? "vec4<f32>" : "f32", vo == 4 ? "v[c]" : "v", vo == 4 ? "O[i / 4u] = v;" : "O[i] = v.x;");
    pr->tiles_n = (uint32_t)((x->n + v->bn - 1) / v->bn);
    pr->tiles_m = (uint32_t)((x->m + v->bm - 1) / v->bm);
}

/* The tiled kernels (matmul.wgsl, matmul_db.wgsl); band: the causal band's mode (0: none). */
static void tile_setup(const matmul_variant *v, const matmul_args *x, uint32_t band, bool runtime, matmul_params *pr,
                       char *prelude, size_t cap) {
    /* vec4 loads when the operand's contiguous dimension (and so every row and batch
     * start) is a multiple of 4 */
    int va = (x->trans_a ? x->m : x->k) % 4 == 0 ? 4 : 1;
    int vb = (x->trans_b ? x->k : x->n) % 4 == 0 ? 4 : 1;
    /* band_mode(): the constant BAND with constant flags (GPUs); with runtime flags (CPU
     * adapters) bits 5-6 of p.flags (a uniform value, so the k loops it bounds stay uniform
     * around their barriers) */
    char bd[40] = "", bm[40] = "BAND";
    if (!runtime) snprintf(bd, sizeof bd, "const BAND: u32 = %uu;", band);
    else snprintf(bm, sizeof bm, "(p.flags >> %uu) & 3u", (unsigned)F_BAND_SHIFT);
    snprintf(prelude, cap,
             "const BM: u32 = %uu; const BN: u32 = %uu; const BK: u32 = %uu; const TM: u32 = %uu; const TN: u32 = %uu;\n"
             "const VA: u32 = %du; const VB: u32 = %du;\n"
             "%s\n"
             "alias AV = %s; alias BV = %s;\n"
             "fn a_at(v: AV, c: u32) -> f32 { return %s; }\n"
             "fn b_at(v: BV, c: u32) -> f32 { return %s; }\n"
             "fn band_mode() -> u32 { return %s; }\n",
             v->bm, v->bn, v->bk, v->tm, v->tn, va, vb, bd, va == 4 ? "vec4<f32>" : "f32",
             vb == 4 ? "vec4<f32>" : "f32", va == 4 ? "v[c]" : "v", vb == 4 ? "v[c]" : "v",
             bm);
    pr->tiles_n = (uint32_t)((x->n + v->bn - 1) / v->bn);
    pr->tiles_m = (uint32_t)((x->m + v->bm - 1) / v->bm);
}

static wgml_tensor *matmul_record(wgml_graph *g, const char *op, const matmul_args *x, int out_rank,
                                  const int64_t *out_shape) {
    wgml_ctx *ctx = graph_ctx(g);
    int vi, splits;
    matmul_plan(ctx, x->batch, x->m, x->n, x->k, x->trans_a, x->trans_b, &vi, &splits);
    /* a banded product runs on the single-buffered tile kernel, the one that skips by band */
    if (x->band && x->band->mode && strcmp(VARIANTS[vi].shader, "matmul"))
        vi = variant_fits(ctx, V_TILE128X64) ? V_TILE128X64 : V_TILE32;
    const matmul_variant *v = &VARIANTS[vi];
    uint32_t band = x->band ? (uint32_t)x->band->mode : 0;
    if (band == 3 && x->band->sq % v->bk) band = 0; /* k-tiles must not straddle query segments */
    int64_t tiles = variant_tiles(v, x->batch, x->m, x->n);
    int64_t mn_total = x->batch * x->m * x->n;
    /* each slice a whole number of BK steps */
    int64_t k_chunk = (x->k + splits - 1) / splits;
    k_chunk = splits == 1 ? x->k : (k_chunk + v->bk - 1) / v->bk * v->bk;
    char prelude[1600];
    matmul_params params = {
        .m = (uint32_t)x->m, .n = (uint32_t)x->n, .k = (uint32_t)x->k, .batch = (uint32_t)x->batch,
        .a_bs = (uint32_t)x->a_bs, .b_bs = (uint32_t)x->b_bs, .c_bs = (uint32_t)x->c_bs, .c_sm = (uint32_t)x->c_sm,
        .c_sn = (uint32_t)x->c_sn, .alpha = x->alpha, .beta = x->beta, .k_chunk = (uint32_t)k_chunk,
        .splits = (uint32_t)splits, .band_sq = band ? (uint32_t)x->band->sq : 0,
        .band_off = band ? (uint32_t)x->band->off : 0, .flags = flags_word(x, splits, band)};
    bool swap = false, runtime = runtime_flags(ctx);
    if (v->kind == K_SKINNY) skinny_setup(v, x, &params, prelude, sizeof prelude, &swap);
    else if (v->kind == K_OUTER) outer_setup(v, x, &params, prelude, sizeof prelude);
    else tile_setup(v, x, band, runtime, &params, prelude, sizeof prelude);
    /* the skinny kernel's orientation is its own TX / TY, constants */
    uint32_t which = v->kind == K_SKINNY ? F_HAS_C | F_C_IS_OUT | F_SPLITK : F_ALL;
    append_flags(prelude, sizeof prelude, params.flags, which, runtime);
    wgml_tensor *out = x->into ? x->into : graph_output(g, op, WGML_F32, out_rank, out_shape);
    if (!out) return NULL;
    wgml_tensor *part = NULL;
    if (splits > 1) {
        int64_t pn = (int64_t)splits * mn_total;
        if (!(part = graph_output(g, op, WGML_F32, 1, &pn))) {
            if (!x->into) wgml_tensor_free(out);
            return NULL;
        }
    }
    wgml_tensor *ro[3] = {swap ? x->b : x->a, swap ? x->a : x->b, x->c ? x->c : GRAPH_UNUSED};
    uint64_t groups = (uint64_t)tiles * (uint64_t)splits;
    wgml_status s = graph_dispatch(g, op, v->shader, prelude, ro, 3, part ? &part : &out, 1, &params, sizeof params,
                                   groups);
    if (!s && part)
        s = matmul_splitk_record(g, op, part, splits, mn_total, x->m * x->n, x->n, x->c, x->c_bs, x->c_sm, x->c_sn,
                                 x->alpha, x->beta, x->accumulate, out);
    wgml_tensor_free(part); /* eager: the recorded dispatches hold its range; built graph: no-op */
    if (s) {
        if (!x->into) wgml_tensor_free(out);
        return NULL;
    }
    return out;
}

/* Checks shared by every form: tensors present, f32, same graph. */
static wgml_status check_operands(wgml_ctx *ctx, const char *op, wgml_tensor *a, const char *an, wgml_tensor *b,
                                  const char *bn) {
    wgml_status s;
    if ((s = check_tensor(ctx, op, an, a)) || (s = check_tensor(ctx, op, bn, b))) return s;
    if ((s = check_dtype(ctx, op, an, a, WGML_F32)) || (s = check_dtype(ctx, op, bn, b, WGML_F32))) return s;
    return check_same_graph(ctx, op, a, b);
}

static wgml_ctx *ctx_of(wgml_graph *g) { return graph_ctx(g); }

wgml_tensor *wgml_matmul(wgml_graph *g, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b) {
    if (!g) return NULL;
    wgml_ctx *ctx = ctx_of(g);
    const char *op = "matmul";
    if (check_operands(ctx, op, a, "a", b, "b") || check_rank(ctx, op, "a", a, 2, 3) ||
        check_rank(ctx, op, "b", b, 2, 3))
        return NULL;
    int64_t ba = a->rank == 3 ? a->shape[0] : 1, bb = b->rank == 3 ? b->shape[0] : 1;
    const int64_t *as = a->shape + (a->rank - 2), *bs = b->shape + (b->rank - 2);
    int64_t m = trans_a ? as[1] : as[0], ka = trans_a ? as[0] : as[1];
    int64_t kb = trans_b ? bs[1] : bs[0], n = trans_b ? bs[0] : bs[1];
    if (ka != kb) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: a %s%s and b %s%s: inner dimensions differ (%lld vs %lld)", op,
                       tshape(a), trans_a ? "ᵀ" : "", tshape(b), trans_b ? "ᵀ" : "", (long long)ka, (long long)kb);
        return NULL;
    }
    if (ba != bb && ba != 1 && bb != 1) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: a %s and b %s: batch sizes %lld and %lld do not broadcast", op,
                       tshape(a), tshape(b), (long long)ba, (long long)bb);
        return NULL;
    }
    int64_t batch = ba > bb ? ba : bb;
    matmul_args x = {
        .a = a, .b = b, .trans_a = trans_a != 0, .trans_b = trans_b != 0, .batch = batch, .m = m, .n = n, .k = ka,
        .a_bs = ba == 1 ? 0 : m * ka, .b_bs = bb == 1 ? 0 : ka * n, .alpha = 1.0f};
    int64_t shape3[3] = {batch, m, n};
    int rank = (a->rank == 3 || b->rank == 3) ? 3 : 2;
    return matmul_grad_record(g, matmul_record(g, op, &x, rank, rank == 3 ? shape3 : shape3 + 1), a, b, trans_a,
                              trans_b);
}

wgml_tensor *wgml_mm(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) {
    if (!g) return NULL;
    wgml_ctx *ctx = ctx_of(g);
    if (check_operands(ctx, "mm", a, "a", b, "b") || check_rank(ctx, "mm", "a", a, 2, 2) ||
        check_rank(ctx, "mm", "b", b, 2, 2))
        return NULL;
    if (a->shape[1] != b->shape[0]) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "mm: a %s and b %s: inner dimensions differ (%lld vs %lld)", tshape(a),
                       tshape(b), (long long)a->shape[1], (long long)b->shape[0]);
        return NULL;
    }
    return wgml_matmul(g, a, b, 0, 0);
}

wgml_tensor *wgml_bmm(wgml_graph *g, wgml_tensor *a, wgml_tensor *b) {
    if (!g) return NULL;
    wgml_ctx *ctx = ctx_of(g);
    if (check_operands(ctx, "bmm", a, "a", b, "b") || check_rank(ctx, "bmm", "a", a, 3, 3) ||
        check_rank(ctx, "bmm", "b", b, 3, 3))
        return NULL;
    if (a->shape[0] != b->shape[0] || a->shape[2] != b->shape[1]) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "bmm: a %s and b %s do not fit ([B, M, K] and [B, K, N])", tshape(a),
                       tshape(b));
        return NULL;
    }
    return wgml_matmul(g, a, b, 0, 0);
}

wgml_tensor *wgml_linear(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias) {
    if (!g) return NULL;
    wgml_ctx *ctx = ctx_of(g);
    const char *op = "linear";
    if (check_operands(ctx, op, x, "x", w, "w") || check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK) ||
        check_rank(ctx, op, "w", w, 2, 2))
        return NULL;
    int64_t k = x->shape[x->rank - 1], n = w->shape[0];
    if (w->shape[1] != k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "linear: x %s and w %s: w must be [N, %lld]", tshape(x), tshape(w),
                       (long long)k);
        return NULL;
    }
    if (bias) {
        if (check_operands(ctx, op, x, "x", bias, "bias")) return NULL;
        if (bias->rank != 1 || bias->shape[0] != n) {
            wgml_set_error(ctx, WGML_ERR_SHAPE, "linear: bias %s must be [%lld] for w %s", tshape(bias), (long long)n,
                           tshape(w));
            return NULL;
        }
    }
    int64_t m = x->numel / k;
    /* bias broadcast over the rows: C with row stride 0 */
    matmul_args a = {
        .a = x, .b = w, .c = bias, .trans_b = 1, .batch = 1, .m = m, .n = n, .k = k, .c_sn = 1, .alpha = 1.0f,
        .beta = 1.0f};
    int64_t shape[WGML_MAX_RANK];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    shape[x->rank - 1] = n;
    return linear_grad_record(g, matmul_record(g, op, &a, x->rank, shape), x, w, bias);
}

wgml_tensor *wgml_addmm(wgml_graph *g, wgml_tensor *c, wgml_tensor *a, wgml_tensor *b, float beta, float alpha) {
    if (!g) return NULL;
    wgml_ctx *ctx = ctx_of(g);
    const char *op = "addmm";
    if (check_operands(ctx, op, a, "a", b, "b") || check_operands(ctx, op, a, "a", c, "c") ||
        check_rank(ctx, op, "a", a, 2, 2) || check_rank(ctx, op, "b", b, 2, 2) || check_rank(ctx, op, "c", c, 1, 2))
        return NULL;
    int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    if (b->shape[0] != k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "addmm: a %s and b %s: inner dimensions differ (%lld vs %lld)", tshape(a),
                       tshape(b), (long long)k, (long long)b->shape[0]);
        return NULL;
    }
    int64_t cr = c->rank == 2 ? c->shape[0] : 1, cc = c->shape[c->rank - 1];
    if ((cr != 1 && cr != m) || (cc != 1 && cc != n)) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "addmm: c %s does not broadcast to [%lld, %lld]", tshape(c), (long long)m,
                       (long long)n);
        return NULL;
    }
    matmul_args x = {
        .a = a, .b = b, .c = c, .batch = 1, .m = m, .n = n, .k = k, .c_sm = cr == 1 ? 0 : cc,
        .c_sn = cc == 1 ? 0 : 1, .alpha = alpha, .beta = beta};
    int64_t shape[2] = {m, n};
    return addmm_grad_record(g, matmul_record(g, op, &x, 2, shape), c, a, b, beta, alpha);
}

wgml_status wgml_linear_dw(wgml_graph *g, wgml_tensor *d_out, wgml_tensor *x, wgml_tensor *dw, int accumulate) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "linear_dw: graph is NULL");
    wgml_ctx *ctx = ctx_of(g);
    const char *op = "linear_dw";
    wgml_status s;
    if ((s = check_operands(ctx, op, d_out, "d_out", x, "x")) || (s = check_operands(ctx, op, d_out, "d_out", dw, "dw")))
        return s;
    if ((s = check_rank(ctx, op, "d_out", d_out, 1, WGML_MAX_RANK)) || (s = check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK)) ||
        (s = check_rank(ctx, op, "dw", dw, 2, 2)))
        return s;
    int64_t n = d_out->shape[d_out->rank - 1], k = x->shape[x->rank - 1];
    int64_t m = d_out->numel / n;
    if (x->numel / k != m)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "linear_dw: d_out %s and x %s have different row counts (%lld vs %lld)",
                              tshape(d_out), tshape(x), (long long)m, (long long)(x->numel / k));
    if (dw->shape[0] != n || dw->shape[1] != k)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "linear_dw: dw %s must be [%lld, %lld] for d_out %s and x %s", tshape(dw),
                              (long long)n, (long long)k, tshape(d_out), tshape(x));
    /* dW[N,K] = d_outᵀ[N,M] · x[M,K]: d_out read as a transposed [M,N] operand */
    return matmul_scaled(g, op, d_out, x, 1, 0, n, k, m, 1.0f, dw, accumulate != 0) ? WGML_OK : wgml_last_status(ctx);
}

wgml_tensor *matmul_scaled(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b,
                           int64_t m, int64_t n, int64_t k, float alpha, wgml_tensor *into, bool accumulate) {
    matmul_args x = {
        .a = a, .b = b, .trans_a = trans_a, .trans_b = trans_b, .batch = 1, .m = m, .n = n, .k = k, .alpha = alpha,
        .beta = accumulate ? 1.0f : 0.0f, .into = into, .accumulate = into && accumulate};
    int64_t shape[2] = {m, n};
    return matmul_record(g, op, &x, 2, into ? into->shape : shape);
}

wgml_status matmul_record_into(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_b, int64_t m,
                               int64_t n, int64_t k, wgml_tensor *into, bool accumulate) {
    return matmul_scaled(g, op, a, b, 0, trans_b, m, n, k, 1.0f, into, accumulate) ? WGML_OK
                                                                                     : wgml_last_status(graph_ctx(g));
}

wgml_tensor *matmul_batched(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b,
                            int64_t batch, int64_t a_bs, int64_t b_bs, int64_t m, int64_t n, int64_t k, float alpha,
                            wgml_tensor *into, bool accumulate) {
    matmul_args x = {
        .a = a, .b = b, .trans_a = trans_a, .trans_b = trans_b, .batch = batch, .m = m, .n = n, .k = k,
        .a_bs = a_bs, .b_bs = b_bs, .alpha = alpha, .beta = accumulate ? 1.0f : 0.0f, .into = into,
        .accumulate = into && accumulate};
    int64_t shape[3] = {batch, m, n};
    return matmul_record(g, op, &x, 3, into ? into->shape : shape);
}

wgml_tensor *matmul_add_product(wgml_graph *g, const char *op, wgml_tensor *c, wgml_tensor *a, wgml_tensor *b,
                                int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha) {
    matmul_args x = {
        .a = a, .b = b, .c = c, .trans_a = trans_a, .trans_b = trans_b, .batch = 1, .m = m, .n = n, .k = k,
        .c_sm = n, .c_sn = 1, .alpha = alpha, .beta = 1.0f};
    return matmul_record(g, op, &x, c->rank, c->shape);
}

wgml_tensor *matmul_add_linear(wgml_graph *g, const char *op, wgml_tensor *c, wgml_tensor *x, wgml_tensor *w,
                               float alpha) {
    if (!g) return NULL;
    wgml_ctx *ctx = ctx_of(g);
    if (check_operands(ctx, op, x, "x", w, "w") || check_operands(ctx, op, x, "x", c, "c") ||
        check_rank(ctx, op, "x", x, 1, WGML_MAX_RANK) || check_rank(ctx, op, "w", w, 2, 2))
        return NULL;
    int64_t k = x->shape[x->rank - 1], n = w->shape[0], m = x->numel / k;
    if (w->shape[1] != k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: x %s and w %s: w must be [N, %lld]", op, tshape(x), tshape(w),
                       (long long)k);
        return NULL;
    }
    if (c->shape[c->rank - 1] != n || c->numel != m * n) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: c %s must hold [%lld, %lld] (x %s, w %s)", op, tshape(c), (long long)m,
                       (long long)n, tshape(x), tshape(w));
        return NULL;
    }
    return add_linear_grad_record(g, matmul_add_product(g, op, c, x, w, 0, 1, m, n, k, alpha), c, x, w, alpha);
}

wgml_tensor *matmul_banded(wgml_graph *g, const char *op, wgml_tensor *a, wgml_tensor *b, int trans_a, int trans_b,
                           const matmul_band *band) {
    int64_t batch = a->shape[0];
    int64_t m = trans_a ? a->shape[2] : a->shape[1], k = trans_a ? a->shape[1] : a->shape[2];
    int64_t n = trans_b ? b->shape[1] : b->shape[2];
    matmul_args x = {
        .a = a, .b = b, .trans_a = trans_a, .trans_b = trans_b, .batch = batch, .m = m, .n = n, .k = k,
        .a_bs = m * k, .b_bs = k * n, .alpha = 1.0f, .band = band};
    int64_t shape[3] = {batch, m, n};
    return matmul_record(g, op, &x, 3, shape);
}

/* ---- public: the plan, for benchmark reports (tools/ see only include/) ---- */
void wgml_matmul_plan(wgml_ctx *ctx, int64_t batch, int64_t m, int64_t n, int64_t k, int trans_a, int trans_b,
                      int *variant, int *splits) {
    matmul_plan(ctx, batch, m, n, k, trans_a, trans_b, variant, splits);
}
