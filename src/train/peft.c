/* PEFT's LoRA adapter directory, written from wgml's adapter tensors and read into them (see
 * peft.h). PEFT names a block's adapters
 *   base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight   [r, in]
 *   base_model.model.model.layers.L.self_attn.q_proj.lora_B.weight   [out, r]
 * for q/k/v/o_proj (self_attn) and gate/up/down_proj (mlp): wgml's blk.L.attn_q.lora_a / lora_b,
 * the same shapes and the same scale (lora_alpha / r). Only the row order of q's and k's lora_b
 * differs, on the families whose GGUF permutes those rows (peft_layout). */
#define _POSIX_C_SOURCE 200809L
#include "train/peft.h"

#include "io/errbuf.h"
#include "io/json.h"
#include "io/path.h"
#include "model/arch.h"
#include "model/decoder.h"
#include "ops/qweight/qw_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Hugging Face's module of each target, in the order of decoder_target_names. */
static const char *const hf_module[DECODER_N_TARGETS] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                                       "mlp.down_proj"};
#define PEFT_PREFIX "base_model.model.model.layers."

peft_layout peft_layout_from(const model_arch *a, const wgml_llama_config *c) {
    return (peft_layout){.n_layer = c->n_layer, .n_head = c->n_head, .n_head_kv = c->n_head_kv, .head_dim = c->head_dim,
                         .permuted_qk = a->rope_style == WGML_ROPE_INTERLEAVED};
}

peft_layout peft_layout_of(const wgml_model *m) { return peft_layout_from(decoder_arch(m), wgml_model_config(m)); }

int peft_wgml_name(const char *name, long long *l, int *t) {
    char tn[32], ab[16];
    if (sscanf(name, "blk.%lld.%31[a-z_].%15s", l, tn, ab) != 3) return -1;
    for (*t = 0; *t < DECODER_N_TARGETS && strcmp(tn, decoder_target_names[*t]); (*t)++) {}
    if (*t == DECODER_N_TARGETS) return -1;
    return !strcmp(ab, "lora_a") ? 0 : !strcmp(ab, "lora_b") ? 1 : -1;
}

/* The same for PEFT's names (with or without the adapter's name "default" before .weight). */
static int peft_name(const char *name, long long *l, int *t) {
    int off = 0;
    if (strncmp(name, PEFT_PREFIX, strlen(PEFT_PREFIX)) || sscanf(name + strlen(PEFT_PREFIX), "%lld.%n", l, &off) != 1 || !off)
        return -1;
    const char *rest = name + strlen(PEFT_PREFIX) + off;
    for (*t = 0; *t < DECODER_N_TARGETS; (*t)++) {
        size_t n = strlen(hf_module[*t]);
        if (strncmp(rest, hf_module[*t], n) || rest[n] != '.') continue;
        const char *ab = rest + n + 1;
        for (int k = 0; k < 2; k++) {
            const char *want[2][2] = {{"lora_A.weight", "lora_A.default.weight"}, {"lora_B.weight", "lora_B.default.weight"}};
            if (!strcmp(ab, want[k][0]) || !strcmp(ab, want[k][1])) return k;
        }
        return -1;
    }
    return -1;
}

/* Moves the rows of a q/k lora_b [heads * head_dim, r] between the two orders: to_hf 1 takes
 * GGUF's (h, i, two) to Hugging Face's (h, two, i), 0 the reverse. Non-zero when out of memory. */
static int permute_rows(float *b, int64_t heads, int64_t hd, int64_t r, int to_hf) {
    size_t row = (size_t)r * sizeof(float), n = (size_t)(heads * hd);
    float *tmp = malloc(n * row + 4);
    if (!tmp) return 1;
    memcpy(tmp, b, n * row);
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t two = 0; two < 2; two++) {
                int64_t g = h * hd + 2 * i + two, f = h * hd + two * (hd / 2) + i;
                memcpy(b + (to_hf ? f : g) * r, tmp + (to_hf ? g : f) * r, row);
            }
    free(tmp);
    return 0;
}

