/* Training checkpoints: one safetensors file DIR/state.safetensors holding the trainable
 * tensors, the optimizer's moments and state blob, and string metadata (step, data position,
 * RNG state, run configuration, base-model identity), protected by a 64-bit FNV-1a checksum
 * of the whole file (taken with the checksum's own 16 hex digits set to '0') and written
 * atomically (temp file, fsync, rename, fsync of the directory): a crash while saving leaves
 * the previous checkpoint in place. The trainer-level calls (wgml_checkpoint_*) are public, in
 * include/wgml-train.h; these are the file layer under them. */
#ifndef WGML_TRAIN_CHECKPOINT_H
#define WGML_TRAIN_CHECKPOINT_H

#include "io/safetensors.h"
#include "wgml-train.h"

#define CKPT_FORMAT "wgml-checkpoint-1"
#define CKPT_FILE "state.safetensors"

/* Saves into dir (created if missing; its parent must exist). crash_after: see
 * file_write_atomic (SIZE_MAX normally). */
wgml_status ckpt_save(const char *dir, const st_write_tensor *t, int n, const char *const *keys, const char *const *vals,
                      int n_meta, size_t crash_after, char *err, size_t errlen);
/* Loads dir's checkpoint and verifies format and checksum ("corrupt checkpoint ..."). */
wgml_status ckpt_load(const char *dir, st_file *f, char *err, size_t errlen);
/* Parses and verifies a checkpoint held in buf[0..size) (f takes ownership of buf, even on
 * error), as ckpt_load does after reading the file; name (the path) is used in messages. */
wgml_status ckpt_parse(uint8_t *buf, size_t size, const char *name, st_file *f, char *err, size_t errlen);
/* WGML_OK when metadata key equals want; else WGML_ERR_FORMAT with
 * "checkpoint mismatch: KEY is 'saved' in the checkpoint but 'want' in this run". */
wgml_status ckpt_expect(const st_file *f, const char *key, const char *want, char *err, size_t errlen);

/* The trainer's tensors as checkpoints and adapter files store them: name, shape, numel. */
typedef struct train_tensor {
    const char *name;
    int rank;
    int64_t shape[4];
    int64_t numel;
} train_tensor;
/* A malloc'ed table of the trainer's *n tensors (free it); NULL with err set on failure. */
train_tensor *train_tensors(wgml_trainer *t, int *n, char *err, size_t errlen);
/* A malloc'ed host copy of trainer tensor i's part `what` (0 parameter, 1 AdamW m, 2 AdamW v);
 * NULL with err = "reading NAME: why" on failure. */
float *train_tensor_read(wgml_trainer *t, const train_tensor *ti, int i, int what, char *err, size_t errlen);
/* The trainer's context (for its last error). */
wgml_ctx *train_ctx(wgml_trainer *t);
/* The model the trainer trains (trainer.c). */
wgml_model *train_model(wgml_trainer *t);

#endif
