/* LoRA adapter files and the STE model export: what a fine-tuning run leaves behind, written
 * from the trainer's state and read back for generation and evaluation (public API in
 * include/wgml-train.h, "adapters"). */
#define _POSIX_C_SOURCE 200809L
#include "train/adapter.h"
#include "wgml-model.h"

#include "gpu/gpu.h"
#include "io/errbuf.h"
#include "io/path.h"
#include "io/gguf_write.h"
#include "io/json.h"
#include "model/arch.h"
#include "model/decoder.h"
#include "train/checkpoint.h"
#include "train/lora_gguf.h"
#include "train/peft.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- target names ---- */

/* In the order of the WGML_TARGET_* bits. */
static const char *const target_names[7] = {"q", "k", "v", "o", "gate", "up", "down"};

const char *wgml_target_name(int i) { return i >= 0 && i < 7 ? target_names[i] : NULL; }

wgml_status wgml_targets_parse(const char *s, unsigned *targets) {
    if (!s || !targets) return WGML_ERR_ARG;
    if (!strcmp(s, "all")) {
        *targets = WGML_TARGET_ALL;
        return WGML_OK;
    }
    unsigned m = 0;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        int found = 0;
        for (int i = 0; i < 7; i++)
            if (strlen(target_names[i]) == n && !strncmp(s, target_names[i], n)) m |= 1u << i, found = 1;
        if (!found) return WGML_ERR_ARG;
        s += n + (e ? 1 : 0);
    }
    if (!m) return WGML_ERR_ARG;
    *targets = m;
    return WGML_OK;
}

void wgml_targets_format(unsigned targets, char *buf, size_t n) {
    if (!buf || !n) return;
    buf[0] = 0;
    for (int i = 0; i < 7; i++)
        if (targets & (1u << i)) {
            if (buf[0]) strncat(buf, ",", n - strlen(buf) - 1);
            strncat(buf, target_names[i], n - strlen(buf) - 1);
        }
}

wgml_status wgml_file_sha256(const char *path, char out[65], uint64_t *size, char *err, size_t errlen) {
    if (!path || !out || !size) return errbuf_set(err, errlen, WGML_ERR_ARG, "sha256: bad argument");
    return sha256_file(path, out, size, err, errlen);
}

/* ---- writing ---- */

/* adapter_config.json: the run's configuration as JSON, one key a line. */
static char *adapter_config_json(const wgml_train_config *cfg, const wgml_adapter_info *info, int n, size_t *len) {
    char *j = NULL, num[160];
    size_t cap = 0;
    *len = 0;
    int bad = json_put_raw(&j, len, &cap, "{\n  \"format\": \"" ADAPTER_FORMAT "\",\n  \"mode\": ");
    bad |= json_put_raw(&j, len, &cap, cfg->mode == WGML_TRAIN_STE ? "\"ste\"" : "\"lora\"");
    snprintf(num, sizeof num, ",\n  \"rank\": %d,\n  \"alpha\": %.9g,\n  \"targets\": [", cfg->lora_rank, (double)cfg->lora_alpha);
    bad |= json_put_raw(&j, len, &cap, num);
    int first = 1;
    for (int i = 0; i < 7; i++)
        if (cfg->targets & (1u << i)) {
            bad |= json_put_raw(&j, len, &cap, first ? "" : ", ");
            bad |= json_put_string(&j, len, &cap, target_names[i], strlen(target_names[i]));
            first = 0;
        }
    bad |= json_put_raw(&j, len, &cap, "],\n  \"base_model\": {\"path\": ");
    bad |= json_put_string(&j, len, &cap, info->base_model, strlen(info->base_model));
    snprintf(num, sizeof num, ", \"size\": %llu, \"sha256\": \"%.64s\"},\n  \"data\": ", (unsigned long long)info->base_size,
             info->base_sha256);
    bad |= json_put_raw(&j, len, &cap, num);
    bad |= json_put_string(&j, len, &cap, info->data, strlen(info->data));
    snprintf(num, sizeof num, ",\n  \"seq_len\": %d,\n  \"batch\": %d,\n  \"steps\": %lld,\n  \"tensors\": %d\n}\n", cfg->seq_len,
             cfg->batch, (long long)info->steps, n);
    bad |= json_put_raw(&j, len, &cap, num);
    if (bad) {
        free(j);
        return NULL;
    }
    return j;
}

