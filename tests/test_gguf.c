/* GGUF reader: a file built byte by byte here (every value type, nested arrays, alignment,
 * F32 and Q8_0 tensors) read back through the typed getters; bad input gives clean errors.
 * The full comparison against PyPI gguf's writer and the corrupted corpus are in
 * tests/py/test_gguf_reader.py. When the model is installed, its metadata is checked too. */
#include "gguf_build.h"
#include "harness.h"
#include "wgml-model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char path[256];

/* A file: 2 tensors (F32 [3,2], Q8_0 [32]), alignment 64, every value type. */
static gb build_file(uint32_t version, float *f32_data) {
    gb b = {0};
    gb_header(&b, version, 2, 12);
    gb_str(&b, "general.architecture"); gb_u32(&b, 8); gb_str(&b, "toy");
    gb_str(&b, "toy.u8"); gb_u32(&b, 0); gb_u8(&b, 200);
    gb_str(&b, "toy.i8"); gb_u32(&b, 1); gb_u8(&b, 0x80);
    gb_str(&b, "toy.u16"); gb_u32(&b, 2); gb_u8(&b, 0x34); gb_u8(&b, 0x12);
    gb_str(&b, "toy.i16"); gb_u32(&b, 3); gb_u8(&b, 0xFE); gb_u8(&b, 0xFF);
    gb_str(&b, "toy.u32"); gb_u32(&b, 4); gb_u32(&b, 4000000000u);
    gb_str(&b, "toy.i32"); gb_u32(&b, 5); gb_u32(&b, (uint32_t)-7);
    gb_str(&b, "toy.f32"); gb_u32(&b, 6); gb_f32(&b, 1e-5f);
    gb_str(&b, "toy.bool"); gb_u32(&b, 7); gb_u8(&b, 1);
    gb_str(&b, "toy.u64"); gb_u32(&b, 10); gb_u64(&b, UINT64_MAX);
    gb_str(&b, "general.alignment"); gb_u32(&b, 4); gb_u32(&b, 64);
    /* [[1,2],[3]] of i64, then f64 after it */
    gb_str(&b, "toy.nested"); gb_u32(&b, 9); gb_u32(&b, 9); gb_u64(&b, 2);
    gb_u32(&b, 11); gb_u64(&b, 2); gb_u64(&b, 1); gb_u64(&b, 2);
    gb_u32(&b, 11); gb_u64(&b, 1); gb_u64(&b, (uint64_t)-3);
    /* tensors */
    gb_str(&b, "w.f32"); gb_u32(&b, 2); gb_u64(&b, 3); gb_u64(&b, 2); gb_u32(&b, 0); gb_u64(&b, 0);
    gb_str(&b, "w.q8"); gb_u32(&b, 1); gb_u64(&b, 32); gb_u32(&b, 8); gb_u64(&b, 64);
    gb_pad(&b, 64);
    for (int i = 0; i < 6; i++) gb_f32(&b, f32_data[i]);
    gb_pad(&b, 64);
    for (int i = 0; i < 34; i++) gb_u8(&b, (uint8_t)i);
    return b;
}

