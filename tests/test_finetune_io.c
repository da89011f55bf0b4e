/* Fine-tuning outputs that need no trainer: the STE GGUF writer (src/io/gguf_write.c:
 * 4-bit codes recomputed from latents into a copy of a GGUF, everything else unchanged, read
 * back with wgml's GGUF reader), the learning-rate schedule, loss.csv and loss.svg
 * (src/train/report.c), target names and adapter files (src/train/adapter.c: the files
 * written from host arrays, read back, and every refusal of a bad directory).
 * With WGML_STE_IN=IN WGML_STE_OUT=OUT WGML_STE_NAMES=a,b it rewrites those tensors of IN
 * with latent = dequant(W) + ((i % 7) - 3) · 0.3 (f32) for tests/py/test_ste_gguf.py. */
#define _POSIX_C_SOURCE 200809L
#include "gguf_build.h"
#include "harness.h"
#include "io/gguf_write.h"
#include "io/safetensors.h"
#include "train/adapter.h"
#include "wgml-model.h"
#include "wgml-train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint16_t f16_bits(float x) { /* exact for the small dyadic values used here */
    if (x == 0) return 0;
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000, e = ((u >> 23) & 255) - 127 + 15, f = (u >> 13) & 1023;
    return (uint16_t)(sign | e << 10 | f);
}

/* A GGUF with a string key, an F32 tensor "norm" [64], a Q4_1 "w1" [n=3, k=64] and a Q4_0
 * "w0" [n=2, k=32], alignment 32. Returns the file bytes. */
static gb make_gguf(float d1[6], float m1[6], float d0[2]) {
    gb b = {0};
    gb_header(&b, 3, 3, 1);
    gb_str(&b, "general.name");
    gb_u32(&b, 8);
    gb_str(&b, "synthetic");
    const char *names[3] = {"norm", "w1", "w0"};
    uint64_t dims[3][2] = {{64, 1}, {64, 3}, {32, 2}};
    uint32_t nd[3] = {1, 2, 2}, types[3] = {0, 3, 2};
    uint64_t sizes[3] = {256, 3 * 2 * 20, 2 * 18}, off = 0;
    for (int i = 0; i < 3; i++) {
        gb_str(&b, names[i]);
        gb_u32(&b, nd[i]);
        for (uint32_t d = 0; d < nd[i]; d++) gb_u64(&b, dims[i][d]);
        gb_u32(&b, types[i]);
        gb_u64(&b, off);
        off += (sizes[i] + 31) / 32 * 32;
    }
    gb_pad(&b, 32);
    for (int i = 0; i < 64; i++) gb_f32(&b, (float)i * 0.5f);
    gb_pad(&b, 32);
    for (int blk = 0; blk < 6; blk++) {
        d1[blk] = 0.125f * (float)(blk + 1), m1[blk] = -1.0f + 0.25f * (float)blk;
        uint16_t dh = f16_bits(d1[blk]), mh = f16_bits(m1[blk]);
        gb_put(&b, &dh, 2);
        gb_put(&b, &mh, 2);
        for (int j = 0; j < 16; j++) gb_u8(&b, (uint8_t)(j * 17 + blk));
    }
    gb_pad(&b, 32);
    for (int blk = 0; blk < 2; blk++) {
        d0[blk] = blk == 0 ? 0.5f : 0.0f; /* a zero scale: every code becomes 8 */
        uint16_t dh = f16_bits(d0[blk]);
        gb_put(&b, &dh, 2);
        for (int j = 0; j < 16; j++) gb_u8(&b, (uint8_t)(255 - j * 3));
    }
    gb_pad(&b, 32);
    return b;
}

