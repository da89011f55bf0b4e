/* ExecuTorch programs on wgml: one method of a .pte file (read by src/io/pte) built into one
 * wgml built graph.
 *
 * The method's values are slots (pv); its chain is walked once at load:
 *   - a DelegateCall (VulkanBackend) parses the VkGraph, gives its inputs the slots of the
 *     call's arguments, uploads its constants, builds each OperatorCall through the op registry
 *     (ops_*.c) and hands its outputs back to the call's output slots;
 *   - a KernelCall (the glue a partitioned program keeps: view/copy ops and the like) goes
 *     through the same registry under its functional name ("aten::view_copy.out" builds as
 *     "aten.view_copy.default");
 *   - MoveCall copies a slot, FreeCall is nothing here (the graph compiler plans memory).
 * Before anything is built every operator name is looked up, so a program that needs what
 * wgml lacks is refused with the whole list. Method inputs are persistent tensors written by
 * wgml_program_set_input; outputs are kept by the graph and read back after a run.
 * Loaded for training (wgml_program_load_training), the parameters' constants are views into
 * an optimizer's flat buffer (src/optim) and the gradient copies and the optimizer step are
 * recorded after the method, in the same graph.
 *
 * This file walks the method at load; the values and uploads are program_values.c, the calls
 * program_delegate.c, training program_train.c, inputs, outputs, runs and constants
 * program_run.c, and what they share program_internal.h. */
#include "program/program_internal.h"

const char *const *wgml_program_op_names(size_t *n) {
    size_t k = 0;
    const char *const *names = prog_op_names(&k);
    if (n) *n = k;
    return names;
}

/* ---- load ---------------------------------------------------------------------------------- */

/* Every operator name the method needs that the registry lacks, as one message (each distinct
 * name once, prog_missing); WGML_OK when none. Delegates are parsed here (kept in p->vk). */
static wgml_status check_ops(wgml_program *p) {
    const pte_plan *pl = p->plan;
    prog_missing miss = {0};
    int oom = 0;
    char err[512];
    p->vk = calloc(pl->n_delegates ? pl->n_delegates : 1, sizeof *p->vk);
    if (!p->vk) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    p->n_vk = pl->n_delegates;
    for (uint32_t d = 0; d < pl->n_delegates; d++) {
        wgml_status s = pte_vk_parse_delegate(p->pte, pl, d, &p->vk[d], err, sizeof err);
        if (s) {
            prog_missing_free(&miss);
            return wgml_set_error(p->ctx, s, "program: %s", err);
        }
        for (uint32_t i = 0; i < p->vk[d]->n_chain; i++) {
            const char *name = p->vk[d]->chain[i].name.s;
            if (!prog_op_find(name)) oom |= prog_missing_add(&miss, name);
        }
    }
    for (uint32_t c = 0; c < pl->n_chains; c++)
        for (uint32_t i = 0; i < pl->chains[c].n_instructions; i++) {
            const pte_instruction *ins = &pl->chains[c].instructions[i];
            char name[256];
            if (ins->type == PTE_INSTR_JUMP_FALSE) {
                snprintf(name, sizeof name, "(control flow)");
            } else if (ins->type != PTE_INSTR_KERNEL) {
                continue;
            } else {
                const pte_operator *op = &pl->operators[ins->u.kernel.op_index];
                if (prog_kernel_name(op, name, sizeof name)) continue;
                snprintf(name, sizeof name, "%s.%s (portable kernel)", op->name.s,
                         op->overload.len ? op->overload.s : "default");
            }
            oom |= prog_missing_add(&miss, name);
        }
    wgml_status s = WGML_OK;
    if (oom) {
        s = wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    } else if (miss.n) {
        /* the list ends on a whole name within the context's message (the prefix is < 64) */
        char text[WGML_ERROR_MAX - 64];
        prog_missing_text(&miss, text, sizeof text);
        s = wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %d unsupported operator%s: %s", miss.n,
                           miss.n > 1 ? "s" : "", text);
    }
    prog_missing_free(&miss);
    return s;
}

