/* LoRA directories on the command line: loading one for wgml generate --lora, and wgml
 * export-lora, over the public API only (the adapter files are library code, src/train). */
#include "wgml.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <stdio.h>
#include <string.h>

int lora_load_dir(wgml_ctx *ctx, wgml_model *m, const char *model_path, const char *dir);
int export_lora_main(int argc, char **argv);

/* The adapter in dir (wgml's files, or PEFT's) for the base model file model_path, attached to
 * m: 0, or 1 after a message. */
int lora_load_dir(wgml_ctx *ctx, wgml_model *m, const char *model_path, const char *dir) {
    wgml_adapter *a = NULL;
    char err[700];
    if (wgml_adapter_load(dir, model_path, &a, err, sizeof err)) {
        fprintf(stderr, "wgml: --lora: %s\n", err);
        return 1;
    }
    wgml_status s = wgml_adapter_attach(m, a);
    if (s) fprintf(stderr, "wgml: --lora %s: %s\n", dir, wgml_last_error(ctx));
    wgml_adapter_free(a);
    return s ? 1 : 0;
}

/* wgml export-lora --lora DIR --model FILE.gguf --gguf OUT.gguf: the adapter in DIR (wgml's
 * files, or PEFT's) as llama.cpp's LoRA adapter GGUF for the base model FILE. */
int export_lora_main(int argc, char **argv) {
    const char *lora = NULL, *model = NULL, *out = NULL;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--lora")) lora = argv[i + 1];
        else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--gguf")) out = argv[i + 1];
        else lora = model = out = NULL, i = argc;
    }
    if (!lora || !model || !out || argc % 2) {
        fprintf(stderr, "usage: wgml export-lora --lora DIR --model FILE.gguf --gguf OUT.gguf\n"
                        "Writes the LoRA adapter in DIR (wgml finetune's files, or a PEFT adapter) as llama.cpp's\n"
                        "LoRA adapter GGUF for the base model FILE (llama-cli -m FILE --lora OUT.gguf).\n");
        return 2;
    }
    wgml_adapter *a = NULL;
    char err[600];
    wgml_status s = wgml_adapter_load(lora, model, &a, err, sizeof err);
    if (!s) s = wgml_adapter_save_gguf(a, model, out, err, sizeof err);
    if (s) fprintf(stderr, "wgml export-lora: %s\n", err);
    else
        printf("%s: %d tensors, rank %d, alpha %g (llama.cpp: --lora %s)\n", out, wgml_adapter_tensor_count(a),
               wgml_adapter_config(a)->lora_rank, (double)wgml_adapter_config(a)->lora_alpha, out);
    wgml_adapter_free(a);
    return s ? 1 : 0;
}