/* The heads of target t's output rows when they are permuted (q or k of a permuted layout), else 0. */
static int64_t permuted_heads(const peft_layout *lay, int t) {
    if (!lay->permuted_qk) return 0;
    return t == 0 ? lay->n_head : t == 1 ? lay->n_head_kv : 0;
}

int peft_to_model_order(const peft_layout *lay, int n, const char *const *names, float *const *data, const int64_t *numel) {
    for (int i = 0; i < n; i++) {
        long long l;
        int t;
        int64_t heads;
        if (peft_wgml_name(names[i], &l, &t) == 1 && (heads = permuted_heads(lay, t)) && numel[i] % (heads * lay->head_dim) == 0 &&
            permute_rows(data[i], heads, lay->head_dim, numel[i] / (heads * lay->head_dim), 0))
            return 1;
    }
    return 0;
}

/* ---- writing ---- */

/* adapter_config.json as PEFT 0.x writes it for a LoRA of a causal LM. */
static char *config_json(const wgml_train_config *cfg, const char *base, size_t *len) {
    char *j = NULL, num[96];
    size_t cap = 0;
    *len = 0;
    int bad = json_put_raw(&j, len, &cap, "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n"
                                          "  \"base_model_name_or_path\": ");
    bad |= json_put_string(&j, len, &cap, base, strlen(base));
    snprintf(num, sizeof num, ",\n  \"r\": %d,\n  \"lora_alpha\": %.9g,\n  \"target_modules\": [", cfg->lora_rank,
             (double)cfg->lora_alpha);
    bad |= json_put_raw(&j, len, &cap, num);
    int first = 1;
    for (int t = 0; t < DECODER_N_TARGETS; t++)
        if (cfg->targets & (1u << t)) {
            const char *m = strchr(hf_module[t], '.') + 1;
            bad |= json_put_raw(&j, len, &cap, first ? "" : ", ");
            bad |= json_put_string(&j, len, &cap, m, strlen(m));
            first = 0;
        }
    bad |= json_put_raw(&j, len, &cap,
                        "],\n  \"lora_dropout\": 0.0,\n  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n"
                        "  \"use_rslora\": false,\n  \"use_dora\": false,\n  \"init_lora_weights\": true,\n"
                        "  \"inference_mode\": true,\n  \"modules_to_save\": null,\n  \"layers_to_transform\": null,\n"
                        "  \"layers_pattern\": null,\n  \"rank_pattern\": {},\n  \"alpha_pattern\": {},\n  \"revision\": null\n}\n");
    if (bad) {
        free(j);
        return NULL;
    }
    return j;
}

static wgml_status write_files(const char *dir, const st_write_tensor *w, int n, const char *cj, size_t clen, char *err,
                               size_t errlen) {
    char *sp = path_join(dir, PEFT_FILE), *cp = path_join(dir, "adapter_config.json"), e2[600];
    uint8_t *file = NULL;
    size_t flen;
    wgml_status s = WGML_ERR_OOM;
    if (!sp || !cp) {
        errbuf_set(err, errlen, s, "PEFT adapter: out of memory");
        goto out;
    }
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    if ((s = st_build(w, n, mk, mv, 1, &file, &flen, e2, sizeof e2))) {
        errbuf_set(err, errlen, s, "PEFT adapter: %s", e2);
        goto out;
    }
    const void *parts[1] = {file};
    size_t sizes[1] = {flen};
    if ((s = file_write_atomic(sp, parts, sizes, 1, SIZE_MAX, e2, sizeof e2))) {
        errbuf_set(err, errlen, s, "PEFT adapter: %s", e2);
        goto out;
    }
    parts[0] = cj;
    sizes[0] = clen;
    if ((s = file_write_atomic(cp, parts, sizes, 1, SIZE_MAX, e2, sizeof e2))) errbuf_set(err, errlen, s, "PEFT adapter: %s", e2);
out:
    free(file);
    free(sp);
    free(cp);
    return s;
}

