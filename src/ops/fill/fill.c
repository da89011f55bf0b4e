/* Fill: wgml_fill and wgml_full, a value converted to its dtype's 32-bit pattern and written
 * with the graph layer's graph_fill_bits (src/graph/graph_fill.c, which also poisons fresh
 * outputs). */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

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
