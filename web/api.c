/* The C side of wgml's JavaScript API (web/wgml.js), linked into build-web/wgml-api.wasm: a WASI
 * reactor whose exports are these wgmlw_* functions. Each is one call of the public C API with
 * plain arguments (numbers and pointers into wasm memory), so that JavaScript never lays out a C
 * struct; what a call returns besides a status or a handle (model facts, generation statistics)
 * comes back as JSON text. Streamed text leaves through the import wgmlw_on_text, whose return
 * value stops generation (the page's stop button). One context per instance: the device's. */
#define _POSIX_C_SOURCE 200809L
#include "wgml.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(#name))) name
/* The last error's text and the last call's JSON, kept until the next call sets them. */
static char g_err[1024];
static char *g_json;
static wgml_ctx *g_ctx;
static wgml_status g_status;

__attribute__((import_module("env"), import_name("wgmlw_on_text"))) int wgmlw_on_text(const char *text, size_t len);

/* Keeps the context's message (after "what: " unless what is NULL) and status for wgmlw_error. */
static int fail(wgml_status s, const char *what) {
    g_status = s ? s : WGML_ERR_ARG;
    const char *msg = g_ctx && wgml_last_error(g_ctx)[0] ? wgml_last_error(g_ctx) : wgml_status_name(s);
    if (what) snprintf(g_err, sizeof g_err, "%s: %s", what, msg);
    else snprintf(g_err, sizeof g_err, "%s", msg);
    return (int)g_status;
}

static int check(wgml_status s, const char *what) { return s == WGML_OK ? 0 : fail(s, what); }

/* A refusal of the API's own (no context message): msg and s for wgmlw_error. */
static int refuse(wgml_status s, const char *msg) {
    g_status = s;
    snprintf(g_err, sizeof g_err, "%s", msg);
    return (int)s;
}

/* The message of the last failed call. */
const char *EXPORT(wgmlw_error)(void) { return g_err; }
/* The status of the last failed call (for those that return a handle). */
int EXPORT(wgmlw_status)(void) { return (int)g_status; }
/* JSON of the last call that makes some (wgmlw_device, wgmlw_model_info, wgmlw_generate). */
const char *EXPORT(wgmlw_json)(void) { return g_json ? g_json : "null"; }

static void set_json(char *s) {
    free(g_json);
    g_json = s;
}

/* Opens the device: 0, or a status with wgmlw_error saying why (no adapter, a missing limit). */
int EXPORT(wgmlw_open)(int poison) {
    if (g_ctx) return 0;
    wgml_ctx_options o = {.poison_outputs = poison};
    wgml_status s = wgml_ctx_create(&o, &g_ctx);
    if (s) snprintf(g_err, sizeof g_err, "opening the WebGPU device: %s", wgml_create_error());
    return (int)s;
}

/* Closes the device (after a loss, before opening another); every model and trainer must be
 * freed first. */
void EXPORT(wgmlw_close)(void) {
    wgml_ctx_destroy(g_ctx);
    g_ctx = NULL;
}

/* The device as JSON: adapter name, backend, the limits a model needs, features. */
int EXPORT(wgmlw_device)(void) {
    if (!g_ctx) return fail(WGML_ERR_STATE, "device");
    wgml_device_info d;
    wgml_device_get_info(g_ctx, &d);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return fail(WGML_ERR_OOM, "device");
    fprintf(f, "{\"adapter\":\"%s\",\"vendor\":\"%s\",\"architecture\":\"%s\",\"backend\":\"%s\",\"type\":\"%s\","
               "\"maxStorageBufferBindingSize\":%" PRIu64 ",\"maxBufferSize\":%" PRIu64 ","
               "\"maxComputeWorkgroupStorageSize\":%u,\"maxStorageBuffersPerShaderStage\":%u,"
               "\"shaderF16\":%d,\"subgroups\":%d,\"timestamps\":%d}",
            d.adapter, d.vendor, d.architecture, d.backend, d.type, d.max_storage_binding, d.max_buffer_size,
            d.max_workgroup_storage, d.max_storage_buffers_per_stage, d.has_f16, d.has_subgroups, d.has_timestamps);
    fclose(f);
    set_json(buf);
    return 0;
}

/* Loads the GGUF at path (in the worker's file store) with an n_ctx-row KV cache of kv_type
 * (wgml_kv_type: 0 the default f32, 1 f32, 2 f16); NULL with wgmlw_error on failure. */