wgml_status adapter_write(const char *dir, const wgml_train_config *cfg, const wgml_adapter_info *info, int n,
                          const st_write_tensor *t, char *err, size_t errlen) {
    if (!dir || !cfg || !info || !info->base_model || !info->base_sha256 || !info->data || n < 0 || (n && !t))
        return errbuf_set(err, errlen, WGML_ERR_ARG, "adapter: bad argument");
    char *path = path_join(dir, ADAPTER_FILE), *cpath = path_join(dir, ADAPTER_CONFIG_FILE), *cfg_json = NULL;
    uint8_t *file = NULL;
    size_t flen, clen;
    wgml_status s = WGML_ERR_OOM;
    char e2[600];
    if (!path || !cpath) {
        errbuf_set(err, errlen, s, "adapter: out of memory");
        goto out;
    }
    char tg[64], rk[16], al[32];
    wgml_targets_format(cfg->targets, tg, sizeof tg);
    snprintf(rk, sizeof rk, "%d", cfg->lora_rank);
    snprintf(al, sizeof al, "%.9g", (double)cfg->lora_alpha);
    const char *mk[5] = {"format", "rank", "alpha", "targets", "base_model_sha256"};
    const char *mv[5] = {ADAPTER_FORMAT, rk, al, tg, info->base_sha256};
    if ((s = st_build(t, n, mk, mv, 5, &file, &flen, e2, sizeof e2))) {
        errbuf_set(err, errlen, s, "adapter: %s", e2);
        goto out;
    }
    const void *parts[1] = {file};
    size_t sizes[1] = {flen};
    if ((s = file_write_atomic(path, parts, sizes, 1, SIZE_MAX, e2, sizeof e2))) {
        errbuf_set(err, errlen, s, "adapter: %s", e2);
        goto out;
    }
    if (!(cfg_json = adapter_config_json(cfg, info, n, &clen))) {
        s = errbuf_set(err, errlen, WGML_ERR_OOM, "adapter config: out of memory");
        goto out;
    }
    parts[0] = cfg_json;
    sizes[0] = clen;
    if ((s = file_write_atomic(cpath, parts, sizes, 1, SIZE_MAX, e2, sizeof e2))) errbuf_set(err, errlen, s, "adapter config: %s", e2);
out:
    free(cfg_json);
    free(file);
    free(path);
    free(cpath);
    return s;
}

wgml_status wgml_trainer_save_adapter(wgml_trainer *t, const wgml_train_config *cfg, const char *dir, const wgml_adapter_info *info,
                                      char *err, size_t errlen) {
    if (!t || !cfg || !dir || !info) return errbuf_set(err, errlen, WGML_ERR_ARG, "adapter: bad argument");
    int nt = 0;
    char e2[600];
    train_tensor *ti = train_tensors(t, &nt, e2, sizeof e2);
    if (!ti) return errbuf_set(err, errlen, WGML_ERR_ARG, "adapter: %s", e2);
    wgml_status s = WGML_ERR_OOM;
    float **bufs = calloc((size_t)nt + 1, sizeof(float *));
    st_write_tensor *w = calloc((size_t)nt + 1, sizeof *w);
    if (!bufs || !w) {
        errbuf_set(err, errlen, s, "adapter: out of memory");
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        if (!(bufs[i] = train_tensor_read(t, ti, i, 0, e2, sizeof e2))) {
            s = errbuf_set(err, errlen, WGML_ERR_GPU, "adapter: %s", e2);
            goto out;
        }
        w[i] = (st_write_tensor){.name = ti[i].name, .dtype = "F32", .rank = ti[i].rank, .data = bufs[i]};
        for (int d = 0; d < ti[i].rank; d++) w[i].shape[d] = ti[i].shape[d];
    }
    s = adapter_write(dir, cfg, info, nt, w, err, errlen);
    char *pd = s ? NULL : path_join(dir, PEFT_SUBDIR);
    if (!s && !pd) s = errbuf_set(err, errlen, WGML_ERR_OOM, "adapter: out of memory");
    if (pd) {
        peft_layout lay = peft_layout_of(train_model(t));
        s = peft_write(pd, cfg, &lay, info->base_model, nt, w, err, errlen);
        free(pd);
    }
out:
    if (bufs)
        for (int i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    free(w);
    free(ti);
    return s;
}

wgml_status wgml_trainer_save_ste_gguf(wgml_trainer *t, const char *model_path, const char *out_path, char *err, size_t errlen) {
    if (!t || !model_path || !out_path) return errbuf_set(err, errlen, WGML_ERR_ARG, "bad argument");
    int nt = 0;
    train_tensor *ti = train_tensors(t, &nt, err, errlen);
    if (!ti) return WGML_ERR_ARG;
    wgml_status s = WGML_ERR_OOM;
    float **bufs = calloc((size_t)nt + 1, sizeof(float *));
    char **names = calloc((size_t)nt + 1, sizeof(char *));
    if (!bufs || !names) {
        errbuf_set(err, errlen, s, "out of memory");
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        /* the trainer's "blk.L.TARGET.latent" is the GGUF's "blk.L.TARGET.weight" */
        size_t nl = strlen(ti[i].name);
        if (!(names[i] = malloc(nl + 8))) {
            errbuf_set(err, errlen, s, "out of memory");
            goto out;
        }
        memcpy(names[i], ti[i].name, nl + 1);
        if (nl > 7 && !strcmp(names[i] + nl - 7, ".latent")) strcpy(names[i] + nl - 7, ".weight");
        if (!(bufs[i] = train_tensor_read(t, ti, i, 0, err, errlen))) {
            s = WGML_ERR_GPU;
            goto out;
        }
    }
    s = gguf_write_ste(model_path, out_path, nt, (const char *const *)names, (const float *const *)bufs, err, errlen);
out:
    if (bufs)
        for (int i = 0; i < nt; i++) free(bufs[i]);
    if (names)
        for (int i = 0; i < nt; i++) free(names[i]);
    free(bufs);
    free(names);
    free(ti);
    return s;
}

/* ---- reading ---- */

/* An adapter read back: wgml's names and F32 tensors, from wgml's files or PEFT's (whose q/k
 * lora_b rows are in Hugging Face's order until the model they go into says otherwise). */
struct wgml_adapter {
    wgml_train_config cfg;
    int n;
    char **names;
    float **data;
    int64_t *numel;
    int hf_order; /* read from PEFT's files */
};

void wgml_adapter_free(wgml_adapter *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) free(a->names[i]), free(a->data[i]);
    free(a->names);
    free(a->data);
    free(a->numel);
    free(a);
}

