#include "tensor/tensor.h"

#include <stdio.h>
#include <string.h>

size_t wgml_dtype_size(wgml_dtype d) { return d == WGML_BOOL ? 1 : 4; }

const char *wgml_dtype_name(wgml_dtype d) {
    switch (d) {
    case WGML_F32: return "f32";
    case WGML_I32: return "i32";
    case WGML_U32: return "u32";
    case WGML_BOOL: return "bool";
    }
    return "?";
}

wgml_dtype wgml_tensor_dtype(const wgml_tensor *t) { return t ? t->dtype : WGML_F32; }
int wgml_tensor_rank(const wgml_tensor *t) { return t ? t->rank : 0; }
int64_t wgml_tensor_numel(const wgml_tensor *t) { return t ? t->numel : 0; }
size_t wgml_tensor_nbytes(const wgml_tensor *t) { return t ? (size_t)t->nbytes : 0; }
int64_t wgml_tensor_dim(const wgml_tensor *t, int i) {
    if (!t) return 0;
    if (i < 0) i += t->rank;
    return i >= 0 && i < t->rank ? t->shape[i] : 0;
}

char *shape_str(char *buf, size_t n, int rank, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

const char *tshape(const wgml_tensor *t) {
    static _Thread_local char ring[8][SHAPE_STR_LEN];
    static _Thread_local int next;
    char *b = ring[next++ & 7];
    if (!t) return strcpy(b, "(null)");
    return shape_str(b, SHAPE_STR_LEN, t->rank, t->shape);
}

int64_t shape_numel(int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

void shape_strides(int rank, const int64_t *shape, int64_t *str) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        str[i] = s;
        s *= shape[i];
    }
}

wgml_status check_tensor(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t) {
    if (!t) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s is NULL", op, arg);
    return gpu_check_alive(ctx);
}

wgml_status check_dtype(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t, wgml_dtype want) {
    if (t->dtype != want)
        return wgml_set_error(ctx, WGML_ERR_DTYPE, "%s: %s must be %s, got %s %s", op, arg, wgml_dtype_name(want),
                              wgml_dtype_name(t->dtype), tshape(t));
    return WGML_OK;
}

wgml_status check_rank(wgml_ctx *ctx, const char *op, const char *arg, const wgml_tensor *t, int lo, int hi) {
    if (t->rank < lo || t->rank > hi) {
        if (lo == hi)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s must have rank %d, got shape %s", op, arg, lo, tshape(t));
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: %s must have rank %d to %d, got shape %s", op, arg, lo, hi,
                              tshape(t));
    }
    return WGML_OK;
}

wgml_status check_operand(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t,
                          wgml_dtype dtype, int lo, int hi) {
    wgml_status s;
    if ((s = check_tensor(ctx, op, arg, t)) || (s = check_dtype(ctx, op, arg, t, dtype)) ||
        (s = check_rank(ctx, op, arg, t, lo, hi)))
        return s;
    return check_graph(ctx, g, op, arg, t);
}

wgml_status check_graph(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t) {
    if (t->graph != g) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: %s belongs to another graph", op, arg);
    return WGML_OK;
}

wgml_status check_same_graph(wgml_ctx *ctx, const char *op, const wgml_tensor *a, const wgml_tensor *b) {
    if (a->graph != b->graph)
        return wgml_set_error(ctx, WGML_ERR_ARG, "%s: the tensors belong to different graphs", op);
    return WGML_OK;
}

wgml_status check_grad_pair(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t,
                            const wgml_tensor *dy) {
    wgml_status s;
    if ((s = check_tensor(ctx, op, arg, t)) || (s = check_dtype(ctx, op, arg, t, WGML_F32)) ||
        (s = check_tensor(ctx, op, "dy", dy)) || (s = check_dtype(ctx, op, "dy", dy, WGML_F32)))
        return s;
    if ((s = check_graph(ctx, g, op, arg, t))) return s;
    return check_same_graph(ctx, op, t, dy);
}

wgml_status check_shape(wgml_ctx *ctx, const char *op, int rank, const int64_t *shape) {
    if (rank < 0 || rank > WGML_MAX_RANK)
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: rank %d is outside 0..%d", op, rank, WGML_MAX_RANK);
    if (rank > 0 && !shape) return wgml_set_error(ctx, WGML_ERR_ARG, "%s: shape is NULL", op);
    char b[SHAPE_STR_LEN];
    for (int i = 0; i < rank; i++) {
        if (shape[i] <= 0)
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: dimension %d of shape %s is %s", op, i,
                                  shape_str(b, sizeof b, rank, shape), shape[i] == 0 ? "zero" : "negative");
        if (shape[i] > ((int64_t)1 << 40))
            return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: dimension %d of shape %s is too large", op, i,
                                  shape_str(b, sizeof b, rank, shape));
    }
    if (shape_numel(rank, shape) > ((int64_t)1 << 40))
        return wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: shape %s has too many elements", op,
                              shape_str(b, sizeof b, rank, shape));
    return WGML_OK;
}

wgml_status broadcast_shapes(int ra, const int64_t *a, int rb, const int64_t *b, int *rank_out, int64_t *out) {
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1) return WGML_ERR_SHAPE;
        out[i] = da == 1 ? db : da;
    }
    *rank_out = r;
    return WGML_OK;
}