static void test_ste(void) {
    float d1[6], m1[6], d0[2];
    gb b = make_gguf(d1, m1, d0);
    char in[128], out[128], err[400];
    th_tmp_path(in, sizeof in, "wgml_ste_in_%d.gguf", (int)getpid());
    th_tmp_path(out, sizeof out, "wgml_ste_out_%d.gguf", (int)getpid());
    th_check(gb_write(&b, in), "ste: synthetic GGUF written");
    float lat1[3 * 64], lat0[2 * 32];
    for (int i = 0; i < 3 * 64; i++) lat1[i] = (float)th_uniform(-2.5, 3.5);
    for (int i = 0; i < 2 * 32; i++) lat0[i] = (float)th_uniform(-6, 6);
    lat1[5] = m1[0] + 2.5f * d1[0]; /* an exact tie: round half to even gives 2 */
    lat1[6] = m1[0] + 3.5f * d1[0]; /* gives 4 */
    lat0[1] = 100.0f;               /* clamped to 7 (+8 = 15) */
    const char *names[2] = {"w1", "w0"};
    const float *lat[2] = {lat1, lat0};
    wgml_status s = gguf_write_ste(in, out, 2, names, lat, err, sizeof err);
    th_check(s == WGML_OK, "ste: rewrite (%s)", s ? err : "");
    wgml_gguf *g = NULL;
    s = s ? s : wgml_gguf_open(out, &g, err, sizeof err);
    th_check(s == WGML_OK, "ste: the output opens with wgml's GGUF reader (%s)", s ? err : "");
    if (!s) {
        const char *str;
        size_t len;
        th_check(wgml_gguf_tensor_count(g) == 3 && wgml_gguf_get_string(g, "general.name", &str, &len) == WGML_OK && len == 9 &&
                     !memcmp(str, "synthetic", 9),
                 "ste: metadata and tensor table kept");
        const void *data;
        size_t nb;
        wgml_gguf_tensor_data(g, wgml_gguf_find_tensor(g, "w1"), &data, &nb);
        const uint8_t *q = data;
        int ok = nb == 120, dm_kept = 1;
        for (int row = 0; row < 3; row++)
            for (int blk = 0; blk < 2; blk++) {
                const uint8_t *bl = q + (row * 2 + blk) * 20;
                int bi = row * 2 + blk;
                uint16_t dh = f16_bits(d1[bi]), mh = f16_bits(m1[bi]);
                dm_kept &= !memcmp(bl, &dh, 2) && !memcmp(bl + 2, &mh, 2);
                for (int e = 0; e < 32; e++) {
                    float x = lat1[row * 64 + blk * 32 + e];
                    float r = rintf((x - m1[bi]) / d1[bi]);
                    int want = r < 0 ? 0 : r > 15 ? 15 : (int)r;
                    int got = e < 16 ? bl[4 + e] & 15 : bl[4 + e - 16] >> 4;
                    ok &= got == want;
                }
            }
        th_check(ok, "ste: Q4_1 codes = clamp(round_half_even((latent - m) / d), 0, 15) in the GGUF nibble order");
        th_check(dm_kept, "ste: Q4_1 d and m bytes unchanged");
        th_check((q[4 + 5] & 15) == 2 && (q[4 + 6] & 15) == 4, "ste: ties round half to even");
        /* compare with wgml's dequantisation: within half a step of the latent, unless clamped */
        float deq[3 * 64];
        wgml_gguf_dequantize(3, data, nb, 3, 64, deq);
        int close = 1;
        for (int i = 0; i < 3 * 64; i++) {
            int bi = i / 32;
            float lo = m1[bi], hi = m1[bi] + 15 * d1[bi], x = lat1[i] < lo ? lo : lat1[i] > hi ? hi : lat1[i];
            close &= fabsf(deq[i] - x) <= 0.5f * d1[bi] + 1e-6f;
        }
        th_check(close, "ste: dequantised weights lie within half a step of the (clamped) latents");
        wgml_gguf_tensor_data(g, wgml_gguf_find_tensor(g, "w0"), &data, &nb);
        q = data;
        ok = nb == 36;
        for (int e = 0; e < 32; e++) {
            float r = rintf(lat0[e] / d0[0]);
            int want = (r < -8 ? -8 : r > 7 ? 7 : (int)r) + 8;
            ok &= (e < 16 ? q[2 + e] & 15 : q[2 + e - 16] >> 4) == want;
            ok &= (e < 16 ? q[18 + 2 + e] & 15 : q[18 + 2 + e - 16] >> 4) == 8; /* d = 0 block */
        }
        th_check(ok && (q[2 + 1] & 15) == 15, "ste: Q4_0 codes, clamping and a zero scale");
        /* every byte outside the two code areas is unchanged */
        uint8_t *o;
        size_t ol;
        file_read_all(out, &o, &ol, err, sizeof err);
        size_t w1 = wgml_gguf_data_offset(g) + wgml_gguf_tensor_at(g, wgml_gguf_find_tensor(g, "w1"))->offset;
        size_t w0 = wgml_gguf_data_offset(g) + wgml_gguf_tensor_at(g, wgml_gguf_find_tensor(g, "w0"))->offset;
        int same = ol == b.n;
        for (size_t i = 0; same && i < ol; i++) {
            int in_codes = (i >= w1 && i < w1 + 120 && (i - w1) % 20 >= 4) || (i >= w0 && i < w0 + 36 && (i - w0) % 18 >= 2);
            if (!in_codes) same &= o[i] == b.p[i];
        }
        th_check(same, "ste: header, metadata, other tensors, scales and padding byte for byte unchanged");
        free(o);
        wgml_gguf_close(g);
    }
    const char *bad[1] = {"norm"};
    th_check(gguf_write_ste(in, out, 1, bad, lat, err, sizeof err) == WGML_ERR_FORMAT, "ste: a 1-D tensor is refused (%s)", err);
    const char *missing[1] = {"nope"};
    th_check(gguf_write_ste(in, out, 1, missing, lat, err, sizeof err) == WGML_ERR_FORMAT && strstr(err, "nope"),
             "ste: a missing tensor is named (%s)", err);
    uint8_t blk[20];
    th_check(gguf_requant_blocks(8, lat0, 1, 32, blk, 34, err, sizeof err) == WGML_ERR_UNSUPPORTED, "ste: Q8_0 is not a 4-bit type");
    th_check(gguf_requant_blocks(3, lat0, 1, 32, blk, 19, err, sizeof err) == WGML_ERR_SHAPE, "ste: a wrong byte count is refused");
    remove(in);
    remove(out);
    free(b.p);
}

