/* Programs loaded for training (wgml_program_load_training): the parameters named and the
 * optimizer sized for them before the build (gradient outputs and names from the training
 * export's metadata methods, or the caller's pairing), each parameter's constant uploaded as a
 * view into the optimizer's flat parameter buffer (src/optim) so that the step is what the next
 * run reads, the gradient copies and the AdamW or SGD step recorded after the method, and the
 * training calls of the API. Every constant of a method is uploaded here (prog_upload_constant),
 * which decides whether it is a parameter. */
#include "program/program_internal.h"

/* ---- training: parameters as views into the optimizer ------------------------------------ */

/* The parameter that constant slot s (about to become constant number p->n_consts) is, or -1:
 * the one the caller named, else the first unpaired parameter whose gradient has its shape.
 * Mutable tensors are candidates too: the training export stores the parameters that stay
 * outside the delegates as mutable data (a norm's running statistics would be candidates as
 * well; such a program needs param_constants). */
static int param_of_constant(const wgml_program *p, const pv *s, int from) {
    if (!p->opt || s->vk_dtype != VK_FLOAT32 || from != VK_FLOAT32) return -1;
    for (int j = 0; j < p->n_params; j++) {
        if (p->p_const[j] >= 0) continue;
        if (p->tc.param_constants) {
            if (p->tc.param_constants[j] == p->n_consts) return j;
            continue;
        }
        const pv *gs = &p->v[p->plan->outputs[p->p_grad[j]]];
        if (gs->rank == s->rank && !memcmp(gs->dims, s->dims, sizeof(int64_t) * (size_t)s->rank)) return j;
    }
    return -1;
}

/* Uploads a constant (host layout `from`) into slot s and records it: a persistent tensor of
 * its own, or, for a parameter of a training program, a view into the optimizer's flat
 * parameter buffer (so that the optimizer's update is what the next run reads). */
wgml_status prog_upload_constant(wgml_program *p, pv *s, const void *data, size_t bytes, int from, const char *what,
                                 const char *name) {
    int j = param_of_constant(p, s, from);
    wgml_status st;
    const pv *gs = j < 0 ? NULL : &p->v[p->plan->outputs[p->p_grad[j]]];
    if (gs && (gs->rank != s->rank || memcmp(gs->dims, s->dims, sizeof(int64_t) * (size_t)s->rank))) {
        char a[160], b[160];
        return wgml_set_error(p->ctx, WGML_ERR_SHAPE,
                              "program: training: parameter %d (%s): constant %d has shape %s, its gradient (output %d) %s",
                              j, p->p_name[j], p->n_consts, prog_shape_text(a, sizeof a, s), p->p_grad[j],
                              prog_shape_text(b, sizeof b, gs));
    }
    /* a parameter that two delegates both use is two constants with one named-data key (the
     * SHA-256 of its bytes); the optimizer would step one copy and leave the other stale, so
     * a constant sharing a parameter's key that is not itself a parameter is refused */
    for (int i = 0; j < 0 && p->opt && name && *name && i < p->n_params; i++)
        if (p->p_const[i] >= 0 && !strcmp(p->consts[p->p_const[i]].name, name))
            return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED,
                                  "program: training: %s holds the same data as parameter %d (%s, constant %d): a "
                                  "parameter used by several delegates is not supported",
                                  what, i, p->p_name[i], p->p_const[i]);
    if (j < 0) {
        st = prog_make_persistent(p, s, data, bytes, from, what);
    } else if (bytes != (size_t)prog_slot_numel(s) * 4) {
        st = wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: %zu bytes of data for %lld f32 elements", what, bytes,
                            (long long)prog_slot_numel(s));
    } else if (!(s->t = wgml_adamw_param(p->opt, s->rank, s->dims))) {
        st = wgml_last_status(p->ctx);
    } else {
        s->state = s->t;
        p->p_t[j] = s->t;
        p->p_const[j] = p->n_consts;
        st = wgml_tensor_write(s->t, data, bytes);
    }
    if (st) return st;
    s->host = data, s->host_vk = from;
    return prog_note_constant(p, s, from, name);
}

/* The training export's metadata method <prefix><this method's name>, or NULL. */
static const pte_plan *meta_plan(const wgml_program *p, const char *prefix) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", prefix, p->plan->name.s ? p->plan->name.s : "");
    return pte_find_plan(p->pte, name);
}

/* Before anything is built: the parameters (count, gradient outputs, names) and the optimizer
 * sized for them, in the method's graph. */
