/* The op registry's matrix products and attention: mm, bmm, linear, addmm and
 * scaled_dot_product_attention (causal or not; masks and dropout are refused), one wgml op
 * each. */
#include "program/ops_args.h"

/* mm(self, mat2), bmm(self, mat2) */
static wgml_status op_mm(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    return put_op2(b, args, nargs, wgml_mm);
}
static wgml_status op_bmm(pbuild *b, const int32_t *args, int nargs) {
    NEED(3);
    return put_op2(b, args, nargs, wgml_bmm);
}
/* linear(input, weight, bias?) */
static wgml_status op_linear(pbuild *b, const int32_t *args, int nargs) {
    NEED(4);
    wgml_tensor *x = T(b, args, 0), *w = x ? T(b, args, 1) : NULL, *bias = NULL;
    if (!w) return WGML_ERR_ARG;
    if (!is_null(b, args, 2) && !(bias = T(b, args, 2))) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_linear(b->g, x, w, bias), 0);
}
/* addmm(self, mat1, mat2, beta, alpha) */
static wgml_status op_addmm(pbuild *b, const int32_t *args, int nargs) {
    NEED(6);
    int ok = 1;
    float beta = (float)num(b, args, 3, 1.0, &ok), alpha = (float)num(b, args, 4, 1.0, &ok);
    wgml_tensor *c = T(b, args, 0), *x = c ? T(b, args, 1) : NULL, *y = x ? T(b, args, 2) : NULL;
    if (!ok || !y) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_addmm(b->g, c, x, y, beta, alpha), 0);
}

/* scaled_dot_product_attention(q, k, v, attn_mask?, dropout_p, is_causal, scale?, enable_gqa):
 * q [B, Hq, S, D], k/v [B, Hkv, S', D]; masks and dropout are not supported. */
static wgml_status op_sdpa(pbuild *b, const int32_t *args, int nargs) {
    if (nargs != 9 && nargs != 8)
        return wgml_set_error(b->ctx, WGML_ERR_ARG, "program: %s: %d arguments", b->op, nargs);
    int ok = 1;
    if (!is_null(b, args, 3)) return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: attention masks are not supported", b->op);
    if (num(b, args, 4, 0, &ok) != 0.0) return wgml_set_error(b->ctx, WGML_ERR_UNSUPPORTED, "program: %s: dropout is not supported", b->op);
    int causal = iarg(b, args, 5, 0, &ok);
    float scale = (float)num(b, args, 6, 0, &ok);
    wgml_tensor *q = T(b, args, 0), *k = q ? T(b, args, 1) : NULL, *v = k ? T(b, args, 2) : NULL;
    if (!ok || !v) return WGML_ERR_ARG;
    return put(b, OUT(0), wgml_sdpa(b->g, q, k, v, causal, scale), 0);
}

static const prog_op_entry OPS[] = {
    {"aten.mm.default", op_mm},
    {"aten.bmm.default", op_bmm},
    {"aten.linear.default", op_linear},
    {"aten.addmm.default", op_addmm},
    {"aten.scaled_dot_product_attention.default", op_sdpa},
};

const prog_op_table prog_ops_matmul = {OPS, sizeof OPS / sizeof OPS[0], NULL, 0};
