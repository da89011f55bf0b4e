/* Convolution: wgml_conv, PyTorch's convolution over 1-3 spatial dims, plain or transposed, with
 * stride, padding, dilation, output_padding and groups (torch.nn.functional.conv{1,2,3}d and
 * conv_transpose{1,2,3}d).
 *
 * Today's form is built from public ops, so every differentiable piece has its autograd rule
 * and the convolution needs no rule or kernel of its own: one gather (index_select with a
 * host-built index) of the input, laid out channels first with one zero appended for the
 * padding, into columns [G, Cin/G·K, N·np] (im2col; K the kernel's elements, np the output
 * positions), then one batched matmul with the weight as [G, Cout/G, Cin/G·K]. The geometry
 * lives in one place, struct conv_geom: window slot j of output position o reads, in dim d, the
 * virtual coordinate v = o·st + j·dl + off; the input element there is v/up when v is a
 * multiple of up (up > 1: the stride-dilated input of a transposed convolution) inside
 * [0, in), and padding otherwise. A transposed convolution is the same gather over the
 * stride-dilated, padded input (up = stride, off = padding and a negative dl read the kernel
 * flipped), with the weight [Cin, Cout/G, k...] regrouped to [G, Cout/G, Cin/G·K]. The gathered
 * copy is K times the input: CONV_GATHER_MAX bounds it (a direct kernel would lift that). */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONV_GATHER_MAX ((int64_t)1 << 26) /* the most gathered elements (and host index entries) */
#define CONV_ARG_MAX ((int64_t)1 << 20)    /* the largest kernel, stride, padding, dilation or group count */

typedef struct conv_geom {
    int nd;
    int64_t in[3], out[3], k[3], st[3], dl[3], off[3], up[3];
} conv_geom;

/* a·b, or CONV_GATHER_MAX + 1 when it exceeds CONV_GATHER_MAX (both operands >= 0). */
static int64_t cap_mul(int64_t a, int64_t b) { return a && b > CONV_GATHER_MAX / a ? CONV_GATHER_MAX + 1 : a * b; }
static int64_t cap_prod(const int64_t *a, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p = cap_mul(p, a[i]);
    return p;
}

/* The input coordinate slot j of position o reads in dim d, or -1 for padding. */
static int64_t geom_coord(const conv_geom *c, int d, int64_t o, int64_t j) {
    int64_t v = o * c->st[d] + j * c->dl[d] + c->off[d];
    if (v < 0 || v % c->up[d]) return -1;
    v /= c->up[d];
    return v < c->in[d] ? v : -1;
}

/* table[p·kk + j]: the row-major offset over the spatial dims of the input element that slot j
 * of output position p reads, -1 for padding. The caller has checked np·kk <= CONV_GATHER_MAX.
 * NULL when out of host memory. */
static int64_t *geom_table(const conv_geom *c) {
    int64_t np = cap_prod(c->out, c->nd), kk = cap_prod(c->k, c->nd);
    int64_t *t = malloc((size_t)(np * kk) * sizeof *t);
    if (!t) return NULL;
    for (int64_t p = 0; p < np; p++)
        for (int64_t j = 0; j < kk; j++) {
            int64_t off = 0, pr = p, jr = j, o[3], s[3];
            for (int d = c->nd - 1; d >= 0; d--) o[d] = pr % c->out[d], pr /= c->out[d], s[d] = jr % c->k[d], jr /= c->k[d];
            for (int d = 0; d < c->nd && off >= 0; d++) {
                int64_t v = geom_coord(c, d, o[d], s[d]);
                off = v < 0 ? -1 : off * c->in[d] + v;
            }
            t[p * kk + j] = off;
        }
    return t;
}

/* The sizes of one call, checked. */
typedef struct conv_plan {
    conv_geom g;
    int unbatched;               /* x was [C, in...]: a batch of one, dropped again at the end */
    int64_t n, c, co, groups, cig, cog, kk, np, plane;
} conv_plan;

