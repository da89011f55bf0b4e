/* The method's calls, built into the program's graph at load. A DelegateCall's VkGraph gets
 * slots of its own: its inputs bound to the call's arguments, its constants uploaded, its
 * operator chain built through the registry, its outputs handed back to the call's output
 * slots. A KernelCall, the glue a partitioned program keeps, is built through the same
 * registry under its functional name ("aten::view_copy.out" builds as
 * "aten.view_copy.default"), without the out arguments of its out variant. */
#include "program/program_internal.h"

/* ---- delegates ----------------------------------------------------------------------------- */

/* Binds method tensor `from` into delegate slot `to` (same element count and compute dtype). */
static wgml_status bind_tensor(wgml_program *p, pv *to, const pv *from, const char *what) {
    if (to->kind != PV_TENSOR || from->kind != PV_TENSOR || !from->t || to->unsupported)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: not a computed tensor of a supported shape", what);
    if (prog_slot_numel(to) != wgml_tensor_numel(from->t) || prog_vk_to_wgml(to->vk_dtype) != (int)wgml_tensor_dtype(from->t))
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: %lld elements of %s given %lld of %s", what,
                              (long long)prog_slot_numel(to), prog_vk_dtype_name(to->vk_dtype),
                              (long long)wgml_tensor_numel(from->t), wgml_dtype_name(wgml_tensor_dtype(from->t)));
    to->t = wgml_tensor_rank(from->t) == to->rank ? from->t : wgml_reshape(p->g, from->t, to->rank, to->dims);
    if (to->rank == wgml_tensor_rank(from->t))
        for (int i = 0; i < to->rank; i++)
            if (wgml_tensor_dim(from->t, i) != to->dims[i]) to->t = wgml_reshape(p->g, from->t, to->rank, to->dims);
    return to->t ? WGML_OK : wgml_last_status(p->ctx);
}

static wgml_status run_ops(wgml_program *p, pv *v, size_t nv, const pte_vk_op *ops, uint32_t n) {
    pbuild b = {.ctx = p->ctx, .g = p->g, .v = v, .nv = nv};
    for (uint32_t i = 0; i < n; i++) {
        b.op = ops[i].name.s;
        if (getenv("WGML_PROGRAM_TRACE")) {
            fprintf(stderr, "[program] %s(", b.op);
            for (uint32_t k = 0; k < ops[i].n_args; k++) {
                const pv *a = &v[ops[i].args[k]];
                fprintf(stderr, "%s%d:%d%s", k ? ", " : "", ops[i].args[k], (int)a->kind, a->kind == PV_TENSOR ? (a->t ? "T" : "t") : "");
            }
            fprintf(stderr, ")\n");
        }
        prog_op_fn fn = prog_op_find(b.op);
        if (!fn) return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: unsupported op %s", b.op);
        wgml_status s = fn(&b, ops[i].args, (int)ops[i].n_args);
        if (s) return s;
    }
    return WGML_OK;
}

/* Whether method value `arg` can be delegate input slot `in` (bind_tensor's rule). */
static int input_fits(const wgml_program *p, int32_t arg, const pv *in) {
    const pv *a = &p->v[arg];
    return in->kind == PV_TENSOR && !in->unsupported && a->kind == PV_TENSOR && a->t &&
           prog_slot_numel(in) == wgml_tensor_numel(a->t) &&
           prog_vk_to_wgml(in->vk_dtype) == (int)wgml_tensor_dtype(a->t);
}

/* take[i]: the call argument graph input i is bound to. The call passes the lowered module's
 * inputs, then its outputs; the Vulkan preprocess leaves out of the graph's inputs a placeholder
 * that no operator uses (vulkan_graph_builder.py, process_placeholder_node) while the call still
 * passes it: circular padding copies the input into a slice of an empty buffer, and once the
 * copy is simplified the buffer is an input nothing reads. So when the call has more inputs than
 * the graph, the graph's inputs are matched in order to the call's by element count and dtype
 * (the arguments in between are the unused ones); a match that is not unique is refused. */