static wgml_status io_info(wgml_program *p, int value, wgml_program_io *info, const char *what) {
    const pv *s = &p->v[value];
    if (s->kind != PV_TENSOR || p->plan->values[value].type != PTE_VAL_TENSOR || s->unsupported)
        return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s (value %d) is not a tensor", what, value);
    int st = p->plan->values[value].u.tensor.scalar_type;
    if (st != PTE_FLOAT && st != PTE_DOUBLE && st != PTE_INT && st != PTE_LONG && st != PTE_BOOL)
        return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s: dtype %s is not supported", what,
                              pte_scalar_type_name(st));
    info->dtype = (wgml_program_dtype)st;
    info->rank = s->rank;
    memcpy(info->shape, s->dims, sizeof info->shape);
    info->numel = prog_slot_numel(s);
    info->nbytes = (size_t)info->numel * wgml_program_dtype_size(st);
    return WGML_OK;
}

static wgml_status build(wgml_program *p) {
    const pte_plan *pl = p->plan;
    char what[64];
    wgml_status s = prog_method_slots(p);
    if (!s) s = check_ops(p);
    if (s) return s;
    p->g = wgml_graph_new(p->ctx);
    if (!p->g) return wgml_last_status(p->ctx);
    p->n_in = (int)pl->n_inputs, p->n_out = (int)pl->n_outputs;
    p->in = calloc(pl->n_inputs + 1, sizeof *p->in);
    p->out = calloc(pl->n_outputs + 1, sizeof *p->out);
    if (!p->in || !p->out) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    if (p->tc.optimizer && (s = prog_train_prepare(p))) return s;
    for (uint32_t i = 0; i < pl->n_inputs; i++) {
        snprintf(what, sizeof what, "input %u", i);
        p->in[i].value = pl->inputs[i];
        if ((s = io_info(p, pl->inputs[i], &p->in[i].info, what))) return s;
        if (!p->v[pl->inputs[i]].t && (s = prog_make_persistent(p, &p->v[pl->inputs[i]], NULL, 0, 0, what))) return s;
    }
    /* constant and mutable method tensors with data */
    for (uint32_t i = 0; i < pl->n_values; i++) {
        const pte_value *x = &pl->values[i];
        if (x->type != PTE_VAL_TENSOR || p->v[i].t || p->v[i].unsupported) continue;
        const pte_tensor *t = &x->u.tensor;
        if (t->data_kind == PTE_DATA_CONSTANT || t->data_kind == PTE_DATA_MUTABLE) {
            snprintf(what, sizeof what, "constant value %u", i);
            if ((s = prog_upload_constant(p, &p->v[i], t->data.data, (size_t)t->data.size, p->v[i].vk_dtype, what,
                                          t->fqn.len ? t->fqn.s : NULL)))
                return s;
        } else if (t->data_kind == PTE_DATA_EXTERNAL) {
            return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: value %u: data in an external file (.ptd)", i);
        }
    }
    for (uint32_t c = 0; c < pl->n_chains && !s; c++) {
        for (uint32_t i = 0; i < pl->chains[c].n_instructions && !s; i++) {
            const pte_instruction *ins = &pl->chains[c].instructions[i];
            if (ins->type == PTE_INSTR_DELEGATE) {
                s = prog_build_delegate(p, ins);
            } else if (ins->type == PTE_INSTR_MOVE) {
                pv *to = &p->v[ins->u.move.move_to];
                *to = p->v[ins->u.move.move_from];
            } else if (ins->type == PTE_INSTR_KERNEL) {
                s = prog_build_kernel(p, ins);
            }
        }
    }
    if (s) return s;
    for (uint32_t i = 0; i < pl->n_outputs; i++) {
        snprintf(what, sizeof what, "output %u", i);
        p->out[i].value = pl->outputs[i];
        if ((s = io_info(p, pl->outputs[i], &p->out[i].info, what))) return s;
        if (!p->v[pl->outputs[i]].t)
            return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: output %u (value %d) is never computed", i, pl->outputs[i]);
        if ((s = wgml_graph_keep(p->g, p->v[pl->outputs[i]].t))) return s;
    }
    if (p->opt && (s = prog_train_finish(p))) return s;
    return wgml_graph_compile(p->g);
}

