/* tool_model: the C side of the Python model tests (tests/py/test_gguf_reader.py and
 * tests/py/test_tokenizer.py). Not a test by itself.
 *
 *   tool_model gguf FILE               prints what the GGUF reader read, in a canonical text
 *                                      form (see dump_value); exit 3 on a clean error
 *   tool_model encode FILE [--special] [--bos] [--eos]
 *                                      tokenizes stdin, prints one id per line
 *   tool_model decode FILE             reads ids (whitespace separated) from stdin, writes bytes
 *   tool_model roundtrip FILE          encode then decode stdin; exit 0 when equal
 *   tool_model batch FILE [--special] stdin holds NUL-separated records; for each prints two
 *                                      lines: its ids, and the hex of decode(ids)
 *   tool_model chat FILE [--gen] ROLE CONTENT [ROLE CONTENT ...]
 *                                      writes the chat template applied to the messages
 *   tool_model logits FILE OUT [--lora DIR]
 *                                      stdin lines "NPRE id id ...": for each, prefills the
 *                                      first NPRE ids through the Llama model, then decodes the
 *                                      rest one at a time; appends to OUT the f32 logits rows
 *                                      after the prefill and after each decode step; prints
 *                                      each row's GPU argmax; with the adapter in DIR (wgml's
 *                                      or PEFT's files) (tests/py/test_llama_logits.py,
 *                                      tests/py/test_peft_adapter.py)
 */
#define _POSIX_C_SOURCE 200809L
#include "wgml.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wall_clock.h"

static void put_bytes(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
}

static int dump_value(const wgml_gguf *f, wgml_gguf_value v) {
    switch (v.type) {
    case WGML_GGUF_F32: case WGML_GGUF_F64: {
        double d;
        if (wgml_gguf_value_f64(f, v, &d)) return 1;
        printf(v.type == WGML_GGUF_F32 ? "%.9g" : "%.17g", d);
        return 0;
    }
    case WGML_GGUF_BOOL: case WGML_GGUF_U8: case WGML_GGUF_U16: case WGML_GGUF_U32: case WGML_GGUF_U64: {
        uint64_t u;
        if (wgml_gguf_value_u64(f, v, &u)) return 1;
        printf("%" PRIu64, u);
        return 0;
    }
    case WGML_GGUF_I8: case WGML_GGUF_I16: case WGML_GGUF_I32: case WGML_GGUF_I64: {
        int64_t i;
        if (wgml_gguf_value_i64(f, v, &i)) return 1;
        printf("%" PRId64, i);
        return 0;
    }
    case WGML_GGUF_STRING: {
        const char *s;
        size_t n;
        if (wgml_gguf_value_string(f, v, &s, &n)) return 1;
        put_bytes(s, n);
        return 0;
    }
    case WGML_GGUF_ARRAY:
        printf("%s[", wgml_gguf_type_name(v.elem_type));
        for (uint64_t i = 0; i < v.count; i++) {
            wgml_gguf_value e;
            if (wgml_gguf_array_elem(f, v, i, &e)) return 1;
            if (i) putchar(',');
            if (dump_value(f, e)) return 1;
        }
        putchar(']');
        return 0;
    }
    return 1;
}

static uint64_t fnv64(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int cmd_gguf(const char *path) {
    char err[1024];
    wgml_gguf *f;
    wgml_status s = wgml_gguf_open(path, &f, err, sizeof err);
    if (s) {
        fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), err);
        return 3;
    }
    printf("version %u\nalignment %" PRIu64 "\ndata_offset %" PRIu64 "\n", wgml_gguf_version(f), wgml_gguf_alignment(f),
           wgml_gguf_data_offset(f));
    int rc = 0;
    for (int64_t i = 0; i < wgml_gguf_kv_count(f); i++) {
        wgml_gguf_value v = wgml_gguf_kv_value(f, i);
        printf("kv %s %s ", wgml_gguf_kv_key(f, i), wgml_gguf_type_name(v.type));
        if (dump_value(f, v)) {
            fprintf(stderr, "error: %s\n", wgml_gguf_error(f));
            rc = 3;
            break;
        }
        putchar('\n');
    }
    for (int64_t i = 0; rc == 0 && i < wgml_gguf_tensor_count(f); i++) {
        const wgml_gguf_tensor *t = wgml_gguf_tensor_at(f, i);
        printf("tensor %s %s [", t->name, wgml_ggml_type_name(t->type));
        for (int d = 0; d < t->n_dims; d++) printf(d ? ",%" PRId64 : "%" PRId64, t->dims[d]);
        printf("] offset %" PRIu64, t->offset);
        const void *data;
        size_t n;
        s = wgml_gguf_tensor_data(f, i, &data, &n);
        if (s) {
            printf("\n");
            fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), wgml_gguf_error(f));
            rc = 3;
            break;
        }
        printf(" bytes %zu fnv %016" PRIx64 "\n", n, fnv64(data, n));
        if (wgml_gguf_find_tensor(f, t->name) != i) {
            fprintf(stderr, "error: find_tensor(%s) != %" PRId64 "\n", t->name, i);
            rc = 1;
        }
    }
    wgml_gguf_close(f);
    return rc;
}

