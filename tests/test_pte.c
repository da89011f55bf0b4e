/* The ExecuTorch program reader on bad input, in-process (so the ASan + UBSan build checks every
 * read), no GPU needed but for one program load (the last item):
 *  - the flatbuffer reader (src/io/flatbuf.c) on hand-made buffers: a valid table read back;
 *    a vtable outside the buffer, a field past its table, a string without its NUL, a string and
 *    a vector whose counts run past the end, a huge vector count, tables nested 100 deep, and
 *    one table reached through 2,000 offsets (the decoding budget);
 *  - the programs and delegate blobs of the seed corpus (fuzz/corpus/pte/good_*, blob_*: made by
 *    the real exporter, tests/py/test_pte_reader.py): each parses; truncated at every offset,
 *    each gives a clean error (WGML_ERR_FORMAT, a "pte: " message naming a file offset) or,
 *    only past the program's flatbuffer and segments, a success; every byte of the smallest
 *    program and blob flipped in turn gives a clean error or a success;
 *  - the corrupted files of the corpus (bad_*): each is refused with a message;
 *  - the load error's list of unsupported operators: names compared whole (good_mlp with its
 *    operators renamed wgmltest.absent.xy and wgmltest.absent.x, loaded on a context: both listed and
 *    counted) and a long list cut after a whole name (prog_missing, no GPU).
 * Exit 0 when every check passed. */
#include "io/flatbuf.h"
#include "io/pte.h"
#include "io/pte_internal.h"
#include "program/program.h"
#include "wgml-program.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef WGML_PTE_CORPUS
#error "WGML_PTE_CORPUS (the fuzz/corpus/pte folder) must be defined"
#endif

static int passed, failed;

static void check(int ok, const char *fmt, const char *a, const char *b) {
    if (ok) {
        passed++;
        return;
    }
    failed++;
    printf("FAIL ");
    printf(fmt, a, b);
    printf("\n");
}

/* ---- the flatbuffer reader on hand-made buffers --------------------------------------------- */

static void w16(uint8_t *b, size_t at, uint16_t v) { b[at] = (uint8_t)v, b[at + 1] = (uint8_t)(v >> 8); }
static void w32(uint8_t *b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) b[at + i] = (uint8_t)(v >> (8 * i));
}

/* A buffer holding one root table with three fields: u32 = 7 at +4, a string "hi" (offset at
 * +8), a vector of three i32 (offset at +12). Layout: root offset 0, identifier "TEST" 4,
 * vtable 8 (10 bytes: size 10, table 16, fields 4, 8, 12) + 2 pad, table 20..36, string 36,
 * vector 44. */
static size_t make_valid(uint8_t *b) {
    memset(b, 0, 64);
    w32(b, 0, 20);
    memcpy(b + 4, "TEST", 4);
    w16(b, 8, 10), w16(b, 10, 16), w16(b, 12, 4), w16(b, 14, 8), w16(b, 16, 12);
    w32(b, 20, 20 - 8);       /* soffset: vtable at 20 - 12 = 8 */
    w32(b, 24, 7);            /* field 0 */
    w32(b, 28, 36 - 28);      /* field 1: string at 36 */
    w32(b, 32, 44 - 32);      /* field 2: vector at 44 */
    w32(b, 36, 2);
    memcpy(b + 40, "hi", 3);
    w32(b, 44, 3);
    w32(b, 48, (uint32_t)-5), w32(b, 52, 6), w32(b, 56, 1u << 31);
    return 60;
}

static wgml_status read_valid(const uint8_t *b, size_t n, char *err, size_t errlen, uint32_t *u, const char **s,
                              uint32_t *slen, fb_vec *v) {
    fb_ctx c;
    fb_init(&c, b, n, 1000, "test", err, errlen);
    fb_table t;
    wgml_status st;
    if ((st = fb_root(&c, "TEST", "Root", &t)) || (st = fb_u32(&c, &t, 0, 0, "Root.a", u)) ||
        (st = fb_string_field(&c, &t, 1, "Root.s", s, slen, NULL)) || (st = fb_vector_field(&c, &t, 2, 4, "Root.v", v, NULL)))
        return st;
    return WGML_OK;
}

