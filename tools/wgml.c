/* wgml: the command-line tool. */
#include "bench.h"
#include "run.h"
#include "wgml-model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int finetune_main(wgml_ctx *ctx, int argc, char **argv); /* tools/finetune.c */
int eval_main(wgml_ctx *ctx, int argc, char **argv); /* tools/eval.c */
int export_lora_main(int argc, char **argv); /* tools/lora.c */
int lora_load_dir(wgml_ctx *ctx, wgml_model *m, const char *model_path, const char *dir);

static int print_text(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* Parses whitespace-separated token ids (--prompt-ids) into a malloc'ed array; 0 when s holds
 * something else or nothing. */
static size_t parse_ids(const char *s, int32_t **out) {
    size_t n = 0, cap = 16;
    int32_t *ids = malloc(sizeof *ids * cap);
    for (char *end; ids && *s;) {
        while (*s == ' ' || *s == ',' || *s == '\n' || *s == '\t') s++;
        if (!*s) break;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX) break;
        if (n == cap && !(ids = realloc(ids, sizeof *ids * (cap *= 2)))) break;
        ids[n++] = (int32_t)v, s = end;
    }
    if (!ids || *s) {
        free(ids);
        return 0;
    }
    *out = ids;
    return n;
}

typedef struct generate_opts {
    const char *model, *prompt, *system, *lora, *prompt_ids;
    int chat;
    wgml_gen_options opt;
    wgml_model_options mo;
} generate_opts;