static char *read_all(FILE *in, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n == cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p) { free(buf); return NULL; }
            buf = p;
        }
        size_t r = fread(buf + n, 1, cap - n, in);
        if (r == 0) break;
        n += r;
    }
    *len = n;
    return buf;
}

static int open_tok(const char *path, wgml_gguf **f, wgml_tokenizer **t) {
    char err[1024];
    wgml_status s = wgml_gguf_open(path, f, err, sizeof err);
    if (!s) s = wgml_tokenizer_from_gguf(*f, t, err, sizeof err);
    if (s) {
        fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), err);
        wgml_gguf_close(*f);
        return 3;
    }
    return 0;
}

/* Each stdin line: "NPRE id id ..."; for each, from position 0: prefill the first NPRE ids,
 * then decode the rest one at a time. */
static int cmd_logits(const char *path, const char *out_path, const char *lora) {
    wgml_ctx *ctx = NULL;
    if (wgml_ctx_create(NULL, &ctx)) {
        fprintf(stderr, "tool_model: %s\n", wgml_create_error());
        return 3;
    }
    enum { MAX_IDS = 1024 }; /* the longest sequence; also the KV cache length */
    wgml_model_options mo = {.n_ctx = MAX_IDS};
    wgml_model *m = wgml_model_load(ctx, path, &mo);
    if (m && lora) {
        wgml_adapter *a = NULL;
        char err[600];
        wgml_status s = wgml_adapter_load(lora, path, &a, err, sizeof err);
        if (!s && (s = wgml_adapter_attach(m, a))) snprintf(err, sizeof err, "%s", wgml_last_error(ctx));
        wgml_adapter_free(a);
        if (s) {
            fprintf(stderr, "tool_model logits: %s\n", err);
            wgml_model_free(m);
            wgml_ctx_destroy(ctx);
            return 3;
        }
    }
    FILE *out = m ? fopen(out_path, "wb") : NULL;
    int rc = 0;
    char *line = NULL;
    size_t cap = 0;
    if (!m || !out) {
        fprintf(stderr, "tool_model logits: %s\n", m ? "cannot write the output" : wgml_last_error(ctx));
        rc = 3;
    } else {
        int64_t V = wgml_model_config(m)->n_vocab;
        float *logits = malloc(sizeof(float) * (size_t)V);
        int32_t ids[MAX_IDS];
        while (!rc && getline(&line, &cap, stdin) > 0) {
            int n = 0, npre = 0, used = 0;
            char *p = line;
            if (sscanf(p, "%d%n", &npre, &used) != 1) continue;
            p += used;
            while (n < MAX_IDS && sscanf(p, "%d%n", &ids[n], &used) == 1) n++, p += used;
            if (npre < 1 || npre > n) {
                fprintf(stderr, "tool_model logits: NPRE %d is outside 1..%d\n", npre, n);
                rc = 2;
                break;
            }
            int32_t next = -1;
            double t0 = now();
            wgml_model_reset(m);
            wgml_status s = wgml_model_prefill(m, ids, (size_t)npre, logits, &next);
            for (int i = npre; !s; i++) {
                fwrite(logits, sizeof(float), (size_t)V, out);
                printf("%d\n", next);
                if (i == n) break;
                s = wgml_model_decode(m, ids[i], logits, &next);
            }
            double t1 = now();
            fprintf(stderr, "%d tokens (prefill %d): %.3f s\n", n, npre, t1 - t0);
            if (s) {
                fprintf(stderr, "tool_model logits: %s\n", wgml_last_error(ctx));
                rc = 3;
            }
        }
        free(logits);
    }
    free(line);
    if (out) fclose(out);
    wgml_model_free(m);
    wgml_ctx_destroy(ctx);
    return rc;
}