/* Sets "conv: x [..], w [..]: <what>[ of spatial dim d] is <v><why>" and returns 1. */
static int bad(wgml_ctx *ctx, wgml_status s, const wgml_tensor *x, const wgml_tensor *w, const char *what, int d, long long v,
               const char *why) {
    char dim[32] = "";
    if (d >= 0) snprintf(dim, sizeof dim, " of spatial dim %d", d);
    wgml_set_error(ctx, s, "conv: x %s, w %s: %s%s is %lld%s", tshape(x), tshape(w), what, dim, v, why);
    return 1;
}

/* The value of a per-dim argument (NULL: def for every dim). */
static int64_t per_dim(const int64_t *a, int d, int64_t def) { return a ? a[d] : def; }

/* Checks the arguments as PyTorch does and fills p; an error naming the argument and the shapes
 * otherwise (returns non-zero). */
static int conv_check(wgml_ctx *ctx, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias, int nd, const int64_t *stride,
                      const int64_t *padding, const int64_t *dilation, int transposed, const int64_t *output_padding,
                      int64_t groups, conv_plan *p) {
    if (nd < 1 || nd > 3) {
        wgml_set_error(ctx, WGML_ERR_ARG, "conv: %d spatial dims (1, 2 or 3)", nd);
        return 1;
    }
    if (x->rank != nd + 2 && x->rank != nd + 1) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "conv: x %s must be [N, C, in...] or [C, in...] with %d spatial dims", tshape(x), nd);
        return 1;
    }
    if (w->rank != nd + 2) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "conv: w %s must be [%s, k...] with %d spatial dims", tshape(w),
                       transposed ? "Cin, Cout/groups" : "Cout, Cin/groups", nd);
        return 1;
    }
    p->unbatched = x->rank == nd + 1;
    p->n = p->unbatched ? 1 : x->shape[0];
    p->c = x->shape[x->rank - nd - 1];
    p->groups = groups;
    if (groups < 1 || groups > CONV_ARG_MAX) return bad(ctx, WGML_ERR_ARG, x, w, "groups", -1, groups, " (1 to 2^20)");
    int64_t w0 = w->shape[0], w1 = w->shape[1];
    if (p->c % groups)
        return bad(ctx, WGML_ERR_SHAPE, x, w, "groups", -1, groups, ", which does not divide x's channels");
    if (transposed ? w0 != p->c : w0 % groups || w1 * groups != p->c) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "conv: w %s does not fit x %s with groups %lld: w must be [%s, k...]", tshape(w), tshape(x),
                       (long long)groups, transposed ? "Cin, Cout/groups" : "Cout, Cin/groups");
        return 1;
    }
    p->cig = p->c / groups;
    p->co = transposed ? w1 * groups : w0;
    p->cog = p->co / groups;
    if (bias && (bias->rank != 1 || bias->shape[0] != p->co)) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "conv: bias %s must be [%lld] (the output channels of w %s)", tshape(bias), (long long)p->co,
                       tshape(w));
        return 1;
    }
    conv_geom *g = &p->g;
    g->nd = nd;
    for (int d = 0; d < nd; d++) {
        int64_t st = per_dim(stride, d, 1), pd = per_dim(padding, d, 0), dl = per_dim(dilation, d, 1);
        int64_t op = per_dim(output_padding, d, 0);
        if (st < 1 || st > CONV_ARG_MAX) return bad(ctx, WGML_ERR_ARG, x, w, "stride", d, st, " (1 to 2^20)");
        if (pd < 0 || pd > CONV_ARG_MAX) return bad(ctx, WGML_ERR_ARG, x, w, "padding", d, pd, " (0 to 2^20)");
        if (dl < 1 || dl > CONV_ARG_MAX) return bad(ctx, WGML_ERR_ARG, x, w, "dilation", d, dl, " (1 to 2^20)");
        if (op < 0 || (transposed ? op >= st && op >= dl : op != 0))
            return bad(ctx, WGML_ERR_ARG, x, w, "output_padding", d, op,
                       transposed ? " (must be smaller than the stride or the dilation)"
                                  : " (only a transposed convolution takes one)");
        g->in[d] = x->shape[x->rank - nd + d], g->k[d] = w->shape[2 + d];
        if (g->k[d] > CONV_ARG_MAX) return bad(ctx, WGML_ERR_ARG, x, w, "kernel size", d, g->k[d], " (at most 2^20)");
        if (transposed) { /* the stride-dilated input, padded by dl·(k−1) − pd, read with the kernel flipped */
            g->out[d] = (g->in[d] - 1) * st - 2 * pd + dl * (g->k[d] - 1) + op + 1;
            g->st[d] = 1, g->dl[d] = -dl, g->off[d] = pd, g->up[d] = st;
        } else {
            int64_t span = g->in[d] + 2 * pd - dl * (g->k[d] - 1) - 1;
            g->out[d] = span < 0 ? 0 : span / st + 1;
            g->st[d] = st, g->dl[d] = dl, g->off[d] = -pd, g->up[d] = 1;
        }
        if (g->out[d] < 1)
            return bad(ctx, WGML_ERR_SHAPE, x, w, "the output extent", d, g->out[d],
                       transposed ? " (the padding removes every output)" : " (the dilated kernel is larger than the padded input)");
    }
    p->kk = cap_prod(g->k, nd), p->np = cap_prod(g->out, nd), p->plane = cap_prod(g->in, nd);
    int64_t cols = cap_mul(cap_mul(cap_mul(groups, cap_mul(p->cig, p->kk)), p->n), p->np);
    if (cols > CONV_GATHER_MAX || cap_mul(p->np, p->kk) > CONV_GATHER_MAX || cap_mul(cap_mul(p->c, p->n), p->plane) >= CONV_GATHER_MAX) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "conv: x %s, w %s: the gathered columns would exceed %lld elements", tshape(x), tshape(w),
                       (long long)CONV_GATHER_MAX);
        return 1;
    }
    return 0;
}