wgml_model *EXPORT(wgmlw_model_load)(const char *path, int n_ctx, int kv_type) {
    if (!g_ctx) {
        fail(WGML_ERR_STATE, "load");
        return NULL;
    }
    wgml_clear_error(g_ctx);
    wgml_model_options o = {.n_ctx = n_ctx, .kv_type = (wgml_kv_type)kv_type};
    wgml_model *m = wgml_model_load(g_ctx, path, &o);
    if (!m) fail(wgml_last_status(g_ctx), NULL); /* the message names the file */
    return m;
}

void EXPORT(wgmlw_model_free)(wgml_model *m) { wgml_model_free(m); }

/* The model as JSON: its configuration and the text `wgml info --model` prints (architecture,
 * hyper-parameters, tokenizer, tensor types). */
int EXPORT(wgmlw_model_info)(wgml_model *m, const char *path) {
    const wgml_llama_config *c = wgml_model_config(m);
    char *text = NULL, *buf = NULL;
    size_t tn = 0, n = 0;
    FILE *t = open_memstream(&text, &tn);
    if (!t) return fail(WGML_ERR_OOM, "info");
    wgml_model_print_info(path, t);
    fclose(t);
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        free(text);
        return fail(WGML_ERR_OOM, "info");
    }
    fprintf(f, "{\"n_vocab\":%" PRId64 ",\"n_embd\":%" PRId64 ",\"n_layer\":%" PRId64 ",\"n_ff\":%" PRId64
               ",\"n_head\":%" PRId64 ",\"n_head_kv\":%" PRId64 ",\"head_dim\":%" PRId64 ",\"n_ctx\":%" PRId64
               ",\"kv_f16\":%s,\"tokenizer\":%s,\"text\":\"",
            c->n_vocab, c->n_embd, c->n_layer, c->n_ff, c->n_head, c->n_head_kv, c->head_dim, c->n_ctx,
            c->kv_f16 ? "true" : "false", wgml_model_tokenizer(m) ? "true" : "false");
    for (const char *p = text; p && *p; p++) { /* a JSON string of the report */
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if ((unsigned char)*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputs("\"}", f);
    fclose(f);
    free(text);
    set_json(buf);
    return 0;
}

/* Tokenizes len bytes of text (flags: WGML_TOK_*); *ids is malloc'ed (JS frees it). */
int EXPORT(wgmlw_tokenize)(wgml_model *m, const char *text, size_t len, int flags, int32_t **ids, size_t *n) {
    const wgml_tokenizer *t = wgml_model_tokenizer(m);
    if (!t) return fail(WGML_ERR_UNSUPPORTED, wgml_model_tokenizer_error(m));
    wgml_status s = wgml_tokenizer_encode(t, text, len, flags, ids, n);
    if (s) snprintf(g_err, sizeof g_err, "tokenize: %s", wgml_tokenizer_error(t));
    return (int)s;
}

static int on_text(void *user, const char *text, size_t len) {
    (void)user;
    return wgmlw_on_text(text, len);
}

/* Generates from prompt ids[n] (a fresh sequence): text streams through wgmlw_on_text; the
 * generated ids (malloc'ed) into *out / *n_out; statistics as JSON. */
int EXPORT(wgmlw_generate)(wgml_model *m, const int32_t *ids, size_t n, int max_tokens, float temperature, int top_k,
                           float top_p, uint32_t seed, int32_t **out, size_t *n_out) {
    wgml_gen_options o = {.max_tokens = max_tokens, .sampler = {temperature, top_k, top_p}, .seed = seed};
    wgml_gen_stats st = {0};
    wgml_model_reset(m);
    wgml_status s = wgml_generate(m, ids, n, &o, on_text, NULL, &st, out, n_out);
    if (s) return fail(s, "generate");
    char *buf = NULL;
    size_t bn = 0;
    FILE *f = open_memstream(&buf, &bn);
    if (!f) return fail(WGML_ERR_OOM, "generate");
    fprintf(f, "{\"prompt_tokens\":%zu,\"generated_tokens\":%zu,\"prefill_s\":%.6f,\"decode_s\":%.6f,"
               "\"prefill_wall_s\":%.6f,\"decode_wall_s\":%.6f,\"stopped\":%d}",
            st.prompt_tokens, st.generated_tokens, st.prefill_s, st.decode_s, st.prefill_wall_s, st.decode_wall_s,
            st.stopped);
    fclose(f);
    set_json(buf);
    return 0;
}

/* A trainer on m: mode 0 LoRA / 1 straight-through, the adapter's rank, alpha and targets
 * (WGML_TARGET_* bits), batch x seq_len tokens a step, AdamW's lr and weight decay, the init seed;
 * the rest as wgml_train_defaults. NULL with wgmlw_error on failure. */
wgml_trainer *EXPORT(wgmlw_trainer_new)(wgml_model *m, int mode, int rank, float alpha, unsigned targets, int batch,
                                        int seq_len, float lr, float weight_decay, uint32_t seed) {
    wgml_train_config c = wgml_train_defaults();
    c.mode = mode ? WGML_TRAIN_STE : WGML_TRAIN_LORA;
    c.lora_rank = rank;
    c.lora_alpha = alpha;
    c.targets = targets;
    c.batch = batch;
    c.seq_len = seq_len;
    c.lr = lr;
    c.weight_decay = weight_decay;
    c.seed = seed;
    wgml_clear_error(g_ctx);
    wgml_trainer *t = wgml_trainer_new(m, &c);
    if (!t) fail(wgml_last_status(g_ctx), "trainer");
    return t;
}

void EXPORT(wgmlw_trainer_free)(wgml_trainer *t) { wgml_trainer_free(t); }

int EXPORT(wgmlw_trainer_step)(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, float lr, float *loss) {
    return check(wgml_trainer_step(t, tokens, labels, lr, loss), "train step");
}

int EXPORT(wgmlw_trainer_eval)(wgml_trainer *t, const int32_t *tokens, const int32_t *labels, double *sum,
                               int64_t *n) {
    return check(wgml_trainer_eval(t, tokens, labels, sum, n), "eval");
}

int EXPORT(wgmlw_trainer_tensor_count)(const wgml_trainer *t) { return wgml_trainer_tensor_count(t); }
const char *EXPORT(wgmlw_trainer_tensor_name)(const wgml_trainer *t, int i) { return wgml_trainer_tensor_name(t, i); }

/* The element count of tensor i (its shape's product), or -1. */
int64_t EXPORT(wgmlw_trainer_tensor_numel)(const wgml_trainer *t, int i) {
    int rank = 0;
    int64_t shape[4] = {0}, n = 1;
    if (wgml_trainer_tensor_shape(t, i, &rank, shape)) return -1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    return n;
}

/* Tensor i's parameter (what 0) or AdamW moment (1: m, 2: v), out of or into data. */
int EXPORT(wgmlw_trainer_read)(wgml_trainer *t, int i, int what, float *data) {
    return check(wgml_trainer_read_state(t, i, what, data), "reading the adapter");
}
int EXPORT(wgmlw_trainer_write)(wgml_trainer *t, int i, int what, const float *data) {
    return check(wgml_trainer_write_state(t, i, what, data), "writing the adapter");
}

/* Generation with the trainer's current adapter. */
int EXPORT(wgmlw_trainer_attach)(wgml_trainer *t) { return check(wgml_trainer_attach_lora(t), "attach"); }

/* Generation with n named adapter tensors (rank, alpha as trained); n = 0: none. */
int EXPORT(wgmlw_model_set_lora)(wgml_model *m, int rank, float alpha, int n, const char *const *names,
                                 const float *const *data) {
    return check(wgml_model_set_lora(m, rank, alpha, n, names, data), "set adapter");
}

/* Writes the trainer's adapter as `wgml finetune` does (dir/adapter_config.json and
 * dir/adapter.safetensors, which `wgml generate --lora dir` loads), with the configuration the
 * trainer was made with; base_model: the model's path in the file store (its size and SHA-256
 * go into the config); steps: the optimizer steps taken. */
int EXPORT(wgmlw_save_adapter)(wgml_trainer *t, const char *dir, const char *base_model, int64_t steps) {
    wgml_train_config c = wgml_trainer_config(t);
    char sha[65];
    uint64_t size = 0;
    wgml_status s = wgml_file_sha256(base_model, sha, &size, g_err, sizeof g_err);
    if (s) return (int)s;
    wgml_adapter_info info = {.base_model = base_model, .base_size = size, .base_sha256 = sha, .data = "", .steps = steps};
    return (int)wgml_trainer_save_adapter(t, &c, dir, &info, g_err, sizeof g_err);
}

/* Generation with the adapter in dir (as wgmlw_save_adapter or `wgml finetune` wrote it), checked
 * against the base model at model_path. */
int EXPORT(wgmlw_load_adapter)(wgml_model *m, const char *dir, const char *model_path) {
    wgml_adapter *a = NULL;
    wgml_status s = wgml_adapter_load(dir, model_path, &a, g_err, sizeof g_err);
    if (s) return (int)s;
    s = wgml_adapter_attach(m, a);
    wgml_adapter_free(a);
    return check(s, "attaching the adapter");
}

/* ---- training data, as `wgml finetune` cuts it (wgml_data_from_file) ---- */

/* The text or JSONL file at path (in the file store) in rows of seq_len + 1 tokens of m's
 * tokenizer, the last eval_fraction held out. NULL with wgmlw_error on failure; else its facts
 * as wgmlw_json: {n_train, n_eval, train_labels, eval_labels, n_examples, n_truncated}. */
wgml_dataset *EXPORT(wgmlw_data_load)(wgml_model *m, const char *path, int seq_len, double eval_fraction) {
    wgml_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        fail(WGML_ERR_OOM, "data");
        return NULL;
    }
    char err[512];
    wgml_status s = wgml_data_from_file(wgml_model_tokenizer(m), path, seq_len, eval_fraction, ds, err, sizeof err);
    if (s) {
        free(ds);
        refuse(s, err);
        return NULL;
    }
    char buf[256];
    snprintf(buf, sizeof buf,
             "{\"n_train\":%" PRId64 ",\"n_eval\":%" PRId64 ",\"train_labels\":%" PRId64 ",\"eval_labels\":%" PRId64
             ",\"n_examples\":%" PRId64 ",\"n_truncated\":%" PRId64 "}",
             ds->n_train, ds->n_eval, ds->train_labels, ds->eval_labels, ds->n_examples, ds->n_truncated);
    set_json(strdup(buf));
    return ds;
}

