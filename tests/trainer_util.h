/* Shared by the trainer tests, test_trainer.c and test_trainer_compare.c: the clock (now(), from
 * wall_clock.h), the file of tiny_llama.h's synthetic model, the fixed batches, and the tiny
 * model's LoRA configuration. */
#ifndef WGML_TEST_TRAINER_UTIL_H
#define WGML_TEST_TRAINER_UTIL_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "harness.h"
#include "tiny_llama.h"
#include "wall_clock.h"
#include "wgml-train.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* The synthetic model (tied embedding) made into s and written as a GGUF file of the temporary
 * folder, its path into path[n]; false (a failure counted) when it could not be written. The
 * caller removes the file and frees s either way. */
static inline bool tiny_model_write(synth *s, char *path, size_t n) {
    th_tmp_path(path, n, "wgml-trainer-%d.gguf", (int)getpid());
    synth_make(s, 1);
    return th_check(synth_write(s, path, "llama", NULL, NULL), "write %s", path);
}

/* Batch k of the fixed data: sequences following a simple rule (so there is something to
 * learn), labels = the next token, the last position of each sequence ignored (-100) and one
 * more ignored position in the middle (to exercise ignore_index). */
static inline void make_batch(int k, int B, int S, int vocab, int32_t *tok, int32_t *lab) {
    for (int b = 0; b < B; b++) {
        int start = (7 * k + 13 * b + 3) % vocab, stride = 1 + (k + b) % 3;
        for (int i = 0; i <= S; i++) {
            int v = (start + stride * i * i % 5 + stride * i) % vocab;
            if (i < S) tok[b * S + i] = v;
            if (i > 0) lab[b * S + i - 1] = v;
        }
        lab[b * S + S - 1] = -100;
        lab[b * S + S / 2] = -100;
    }
}

enum { STEPS = 20, NB = 4, TB = 2, TS = 16 };

/* The tiny model's LoRA configuration: rank 4 on all seven targets, TB x TS tokens, lr 1e-2,
 * weight decay 0.01, clip 1.0. */
static inline wgml_train_config tiny_config(uint64_t seed) {
    wgml_train_config cfg = wgml_train_defaults();
    cfg.lora_rank = 4;
    cfg.lora_alpha = 8.0f;
    cfg.targets = WGML_TARGET_ALL;
    cfg.batch = TB;
    cfg.seq_len = TS;
    cfg.lr = 1e-2f;
    cfg.weight_decay = 0.01f;
    cfg.clip_norm = 1.0f;
    cfg.seed = seed;
    return cfg;
}

#endif