/* The i32 gather index of the columns: rows (group, ci, slot) = (channel, slot), then (batch,
 * position); padding reads the zero appended after the N·C·plane input elements. */
static int32_t *conv_index(const conv_plan *p) {
    int64_t *tab = geom_table(&p->g);
    int64_t n_idx = p->c * p->kk * p->n * p->np, padat = p->c * p->n * p->plane, e = 0;
    int32_t *idx = tab ? malloc((size_t)n_idx * sizeof *idx) : NULL;
    if (idx)
        for (int64_t ch = 0; ch < p->c; ch++)
            for (int64_t j = 0; j < p->kk; j++)
                for (int64_t bi = 0; bi < p->n; bi++)
                    for (int64_t q = 0; q < p->np; q++) {
                        int64_t t = tab[q * p->kk + j];
                        idx[e++] = (int32_t)(t < 0 ? padat : (ch * p->n + bi) * p->plane + t);
                    }
    free(tab);
    return idx;
}

/* The intermediates of one call, freed at its end (eager graph: the recorded dispatches keep
 * their ranges; in a built graph wgml_tensor_free does nothing and the plan places them). */
typedef struct conv_tmps {
    wgml_tensor *t[24];
    int n;
} conv_tmps;

static wgml_tensor *tmp(conv_tmps *k, wgml_tensor *t) {
    if (t && k->n < (int)(sizeof k->t / sizeof k->t[0])) k->t[k->n++] = t;
    return t;
}

/* The columns [G, Cin/G·K, N·np]: x channels first, flat, one zero appended, gathered. */
static wgml_tensor *conv_columns(wgml_graph *g, wgml_tensor *x, const conv_plan *p, conv_tmps *k) {
    wgml_ctx *ctx = graph_ctx(g);
    int64_t n_idx = p->c * p->kk * p->n * p->np;
    int32_t *idx = conv_index(p);
    wgml_tensor *it = idx ? tmp(k, wgml_tensor_new(g, WGML_I32, 1, &n_idx)) : NULL;
    if (!idx) wgml_set_error(ctx, WGML_ERR_OOM, "conv: out of host memory for a %lld-entry gather index", (long long)n_idx);
    if (it && wgml_tensor_write(it, idx, (size_t)n_idx * sizeof *idx)) it = NULL;
    free(idx);
    if (!it) return NULL;
    int64_t ncp[3] = {p->n, p->c, p->plane}, flat[2] = {1, p->c * p->n * p->plane}, one[2] = {1, 1};
    int64_t c3[3] = {p->groups, p->cig * p->kk, p->n * p->np};
    int perm3[3] = {1, 0, 2};
    wgml_tensor *xc = tmp(k, wgml_reshape(g, x, 3, ncp));
    if (xc && p->n > 1) xc = tmp(k, wgml_permute(g, xc, perm3));
    wgml_tensor *parts[2] = {xc ? tmp(k, wgml_reshape(g, xc, 2, flat)) : NULL, tmp(k, wgml_zeros(g, WGML_F32, 2, one))};
    wgml_tensor *padded = parts[0] && parts[1] ? tmp(k, wgml_cat(g, parts, 2, 1)) : NULL;
    wgml_tensor *cols = padded ? tmp(k, wgml_index_select(g, padded, 1, it)) : NULL;
    return cols ? tmp(k, wgml_reshape(g, cols, 3, c3)) : NULL;
}