static void test_read(uint32_t version) {
    float data[6];
    th_fill_uniform(data, 6, -1, 1);
    gb b = build_file(version, data);
    th_check(gb_write(&b, path), "write %s", path);
    char err[512];
    wgml_gguf *f = NULL;
    wgml_status s = wgml_gguf_open(path, &f, err, sizeof err);
    th_check(s == WGML_OK, "open v%u: %s", version, err);
    if (s) { free(b.p); return; }
    th_check(wgml_gguf_version(f) == version, "version %u", wgml_gguf_version(f));
    th_check(wgml_gguf_alignment(f) == 64, "alignment %llu", (unsigned long long)wgml_gguf_alignment(f));
    th_check(wgml_gguf_kv_count(f) == 12 && wgml_gguf_tensor_count(f) == 2, "counts");
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    float f32 = 0;
    int bl = 0;
    const char *str;
    size_t len;
    th_check(!wgml_gguf_get_u32(f, "toy.u8", &u32) && u32 == 200, "u8 -> %u", u32);
    th_check(!wgml_gguf_get_i64(f, "toy.i8", &i64) && i64 == -128, "i8 -> %lld", (long long)i64);
    th_check(!wgml_gguf_get_u32(f, "toy.u16", &u32) && u32 == 0x1234, "u16");
    th_check(!wgml_gguf_get_i64(f, "toy.i16", &i64) && i64 == -2, "i16");
    th_check(!wgml_gguf_get_u32(f, "toy.u32", &u32) && u32 == 4000000000u, "u32");
    th_check(!wgml_gguf_get_i64(f, "toy.i32", &i64) && i64 == -7, "i32");
    th_check(!wgml_gguf_get_f32(f, "toy.f32", &f32) && f32 == 1e-5f, "f32");
    th_check(!wgml_gguf_get_bool(f, "toy.bool", &bl) && bl == 1, "bool");
    th_check(!wgml_gguf_get_u64(f, "toy.u64", &u64) && u64 == UINT64_MAX, "u64");
    th_check(!wgml_gguf_get_string(f, "general.architecture", &str, &len) && len == 3 && !memcmp(str, "toy", 3), "string");
    wgml_gguf_value arr, e, e2;
    th_check(!wgml_gguf_get_array(f, "toy.nested", &arr) && arr.count == 2 && arr.elem_type == WGML_GGUF_ARRAY, "nested array");
    th_check(!wgml_gguf_array_elem(f, arr, 1, &e) && e.count == 1 && e.elem_type == WGML_GGUF_I64, "nested elem");
    th_check(!wgml_gguf_array_elem(f, e, 0, &e2) && !wgml_gguf_value_i64(f, e2, &i64) && i64 == -3, "nested value %lld", (long long)i64);
    th_check(!wgml_gguf_array_elem(f, arr, 0, &e) && !wgml_gguf_array_elem(f, e, 1, &e2) && !wgml_gguf_value_i64(f, e2, &i64) && i64 == 2, "nested [0][1]");
    /* errors of the getters */
    th_check(wgml_gguf_get_u32(f, "toy.missing", &u32) == WGML_ERR_FORMAT && strstr(wgml_gguf_error(f), "missing metadata key 'toy.missing'"),
             "missing key: %s", wgml_gguf_error(f));
    th_check(wgml_gguf_get_u32(f, "toy.i32", &u32) == WGML_ERR_FORMAT && strstr(wgml_gguf_error(f), "negative"), "negative as u32: %s", wgml_gguf_error(f));
    th_check(wgml_gguf_get_u32(f, "toy.u64", &u32) == WGML_ERR_FORMAT && strstr(wgml_gguf_error(f), "does not fit"), "u64 as u32: %s", wgml_gguf_error(f));
    th_check(wgml_gguf_get_string(f, "toy.u32", &str, &len) == WGML_ERR_FORMAT && strstr(wgml_gguf_error(f), "not a string"), "u32 as string: %s", wgml_gguf_error(f));
    th_check(wgml_gguf_get_bool(f, "toy.u8", &bl) == WGML_ERR_FORMAT, "u8 as bool");
    th_check(wgml_gguf_array_elem(f, arr, 2, &e) == WGML_ERR_ARG && strstr(wgml_gguf_error(f), "out of range"), "index out of range: %s", wgml_gguf_error(f));
    /* tensors */
    int64_t i = wgml_gguf_find_tensor(f, "w.f32");
    const wgml_gguf_tensor *t = wgml_gguf_tensor_at(f, i);
    th_check(i == 0 && t && t->n_dims == 2 && t->dims[0] == 3 && t->dims[1] == 2 && t->numel == 6 && t->type == WGML_GGML_F32,
             "tensor info w.f32");
    const void *p;
    size_t nb;
    th_check(!wgml_gguf_tensor_data(f, 0, &p, &nb) && nb == 24 && !memcmp(p, data, 24), "w.f32 data");
    th_check(wgml_gguf_data_offset(f) % 64 == 0, "data offset aligned");
    th_check(!wgml_gguf_tensor_data(f, 1, &p, &nb) && nb == 34 && ((const uint8_t *)p)[33] == 33, "w.q8 data");
    th_check(wgml_gguf_find_tensor(f, "nope") == -1 && wgml_gguf_tensor_at(f, 5) == NULL, "absent tensor");
    th_check(wgml_gguf_tensor_data(f, 7, &p, &nb) == WGML_ERR_ARG, "tensor index out of range");
    wgml_gguf_close(f);

    /* truncations at every byte give a clean format error */
    int bad = 0;
    for (size_t cut = 0; cut < b.n - 1; cut++) {
        gb c = {b.p, cut, b.n};
        if (!gb_write(&c, path)) { bad++; continue; }
        s = wgml_gguf_open(path, &f, err, sizeof err);
        if (s != WGML_ERR_FORMAT || f || !strstr(err, "offset")) {
            if (bad++ < 3) printf("  truncated at %zu: status %d, %s\n", cut, s, err);
            wgml_gguf_close(f);
        }
    }
    th_check(bad == 0, "v%u: %d of %zu truncations not a clean format error", version, bad, b.n - 1);
    free(b.p);
}

