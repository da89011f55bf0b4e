/* wgml-io.h: outside file formats read and written on the host (src/io): GGUF model files,
 * NumPy's .npy arrays, and the element types of ExecuTorch programs that .npy files carry.
 * Builds on wgml.h. Its own header because the io layer sits under program, model and train,
 * and each src layer includes only public headers of its layer or lower
 * (tests/check_layers.py); wgml-model.h and wgml-program.h include it. */
#ifndef WGML_IO_H
#define WGML_IO_H

#include "wgml.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GGUF files -------------------------------------------------------------------------- */
/* Reading model files: metadata, the tensor table and tensor bytes, all checked against the
 * file's size. */

/* A GGUF file (versions 2 and 3), memory-mapped read-only. Every count, length and offset is
 * checked against the file's size when it is opened; a truncated or corrupt file gives
 * WGML_ERR_FORMAT and a message naming what was wrong and the file offset. Strings returned
 * by the accessors point into the mapping (valid until wgml_gguf_close) and are NOT
 * NUL-terminated unless said otherwise; their length comes with them. */
typedef struct wgml_gguf wgml_gguf;

/* Metadata value types, numbered as in the file format. */
typedef enum wgml_gguf_type {
    WGML_GGUF_U8 = 0, WGML_GGUF_I8 = 1, WGML_GGUF_U16 = 2, WGML_GGUF_I16 = 3,
    WGML_GGUF_U32 = 4, WGML_GGUF_I32 = 5, WGML_GGUF_F32 = 6, WGML_GGUF_BOOL = 7,
    WGML_GGUF_STRING = 8, WGML_GGUF_ARRAY = 9, WGML_GGUF_U64 = 10, WGML_GGUF_I64 = 11,
    WGML_GGUF_F64 = 12
} wgml_gguf_type;

/* A metadata value: a small handle passed by value. For a scalar, offset is where its bytes
 * are; for a string, count is its length in bytes and offset where they start; for an array,
 * elem_type and count describe the elements and wgml_gguf_array_elem reaches each one. */
typedef struct wgml_gguf_value {
    wgml_gguf_type type;
    wgml_gguf_type elem_type; /* arrays only */
    uint64_t count;           /* arrays: elements; strings: bytes */
    uint64_t offset;          /* file offset of the payload */
    int64_t index;            /* internal (element table of a string/array array), else -1 */
} wgml_gguf_value;

/* A tensor's description. dims[0] is the fastest-varying (contiguous) dimension, as in the
 * file; offset is relative to the data section; nbytes is 0 for a type wgml cannot size. */
typedef struct wgml_gguf_tensor {
    const char *name; /* NUL-terminated copy */
    int n_dims;       /* 1..4 */
    int64_t dims[4];  /* unused dims are 1 */
    int64_t numel;
    uint32_t type;    /* wgml_ggml_type or another file type number */
    uint64_t offset;
    uint64_t nbytes;
} wgml_gguf_tensor;

/* Opens and validates path. On failure *out is NULL and err (when given) holds the message. */
wgml_status wgml_gguf_open(const char *path, wgml_gguf **out, char *err, size_t errlen);
void wgml_gguf_close(wgml_gguf *f);
/* The message of the last failed accessor call on f ("" when none). */
const char *wgml_gguf_error(const wgml_gguf *f);
uint32_t wgml_gguf_version(const wgml_gguf *f);
uint64_t wgml_gguf_alignment(const wgml_gguf *f);   /* general.alignment, default 32 */
uint64_t wgml_gguf_data_offset(const wgml_gguf *f); /* file offset of the data section */
uint64_t wgml_gguf_file_size(const wgml_gguf *f);

/* Metadata: by index (0..kv_count-1, in file order) or by key. */
int64_t wgml_gguf_kv_count(const wgml_gguf *f);
const char *wgml_gguf_kv_key(const wgml_gguf *f, int64_t i); /* NUL-terminated; NULL if out of range */
wgml_gguf_value wgml_gguf_kv_value(const wgml_gguf *f, int64_t i);
/* 1 and *v when key is present, else 0. */
int wgml_gguf_find(const wgml_gguf *f, const char *key, wgml_gguf_value *v);
const char *wgml_gguf_type_name(wgml_gguf_type t);