static void expect_error(const uint8_t *b, size_t n, const char *name, const char *want) {
    char err[512] = "";
    uint32_t u;
    const char *s;
    uint32_t sl;
    fb_vec v;
    wgml_status st = read_valid(b, n, err, sizeof err, &u, &s, &sl, &v);
    char msg[700];
    snprintf(msg, sizeof msg, "status %d, '%s'", (int)st, err);
    check(st == WGML_ERR_FORMAT && strstr(err, want) && strstr(err, "at file offset 10"), "flatbuf %s: %s", name, msg);
    if (st == WGML_ERR_FORMAT) printf("ok   flatbuf %-16s %s\n", name, err);
}

static void test_flatbuf(void) {
    uint8_t b[64], x[64];
    size_t n = make_valid(b);
    char err[256] = "";
    uint32_t u = 0, sl = 0;
    const char *s = NULL;
    fb_vec v;
    wgml_status st = read_valid(b, n, err, sizeof err, &u, &s, &sl, &v);
    fb_ctx c;
    fb_init(&c, b, n, 0, "test", NULL, 0);
    check(st == WGML_OK && u == 7 && sl == 2 && !strcmp(s, "hi") && v.n == 3 &&
              (int32_t)fb_vec_raw(&c, &v, 0) == -5 && fb_vec_raw(&c, &v, 2) == 1u << 31,
          "flatbuf valid: %s%s", err, "");
    /* each corruption, at a known place */
    memcpy(x, b, 64), w32(x, 20, 0x7fffffff);
    expect_error(x, n, "vtable_outside", "vtable at");
    memcpy(x, b, 64), w16(x, 16, 14);
    expect_error(x, n, "field_past", "field of 4 bytes at +14 runs past its table of 16 bytes");
    memcpy(x, b, 64), x[42] = 'x';
    expect_error(x, n, "string_nul", "string of 2 bytes is not NUL-terminated");
    memcpy(x, b, 64), w32(x, 36, 30);
    expect_error(x, n, "string_long", "string of 30 bytes runs past");
    memcpy(x, b, 64), w32(x, 44, 4);
    expect_error(x, n, "vector_long", "vector of 4 elements of 4 bytes runs past");
    memcpy(x, b, 64), w32(x, 44, 0xffffffffu);
    expect_error(x, n, "vector_huge", "vector of 4294967295 elements");
    memcpy(x, b, 64), w32(x, 28, 0xfffffff0u);
    expect_error(x, n, "offset_huge", "offset to");
    memcpy(x, b, 64), w16(x, 8, 7);
    expect_error(x, n, "vtable_odd", "vtable size 7 is not an even number");
    memcpy(x, b, 64), w16(x, 10, 60);
    expect_error(x, n, "table_long", "table of 60 bytes at 20 runs past");
    memcpy(x, b, 64), memcpy(x + 4, "TESX", 4);
    expect_error(x, n, "identifier", "file identifier 'TESX' is not 'TEST'");
    for (size_t k = 0; k < n; k++) { /* every truncation: an error, never a read past the end */
        uint8_t *t = malloc(k ? k : 1);
        memcpy(t, b, k);
        st = read_valid(t, k, err, sizeof err, &u, &s, &sl, &v);
        free(t);
        check(st == WGML_ERR_FORMAT, "flatbuf truncated: %s%s", err, "");
    }

    /* 100 tables, each holding an offset to the next: refused past FB_MAX_DEPTH */
    enum { DEEP = 100 };
    size_t dn = 8 + 16 * DEEP;
    uint8_t *d = calloc(1, dn);
    w32(d, 0, 16);
    memcpy(d + 4, "DEEP", 4);
    for (int i = 0; i < DEEP; i++) {
        size_t vt = 8 + 16 * (size_t)i, tb = vt + 8;
        w16(d, vt, 6), w16(d, vt + 2, 8), w16(d, vt + 4, i < DEEP - 1 ? 4 : 0);
        w32(d, tb, 8);
        if (i < DEEP - 1) w32(d, tb + 4, 12); /* next table at tb + 16 */
    }
    fb_init(&c, d, dn, 0, "test", err, sizeof err);
    fb_table t;
    int depth = 0;
    st = fb_root(&c, "DEEP", "Deep", &t);
    while (st == WGML_OK) {
        bool present;
        fb_table next;
        st = fb_table_field(&c, &t, 0, "Deep.next", &next, &present);
        if (st || !present) break;
        t = next;
        depth++;
    }
    check(st == WGML_ERR_FORMAT && strstr(err, "tables nested deeper than 64") && depth == FB_MAX_DEPTH,
          "flatbuf deep nesting: %s%s", err, "");
    printf("ok   flatbuf %-16s %s\n", "deep", err);
    free(d);

    /* one table with a vector of 2,000 u32, reached through 2,000 offsets: decoding every copy
     * would take 4 million elements from a 16 KB buffer; the budget refuses it */
    enum { N = 2000, M = 2000 };
    size_t root_vt = 8, root_tb = 16, vec = 24, sub_vt = vec + 4 + 4 * N, sub_tb = sub_vt + 8, svec = sub_tb + 8;
    size_t sn = svec + 4 + 4 * M;
    uint8_t *sb = calloc(1, sn);
    w32(sb, 0, (uint32_t)root_tb);
    memcpy(sb + 4, "SHAR", 4);
    w16(sb, root_vt, 6), w16(sb, root_vt + 2, 8), w16(sb, root_vt + 4, 4);
    w32(sb, root_tb, (uint32_t)(root_tb - root_vt)), w32(sb, root_tb + 4, (uint32_t)(vec - (root_tb + 4)));
    w32(sb, vec, N);
    for (size_t i = 0; i < N; i++) w32(sb, vec + 4 + 4 * i, (uint32_t)(sub_tb - (vec + 4 + 4 * i)));
    w16(sb, sub_vt, 6), w16(sb, sub_vt + 2, 8), w16(sb, sub_vt + 4, 4);
    w32(sb, sub_tb, (uint32_t)(sub_tb - sub_vt)), w32(sb, sub_tb + 4, (uint32_t)(svec - (sub_tb + 4)));
    w32(sb, svec, M);
    fb_init(&c, sb, sn, 0, "test", err, sizeof err);
    pte_arena a = {0};
    fb_vec outer;
    uint32_t decoded = 0;
    st = fb_root(&c, "SHAR", "Shared", &t);
    if (!st) st = fb_vector_field(&c, &t, 0, 4, "Shared.items", &outer, NULL);
    for (uint32_t i = 0; !st && i < outer.n; i++) {
        fb_table it;
        const void *arr;
        uint32_t cnt;
        if (!(st = fb_vec_table(&c, &outer, i, 1, "Shared.items[]", &it)) &&
            !(st = pte_decode_vec(&c, &a, &it, 0, PTE_EL_U32, "Shared.items[].v", &arr, &cnt)))
            decoded += cnt;
    }
    pte_arena_free(&a);
    check(st == WGML_ERR_FORMAT && strstr(err, "decoding needs more than") && decoded < 3 * sn,
          "flatbuf shared tables: %s%s", err, "");
    printf("ok   flatbuf %-16s %s (after %u elements)\n", "shared", err, decoded);
    free(sb);
}