static wgml_status delegate_inputs(wgml_program *p, const pte_instruction *ins, const pte_vk_graph *vg, const pv *v,
                                   int di, uint32_t *take) {
    uint32_t n_args = ins->u.delegate.n_args, n_in = vg->n_inputs;
    if (n_args < n_in + vg->n_outputs)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: delegate %d: %u arguments for %u inputs and %u outputs", di,
                              n_args, n_in, vg->n_outputs);
    uint32_t n_call = n_args - vg->n_outputs, w = n_call + 1;
    if (n_call == n_in) {
        for (uint32_t i = 0; i < n_in; i++) take[i] = i;
        return WGML_OK;
    }
    /* ways[i·w + j]: the in-order matches of graph inputs 0..i-1 among call arguments 0..j-1 (capped at 2) */
    unsigned char *ways = calloc((size_t)(n_in + 1) * w, 1);
    if (!ways) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    for (uint32_t j = 0; j <= n_call; j++) ways[j] = 1;
    for (uint32_t i = 1; i <= n_in; i++)
        for (uint32_t j = 1; j <= n_call; j++) {
            int k = ways[i * w + j - 1] + (input_fits(p, ins->u.delegate.args[j - 1], &v[vg->input_ids[i - 1]]) ? ways[(i - 1) * w + j - 1] : 0);
            ways[i * w + j] = (unsigned char)(k > 2 ? 2 : k);
        }
    int n_ways = ways[n_in * w + n_call];
    for (uint32_t i = n_in, j = n_call; n_ways == 1 && i > 0; j--)
        if (ways[i * w + j - 1] == 0) take[--i] = j - 1; /* the one match uses argument j - 1 */
    free(ways);
    if (n_ways != 1)
        return wgml_set_error(p->ctx, WGML_ERR_FORMAT,
                              "program: delegate %d: %u inputs for a graph of %u, and %s of the graph's inputs to them", di,
                              n_call, n_in, n_ways ? "more than one matching" : "no matching");
    return WGML_OK;
}

wgml_status prog_build_delegate(wgml_program *p, const pte_instruction *ins) {
    int di = ins->u.delegate.delegate_index;
    pte_vk_graph *vg = p->vk[di];
    pv *v = calloc(vg->n_values ? vg->n_values : 1, sizeof *v);
    uint32_t *take = calloc(vg->n_inputs + 1, sizeof *take);
    if (!v || !take) {
        free(v), free(take);
        return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    }
    wgml_status s = prog_vk_slots(p, vg, v, di);
    if (!s) s = delegate_inputs(p, ins, vg, v, di, take);
    char what[64];
    for (uint32_t i = 0; !s && i < vg->n_inputs; i++) {
        snprintf(what, sizeof what, "delegate %d input %u", di, i);
        s = bind_tensor(p, &v[vg->input_ids[i]], &p->v[ins->u.delegate.args[take[i]]], what);
    }
    for (uint32_t i = 0; !s && i < vg->n_values; i++) {
        if (v[i].kind != PV_TENSOR || v[i].constant_id < 0 || v[i].t || v[i].unsupported) continue;
        const pte_vk_constant *c = &vg->constants[v[i].constant_id];
        int from = v[i].vk_dtype;
        /* the exporter narrows int64/float64 graphs; constants stored 64-bit are narrowed here */
        if ((from == VK_INT32 || from == VK_FLOAT32) && c->data.size == (uint64_t)prog_slot_numel(&v[i]) * 8)
            from = from == VK_INT32 ? VK_INT64 : VK_FLOAT64;
        snprintf(what, sizeof what, "delegate %d constant %d", di, (int)v[i].constant_id);
        s = prog_upload_constant(p, &v[i], c->data.data, (size_t)c->data.size, from, what,
                                 c->named ? c->named_key.s : NULL);
    }
    if (!s) s = run_ops(p, v, vg->n_values, vg->chain, vg->n_chain);
    for (uint32_t i = 0; !s && i < vg->n_outputs; i++) {
        snprintf(what, sizeof what, "delegate %d output %u", di, i);
        pv *dst = &p->v[ins->u.delegate.args[ins->u.delegate.n_args - vg->n_outputs + i]];
        const pv *src = &v[vg->output_ids[i]];
        if (dst->kind != PV_TENSOR) {
            s = wgml_set_error(p->ctx, WGML_ERR_FORMAT, "program: %s: not a tensor", what);
            break;
        }
        s = bind_tensor(p, dst, src, what);
    }
    free(v), free(take);
    return s;
}

/* ---- glue kernels -------------------------------------------------------------------------- */

/* The registry name of a method operator ("aten::view_copy" + "out" -> "aten.view_copy.default"),
 * written into buf; NULL when none is registered. */
