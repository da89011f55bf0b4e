/* Fill: full, wgml_fill, and the NaN poisoning of fresh outputs (graph_fill_bits). */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

wgml_status graph_fill_bits(wgml_graph *g, wgml_tensor *t, uint32_t bits) {
    uint64_t words = tensor_binding_size(t) / 4;
    if (words > 0xFFFFFFFFull)
        return wgml_set_error(graph_ctx(g), WGML_ERR_LIMIT, "fill: %llu words is too many", (unsigned long long)words);
    uint32_t params[2] = {(uint32_t)words, bits};
    return graph_dispatch(g, "fill", "fill", NULL, NULL, 0, &t, 1, params, sizeof params, (words + 255) / 256);
}

static wgml_status value_bits(wgml_ctx *ctx, const char *op, wgml_dtype dtype, double value, uint32_t *bits) {
    switch (dtype) {
    case WGML_F32: {
        float f = (float)value;
        memcpy(bits, &f, 4);
        return WGML_OK;
    }
    case WGML_I32:
        if (!(value >= -2147483648.0 && value <= 2147483647.0) || value != floor(value))
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: value %g is not an i32", op, value);
        *bits = (uint32_t)(int32_t)value;
        return WGML_OK;
    case WGML_U32:
        if (!(value >= 0 && value <= 4294967295.0) || value != floor(value))
            return wgml_set_error(ctx, WGML_ERR_ARG, "%s: value %g is not a u32", op, value);
        *bits = (uint32_t)value;
        return WGML_OK;
    case WGML_BOOL:
        *bits = value != 0 ? 0x01010101u : 0u;
        return WGML_OK;
    }
    return wgml_set_error(ctx, WGML_ERR_DTYPE, "%s: unknown dtype", op);
}

wgml_status wgml_fill(wgml_graph *g, wgml_tensor *t, double value) {
    if (!g) return wgml_set_error(NULL, WGML_ERR_ARG, "fill: graph is NULL");
    wgml_ctx *ctx = graph_ctx(g);
    wgml_status s = check_tensor(ctx, "fill", "t", t);
    if (s) return s;
    if ((s = check_graph(ctx, g, "fill", "t", t))) return s;
    uint32_t bits = 0;
    if ((s = value_bits(ctx, "fill", t->dtype, value, &bits))) return s;
    return graph_fill_bits(g, t, bits);
}

wgml_tensor *wgml_full(wgml_graph *g, wgml_dtype dtype, int rank, const int64_t *shape, double value) {
    if (!g) return NULL;
    uint32_t bits = 0;
    if (value_bits(graph_ctx(g), "full", dtype, value, &bits)) return NULL;
    wgml_tensor *t = graph_output(g, "full", dtype, rank, shape);
    if (t && graph_fill_bits(g, t, bits)) {
        wgml_tensor_free(t);
        return NULL;
    }
    return t;
}