/* ---- the corpus ------------------------------------------------------------------------------- */

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
    if (b && sz > 0 && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)(sz > 0 ? sz : 0);
    return b;
}

/* Parses data[0..n) (a copy of exactly n bytes) as a program and every delegate as a Vulkan blob,
 * or, when is_blob, as a bare blob. Returns the first failing status; err gets its message. */
static wgml_status parse_all(const uint8_t *data, size_t n, bool is_blob, char *err, size_t errlen, uint64_t *prog_end) {
    uint8_t *b = malloc(n ? n : 1);
    memcpy(b, data, n);
    wgml_status s;
    err[0] = 0;
    if (is_blob) {
        pte_vk_graph *g = NULL;
        s = pte_vk_parse(NULL, b, n, 0, "bare", &g, err, errlen);
        pte_vk_free(g);
    } else {
        pte_program *p = NULL;
        s = pte_parse(b, n, &p, err, errlen);
        if (!s && prog_end) {
            *prog_end = p->program_size;
            for (uint32_t i = 0; i < p->n_segments; i++) {
                uint64_t e = p->segments[i].bytes.file_offset + p->segments[i].size;
                if (e > *prog_end) *prog_end = e;
            }
        }
        for (uint32_t pi = 0; !s && pi < p->n_plans; pi++)
            for (uint32_t d = 0; !s && d < p->plans[pi].n_delegates; d++) {
                pte_vk_graph *g = NULL;
                s = pte_vk_parse_delegate(p, &p->plans[pi], d, &g, err, errlen);
                pte_vk_free(g);
            }
        pte_free(p);
    }
    free(b);
    return s;
}