wgml_status prog_train_prepare(wgml_program *p) {
    const wgml_program_train_config *c = &p->tc;
    const pte_plan *pl = p->plan, *gi = meta_plan(p, "__et_training_gradients_index_"),
                   *fq = meta_plan(p, "__et_training_fqn_");
    int first = -1, n = c->n_params;
    if (gi && gi->n_outputs == 1 && gi->values[gi->outputs[0]].type == PTE_VAL_INT &&
        gi->values[gi->outputs[0]].u.i >= 0 && gi->values[gi->outputs[0]].u.i < (int64_t)pl->n_outputs)
        first = (int)gi->values[gi->outputs[0]].u.i;
    if (n <= 0 && fq) n = (int)fq->n_outputs;
    if (n <= 0 || n > (int)pl->n_outputs)
        return wgml_set_error(p->ctx, WGML_ERR_ARG,
                              "program: training: %d parameters for %u outputs (give n_params, or a program "
                              "exported for training: its __et_training_fqn_%s method names them)",
                              n, pl->n_outputs, pl->name.s ? pl->name.s : "");
    if (!c->grad_outputs && first < 0)
        return wgml_set_error(p->ctx, WGML_ERR_ARG,
                              "program: training: no grad_outputs given and the program has no "
                              "__et_training_gradients_index_%s method",
                              pl->name.s ? pl->name.s : "");
    p->n_params = n;
    p->p_grad = calloc((size_t)n, sizeof *p->p_grad);
    p->p_const = calloc((size_t)n, sizeof *p->p_const);
    p->p_name = calloc((size_t)n, sizeof *p->p_name);
    p->p_t = calloc((size_t)n, sizeof *p->p_t);
    if (!p->p_grad || !p->p_const || !p->p_name || !p->p_t)
        return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    int64_t capacity = 0;
    for (int j = 0; j < n; j++) {
        int o = c->grad_outputs ? c->grad_outputs[j] : first + j;
        p->p_const[j] = -1;
        p->p_name[j] = "";
        if (fq && (int)fq->n_outputs == n && fq->values[fq->outputs[j]].type == PTE_VAL_STRING &&
            fq->values[fq->outputs[j]].u.str.s)
            p->p_name[j] = fq->values[fq->outputs[j]].u.str.s;
        if (o < 0 || o >= (int)pl->n_outputs)
            return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameter %d: gradient output %d out of range (%u outputs)",
                                  j, o, pl->n_outputs);
        const pv *gs = &p->v[pl->outputs[o]];
        if (gs->kind != PV_TENSOR || gs->unsupported || gs->vk_dtype != VK_FLOAT32)
            return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameter %d (%s): output %d is not an f32 tensor",
                                  j, p->p_name[j], o);
        if (c->param_constants && c->param_constants[j] < 0)
            return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameter %d: constant %d out of range", j,
                                  c->param_constants[j]);
        for (int i = 0; c->param_constants && i < j; i++)
            if (c->param_constants[i] == c->param_constants[j])
                return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: training: parameters %d and %d: both constant %d", i,
                                      j, c->param_constants[j]);
        p->p_grad[j] = o;
        capacity += wgml_adamw_padded(prog_slot_numel(gs));
    }
    wgml_adamw_config oc = wgml_adamw_defaults();
    oc.lr = c->lr, oc.weight_decay = c->weight_decay, oc.max_grad_norm = c->max_grad_norm, oc.capacity = capacity;
    oc.momentum = c->optimizer == WGML_PROGRAM_SGD ? c->momentum : 0;
    if (c->optimizer == WGML_PROGRAM_ADAMW) oc.beta1 = c->beta1, oc.beta2 = c->beta2, oc.eps = c->eps;
    p->opt = wgml_adamw_new(p->g, &oc);
    return p->opt ? WGML_OK : wgml_last_status(p->ctx);
}

/* After the method: each gradient output copied into the optimizer's gradient buffer, then
 * the step, all recorded after the method's own dispatches. */
wgml_status prog_train_finish(wgml_program *p) {
    for (int j = 0; j < p->n_params; j++) {
        if (p->p_const[j] < 0) {
            char d[160];
            const pv *gs = &p->v[p->plan->outputs[p->p_grad[j]]];
            if (p->tc.param_constants)
                return wgml_set_error(p->ctx, WGML_ERR_ARG,
                                      "program: training: parameter %d (%s): constant %d is not an f32 constant of the "
                                      "method (%d constants)",
                                      j, p->p_name[j], p->tc.param_constants[j], p->n_consts);
            return wgml_set_error(p->ctx, WGML_ERR_ARG,
                                  "program: training: parameter %d (%s, gradient output %d): no f32 constant of shape %s "
                                  "left to pair it with",
                                  j, p->p_name[j], p->p_grad[j], prog_shape_text(d, sizeof d, gs));
        }
        wgml_status s = wgml_adamw_copy_grad(p->g, p->opt, p->p_t[j], p->v[p->plan->outputs[p->p_grad[j]]].t);
        if (s) return s;
    }
    return p->tc.optimizer == WGML_PROGRAM_SGD ? wgml_sgd_step(p->g, p->opt) : wgml_adamw_step(p->g, p->opt);
}

/* ---- training ------------------------------------------------------------------------------ */

wgml_program_train_config wgml_program_train_defaults(wgml_program_optimizer optimizer) {
    return (wgml_program_train_config){.optimizer = optimizer, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                       .weight_decay = optimizer == WGML_PROGRAM_ADAMW ? 1e-2 : 0};
}

int wgml_program_param_count(const wgml_program *p) { return p ? p->n_params : 0; }

wgml_status wgml_program_param_info(const wgml_program *p, int j, int *constant, int *grad_output, const char **name) {
    if (!p) return WGML_ERR_ARG;
    if (j < 0 || j >= p->n_params)
        return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: parameter %d out of range (%d parameters)", j, p->n_params);
    if (constant) *constant = p->p_const[j];
    if (grad_output) *grad_output = p->p_grad[j];
    if (name) *name = p->p_name[j];
    return WGML_OK;
}

wgml_status wgml_program_set_lr(wgml_program *p, double lr) {
    if (!p) return WGML_ERR_ARG;
    if (!p->opt) return wgml_set_error(p->ctx, WGML_ERR_STATE, "program: set_lr: the program was not loaded for training");
    return wgml_adamw_set_lr(p->opt, lr);
}

wgml_status wgml_program_steps(wgml_program *p, int64_t *steps) {
    if (!p) return WGML_ERR_ARG;
    if (!p->opt) return wgml_set_error(p->ctx, WGML_ERR_STATE, "program: steps: the program was not loaded for training");
    return wgml_adamw_stats(p->opt, steps, NULL, NULL);
}