static wgml_program *load_bytes(wgml_ctx *ctx, const void *data, size_t size, const char *method,
                                const wgml_program_train_config *tc) {
    if (!ctx) return NULL;
    if (!data || !size) {
        wgml_set_error(ctx, WGML_ERR_ARG, "program: no bytes");
        return NULL;
    }
    wgml_program *p = calloc(1, sizeof *p);
    uint8_t *copy = malloc(size);
    if (!p || !copy) {
        free(p), free(copy);
        wgml_set_error(ctx, WGML_ERR_OOM, "program: out of host memory");
        return NULL;
    }
    memcpy(copy, data, size);
    p->ctx = ctx, p->bytes = copy, p->size = size;
    if (tc) p->tc = *tc; /* its pairing arrays are the caller's: read during the load only */
    char err[512];
    wgml_status s = pte_parse(p->bytes, p->size, &p->pte, err, sizeof err);
    if (s) {
        wgml_set_error(ctx, s, "program: %s", err);
    } else if (!(p->plan = pte_find_plan(p->pte, method))) {
        s = wgml_set_error(ctx, WGML_ERR_ARG, "program: no method named '%s'", method ? method : "(first)");
    } else {
        s = build(p);
    }
    p->tc.grad_outputs = NULL, p->tc.param_constants = NULL;
    if (s) {
        wgml_program_free(p);
        return NULL;
    }
    return p;
}

wgml_program *wgml_program_load_bytes(wgml_ctx *ctx, const void *data, size_t size, const char *method) {
    return load_bytes(ctx, data, size, method, NULL);
}

wgml_program *wgml_program_load_training(wgml_ctx *ctx, const void *data, size_t size, const char *method,
                                         const wgml_program_train_config *cfg) {
    if (!ctx) return NULL;
    if (!cfg || (cfg->optimizer != WGML_PROGRAM_SGD && cfg->optimizer != WGML_PROGRAM_ADAMW) ||
        ((cfg->grad_outputs || cfg->param_constants) && cfg->n_params <= 0)) {
        wgml_set_error(ctx, WGML_ERR_ARG,
                       "program: training: %s", !cfg ? "no config" : cfg->optimizer != WGML_PROGRAM_SGD && cfg->optimizer != WGML_PROGRAM_ADAMW
                                                                    ? "unknown optimizer (WGML_PROGRAM_SGD or WGML_PROGRAM_ADAMW)"
                                                                    : "grad_outputs or param_constants given without n_params");
        return NULL;
    }
    return load_bytes(ctx, data, size, method, cfg);
}

wgml_program *wgml_program_load(wgml_ctx *ctx, const char *path, const char *method) {
    if (!ctx) return NULL;
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        wgml_set_error(ctx, WGML_ERR_IO, "program: cannot open '%s'", path ? path : "(null)");
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            size_t nc = cap ? 2 * cap : 1 << 16;
            uint8_t *nb = realloc(buf, nc);
            if (!nb) {
                free(buf), fclose(f);
                wgml_set_error(ctx, WGML_ERR_OOM, "program: out of host memory reading '%s'", path);
                return NULL;
            }
            buf = nb, cap = nc;
        }
        size_t r = fread(buf + size, 1, cap - size, f);
        size += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        wgml_set_error(ctx, WGML_ERR_IO, "program: error reading '%s'", path);
        return NULL;
    }
    wgml_program *p = wgml_program_load_bytes(ctx, buf, size, method);
    free(buf);
    return p;
}

void wgml_program_free(wgml_program *p) {
    if (!p) return;
    wgml_adamw_free(p->opt); /* host records only: its tensors belong to p->g */
    if (p->g) wgml_graph_free(p->g);
    free(p->p_grad), free(p->p_const), free(p->p_name), free(p->p_t);
    for (uint32_t i = 0; p->vk && i < p->n_vk; i++) pte_vk_free(p->vk[i]);
    free(p->vk);
    if (p->pte) pte_free(p->pte);
    for (uint32_t i = 0; i < p->n_lists; i++) free(p->lists[i]);
    free(p->lists);
    free(p->consts);
    free(p->v), free(p->in), free(p->out), free(p->bytes), free(p);
}