/* 0, or 2 after a message or the usage line. */
static int parse_generate_opts(int argc, char **argv, generate_opts *g) {
    *g = (generate_opts){.opt = {.max_tokens = 256, .sampler = {0.0f, 40, 0.95f}, .seed = 0}};
    wgml_gen_options *opt = &g->opt;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--chat")) g->chat = 1;
        else if (!v) {
            fprintf(stderr, "wgml generate: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--model")) g->model = v, i++;
        else if (!strcmp(a, "--prompt")) g->prompt = v, i++;
        else if (!strcmp(a, "--prompt-ids")) g->prompt_ids = v, i++;
        else if (!strcmp(a, "--lora")) g->lora = v, i++;
        else if (!strcmp(a, "--system")) g->system = v, i++;
        else if (!strcmp(a, "--max-tokens")) opt->max_tokens = atoi(v), i++;
        else if (!strcmp(a, "--temperature")) opt->sampler.temperature = (float)atof(v), i++;
        else if (!strcmp(a, "--top-k")) opt->sampler.top_k = atoi(v), i++;
        else if (!strcmp(a, "--top-p")) opt->sampler.top_p = (float)atof(v), i++;
        else if (!strcmp(a, "--seed")) opt->seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--decode-batch")) opt->decode_batch = atoi(v), i++;
        else if (!strcmp(a, "--ctx")) g->mo.n_ctx = atoll(v), i++;
        else if (!strcmp(a, "--kv") && (!strcmp(v, "f16") || !strcmp(v, "f32")))
            g->mo.kv_type = strcmp(v, "f16") ? WGML_KV_F32 : WGML_KV_F16, i++;
        else {
            fprintf(stderr, "wgml generate: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (!g->model || !g->prompt == !g->prompt_ids || (g->prompt_ids && g->chat) || opt->max_tokens < 1 || opt->sampler.temperature < 0) {
        fprintf(stderr, "usage: wgml generate --model FILE (--prompt TEXT [--chat] [--system TEXT] | --prompt-ids \"ID ...\")\n"
                        "                     [--lora DIR] [--max-tokens N]\n"
                        "                     [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ctx N] [--kv f16|f32]\n"
                        "                     [--decode-batch B]\n");
        return 2;
    }
    return 0;
}

/* The prompt's token ids: --prompt-ids as given, or the text tokenized (in the chat template
 * with --chat). 0, or 1 after a message: no tokenizer for a text, a prompt that gives no tokens,
 * or one that leaves no room to generate. */
static int prompt_tokens(wgml_model *m, const generate_opts *g, int32_t **ids, size_t *n_ids) {
    const wgml_tokenizer *tok = wgml_model_tokenizer(m);
    char *text = NULL;
    size_t tlen = g->prompt ? strlen(g->prompt) : 0;
    if (!tok && !g->prompt_ids) {
        fprintf(stderr, "wgml generate: the model has no tokenizer wgml can build (%s); give the prompt with --prompt-ids\n",
                wgml_model_tokenizer_error(m));
        return 1;
    }
    /* a plain prompt gets the BOS the vocabulary asks for (tokenizer.ggml.add_bos_token); a
     * chat prompt carries its own where the format has one (Gemma's starts with <bos>) */
    int flags = tok && wgml_tokenizer_add_bos(tok) ? WGML_TOK_ADD_BOS : 0;
    if (g->chat) {
        wgml_chat_msg msgs[2];
        size_t n = 0;
        if (g->system) msgs[n++] = (wgml_chat_msg){"system", g->system};
        msgs[n++] = (wgml_chat_msg){"user", g->prompt};
        if (wgml_chat_apply(tok, msgs, n, 1, &text, &tlen)) {
            fprintf(stderr, "wgml generate: %s\n", wgml_tokenizer_error(tok));
            return 1;
        }
        flags = WGML_TOK_SPECIAL;
    }
    int rc = 1;
    if (g->prompt_ids && !(*n_ids = parse_ids(g->prompt_ids, ids))) {
        fprintf(stderr, "wgml generate: --prompt-ids '%s' is not a list of token ids\n", g->prompt_ids);
    } else if (!g->prompt_ids && wgml_tokenizer_encode(tok, text ? text : g->prompt, tlen, flags, ids, n_ids)) {
        fprintf(stderr, "wgml generate: cannot tokenize the prompt: %s\n", wgml_tokenizer_error(tok));
    } else if (*n_ids == 0) {
        fprintf(stderr, "wgml generate: the prompt is empty (it gives no tokens)\n");
    } else if ((int64_t)*n_ids >= (int64_t)wgml_model_config(m)->n_ctx) {
        fprintf(stderr,
                "wgml generate: the context length %lld leaves no room to generate after the prompt's %zu tokens; "
                "raise --ctx or shorten the prompt\n",
                (long long)wgml_model_config(m)->n_ctx, *n_ids);
    } else {
        rc = 0;
    }
    free(text);
    return rc;
}

/* The run's two lines of timings on stderr (after the text on stdout). */
static void print_gen_stats(const wgml_gen_stats *st, int max_tokens) {
    fprintf(stderr, "\n[prefill: %zu tokens in %.3f s GPU (%.3f s wall), %.1f tokens/s]\n", st->prompt_tokens, st->prefill_s,
            st->prefill_wall_s, st->prefill_s > 0 ? (double)st->prompt_tokens / st->prefill_s : 0.0);
    fprintf(stderr, "[decode: %zu tokens generated, %zu decode steps in %.3f s GPU (%.3f s wall), %.1f tokens/s, "
                    "%llu submits%s]\n",
            st->generated_tokens, st->decode_steps, st->decode_s, st->decode_wall_s,
            st->decode_s > 0 ? (double)st->decode_steps / st->decode_s : 0.0, (unsigned long long)st->decode_submits,
            st->stopped                                   ? ", stopped at end of turn"
            : st->generated_tokens < (size_t)max_tokens ? ", stopped: the context is full (raise --ctx)"
                                                         : "");
}

/* wgml generate --model FILE (--prompt TEXT | --prompt-ids "ID ID ...") [--chat] [--lora DIR]
 *                [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ctx N]
 *                [--kv f16|f32] [--decode-batch B]
 * --kv: the KV cache's element type (wgml_kv_type; default $WGML_KV, else f32).
 * --decode-batch: greedy decode steps per submit (default 16; -1: one submit per token).
 * --prompt-ids: the prompt as token ids (a model whose tokenizer wgml does not build runs this
 * way, and prints the generated ids) */
static int cmd_generate(wgml_ctx *ctx, int argc, char **argv) {
    generate_opts g;
    if (parse_generate_opts(argc, argv, &g)) return 2;
    wgml_model *m = wgml_model_load(ctx, g.model, &g.mo);
    if (!m) {
        fprintf(stderr, "wgml generate: %s\n", wgml_last_error(ctx));
        return 1;
    }
    if (g.lora && lora_load_dir(ctx, m, g.model, g.lora)) {
        wgml_model_free(m);
        return 1;
    }
    const wgml_tokenizer *tok = wgml_model_tokenizer(m);
    int32_t *ids = NULL, *out_ids = NULL;
    size_t n_ids = 0, n_out = 0;
    int rc = 1;
    if (!prompt_tokens(m, &g, &ids, &n_ids)) {
        wgml_gen_stats st;
        wgml_status s = wgml_generate(m, ids, n_ids, &g.opt, print_text, NULL, &st, tok ? NULL : &out_ids, tok ? NULL : &n_out);
        for (size_t i = 0; i < n_out; i++) printf("%s%d", i ? " " : "ids: ", (int)out_ids[i]);
        printf("\n");
        if (s) {
            fprintf(stderr, "wgml generate: %s\n", wgml_last_error(ctx));
        } else {
            print_gen_stats(&st, g.opt.max_tokens);
            rc = 0;
        }
    }
    free(ids);
    free(out_ids);
    wgml_model_free(m);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: wgml <command> [options]\n"
            "\n"
            "commands:\n"
            "  info                 the adapter, backend, driver, limits and features in use\n"
            "  info --model FILE    a GGUF model: architecture, hyper-parameters, tokenizer, tensors\n"
            "  bench matmul [opts]  fp32 matmul GFLOP/s per shape (GPU time from timestamps)\n"
            "                       --shapes MxNxK[,..]  --reps N  --variant auto|NAME  --check\n"
            "  bench generate --model FILE  prefill tokens/s (128-token prompt), decode tokens/s (64 steps)\n"
            "  generate --model FILE --prompt TEXT|--prompt-ids \"ID ...\" [--chat] [--system TEXT] [--lora DIR] [--max-tokens N]\n"
            "           [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ctx N] [--kv f16|f32]\n"
            "                       text generation (greedy at temperature 0, the default); --lora DIR\n"
            "                       applies an adapter written by wgml finetune\n"
            "  finetune --model FILE --data TEXT|JSONL --out DIR [options]\n"
            "                       LoRA (QLoRA) or straight-through 4-bit fine-tuning on the GPU;\n"
            "                       wgml finetune --help lists the options\n"
            "  eval --model FILE --data TEXT|JSONL [--lora DIR] [--seq-len N] [--all]\n"
            "                       perplexity on the held-out part of the data (or all of it)\n"
            "  export-lora --lora DIR --model FILE --gguf OUT.gguf\n"
            "                       the adapter (wgml's or PEFT's) as llama.cpp's LoRA GGUF\n"
            "  run FILE.pte [--input N FILE.npy]... [--seed S] [--out DIR] [--check REF.npy]... [--runs N]\n"
            "                       an ExecuTorch program (Vulkan/WebGPU delegate) on wgml; wgml run --help\n"
            "  help                 this text\n"
            "\n"
            "environment:\n"
            "  WGML_ADAPTER=text    use the adapter whose name contains text\n"
            "  WGML_TIMEOUT_S=n     longest wait for the GPU before an error (default 600)\n");
}

