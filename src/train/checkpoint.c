/* Checkpoint files: safetensors plus a whole-file checksum, written atomically. */
#define _POSIX_C_SOURCE 200809L
#include "train/checkpoint.h"
#include "io/errbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

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