const char *prog_kernel_name(const pte_operator *op, char *buf, size_t n) {
    char base[160];
    snprintf(base, sizeof base, "%s", op->name.s);
    for (char *c = strstr(base, "::"); c; c = strstr(base, "::")) memmove(c + 1, c + 2, strlen(c + 2) + 1), *c = '.';
    const char *ov = op->overload.s;
    /* an out variant named apart from the rule below (any.out is any.dim's): the registry says */
    snprintf(buf, n, "%s.%s", base, ov && *ov ? ov : "default");
    const char *named = prog_op_find_out(buf);
    if (named) {
        snprintf(buf, n, "%s", named);
        return prog_op_find(buf) ? buf : NULL;
    }
    char fn[64] = "default";
    if (ov && *ov && strcmp(ov, "out")) {
        snprintf(fn, sizeof fn, "%s", ov);
        size_t l = strlen(fn);
        if (l > 4 && !strcmp(fn + l - 4, "_out")) fn[l - 4] = 0;
    }
    /* an out variant's functional sibling: "<name>.out" is "<name>.default" or, failing that,
     * .Tensor/.int/.dims/.dim ("mean.out" is mean.dim); "<name>.X_out" is .X or .dim_X */
    static const char *const tries[] = {NULL, "Tensor", "int", "dims", "dim"};
    for (size_t k = 0; k < sizeof tries / sizeof tries[0]; k++) {
        if (k && strcmp(fn, "default")) break;
        snprintf(buf, n, "%s.%s", base, k ? tries[k] : fn);
        if (prog_op_find(buf)) return buf;
    }
    if (strcmp(fn, "default")) {
        snprintf(buf, n, "%s.dim_%s", base, fn);
        if (prog_op_find(buf)) return buf;
    }
    snprintf(buf, n, "%s.%s", base, fn);
    return NULL;
}

/* Out variants list the out argument(s) and then the return; the registry takes the schema's
 * other arguments and the outputs last, so the out arguments go. */
static int kernel_args(const wgml_program *p, const pte_instruction *ins, int32_t *args, int max) {
    int n = (int)ins->u.kernel.n_args;
    if (n > max) return -1;
    if (n < 2) {
        memcpy(args, ins->u.kernel.args, (size_t)n * sizeof *args);
        return n;
    }
    memcpy(args, ins->u.kernel.args, (size_t)n * sizeof *args);
    if (args[n - 2] == args[n - 1]) {
        args[n - 2] = args[n - 1];
        return n - 1;
    }
    const pv *last = &p->v[args[n - 1]];
    const pv *prev = &p->v[args[n - 2]];
    /* a list out argument (split_with_sizes_copy.out) and its return: two ValueLists of the
     * same tensors */
    if (last->kind == PV_VALUELIST && prev->kind == PV_VALUELIST && prev->n == last->n &&
        (last->n == 0 || !memcmp(prev->ids, last->ids, last->n * sizeof *last->ids))) {
        args[n - 2] = args[n - 1];
        return n - 1;
    }
    if (n >= 1 && last->kind == PV_VALUELIST && (int)last->n < n) {
        int k = (int)last->n, same = 1;
        for (int i = 0; i < k; i++)
            if (args[n - 1 - k + i] != last->ids[i]) same = 0;
        if (same) {
            args[n - 1 - k] = args[n - 1];
            return n - k;
        }
    }
    return n;
}

/* A KernelCall: the glue operator built through the registry under its functional name
 * (prog_kernel_name), the out arguments of its out variant dropped (kernel_args). */
wgml_status prog_build_kernel(wgml_program *p, const pte_instruction *ins) {
    const pte_plan *pl = p->plan;
    char name[256];
    int32_t args[64];
    const pte_operator *op = &pl->operators[ins->u.kernel.op_index];
    int n = kernel_args(p, ins, args, 64);
    if (n < 0) return wgml_set_error(p->ctx, WGML_ERR_UNSUPPORTED, "program: %s: too many arguments", op->name.s);
    pbuild b = {.ctx = p->ctx, .g = p->g, .v = p->v, .nv = pl->n_values, .op = prog_kernel_name(op, name, sizeof name)};
    if (getenv("WGML_PROGRAM_TRACE")) {
        fprintf(stderr, "[program] %s (kernel %s, %u arguments):", b.op ? b.op : "?", op->name.s, ins->u.kernel.n_args);
        for (uint32_t k = 0; k < ins->u.kernel.n_args; k++) {
            const pv *a = &p->v[ins->u.kernel.args[k]];
            fprintf(stderr, " %d:%d(n %zu)", ins->u.kernel.args[k], (int)a->kind, a->n);
        }
        fprintf(stderr, "\n");
    }
    return b.op ? prog_op_find(b.op)(&b, args, n) : WGML_ERR_UNSUPPORTED;
}
