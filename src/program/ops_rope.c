/* The op registry's rotary embeddings: the Vulkan partitioner replaces the RoPE subgraphs it
 * recognises by fused operators (backends/vulkan/patterns: rope.py, rope_hf.py; their meaning
 * is the reference implementation in backends/vulkan/custom_ops_lib.py), e.g. in a
 * transformers Phi-3 export. Each is composed of wgml's elementwise and shape ops, with
 * PyTorch's broadcasting:
 *   et_vk.apply_rotary_emb_hf(xq, xk, cos, sin, start_pos) -> (q, k): cos and sin sliced to
 *     rows [start_pos, start_pos + xq.size(1)), unsqueezed at dim 1; the first rd = cos.size(-1)
 *     features rotate as x·cos + rotate_half(x)·sin (rotate_half(x) = cat(−x2, x1), x1 and x2
 *     the halves), the others pass;
 *   et_vk.apply_rotary_emb(xq, xk, cos, sin) -> (q, k): pairs (x[2j], x[2j+1]) rotate by
 *     (cos[j], sin[j]); cos [S, D/2] broadcasts over dims 1 and −1 of [B, S, H, D/2], a
 *     [S, H, D/2] table over the last three;
 *   et_vk.apply_rotary_emb_interleaved(x [B, N, C], freqs_cis) -> out: the same pair rotation,
 *     (cos, sin) interleaved in freqs_cis read as [N, C/2, 2]. */
#include "program/ops_args.h"

static wgml_tensor *unsqueeze(pbuild *b, wgml_tensor *t, int at) {
    int64_t s[WGML_MAX_RANK];
    int r = wgml_tensor_rank(t);
    if (r >= WGML_MAX_RANK) return NULL;
    for (int i = 0, k = 0; i <= r; i++) s[i] = i == at ? 1 : wgml_tensor_dim(t, k++);
    return wgml_reshape(b->g, t, r + 1, s);
}

/* x·cos + rotate_half(x)·sin over the first rd features of x (the rest passes). */
static wgml_tensor *rope_hf_one(pbuild *b, wgml_tensor *x, wgml_tensor *cos, wgml_tensor *sin) {
    int64_t d = wgml_tensor_dim(x, -1), rd = wgml_tensor_dim(cos, -1), h = rd / 2;
    wgml_tensor *rot = rd < d ? wgml_slice(b->g, x, -1, 0, rd, 1) : x;
    wgml_tensor *x1 = h ? wgml_slice(b->g, rot, -1, 0, h, 1) : NULL, *x2 = wgml_slice(b->g, rot, -1, h, rd, 1);
    wgml_tensor *half[2] = {x2 ? wgml_neg(b->g, x2) : NULL, x1};
    if (!rot || !half[0] || (h && !x1)) return NULL;
    wgml_tensor *rh = h ? wgml_cat(b->g, half, 2, -1) : half[0];
    wgml_tensor *y = rh ? wgml_add(b->g, wgml_mul(b->g, rot, cos), wgml_mul(b->g, rh, sin), 1.0f) : NULL;
    if (!y || rd == d) return y;
    wgml_tensor *parts[2] = {y, wgml_slice(b->g, x, -1, rd, d, 1)};
    return parts[1] ? wgml_cat(b->g, parts, 2, -1) : NULL;
}

/* The rotation of the pairs (x[.., 2j], x[.., 2j+1]) by cos, sin shaped like x's [.., D/2]
 * view (broadcasting): out = (r·cos − i·sin, r·sin + i·cos) interleaved again. */
static wgml_tensor *rope_pairs(pbuild *b, wgml_tensor *x, wgml_tensor *cos, wgml_tensor *sin) {
    int r = wgml_tensor_rank(x);
    int64_t s[WGML_MAX_RANK + 1], xs[WGML_MAX_RANK], d = wgml_tensor_dim(x, -1);
    if (d % 2 || r >= WGML_MAX_RANK) return NULL;
    for (int i = 0; i < r; i++) s[i] = xs[i] = wgml_tensor_dim(x, i);
    s[r - 1] = d / 2, s[r] = 2;
    wgml_tensor *p = wgml_reshape(b->g, x, r + 1, s);
    wgml_tensor *re = p ? wgml_slice(b->g, p, -1, 0, 1, 1) : NULL, *im = p ? wgml_slice(b->g, p, -1, 1, 2, 1) : NULL;
    cos = unsqueeze(b, cos, wgml_tensor_rank(cos)), sin = unsqueeze(b, sin, wgml_tensor_rank(sin));
    if (!re || !im || !cos || !sin) return NULL;
    wgml_tensor *out[2] = {wgml_sub(b->g, wgml_mul(b->g, re, cos), wgml_mul(b->g, im, sin), 1.0f),
                           wgml_add(b->g, wgml_mul(b->g, re, sin), wgml_mul(b->g, im, cos), 1.0f)};
    wgml_tensor *y = out[0] && out[1] ? wgml_cat(b->g, out, 2, -1) : NULL;
    return y ? wgml_reshape(b->g, y, r, xs) : NULL;
}

/* Stores the two results of a (q, k) rotary op into the ValueList at args[k]. */
static wgml_status put_pair(pbuild *b, const int32_t *args, int k, wgml_tensor *q, wgml_tensor *kk) {
    size_t no;
    const int32_t *outs = vlist(b, args, k, &no);
    if (!outs) return WGML_ERR_ARG;
    if (no != 2) return fail(b, WGML_ERR_ARG, "expected 2 outputs", k);
    if (!q || !kk) return wgml_last_status(b->ctx) ? wgml_last_status(b->ctx) : fail(b, WGML_ERR_SHAPE, "shapes do not fit the rotation", 0);
    wgml_status s = put(b, outs[0], q, 0);
    return s ? s : put(b, outs[1], kk, 0);
}