/* Reads the config's rank, alpha and targets into a->cfg and checks the base model. */
static wgml_status read_config(wgml_adapter *a, const char *dir, const char *cp, const char *model_path, char *err, size_t errlen) {
    uint8_t *cj = NULL;
    size_t cl;
    json_value v = {0};
    char e2[600];
    wgml_status s = file_read_all(cp, &cj, &cl, err, errlen);
    if (s) return s;
    if (json_parse((const char *)cj, cl, &v, e2, sizeof e2)) {
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: %s", cp, e2);
        goto out;
    }
    const json_value *fmt = json_get(&v, "format"), *rank = json_get(&v, "rank"), *alpha = json_get(&v, "alpha"),
                     *tg = json_get(&v, "targets"), *mode = json_get(&v, "mode"), *base = json_get(&v, "base_model");
    if (!fmt || fmt->kind != JSON_STRING || strcmp(fmt->str, ADAPTER_FORMAT) || !rank || rank->kind != JSON_NUMBER || !alpha ||
        alpha->kind != JSON_NUMBER || !tg || tg->kind != JSON_ARRAY || (mode && (mode->kind != JSON_STRING || strcmp(mode->str, "lora")))) {
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s is not a " ADAPTER_FORMAT " adapter config (format, mode lora, rank, alpha, targets)",
                 cp);
        goto out;
    }
    a->cfg.mode = WGML_TRAIN_LORA;
    a->cfg.lora_rank = (int)rank->number;
    a->cfg.lora_alpha = (float)alpha->number;
    a->cfg.targets = 0;
    for (size_t i = 0; i < tg->n; i++) {
        unsigned b;
        if (tg->items[i].kind != JSON_STRING || wgml_targets_parse(tg->items[i].str, &b)) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: unknown target", cp);
            goto out;
        }
        a->cfg.targets |= b;
    }
    const json_value *bs = json_get(base, "sha256"), *bz = json_get(base, "size");
    if (model_path && bs && bs->kind == JSON_STRING && bz && bz->kind == JSON_NUMBER) {
        char sha[65];
        uint64_t size;
        if ((s = sha256_file(model_path, sha, &size, err, errlen))) goto out;
        if (size != (uint64_t)bz->number || strcmp(sha, bs->str)) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT,
                     "the adapter in %s was trained on another base model (sha256 %.16s..., this model %.16s...)", dir, bs->str, sha);
            goto out;
        }
    }
    s = WGML_OK;
