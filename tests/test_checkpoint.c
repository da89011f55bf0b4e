/* safetensors reader/writer and training checkpoints (src/io/safetensors.c,
 * src/train/checkpoint.c): round trips, strict rejection of malformed files, atomic saves
 * that survive a crash mid-write, checksum and configuration mismatches, SHA-256.
 * With WGML_ST_SAMPLE=PATH it also writes a sample file for tests/py/test_safetensors.py;
 * with WGML_ST_READ=PATH it checks a file that script wrote. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char TMP[256];

/* The sample the Python test checks: values follow a fixed pattern. */
static void sample_tensors(st_write_tensor t[3], float *a, int32_t *b, uint8_t *c) {
    for (int i = 0; i < 6; i++) a[i] = 0.5f * (float)i - 1.0f;
    for (int i = 0; i < 4; i++) b[i] = -7 * i;
    c[0] = 200;
    t[0] = (st_write_tensor){"layer.a", "F32", 2, {2, 3}, a};
    t[1] = (st_write_tensor){"b \"quoted\"", "I32", 1, {4}, b};
    t[2] = (st_write_tensor){"scalar", "U8", 0, {0}, c};
}

static void test_roundtrip(void) {
    float a[6];
    int32_t b[4];
    uint8_t c[1];
    st_write_tensor t[3];
    sample_tensors(t, a, b, c);
    const char *mk[2] = {"step", "note"}, *mv[2] = {"12", "line\nbreak \xc3\xa9"};
    uint8_t *buf;
    size_t len;
    char err[400];
    wgml_status s = st_build(t, 3, mk, mv, 2, &buf, &len, err, sizeof err);
    th_check(s == WGML_OK, "safetensors: build (%s)", s ? err : "");
    if (s) return;
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    th_check(hl % 8 == 0 && len == 8 + hl + 6 * 4 + 4 * 4 + 1, "safetensors: header padded to 8 bytes, data follows (%zu bytes)", len);
    char path[300];
    snprintf(path, sizeof path, "%s/x.safetensors", TMP);
    const void *parts[1] = {buf};
    size_t sizes[1] = {len};
    s = file_write_atomic(path, parts, sizes, 1, SIZE_MAX, err, sizeof err);
    th_check(s == WGML_OK, "safetensors: atomic write (%s)", s ? err : "");
    struct stat sb;
    char tmpp[320];
    snprintf(tmpp, sizeof tmpp, "%s.tmp", path);
    th_check(stat(tmpp, &sb) != 0, "safetensors: no temp file left behind");
    st_file f;
    s = st_read(path, &f, err, sizeof err);
    th_check(s == WGML_OK, "safetensors: read back (%s)", s ? err : "");
    if (!s) {
        const st_tensor *x = st_find(&f, "layer.a"), *y = st_find(&f, "b \"quoted\""), *z = st_find(&f, "scalar");
        th_check(f.n == 3 && x && y && z, "safetensors: three tensors by name");
        th_check(x && !strcmp(x->dtype, "F32") && x->rank == 2 && x->shape[0] == 2 && x->shape[1] == 3 && x->nbytes == 24 &&
                     !memcmp(x->data, a, 24),
                 "safetensors: F32 [2,3] round trip");
        th_check(y && !strcmp(y->dtype, "I32") && y->rank == 1 && y->numel == 4 && !memcmp(y->data, b, 16), "safetensors: I32 [4] round trip");
        th_check(z && z->rank == 0 && z->numel == 1 && z->data[0] == 200, "safetensors: rank-0 U8 round trip");
        th_check(st_meta(&f, "step") && !strcmp(st_meta(&f, "step"), "12") && !strcmp(st_meta(&f, "note"), mv[1]) && !st_meta(&f, "x"),
                 "safetensors: metadata round trip (escapes, UTF-8)");
    }
    st_free(&f);
    const char *sample = getenv("WGML_ST_SAMPLE");
    if (sample) {
        s = file_write_atomic(sample, parts, sizes, 1, SIZE_MAX, err, sizeof err);
        th_check(s == WGML_OK, "wrote the sample %s", sample);
    }
    free(buf);
    /* bad arguments */
    st_write_tensor bad = {"x", "F33", 1, {2}, a};
    th_check(st_build(&bad, 1, NULL, NULL, 0, &buf, &len, err, sizeof err) == WGML_ERR_ARG && !buf, "safetensors: unknown dtype refused on write");
    st_write_tensor dup[2] = {{"x", "F32", 1, {1}, a}, {"x", "F32", 1, {1}, a}};
    th_check(st_build(dup, 2, NULL, NULL, 0, &buf, &len, err, sizeof err) == WGML_ERR_ARG && strstr(err, "twice"),
             "safetensors: a repeated name refused on write");
}

