/* llama.cpp's LoRA adapter GGUF, written and read (see lora_gguf.h). */
#define _POSIX_C_SOURCE 200809L
#include "train/lora_gguf.h"

#include "io/errbuf.h"
#include "io/gguf_write.h"
#include "model/decoder.h"
#include "ops/qweight/qw_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wgml_status lora_gguf_write(const char *path, const char *arch, const wgml_train_config *cfg, int n, const char *const *names,
                            const float *const *data, const int64_t *numel, char *err, size_t errlen) {
    if (!path || !arch || !cfg || n < 1 || !names || !data || !numel || cfg->lora_rank < 1)
        return errbuf_set(err, errlen, WGML_ERR_ARG, "LoRA GGUF: bad argument");
    gguf_tensor_write *t = calloc((size_t)n, sizeof *t);
    char(*nm)[96] = calloc((size_t)n, sizeof *nm);
    uint8_t *file = NULL;
    size_t len = 0;
    wgml_status s = t && nm ? WGML_OK : errbuf_set(err, errlen, WGML_ERR_OOM, "LoRA GGUF: out of memory");
    int64_t r = cfg->lora_rank;
    for (int i = 0; i < n && !s; i++) {
        long long l;
        int tg, ab = peft_wgml_name(names[i], &l, &tg);
        if (ab < 0 || numel[i] < r || numel[i] % r) {
            s = errbuf_set(err, errlen, WGML_ERR_ARG, "LoRA GGUF: tensor %s is not a blk.L.TARGET.lora_a|lora_b of rank %lld",
                           names[i], (long long)r);
            break;
        }
        snprintf(nm[i], sizeof nm[i], "blk.%lld.%s.weight.lora_%c", l, decoder_target_names[tg], ab ? 'b' : 'a');
        /* dims[0] is the contiguous one: A [r, K] row-major is dims {K, r}; B [N, r] is {r, N} */
        t[i] = (gguf_tensor_write){.name = nm[i], .n_dims = 2, .data = data[i],
                                   .dims = {ab ? r : numel[i] / r, ab ? numel[i] / r : r}};
    }
    const gguf_kv_write kv[4] = {{.key = "general.architecture", .str = arch},
                                 {.key = "general.type", .str = "adapter"},
                                 {.key = "adapter.type", .str = "lora"},
                                 {.key = "adapter.lora.alpha", .f32 = cfg->lora_alpha}};
    if (!s) s = gguf_build_f32(kv, 4, t, n, &file, &len, err, errlen);
    if (!s) {
        const void *parts[1] = {file};
        size_t sizes[1] = {len};
        char e2[400];
        if ((s = file_write_atomic(path, parts, sizes, 1, SIZE_MAX, e2, sizeof e2))) errbuf_set(err, errlen, s, "LoRA GGUF: %s", e2);
    }
    free(file);
    free(nm);
    free(t);
    return s;
}

static int is_adapter(const wgml_gguf *f) {
    const char *s;
    size_t n;
    return !wgml_gguf_get_string(f, "general.type", &s, &n) && n == 7 && !memcmp(s, "adapter", 7);
}