out:
    json_free(&v);
    free(cj);
    return s;
}

/* wgml's own files: adapter_config.json and adapter.safetensors. */
static wgml_status load_wgml(wgml_adapter *a, const char *dir, const char *model_path, char *err, size_t errlen) {
    char *cp = path_join(dir, ADAPTER_CONFIG_FILE), *sp = path_join(dir, ADAPTER_FILE);
    st_file st = {0};
    wgml_status s = WGML_ERR_OOM;
    if (!cp || !sp) {
        errbuf_set(err, errlen, s, "adapter: out of memory");
        goto out;
    }
    a->cfg = wgml_train_defaults();
    if ((s = read_config(a, dir, cp, model_path, err, errlen))) goto out;
    if ((s = st_read(sp, &st, err, errlen))) goto out;
    a->names = calloc((size_t)st.n + 1, sizeof *a->names);
    a->data = calloc((size_t)st.n + 1, sizeof *a->data);
    a->numel = calloc((size_t)st.n + 1, sizeof *a->numel);
    if (!a->names || !a->data || !a->numel) {
        s = errbuf_set(err, errlen, WGML_ERR_OOM, "adapter: out of memory");
        goto out;
    }
    for (int i = 0; i < st.n; i++) {
        const st_tensor *x = &st.t[i];
        if (strcmp(x->dtype, "F32")) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: tensor %s is %s, not F32", sp, x->name, x->dtype);
            goto out;
        }
        if (!(a->names[a->n] = strdup(x->name)) || !(a->data[a->n] = malloc(x->nbytes ? x->nbytes : 4))) {
            free(a->names[a->n]);
            s = errbuf_set(err, errlen, WGML_ERR_OOM, "adapter: out of memory");
            goto out;
        }
        memcpy(a->data[a->n], x->data, x->nbytes);
        a->numel[a->n++] = x->numel;
    }
    s = WGML_OK;
out:
    st_free(&st);
    free(cp);
    free(sp);
    return s;
}

wgml_status wgml_adapter_load(const char *dir, const char *model_path, wgml_adapter **out, char *err, size_t errlen) {
    if (!out) return errbuf_set(err, errlen, WGML_ERR_ARG, "adapter: bad argument");
    *out = NULL;
    if (!dir) return errbuf_set(err, errlen, WGML_ERR_ARG, "adapter: bad argument");
    wgml_adapter *a = calloc(1, sizeof *a);
    if (!a) return errbuf_set(err, errlen, WGML_ERR_OOM, "adapter: out of memory");
    wgml_status s;
    size_t dl = strlen(dir);
    int gguf = dl > 5 && !strcmp(dir + dl - 5, ".gguf"); /* llama.cpp's LoRA file (or a clear refusal) */
    if (gguf || peft_is_dir(dir)) {
        peft_adapter p;
        if (!(s = gguf ? lora_gguf_read(dir, &p, NULL, 0, err, errlen) : peft_read(dir, &p, err, errlen)))
            *a = (wgml_adapter){.cfg = p.cfg, .n = p.n, .names = p.names, .data = p.data, .numel = p.numel, .hf_order = !gguf};
    } else {
        s = load_wgml(a, dir, model_path, err, errlen);
    }
    if (s) wgml_adapter_free(a);
    else *out = a;
    return s;
}

const wgml_train_config *wgml_adapter_config(const wgml_adapter *a) { return a ? &a->cfg : NULL; }

int wgml_adapter_tensor_count(const wgml_adapter *a) { return a ? a->n : 0; }

/* a's tensors in the row order of a model of layout lay: a->data itself, or (from PEFT's files)
 * malloc'ed copies with q's and k's lora_b rows moved; NULL when out of memory. */
static float **model_order(const wgml_adapter *a, const peft_layout *lay) {
    if (!a->hf_order) return a->data;
    float **c = calloc((size_t)a->n + 1, sizeof *c);
    int bad = !c;
    for (int i = 0; !bad && i < a->n; i++) {
        if (!(c[i] = malloc((size_t)a->numel[i] * sizeof(float) + 4))) bad = 1;
        else memcpy(c[i], a->data[i], (size_t)a->numel[i] * sizeof(float));
    }
    if (bad || peft_to_model_order(lay, a->n, (const char *const *)a->names, c, a->numel)) {
        for (int i = 0; c && i < a->n; i++) free(c[i]);
        free(c);
        return NULL;
    }
    return c;
}

static void free_model_order(const wgml_adapter *a, float **data) {
    if (!data || data == a->data) return;
    for (int i = 0; i < a->n; i++) free(data[i]);
    free(data);
}

