/* Checkpoint files: safetensors plus a whole-file checksum, written atomically. */
#define _POSIX_C_SOURCE 200809L
#include "train/checkpoint.h"
#include "io/errbuf.h"
#include "io/path.h"

#include "graph/graph.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char zeros16[] = "0000000000000000";

wgml_status ckpt_save(const char *dir, const st_write_tensor *t, int n, const char *const *keys, const char *const *vals,
                      int n_meta, size_t crash_after, char *err, size_t errlen) {
    if (!dir || n_meta < 0) return errbuf_set(err, errlen, WGML_ERR_ARG, "checkpoint: bad argument");
    if (mkdir(dir, 0755) && errno != EEXIST)
        return errbuf_set(err, errlen, WGML_ERR_IO, "checkpoint: mkdir %s: %s", dir, strerror(errno));
    const char **k = malloc(sizeof(char *) * (size_t)(n_meta + 2)), **v = malloc(sizeof(char *) * (size_t)(n_meta + 2));
    if (!k || !v) {
        free(k), free(v);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "checkpoint: out of memory");
    }
    k[0] = "format", v[0] = CKPT_FORMAT;
    for (int i = 0; i < n_meta; i++) k[i + 1] = keys[i], v[i + 1] = vals[i];
    k[n_meta + 1] = "checksum", v[n_meta + 1] = zeros16;
    uint8_t *buf;
    size_t len;
    wgml_status s = st_build(t, n, k, v, n_meta + 2, &buf, &len, err, errlen);
    free(k), free(v);
    if (s) return s;
    /* find the checksum's digits through the parser (the same place ckpt_load will look) */
    st_file f;
    uint8_t *copy = malloc(len);
    if (!copy) {
        free(buf);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "checkpoint: out of memory");
    }
    memcpy(copy, buf, len);
    s = st_parse(copy, len, &f, err, errlen);
    size_t off = f.checksum_off;
    st_free(&f);
    if (s || !off || off + 16 > len) {
        free(buf);
        return s ? s : errbuf_set(err, errlen, WGML_ERR_FORMAT, "checkpoint: no checksum field");
    }
    uint64_t h = fnv1a64(FNV1A64_INIT, buf, len);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    memcpy(buf + off, hex, 16);
    char *path = path_join(dir, CKPT_FILE);
    if (!path) {
        free(buf);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "checkpoint: out of memory");
    }
    const void *parts[1] = {buf};
    size_t sizes[1] = {len};
    s = file_write_atomic(path, parts, sizes, 1, crash_after, err, errlen);
    free(path);
    free(buf);
    return s;
}

wgml_status ckpt_parse(uint8_t *buf, size_t size, const char *name, st_file *f, char *err, size_t errlen) {
    char e2[400];
    wgml_status s = st_parse(buf, size, f, e2, sizeof e2);
    if (s) {
        errbuf_set(err, errlen, s, "corrupt or missing checkpoint: %s: %s", name, e2);
        st_free(f);
        return s;
    }
    const char *fmt = st_meta(f, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT) || !f->checksum_off || f->checksum_off + 16 > f->size) {
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: not a %s file (format or checksum missing)", name,
                       CKPT_FORMAT);
        goto fail;
    }
    char saved[17];
    memcpy(saved, f->buf + f->checksum_off, 16);
    saved[16] = 0;
    memcpy(f->buf + f->checksum_off, zeros16, 16);
    uint64_t h = fnv1a64(FNV1A64_INIT, f->buf, f->size);
    memcpy(f->buf + f->checksum_off, saved, 16);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    if (strcmp(hex, saved)) {
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "corrupt checkpoint %s: checksum %s stored, %s computed", name,
                       saved, hex);
        goto fail;
    }
    return WGML_OK;
fail:
    st_free(f);
    return s;
}

wgml_status ckpt_load(const char *dir, st_file *f, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    char *path = path_join(dir, CKPT_FILE);
    if (!path) return errbuf_set(err, errlen, WGML_ERR_OOM, "checkpoint: out of memory");
    char e2[400];
    uint8_t *buf;
    size_t size;
    wgml_status s = file_read_all(path, &buf, &size, e2, sizeof e2);
    if (s) {
        errbuf_set(err, errlen, s, "corrupt or missing checkpoint: %s", e2);
        free(path);
        return s;
    }
    s = ckpt_parse(buf, size, path, f, err, errlen);
    free(path);
    return s;
}