int main(int argc, char **argv) {
    if ((argc == 4 || (argc == 6 && !strcmp(argv[4], "--lora"))) && !strcmp(argv[1], "logits"))
        return cmd_logits(argv[2], argv[3], argc == 6 ? argv[5] : NULL);
    if (argc < 3) {
        fprintf(stderr, "usage: tool_model gguf|encode|decode|roundtrip|chat FILE [options]\n");
        return 2;
    }
    const char *cmd = argv[1], *path = argv[2];
    if (!strcmp(cmd, "gguf")) return cmd_gguf(path);

    wgml_gguf *f = NULL;
    wgml_tokenizer *t = NULL;
    if (open_tok(path, &f, &t)) return 3;
    int rc = 0, flags = 0, gen = 0, first_msg = argc;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--special")) flags |= WGML_TOK_SPECIAL;
        else if (!strcmp(argv[i], "--bos")) flags |= WGML_TOK_ADD_BOS;
        else if (!strcmp(argv[i], "--eos")) flags |= WGML_TOK_ADD_EOS;
        else if (!strcmp(argv[i], "--gen")) gen = 1;
        else { first_msg = i; break; }
    }
    size_t len = 0;
    char *text = NULL;
    if (!strcmp(cmd, "encode") || !strcmp(cmd, "roundtrip")) {
        text = read_all(stdin, &len);
        int32_t *ids = NULL;
        size_t n = 0;
        clock_t c0 = clock();
        wgml_status s = text ? wgml_tokenizer_encode(t, text, len, flags, &ids, &n) : WGML_ERR_OOM;
        double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
        if (s) {
            fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), wgml_tokenizer_error(t));
            rc = 3;
        } else if (!strcmp(cmd, "encode")) {
            fprintf(stderr, "encoded %zu bytes into %zu ids in %.3f s\n", len, n, secs);
            for (size_t i = 0; i < n; i++) printf("%d\n", ids[i]);
        } else {
            char *back;
            size_t blen;
            s = wgml_tokenizer_decode(t, ids, n, 0, &back, &blen);
            if (s) {
                fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), wgml_tokenizer_error(t));
                rc = 3;
            } else {
                rc = !(blen == len && !memcmp(back, text, len));
                printf("roundtrip %s: %zu bytes, %zu ids\n", rc ? "DIFFERS" : "ok", len, n);
                free(back);
            }
        }
        free(ids);
    } else if (!strcmp(cmd, "batch")) {
        text = read_all(stdin, &len);
        for (size_t a = 0; text && a <= len && rc == 0;) {
            char *z = memchr(text + a, 0, len - a);
            size_t b = z ? (size_t)(z - text) : len;
            int32_t *ids = NULL;
            size_t n = 0;
            char *back = NULL;
            size_t blen = 0;
            wgml_status s = wgml_tokenizer_encode(t, text + a, b - a, flags, &ids, &n);
            if (!s) s = wgml_tokenizer_decode(t, ids, n, 0, &back, &blen);
            if (s) {
                fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), wgml_tokenizer_error(t));
                rc = 3;
            } else {
                for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
                printf("\n");
                for (size_t i = 0; i < blen; i++) printf("%02x", (unsigned char)back[i]);
                printf("\n");
            }
            free(ids);
            free(back);
            if (!z) break;
            a = b + 1;
        }
    } else if (!strcmp(cmd, "decode")) {
        text = read_all(stdin, &len);
        size_t cap = 1024, n = 0;
        int32_t *ids = malloc(cap * sizeof *ids);
        char *p = text, *end = text ? text + len : NULL;
        while (ids && p && p < end) {
            while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) p++;
            if (p >= end) break;
            char *q;
            long v = strtol(p, &q, 10);
            if (q == p) break;
            if (n == cap) {
                int32_t *r = realloc(ids, (cap *= 2) * sizeof *ids);
                if (!r) break;
                ids = r;
            }
            ids[n++] = (int32_t)v;
            p = q;
        }
        char *out;
        size_t olen;
        wgml_status s = wgml_tokenizer_decode(t, ids, n, 0, &out, &olen);
        if (s) {
            fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), wgml_tokenizer_error(t));
            rc = 3;
        } else {
            fwrite(out, 1, olen, stdout);
            free(out);
        }
        free(ids);
    } else if (!strcmp(cmd, "chat")) {
        size_t nm = (size_t)(argc - first_msg) / 2;
        wgml_chat_msg *m = calloc(nm + 1, sizeof *m);
        for (size_t i = 0; m && i < nm; i++) {
            m[i].role = argv[first_msg + 2 * i];
            m[i].content = argv[first_msg + 2 * i + 1];
        }
        char *out;
        size_t olen;
        wgml_status s = m ? wgml_chat_apply(t, m, nm, gen, &out, &olen) : WGML_ERR_OOM;
        if (s) {
            fprintf(stderr, "error: %s: %s\n", wgml_status_name(s), wgml_tokenizer_error(t));
            rc = 3;
        } else {
            fwrite(out, 1, olen, stdout);
            free(out);
        }
        free(m);
    } else {
        fprintf(stderr, "tool_model: unknown command '%s'\n", cmd);
        rc = 2;
    }
    free(text);
    wgml_tokenizer_free(t);
    wgml_gguf_close(f);
    return rc;
}
