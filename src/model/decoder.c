/* The decoder's step graphs and life. The model is a weight graph that is never run (it owns
 * the persistent tensors: weights and the KV cache; decoder_weights.c) and the graphs that run and
 * share them (wgml_tensor_share): one decode graph, prefill graphs per length bucket, and the
 * trainer's graphs (src/train). Each inference graph is one forward from decoder_fused.c (or the
 * plain decoder_block.c under $WGML_LLAMA_UNFUSED=1), its logits and argmax, and at one position
 * the greedy feedback that lets decoding run several steps per submit. */
#define _POSIX_C_SOURCE 200809L
#include "model/decoder_internal.h"

#include "gpu/gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the prefill graphs' lengths: 8, then multiples of 16 up to 512 (MAX_PREFILL_GRAPHS: in
 * decoder_internal.h, the model holds them) */
#define MIN_BUCKET 8
#define MAX_BUCKET 512

/* One runnable graph for S positions: inputs, the forward with the KV cache, logits and
 * argmax kept, and (S = 1) the greedy feedback. */
static wgml_status build_step(wgml_model *m, step_graph *sg, int64_t S) {
    memset(sg, 0, sizeof *sg);
    sg->S = S;
    wgml_graph *g = sg->g = wgml_graph_new(m->ctx);
    if (!g) return wgml_last_status(m->ctx);
    graph_set_x8(g, m->x8);
    int64_t scalar = 1; /* the shape [1] */
    sg->ids = wgml_tensor_new(g, WGML_I32, 1, &S);
    sg->positions = wgml_tensor_new(g, WGML_I32, 1, &S);
    sg->pos = S == 1 ? sg->positions : wgml_tensor_new(g, WGML_I32, 1, &scalar);
    sg->len = wgml_tensor_new(g, WGML_I32, 1, &scalar);
    if (S > 1) sg->row = wgml_tensor_new(g, WGML_I32, 1, &scalar);
    fwd_opts o = {.B = 1, .S = S, .ids = sg->ids, .positions = sg->positions, .pos = sg->pos, .len = sg->len,
                  .row = sg->row, .lora = m->lora, .lora_shared = true};
    /* the fused builder, or the plain one for comparisons ($WGML_LLAMA_UNFUSED=1 at load) */
    wgml_tensor *x = m->unfused ? decoder_forward_plain(m, g, &o) : decoder_forward_fused(m, g, &o); /* [1, D] */
    if (!x) return decoder_fail_status(m->ctx);
    sg->logits = decoder_head_logits(m, g, x); /* [1, V] */
    sg->argmax = wgml_argmax(g, sg->logits, 1, 0);
    if (!sg->argmax || wgml_graph_keep(g, sg->logits) || wgml_graph_keep(g, sg->argmax)) return wgml_last_status(m->ctx);
    if (S == 1) {
        /* feedback for greedy decoding on the GPU (wgml_model_decode_greedy): the argmax becomes
         * the next token, goes to the history at this position, position and length advance.
         * Harmless for host-driven steps, which write ids, position and length before each run.
         * The kernel stays here: it is generation's own step over this graph's inputs, not an op. */
        sg->history = wgml_tensor_new(g, WGML_I32, 1, &m->cfg.n_ctx);
        wgml_tensor *ro[1] = {sg->argmax}, *rw[4] = {sg->ids, sg->positions, sg->len, sg->history};
        if (!sg->history || graph_dispatch(g, "llama_feedback", "llama_feedback", NULL, ro, 1, rw, 4, NULL, 0, 1))
            return wgml_last_status(m->ctx);
    }
    if (wgml_graph_compile(g)) return wgml_last_status(m->ctx);
    return WGML_OK;
}

static void free_step(step_graph *sg) {
    wgml_graph_free(sg->g);
    memset(sg, 0, sizeof *sg);
}