/* Scalar conversions. Integers: any integer or bool type whose value fits; floats: f32/f64
 * (and integers). Wrong type or out of range: WGML_ERR_FORMAT (message via wgml_gguf_error). */
wgml_status wgml_gguf_value_u64(const wgml_gguf *f, wgml_gguf_value v, uint64_t *out);
wgml_status wgml_gguf_value_i64(const wgml_gguf *f, wgml_gguf_value v, int64_t *out);
wgml_status wgml_gguf_value_f64(const wgml_gguf *f, wgml_gguf_value v, double *out);
wgml_status wgml_gguf_value_string(const wgml_gguf *f, wgml_gguf_value v, const char **s, size_t *len);
/* Element i of an array value. */
wgml_status wgml_gguf_array_elem(const wgml_gguf *f, wgml_gguf_value arr, uint64_t i, wgml_gguf_value *out);

/* Typed getters by key; a missing key or a value of the wrong type gives WGML_ERR_FORMAT. */
wgml_status wgml_gguf_get_u32(const wgml_gguf *f, const char *key, uint32_t *out);
wgml_status wgml_gguf_get_u64(const wgml_gguf *f, const char *key, uint64_t *out);
wgml_status wgml_gguf_get_i64(const wgml_gguf *f, const char *key, int64_t *out);
wgml_status wgml_gguf_get_f32(const wgml_gguf *f, const char *key, float *out);
wgml_status wgml_gguf_get_bool(const wgml_gguf *f, const char *key, int *out);
wgml_status wgml_gguf_get_string(const wgml_gguf *f, const char *key, const char **s, size_t *len);
/* An array's element type and length. */
wgml_status wgml_gguf_get_array(const wgml_gguf *f, const char *key, wgml_gguf_value *arr);

/* Tensors: by index (file order) or by name (-1 when absent). */
int64_t wgml_gguf_tensor_count(const wgml_gguf *f);
const wgml_gguf_tensor *wgml_gguf_tensor_at(const wgml_gguf *f, int64_t i);
int64_t wgml_gguf_find_tensor(const wgml_gguf *f, const char *name);
/* The tensor's bytes in the mapping. A type wgml cannot size gives WGML_ERR_FORMAT
 * ("unsupported tensor type N (name)"). */
wgml_status wgml_gguf_tensor_data(const wgml_gguf *f, int64_t i, const void **data, size_t *nbytes);

/* ---- program dtypes ---------------------------------------------------------------------- */
/* Element types of program inputs and outputs, numbered as ExecuTorch's ScalarType. */
typedef enum wgml_program_dtype {
    WGML_PROG_U8 = 0,
    WGML_PROG_I8 = 1,
    WGML_PROG_I16 = 2,
    WGML_PROG_I32 = 3,
    WGML_PROG_I64 = 4,
    WGML_PROG_F16 = 5,
    WGML_PROG_F32 = 6,
    WGML_PROG_F64 = 7,
    WGML_PROG_BOOL = 11
} wgml_program_dtype;
/* "float32", "int64", ...; "unknown" otherwise. Element size in bytes (0 when unknown). */
const char *wgml_program_dtype_name(int dtype);
size_t wgml_program_dtype_size(int dtype);

/* ---- .npy files ---------------------------------------------------------------------------- */
/* NumPy's array files (format versions 1-3): little-endian b1, u1, i1, i2, i4, i8, f2, f4, f8,
 * C order, rank <= 8. The parser checks every length and the header's dictionary; errors are
 * read with wgml_last_error(NULL) and name the byte offset. */
typedef struct wgml_npy {
    wgml_program_dtype dtype;
    int rank;
    int64_t shape[WGML_MAX_RANK];
    int64_t numel;
    size_t nbytes;
    void *data; /* malloc'ed, numel · element size bytes */
} wgml_npy;
wgml_status wgml_npy_parse(const void *bytes, size_t size, wgml_npy *out);
wgml_status wgml_npy_read(const char *path, wgml_npy *out);
/* Writes a version 1.0 file. */
wgml_status wgml_npy_write(const char *path, wgml_program_dtype dtype, int rank, const int64_t *shape,
                           const void *data);
void wgml_npy_free(wgml_npy *n);

#ifdef __cplusplus
}
#endif
#endif
