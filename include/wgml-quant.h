/* wgml-quant.h: frozen quantised weights (src/ops/qweight): 4-bit (q4gsw, GGUF Q4_0, Q4_1,
 * Q4_K), 2- to 6-bit and table codes (GGUF Q2_K, Q3_K, Q5_0, Q5_1, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
 * held as 8-bit codes), 8-bit (Q8_0) and f32
 * (GGUF F32, F16, BF16) weights: the GGUF block formats, host (de)quantisation, upload, and the
 * ops that read them (wgml_qlinear, wgml_qlinear_multi, wgml_qlinear_dx, wgml_qembedding,
 * wgml_qweight_requant, wgml_qweight_dequantize). Builds on wgml.h, which includes it at its end
 * (the declarations were there, so code that includes wgml.h sees them; before this header the
 * family was called q4: wgml_q4_weight, wgml_q4_linear, ...). wgml_lmhead_ce_qweight and
 * wgml_lora_qlinear, which take a wgml_qweight, stay in wgml.h's losses and LoRA sections. */
#ifndef WGML_QUANT_H
#define WGML_QUANT_H

#include "wgml.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- quantised weights ------------------------------------------------------------------ */
/* Frozen quantised weights: host (de)quantisation, upload, and the ops that read them. */

/* Frozen quantised weights W[N, K] (N outputs, K inputs) and the operators on them.
 *
 * Meaning (see the 4-bit spec): K is cut into groups of G consecutive elements; each element
 * has a code c and each (row, group) a pair (a, b):
 *   WGML_Q4_SYM  w = (c - 8)·scale          (ExecuTorch q4gsw, GGUF Q4_0; a = scale)
 *   WGML_Q4_MIN  w = c·a + b, c in 0..15    (GGUF Q4_1: a = d, b = m; Q4_K: a = d·scale,
 *                                            b = -(dmin·min))
 *   WGML_Q8      w = c·a, c a signed int8   (GGUF Q8_0: a = d; Q5_0: c = q - 16, a = d;
 *                                            Q6_K: c = q - 32, a = d·scale, G = 16; Q3_K:
 *                                            c in -4..3, a = d·(scale - 32), G = 16;
 *                                            IQ4_NL: c = the table's value, a = d; IQ4_XS:
 *                                            the same with a = d·(scale - 32))
 *   WGML_Q8_MIN  w = c·a + b, c an unsigned 8-bit code (GGUF Q5_1: a = d, b = m; Q5_K: a =
 *                                            d·scale, b = -(dmin·min); Q2_K: c in 0..3, the
 *                                            same pair from 4-bit scale and min, G = 16)
 *   WGML_QF32    w = c, c an f32 value     (GGUF F32, F16, BF16 widened at upload, which is
 *                                            exact; a = 1, b = 0, G = 32; no requant)
 * The 2-, 3-, 5- and 6-bit GGUF codes and IQ4's table values are held widened to 8 bits (8
 * bits per weight on the GPU against 2.6 to 6.6 in the file: a packed layout is a later
 * speed-up). `bits` is the format's code width (2 to 6, 8; 8 for IQ4's table values; 32 for
 * QF32): requant clamps to its range.
 *
 * GPU layout (the one layout every qweight operator reads and requant writes):
 *   Kp = K rounded up to G and a multiple of 32; G is a positive multiple of 32, or 16 for
 *   the 8-bit kinds (Q2_K, Q3_K, Q6_K); a group never straddles a u32 word.
 *   codes: u32 [N, Kp/8] for 4 bits: word j of row n holds k = 8j+i in bits 4i..4i+3
 *          (i = 0..7); codes of the padding k >= K are 8 (SYM) or 0 (MIN).
 *          u32 [N, Kp/4] for the 8-bit kinds: word j holds k = 4j+i in bits 8i..8i+7 (Q8:
 *          an int8; Q8_MIN: unsigned); padding codes are 0.
 *          u32 [N, Kp] for QF32: word j is the f32 bits of k = j (padding 0.0).
 *   ab:    ab_form WGML_AB_F32: f32 [N, Kp/G] (SYM: the scale; Q8: a), or f32 [N, Kp/G, 2]
 *          (MIN, Q8_MIN: (a, b) pairs), row-major, so the groups of one output row are
 *          contiguous. The K types keep their file's super-block scales instead (exact, the
 *          file's size or near it; Kp a multiple of 256), one entry per 256 codes of a row:
 *          WGML_AB_K_MIN (Q4_K, Q5_K): u32 [N, Kp/256, 6]: words 0 and 1 the f32 values of d
 *            and dmin, word 2 + j/2 bits 16(j%2).. group j's 6-bit scale (bits 0..5 of the half
 *            word) and min (bits 8..13), unpacked from the file's 12 bytes; group j (0..7)
 *            has a = d·scale_j, b = -(dmin·min_j). 0.75 bits a weight (the file: 0.5).
 *          WGML_AB_K6 (Q6_K, Q3_K): u32 [N, Kp/256, 6]: word 0 the f32 value of d, words 1..4
 *            the 16 int8 scales (little-endian; Q3_K's 6-bit ones minus 32), word 5 zero;
 *            group j (0..15) has a = d·scale_j.
 *          (Both K forms take 6 words, 24 bytes a row of 256 codes, so that rows split at
 *          multiples of 32 start at aligned offsets.)
 *          $WGML_QW_KSCALES=0 makes wgml_qweight_upload_gguf write the f32 form for them too.
 *   bias:  f32 [N] or NULL.
 * A weight is only tensors of one graph; free the struct with wgml_qweight_free (before freeing a
 * built graph; in a built graph the tensors live as long as the graph). */