wgml_tensor *wgml_conv(wgml_graph *g, wgml_tensor *x, wgml_tensor *w, wgml_tensor *bias, int nd, const int64_t *stride,
                       const int64_t *padding, const int64_t *dilation, int transposed, const int64_t *output_padding,
                       int64_t groups) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_operand(ctx, g, "conv", "x", x, WGML_F32, 2, 5) || check_operand(ctx, g, "conv", "w", w, WGML_F32, 3, 5) ||
        (bias && check_operand(ctx, g, "conv", "bias", bias, WGML_F32, 1, 1)))
        return NULL;
    conv_plan p;
    if (conv_check(ctx, x, w, bias, nd, stride, padding, dilation, transposed, output_padding, groups, &p)) return NULL;
    conv_tmps k = {.n = 0};
    wgml_tensor *cols = conv_columns(g, x, &p, &k), *y = NULL;
    int64_t kc = p.cig * p.kk, wg3[3] = {p.groups, p.cog, kc}, wg4[4] = {p.groups, p.cig, p.cog, p.kk};
    int perm3[3] = {1, 0, 2}, perm4[4] = {0, 2, 1, 3};
    wgml_tensor *wg = NULL;
    if (cols && transposed) {
        wgml_tensor *w4 = tmp(&k, wgml_reshape(g, w, 4, wg4));
        wgml_tensor *wp = w4 ? tmp(&k, wgml_permute(g, w4, perm4)) : NULL;
        wg = wp ? tmp(&k, wgml_reshape(g, wp, 3, wg3)) : NULL;
    } else if (cols) {
        wg = tmp(&k, wgml_reshape(g, w, 3, wg3));
    }
    if (wg && p.cog == 1) { /* one output channel per group (depthwise): a matmul of one row per group would waste
                             * most of its tiles (~100x slower on lavapipe); a product and a column sum instead */
        int64_t wc[3] = {p.groups, kc, 1};
        int mid = 1;
        wgml_tensor *wcol = tmp(&k, wgml_reshape(g, wg, 3, wc));
        wgml_tensor *prod = wcol ? tmp(&k, wgml_mul(g, cols, wcol)) : NULL;
        y = prod ? tmp(&k, wgml_sum(g, prod, &mid, 1, 1)) : NULL;
    } else if (wg) {
        y = tmp(&k, wgml_matmul(g, wg, cols, 0, 0)); /* [G, Cout/G, N·np] */
    }
    int64_t cnp[3] = {p.co, p.n, p.np}, ncop[3] = {p.n, p.co, p.np}, bc[2] = {p.co, 1};
    if (y && p.n > 1) {
        wgml_tensor *y3 = tmp(&k, wgml_reshape(g, y, 3, cnp));
        y = y3 ? tmp(&k, wgml_permute(g, y3, perm3)) : NULL;
    } else if (y) {
        y = tmp(&k, wgml_reshape(g, y, 3, ncop));
    }
    if (y && bias) {
        wgml_tensor *b2 = tmp(&k, wgml_reshape(g, bias, 2, bc));
        y = b2 ? tmp(&k, wgml_add(g, y, b2, 1.0f)) : NULL;
    }
    int64_t os[5];
    int r = 0;
    if (!p.unbatched) os[r++] = p.n;
    os[r++] = p.co;
    for (int d = 0; d < nd; d++) os[r++] = p.g.out[d];
    wgml_tensor *out = y ? wgml_reshape(g, y, r, os) : NULL;
    for (int i = 0; i < k.n; i++) wgml_tensor_free(k.t[i]); /* out is a view: its base lives while it does */
    return out;
}
