/* Fuzz target: the training-checkpoint loader (src/train/checkpoint.c). The input is a whole
 * state.safetensors; ckpt_parse runs exactly what ckpt_load runs after reading the file (the
 * safetensors parse, the format field, the FNV-1a checksum over the file with its own digits
 * zeroed). A rejected input must come with a message and leave nothing allocated. An accepted
 * one is queried as the trainer does (ckpt_expect on its keys, st_find on its tensors). The
 * fuzzer rarely guesses a checksum, so when the first byte is odd the target first writes the
 * correct checksum into the input (when it has a checksum field), which lets the mutations
 * reach the code after the checksum check. WGML_FUZZ_VERBOSE: print each outcome. */
#include "train/checkpoint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what) {
    fprintf(stderr, "fuzz_checkpoint: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int fix = data[0] & 1;
    data++, size--;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    char err[512] = "";
    if (fix) {
        /* find the checksum field through the parser on a copy, then set it */
        uint8_t *copy = malloc(size ? size : 1);
        if (!copy) {
            free(buf);
            return 0;
        }
        if (size) memcpy(copy, buf, size);
        st_file p;
        if (st_parse(copy, size, &p, err, sizeof err) == WGML_OK && p.checksum_off && p.checksum_off + 16 <= size) {
            memset(buf + p.checksum_off, '0', 16);
            char hex[17];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a64(FNV1A64_INIT, buf, size));
            memcpy(buf + p.checksum_off, hex, 16);
        }
        st_free(&p);
        err[0] = 0;
    }
    st_file f;
    wgml_status s = ckpt_parse(buf, size, "fuzz/state.safetensors", &f, err, sizeof err);
    if (getenv("WGML_FUZZ_VERBOSE")) fprintf(stderr, "%s\n", s ? err : "accepted");
    if (s != WGML_OK) {
        if (!err[0] || f.buf || f.t || f.meta_keys) fail("a rejection without a message or with memory left");
        return 0;
    }
    if (ckpt_expect(&f, "format", CKPT_FORMAT, err, sizeof err) != WGML_OK) fail("accepted without the format field");
    static const char *const keys[] = {"step", "data_pos", "seed", "rng", "lora_rank", "base_sha256", "checksum", ""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = st_meta(&f, keys[i]);
        err[0] = 0;
        wgml_status e = ckpt_expect(&f, keys[i], v ? v : "1", err, sizeof err);
        if (v && e != WGML_OK) fail("ckpt_expect rejects the saved value");
        if (!v && (e != WGML_ERR_FORMAT || !strstr(err, "(absent)"))) fail("ckpt_expect accepts an absent key");
        if (v && ckpt_expect(&f, keys[i], "\x01never", err, sizeof err) != WGML_ERR_FORMAT) fail("ckpt_expect accepts a wrong value");
    }
    for (int i = 0; i < f.n_meta; i++)
        if (ckpt_expect(&f, f.meta_keys[i], f.meta_vals[i], err, sizeof err) != WGML_OK) fail("ckpt_expect on a saved key");
    volatile uint64_t sink = 0;
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = st_find(&f, f.t[i].name);
        if (!t) fail("st_find");
        sink = fnv1a64(sink, t->data, t->nbytes);
    }
    (void)sink;
    st_free(&f);
    return 0;
}