typedef enum wgml_qkind { WGML_Q4_SYM = 0, WGML_Q4_MIN = 1, WGML_Q8 = 2, WGML_Q8_MIN = 3, WGML_QF32 = 4 } wgml_qkind;
typedef enum wgml_abform { WGML_AB_F32 = 0, WGML_AB_K_MIN = 1, WGML_AB_K6 = 2 } wgml_abform;
struct wgml_qweight { /* typedef in wgml.h */
    wgml_tensor *codes, *ab, *bias;
    int64_t n, k, kp; /* outputs, inputs, inputs padded to the group size */
    int group;        /* G */
    int has_min;      /* kind == WGML_Q4_MIN or WGML_Q8_MIN: ab holds (a, b) pairs */
    wgml_qkind kind;
    int bits;         /* code width: 4 (SYM, MIN), 5, 6 or 8 (the 8-bit kinds), 32 (QF32) */
    wgml_abform ab_form; /* how ab holds the (a, b) pairs (above) */
};

/* Block formats: the tensor data types of GGUF files whose layout wgml knows (numbered as in
 * the file format); wgml_qweight_upload_gguf and wgml_gguf_dequantize take their blocks. */
typedef enum wgml_ggml_type {
    WGML_GGML_F32 = 0, WGML_GGML_F16 = 1, WGML_GGML_Q4_0 = 2, WGML_GGML_Q4_1 = 3,
    WGML_GGML_Q5_0 = 6, WGML_GGML_Q5_1 = 7, WGML_GGML_Q8_0 = 8, WGML_GGML_Q2_K = 10, WGML_GGML_Q3_K = 11,
    WGML_GGML_Q4_K = 12, WGML_GGML_Q5_K = 13, WGML_GGML_Q6_K = 14, WGML_GGML_IQ4_NL = 20, WGML_GGML_IQ4_XS = 23,
    WGML_GGML_BF16 = 30
} wgml_ggml_type;
/* "F32", "Q4_1", ... or "type N"; block size in elements and bytes per block (0 if unknown). */
const char *wgml_ggml_type_name(uint32_t type);
int wgml_ggml_type_size(uint32_t type, uint64_t *block_elems, uint64_t *block_bytes);
/* Bytes of one row of k elements of a tensor type (0 when unknown or k is not a whole number
 * of the type's blocks). */
size_t wgml_ggml_row_bytes(uint32_t type, int64_t k);

/* Host side (no GPU; errors are read with wgml_last_error(NULL)). */
/* Dequantises a GGUF tensor of n rows of k elements (ne = [k, n]) into out[n*k] exactly as the
 * gguf Python package does (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, IQ4_NL, IQ4_XS);
 * bytes must be n rows' worth and k a whole number of the type's blocks (32 or 256). */
wgml_status wgml_gguf_dequantize(int type, const void *data, size_t bytes, int64_t n, int64_t k, float *out);
/* Dequantises ExecuTorch flat q4gsw tensors: codes uint8 [n, ceil(k/2)] (k = 2j low nibble,
 * k = 2j+1 high nibble), scales f32 [ceil(k/G), round_up(n, 4)]; out f32 [n, k]. */
wgml_status wgml_q4gsw_dequantize(const uint8_t *codes, const float *scales, int64_t n, int64_t k, int group,
                                  float *out);
/* Quantises w[n, k] into the flat q4gsw tensors (same shapes as above; scale padding is 0):
 * per (row, group) scale = max|w| / 7 (fp32), code = clamp(round_half_even(w / scale), -8, 7)
 * + 8 with the division in fp32; an all-zero group has scale 0 and codes 8. */
wgml_status wgml_q4gsw_quantize(const float *w, int64_t n, int64_t k, int group, uint8_t *codes, float *scales);

/* Upload (GPU layout above). Each returns a malloc'ed weight whose tensors are persistent
 * tensors of g, or NULL with the error on g's context. */
/* From flat q4gsw: codes [n, ceil(k/2)], scales [ceil(k/G), round_up(n,4)], bias [n] or NULL. */
wgml_qweight *wgml_qweight_upload_q4gsw(wgml_graph *g, const uint8_t *codes, const float *scales, const float *bias,
                                        int64_t n, int64_t k, int group);