/* WGML_STE_* mode: rewrite tensors of a file the Python test made. */
static int ste_from_env(void) {
    const char *in = getenv("WGML_STE_IN"), *out = getenv("WGML_STE_OUT"), *names_env = getenv("WGML_STE_NAMES");
    char err[400], names_buf[512];
    snprintf(names_buf, sizeof names_buf, "%s", names_env ? names_env : "");
    const char *names[8];
    float *lat[8];
    int n = 0;
    wgml_gguf *g = NULL;
    if (!in || !out || wgml_gguf_open(in, &g, err, sizeof err)) {
        th_check(0, "ste env: open %s", in ? in : "(WGML_STE_IN unset)");
        return 1;
    }
    char *save = NULL;
    for (char *tok = strtok_r(names_buf, ",", &save); tok && n < 8; tok = strtok_r(NULL, ",", &save)) {
        int64_t i = wgml_gguf_find_tensor(g, tok);
        const wgml_gguf_tensor *t = i >= 0 ? wgml_gguf_tensor_at(g, i) : NULL;
        const void *data;
        size_t nb;
        if (!t || wgml_gguf_tensor_data(g, i, &data, &nb)) {
            th_check(0, "ste env: tensor %s", tok);
            break;
        }
        lat[n] = malloc(sizeof(float) * (size_t)t->numel);
        wgml_gguf_dequantize((int)t->type, data, nb, t->dims[1], t->dims[0], lat[n]);
        for (int64_t e = 0; e < t->numel; e++) lat[n][e] = lat[n][e] + (float)((int)(e % 7) - 3) * 0.3f;
        names[n++] = tok;
    }
    wgml_gguf_close(g);
    wgml_status s = gguf_write_ste(in, out, n, names, (const float *const *)lat, err, sizeof err);
    th_check(s == WGML_OK, "ste env: rewrite %d tensors (%s)", n, s ? err : "");
    g = NULL;
    th_check(!s && wgml_gguf_open(out, &g, err, sizeof err) == WGML_OK, "ste env: the output opens with wgml's reader");
    wgml_gguf_close(g);
    for (int i = 0; i < n; i++) free(lat[i]);
    return 0;
}

