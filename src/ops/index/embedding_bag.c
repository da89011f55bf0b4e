/* embedding_bag (embedding_bag.wgsl): PyTorch's EmbeddingBag forward, the bags given by offsets.
 * No gradient. */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

wgml_tensor *wgml_embedding_bag(wgml_graph *g, wgml_tensor *weight, wgml_tensor *indices, wgml_tensor *offsets, int mode,
                                wgml_tensor *per_sample_weights, int include_last_offset, int64_t padding_idx) {
    const char *op = "embedding_bag";
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    if (check_tensor(ctx, op, "weight", weight) || check_graph(ctx, g, op, "weight", weight) ||
        check_dtype(ctx, op, "weight", weight, WGML_F32) || check_rank(ctx, op, "weight", weight, 2, 2) ||
        check_tensor(ctx, op, "indices", indices) || check_graph(ctx, g, op, "indices", indices) ||
        check_dtype(ctx, op, "indices", indices, WGML_I32) || check_rank(ctx, op, "indices", indices, 1, 1) ||
        check_tensor(ctx, op, "offsets", offsets) || check_graph(ctx, g, op, "offsets", offsets) ||
        check_dtype(ctx, op, "offsets", offsets, WGML_I32) || check_rank(ctx, op, "offsets", offsets, 1, 1))
        return NULL;
    if (mode < 0 || mode > 2) {
        wgml_set_error(ctx, WGML_ERR_ARG, "embedding_bag: mode %d (0 sum, 1 mean, 2 max)", mode);
        return NULL;
    }
    if (per_sample_weights) {
        if (check_tensor(ctx, op, "per_sample_weights", per_sample_weights) ||
            check_graph(ctx, g, op, "per_sample_weights", per_sample_weights) ||
            check_dtype(ctx, op, "per_sample_weights", per_sample_weights, WGML_F32))
            return NULL;
        if (mode != 0 || per_sample_weights->numel != indices->numel) {
            wgml_set_error(ctx, WGML_ERR_ARG, "embedding_bag: per_sample_weights %s need mode sum and one weight per "
                           "index (indices %s)", tshape(per_sample_weights), tshape(indices));
            return NULL;
        }
    }
    int64_t bags = offsets->numel - (include_last_offset ? 1 : 0), dim = weight->shape[1];
    if (bags < 0 || weight->numel >= ((int64_t)1 << 31) || bags * dim >= ((int64_t)1 << 31)) {
        wgml_set_error(ctx, WGML_ERR_ARG, "embedding_bag: offsets %s%s give no bags, or the sizes pass 2^31",
                       tshape(offsets), include_last_offset ? " with include_last_offset" : "");
        return NULL;
    }
    int64_t shape[2] = {bags, dim};
    wgml_tensor *out = graph_output(g, op, WGML_F32, 2, shape);
    if (!out) return NULL;
    if (bags == 0) return out;
    struct {
        uint32_t n, dim, bags, n_idx, rows, n_off;
        int32_t pad_idx;
        uint32_t pad;
    } p = {(uint32_t)(bags * dim), (uint32_t)dim, (uint32_t)bags, (uint32_t)indices->numel, (uint32_t)weight->shape[0],
           /* with include_last_offset the last offset ends the last bag; without, the indices' end */
           (uint32_t)offsets->numel, padding_idx >= 0 && padding_idx < weight->shape[0] ? (int32_t)padding_idx : INT32_MIN,
           0};
    char prelude[96];
    snprintf(prelude, sizeof prelude, "const MODE: u32 = %du;\nconst HAS_W: bool = %s;\n", mode,
             per_sample_weights ? "true" : "false");
    wgml_tensor *ro[4] = {weight, indices, offsets, per_sample_weights ? per_sample_weights : GRAPH_UNUSED};
    if (graph_dispatch(g, op, "embedding_bag", prelude, ro, 4, &out, 1, &p, sizeof p, ((uint64_t)p.n + 255) / 256)) {
        wgml_tensor_free(out);
        return NULL;
    }
    return out;
}