/* From GGUF blocks of a weight W[n, k] (ne = [k, n]): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (k a
 * multiple of 32), IQ4_NL (k a multiple of 32), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS (k a
 * multiple of 256), or a plain F32, F16 or BF16
 * tensor (any k; held as f32, QF32); bytes must equal n * wgml_ggml_row_bytes(type, k). The
 * kind, G and (a, b) are as listed above; wgml_qweight_dequantize of the result equals
 * wgml_gguf_dequantize bit for bit. */
wgml_qweight *wgml_qweight_upload_gguf(wgml_graph *g, int type, const void *data, size_t bytes, int64_t n, int64_t k);
/* 1 when wgml_qweight_upload_gguf takes GGUF tensor type `type` (the list above), else 0. */
int wgml_qweight_gguf_on_gpu(int type);
/* Quantises fp32 w[n, k] with wgml_q4gsw_quantize and uploads it (symmetric, group G). */
wgml_qweight *wgml_qweight_quantize(wgml_graph *g, const float *w, int64_t n, int64_t k, int group);
/* Frees the struct and (in the eager graph) its tensors. NULL is fine. Call it before
 * wgml_graph_free of the weight's graph. */
void wgml_qweight_free(wgml_qweight *w);

/* Operators (any kind unless said). */
/* out[..., N] = x[..., K] · dequant(W)ᵀ (+ W's bias); leading dims flatten to M. M <= 4 (8 on
 * a CPU adapter) uses the GEMV kernel, larger M the tiled GEMM kernel. */
wgml_tensor *wgml_qlinear(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w);
/* Input gradient: d_x[..., K] = d_out[..., N] · dequant(W). No gradient for codes or scales. */
wgml_tensor *wgml_qlinear_dx(wgml_graph *g, wgml_tensor *d_out, const wgml_qweight *w);
/* Straight-through requant (every kind but QF32): rewrites w->codes in place from the fp32
 * latent [N, K] at the frozen (a, b), which are per-group constants of every GGUF type, so the
 * rule needs nothing but them. SYM: code = clamp(round_half_even(latent / scale), -8, 7) + 8,
 * scale 0 gives 8. MIN, Q8_MIN: code = clamp(round_half_even((latent - b) / a), 0,
 * 2^bits - 1), a 0 gives 0 (every code is then the weight b). Q8: code =
 * clamp(round_half_even(latent / a), -2^(bits-1), 2^(bits-1) - 1), a 0 gives 0. The weight
 * gradient is wgml_linear_dw. */
wgml_status wgml_qweight_requant(wgml_graph *g, wgml_tensor *latent, const wgml_qweight *w);
/* Embedding lookup in a quantised table W[V, D]: out[..., D] = dequant(W)[ids[...], :] with
 * ids i32 of any shape; ids outside [0, V) are clamped into it on the GPU. */
wgml_tensor *wgml_qembedding(wgml_graph *g, const wgml_qweight *table, wgml_tensor *ids);
/* The lookup in one row part of a table too large for one storage binding: table holds rows
 * row0 .. row0 + n - 1 of the whole; an id in that range gives its row, any other id a zero
 * row, so the sum over the parts is the lookup in the whole table. */
wgml_tensor *wgml_qembedding_rows(wgml_graph *g, const wgml_qweight *table, wgml_tensor *ids, int64_t row0);
/* The whole weight dequantised: f32 [N, K], exactly the host dequantisation (e.g. to start
 * an fp32 latent for straight-through training without a host round trip). */
wgml_tensor *wgml_qweight_dequantize(wgml_graph *g, const wgml_qweight *w);

/* Most weights one wgml_qlinear_multi call takes. */
#define WGML_QLINEAR_MULTI_MAX 3
/* outs[i][..., N_i] = x[..., K] · dequant(W_i)ᵀ (+ W_i's bias) for the n weights W_i =
 * weights[i] (1 <= n <= WGML_QLINEAR_MULTI_MAX; any kinds; every one with x's K and on x's graph),
 * each out a separate f32 tensor of x's shape with the last dim N_i: the values n calls of
 * wgml_qlinear give (the same per-row arithmetic on the GEMV path; test_qw_multi finds them
 * bit-identical), in fewer dispatches. For M <= 4 (8 on a CPU
 * adapter; the rows of x: decode) the weights of one kind and group size go through one GEMV dispatch together
 * (e.g. the q, k, v projections, or gate and up; a weight of another kind, or one past the
 * kernel's binding limit, gets its own dispatch); for larger M, or when x requires a gradient,
 * it is one wgml_qlinear per weight. On error every outs[i] (i < n) is NULL and the status
 * names the op and the argument (weights[i] NULL or invalid, K mismatch, n out of range). */
wgml_status wgml_qlinear_multi(wgml_graph *g, wgml_tensor *x, const wgml_qweight *const *weights, int n,
                               wgml_tensor **outs);

#ifdef __cplusplus
}
#endif
#endif