static void test_errors(void) {
    char err[512];
    wgml_gguf *f = (wgml_gguf *)1;
    th_check(wgml_gguf_open("/nonexistent/x.gguf", &f, err, sizeof err) == WGML_ERR_IO && !f && strstr(err, "cannot open"),
             "missing file: %s", err);
    th_check(wgml_gguf_open(NULL, &f, err, sizeof err) == WGML_ERR_ARG, "NULL path");
    th_check(wgml_gguf_open(".", &f, err, sizeof err) == WGML_ERR_IO, "a directory: %s", err);
    struct { const char *name; uint32_t version, type; uint64_t count; const char *want; } cases[] = {
        {"unknown type", 3, 13, 0, "unknown value type 13"},
        {"array huge count", 3, 9, UINT64_MAX, "array count"},
        {"version 1", 1, 4, 0, "unsupported GGUF version 1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gb b = {0};
        gb_header(&b, cases[k].version, 0, 1);
        gb_str(&b, "k");
        gb_u32(&b, cases[k].type);
        if (cases[k].type == 9) { gb_u32(&b, 4); gb_u64(&b, cases[k].count); }
        gb_u32(&b, 0);
        gb_write(&b, path);
        free(b.p);
        wgml_status s = wgml_gguf_open(path, &f, err, sizeof err);
        th_check(s == WGML_ERR_FORMAT && !f && strstr(err, cases[k].want) && strstr(err, "at offset"), "%s: %s", cases[k].name, err);
        if (s == WGML_ERR_FORMAT) printf("  ok %-28s %s\n", cases[k].name, err);
    }
}

static void test_model(void) {
    char mp[512], err[512];
    snprintf(mp, sizeof mp, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", WGML_MODEL_DIR);
    wgml_gguf *f;
    wgml_status s = wgml_gguf_open(mp, &f, err, sizeof err);
    th_check(s == WGML_OK, "open the model (run scripts/setup.sh): %s", err);
    if (s) return;
    uint32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0;
    float eps = 0;
    th_check(!wgml_gguf_get_u32(f, "llama.block_count", &n_layer) && n_layer == 30, "llama.block_count %u", n_layer);
    th_check(!wgml_gguf_get_u32(f, "llama.embedding_length", &n_embd) && n_embd == 576, "embedding_length");
    th_check(!wgml_gguf_get_u32(f, "llama.attention.head_count", &n_head) && n_head == 9, "head_count");
    th_check(!wgml_gguf_get_u32(f, "llama.attention.head_count_kv", &n_head_kv) && n_head_kv == 3, "head_count_kv");
    th_check(!wgml_gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps) && fabsf(eps - 1e-5f) < 1e-9f, "rms eps");
    th_check(wgml_gguf_tensor_count(f) == 272, "272 tensors");
    int64_t q = 0, q8 = 0, f32 = 0;
    uint64_t total = 0;
    for (int64_t i = 0; i < wgml_gguf_tensor_count(f); i++) {
        const wgml_gguf_tensor *t = wgml_gguf_tensor_at(f, i);
        q += t->type == WGML_GGML_Q4_1;
        q8 += t->type == WGML_GGML_Q8_0;
        f32 += t->type == WGML_GGML_F32;
        const void *p;
        size_t n;
        if (!wgml_gguf_tensor_data(f, i, &p, &n)) total += n;
    }
    printf("  model: %lld Q4_1, %lld Q8_0, %lld F32 tensors, %.1f MB of data\n", (long long)q, (long long)q8, (long long)f32, total / 1e6);
    th_check(q == 210 && q8 == 1 && f32 == 61, "tensor types");
    th_check(wgml_gguf_data_offset(f) + total <= wgml_gguf_file_size(f), "data within the file");
    int64_t e = wgml_gguf_find_tensor(f, "token_embd.weight");
    const wgml_gguf_tensor *t = wgml_gguf_tensor_at(f, e);
    th_check(t && t->dims[0] == 576 && t->dims[1] == 49152 && t->nbytes == 49152ull * 18 * 34, "token_embd shape and size");
    wgml_gguf_close(f);
}

int main(int argc, char **argv) {
    th_init_args("test_gguf", argc, argv);
    th_tmp_path(path, sizeof path, "wgml_test_gguf_%d.gguf", (int)getpid());
    test_read(3);
    test_read(2);
    test_errors();
    test_model();
    unlink(path);
    return th_done();
}