/* Tensor i of f as entry a->n of a (wgml's name, F32), checking its name, type and rank. */
static wgml_status take(const wgml_gguf *f, int64_t i, const char *path, peft_adapter *a, char *err, size_t errlen) {
    const wgml_gguf_tensor *x = wgml_gguf_tensor_at(f, i);
    long long l;
    char tn[32], ab[16];
    int t = 0, n = 0;
    if (sscanf(x->name, "blk.%lld.%31[a-z_].weight.%15s%n", &l, tn, ab, &n) == 3 && !x->name[n])
        while (t < DECODER_N_TARGETS && strcmp(tn, decoder_target_names[t])) t++;
    else t = DECODER_N_TARGETS;
    int b = !strcmp(ab, "lora_b");
    if (t == DECODER_N_TARGETS || l < 0 || (!b && strcmp(ab, "lora_a")))
        return errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED,
                          "%s: tensor %s: wgml adapts only the attn_q/k/v/output and ffn_gate/up/down weights of the blocks", path,
                          x->name);
    int64_t r = x->n_dims == 2 ? x->dims[b ? 0 : 1] : 0;
    if (r < 1 || r > 4096 || (a->cfg.lora_rank && r != a->cfg.lora_rank) || (x->type != 0 && x->type != 1))
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: tensor %s (type %u, dims [%lld, %lld]) is not an F32 or F16 lora_%c of rank %d",
                          path, x->name, (unsigned)x->type, (long long)x->dims[0], (long long)x->dims[1], b ? 'b' : 'a',
                          a->cfg.lora_rank);
    a->cfg.lora_rank = (int)r;
    const void *d;
    size_t nb;
    char name[96];
    snprintf(name, sizeof name, "blk.%lld.%s.lora_%c", l, tn, b ? 'b' : 'a');
    float *v = NULL;
    char *nm = NULL;
    wgml_status s = wgml_gguf_tensor_data(f, i, &d, &nb);
    if (s) return errbuf_set(err, errlen, s, "%s: tensor %s: %s", path, x->name, wgml_gguf_error(f));
    if (!(v = malloc((size_t)x->numel * sizeof(float) + 4)) || !(nm = strdup(name))) {
        free(v);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "LoRA GGUF: out of memory");
    }
    for (int64_t k = 0; k < x->numel; k++) {
        uint16_t h;
        if (x->type == 0) memcpy(&v[k], (const uint8_t *)d + 4 * k, 4);
        else memcpy(&h, (const uint8_t *)d + 2 * k, 2), v[k] = qw_half_to_float(h);
    }
    a->names[a->n] = nm;
    a->data[a->n] = v;
    a->numel[a->n++] = x->numel;
    a->cfg.targets |= 1u << t;
    return WGML_OK;
}

wgml_status lora_gguf_read(const char *path, peft_adapter *a, char *arch, size_t arch_len, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    wgml_gguf *f = NULL;
    char e2[400];
    wgml_status s = wgml_gguf_open(path, &f, e2, sizeof e2);
    if (s) return errbuf_set(err, errlen, s, "%s", e2);
    const char *ty = "", *ar = "";
    size_t tl = 0, al = 0;
    float alpha = 0;
    int64_t n = wgml_gguf_tensor_count(f);
    if (!is_adapter(f) || wgml_gguf_get_string(f, "adapter.type", &ty, &tl) || tl != 4 || memcmp(ty, "lora", 4))
        s = errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED, "%s: not a LoRA adapter GGUF (general.type adapter, adapter.type lora)",
                       path);
    else if (n < 1 || n > 100000)
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: %lld tensors", path, (long long)n);
    if (!s && wgml_gguf_find(f, "adapter.lora.alpha", NULL) && wgml_gguf_get_f32(f, "adapter.lora.alpha", &alpha))
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: adapter.lora.alpha is not a float32", path);
    if (!s && arch && arch_len) {
        if (wgml_gguf_get_string(f, "general.architecture", &ar, &al)) al = 0;
        snprintf(arch, arch_len, "%.*s", (int)(al < arch_len ? al : arch_len - 1), ar);
    }
    if (!s) {
        a->cfg = wgml_train_defaults();
        a->cfg.mode = WGML_TRAIN_LORA;
        a->cfg.lora_rank = 0;
        a->cfg.targets = 0;
        a->names = calloc((size_t)n, sizeof *a->names);
        a->data = calloc((size_t)n, sizeof *a->data);
        a->numel = calloc((size_t)n, sizeof *a->numel);
        if (!a->names || !a->data || !a->numel) s = errbuf_set(err, errlen, WGML_ERR_OOM, "LoRA GGUF: out of memory");
    }
    for (int64_t i = 0; i < n && !s; i++) s = take(f, i, path, a, err, errlen);
    /* llama.cpp's scale: alpha / rank, or 1 when the file has no alpha (0) */
    if (!s) a->cfg.lora_alpha = alpha > 0 ? alpha : (float)a->cfg.lora_rank;
    if (s) peft_adapter_free(a);
    wgml_gguf_close(f);
    return s;
}