void EXPORT(wgmlw_data_free)(wgml_dataset *ds) {
    if (ds) wgml_data_free(ds);
    free(ds);
}

/* One optimizer step of t on its batch of training rows from position pos (the order of
 * seed); *loss its mean loss. Returns the next position, or -1 with wgmlw_error. */
int64_t EXPORT(wgmlw_data_step)(wgml_trainer *t, wgml_dataset *ds, uint32_t seed, int64_t pos, float lr, float *loss) {
    wgml_train_config c = wgml_trainer_config(t);
    if (!ds || ds->n_train < 1 || c.seq_len != ds->seq_len) {
        refuse(WGML_ERR_ARG, "train step: no training rows, or rows of another length than the trainer's");
        return -1;
    }
    size_t bl = (size_t)c.batch * (size_t)c.seq_len;
    int32_t *in = malloc(bl * sizeof(int32_t)), *lab = malloc(bl * sizeof(int32_t));
    wgml_status s = in && lab ? WGML_OK : WGML_ERR_OOM;
    if (!s) {
        pos = wgml_data_train_batch(ds, seed, pos, c.batch, in, lab);
        s = wgml_trainer_step(t, in, lab, lr, loss);
    }
    free(in);
    free(lab);
    return check(s, "train step") ? -1 : pos;
}