static void test_reports(void) {
    /* schedule: warmup ramps to lr, cosine ends at min_lr */
    th_check(fabs(wgml_lr_schedule(0, 100, 10, 1e-3, 1e-4) - 1e-4) < 1e-12 && fabs(wgml_lr_schedule(9, 100, 10, 1e-3, 1e-4) - 1e-3) < 1e-12,
             "schedule: linear warmup from lr/warmup to lr");
    th_check(fabs(wgml_lr_schedule(10, 100, 10, 1e-3, 1e-4) - 1e-3) < 1e-12 && fabs(wgml_lr_schedule(99, 100, 10, 1e-3, 1e-4) - 1e-4) < 1e-12,
             "schedule: cosine from lr to min_lr at the last step");
    double mid = wgml_lr_schedule(10 + 89 / 2, 100, 10, 1e-3, 1e-4);
    th_check(fabs(mid - 5.5e-4) < 1e-5, "schedule: half-way is the mean (%g)", mid);
    int mono = 1;
    for (int s = 11; s < 100; s++) mono &= wgml_lr_schedule(s, 100, 10, 1e-3, 1e-4) <= wgml_lr_schedule(s - 1, 100, 10, 1e-3, 1e-4);
    th_check(mono && wgml_lr_schedule(0, 1, 0, 1e-3, 0) == 1e-3, "schedule: decays monotonically; a 1-step run uses lr");

    wgml_report_row rows[5] = {{0, NAN, 0, 0, 20.5}, {1, 3.2, 1e-3, 150.5, 0}, {2, 3.0, 9e-4, 160, 0}, {3, 2.9, 8e-4, 155, 0},
                               {4, 2.7, 1e-4, 158, 15.25}};
    char csv[128], svg[128], err[300];
    th_tmp_path(csv, sizeof csv, "wgml_loss_%d.csv", (int)getpid());
    th_tmp_path(svg, sizeof svg, "wgml_loss_%d.svg", (int)getpid());
    th_check(wgml_report_write_csv(csv, rows, 5, err, sizeof err) == WGML_OK, "csv: written");
    wgml_report_row *back;
    size_t n;
    th_check(wgml_report_read_csv(csv, 3, &back, &n, err, sizeof err) == WGML_OK && n == 4 && back[0].step == 0 && isnan(back[0].loss) &&
                 back[0].eval_ppl == 20.5 && back[3].step == 3 && fabs(back[3].loss - 2.9) < 1e-9 && back[3].eval_ppl == 0 &&
                 fabs(back[1].lr - 1e-3) < 1e-12,
             "csv: read back up to a step (resume)");
    free(back);
    uint8_t *text;
    size_t len;
    file_read_all(csv, &text, &len, err, sizeof err);
    th_check(text && !strncmp((char *)text, "step,loss,lr,tokens_per_s,eval_ppl\n0,,,,20.5000\n1,3.2,0.001,150.5,\n", 65),
             "csv: header and empty fields (%.80s)", text ? (char *)text : "");
    free(text);
    th_check(wgml_report_write_svg(svg, "run <1> & co", rows, 5, err, sizeof err) == WGML_OK, "svg: written");
    file_read_all(svg, &text, &len, err, sizeof err);
    int circles = 0;
    for (char *p = (char *)text; p && (p = strstr(p, "<circle cx")); p++) circles++;
    th_check(text && strstr((char *)text, "<svg xmlns=\"http://www.w3.org/2000/svg\"") && strstr((char *)text, "<polyline") &&
                 strstr((char *)text, "run &lt;1&gt; &amp; co") && strstr((char *)text, ">step</text>") && circles == 3 &&
                 strstr((char *)text, "</svg>"),
             "svg: axes, labels, escaped title, a loss line and two eval points (+1 legend)");
    free(text);
    th_check(wgml_report_write_svg(svg, "empty", NULL, 0, err, sizeof err) == WGML_OK, "svg: an empty history still draws axes");
    remove(csv);
    remove(svg);
}

