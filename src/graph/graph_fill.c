/* The graph layer's own fill: one 32-bit pattern into every word of a tensor. graph.c poisons
 * fresh eager outputs with it (NaN bits), and the fill op family (ops/fill) builds wgml_fill
 * and wgml_full on it, so the graph layer needs nothing from the ops. */
#include "graph/graph.h"

wgml_status graph_fill_bits(wgml_graph *g, wgml_tensor *t, uint32_t bits) {
    uint64_t words = tensor_binding_size(t) / 4;
    if (words > 0xFFFFFFFFull)
        return wgml_set_error(graph_ctx(g), WGML_ERR_LIMIT, "fill: %llu words is too many", (unsigned long long)words);
    uint32_t params[2] = {(uint32_t)words, bits};
    return graph_dispatch(g, "fill", "graph_fill", NULL, NULL, 0, &t, 1, params, sizeof params, (words + 255) / 256);
}
