/* Generation: prefill, then the decode graph step by step, streaming UTF-8-complete text. */
#define _POSIX_C_SOURCE 200809L
#include "model/llama.h"

#include "gpu/gpu.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 sequence: a lead
 * byte in the last three bytes whose sequence is not complete is held back. */
size_t llama_utf8_complete(const unsigned char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: keep looking for the lead */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n; /* only continuation bytes (invalid text): pass it through */
}

typedef struct stream {
    char *buf;
    size_t n, cap;
} stream;

static int stream_put(stream *st, const char *s, size_t n) {
    if (st->n + n > st->cap) {
        size_t cap = (st->n + n) * 2 + 64;
        char *b = realloc(st->buf, cap);
        if (!b) return 1;
        st->buf = b, st->cap = cap;
    }
    memcpy(st->buf + st->n, s, n);
    st->n += n;
    return 0;
}

/* Passes the complete part of the held bytes to on_text (all of it when flush). */
static int stream_emit(stream *st, int flush, wgml_text_fn on_text, void *user) {
    size_t k = flush ? st->n : llama_utf8_complete((const unsigned char *)st->buf, st->n);
    int stop = 0;
    if (k && on_text) stop = on_text(user, st->buf, k);
    memmove(st->buf, st->buf + k, st->n - k);
    st->n -= k;
    return stop;
}

wgml_status wgml_generate(wgml_model *m, const int32_t *prompt, size_t n_prompt, const wgml_gen_options *opt,
                          wgml_text_fn on_text, void *user, wgml_gen_stats *stats, int32_t **out_ids, size_t *n_out) {
    wgml_ctx *ctx = llama_ctx(m);
    if (!m || !opt) return wgml_set_error(ctx, WGML_ERR_ARG, "generate: NULL argument");
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    wgml_gen_stats st = {0};
    st.prompt_tokens = n_prompt;
    const wgml_llama_config *c = wgml_model_config(m);
    const wgml_tokenizer *tok = wgml_model_tokenizer(m);
    int greedy = !(opt->sampler.temperature > 0);
    uint64_t rng = wgml_rng_seed(opt->seed);
    float *logits = greedy ? NULL : malloc(sizeof(float) * (size_t)c->n_vocab);
    int max = opt->max_tokens > 0 ? opt->max_tokens : 0;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(max + 1));
    stream out = {0};
    if ((!greedy && !logits) || !ids) {
        free(logits);
        free(ids);
        return wgml_set_error(ctx, WGML_ERR_OOM, "generate: out of host memory");
    }
    wgml_model_reset(m);
    int32_t next = 0;
    size_t n = 0;
    double t0 = now_s();
    wgml_status s = wgml_model_prefill(m, prompt, n_prompt, logits, greedy ? &next : NULL);
    st.prefill_s = wgml_model_last_run_seconds(m);
    st.prefill_wall_s = now_s() - t0;
    t0 = now_s();
    while (!s && n < (size_t)max) {
        if (!greedy) next = wgml_sample(logits, c->n_vocab, &opt->sampler, &rng);
        if (wgml_model_is_stop(m, next)) {
            st.stopped = 1;
            break;
        }
        ids[n++] = next;
        char *text = NULL;
        size_t len = 0;
        if (wgml_tokenizer_decode(tok, &next, 1, WGML_TOK_SKIP_SPECIAL, &text, &len) == WGML_OK) {
            int full = stream_put(&out, text, len);
            free(text);
            if (full) {
                s = wgml_set_error(ctx, WGML_ERR_OOM, "generate: out of host memory");
                break;
            }
            if (stream_emit(&out, 0, on_text, user)) break;
        }
        if (n == (size_t)max || wgml_model_pos(m) >= c->n_ctx) break;
        s = wgml_model_decode(m, next, logits, greedy ? &next : NULL);
        st.decode_s += wgml_model_last_run_seconds(m);
        st.decode_steps++;
    }
    st.decode_wall_s = now_s() - t0;
    if (!s) stream_emit(&out, 1, on_text, user);
    st.generated_tokens = n;
    free(out.buf);
    free(logits);
    if (stats) *stats = st;
    if (out_ids && !s) *out_ids = ids;
    else free(ids);
    if (n_out && !s) *n_out = n;
    return s;
}