/* The held-out rows' summed loss and label count (perplexity: exp(*sum / *n)). */
int EXPORT(wgmlw_data_eval)(wgml_trainer *t, wgml_dataset *ds, double *sum, int64_t *n) {
    wgml_train_config c = wgml_trainer_config(t);
    *sum = 0;
    *n = 0;
    if (!ds || c.seq_len != ds->seq_len) return refuse(WGML_ERR_ARG, "eval: rows of another length than the trainer's");
    size_t bl = (size_t)c.batch * (size_t)c.seq_len;
    int32_t *in = malloc(bl * sizeof(int32_t)), *lab = malloc(bl * sizeof(int32_t));
    wgml_status s = in && lab ? WGML_OK : WGML_ERR_OOM;
    for (int64_t r = 0; r < ds->n_eval && !s; r += c.batch) {
        double ls = 0;
        int64_t nv = 0;
        wgml_data_eval_batch(ds, r, c.batch, in, lab);
        s = wgml_trainer_eval(t, in, lab, &ls, &nv);
        *sum += ls;
        *n += nv;
    }
    free(in);
    free(lab);
    return check(s, "eval");
}

/* AdamW's small state (step count, ...) for a checkpoint: read into buf (*bytes: its size, then
 * the bytes written; 64 is enough) or write it back as read. */
int EXPORT(wgmlw_trainer_opt_read)(wgml_trainer *t, void *buf, size_t *bytes) {
    return check(wgml_trainer_read_opt_state(t, buf, bytes), "optimizer state");
}
int EXPORT(wgmlw_trainer_opt_write)(wgml_trainer *t, const void *buf, size_t bytes) {
    return check(wgml_trainer_write_opt_state(t, buf, bytes), "optimizer state");
}

/* The learning rate of step (0-based) of total, as `wgml finetune` schedules it by default:
 * linear warmup over total / 20 steps to lr, then cosine decay to lr / 10. */
double EXPORT(wgmlw_lr)(int64_t step, int64_t total, double lr) {
    return wgml_lr_schedule(step, total, total / 20, lr, lr / 10);
}