/* A malformed file: a "pte: " message naming the file offset. Unsupported (a delegate of
 * another backend, an unknown union type): a "pte: " message (naming the delegate or value). */
static bool clean_error(wgml_status s, const char *err) {
    if (s == WGML_ERR_UNSUPPORTED) return !strncmp(err, "pte: ", 5);
    return s == WGML_ERR_FORMAT && !strncmp(err, "pte: ", 5) && strstr(err, "file offset");
}

static void test_file(const char *dir, const char *name, bool flips) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    uint8_t *data = read_file(path, &n);
    if (!data) {
        check(0, "cannot read %s%s", path, "");
        return;
    }
    bool is_blob = !strncmp(name, "blob_", 5);
    if (!strncmp(name, "bad_", 4)) {
        wgml_status s = parse_all(data, n, false, err, sizeof err, NULL);
        check(clean_error(s, err), "%s: not a clean error: '%s'", name, err);
        free(data);
        return;
    }
    uint64_t end = n;
    wgml_status s = parse_all(data, n, is_blob, err, sizeof err, &end);
    check(s == WGML_OK, "%s: %s", name, err);
    int bad = 0, errors = 0;
    for (size_t k = 0; k < n; k++) {
        s = parse_all(data, k, is_blob, err, sizeof err, NULL);
        if (s) errors++;
        /* a clean error always; a success only once the flatbuffer and the segments are whole */
        if (s ? !clean_error(s, err) : k < end) {
            if (bad++ < 3) printf("FAIL %s truncated at %zu: status %d '%s'\n", name, k, (int)s, err);
        }
    }
    check(bad == 0, "%s: %s truncations not clean", name, "some");
    int flip_ok = 0, flip_err = 0, flip_bad = 0;
    if (flips) {
        uint8_t *x = malloc(n);
        for (size_t k = 0; k < n; k++) {
            memcpy(x, data, n);
            x[k] ^= 0xff;
            s = parse_all(x, n, is_blob, err, sizeof err, NULL);
            if (!s) flip_ok++;
            else if (clean_error(s, err)) flip_err++;
            else if (flip_bad++ < 3) printf("FAIL %s byte %zu flipped: status %d '%s'\n", name, k, (int)s, err);
        }
        free(x);
        check(flip_bad == 0, "%s: %s byte flips not clean", name, "some");
    }
    printf("ok   %-22s %zu bytes: parses; %zu truncations: %d errors%s", name, n, n, errors,
           flips ? "" : "\n");
    if (flips) printf("; %zu byte flips: %d accepted, %d clean errors\n", n, flip_ok, flip_err);
    free(data);
}

/* ---- the load error's list of unsupported operators ------------------------------------------ */

/* Renames every flatbuffer string `from` in b[0..n) (its u32 length prefix, its bytes, its NUL)
 * to the no longer `to`, in place: the length prefix shrinks, the NUL moves. Returns the count. */
static int rename_strings(uint8_t *b, size_t n, const char *from, const char *to) {
    size_t lf = strlen(from), lt = strlen(to);
    int count = 0;
    for (size_t at = 4; lt <= lf && at + lf < n; at++) {
        uint32_t len = (uint32_t)b[at - 4] | (uint32_t)b[at - 3] << 8 | (uint32_t)b[at - 2] << 16 | (uint32_t)b[at - 1] << 24;
        if (len != lf || memcmp(b + at, from, lf) || b[at + lf]) continue;
        w32(b, at - 4, (uint32_t)lt);
        memcpy(b + at, to, lt + 1);
        count++;
    }
    return count;
}

