/* The straight-through 4-bit linear: the forward reads the 4-bit codes, the weight gradient
 * goes to an fp32 latent copy of the weight (which wgml_qweight_requant later writes back into the
 * codes at the frozen scales).
 *
 * y[m, n] = Σ_k x[m, k]·Wq[n, k] (+ bias[n]), Wq = dequant(codes); the rounding is taken as
 * the identity (∂Wq/∂latent = I), so with dy = ∂L/∂y:
 *   dx      = dy·Wq          (wgml_qlinear_dx: through the 4-bit weight)
 *   dlatent = Σ_m dyᵀ·x      (wgml_linear_dw, over every leading dim of x)
 * The bias stays frozen. */
#include "ops/qweight/qw_ste.h"
#include "ops/qweight/qw_internal.h"

#include <string.h>

static wgml_status ste_backward(wgml_graph *g, const graph_op *op, wgml_tensor *dy, wgml_tensor **dx) {
    wgml_qweight w;
    memcpy(&w, op->attrs, sizeof w);
    if (graph_op_wants(op, 0)) dx[0] = wgml_qlinear_dx(g, dy, &w);
    if (graph_op_wants(op, 1)) { /* straight into the caller's gradient tensor when it can */
        bool acc = false;
        wgml_tensor *dw = graph_grad_sink(op, 1, &acc);
        if (!dw) {
            acc = false;
            dw = wgml_zeros(g, WGML_F32, 2, op->in[1]->shape);
        }
        dx[1] = dw && !wgml_linear_dw(g, dy, op->in[0], dw, acc) ? dw : NULL;
    }
    return grad_result(g, op, dx);
}

wgml_tensor *qw_ste_linear(wgml_graph *g, wgml_tensor *x, const wgml_qweight *w, wgml_tensor *latent) {
    if (!g) return NULL;
    wgml_ctx *ctx = graph_ctx(g);
    const char *op = "qw_ste_linear";
    if (!w) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: w is NULL", op);
        return NULL;
    }
    if (check_tensor(ctx, op, "latent", latent) || check_dtype(ctx, op, "latent", latent, WGML_F32)) return NULL;
    if (latent->graph != g) {
        wgml_set_error(ctx, WGML_ERR_ARG, "%s: latent belongs to another graph", op);
        return NULL;
    }
    if (latent->rank != 2 || latent->shape[0] != w->n || latent->shape[1] != w->k) {
        wgml_set_error(ctx, WGML_ERR_SHAPE, "%s: latent %s must be [%lld, %lld] like the weight", op, tshape(latent),
                       (long long)w->n, (long long)w->k);
        return NULL;
    }
    /* the product without qlinear's record (its rule would give x a second gradient); this
     * op's record covers x and the latent */
    wgml_tensor *y = qw_linear_product(g, op, x, w);
    if (!y) return NULL;
    graph_op rec = {.name = op, .backward = ste_backward, .n_in = 2, .in = {x, latent}, .out = y};
    memcpy(rec.attrs, w, sizeof *w); /* the struct's tensors belong to the graph */
    return graph_record_op(g, &rec);
}