/* Writes the inputs for ids[0..n) at pos0 (padded to S with id 0), runs, reads outputs. */
static wgml_status run_step(wgml_model *m, step_graph *sg, const int32_t *ids, size_t n, float *logits, int32_t *next) {
    int64_t S = sg->S;
    int32_t *buf = calloc((size_t)S * 2, sizeof(int32_t));
    if (!buf) return wgml_set_error(m->ctx, WGML_ERR_OOM, "model: out of host memory");
    for (int64_t i = 0; i < S; i++) {
        buf[i] = i < (int64_t)n ? ids[i] : 0;
        buf[S + i] = (int32_t)(m->pos + i);
    }
    int32_t p0 = (int32_t)m->pos, len = (int32_t)(m->pos + S), row = (int32_t)n - 1;
    wgml_status s = wgml_tensor_write(sg->ids, buf, sizeof(int32_t) * (size_t)S);
    if (!s) s = wgml_tensor_write(sg->positions, buf + S, sizeof(int32_t) * (size_t)S);
    free(buf);
    if (!s && S > 1) s = wgml_tensor_write(sg->pos, &p0, sizeof p0);
    if (!s) s = wgml_tensor_write(sg->len, &len, sizeof len);
    if (!s && sg->row) s = wgml_tensor_write(sg->row, &row, sizeof row);
    if (!s) s = wgml_graph_run_timed(sg->g, &m->last_s);
    if (!s && next) s = wgml_tensor_read(sg->argmax, next, sizeof *next);
    if (!s && logits) s = wgml_tensor_read(sg->logits, logits, sizeof(float) * (size_t)m->cfg.n_vocab);
    if (!s) m->pos += (int64_t)n;
    return s;
}

static wgml_status check_ids(wgml_model *m, const char *op, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.n_vocab)
            return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: token %zu = %d is outside the vocabulary [0, %lld)", op, i,
                                  (int)ids[i], (long long)m->cfg.n_vocab);
    return WGML_OK;
}

/* The graph length for a chunk of n > 1 tokens at the current position: 8, then multiples of 16
 * (at most 15 padded positions), or n itself where padding would run past the cache. */
static int64_t prefill_bucket(const wgml_model *m, size_t n) {
    int64_t S = n <= MIN_BUCKET ? MIN_BUCKET : ((int64_t)n + 15) / 16 * 16;
    return m->pos + S > m->cfg.n_ctx ? (int64_t)n : S;
}

static step_graph *find_prefill(wgml_model *m, int64_t S) {
    for (int i = 0; i < m->n_prefill; i++)
        if (m->prefill[i].S == S) return &m->prefill[i];
    return NULL;
}

/* The graph for S positions (1: the decode graph; more: the bucket's prefill graph, the last one
 * dropped when the model holds MAX_PREFILL_GRAPHS), built at its first use: a model loaded to be
 * evaluated or fine-tuned, or given adapters before it generates, records none it never runs (its
 * buffers, and pipelines where no other graph has them). NULL with the error set when it cannot
 * be built. */
static step_graph *step_for(wgml_model *m, int64_t S) {
    step_graph *sg = S == 1 ? &m->decode : find_prefill(m, S);
    if (sg && sg->g) return sg;
    if (!sg) {
        if (m->n_prefill == MAX_PREFILL_GRAPHS) free_step(&m->prefill[--m->n_prefill]);
        sg = &m->prefill[m->n_prefill];
    }
    if (build_step(m, sg, S)) {
        free_step(sg);
        return NULL;
    }
    if (S > 1) m->n_prefill++;
    return sg;
}

wgml_status wgml_model_prefill(wgml_model *m, const int32_t *ids, size_t n, float *logits, int32_t *next) {
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "model_prefill: model is NULL");
    if (!ids || n == 0) return wgml_set_error(m->ctx, WGML_ERR_ARG, "model_prefill: no tokens");
    if (check_ids(m, "model_prefill", ids, n)) return wgml_last_status(m->ctx);
    if (m->pos + (int64_t)n > m->cfg.n_ctx)
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT, "model_prefill: %lld + %zu tokens exceed the context of %lld",
                              (long long)m->pos, n, (long long)m->cfg.n_ctx);
    double gpu_s = 0; /* the chunks' runs together (-1: one was not timed) */
    while (n > 0) {
        size_t chunk = n > MAX_BUCKET ? MAX_BUCKET : n;
        /* one token: the decode graph; more: the bucket's prefill graph */
        step_graph *sg = step_for(m, chunk == 1 ? 1 : prefill_bucket(m, chunk));
        if (!sg) return wgml_last_status(m->ctx);
        int last = chunk == n;
        wgml_status s = run_step(m, sg, ids, chunk, last ? logits : NULL, last ? next : NULL);
        if (s) return s;
        gpu_s = gpu_s < 0 || m->last_s < 0 ? -1 : gpu_s + m->last_s;
        ids += chunk, n -= chunk;
    }
    m->last_s = gpu_s;
    return WGML_OK;
}

