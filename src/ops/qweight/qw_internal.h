/* Shared by the family: the host-format code (qw_format.c) and the GPU files (qweight.c, qw_mm.c, qw_gemv.c). */
#ifndef WGML_QW_INTERNAL_H
#define WGML_QW_INTERNAL_H

#include "graph/graph.h"
#include "wgml-quant.h"

float qw_half_to_float(uint16_t h);
wgml_status qw_check_gguf(wgml_ctx *ctx, const char *op, int type, const void *data, size_t bytes, int64_t n,
                          int64_t k, bool blocks_only);
wgml_status qw_check_q4gsw(wgml_ctx *ctx, const char *op, const void *codes, const void *scales, int64_t n, int64_t k,
                           int group);
/* Host images of the GPU layout (see include/wgml.h): words [n, kp/8] (Q8: [n, kp/4]) and ab
 * [n, kp/G] (Q4_1: [n, kp/G, 2]). */
void qw_pack_q4gsw(const uint8_t *codes, const float *scales, int64_t n, int64_t k, int group, uint32_t *words,
                   float *ab);
void qw_pack_gguf(int type, const uint8_t *p, int64_t n, int64_t k, uint32_t *words, float *ab);
/* How wgml_qweight_upload_gguf holds type's (a, b) pairs (include/wgml-quant.h; $WGML_QW_KSCALES=0:
 * WGML_AB_F32 for every type), the u32 words of one super-block's entry in a K form (0 for
 * WGML_AB_F32), and the K forms' image: kab [n, k/256, qw_ab_form_words] from n·k/256 blocks. */
wgml_abform qw_gguf_ab_form(int type);
int qw_ab_form_words(wgml_abform form);
/* The 4-byte words of ab in one row of kp codes (group size G): an f32, or an (a, b) pair with
 * has_min, per group in WGML_AB_F32; qw_ab_form_words per 256 codes in the K forms. Every size
 * of ab (upload, checks, row views, the benchmark's bytes) comes from here. */
int64_t qw_ab_row_words(wgml_abform form, int64_t kp, int group, bool has_min);
void qw_pack_kab(int type, const uint8_t *p, int64_t n, int64_t k, uint32_t *kab);
/* Whether the GPU runs GGUF block type `type`, and as which kind, group size and code bits
 * (any pointer may be NULL); whether the type's values carry a per-group minimum. */
bool qw_gguf_gpu(int type, wgml_qkind *kind, int *group, int *bits);
bool qw_gguf_has_min(int type);
/* The structural checks of a quantised weight (any kind), shared by every op that takes one:
 * false with the error (op, arg) set when w is NULL or inconsistent. */
bool qw_weight_valid(wgml_ctx *ctx, const char *op, const char *arg, const wgml_qweight *w);

/* The tiled qweight product for other families' fused ops (no checks, no autograd record), written
 * into the existing f32 tensor `into`: trans = 0: into[m, N] = a[m, K] · dequant(W)ᵀ (+ bias);
 * trans = 1: into[m, K] = a[m, N] · dequant(W). accumulate: into += the product. */
wgml_status qw_mm_into(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w, int trans, int64_t m,
                       wgml_tensor *into, bool accumulate);

/* wgml_qlinear's product with its checks (errors name op) but without its autograd record:
 * for ops whose own record covers x (the straight-through linear, qw_ste.c). */
wgml_tensor *qw_linear_product(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w);
typedef struct qw_lora_term qw_lora_term;
/* The same with a LoRA term added (qw_lora_term below; NULL: none): wgml_lora_qlinear's folded form. */
wgml_tensor *qw_linear_product_ex(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *w,
                                  const qw_lora_term *lora);

/* The qweight GEMM's tile variants (qw_mm.c: names as in the matmul family) and its choice of variant
 * and split-K count for out[m, c] with reduction length r, segmented or not (qw_linear_concat)
 * ($WGML_QW_MM_VARIANT, $WGML_QW_MM_SPLITK, a matmul variant forced on the context, else the
 * automatic rules). */
int qw_mm_variant_count(void);
const char *qw_mm_variant_name(int v);
void qw_mm_plan(wgml_ctx *ctx, int64_t m, int64_t r, int64_t c, bool segmented, int *variant, int *splits);
/* qw_mm_plan as on a CPU adapter (cpu) or a GPU, whatever ctx's adapter is (tests). */
void qw_mm_plan_for(wgml_ctx *ctx, bool cpu, int64_t m, int64_t r, int64_t c, bool segmented, int *variant,
                    int *splits);
/* The most rows of x the forward takes through the GEMV (qw_gemv) on ctx's adapter; more rows go
 * to the tiled GEMM. */
int qw_gemv_max_m(wgml_ctx *ctx);