wgml_status peft_write(const char *dir, const wgml_train_config *cfg, const peft_layout *lay, const char *base, int n,
                       const st_write_tensor *t, char *err, size_t errlen) {
    if (!dir || !cfg || !lay || !base || n < 1 || !t) return errbuf_set(err, errlen, WGML_ERR_ARG, "PEFT adapter: bad argument");
    if (mkdir(dir, 0755) && errno != EEXIST)
        return errbuf_set(err, errlen, WGML_ERR_IO, "PEFT adapter: mkdir %s: %s", dir, strerror(errno));
    st_write_tensor *w = calloc((size_t)n, sizeof *w);
    char **names = calloc((size_t)n, sizeof *names);
    float **bufs = calloc((size_t)n, sizeof *bufs);
    char *cj = NULL;
    size_t clen = 0;
    wgml_status s = WGML_ERR_OOM;
    if (!w || !names || !bufs || !(cj = config_json(cfg, base, &clen))) {
        errbuf_set(err, errlen, s, "PEFT adapter: out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        long long l;
        int tg, ab = peft_wgml_name(t[i].name, &l, &tg);
        if (ab < 0 || t[i].rank != 2 || strcmp(t[i].dtype, "F32")) {
            s = errbuf_set(err, errlen, WGML_ERR_ARG, "PEFT adapter: tensor %s is not an F32 blk.L.TARGET.lora_a|lora_b matrix",
                           t[i].name);
            goto out;
        }
        size_t nb = (size_t)(t[i].shape[0] * t[i].shape[1]) * sizeof(float), nl = strlen(PEFT_PREFIX) + 64;
        if (!(names[i] = malloc(nl)) || !(bufs[i] = malloc(nb ? nb : 4))) {
            errbuf_set(err, errlen, s, "PEFT adapter: out of memory");
            goto out;
        }
        snprintf(names[i], nl, PEFT_PREFIX "%lld.%s.lora_%c.weight", l, hf_module[tg], ab ? 'B' : 'A');
        memcpy(bufs[i], t[i].data, nb);
        int64_t heads = ab ? permuted_heads(lay, tg) : 0;
        if (heads && permute_rows(bufs[i], heads, lay->head_dim, t[i].shape[1], 1)) {
            errbuf_set(err, errlen, s, "PEFT adapter: out of memory");
            goto out;
        }
        w[i] = t[i];
        w[i].name = names[i];
        w[i].data = bufs[i];
    }
    s = write_files(dir, w, n, cj, clen, err, errlen);
out:
    for (int i = 0; names && bufs && i < n; i++) free(names[i]), free(bufs[i]);
    free(names);
    free(bufs);
    free(w);
    free(cj);
    return s;
}

/* ---- reading ---- */

static wgml_status read_config(const char *path, json_value *v, char *err, size_t errlen) {
    uint8_t *cj = NULL;
    size_t cl;
    char e2[300];
    wgml_status s = file_read_all(path, &cj, &cl, err, errlen);
    if (s) return s;
    if (json_parse((const char *)cj, cl, v, e2, sizeof e2)) s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: %s", path, e2);
    else if (v->kind != JSON_OBJECT) s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: not a JSON object", path);
    free(cj);
    return s;
}

int peft_is_dir(const char *dir) {
    char *cp = dir ? path_join(dir, "adapter_config.json") : NULL;
    json_value v = {0};
    int yes = cp && !read_config(cp, &v, NULL, 0) && json_get(&v, "peft_type");
    json_free(&v);
    free(cp);
    return yes;
}

static int truthy(const json_value *x) {
    return x && ((x->kind == JSON_BOOL && x->boolean) || (x->kind == JSON_STRING && x->len) ||
                 ((x->kind == JSON_ARRAY || x->kind == JSON_OBJECT) && x->n) || (x->kind == JSON_NUMBER && x->number != 0));
}

/* What in config c wgml cannot apply, or NULL. */
static const char *unsupported(const json_value *c) {
    const json_value *pt = json_get(c, "peft_type"), *bias = json_get(c, "bias");
    if (!pt || pt->kind != JSON_STRING || strcmp(pt->str, "LORA")) return "a PEFT method other than LoRA (peft_type)";
    if (truthy(json_get(c, "use_dora"))) return "DoRA (use_dora)";
    if (truthy(json_get(c, "use_rslora"))) return "rsLoRA (use_rslora: the scale alpha/sqrt(r))";
    if (truthy(json_get(c, "rank_pattern")) || truthy(json_get(c, "alpha_pattern")))
        return "per-module ranks or alphas (rank_pattern, alpha_pattern)";
    if ((bias && !(bias->kind == JSON_STRING && !strcmp(bias->str, "none"))) || truthy(json_get(c, "lora_bias")))
        return "trained biases (bias, lora_bias)";
    if (truthy(json_get(c, "modules_to_save"))) return "fully trained modules (modules_to_save)";
    if (truthy(json_get(c, "fan_in_fan_out"))) return "transposed (Conv1D) weights (fan_in_fan_out)";
    if (truthy(json_get(c, "layer_replication"))) return "replicated layers (layer_replication)";
    if (truthy(json_get(c, "target_parameters"))) return "adapted parameters (target_parameters)";
    return NULL;
}

void peft_adapter_free(peft_adapter *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) free(a->names[i]), free(a->data[i]);
    free(a->names);
    free(a->data);
    free(a->numel);
    memset(a, 0, sizeof *a);
}