wgml_status wgml_model_decode(wgml_model *m, int32_t id, float *logits, int32_t *next) {
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "model_decode: model is NULL");
    if (check_ids(m, "model_decode", &id, 1)) return wgml_last_status(m->ctx);
    if (m->pos + 1 > m->cfg.n_ctx)
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT, "model_decode: the context of %lld positions is full",
                              (long long)m->cfg.n_ctx);
    step_graph *sg = step_for(m, 1);
    return sg ? run_step(m, sg, &id, 1, logits, next) : wgml_last_status(m->ctx);
}

/* Steps in flight: a group is read back while the next one runs. */
#define GREEDY_DEPTH 2
#define GREEDY_BATCH 16

wgml_status wgml_model_decode_greedy(wgml_model *m, int32_t id, size_t n_steps, int batch, wgml_token_fn on_token,
                                     void *user, wgml_decode_stats *stats) {
    const char *op = "model_decode_greedy";
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: model is NULL", op);
    if (stats) memset(stats, 0, sizeof *stats);
    if (check_ids(m, op, &id, 1)) return wgml_last_status(m->ctx);
    if (m->pos + (int64_t)n_steps > m->cfg.n_ctx)
        return wgml_set_error(m->ctx, WGML_ERR_LIMIT, "%s: %lld + %zu steps exceed the context of %lld", op,
                              (long long)m->pos, n_steps, (long long)m->cfg.n_ctx);
    if (n_steps == 0) return WGML_OK;
    step_graph *sg = step_for(m, 1);
    if (!sg) return wgml_last_status(m->ctx);
    size_t per = batch > 0 ? (size_t)batch : GREEDY_BATCH;
    int32_t p0 = (int32_t)m->pos, len = p0 + 1;
    uint64_t submits0 = wgml_submit_count(m->ctx);
    wgml_status s = wgml_tensor_write(sg->ids, &id, sizeof id);
    if (!s) s = wgml_tensor_write(sg->positions, &p0, sizeof p0);
    if (!s) s = wgml_tensor_write(sg->len, &len, sizeof len);
    gpu_async *flight[GREEDY_DEPTH] = {0};
    size_t count[GREEDY_DEPTH] = {0};
    int32_t *got = malloc(sizeof(int32_t) * per);
    if (!got && !s) s = wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    size_t submitted = 0, used = 0;
    int head = 0, n_flight = 0, stop = 0;
    double gpu_s = 0;
    uint64_t submit_ns = 0;
    /* keep GREEDY_DEPTH groups queued; read the oldest, hand its tokens over in order */
    while (!s && !stop && used < n_steps) {
        while (!s && n_flight < GREEDY_DEPTH && submitted < n_steps) {
            size_t k = n_steps - submitted < per ? n_steps - submitted : per;
            int slot = (head + n_flight) % GREEDY_DEPTH;
            uint64_t t0 = gpu_now_ns();
            flight[slot] = graph_run_async(sg->g, k, sg->history, sizeof(int32_t) * (uint64_t)(p0 + (int64_t)submitted),
                                           sizeof(int32_t) * k, true);
            submit_ns += gpu_now_ns() - t0;
            if (!flight[slot]) {
                s = wgml_last_status(m->ctx);
                if (!s) s = wgml_set_error(m->ctx, WGML_ERR_GPU, "%s: the submit failed", op);
            } else {
                count[slot] = k, submitted += k, n_flight++;
            }
        }
        if (s) break;
        double t = 0;
        gpu_async *a = flight[head];
        flight[head] = NULL;
        size_t k = count[head];
        head = (head + 1) % GREEDY_DEPTH, n_flight--;
        if ((s = gpu_async_wait(m->ctx, a, got, &t))) break;
        gpu_s = t < 0 || gpu_s < 0 ? -1 : gpu_s + t;
        for (size_t i = 0; i < k && !stop; i++) {
            used++, m->pos++; /* the step that made this token has run: its position is in the cache */
            if (on_token && on_token(user, got[i])) stop = 1;
        }
    }
    /* groups submitted past a stop: let them finish (they only write cache rows past pos and
     * the history), then drop their tokens */
    for (; n_flight > 0; head = (head + 1) % GREEDY_DEPTH, n_flight--) {
        double t = 0;
        if (s) gpu_async_free(flight[head]);
        else if (!(s = gpu_async_wait(m->ctx, flight[head], NULL, &t))) gpu_s = t < 0 || gpu_s < 0 ? -1 : gpu_s + t;
        flight[head] = NULL;
    }
    free(got);
    if (stats) {
        stats->steps = used;
        stats->submitted = submitted;
        stats->gpu_s = gpu_s;
        stats->submits = wgml_submit_count(m->ctx) - submits0;
        stats->submit_s = (double)submit_ns * 1e-9;
        stats->dispatches_per_step = wgml_graph_dispatch_count(sg->g);
    }
    m->last_s = gpu_s;
    return s;
}

