/* safetensors files (reader and writer), file hashes and atomic file writes. Internal to wgml.
 *
 * Format: 8 bytes little-endian header length H, then H bytes of a JSON object mapping each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
 * byte buffer that follows the header) and an optional "__metadata__" object of string
 * values; then the byte buffer. The reader checks every count and offset: the header fits in
 * the file, dtypes are known, end - begin = numel · element size, the tensors cover the
 * buffer exactly without overlap, and the buffer ends at the file's end. */
#ifndef WGML_MODEL_SAFETENSORS_H
#define WGML_MODEL_SAFETENSORS_H

#include "wgml.h"

#include <stddef.h>
#include <stdint.h>

/* Tensor to write. dtype "F32", "I32", "U8", "F16", ... (element size from the name). */
typedef struct st_write_tensor {
    const char *name;
    const char *dtype;
    int rank; /* 0..8 */
    int64_t shape[8];
    const void *data; /* numel · element size bytes */
} st_write_tensor;

/* Builds a whole file in memory: *out is malloc'ed, *out_len its size. meta_keys/vals (n_meta
 * pairs, may be 0) go into "__metadata__". The header is padded with spaces to a multiple of
 * 8 bytes. Tensor data follows in the order given. */
wgml_status st_build(const st_write_tensor *t, int n, const char *const *meta_keys, const char *const *meta_vals, int n_meta,
                     uint8_t **out, size_t *out_len, char *err, size_t errlen);

typedef struct st_tensor {
    char *name;
    char dtype[8];
    int rank;
    int64_t shape[8];
    int64_t numel;
    size_t elem_size;
    const uint8_t *data; /* into the file's buffer */
    size_t nbytes;
} st_tensor;

typedef struct st_file {
    uint8_t *buf; /* the whole file */
    size_t size;
    int n;
    st_tensor *t;
    int n_meta;
    char **meta_keys, **meta_vals;
    size_t checksum_off; /* offset in buf of the 16 hex digits of metadata "checksum", 0 if none */
} st_file;

/* Parses a file held in buf[0..size) (the st_file takes ownership of buf, even on error). */
wgml_status st_parse(uint8_t *buf, size_t size, st_file *f, char *err, size_t errlen);
/* Reads path and parses it. */
wgml_status st_read(const char *path, st_file *f, char *err, size_t errlen);
void st_free(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key); /* NULL when absent */
size_t st_dtype_size(const char *dtype);                 /* 0 when unknown */

/* Writes parts (n of them) to path atomically: path.tmp is written, fsync'ed, renamed over
 * path, and the directory is fsync'ed. crash_after (tests; SIZE_MAX normally) stops after that
 * many bytes of the temp file and returns WGML_ERR_IO, as a crash would leave it. */
wgml_status file_write_atomic(const char *path, const void *const *parts, const size_t *sizes, int n, size_t crash_after,
                              char *err, size_t errlen);
/* Reads a whole file (malloc'ed, NUL-terminated for convenience). */
wgml_status file_read_all(const char *path, uint8_t **out, size_t *len, char *err, size_t errlen);

/* 64-bit FNV-1a of data, continuing from h (start with FNV1A64_INIT). */
#define FNV1A64_INIT 0xcbf29ce484222325ull
uint64_t fnv1a64(uint64_t h, const void *data, size_t n);
/* SHA-256 of a file; hex written to out[65]. *size receives the file size. */
wgml_status sha256_file(const char *path, char out[65], uint64_t *size, char *err, size_t errlen);
void sha256_bytes(const void *data, size_t n, uint8_t out[32]);

#endif