/* Tensor x of file sp as wgml's name and F32 copy (entry a->n). */
static wgml_status take_tensor(peft_adapter *a, const char *sp, const st_tensor *x, char *err, size_t errlen) {
    long long l;
    int t, ab = peft_name(x->name, &l, &t);
    int64_t r = a->cfg.lora_rank;
    if (ab < 0)
        return errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED,
                          "%s: tensor %s: wgml adapts only the q/k/v/o_proj and gate/up/down_proj linears of the blocks", sp,
                          x->name);
    if (x->rank != 2 || x->shape[ab ? 1 : 0] != r)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: tensor %s has shape [%lld, %lld], not %s (r %lld)", sp, x->name,
                          (long long)x->shape[0], (long long)(x->rank > 1 ? x->shape[1] : 1), ab ? "[out, r]" : "[r, in]",
                          (long long)r);
    int f32 = !strcmp(x->dtype, "F32"), f64 = !strcmp(x->dtype, "F64"), f16 = !strcmp(x->dtype, "F16"),
        bf16 = !strcmp(x->dtype, "BF16");
    if (!f32 && !f64 && !f16 && !bf16)
        return errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: tensor %s is %s (F32, F64, F16 or BF16 wanted)", sp, x->name, x->dtype);
    char name[96];
    snprintf(name, sizeof name, "blk.%lld.%s.lora_%c", l, decoder_target_names[t], ab ? 'b' : 'a');
    float *d = malloc((size_t)x->numel * sizeof(float) + 4);
    char *nm = strdup(name);
    if (!d || !nm) {
        free(d);
        free(nm);
        return errbuf_set(err, errlen, WGML_ERR_OOM, "PEFT adapter: out of memory");
    }
    for (int64_t i = 0; i < x->numel; i++) {
        uint16_t h;
        double e;
        if (f32) memcpy(&d[i], x->data + 4 * i, 4);
        else if (f64) memcpy(&e, x->data + 8 * i, 8), d[i] = (float)e;
        else {
            memcpy(&h, x->data + 2 * i, 2);
            uint32_t bits = (uint32_t)h << 16;
            if (f16) d[i] = qw_half_to_float(h);
            else memcpy(&d[i], &bits, 4);
        }
    }
    a->names[a->n] = nm;
    a->data[a->n] = d;
    a->numel[a->n++] = x->numel;
    a->cfg.targets |= 1u << t;
    return WGML_OK;
}

