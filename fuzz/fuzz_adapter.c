/* Fuzz target: the LoRA adapters wgml reads from other tools. An input starting "GGUF" is
 * llama.cpp's LoRA adapter GGUF (src/train/lora_gguf.c, lora_gguf_read through a memfd, as
 * fuzz_gguf opens files); any other is a PEFT directory (src/train/peft.c, peft_parse: the
 * config's rules, PEFT's tensor names, shapes and dtypes, on top of the JSON and safetensors
 * readers): a 2-byte little-endian length n, then n bytes of adapter_config.json, then
 * adapter_model.safetensors. An accepted adapter must hold only wgml names
 * (blk.L.TARGET.lora_a|lora_b), F32 data of its counted size, the rank of its config, and its
 * rows must survive peft_to_model_order on a small permuted layout (4 query and 2 KV heads of
 * 16); a rejected one must come with a message. With WGML_FUZZ_VERBOSE set, each rejection is
 * printed. */
#define _GNU_SOURCE
#include "train/lora_gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void fail(const char *what) {
    fprintf(stderr, "fuzz_adapter: %s\n", what);
    abort();
}

static int check_accepted(peft_adapter *ap);

/* llama.cpp's LoRA GGUF in data[0..size) through a memfd. */
static wgml_status read_gguf(const uint8_t *data, size_t size, peft_adapter *a, char *err, size_t errlen) {
    int fd = memfd_create("wgml_fuzz_adapter", MFD_CLOEXEC);
    if (fd < 0) return snprintf(err, errlen, "memfd"), WGML_ERR_IO;
    for (size_t w = 0; w < size;) {
        ssize_t r = write(fd, data + w, size - w);
        if (r <= 0) break;
        w += (size_t)r;
    }
    char path[64], arch[32];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    wgml_status s = lora_gguf_read(path, a, arch, sizeof arch, err, errlen);
    close(fd);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    peft_adapter a;
    char err[600] = "";
    if (size >= 4 && !memcmp(data, "GGUF", 4)) {
        if (read_gguf(data, size, &a, err, sizeof err) != WGML_OK) {
            if (getenv("WGML_FUZZ_VERBOSE")) fprintf(stderr, "rejected: %s\n", err);
            if (!err[0]) fail("rejected without a message");
            return 0;
        }
        return check_accepted(&a);
    }
    if (size < 2) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    if (n > size - 2) n = size - 2;
    size_t sl = size - 2 - n;
    uint8_t *st = malloc(sl ? sl : 1);
    if (!st) return 0;
    if (sl) memcpy(st, data + 2 + n, sl);
    if (peft_parse((const char *)data + 2, n, st, sl, "fuzz", &a, err, sizeof err) != WGML_OK) {
        if (getenv("WGML_FUZZ_VERBOSE")) fprintf(stderr, "rejected: %s\n", err);
        if (!err[0]) fail("rejected without a message");
        return 0;
    }
    return check_accepted(&a);
}

/* What an accepted adapter must be; frees it. */
static int check_accepted(peft_adapter *ap) {
    peft_adapter a = *ap;
    if (a.n < 1 || a.cfg.lora_rank < 1 || !a.cfg.targets) fail("accepted without tensors, rank or targets");
    volatile float sink = 0;
    for (int i = 0; i < a.n; i++) {
        long long l;
        char tn[32], ab[16];
        if (!a.names[i] || sscanf(a.names[i], "blk.%lld.%31[a-z_].%15s", &l, tn, ab) != 3 || l < 0 ||
            (strcmp(ab, "lora_a") && strcmp(ab, "lora_b")))
            fail("a tensor name that is not wgml's");
        if (a.numel[i] % a.cfg.lora_rank) fail("a tensor whose size is not a multiple of the rank");
        for (int64_t k = 0; k < a.numel[i]; k++) sink = sink + a.data[i][k]; /* every value must be readable */
    }
    (void)sink;
    peft_layout lay = {.n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .permuted_qk = 1};
    if (peft_to_model_order(&lay, a.n, (const char *const *)a.names, a.data, a.numel)) fail("out of memory");
    peft_adapter_free(&a);
    return 0;
}