static void test_targets(void) {
    unsigned m = 0;
    th_check(wgml_targets_parse("q,v,down", &m) == WGML_OK && m == (WGML_TARGET_Q | WGML_TARGET_V | WGML_TARGET_DOWN),
             "targets: q,v,down parse to their bits (%u)", m);
    th_check(wgml_targets_parse("all", &m) == WGML_OK && m == WGML_TARGET_ALL, "targets: all");
    m = 5;
    th_check(wgml_targets_parse("q,x", &m) == WGML_ERR_ARG && wgml_targets_parse("", &m) == WGML_ERR_ARG &&
                 wgml_targets_parse("q,", &m) == WGML_OK && m == WGML_TARGET_Q && wgml_targets_parse("qq", &m) == WGML_ERR_ARG,
             "targets: an unknown name or an empty list is refused");
    char buf[64];
    wgml_targets_format(WGML_TARGET_ALL, buf, sizeof buf);
    th_check(!strcmp(buf, "q,k,v,o,gate,up,down"), "targets: all formatted in bit order (%s)", buf);
    wgml_targets_format(WGML_TARGET_K | WGML_TARGET_UP, buf, 5);
    th_check(!strcmp(buf, "k,up"), "targets: formatted into a small buffer (%s)", buf);
    wgml_targets_format(WGML_TARGET_GATE | WGML_TARGET_DOWN, buf, 7);
    th_check(!strcmp(buf, "gate,d"), "targets: truncated to fit (%s)", buf);
    th_check(wgml_target_name(3) && !strcmp(wgml_target_name(3), "o") && !wgml_target_name(7) && !wgml_target_name(-1),
             "targets: names by bit, NULL out of range");
}

static void write_text(const char *path, const char *text) {
    FILE *fp = fopen(path, "wb");
    fputs(text, fp);
    fclose(fp);
}