/* Parses header text + data bytes and expects an error containing want. */
static void expect_bad(const char *name, const char *header, size_t data_len, const char *want) {
    size_t hl = strlen(header), n = 8 + hl + data_len;
    uint8_t *b = calloc(n, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    st_file f;
    char err[400] = "";
    wgml_status s = st_parse(b, n, &f, err, sizeof err);
    th_check(s == WGML_ERR_FORMAT && strstr(err, want), "safetensors strict: %s ('%s' in '%s')", name, want, err);
    st_free(&f);
}

static void test_strict(void) {
    expect_bad("trailing bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "after the last");
    expect_bad("hole", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole");
    expect_bad("overlap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, "overlaps");
    expect_bad("size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "8 bytes for 3 elements");
    expect_bad("offsets past the end", "{\"a\":{\"dtype\":\"U8\",\"shape\":[9],\"data_offsets\":[0,9]}}", 8, "outside");
    expect_bad("unknown dtype", "{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "unknown dtype");
    expect_bad("negative shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, "bad shape");
    expect_bad("fractional offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.5]}}", 1, "outside");
    expect_bad("extra field", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1, "exactly");
    expect_bad("not an object", "[1]", 0, "not a JSON object");
    expect_bad("broken JSON", "{\"a\":", 0, "header JSON");
    expect_bad("non-string metadata", "{\"__metadata__\":{\"k\":1}}", 0, "not a string");
    /* header length larger than the file */
    uint8_t *b = calloc(16, 1);
    b[0] = 200;
    st_file f;
    char err[300];
    th_check(st_parse(b, 16, &f, err, sizeof err) == WGML_ERR_FORMAT && strstr(err, "does not fit"), "safetensors strict: header length past the end");
    st_free(&f);
    b = calloc(4, 1);
    th_check(st_parse(b, 4, &f, err, sizeof err) == WGML_ERR_FORMAT, "safetensors strict: a 4-byte file");
    st_free(&f);
    th_check(st_read("/nonexistent/a.safetensors", &f, err, sizeof err) == WGML_ERR_IO && strstr(err, "/nonexistent"),
             "safetensors: a missing file names the path");
}

/* A synthetic training state: 3 tensors with m and v, an optimizer blob, metadata. */
typedef struct state {
    float p[3][40], m[3][40], v[3][40];
    uint8_t opt[37];
    char step[32];
} state;

static void make_state(state *s, int seed) {
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 40; i++) {
            s->p[t][i] = (float)th_uniform(-1, 1) + (float)seed;
            s->m[t][i] = (float)th_uniform(-1e-3, 1e-3);
            s->v[t][i] = (float)th_uniform(0, 1e-6);
        }
    for (int i = 0; i < 37; i++) s->opt[i] = (uint8_t)(i * 7 + seed);
    snprintf(s->step, sizeof s->step, "%d", 100 + seed);
}

static wgml_status save_state(const char *dir, const state *s, const char *rank, size_t crash_after, char *err, size_t errlen) {
    static const char *names[3] = {"blk.0.attn_q.lora_a", "blk.0.attn_q.lora_b", "blk.1.ffn_up.lora_a"};
    static const int64_t shapes[3][2] = {{8, 5}, {5, 8}, {4, 10}};
    st_write_tensor t[10];
    char nm[9][64];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        const float *src[3] = {s->p[i], s->m[i], s->v[i]};
        const char *suffix[3] = {"", ".adam_m", ".adam_v"};
        for (int w = 0; w < 3; w++) {
            snprintf(nm[n], sizeof nm[n], "%s%s", names[i], suffix[w]);
            t[n] = (st_write_tensor){nm[n], "F32", 2, {shapes[i][0], shapes[i][1]}, src[w]};
            n++;
        }
    }
    t[n++] = (st_write_tensor){"optimizer_state", "U8", 1, {37}, s->opt};
    const char *k[4] = {"step", "rank", "data_pos", "rng"}, *v[4] = {s->step, rank, "12345", "0x9e3779b97f4a7c15"};
    return ckpt_save(dir, t, n, k, v, 4, crash_after, err, errlen);
}

static int state_equal(const st_file *f, const state *s) {
    const st_tensor *a = st_find(f, "blk.0.attn_q.lora_a"), *am = st_find(f, "blk.0.attn_q.lora_a.adam_m"),
                    *bv = st_find(f, "blk.0.attn_q.lora_b.adam_v"), *c = st_find(f, "blk.1.ffn_up.lora_a"), *o = st_find(f, "optimizer_state");
    return a && am && bv && c && o && !memcmp(a->data, s->p[0], 160) && !memcmp(am->data, s->m[0], 160) &&
           !memcmp(bv->data, s->v[1], 160) && !memcmp(c->data, s->p[2], 160) && o->nbytes == 37 && !memcmp(o->data, s->opt, 37) &&
           st_meta(f, "step") && !strcmp(st_meta(f, "step"), s->step) && c->shape[0] == 4 && c->shape[1] == 10;
}

static void test_checkpoint(void) {
    char dir[300], err[500];
    snprintf(dir, sizeof dir, "%s/checkpoint", TMP);
    static state A, B;
    make_state(&A, 1);
    make_state(&B, 2);
    wgml_status s = save_state(dir, &A, "8", SIZE_MAX, err, sizeof err);
    th_check(s == WGML_OK, "checkpoint: save A (%s)", s ? err : "");
    st_file f;
    s = ckpt_load(dir, &f, err, sizeof err);
    th_check(s == WGML_OK && state_equal(&f, &A), "checkpoint: load gives A bit for bit (%s)", s ? err : "");
    th_check(!s && ckpt_expect(&f, "rank", "8", err, sizeof err) == WGML_OK, "checkpoint: matching configuration accepted");
    th_check(!s && ckpt_expect(&f, "rank", "16", err, sizeof err) == WGML_ERR_FORMAT &&
                 strstr(err, "checkpoint mismatch: rank is '8' in the checkpoint but '16' in this run"),
             "checkpoint: a different rank is rejected with a clear message (%s)", err);
    th_check(!s && ckpt_expect(&f, "model_sha256", "abc", err, sizeof err) == WGML_ERR_FORMAT && strstr(err, "(absent)"),
             "checkpoint: a key the checkpoint lacks is a mismatch");
    st_free(&f);

    /* a crash half-way through saving B leaves A loadable */
    char path[340];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_FILE);
    struct stat sb;
    stat(path, &sb);
    s = save_state(dir, &B, "8", (size_t)sb.st_size / 2, err, sizeof err);
    th_check(s == WGML_ERR_IO && strstr(err, "simulated crash"), "checkpoint: simulated crash mid-write (%s)", err);
    char tmpp[360];
    snprintf(tmpp, sizeof tmpp, "%s.tmp", path);
    th_check(stat(tmpp, &sb) == 0, "checkpoint: the crash left a partial temp file");
    s = ckpt_load(dir, &f, err, sizeof err);
    th_check(s == WGML_OK && state_equal(&f, &A), "checkpoint: after the crash the previous checkpoint loads intact (%s)", s ? err : "");
    st_free(&f);
    s = save_state(dir, &B, "8", SIZE_MAX, err, sizeof err);
    s = s ? s : ckpt_load(dir, &f, err, sizeof err);
    th_check(s == WGML_OK && state_equal(&f, &B), "checkpoint: the next save replaces it with B (%s)", s ? err : "");
    st_free(&f);

    /* corruption anywhere is detected */
    uint8_t *buf;
    size_t len;
    file_read_all(path, &buf, &len, err, sizeof err);
    size_t spots[3] = {len - 3, len / 2, 40}; /* data, middle, header */
    for (int i = 0; i < 3; i++) {
        uint8_t *c = malloc(len);
        memcpy(c, buf, len);
        c[spots[i]] ^= 0x01;
        FILE *fp = fopen(path, "wb");
        fwrite(c, 1, len, fp);
        fclose(fp);
        free(c);
        s = ckpt_load(dir, &f, err, sizeof err);
        th_check(s != WGML_OK && (strstr(err, "corrupt") || strstr(err, "not a")), "checkpoint: a flipped bit at byte %zu is detected (%s)",
                 spots[i], err);
        st_free(&f);
    }
    FILE *fp = fopen(path, "wb");
    fwrite(buf, 1, len - 10, fp);
    fclose(fp);
    s = ckpt_load(dir, &f, err, sizeof err);
    th_check(s != WGML_OK && strstr(err, "corrupt"), "checkpoint: a truncated file is detected (%s)", err);
    st_free(&f);
    free(buf);
    char none[320];
    snprintf(none, sizeof none, "%s/none", TMP);
    th_check(ckpt_load(none, &f, err, sizeof err) == WGML_ERR_IO && strstr(err, "none"), "checkpoint: a missing checkpoint names the path");
    /* a safetensors file that is not a checkpoint */
    uint8_t *plain;
    size_t pl;
    float x = 1;
    st_write_tensor t = {"x", "F32", 1, {1}, &x};
    st_build(&t, 1, NULL, NULL, 0, &plain, &pl, err, sizeof err);
    fp = fopen(path, "wb");
    fwrite(plain, 1, pl, fp);
    fclose(fp);
    free(plain);
    th_check(ckpt_load(dir, &f, err, sizeof err) == WGML_ERR_FORMAT && strstr(err, "not a wgml-checkpoint-1"),
             "checkpoint: a plain safetensors file is not taken for a checkpoint (%s)", err);
    st_free(&f);
}

static void test_hashes(void) {
    uint8_t d[32];
    sha256_bytes("abc", 3, d);
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    th_check(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256('abc') (%s)", hex);
    /* 1,000,000 'a' (FIPS 180-2 test vector), through a file in odd-sized reads */
    char path[300];
    snprintf(path, sizeof path, "%s/a.bin", TMP);
    FILE *fp = fopen(path, "wb");
    for (int i = 0; i < 1000000; i++) fputc('a', fp);
    fclose(fp);
    uint64_t size;
    char err[200];
    th_check(sha256_file(path, hex, &size, err, sizeof err) == WGML_OK && size == 1000000 &&
                 !strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
             "sha256 of a million 'a' from a file (%s)", hex);
    th_check(fnv1a64(FNV1A64_INIT, "a", 1) == 0xaf63dc4c8601ec8cull, "fnv1a64('a')");
}

static void test_python_file(const char *path) {
    st_file f;
    char err[400];
    wgml_status s = st_read(path, &f, err, sizeof err);
    th_check(s == WGML_OK, "read the file Python wrote (%s)", s ? err : "");
    if (s) return;
    const st_tensor *w = st_find(&f, "w"), *i = st_find(&f, "ids");
    int ok = w && !strcmp(w->dtype, "F32") && w->rank == 2 && w->shape[0] == 3 && w->shape[1] == 2 && i && !strcmp(i->dtype, "I32") && i->numel == 5;
    for (int k = 0; ok && k < 6; k++) {
        float v;
        memcpy(&v, w->data + 4 * k, 4);
        ok &= v == 0.25f * (float)k;
    }
    for (int k = 0; ok && k < 5; k++) {
        int32_t v;
        memcpy(&v, i->data + 4 * k, 4);
        ok &= v == 1000 - k;
    }
    th_check(ok && st_meta(&f, "origin") && !strcmp(st_meta(&f, "origin"), "python"), "the Python-written tensors and metadata read back");
    st_free(&f);
}

int main(int argc, char **argv) {
    th_init_args("test_checkpoint", argc, argv);
    clock_t c0 = clock();
    th_tmp_path(TMP, sizeof TMP, "wgml_test_ckpt_%d", (int)getpid());
    mkdir(TMP, 0755);
    if (getenv("WGML_ST_READ")) {
        test_python_file(getenv("WGML_ST_READ"));
    } else {
        test_roundtrip();
        test_strict();
        test_checkpoint();
        test_hashes();
    }
    th_check(th_remove_tree(TMP) == 0, "the test's folder %s removed", TMP);
    printf("test_checkpoint: %.2f s CPU\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    return th_done();
}
