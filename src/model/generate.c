/* Generation: prefill, then the decode graph step by step, streaming UTF-8-complete text. */
#define _POSIX_C_SOURCE 200809L
#include "model/decoder.h"
#include "wgml-model.h"

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
size_t decoder_utf8_complete(const unsigned char *s, size_t n) {
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
    size_t k = flush ? st->n : decoder_utf8_complete((const unsigned char *)st->buf, st->n);
    int stop = 0;
    if (k && on_text) stop = on_text(user, st->buf, k);
    if (k && st->n > k) memmove(st->buf, st->buf + k, st->n - k); /* (buf is NULL before any text) */
    st->n -= k;
    return stop;
}

/* The generation in progress: the tokens kept so far and the text stream. */
typedef struct gen_state {
    wgml_model *m;
    wgml_text_fn on_text;
    void *user;
    stream out;
    int32_t *ids;
    size_t n;
    int stopped;   /* a stop token came */
    wgml_status s; /* an error while taking a token */
} gen_state;

/* Takes one produced token: a stop token, a stop from on_text or an error ends generation
 * (returns 1); otherwise it is kept and its text streamed. */
static int take_token(void *u, int32_t id) {
    gen_state *gen = u;
    if (wgml_model_is_stop(gen->m, id)) {
        gen->stopped = 1;
        return 1;
    }
    gen->ids[gen->n++] = id;
    char *text = NULL;
    size_t len = 0;
    if (wgml_tokenizer_decode(wgml_model_tokenizer(gen->m), &id, 1, WGML_TOK_SKIP_SPECIAL, &text, &len) == WGML_OK) {
        int full = stream_put(&gen->out, text, len);
        free(text);
        if (full) {
            gen->s = wgml_set_error(decoder_ctx(gen->m), WGML_ERR_OOM, "generate: out of host memory");
            return 1;
        }
        if (stream_emit(&gen->out, 0, gen->on_text, gen->user)) return 1;
    }
    return 0;
}

wgml_status wgml_generate(wgml_model *m, const int32_t *prompt, size_t n_prompt, const wgml_gen_options *opt,
                          wgml_text_fn on_text, void *user, wgml_gen_stats *stats, int32_t **out_ids, size_t *n_out) {
    wgml_ctx *ctx = decoder_ctx(m);
    if (!m || !opt) return wgml_set_error(ctx, WGML_ERR_ARG, "generate: NULL argument");
    if (out_ids) *out_ids = NULL;
    if (n_out) *n_out = 0;
    wgml_gen_stats st = {.prompt_tokens = n_prompt};
    const wgml_llama_config *c = wgml_model_config(m);
    int greedy = !(opt->sampler.temperature > 0);
    int pipelined = greedy && opt->decode_batch >= 0;
    uint64_t rng = wgml_rng_seed(opt->seed);
    float *logits = greedy ? NULL : malloc(sizeof(float) * (size_t)c->n_vocab);
    int max = opt->max_tokens > 0 ? opt->max_tokens : 0;
    gen_state gen = {.m = m, .on_text = on_text, .user = user};
    gen.ids = malloc(sizeof(int32_t) * (size_t)(max + 1));
    if ((!greedy && !logits) || !gen.ids) {
        free(logits);
        free(gen.ids);
        return wgml_set_error(ctx, WGML_ERR_OOM, "generate: out of host memory");
    }
    wgml_model_reset(m);
    int32_t next = 0;
    double t0 = now_s();
    wgml_status s = wgml_model_prefill(m, prompt, n_prompt, logits, greedy ? &next : NULL);
    st.prefill_s = wgml_model_last_run_seconds(m);
    st.prefill_wall_s = now_s() - t0;
    t0 = now_s();
    uint64_t submits0 = wgml_submit_count(ctx);
    if (pipelined) {
        /* the prefill's token, then every later one from wgml_model_decode_greedy: as many
         * steps as the step-by-step loop below would run */
        if (!s && max > 0 && !take_token(&gen, next)) {
            int64_t room = c->n_ctx - wgml_model_pos(m);
            size_t steps = (size_t)(max - 1) < (size_t)room ? (size_t)(max - 1) : (size_t)room;
            wgml_decode_stats ds;
            s = wgml_model_decode_greedy(m, next, steps, opt->decode_batch, take_token, &gen, &ds);
            st.decode_steps = ds.steps;
            st.decode_s = ds.gpu_s;
        }
    } else {
        while (!s && gen.n < (size_t)max) {
            if (!greedy) next = wgml_sample(logits, c->n_vocab, &opt->sampler, &rng);
            if (take_token(&gen, next)) break;
            if (gen.n == (size_t)max || wgml_model_pos(m) >= c->n_ctx) break;
            s = wgml_model_decode(m, next, logits, greedy ? &next : NULL);
            st.decode_s += wgml_model_last_run_seconds(m);
            st.decode_steps++;
        }
    }
    if (!s) s = gen.s;
    st.decode_wall_s = now_s() - t0;
    if (st.decode_s < 0) st.decode_s = st.decode_wall_s; /* no timestamps */
    st.decode_submits = wgml_submit_count(ctx) - submits0;
    st.stopped = gen.stopped;
    if (!s) stream_emit(&gen.out, 1, on_text, user);
    st.generated_tokens = gen.n;
    free(gen.out.buf);
    free(logits);
    if (stats) *stats = st;
    if (out_ids && !s) *out_ids = gen.ids;
    else free(gen.ids);
    if (n_out && !s) *n_out = gen.n;
    return s;
}