wgml_status peft_parse(const char *cfg, size_t clen, uint8_t *st_buf, size_t st_size, const char *dir, peft_adapter *a,
                       char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    json_value v = {0};
    st_file st = {0};
    char e2[300], cp[300], sp[300];
    snprintf(cp, sizeof cp, "%s/adapter_config.json", dir);
    snprintf(sp, sizeof sp, "%s/" PEFT_FILE, dir);
    wgml_status s = WGML_OK;
    if (json_parse(cfg, clen, &v, e2, sizeof e2)) s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: %s", cp, e2);
    else if (v.kind != JSON_OBJECT) s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: not a JSON object", cp);
    if (s) {
        free(st_buf);
        goto out;
    }
    const char *why = unsupported(&v);
    const json_value *r = json_get(&v, "r"), *al = json_get(&v, "lora_alpha");
    if (why) {
        free(st_buf);
        s = errbuf_set(err, errlen, WGML_ERR_UNSUPPORTED, "%s: wgml cannot apply %s", cp, why);
        goto out;
    }
    if (!r || r->kind != JSON_NUMBER || r->number < 1 || r->number > 4096 || r->number != floor(r->number) || !al ||
        al->kind != JSON_NUMBER || !(al->number > 0) || !(al->number < 1e30)) {
        free(st_buf);
        s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s: r (a positive integer) and lora_alpha (positive) are needed", cp);
        goto out;
    }
    a->cfg = wgml_train_defaults();
    a->cfg.mode = WGML_TRAIN_LORA;
    a->cfg.lora_rank = (int)r->number;
    a->cfg.lora_alpha = (float)al->number;
    a->cfg.targets = 0;
    if ((s = st_parse(st_buf, st_size, &st, e2, sizeof e2))) {
        errbuf_set(err, errlen, s, "%s: %s", sp, e2);
        goto out;
    }
    a->names = calloc((size_t)st.n + 1, sizeof *a->names);
    a->data = calloc((size_t)st.n + 1, sizeof *a->data);
    a->numel = calloc((size_t)st.n + 1, sizeof *a->numel);
    if (!a->names || !a->data || !a->numel) {
        s = errbuf_set(err, errlen, WGML_ERR_OOM, "PEFT adapter: out of memory");
        goto out;
    }
    for (int i = 0; i < st.n && !s; i++) s = take_tensor(a, sp, &st.t[i], err, errlen);
    if (!s && !a->n) s = errbuf_set(err, errlen, WGML_ERR_FORMAT, "%s holds no tensors", sp);
out:
    if (s) peft_adapter_free(a);
    st_free(&st);
    json_free(&v);
    return s;
}

wgml_status peft_read(const char *dir, peft_adapter *a, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    if (!dir) return errbuf_set(err, errlen, WGML_ERR_ARG, "PEFT adapter: bad argument");
    char *cp = path_join(dir, "adapter_config.json"), *sp = path_join(dir, PEFT_FILE);
    uint8_t *cj = NULL, *sb = NULL;
    size_t cl = 0, sl = 0;
    wgml_status s = cp && sp ? WGML_OK : errbuf_set(err, errlen, WGML_ERR_OOM, "PEFT adapter: out of memory");
    if (!s && !(s = file_read_all(cp, &cj, &cl, err, errlen)) && !(s = file_read_all(sp, &sb, &sl, err, errlen))) {
        s = peft_parse((const char *)cj, cl, sb, sl, dir, a, err, errlen);
        sb = NULL; /* peft_parse took it */
    }
    free(sb);
    free(cj);
    free(cp);
    free(sp);
    return s;
}