static int open_ctx(wgml_ctx **ctx) {
    wgml_status s = wgml_ctx_create(NULL, ctx);
    if (s) {
        fprintf(stderr, "wgml: %s: %s\n", wgml_status_name(s), wgml_create_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    wgml_ctx *ctx = NULL;
    int rc;
    if (!strcmp(cmd, "info") && argc >= 3) {
        if (argc != 4 || strcmp(argv[2], "--model")) {
            fprintf(stderr, "usage: wgml info [--model FILE]\n");
            return 2;
        }
        return wgml_model_print_info(argv[3], stdout) == WGML_OK ? 0 : 1;
    } else if (!strcmp(cmd, "info")) {
        if (open_ctx(&ctx)) return 1;
        wgml_device_print(ctx, stdout);
        rc = 0;
    } else if (!strcmp(cmd, "bench")) {
        if (open_ctx(&ctx)) return 1;
        rc = bench_main(ctx, argc - 2, argv + 2);
    } else if (!strcmp(cmd, "generate")) {
        if (open_ctx(&ctx)) return 1;
        rc = cmd_generate(ctx, argc - 2, argv + 2);
    } else if (!strcmp(cmd, "run")) {
        for (int i = 2; i < argc; i++) /* help needs no GPU */
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return run_main(NULL, argc - 2, argv + 2);
        if (open_ctx(&ctx)) return 1;
        rc = run_main(ctx, argc - 2, argv + 2);
    } else if (!strcmp(cmd, "export-lora")) {
        return export_lora_main(argc - 2, argv + 2); /* files only, no GPU */
    } else if (!strcmp(cmd, "finetune") || !strcmp(cmd, "eval")) {
        for (int i = 2; i < argc; i++) /* help needs no GPU */
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
                return !strcmp(cmd, "finetune") ? finetune_main(NULL, argc - 2, argv + 2) : eval_main(NULL, argc - 2, argv + 2);
        if (open_ctx(&ctx)) return 1;
        rc = !strcmp(cmd, "finetune") ? finetune_main(ctx, argc - 2, argv + 2) : eval_main(ctx, argc - 2, argv + 2);
    } else {
        fprintf(stderr, "wgml: unknown command '%s'\n\n", cmd);
        usage(stderr);
        return 2;
    }
    wgml_ctx_destroy(ctx);
    return rc;
}
