/* A loaded program's inputs, outputs and constants, and its runs: each described by its
 * ExecuTorch dtype and shape, written from the host in that dtype (int64 and float64 narrowed
 * to what wgml computes in) and read back widened; a run is one submit of the built graph. */
#include "program/program_internal.h"

/* ---- I/O and runs -------------------------------------------------------------------------- */

/* Index i of an input, output or constant ("kind") among n: WGML_OK, or an error naming it. */
static wgml_status in_range(const wgml_program *p, const char *kind, int i, int n) {
    if (i >= 0 && i < n) return WGML_OK;
    return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: %s %d out of range (the method has %d)", kind, i, n);
}

/* The host buffer given for an input, output or constant: present and of its nbytes. */
static wgml_status host_bytes(const wgml_program *p, const char *kind, int i, const wgml_program_io *io, const void *data,
                              size_t bytes) {
    if (data && bytes == io->nbytes) return WGML_OK;
    return wgml_set_error(p->ctx, WGML_ERR_ARG, "program: %s %d: %zu bytes given, it takes %zu (%lld elements of %s)", kind, i,
                          data ? bytes : 0, io->nbytes, (long long)io->numel, wgml_program_dtype_name(io->dtype));
}

int wgml_program_input_count(const wgml_program *p) { return p ? p->n_in : 0; }
int wgml_program_output_count(const wgml_program *p) { return p ? p->n_out : 0; }

wgml_status wgml_program_input_info(const wgml_program *p, int i, wgml_program_io *info) {
    if (!p || !info) return WGML_ERR_ARG;
    wgml_status s = in_range(p, "input", i, p->n_in);
    if (!s) *info = p->in[i].info;
    return s;
}

wgml_status wgml_program_output_info(const wgml_program *p, int i, wgml_program_io *info) {
    if (!p || !info) return WGML_ERR_ARG;
    wgml_status s = in_range(p, "output", i, p->n_out);
    if (!s) *info = p->out[i].info;
    return s;
}

/* Writes host data (io's host dtype, narrowed) into t, the persistent tensor of input, output
 * or constant i ("kind"). */
static wgml_status write_narrowed(wgml_program *p, const char *kind, int i, const wgml_program_io *io, wgml_tensor *t,
                                  const void *data, size_t bytes) {
    wgml_status s = host_bytes(p, kind, i, io, data, bytes);
    if (s) return s;
    size_t nb = wgml_tensor_nbytes(t);
    void *tmp = malloc(nb ? nb : 1);
    if (!tmp) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    char what[32];
    snprintf(what, sizeof what, "%s %d", kind, i);
    s = prog_convert_in(p->ctx, tmp, data, io->numel, prog_scalar_to_vk(io->dtype), what);
    if (!s) s = wgml_tensor_write(t, tmp, nb);
    free(tmp);
    return s;
}

wgml_status wgml_program_set_input(wgml_program *p, int i, const void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    wgml_status s = in_range(p, "input", i, p->n_in);
    return s ? s : write_narrowed(p, "input", i, &p->in[i].info, p->v[p->in[i].value].t, data, bytes);
}

wgml_status wgml_program_write_output(wgml_program *p, int i, const void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (in_range(p, "output", i, p->n_out)) return WGML_ERR_ARG;
    const pv *s = &p->v[p->out[i].value];
    if (!s->state || s->t != s->state)
        return wgml_set_error(p->ctx, WGML_ERR_ARG,
                              "program: output %d is computed by the method, not program state: it cannot be written", i);
    return write_narrowed(p, "output", i, &p->out[i].info, s->t, data, bytes);
}

wgml_status wgml_program_run(wgml_program *p, double *seconds) {
    if (!p) return WGML_ERR_ARG;
    return seconds ? wgml_graph_run_timed(p->g, seconds) : wgml_graph_run(p->g);
}

/* numel values of t (held narrowed: i32 for an int64 dtype, f32 for float64) into data widened
 * back to the host dtype's 8 bytes. */
static wgml_status read_widened(wgml_program *p, wgml_tensor *t, int dtype, int64_t numel, void *data) {
    size_t nb = wgml_tensor_nbytes(t);
    void *tmp = malloc(nb ? nb : 1);
    if (!tmp) return wgml_set_error(p->ctx, WGML_ERR_OOM, "program: out of host memory");
    wgml_status s = wgml_tensor_read(t, tmp, nb);
    for (int64_t k = 0; !s && k < numel; k++) {
        if (dtype == WGML_PROG_I64) {
            int64_t x = ((const int32_t *)tmp)[k];
            memcpy((uint8_t *)data + 8 * k, &x, 8);
        } else {
            double x = ((const float *)tmp)[k];
            memcpy((uint8_t *)data + 8 * k, &x, 8);
        }
    }
    free(tmp);
    return s;
}

wgml_status wgml_program_get_output(wgml_program *p, int i, void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (in_range(p, "output", i, p->n_out)) return WGML_ERR_ARG;
    const wgml_program_io *io = &p->out[i].info;
    if (host_bytes(p, "output", i, io, data, bytes)) return WGML_ERR_ARG;
    wgml_tensor *t = p->v[p->out[i].value].t;
    if (io->dtype != WGML_PROG_I64 && io->dtype != WGML_PROG_F64) return wgml_tensor_read(t, data, bytes);
    return read_widened(p, t, io->dtype, io->numel, data);
}

/* ---- constants ----------------------------------------------------------------------------- */

int wgml_program_constant_count(const wgml_program *p) { return p ? p->n_consts : 0; }

wgml_status wgml_program_constant_info(const wgml_program *p, int i, wgml_program_io *info, const char **name) {
    if (!p || !info) return WGML_ERR_ARG;
    if (in_range(p, "constant", i, p->n_consts)) return WGML_ERR_ARG;
    *info = p->consts[i].info;
    if (name) *name = p->consts[i].name;
    return WGML_OK;
}

wgml_status wgml_program_write_constant(wgml_program *p, int i, const void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    wgml_status s = in_range(p, "constant", i, p->n_consts);
    return s ? s : write_narrowed(p, "constant", i, &p->consts[i].info, p->consts[i].t, data, bytes);
}

wgml_status wgml_program_read_constant(wgml_program *p, int i, void *data, size_t bytes) {
    if (!p) return WGML_ERR_ARG;
    if (in_range(p, "constant", i, p->n_consts)) return WGML_ERR_ARG;
    const prog_const *c = &p->consts[i];
    if (host_bytes(p, "constant", i, &c->info, data, bytes)) return WGML_ERR_ARG;
    size_t nb = wgml_tensor_nbytes(c->t);
    if (nb == bytes) return wgml_tensor_read(c->t, data, bytes);
    return read_widened(p, c->t, c->info.dtype, c->info.numel, data); /* stored 64-bit, held narrowed */
}
