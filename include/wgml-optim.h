/* wgml-optim.h: the optimizers (src/optim): AdamW and SGD over many parameters in flat buffers,
 * stepping on the GPU. Builds on wgml.h. Its own header because the optim layer sits under io,
 * program, model and train, and each src layer includes only public headers of its layer or
 * lower (tests/check_layers.py); wgml-train.h includes it. */
#ifndef WGML_OPTIM_H
#define WGML_OPTIM_H

#include "wgml.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- AdamW ------------------------------------------------------------------------------- */
/* The optimizer over many parameters in flat buffers, stepping on the GPU. */

/* AdamW, exactly torch.optim.AdamW (t starts at 1), over many tensors in one update:
 *   p ← p·(1 − lr·wd); m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²;
 *   p ← p − lr/(1 − β1ᵗ) · m / (sqrt(v)/sqrt(1 − β2ᵗ) + eps).
 * Every parameter is a view into four flat persistent f32 buffers (params, grads, m, v) of the
 * optimizer's graph, so a step is three dispatches whatever the number of tensors. The step
 * counter t, the bias corrections, the clip coefficient and the skip decision are computed on
 * the GPU (no host round trip per step); lr and weight decay sit in a small persistent tensor
 * the host may rewrite before any run (schedules without rebuilding a graph).
 * Global gradient-norm clipping (max_grad_norm > 0): as torch.nn.utils.clip_grad_norm_, the
 * gradients are multiplied by max_norm / (norm + 1e-6) when that is < 1 (norm over all
 * parameters, a deterministic two-stage reduction); the grad buffer itself is left unscaled.
 * A step where any gradient is non-finite (or their sum of squares overflows f32) is skipped
 * entirely: params, m, v and t stay unchanged, and the skip is counted. */
typedef struct wgml_optimizer wgml_optimizer;
typedef struct wgml_adamw_config {
    double lr, beta1, beta2, eps, weight_decay;
    double max_grad_norm; /* 0: no clipping */
    int64_t capacity;     /* f32 elements of each flat buffer: at least the sum over the
                             parameters of wgml_adamw_padded(numel) */
    double momentum;      /* wgml_sgd_step only (AdamW ignores it): 0 for plain SGD */
} wgml_adamw_config;
/* PyTorch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2, no clipping;
 * capacity 0 (the caller sets it). */
wgml_adamw_config wgml_adamw_defaults(void);
/* The elements a parameter of numel elements takes in the flat buffers (a multiple of 64, so
 * every view starts on a 256-byte boundary). */
int64_t wgml_adamw_padded(int64_t numel);
/* A new optimizer whose buffers are persistent tensors of g (all zero; params too, until the
 * caller writes them). Free it with wgml_adamw_free (before its graph or context). */
wgml_optimizer *wgml_adamw_new(wgml_graph *g, const wgml_adamw_config *cfg);
void wgml_adamw_free(wgml_optimizer *opt);
/* A new trainable parameter of the given shape: a view into the flat params buffer (write its
 * initial values with wgml_tensor_write). The views belong to the optimizer: do not free them. */
wgml_tensor *wgml_adamw_param(wgml_optimizer *opt, int rank, const int64_t *shape);
/* The gradient of param: a view of the same shape into the flat grads buffer, where the
 * backward pass writes (or accumulates). NULL if param is not one of opt's. */
wgml_tensor *wgml_adamw_grad(wgml_optimizer *opt, const wgml_tensor *param);
/* Records one AdamW step of every parameter into g (the optimizer's graph): 3 dispatches. */
wgml_status wgml_adamw_step(wgml_graph *g, wgml_optimizer *opt);
/* Records one SGD step instead, exactly torch.optim.SGD with dampening 0 and no Nesterov, on
 * the same flat buffers (m holds the momentum buffer; beta1, beta2, eps are not used):
 *   g ← g + wd·p; buf ← momentum·buf + g; p ← p − lr·buf
 * (buf starts at zero, so the first step's buf is g, as torch's). The norm, clipping, skip
 * and hold rules and the step counter are AdamW's (the same first two dispatches). */
wgml_status wgml_sgd_step(wgml_graph *g, wgml_optimizer *opt);
/* Records a copy of grad (f32, param's shape) into param's gradient view: for gradients that a
 * graph computes as ordinary tensors (e.g. the outputs of an exported training program). */
wgml_status wgml_adamw_copy_grad(wgml_graph *g, wgml_optimizer *opt, const wgml_tensor *param, wgml_tensor *grad);
/* Records a fill of the used part of the flat grads buffer with zeros. */
wgml_status wgml_adamw_zero_grad(wgml_graph *g, wgml_optimizer *opt);
/* Gradient accumulation in one built graph: record the backward with accumulating gradients
 * (wgml_tensor_set_grad(param, grad, 1)), then wgml_adamw_step, then
 * wgml_adamw_zero_grad_after_step. Runs made after wgml_adamw_set_apply(opt, 0) hold the step
 * (params, m, v, t and the stats stay as they are) and keep the gradients; the first run after
 * wgml_adamw_set_apply(opt, 1) steps on the sum and clears it (also when that step is skipped
 * as non-finite). Apply is the default. */
wgml_status wgml_adamw_set_apply(wgml_optimizer *opt, int apply);
wgml_status wgml_adamw_zero_grad_after_step(wgml_graph *g, wgml_optimizer *opt);
/* New lr / weight decay for the steps that run after this call (a host write of 44 bytes). */
wgml_status wgml_adamw_set_lr(wgml_optimizer *opt, double lr);
wgml_status wgml_adamw_set_weight_decay(wgml_optimizer *opt, double weight_decay);
/* Reads the optimizer's small state back (the only readback): steps taken (t), steps skipped,
 * and the global gradient norm of the last step run (before clipping; inf/NaN when skipped).
 * Any pointer may be NULL. */
wgml_status wgml_adamw_stats(wgml_optimizer *opt, int64_t *steps_taken, int64_t *steps_skipped, float *last_grad_norm);
/* The whole flat buffers, e.g. for checkpoints: f32 [capacity] params, grads, m, v (element
 * order = the order parameters were added, each padded with zeros to wgml_adamw_padded), and
 * the u32 [8] state: [0] t, [1] steps skipped, [2] last norm (f32 bits), [3..7] scratch. */
typedef enum wgml_adamw_buffer_kind {
    WGML_ADAMW_PARAMS = 0,
    WGML_ADAMW_GRADS,
    WGML_ADAMW_M,
    WGML_ADAMW_V,
    WGML_ADAMW_STATE
} wgml_adamw_buffer_kind;
wgml_tensor *wgml_adamw_buffer(wgml_optimizer *opt, wgml_adamw_buffer_kind which);
/* Elements of the flat buffers taken by the parameters so far (the part a step updates). */
int64_t wgml_adamw_used(const wgml_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
