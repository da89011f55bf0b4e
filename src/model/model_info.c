/* A readable summary of a GGUF model file (wgml info --model FILE). */
#include "io/gguf.h"
#include "model/arch.h"
#include "wgml-model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_scalar(FILE *o, const wgml_gguf *f, wgml_gguf_value v) {
    double d;
    uint64_t u;
    int64_t i;
    const char *s;
    size_t n;
    switch (v.type) {
    case WGML_GGUF_F32: case WGML_GGUF_F64:
        if (!wgml_gguf_value_f64(f, v, &d)) fprintf(o, "%.9g", d);
        break;
    case WGML_GGUF_BOOL:
        if (!wgml_gguf_value_u64(f, v, &u)) fprintf(o, "%s", u ? "true" : "false");
        break;
    case WGML_GGUF_STRING:
        if (!wgml_gguf_value_string(f, v, &s, &n)) fprintf(o, "\"%.*s%s\"", (int)(n > 60 ? 60 : n), s, n > 60 ? "..." : "");
        break;
    case WGML_GGUF_ARRAY:
        fprintf(o, "array of %" PRIu64 " %s", v.count, wgml_gguf_type_name(v.elem_type));
        break;
    case WGML_GGUF_I8: case WGML_GGUF_I16: case WGML_GGUF_I32: case WGML_GGUF_I64:
        if (!wgml_gguf_value_i64(f, v, &i)) fprintf(o, "%" PRId64, i);
        break;
    default:
        if (!wgml_gguf_value_u64(f, v, &u)) fprintf(o, "%" PRIu64, u);
        break;
    }
}

/* Each metadata key under prefix (prefix_len bytes, not NUL-terminated; the key goes on with a
 * '.') and its value, one a line; none when the prefix is empty. */
static void print_keys(FILE *o, const wgml_gguf *f, const char *prefix, size_t prefix_len) {
    for (int64_t i = 0; i < wgml_gguf_kv_count(f); i++) {
        const char *k = wgml_gguf_kv_key(f, i);
        if (prefix_len && strlen(k) > prefix_len && !strncmp(k, prefix, prefix_len) && k[prefix_len] == '.') {
            fprintf(o, "  %-44s ", k);
            print_scalar(o, f, wgml_gguf_kv_value(f, i));
            fprintf(o, "\n");
        }
    }
}

/* The tokenizer wgml builds from the file, and the chat format generation uses (--chat): the
 * file's template when it is one wgml applies, else the one its family implies (Gemma 3 files
 * may carry none). */
static void print_tokenizer(FILE *o, const wgml_gguf *f) {
    char terr[512];
    wgml_tokenizer *t;
    if (wgml_tokenizer_from_gguf(f, &t, terr, sizeof terr) != WGML_OK) {
        fprintf(o, "  not loaded: %s\n", terr);
        return;
    }
    fprintf(o, "  loaded: byte-level BPE, %d tokens, %" PRId64 " merges, pre-tokenizer '%s', BOS %d '%s', EOS %d '%s'\n",
            wgml_tokenizer_vocab_size(t), wgml_tokenizer_merge_count(t), wgml_tokenizer_pre(t), wgml_tokenizer_bos(t),
            wgml_tokenizer_bos(t) >= 0 ? wgml_tokenizer_token(t, wgml_tokenizer_bos(t)) : "",
            wgml_tokenizer_eos(t), wgml_tokenizer_eos(t) >= 0 ? wgml_tokenizer_token(t, wgml_tokenizer_eos(t)) : "");
    wgml_chat_msg m[] = {{"user", "Hi"}};
    char *chat;
    size_t cl;
    wgml_status cs = wgml_chat_apply(t, m, 1, 1, &chat, &cl);
    int has_tpl = wgml_gguf_find(f, "tokenizer.chat_template", NULL);
    if (cs == WGML_OK)
        fprintf(o, "  chat template: %s%s\n",
                strstr(chat, "<start_of_turn>") ? "Gemma's turns (<start_of_turn>role ... <end_of_turn>)"
                                                : "ChatML (<|im_start|>role ... <|im_end|>)",
                has_tpl ? ", the file's" : "; the file has none: the format of its family");
    else fprintf(o, "  chat template: %s\n", wgml_tokenizer_error(t));
    if (!cs) free(chat);
    wgml_tokenizer_free(t);
}

/* The tensors: name, shape (outermost first), type and bytes, and the totals. */
static void print_tensors(FILE *o, const wgml_gguf *f) {
    fprintf(o, "\ntensors:\n  %-36s %-22s %-6s %12s\n", "name", "shape", "type", "bytes");
    uint64_t total = 0;
    for (int64_t i = 0; i < wgml_gguf_tensor_count(f); i++) {
        const wgml_gguf_tensor *t = wgml_gguf_tensor_at(f, i);
        char shape[96];
        int p = snprintf(shape, sizeof shape, "[");
        for (int d = t->n_dims - 1; d >= 0 && p < (int)sizeof shape; d--)
            p += snprintf(shape + p, sizeof shape - (size_t)p, "%s%" PRId64, d == t->n_dims - 1 ? "" : ", ", t->dims[d]);
        if (p < (int)sizeof shape) snprintf(shape + p, sizeof shape - (size_t)p, "]");
        fprintf(o, "  %-36s %-22s %-6s %12" PRIu64 "\n", t->name, shape, wgml_ggml_type_name(t->type), t->nbytes);
        total += t->nbytes;
    }
    fprintf(o, "  %" PRId64 " tensors, %" PRIu64 " bytes (shapes listed outermost first: [rows, columns])\n",
            wgml_gguf_tensor_count(f), total);
}

wgml_status wgml_model_print_info(const char *path, void *file) {
    FILE *o = file ? file : stdout;
    char err[1024];
    wgml_gguf *f;
    wgml_status s = wgml_gguf_open(path, &f, err, sizeof err);
    if (s) {
        fprintf(stderr, "wgml: %s: %s\n", wgml_status_name(s), err);
        return s;
    }
    const char *arch = "";
    size_t arch_len = 0;
    wgml_gguf_get_string(f, "general.architecture", &arch, &arch_len);
    fprintf(o, "model:         %s\n", path);
    fprintf(o, "format:        GGUF v%u, %" PRIu64 " bytes, %" PRId64 " metadata keys, %" PRId64 " tensors, alignment %" PRIu64 "\n",
            wgml_gguf_version(f), wgml_gguf_file_size(f), wgml_gguf_kv_count(f), wgml_gguf_tensor_count(f), wgml_gguf_alignment(f));
    fprintf(o, "architecture:  %.*s\n", (int)arch_len, arch);
    const char *name;
    size_t nl;
    if (!wgml_gguf_get_string(f, "general.name", &name, &nl)) fprintf(o, "name:          %.*s\n", (int)nl, name);
    model_arch a;
    wgml_llama_config c = {0};
    char aerr[512];
    fprintf(o, "\narchitecture description (what wgml runs):\n");
    if (arch_from_gguf(f, &a, &c, aerr, sizeof aerr) == WGML_OK) arch_print(o, &a, &c);
    else fprintf(o, "  not runnable: %s\n", aerr);
    fprintf(o, "\nhyper-parameters:\n");
    print_keys(o, f, arch, arch_len);
    fprintf(o, "\ntokenizer:\n");
    print_keys(o, f, "tokenizer", 9);
    print_tokenizer(o, f);
    print_tensors(o, f);
    wgml_gguf_close(f);
    return WGML_OK;
}