/* ------------------------------------------------------------------ lifetime */

/* The stop tokens, from the file's metadata (so a model whose tokenizer wgml cannot build still
 * stops): tokenizer.ggml.eos_token_id and the end-of-turn tokens of the chat formats (ChatML,
 * Llama 3, Gemma) found by their text in tokenizer.ggml.tokens. */
static void find_stops(wgml_model *m) {
    wgml_gguf_value v, e;
    int64_t eos;
    if (wgml_gguf_find(m->file, "tokenizer.ggml.eos_token_id", &v) && !wgml_gguf_value_i64(m->file, v, &eos) &&
        eos >= 0 && eos < m->cfg.n_vocab)
        m->stop_ids[m->n_stop++] = (int32_t)eos;
    static const char *names[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"};
    if (wgml_gguf_get_array(m->file, "tokenizer.ggml.tokens", &v) || v.elem_type != WGML_GGUF_STRING) return;
    for (uint64_t i = 0; i < v.count && i < (uint64_t)m->cfg.n_vocab && m->n_stop < 4; i++) {
        const char *t;
        size_t n;
        if (wgml_gguf_array_elem(m->file, v, i, &e) || wgml_gguf_value_string(m->file, e, &t, &n)) return;
        if (n < 9 || t[0] != '<') continue; /* every name is 9 or more bytes and starts with '<' */
        for (size_t k = 0; k < sizeof names / sizeof *names; k++)
            if (strlen(names[k]) == n && !memcmp(names[k], t, n) && !wgml_model_is_stop(m, (int32_t)i))
                m->stop_ids[m->n_stop++] = (int32_t)i;
    }
}

wgml_model *wgml_model_load(wgml_ctx *ctx, const char *path, const wgml_model_options *options) {
    if (!ctx) return NULL;
    if (!path) {
        wgml_set_error(ctx, WGML_ERR_ARG, "model_load: path is NULL");
        return NULL;
    }
    wgml_model *m = calloc(1, sizeof *m);
    if (!m) {
        wgml_set_error(ctx, WGML_ERR_OOM, "model_load: out of host memory");
        return NULL;
    }
    m->ctx = ctx;
    /* The inference graphs' fusions save dispatches, which a GPU pays for and a CPU adapter
     * hardly does; there each fused variant is one more pipeline for the driver to compile
     * (lavapipe: SmolLM2's first 16-token generation 58 s cold with them, 33 s without; warm
     * 3.6 and 3.4 s: bench/NOTES.md, 2026-12-04). So a CPU adapter runs the plain ops;
     * $WGML_LLAMA_UNFUSED=1 or 0 chooses either way. */
    const char *e = getenv("WGML_LLAMA_UNFUSED");
    const gpu_caps *caps = gpu_get_caps(ctx);
    m->unfused = e && *e ? strcmp(e, "0") != 0 : caps && caps->is_cpu;
    /* Prefill and decode through the integer dot product (activations quantised per 32-k block
     * to int8, as llama.cpp's MMQ and MMVQ do) on GPUs; a CPU adapter stays f32. $WGML_QW_INT8=1
     * or 0 chooses either way. */
    const char *x8 = getenv("WGML_QW_INT8");
    m->x8 = x8 && *x8 ? strcmp(x8, "0") != 0 : caps && !caps->is_cpu;
    char err[512];
    wgml_status s = wgml_gguf_open(path, &m->file, err, sizeof err);
    if (s) {
        wgml_set_error(ctx, s, "model_load: %s", err);
        free(m);
        return NULL;
    }
    s = decoder_load_config(m, path, options);
    /* a tokenizer kind wgml does not build (WGML_ERR_UNSUPPORTED) leaves the model without one
     * (ids in, ids out; wgml_model_tokenizer gives NULL); a broken one fails the load */
    wgml_status ts = s ? WGML_OK : wgml_tokenizer_from_gguf(m->file, &m->tok, err, sizeof err);
    if (ts == WGML_ERR_UNSUPPORTED) memcpy(m->tok_err, err, sizeof m->tok_err);
    else if (ts) s = wgml_set_error(ctx, WGML_ERR_FORMAT, "model_load: %s: tokenizer: %s", path, err);
    if (!s && wgml_tokenizer_vocab_size(m->tok) > m->cfg.n_vocab)
        s = wgml_set_error(ctx, WGML_ERR_FORMAT, "model_load: %s: the tokenizer has %d tokens, the model %lld", path,
                           (int)wgml_tokenizer_vocab_size(m->tok), (long long)m->cfg.n_vocab);
    if (!s && !(m->wg = wgml_graph_new(ctx))) s = wgml_last_status(ctx);
    if (!s) s = decoder_load_weights(m, path);
    if (s) {
        wgml_model_free(m);
        return NULL;
    }
    find_stops(m);
    return m;
}

static void free_lora(wgml_model *m) {
    if (!m->lora) return;
    for (int64_t i = 0; i < m->cfg.n_layer * DECODER_N_TARGETS; i++) wgml_lora_free(m->lora[i]);
    free(m->lora);
    m->lora = NULL;
}

/* Parses "blk.L.TARGET.lora_a|lora_b": layer, target index, 0 (a) or 1 (b); -1 when not one. */
static int parse_lora_name(const wgml_model *m, const char *name, int64_t *l, int *t) {
    long long li;
    char tn[32], ab[16];
    if (!name || sscanf(name, "blk.%lld.%31[a-z_].%15s", &li, tn, ab) != 3 || li < 0 || li >= m->cfg.n_layer) return -1;
    *l = li;
    for (*t = 0; *t < DECODER_N_TARGETS; (*t)++)
        if (!strcmp(tn, decoder_target_names[*t])) break;
    if (*t == DECODER_N_TARGETS) return -1;
    return !strcmp(ab, "lora_a") ? 0 : !strcmp(ab, "lora_b") ? 1 : -1;
}

/* The adapters' tensors are new persistent tensors of the weight graph (a later call makes new
 * ones; the old ones stay allocated until the model is freed). The inference graphs are dropped
 * (rebuilt at their next use) and the cached sequence is forgotten. */
wgml_status wgml_model_set_lora(wgml_model *m, int rank, float alpha, int n, const char *const *names,
                                const float *const *data) {
    const char *op = "model_set_lora";
    if (!m) return wgml_set_error(NULL, WGML_ERR_ARG, "%s: model is NULL", op);
    if (n < 0 || (n > 0 && (!names || !data)))
        return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: %d tensors need names and data", op, n);
    if (n > 0 && (rank < 1 || !(alpha > 0)))
        return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: rank %d and alpha %g must be positive", op, rank,
                              (double)alpha);
    int64_t slots = m->cfg.n_layer * DECODER_N_TARGETS;
    /* check every name first, so a bad list leaves the model as it was */
    int *have = calloc((size_t)slots, sizeof *have);
    if (!have) return wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    for (int i = 0; i < n; i++) {
        int64_t l;
        int t, ab = parse_lora_name(m, names[i], &l, &t);
        if (ab < 0 || !data[i]) {
            free(have);
            return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: tensor %d '%s' is not blk.<layer < %lld>.<target>.lora_a|lora_b "
                                  "with data", op, i, names[i] ? names[i] : "(null)", (long long)m->cfg.n_layer);
        }
        have[l * DECODER_N_TARGETS + t] |= 1 << ab;
    }
    for (int64_t i = 0; i < slots; i++)
        if (have[i] && have[i] != 3) {
            char which = have[i] == 1 ? 'a' : 'b';
            free(have);
            return wgml_set_error(m->ctx, WGML_ERR_ARG, "%s: blk.%lld.%s has only its lora_%c", op,
                                  (long long)(i / DECODER_N_TARGETS), decoder_target_names[i % DECODER_N_TARGETS], which);
        }
    free_step(&m->decode);
    for (int i = 0; i < m->n_prefill; i++) free_step(&m->prefill[i]);
    m->n_prefill = 0;
    m->pos = 0;
    free_lora(m);
    wgml_status s = WGML_OK;
    if (n > 0 && !(m->lora = calloc((size_t)slots, sizeof *m->lora)))
        s = wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
    for (int64_t i = 0; i < slots && !s && n > 0; i++) {
        if (!have[i]) continue;
        int64_t N, K, r = rank;
        decoder_target_dims(m, (int)(i % DECODER_N_TARGETS), &N, &K);
        wgml_lora *lo = calloc(1, sizeof *lo);
        if (!lo) {
            s = wgml_set_error(m->ctx, WGML_ERR_OOM, "%s: out of host memory", op);
            break;
        }
        m->lora[i] = lo;
        int64_t sa[2] = {r, K}, sb[2] = {N, r};
        lo->n = N, lo->k = K, lo->r = r, lo->scale = alpha / (float)r;
        lo->a = wgml_tensor_new(m->wg, WGML_F32, 2, sa);
        lo->b = lo->a ? wgml_tensor_new(m->wg, WGML_F32, 2, sb) : NULL;
        if (!lo->b) s = wgml_last_status(m->ctx);
    }
    for (int i = 0; i < n && !s; i++) {
        int64_t l;
        int t, ab = parse_lora_name(m, names[i], &l, &t);
        wgml_lora *lo = m->lora[l * DECODER_N_TARGETS + t];
        wgml_tensor *dst = ab ? lo->b : lo->a;
        s = wgml_tensor_write(dst, data[i], wgml_tensor_nbytes(dst));
    }
    free(have);
    if (s) free_lora(m);
    return s;
}