/* The adapter's tensors checked against m's shapes (A [r, K], B [N, r] of each target's W[N, K]),
 * and *data: them in m's row order (model_order). */
static wgml_status for_model(const wgml_adapter *a, wgml_model *m, float ***data, char *err, size_t errlen) {
    int64_t r = a->cfg.lora_rank, n_layer = wgml_model_config(m)->n_layer;
    for (int i = 0; i < a->n; i++) {
        long long l;
        int t, b = peft_wgml_name(a->names[i], &l, &t);
        if (b < 0 || l < 0 || l >= n_layer)
            return errbuf_set(err, errlen, WGML_ERR_FORMAT, "adapter tensor %s is not blk.<layer < %lld>.<target>.lora_a|lora_b",
                              a->names[i], (long long)n_layer);
        int64_t N, K;
        decoder_target_dims(m, t, &N, &K);
        if (a->numel[i] != r * (b ? N : K))
            return errbuf_set(err, errlen, WGML_ERR_FORMAT,
                              "adapter tensor %s holds %lld values, this model's needs %lld (rank %lld): an adapter of another "
                              "base model", a->names[i], (long long)a->numel[i], (long long)(r * (b ? N : K)), (long long)r);
    }
    peft_layout lay = peft_layout_of(m);
    if (!(*data = model_order(a, &lay))) return errbuf_set(err, errlen, WGML_ERR_OOM, "adapter: out of memory");
    return WGML_OK;
}

wgml_status wgml_adapter_attach(wgml_model *m, const wgml_adapter *a) {
    if (!m || !a) return WGML_ERR_ARG;
    float **data;
    char e[400];
    wgml_status s = for_model(a, m, &data, e, sizeof e);
    if (s) return wgml_set_error(decoder_ctx(m), s, "adapter: %s", e);
    s = wgml_model_set_lora(m, a->cfg.lora_rank, a->cfg.lora_alpha, a->n, (const char *const *)a->names, (const float *const *)data);
    free_model_order(a, data);
    return s;
}

wgml_status wgml_adapter_save_gguf(const wgml_adapter *a, const char *model_path, const char *path, char *err, size_t errlen) {
    if (!a || !model_path || !path) return errbuf_set(err, errlen, WGML_ERR_ARG, "LoRA GGUF: bad argument");
    wgml_gguf *f = NULL;
    model_arch ar;
    wgml_llama_config c = {0};
    char e2[400];
    wgml_status s = wgml_gguf_open(model_path, &f, e2, sizeof e2);
    if (s) return errbuf_set(err, errlen, s, "%s", e2);
    if ((s = arch_from_gguf(f, &ar, &c, e2, sizeof e2))) {
        wgml_gguf_close(f);
        return errbuf_set(err, errlen, s, "%s: %s", model_path, e2);
    }
    wgml_gguf_close(f);
    peft_layout lay = peft_layout_from(&ar, &c);
    float **d = model_order(a, &lay);
    if (!d) return errbuf_set(err, errlen, WGML_ERR_OOM, "LoRA GGUF: out of memory");
    s = lora_gguf_write(path, ar.name, &a->cfg, a->n, (const char *const *)a->names, (const float *const *)d, a->numel, err, errlen);
    free_model_order(a, d);
    return s;
}

wgml_status wgml_trainer_load_adapter(wgml_trainer *t, const wgml_adapter *a, char *err, size_t errlen) {
    if (!t || !a) return errbuf_set(err, errlen, WGML_ERR_ARG, "adapter: bad argument");
    int nt = 0;
    train_tensor *ti = train_tensors(t, &nt, err, errlen);
    if (!ti) return WGML_ERR_ARG;
    float **data = NULL;
    wgml_status s = for_model(a, train_model(t), &data, err, errlen);
    if (!s && a->n != nt)
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "the adapter holds %d tensors, its configuration needs %d", a->n, nt);
    for (int i = 0; i < nt && !s; i++) {
        int j = 0;
        while (j < a->n && strcmp(a->names[j], ti[i].name)) j++;
        if (j == a->n || a->numel[j] != ti[i].numel) {
            s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "tensor %s is missing or has another shape", ti[i].name);
            break;
        }
        if ((s = wgml_trainer_write_state(t, i, 0, data[j]))) errbuf_set(err, errlen, s, "%s", wgml_last_error(train_ctx(t)));
    }
    free_model_order(a, data);
    free(ti);
    return s;
}