/* et_vk.apply_rotary_emb_hf(xq, xk, freqs_cos, freqs_sin, start_pos) */
static wgml_status op_rope_hf(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    int ok = 1;
    wgml_tensor *q = T(b, args, 0), *k = q ? T(b, args, 1) : NULL, *c = k ? T(b, args, 2) : NULL, *s = c ? T(b, args, 3) : NULL;
    int64_t start = inum(b, args, 4, 0, &ok);
    if (!s || !ok) return WGML_ERR_ARG;
    if (wgml_tensor_rank(q) < 2 || wgml_tensor_rank(c) < 1 || wgml_tensor_rank(s) != wgml_tensor_rank(c))
        return fail(b, WGML_ERR_SHAPE, "xq needs rank >= 2 and the tables one rank", 2);
    int64_t rd = wgml_tensor_dim(c, -1);
    if (wgml_tensor_dim(s, -1) != rd || rd > wgml_tensor_dim(q, -1) || rd > wgml_tensor_dim(k, -1) || rd % 2)
        return fail(b, WGML_ERR_SHAPE, "the tables' last dim must be even and at most xq's and xk's", 2);
    int64_t rows = wgml_tensor_dim(c, 0), end = start + wgml_tensor_dim(q, 1);
    if (start < 0 || start >= rows) return fail(b, WGML_ERR_ARG, "start_pos outside the tables", 4);
    end = end > rows ? rows : end;
    c = unsqueeze(b, wgml_slice(b->g, c, 0, start, end, 1), 1);
    s = unsqueeze(b, wgml_slice(b->g, s, 0, start, end, 1), 1);
    if (!c || !s) return wgml_last_status(b->ctx);
    return put_pair(b, args, 5, rope_hf_one(b, q, c, s), rope_hf_one(b, k, c, s));
}

/* The llama tables [S, D/2] viewed for broadcasting against x's pairs [B, S, H, D/2] (as
 * [1, S, 1, D/2]); a [S, H, D/2] table as it is (it aligns with the last three dims). */
static wgml_tensor *llama_table(pbuild *b, wgml_tensor *t, wgml_tensor *x) {
    int r = wgml_tensor_rank(x), tr = wgml_tensor_rank(t);
    if (tr == 3) return t;
    if (tr != 2 || wgml_tensor_dim(t, 0) != wgml_tensor_dim(x, 1) || 2 * wgml_tensor_dim(t, 1) != wgml_tensor_dim(x, -1))
        return NULL;
    int64_t s[WGML_MAX_RANK];
    for (int i = 0; i < r; i++) s[i] = i == 1 ? wgml_tensor_dim(t, 0) : i == r - 1 ? wgml_tensor_dim(t, 1) : 1;
    return wgml_reshape(b->g, t, r, s);
}

/* et_vk.apply_rotary_emb(xq, xk, freqs_cos, freqs_sin) */
static wgml_status op_rope(pbuild *b, const int32_t *args, int nargs) {
    NEED(5);
    wgml_tensor *q = T(b, args, 0), *k = q ? T(b, args, 1) : NULL, *c = k ? T(b, args, 2) : NULL, *s = c ? T(b, args, 3) : NULL;
    if (!s) return WGML_ERR_ARG;
    if (wgml_tensor_rank(q) < 3 || wgml_tensor_rank(k) != wgml_tensor_rank(q) || wgml_tensor_rank(c) != wgml_tensor_rank(s))
        return fail(b, WGML_ERR_SHAPE, "xq and xk need one rank (at least 3), the tables another", 2);
    wgml_tensor *cq = llama_table(b, c, q), *sq = llama_table(b, s, q);
    if (!cq || !sq) return fail(b, WGML_ERR_SHAPE, "the tables must be [S, D/2] or [S, H, D/2]", 2);
    return put_pair(b, args, 4, rope_pairs(b, q, cq, sq), rope_pairs(b, k, cq, sq));
}

/* et_vk.apply_rotary_emb_interleaved(x [B, N, C], freqs_cis (N·C elements)) */
static wgml_status op_rope_interleaved(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    wgml_tensor *x = T(b, args, 0), *f = x ? T(b, args, 1) : NULL;
    if (!f) return WGML_ERR_ARG;
    if (wgml_tensor_rank(x) != 3 || wgml_tensor_dim(x, 2) % 2 || wgml_tensor_numel(f) != wgml_tensor_dim(x, 1) * wgml_tensor_dim(x, 2))
        return fail(b, WGML_ERR_SHAPE, "x must be [B, N, C] (C even) and freqs_cis hold N·C elements", 1);
    int64_t fs[3] = {wgml_tensor_dim(x, 1), wgml_tensor_dim(x, 2) / 2, 2};
    wgml_tensor *t = wgml_reshape(b->g, f, 3, fs);
    wgml_tensor *c = t ? wgml_reshape(b->g, wgml_slice(b->g, t, 2, 0, 1, 1), 2, fs) : NULL;
    wgml_tensor *s = t ? wgml_reshape(b->g, wgml_slice(b->g, t, 2, 1, 2, 1), 2, fs) : NULL;
    return c && s ? put(b, OUT(0), rope_pairs(b, x, c, s), 0) : wgml_last_status(b->ctx);
}

static const prog_op_entry OPS[] = {
    {"et_vk.apply_rotary_emb_hf.default", op_rope_hf},
    {"et_vk.apply_rotary_emb.default", op_rope},
    {"et_vk.apply_rotary_emb_interleaved.default", op_rope_interleaved},
};

const prog_op_table prog_ops_rope = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