/* good_mlp's chain is linear, relu, linear, _softmax, mul, sub. With both linears renamed
 * wgmltest.absent.xy and relu wgmltest.absent.x (names no registry has, so that the test holds
 * as operators are added; the second a substring of the first, met after it), the load must
 * fail naming both, each counted once. */
static void test_missing_load(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/good_mlp", WGML_PTE_CORPUS);
    size_t n;
    uint8_t *data = read_file(path, &n);
    check(data != NULL, "cannot read %s%s", path, "");
    if (!data) return;
    int linears = rename_strings(data, n, "aten.linear.default", "wgmltest.absent.xy");
    int relus = rename_strings(data, n, "aten.relu.default", "wgmltest.absent.x");
    check(linears == 2 && relus == 1, "good_mlp: renamed %s linear(s), %s relu(s); want 2 and 1",
          linears == 2 ? "2" : "not 2", relus == 1 ? "1" : "not 1");
    wgml_ctx *ctx = NULL;
    if (wgml_ctx_create(NULL, &ctx)) {
        check(0, "no context for the load: %s%s", wgml_create_error(), "");
        free(data);
        return;
    }
    wgml_program *p = wgml_program_load_bytes(ctx, data, n, NULL);
    const char *want = "program: 2 unsupported operators: wgmltest.absent.xy, wgmltest.absent.x";
    const char *got = p ? "(it loaded)" : wgml_last_error(ctx);
    check(!p && wgml_last_status(ctx) == WGML_ERR_UNSUPPORTED && !strcmp(got, want), "renamed good_mlp: got '%s', want '%s'",
          got, want);
    if (!p && !strcmp(got, want)) printf("ok   renamed good_mlp: %s\n", got);
    wgml_program_free(p);
    wgml_ctx_destroy(ctx);
    free(data);
}

/* prog_missing alone: duplicates and substrings, then a list too long for the message, which
 * must end on a whole name and say how many more there are. */
static void test_missing_list(void) {
    prog_missing m = {0};
    const char *names[] = {"aten.any.dims", "aten.any.dim", "aten.any.dims", "any", "aten.any.dim"};
    int oom = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) oom |= prog_missing_add(&m, names[i]);
    char text[200];
    prog_missing_text(&m, text, sizeof text);
    check(!oom && m.n == 3 && !strcmp(text, "aten.any.dims, aten.any.dim, any"), "prog_missing: '%s'%s", text,
          m.n == 3 ? "" : " (count not 3)");
    prog_missing_free(&m);
    char name[32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "aten.op_%03d.default", i); /* 19 characters each */
        oom |= prog_missing_add(&m, name);
    }
    prog_missing_text(&m, text, sizeof text);
    /* 200 bytes hold eight names with their separators (19 + 7 x 21 = 166) and the tail's room */
    const char *tail = strstr(text, ", ... (");
    int ok = !oom && m.n == 100 && tail && tail - text == 166 && !strcmp(tail, ", ... (92 more)") &&
             !strncmp(tail - 19, "aten.op_007.default", 19);
    check(ok, "prog_missing, 100 names in 200 bytes: '%s'%s", text, m.n == 100 ? "" : " (count not 100)");
    if (ok) printf("ok   prog_missing: 100 names in 200 bytes: ...%s\n", tail);
    prog_missing_free(&m);
}

int main(void) {
    test_flatbuf();
    test_missing_list();
    test_missing_load();
    DIR *d = opendir(WGML_PTE_CORPUS);
    if (!d) {
        printf("FAIL cannot open %s\n", WGML_PTE_CORPUS);
        return 1;
    }
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        /* byte flips on the two smallest kinds of input: a Vulkan program and its bare blob */
        bool flips = !strcmp(e->d_name, "good_linear_relu") || !strcmp(e->d_name, "blob_linear_relu") ||
                     !strcmp(e->d_name, "good_portable_external");
        test_file(WGML_PTE_CORPUS, e->d_name, flips);
        files++;
    }
    closedir(d);
    check(files >= 10, "corpus: only %s%s files", files ? "a few" : "no", "");
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