static void test_adapter(void) {
    char dir[128], model[160], other[160], err[700];
    th_tmp_path(dir, sizeof dir, "wgml_adapter_%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(model, sizeof model, "%s/base.gguf", dir);
    snprintf(other, sizeof other, "%s/other.gguf", dir);
    write_text(model, "a base model");
    write_text(other, "another base model");
    wgml_adapter_info info = {.base_model = model, .data = "data/train \"x\".txt", .steps = 12};
    char sha[65];
    th_check(wgml_file_sha256(model, sha, &info.base_size, err, sizeof err) == WGML_OK && info.base_size == 12 && strlen(sha) == 64,
             "sha256 of the base model (%s)", sha);
    info.base_sha256 = sha;
    char sha2[65];
    uint64_t size2;
    th_check(wgml_file_sha256("/nonexistent/m.gguf", sha2, &size2, err, sizeof err) == WGML_ERR_IO && strstr(err, "/nonexistent/m.gguf"),
             "sha256: a missing file is named (%s)", err);

    wgml_train_config cfg = wgml_train_defaults();
    cfg.lora_rank = 2;
    cfg.lora_alpha = 3.5f;
    cfg.targets = WGML_TARGET_Q | WGML_TARGET_DOWN;
    float a[2 * 3], b[4 * 2];
    for (int i = 0; i < 6; i++) a[i] = 0.25f * (float)i - 1;
    for (int i = 0; i < 8; i++) b[i] = -0.125f * (float)i;
    st_write_tensor t[2] = {{.name = "blk.0.attn_q.lora_a", .dtype = "F32", .rank = 2, .shape = {2, 3}, .data = a},
                            {.name = "blk.0.attn_q.lora_b", .dtype = "F32", .rank = 2, .shape = {4, 2}, .data = b}};
    wgml_status s = adapter_write(dir, &cfg, &info, 2, t, err, sizeof err);
    th_check(s == WGML_OK, "adapter: written (%s)", s ? err : "");
    char cpath[200];
    snprintf(cpath, sizeof cpath, "%s/adapter_config.json", dir);
    uint8_t *text = NULL;
    size_t len;
    file_read_all(cpath, &text, &len, err, sizeof err);
    char want[1200];
    snprintf(want, sizeof want,
             "{\n  \"format\": \"wgml-lora-1\",\n  \"mode\": \"lora\",\n  \"rank\": 2,\n  \"alpha\": 3.5,\n"
             "  \"targets\": [\"q\", \"down\"],\n  \"base_model\": {\"path\": \"%s\", \"size\": 12, \"sha256\": \"%s\"},\n"
             "  \"data\": \"data/train \\\"x\\\".txt\",\n  \"seq_len\": 64,\n  \"batch\": 1,\n  \"steps\": 12,\n  \"tensors\": 2\n}\n",
             model, sha);
    th_check(text && !strcmp((char *)text, want), "adapter: adapter_config.json as the CLI has always written it:\n%s", text ? (char *)text : "");
    free(text);

    wgml_adapter *ad = NULL;
    s = wgml_adapter_load(dir, model, &ad, err, sizeof err);
    th_check(s == WGML_OK && ad, "adapter: loads against its base model (%s)", s ? err : "");
    if (ad) {
        const wgml_train_config *c = wgml_adapter_config(ad);
        th_check(c->mode == WGML_TRAIN_LORA && c->lora_rank == 2 && c->lora_alpha == 3.5f && c->targets == cfg.targets &&
                     wgml_adapter_tensor_count(ad) == 2,
                 "adapter: rank, alpha, targets and the tensor count read back");
    }
    wgml_adapter_free(ad);
    ad = NULL;
    th_check(wgml_adapter_load(dir, NULL, &ad, err, sizeof err) == WGML_OK && ad, "adapter: loads without a base model to check");
    wgml_adapter_free(ad);
    s = wgml_adapter_load(dir, other, &ad, err, sizeof err);
    th_check(s == WGML_ERR_FORMAT && !ad && strstr(err, "trained on another base model") && strstr(err, dir),
             "adapter: another base model is refused (%s)", err);
    s = wgml_adapter_load(dir, "/nonexistent/m.gguf", &ad, err, sizeof err);
    th_check(s == WGML_ERR_IO && !ad && strstr(err, "/nonexistent/m.gguf"), "adapter: an unreadable base model is named (%s)", err);

    /* broken directories */
    char none[200];
    snprintf(none, sizeof none, "%s/none", dir);
    s = wgml_adapter_load(none, NULL, &ad, err, sizeof err);
    th_check(s == WGML_ERR_IO && !ad && strstr(err, "adapter_config.json"), "adapter: a missing directory names the file (%s)", err);
    write_text(cpath, "{\"format\": \"wgml-lora-1\", \"rank\": 2,}");
    s = wgml_adapter_load(dir, NULL, &ad, err, sizeof err);
    th_check(s == WGML_ERR_FORMAT && strstr(err, cpath) && strstr(err, "column"), "adapter: malformed JSON names the file and column (%s)", err);
    write_text(cpath, "{\"format\": \"wgml-lora-1\", \"mode\": \"ste\", \"rank\": 2, \"alpha\": 4, \"targets\": [\"q\"]}");
    s = wgml_adapter_load(dir, NULL, &ad, err, sizeof err);
    th_check(s == WGML_ERR_FORMAT && strstr(err, "is not a wgml-lora-1 adapter config"), "adapter: an STE config is not an adapter (%s)", err);
    write_text(cpath, "{\"format\": \"wgml-lora-1\", \"rank\": 2, \"alpha\": 4, \"targets\": [\"q\", \"x\"]}");
    s = wgml_adapter_load(dir, NULL, &ad, err, sizeof err);
    th_check(s == WGML_ERR_FORMAT && strstr(err, "unknown target"), "adapter: an unknown target is refused (%s)", err);
    write_text(cpath, "{\"format\": \"wgml-lora-1\", \"rank\": 2, \"alpha\": 4, \"targets\": [\"q\"]}");
    int32_t ids[3] = {1, 2, 3};
    st_write_tensor bad = {.name = "blk.0.attn_q.lora_a", .dtype = "I32", .rank = 1, .shape = {3}, .data = ids};
    s = adapter_write(dir, &cfg, &info, 1, &bad, err, sizeof err);
    s = s ? s : wgml_adapter_load(dir, NULL, &ad, err, sizeof err);
    th_check(s == WGML_ERR_FORMAT && !ad && strstr(err, "is I32, not F32"), "adapter: a tensor that is not F32 is refused (%s)", err);
    th_check(adapter_write(dir, &cfg, &(wgml_adapter_info){0}, 0, NULL, err, sizeof err) == WGML_ERR_ARG,
             "adapter: missing base model fields are a bad argument");
    th_check(th_remove_tree(dir) == 0, "adapter: the test's folder %s removed", dir);
}

int main(int argc, char **argv) {
    th_init_args("test_finetune_io", argc, argv);
    clock_t c0 = clock();
    if (getenv("WGML_STE_IN")) {
        ste_from_env();
    } else {
        test_ste();
        test_reports();
        test_targets();
        test_adapter();
    }
    printf("test_finetune_io: %.2f s CPU\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    return th_done();
}