/* Shared by the family's GPU files (qweight.c: weights and entry points; qw_mm.c: the tiled GEMM;
 * qw_gemv.c: the GEMV). Codes per u32 word of a kind (8, 4, or 1 for QF32); words per row of w;
 * the WGSL of w's code kind (constants, code_f, deq, quant, and with ab_reader group_ab over a
 * binding named AB) written at buf (qw_kind_prelude: with the reader). */
int qw_kind_cpw(wgml_qkind kind);
int64_t qw_words_per_row(const wgml_qweight *w);
void qw_kind_prelude_ex(char *buf, size_t cap, const wgml_qweight *w, bool ab_reader);
void qw_kind_prelude(char *buf, size_t cap, const wgml_qweight *w);
/* Whether two weights' kernels read them alike (kind, group size, ab form): one GEMV takes both. */
static inline bool qw_same_layout(const wgml_qweight *a, const wgml_qweight *b) {
    return a->kind == b->kind && a->group == b->group && a->ab_form == b->ab_form;
}
/* WGSL `fn <fn>(i: u32) -> vec2<f32>`: the (a, b) pair of group i = n·(Kp/G) + group read from
 * the binding named binding (array<ABT>) in w's ab form, at buf; returns snprintf's length. */
int qw_ab_reader(char *buf, size_t cap, const wgml_qweight *w, const char *fn, const char *binding);

/* Where qw_record_mm puts the product: a new tensor of the given shape, or into (into += the
 * product with acc); seg (forward only, or NULL): the column boundaries seg[0] <= seg[1] <= C of
 * the output's three segments, each stored whole (qw_mm_head.wgsl's o_index); parts (or NULL):
 * a split product's slices are returned unsummed, as [S, shape...], and *parts = S (1: the
 * product itself, unsplit). */
typedef struct qw_mm_dest {
    wgml_tensor *into;
    bool acc;
    const int64_t *seg;
    int *parts;
    const qw_lora_term *lora; /* or NULL: a LoRA term added to the product (below) */
} qw_mm_dest;

/* A LoRA term of a 4-bit product, out += scale·l·rᵀ (forward: l = H [m, rank], r = B [C, rank])
 * or out += scale·l·r (input gradient: l = dH [m, rank], r = A [rank, C]). The GPU tiles fold it
 * into their reduction (qw_mm.wgsl's LORA: a few steps more); elsewhere (the CPU kernel, the
 * double-buffered tiles, the integer-dot forward, the GEMV) it is one more product accumulated
 * into out (qw_lora_add: out [m, C] contiguous, c = C). qw_record_mm refuses it with parts or
 * seg. */
struct qw_lora_term {
    wgml_tensor *l, *r;
    int64_t rank;
    float scale;
};
wgml_status qw_lora_add(wgml_graph *g, const char *op, const qw_lora_term *lt, int trans, int64_t m, int64_t c,
                        wgml_tensor *out);

/* The tiled product out[m, C] = a[m, R] with W (trans 0: forward, C = N, + bias; trans 1: input
 * gradient, C = K) through the planned variant and split-K, into d (NULL: a new tensor of the
 * given shape). No checks: the callers' entry points check. */
wgml_tensor *qw_record_mm(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w, int trans,
                          int64_t m, int rank, const int64_t *shape, const qw_mm_dest *d);
/* The integer-dot forward (qw_mm_i8.wgsl, in graphs with graph_set_x8): x [m, K] quantised
 * for w by qw_quant_x.wgsl into an i32 tensor [m, Kp/4 + 2·Kp/QB] (codes, scales, sums; the
 * layout is in the kernel's comment), QB = qw_x8_block(w) (32, or 16 for G = 16). */
uint32_t qw_x8_block(const wgml_qweight *w);
/* Words of one row of qw_quant_x's output for w: Kp/4 + 2·Kp/QB. */
int64_t qw_quant_x_row(const wgml_qweight *w);
/* Whether w's product in g takes int8 activations: the graph asks (graph_set_x8), the adapter
 * has dot4I8Packed, the codes fit an int8, trans = 0; the GEMM (qw_mm_i8) and the GEMV (its
 * I8X form) both follow it. $WGML_QW_INT8=0 turns it off. */
bool qw_x8_applies(wgml_graph *g, const wgml_qweight *w, int trans);
wgml_tensor *qw_quant_x(wgml_graph *g, const char *op, wgml_tensor *a, const wgml_qweight *w, int64_t m);

/* outs[i] = x · W_iᵀ (+ bias_i) for the nw (1..3) weights of one kind, group size and K, in one
 * GEMV dispatch (m <= qw_gemv_max_m rows of x). */
wgml_status qw_record_gemv(wgml_graph *g, const char *op, wgml_tensor *x, const wgml_qweight *const *ws, int nw,
                           int64_t m, wgml_tensor **outs);

#endif