void wgml_model_free(wgml_model *m) {
    if (!m) return;
    /* the running graphs hold views of m->wg's tensors: free them first */
    free_step(&m->decode);
    for (int i = 0; i < m->n_prefill; i++) free_step(&m->prefill[i]);
    free_lora(m);
    decoder_free_weights(m);
    wgml_graph_free(m->wg);
    wgml_tokenizer_free(m->tok);
    wgml_gguf_close(m->file);
    free(m);
}

const wgml_llama_config *wgml_model_config(const wgml_model *m) { return m ? &m->cfg : NULL; }
const wgml_tokenizer *wgml_model_tokenizer(const wgml_model *m) { return m ? m->tok : NULL; }
const char *wgml_model_tokenizer_error(const wgml_model *m) {
    return !m ? "model is NULL" : m->tok ? "" : m->tok_err;
}
void wgml_model_reset(wgml_model *m) {
    if (m) m->pos = 0;
}
int64_t wgml_model_pos(const wgml_model *m) { return m ? m->pos : 0; }

wgml_graph *wgml_model_decode_graph(wgml_model *m) { return m ? m->decode.g : NULL; }

wgml_graph *wgml_model_prefill_graph(wgml_model *m, size_t n) {
    if (!m || n < 2 || n > MAX_BUCKET) return NULL;
    step_graph *sg = find_prefill(m, prefill_bucket(m, n));
    return sg ? sg->g : NULL;
}
double wgml_model_last_run_seconds(const wgml_model *m) { return m ? m->last_s : 0; }

int wgml_model_is_stop(const wgml_model *m, int32_t id) {
    if (!m) return 0;
    for (int i = 0; i < m->n_stop; i++)
        if (m->stop_ids[i] == id) return 1;
    return 0;
}