wgml_status ckpt_expect(const st_file *f, const char *key, const char *want, char *err, size_t errlen) {
    const char *got = st_meta(f, key);
    if (got && !strcmp(got, want)) return WGML_OK;
    return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                      "checkpoint mismatch: %s is '%.200s' in the checkpoint but '%.200s' in this run", key,
                      got ? got : "(absent)", want);
}

/* ---- the trainer's state in a checkpoint (public API in include/wgml-train.h) ---- */

wgml_ctx *train_ctx(wgml_trainer *t) { return graph_ctx(wgml_trainer_graph(t)); }

train_tensor *train_tensors(wgml_trainer *t, int *n, char *err, size_t errlen) {
    *n = wgml_trainer_tensor_count(t);
    train_tensor *ti = calloc((size_t)(*n > 0 ? *n : 1), sizeof *ti);
    if (!ti) {
        errbuf_set(err, errlen, WGML_ERR_OOM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < *n; i++) {
        ti[i].name = wgml_trainer_tensor_name(t, i);
        if (!ti[i].name || wgml_trainer_tensor_shape(t, i, &ti[i].rank, ti[i].shape)) {
            errbuf_set(err, errlen, WGML_ERR_ARG, "trainer tensor %d: %s", i, wgml_last_error(train_ctx(t)));
            free(ti);
            return NULL;
        }
        ti[i].numel = 1;
        for (int d = 0; d < ti[i].rank; d++) ti[i].numel *= ti[i].shape[d];
    }
    return ti;
}

float *train_tensor_read(wgml_trainer *t, const train_tensor *ti, int i, int what, char *err, size_t errlen) {
    float *buf = malloc((size_t)ti[i].numel * sizeof(float));
    if (!buf) {
        errbuf_set(err, errlen, WGML_ERR_OOM, "reading %s: out of memory", ti[i].name);
        return NULL;
    }
    if (wgml_trainer_read_state(t, i, what, buf)) {
        errbuf_set(err, errlen, wgml_last_status(train_ctx(t)), "reading %s: %s", ti[i].name, wgml_last_error(train_ctx(t)));
        free(buf);
        return NULL;
    }
    return buf;
}

/* Names in the file: the parameter itself, then AdamW's moments beside it. */
static const char *const part_suffix[3] = {"", ".adam_m", ".adam_v"};
#define OPT_STATE_NAME "optimizer_state"

wgml_status wgml_checkpoint_save(wgml_trainer *t, const char *dir, const char *const *keys, const char *const *vals, int n_meta,
                                 char *err, size_t errlen) {
    if (!t || !dir || n_meta < 0 || (n_meta && (!keys || !vals))) return errbuf_set(err, errlen, WGML_ERR_ARG, "bad argument");
    int nt = 0;
    train_tensor *ti = train_tensors(t, &nt, err, errlen);
    if (!ti) return WGML_ERR_ARG;
    wgml_status s = WGML_ERR_OOM;
    float **bufs = calloc((size_t)nt * 3 + 1, sizeof(float *));
    char(*names)[160] = calloc((size_t)nt * 3 + 1, 160);
    st_write_tensor *w = calloc((size_t)nt * 3 + 1, sizeof *w);
    size_t ob = 4096; /* the state is small (the trainer promises 64 bytes are enough) */
    void *opt = malloc(ob);
    int n = 0;
    if (!bufs || !names || !w || !opt) {
        errbuf_set(err, errlen, s, "out of memory");
        goto out;
    }
    for (int i = 0; i < nt; i++)
        for (int what = 0; what < 3; what++) {
            if (!(bufs[n] = train_tensor_read(t, ti, i, what, err, errlen))) {
                s = WGML_ERR_GPU;
                goto out;
            }
            snprintf(names[n], 160, "%s%s", ti[i].name, part_suffix[what]);
            w[n] = (st_write_tensor){.name = names[n], .dtype = "F32", .rank = ti[i].rank, .data = bufs[n]};
            for (int d = 0; d < ti[i].rank; d++) w[n].shape[d] = ti[i].shape[d];
            n++;
        }
    if ((s = wgml_trainer_read_opt_state(t, opt, &ob))) {
        errbuf_set(err, errlen, s, "optimizer state: %s", wgml_last_error(train_ctx(t)));
        goto out;
    }
    w[n] = (st_write_tensor){.name = OPT_STATE_NAME, .dtype = "U8", .rank = 1, .shape = {(int64_t)ob}, .data = opt};
    s = ckpt_save(dir, w, n + 1, keys, vals, n_meta, SIZE_MAX, err, errlen);
out:
    if (bufs)
        for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(names);
    free(w);
    free(opt);
    free(ti);
    return s;
}

struct wgml_checkpoint {
    st_file f;
};

wgml_status wgml_checkpoint_open(const char *dir, wgml_checkpoint **out, char *err, size_t errlen) {
    if (!out) return errbuf_set(err, errlen, WGML_ERR_ARG, "bad argument");
    *out = NULL;
    if (!dir) return errbuf_set(err, errlen, WGML_ERR_ARG, "bad argument");
    wgml_checkpoint *c = calloc(1, sizeof *c);
    if (!c) return errbuf_set(err, errlen, WGML_ERR_OOM, "checkpoint: out of memory");
    wgml_status s = ckpt_load(dir, &c->f, err, errlen);
    if (s) {
        free(c);
        return s;
    }
    *out = c;
    return WGML_OK;
}

void wgml_checkpoint_close(wgml_checkpoint *c) {
    if (!c) return;
    st_free(&c->f);
    free(c);
}

const char *wgml_checkpoint_meta(const wgml_checkpoint *c, const char *key) { return c && key ? st_meta(&c->f, key) : NULL; }

wgml_status wgml_checkpoint_expect(const wgml_checkpoint *c, const char *key, const char *want, char *err, size_t errlen) {
    if (!c || !key || !want) return errbuf_set(err, errlen, WGML_ERR_ARG, "bad argument");
    return ckpt_expect(&c->f, key, want, err, errlen);
}

wgml_status wgml_checkpoint_restore(const wgml_checkpoint *c, wgml_trainer *t, char *err, size_t errlen) {
    if (!c || !t) return errbuf_set(err, errlen, WGML_ERR_ARG, "bad argument");
    const st_file *f = &c->f;
    int nt = 0;
    train_tensor *ti = train_tensors(t, &nt, err, errlen);
    if (!ti) return WGML_ERR_ARG;
    wgml_status s = WGML_ERR_FORMAT;
    int saved = 0;
    for (int i = 0; i < f->n; i++) saved += !strstr(f->t[i].name, ".adam_") && strcmp(f->t[i].name, OPT_STATE_NAME);
    if (saved != nt) {
        errbuf_set(err, errlen, s, "checkpoint mismatch: %d trainable tensors saved, this run has %d", saved, nt);
        goto out;
    }
    for (int i = 0; i < nt; i++)
        for (int what = 0; what < 3; what++) {
            char nm[200];
            snprintf(nm, sizeof nm, "%s%s", ti[i].name, part_suffix[what]);
            const st_tensor *x = st_find(f, nm);
            int ok = x && !strcmp(x->dtype, "F32") && x->rank == ti[i].rank && x->numel == ti[i].numel;
            for (int d = 0; ok && d < x->rank; d++) ok = x->shape[d] == ti[i].shape[d];
            if (!ok) {
                errbuf_set(err, errlen, s, "checkpoint mismatch: tensor %s is missing or has another shape", nm);
                goto out;
            }
            float *buf = malloc(x->nbytes); /* an aligned copy: the file's bytes need not be */
            if (!buf) {
                s = errbuf_set(err, errlen, WGML_ERR_OOM, "%s: out of memory", nm);
                goto out;
            }
            memcpy(buf, x->data, x->nbytes);
            s = wgml_trainer_write_state(t, i, what, buf);
            free(buf);
            if (s) {
                errbuf_set(err, errlen, s, "%s: %s", nm, wgml_last_error(train_ctx(t)));
                goto out;
            }
            s = WGML_ERR_FORMAT;
        }
    const st_tensor *os = st_find(f, OPT_STATE_NAME);
    if (!os) {
        errbuf_set(err, errlen, s, "optimizer state: missing");
        goto out;
    }
    if ((s = wgml_trainer_write_opt_state(t, os->data, os->nbytes))) {
        errbuf_set(err, errlen, s, "optimizer state: %s", wgml_last_error(train_ctx(t)));
        goto out;
    }
    s = WGML_OK;
out:
    free(ti);
    return s;
}
