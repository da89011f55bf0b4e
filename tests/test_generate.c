/* Greedy generation kept on the GPU (wgml_model_decode_greedy, the default greedy path of
 * wgml_generate) against the step-by-step path (decode_batch < 0: one decode graph run and one
 * argmax readback per token), on the tiny synthetic Llama of tiny_llama.h: the same token ids,
 * stop flag, position and KV-cache state for several batch sizes, max_tokens not a multiple of
 * the batch, the context filling up, a stop token in the middle of a batch, a stop from
 * on_text, a second generation after the first, a prefill continuing after a stopped
 * generation; submits per token; argument errors of wgml_model_decode_greedy; the device lost
 * mid-decoding; the fused kernels of the inference graphs against the plain ops; the int8
 * prefill against the f32 one. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "tiny_llama.h"
#include "wgml-model.h"

#include <unistd.h>

#include "wall_clock.h"

static char g_path[256];

/* Writes the model with tokenizer.ggml.eos_token_id = eos (the file's stop token). */
static int write_with_eos(const synth *s, const char *path, uint32_t eos) {
    if (!synth_write(s, path, "llama", NULL, NULL)) return 0;
    FILE *f = fopen(path, "r+b");
    if (!f) return 0;
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    static const char key[] = "tokenizer.ggml.eos_token_id";
    size_t kl = sizeof key - 1;
    int ok = 0;
    for (size_t i = 0; i + kl + 8 <= n && !ok; i++)
        if (!memcmp(buf + i, key, kl)) {
            uint32_t type;
            memcpy(&type, buf + i + kl, 4);
            if (type != 4) break; /* u32 */
            ok = fseek(f, (long)(i + kl + 4), SEEK_SET) == 0 && fwrite(&eos, 4, 1, f) == 1;
        }
    return fclose(f) == 0 && ok;
}

typedef struct run {
    wgml_status st;
    int32_t *ids;
    size_t n;
    int64_t pos;
    wgml_gen_stats gs;
    int texts; /* on_text calls */
} run;

typedef struct text_ctx {
    int calls, stop_at; /* stop_at > 0: return 1 on that call */
} text_ctx;

static int on_text(void *user, const char *text, size_t len) {
    (void)text, (void)len;
    text_ctx *t = user;
    return ++t->calls == t->stop_at;
}

static run gen(wgml_model *m, const int32_t *prompt, size_t np, int max, int batch, int stop_at) {
    run r = {0};
    wgml_gen_options o = {.max_tokens = max, .sampler = {0, 0, 0}, .seed = 1, .decode_batch = batch};
    text_ctx tc = {0, stop_at};
    r.st = wgml_generate(m, prompt, np, &o, on_text, &tc, &r.gs, &r.ids, &r.n);
    r.pos = wgml_model_pos(m);
    r.texts = tc.calls;
    return r;
}

/* b (GPU-pipelined) equals a (step by step) in everything the caller sees. */
static int same_run(const char *name, const run *a, const run *b) {
    int ok = a->st == WGML_OK && b->st == WGML_OK && a->n == b->n && a->pos == b->pos &&
             a->gs.stopped == b->gs.stopped && a->gs.generated_tokens == b->gs.generated_tokens &&
             a->gs.decode_steps == b->gs.decode_steps && a->texts == b->texts &&
             (a->n == 0 || !memcmp(a->ids, b->ids, a->n * sizeof *a->ids));
    return th_check(ok, "%s: %zu tokens, pos %lld, stopped %d, %zu steps (step by step: %zu, %lld, %d, %zu)%s%s", name,
                    b->n, (long long)b->pos, b->gs.stopped, b->gs.decode_steps, a->n, (long long)a->pos, a->gs.stopped,
                    a->gs.decode_steps, a->st ? " step error: " : "", a->st || b->st ? wgml_last_error(T.ctx) : "");
}

static void free_run(run *r) {
    free(r->ids);
    r->ids = NULL;
}

enum { NP = 5, CTX = 40 };

/* the step-by-step run and pipelined runs with several batch sizes; returns the step run */
static run compare_batches(wgml_model *m, const int32_t *prompt, int max, const char *what) {
    run a = gen(m, prompt, NP, max, -1, 0);
    th_check(a.st == WGML_OK, "%s: step-by-step generation: %s", what, wgml_last_error(T.ctx));
    const int batches[] = {1, 4, 7, 0, 64};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
        double t0 = now();
        run b = gen(m, prompt, NP, max, batches[i], 0);
        double t = now() - t0;
        char name[128];
        snprintf(name, sizeof name, "%s, batch %d (%.2f s)", what, batches[i], t);
        same_run(name, &a, &b);
        if (!b.gs.stopped) { /* no stop: exactly ceil(steps / batch) submits */
            uint64_t per = batches[i] > 0 ? (uint64_t)batches[i] : 16, want = (b.gs.decode_steps + per - 1) / per;
            th_check(b.gs.decode_submits == want, "%s: %llu submits for %zu steps, want %llu", name,
                     (unsigned long long)b.gs.decode_submits, b.gs.decode_steps, (unsigned long long)want);
        }
        free_run(&b);
    }
    return a;
}

/* Token ids[i] (i >= 1, made by decode step i - 1) that first occurs at i, with the step in
 * the middle of a batch of 4 (not its first or last step): -1 when none. */
static int mid_batch_token(const run *a, int *at, int last) {
    for (size_t i = 5; i < a->n && (int)i <= last; i++) {
        size_t off = (i - 1) % 4;
        if (off == 0 || off == 3) continue;
        int first = 1;
        for (size_t j = 0; j < i && first; j++) first = a->ids[j] != a->ids[i];
        if (first) {
            *at = (int)i;
            return a->ids[i];
        }
    }
    return -1;
}

/* The logits got against want (another run's, as the reference) within tol, absolute and
 * relative. */
static bool logits_close(const char *name, const float *got, const float *want, double tol) {
    double ref[V];
    for (int j = 0; j < V; j++) ref[j] = want[j];
    return th_close(name, got, ref, V, tol, tol);
}

static void test_generate(void) {
    synth s;
    synth_make(&s, 0);
    th_check(synth_write(&s, g_path, "llama", NULL, NULL), "write gguf");
    wgml_model_options mo = {.n_ctx = CTX};
    wgml_model *m = wgml_model_load(T.ctx, g_path, &mo);
    if (!th_check(m != NULL, "load: %s", m ? "" : wgml_last_error(T.ctx))) {
        synth_free(&s);
        return;
    }
    /* prompts 0-3 for the cases below; the search for a mid-batch stop token goes on to the
     * others where the first ones' continuations cycle too soon (random weights) */
    enum { NPROMPT = 16 };
    int32_t prompt[NPROMPT][NP];
    for (int p = 0; p < NPROMPT; p++)
        for (int i = 0; i < NP; i++) prompt[p][i] = 3 + (int32_t)floor(th_uniform(0, V - 3));

    /* 30 tokens: 29 decode steps (not a multiple of 4, 7 or 16) */
    run a = compare_batches(m, prompt[0], 30, "max_tokens 30");
    if (!a.gs.stopped) th_check(a.n == 30 && a.pos == NP + 29, "max_tokens 30: 30 tokens, position %lld", (long long)a.pos);
    free_run(&a);
    /* the context fills up: 40 - 5 steps, 36 tokens */
    run full = compare_batches(m, prompt[1], 100, "context full");
    if (!full.gs.stopped)
        th_check(full.n == CTX - NP + 1 && full.pos == CTX, "context full: %zu tokens, position %lld", full.n,
                 (long long)full.pos);

    /* a stop from on_text after its 6th call, on a prompt whose continuation does not stop by
     * itself within 7 tokens (the random model may end a continuation early: searched over all
     * the prompts; none found fails, since the check would not run) */
    int tp = -1;
    for (int p = 0; p < NPROMPT && tp < 0; p++) {
        run r = gen(m, prompt[p], NP, 7, -1, 0);
        if (!r.st && !r.gs.stopped && r.n == 7) tp = p;
        free_run(&r);
    }
    if (th_check(tp >= 0, "on_text stop: a prompt whose continuation does not stop within 7 tokens (of %d)", NPROMPT)) {
        run ta = gen(m, prompt[tp], NP, 100, -1, 6), tb = gen(m, prompt[tp], NP, 100, 4, 6);
        same_run("on_text stops after 6 calls, batch 4", &ta, &tb);
        th_check(ta.texts == 6 && ta.n == 6 && ta.pos == NP + 5, "on_text stop: 6 tokens, position %lld",
                 (long long)ta.pos);
        free_run(&ta), free_run(&tb);
    }

    /* a stop token in the middle of a batch: the file's EOS made a token that the greedy
     * continuation first produces mid-batch (searched over up to 15 prompts) */
    int at = -1, eos = -1;
    const int32_t *sp = NULL;
    for (int p = 1; p < NPROMPT && eos < 0; p++) {
        run r = p == 1 ? full : gen(m, prompt[p], NP, 100, -1, 0);
        eos = mid_batch_token(&r, &at, CTX - NP - 4); /* room for the 4-token prefill below */
        printf("  prompt %d continues:", p);
        for (size_t i = 0; i < r.n; i++) printf(" %d", r.ids[i]);
        printf("\n");
        if (eos >= 0) sp = prompt[p];
        if (p != 1) free_run(&r);
    }
    free_run(&full);
    wgml_model_free(m);
    if (!th_check(eos >= 0, "a token first made in the middle of a batch (the prompts' continuations cycle too soon)")) {
        synth_free(&s);
        return;
    }
    th_check(write_with_eos(&s, g_path, (uint32_t)eos), "write gguf with EOS %d", eos);
    m = wgml_model_load(T.ctx, g_path, &mo);
    if (!th_check(m != NULL && wgml_model_is_stop(m, eos), "load with EOS %d: %s", eos, m ? "" : wgml_last_error(T.ctx))) {
        wgml_model_free(m);
        synth_free(&s);
        return;
    }
    printf("  stop token %d first made at token %d (decode step %d, step %d of its batch of 4)\n", eos, at, at - 1,
           (at - 1) % 4 + 1);
    enum { NX = 4 };
    int32_t extra[NX] = {7, 11, 13, 17};
    float la[V], lb[V];
    run sa = gen(m, sp, NP, 100, -1, 0);
    wgml_status st = sa.st ? sa.st : wgml_model_prefill(m, extra, NX, la, NULL);
    run sb = gen(m, sp, NP, 100, 4, 0);
    wgml_status st2 = sb.st ? sb.st : wgml_model_prefill(m, extra, NX, lb, NULL);
    same_run("stop token mid-batch, batch 4", &sa, &sb);
    th_check(sb.gs.stopped && (int)sb.n == at && sb.pos == NP + at,
             "stop mid-batch: %zu tokens (want %d), position %lld (want %d)", sb.n, at, (long long)sb.pos, NP + at);
    /* the stopped generation left the cache as the step path did: a prefill continuing after
     * it gives the same logits, and those of the whole sequence prefilled at once */
    if (th_check(!st && !st2, "prefill after the stopped generations: %s", wgml_last_error(T.ctx))) {
        int same = !memcmp(la, lb, sizeof la);
        th_check(same, "prefill continuing after a pipelined stop equals it after a step-by-step stop");
        int32_t seq[CTX];
        size_t L = 0;
        for (int i = 0; i < NP; i++) seq[L++] = sp[i];
        for (size_t i = 0; i < sb.n; i++) seq[L++] = sb.ids[i];
        /* (the cache holds the prompt and the kept tokens: the stop token was never fed) */
        for (int i = 0; i < NX; i++) seq[L++] = extra[i];
        float lf[V];
        wgml_model_reset(m);
        if (th_check(wgml_model_prefill(m, seq, L, lf, NULL) == WGML_OK, "whole-sequence prefill: %s",
                     wgml_last_error(T.ctx))) {
            logits_close("prefill after a pipelined stop vs the whole sequence at once", lb, lf, 1e-4);
        }
    }
    free_run(&sa), free_run(&sb);
    /* a second generation after a stopped one: another prompt, then the first again */
    for (int p = 0; p < 2; p++) {
        const int32_t *pr = p ? sp : prompt[0];
        run x = gen(m, pr, NP, 23, -1, 0);
        run y = gen(m, pr, NP, 23, 16, 0);
        same_run(p ? "the stopping prompt again" : "a second generation after a stopped one", &x, &y);
        free_run(&x), free_run(&y);
    }

    /* the model-level call: steps without a callback, errors */
    wgml_model_reset(m);
    int32_t next = -1;
    wgml_decode_stats ds;
    st = wgml_model_prefill(m, prompt[2], NP, NULL, &next);
    if (!st) st = wgml_model_decode_greedy(m, next, 10, 3, NULL, NULL, &ds);
    th_check(st == WGML_OK && wgml_model_pos(m) == NP + 10 && ds.steps == 10 && ds.submitted == 10 && ds.submits == 4,
             "decode_greedy without a callback: position %lld, %zu steps, %llu submits: %s", (long long)wgml_model_pos(m),
             ds.steps, (unsigned long long)ds.submits, st ? wgml_last_error(T.ctx) : "");
    th_check(wgml_model_decode_greedy(m, next, 0, 3, NULL, NULL, &ds) == WGML_OK && wgml_model_pos(m) == NP + 10,
             "decode_greedy: 0 steps is nothing");
    th_expect_error("decode_greedy: past the context", wgml_model_decode_greedy(m, next, CTX, 4, NULL, NULL, NULL) != WGML_OK,
                    WGML_ERR_LIMIT, "context", NULL);
    th_expect_error("decode_greedy: id out of range", wgml_model_decode_greedy(m, V, 1, 4, NULL, NULL, NULL) != WGML_OK,
                    WGML_ERR_ARG, "vocabulary", NULL);
    th_check(wgml_model_decode_greedy(NULL, 0, 1, 4, NULL, NULL, NULL) == WGML_ERR_ARG, "decode_greedy: NULL model");
    th_check(wgml_model_pos(m) == NP + 10, "failed calls leave the position");
    wgml_model_free(m);
    remove(g_path);
    synth_free(&s);
}

/* The inference graphs' fused kernels (residual add + RMSNorm, silu * up, the decode step's
 * RoPE + KV-cache writes, the GEMV of q, k, v and of gate, up, and, where every projection is
 * 4-bit, the GEMV's norm prologue and residual / gated epilogues) against the plain ops
 * ($WGML_LLAMA_UNFUSED=1): the same logits in prefill and decode, and the dispatches saved. */
static size_t case_fused(int all_q, int64_t ctx) {
    synth s;
    synth_make_q(&s, 0, all_q);
    th_check(synth_write(&s, g_path, "llama", NULL, NULL), "write gguf");
    wgml_model_options mo = {.n_ctx = ctx};
    /* the plain ops' attention over one chunk of keys, whatever the adapter's tile (a CPU
     * adapter's few-rows tile takes 32 keys a block and would split CTX's 40 in two: one
     * attn_combine more per layer) */
    th_setenv("WGML_SDPA_SPLIT", "1", 1);
    th_setenv("WGML_LLAMA_UNFUSED", "1", 1);
    wgml_model *u = wgml_model_load(T.ctx, g_path, &mo);
    th_setenv("WGML_LLAMA_UNFUSED", "0", 1); /* fused even on a CPU adapter, whose default is plain */
    wgml_model *f = wgml_model_load(T.ctx, g_path, &mo);
    th_unsetenv("WGML_LLAMA_UNFUSED");
    if (!th_check(u && f, "load fused and unfused: %s", wgml_last_error(T.ctx))) {
        wgml_model_free(u), wgml_model_free(f);
        th_unsetenv("WGML_SDPA_SPLIT");
        synth_free(&s);
        return 0;
    }
    int32_t ids[14];
    for (int i = 0; i < 14; i++) ids[i] = (int32_t)floor(th_uniform(0, V));
    float lu[V], lf[V];
    char name[96];
    wgml_status st = wgml_model_prefill(u, ids, 11, lu, NULL);
    if (!st) st = wgml_model_prefill(f, ids, 11, lf, NULL);
    snprintf(name, sizeof name, "all_q %d: fused vs plain ops: prefill 11", all_q);
    if (th_check(!st, "prefill: %s", wgml_last_error(T.ctx))) logits_close(name, lf, lu, 1e-5);
    for (int p = 11; p < 14; p++) {
        st = wgml_model_decode(u, ids[p], lu, NULL);
        if (!st) st = wgml_model_decode(f, ids[p], lf, NULL);
        snprintf(name, sizeof name, "all_q %d: fused vs plain ops: decode at %d", all_q, p);
        if (th_check(!st, "decode: %s", wgml_last_error(T.ctx))) logits_close(name, lf, lu, 1e-5);
    }
    wgml_decode_stats du, df;
    st = wgml_model_decode_greedy(u, 3, 2, 0, NULL, NULL, &du);
    if (!st) st = wgml_model_decode_greedy(f, 3, 2, 0, NULL, NULL, &df);
    /* 5 per layer from the fused kernels (the plain graph takes the fused activation ew_glu
     * too, as training does), and those the fused GEMV of the projections that
     * share their input saves where the kinds allow: mixed weights (layer 0 q+k (v is F32) and
     * gate+up, layer 1 q+v (k is Q4_0) and no gate+up (up is Q8_0)): 3; all 4-bit (layer 0
     * q+k+v, gate+up; layer 1 q+v, gate+up): 5, and then the GEMV's prologue and epilogues take
     * 3 more per layer (the two add_norms and the swiglu; the first block's norm moves into its
     * GEMV and the final norm, in the last add_norm before, is a dispatch of its own): 3 NL;
     * and the decode attention (attn_decode_step: rope, cache writes, attention) takes one
     * dispatch per layer where rope_kv_step and sdpa_cached take two, its keys (CTX <= 64) being
     * one chunk: NL */
    const size_t fewer = all_q ? 5 * NL + 5 + 3 * NL + NL : 5 * NL + 3 + NL;
    if (ctx == CTX)
        th_check(!st && du.dispatches_per_step == df.dispatches_per_step + fewer,
                 "all_q %d: decode dispatches per step: %zu fused, %zu plain (want %zu fewer)", all_q,
                 df.dispatches_per_step, du.dispatches_per_step, fewer);
    printf("  all_q %d, context %lld: decode step: %zu dispatches (plain ops: %zu)\n", all_q, (long long)ctx,
           df.dispatches_per_step, du.dispatches_per_step);
    wgml_model_free(u), wgml_model_free(f);
    th_unsetenv("WGML_SDPA_SPLIT");
    remove(g_path);
    synth_free(&s);
    return st ? 0 : df.dispatches_per_step;
}

static void test_fused(void) {
    case_fused(0, CTX);
    size_t one = case_fused(1, CTX);
    /* a context of 200: the decode attention splits the keys into 4 chunks, which the o
     * projection's GEMV merges in its prologue (no dispatch of its own); with
     * $WGML_QW_GEMV_MERGE=0 attn_combine merges them, one dispatch more per layer */
    size_t four = case_fused(1, 200);
    th_check(one && four == one, "decode dispatches per step: %zu with 4 key chunks, %zu with one", four, one);
    th_setenv("WGML_QW_GEMV_MERGE", "0", 1);
    size_t combine = case_fused(1, 200);
    th_unsetenv("WGML_QW_GEMV_MERGE");
    th_check(one && combine == one + NL, "decode dispatches per step: %zu with 4 key chunks and attn_combine, %zu with one",
             combine, one);
    /* norms past the GEMV prologue's read budget ($WGML_QW_GEMV_NORM_BUDGET=0 here; a 1B model's
     * projections by default) with the handoff on ($WGML_QW_GEMV_HANDOFF=1): o and down hand the
     * next norm over (the sum times its weight and the partial sums of squares), q/k/v and
     * gate/up take it; the first layer's norm is a dispatch of its own; also with attn_combine
     * (the 1B's merge does not fit o's prologue) */
    th_setenv("WGML_QW_GEMV_NORM_BUDGET", "0", 1);
    th_setenv("WGML_QW_GEMV_HANDOFF", "1", 1);
    size_t hand = case_fused(1, 200);
    th_check(four && hand == four + 1, "decode dispatches per step: %zu with the norms handed over, %zu in the GEMVs",
             hand, four);
    th_setenv("WGML_QW_GEMV_MERGE", "0", 1);
    size_t hand_c = case_fused(1, 200);
    th_unsetenv("WGML_QW_GEMV_MERGE");
    th_check(combine && hand_c == combine + 1, "decode dispatches per step: %zu with the norms handed over and "
             "attn_combine, %zu in the GEMVs", hand_c, combine);
    /* $WGML_QW_GEMV_HANDOFF=0: each residual add and the norm after it in one dispatch (two per
     * layer), the gated activation still in the gate/up GEMV */
    th_setenv("WGML_QW_GEMV_HANDOFF", "0", 1);
    size_t apart = case_fused(1, 200);
    th_unsetenv("WGML_QW_GEMV_HANDOFF");
    th_unsetenv("WGML_QW_GEMV_NORM_BUDGET");
    th_check(four && apart == four + 2 * NL, "decode dispatches per step: %zu with the norms apart, %zu in the GEMVs",
             apart, four);
}

/* The inference graphs through the integer dot product ($WGML_QW_INT8=1: activations quantised per 32-k
 * block to int8; test_qw_i8 checks the kernels against fp64) against f32 (=0, a CPU adapter's
 * default), with the plain ops and with the fused inference graphs (a GPU's: q, k, v as one
 * segmented GEMM): the last position's logits differ from f32's by more than rounding (the
 * int8 path ran) and by at most 15% of their RMS (measured on this random model: 1-6%; the
 * kernels' own error is bounded per product in test_qw_i8), with each argmax read back its own
 * logits'; the decode step after it (the GEMVs' int8 form where qw_gemv.c's gemv_i8x takes
 * it, over a cache the int8 prefill wrote) within the same bound. */
static void case_int8_prefill(const char *unfused) {
    synth s;
    synth_make_q(&s, 0, 0);
    th_check(synth_write(&s, g_path, "llama", NULL, NULL), "write gguf");
    wgml_model_options mo = {.n_ctx = CTX};
    th_setenv("WGML_LLAMA_UNFUSED", unfused, 1);
    th_setenv("WGML_QW_INT8", "0", 1);
    wgml_model *f = wgml_model_load(T.ctx, g_path, &mo);
    th_setenv("WGML_QW_INT8", "1", 1);
    wgml_model *q = wgml_model_load(T.ctx, g_path, &mo);
    th_unsetenv("WGML_QW_INT8");
    th_unsetenv("WGML_LLAMA_UNFUSED");
    int32_t ids[12], af = -1, aq = -2;
    for (int i = 0; i < 12; i++) ids[i] = (int32_t)floor(th_uniform(0, V));
    float lf[V], lq[V];
    wgml_status st = f && q ? wgml_model_prefill(f, ids, 11, lf, &af) : WGML_ERR_ARG;
    if (!st) st = wgml_model_prefill(q, ids, 11, lq, &aq);
    for (int step = 0; step < 2 && th_check(!st, "int8 prefill: %s", wgml_last_error(T.ctx)); step++) {
        double d2 = 0, r2 = 0, emax = 0;
        int mf = 0, mq = 0;
        for (int j = 0; j < V; j++) {
            d2 += (lq[j] - lf[j]) * (double)(lq[j] - lf[j]);
            r2 += (double)lf[j] * lf[j];
            emax = fmax(emax, fabs((double)lq[j] - lf[j]));
            if (lf[j] > lf[mf]) mf = j;
            if (lq[j] > lq[mq]) mq = j;
        }
        double rel = sqrt(d2 / fmax(r2, 1e-30));
        th_check(rel > 1e-4 && rel <= 0.15, "int8 %s (unfused %s): logits' error %.3g of their RMS",
                 step ? "prefill, then a decode step" : "prefill of 11", unfused, rel);
        /* the argmax each prefill read back is its own logits' maximum (up to ties). Whether the
         * two agree is not checked apart: with every logit within emax of f32's, they can differ
         * only where f32's top two are within 2 emax, so that follows from the error bound above
         * (a random model's top two can be that close: seed 13529977940 gives 78 against 32). */
        if (!step && af >= 0 && af < V && aq >= 0 && aq < V)
            th_check(lf[af] == lf[mf] && lq[aq] == lq[mq],
                     "int8 prefill of 11 (unfused %s): argmax read back %d (f32) and %d (int8), the logits' "
                     "maxima at %d and %d; the largest logit error %.3g", unfused, af, aq, mf, mq, emax);
        else if (!step) th_check(false, "int8 prefill of 11: argmax %d, %d outside [0, %d)", aq, af, V);
        printf("  int8 %s (unfused %s): logits' error %.2e of their RMS\n", step ? "then decode" : "prefill", unfused, rel);
        st = wgml_model_decode(f, ids[11], lf, NULL);
        if (!st) st = wgml_model_decode(q, ids[11], lq, NULL);
    }
    wgml_model_free(f), wgml_model_free(q);
    remove(g_path);
    synth_free(&s);
}

/* the fused graphs only: the plain ones reach the same kernels through wgml_qlinear, which
 * test_qw_i8 covers (the checked build's compiles bound this test's time) */
static void test_int8_prefill(void) { case_int8_prefill("0"); }

/* x quantised once for the GEMVs' integer form (test_qw_i8 checks the kernels against their
 * formulas), in the fused decode graphs with every GEMV int8 ($WGML_QW_GEMV_I8=1) and the norms
 * in dispatches of their own ($WGML_QW_GEMV_NORM_BUDGET=0, as a 1B model's): $WGML_QW_GEMV_XQ=1,
 * a qw_quant_x dispatch before each such GEMV group; =2, the norms write x quantised for the
 * products after them (q/k/v, gate/up, the head; the prefill's GEMMs too, whose logits are then
 * those of the GEMMs quantising for themselves), and the others keep their dispatch. The same
 * quantisation of x as each row group makes for itself without it, so a decode step's logits
 * agree to rounding; the step has more dispatches with =1 (the quantisers), and fewer with =2
 * than with =1 (the norms' outputs replace theirs). Each form settles when a graph is built, so
 * each model's decode graphs are built with its own setting. */
/* The tiny model (synth_make_q, every projection 4-bit) through the fused graphs with int8
 * activations, once per setting i < n: its own model, built and run with $WGML_QW_GEMV_XQ =
 * xq[i], $WGML_QW_GEMV_I8 = i8[i] and $WGML_QW_GEMV_NORM_BUDGET = budget ("" its default): a
 * prefill of 11 random ids, the same for each (logits into lp[i]), a decode step of a 12th (into
 * lg[i]) and three greedy steps (stats into ds[i]). */
static wgml_status xq_models(int n, const char *const *xq, const char *const *i8, const char *budget, float (*lp)[V],
                             float (*lg)[V], wgml_decode_stats *ds) {
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = (int32_t)floor(th_uniform(0, V));
    synth s;
    synth_make_q(&s, 0, 1);
    th_check(synth_write(&s, g_path, "llama", NULL, NULL), "write gguf");
    wgml_model_options mo = {.n_ctx = CTX};
    th_setenv("WGML_LLAMA_UNFUSED", "0", 1);
    th_setenv("WGML_QW_INT8", "1", 1);
    th_setenv("WGML_QW_GEMV_NORM_BUDGET", budget, 1);
    wgml_status st = WGML_OK;
    for (int i = 0; i < n && !st; i++) {
        wgml_model *md = wgml_model_load(T.ctx, g_path, &mo);
        th_setenv("WGML_QW_GEMV_XQ", xq[i], 1);
        th_setenv("WGML_QW_GEMV_I8", i8[i], 1);
        st = md ? wgml_model_prefill(md, ids, 11, lp[i], NULL) : WGML_ERR_ARG;
        if (!st) st = wgml_model_decode(md, ids[11], lg[i], NULL);
        if (!st) st = wgml_model_decode_greedy(md, 3, 2, 0, NULL, NULL, &ds[i]);
        wgml_model_free(md);
    }
    const char *names[] = {"WGML_QW_GEMV_XQ", "WGML_QW_GEMV_I8", "WGML_QW_GEMV_NORM_BUDGET", "WGML_QW_INT8",
                           "WGML_LLAMA_UNFUSED"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) th_unsetenv(names[i]);
    remove(g_path);
    synth_free(&s);
    return st;
}

static void test_xq_decode(void) {
    static const char *const modes[3] = {"", "1", "2"}, *const i8[3] = {"1", "1", "1"};
    float lp[3][V], lg[3][V];
    wgml_decode_stats ds[3] = {{0}};
    wgml_status st = xq_models(3, modes, i8, "0", lp, lg, ds);
    if (th_check(!st, "x quantised once: %s", wgml_last_error(T.ctx))) {
        logits_close("prefill, x quantised by the norms against by the GEMMs", lp[2], lp[0], 1e-5);
        logits_close("decode step, x quantised once by a dispatch against each row group's own", lg[1], lg[0], 1e-5);
        logits_close("decode step, x quantised once by the norms against each row group's own", lg[2], lg[0], 1e-5);
        size_t n0 = ds[0].dispatches_per_step, n1 = ds[1].dispatches_per_step, n2 = ds[2].dispatches_per_step;
        th_check(n1 > n0 && n2 < n1 && n2 >= n0,
                 "x quantised once: decode dispatches per step %zu without, %zu with the quantisers' dispatches, %zu "
                 "with the norms' (want more, then fewer but no fewer than without)",
                 n0, n1, n2);
        printf("  x quantised once: decode step %zu dispatches (%zu without, %zu by the norms)\n", n1, n0, n2);
    }
}

/* x quantised once per workgroup where the GEMV stages it (XQSTAGE: the norm prologue of q/k/v
 * and gate/up, this small model's default; qw_gemv.c's gemv_xq_stage) in the fused decode graphs:
 * with every GEMV int8, $WGML_QW_GEMV_XQ=3 against none gives logits equal to the bit (the same
 * quantisation as each row group's own) and no dispatch more; with the integer form off
 * ($WGML_QW_GEMV_I8=0) the staged GEMVs still take it with =3, so the logits differ from the f32
 * ones without it, within the int8 bound of case_int8_prefill (15% of their RMS). */
static void test_xq_staged(void) {
    static const char *const xq[4] = {"", "3", "3", ""}, *const i8[4] = {"1", "1", "0", "0"};
    float lp[4][V], lg[4][V];
    wgml_decode_stats ds[4] = {{0}};
    wgml_status st = xq_models(4, xq, i8, "", lp, lg, ds);
    if (th_check(!st, "x quantised where staged: %s", wgml_last_error(T.ctx))) {
        logits_close("decode step, x quantised once where staged against each row group's own", lg[1], lg[0], 1e-5);
        th_check(ds[1].dispatches_per_step == ds[0].dispatches_per_step,
                 "x quantised where staged: %zu dispatches per step, %zu without (want as many)",
                 ds[1].dispatches_per_step, ds[0].dispatches_per_step);
        double d2 = 0, r2 = 0;
        for (int j = 0; j < V; j++) d2 += (lg[2][j] - lg[3][j]) * (double)(lg[2][j] - lg[3][j]), r2 += (double)lg[3][j] * lg[3][j];
        double rel = sqrt(d2 / fmax(r2, 1e-30));
        th_check(rel > 1e-6 && rel <= 0.15,
                 "x quantised where staged, the integer form otherwise off: logits' error %.3g of their RMS against f32 "
                 "(want more than rounding: the staged GEMVs took the integer form)",
                 rel);
    }
}

/* The KV cache's f16 form (wgml_model_options.kv_type; the kernels are checked against fp64 in
 * test_attention, test_attn_decode and test_fused): the same model with an f32 and an f16 cache,
 * a prefill of 11 then decode steps over 200 positions (the decode attention in key chunks),
 * with the fused graphs and with the plain ops (kv_append and sdpa_cached): the logits differ
 * from f32's by more than nothing (the f16 cache is in use) and by at most 1% of their RMS
 * (k and v rounded to 11 significant bits). Then $WGML_KV's values and a bad kv_type. */
static void case_kv_f16(const char *unfused) {
    synth s;
    synth_make_q(&s, 0, 1);
    th_check(synth_write(&s, g_path, "llama", NULL, NULL), "write gguf");
    wgml_model_options mo = {.n_ctx = 200, .kv_type = WGML_KV_F32}, mh = {.n_ctx = 200, .kv_type = WGML_KV_F16};
    th_setenv("WGML_LLAMA_UNFUSED", unfused, 1);
    wgml_model *f = wgml_model_load(T.ctx, g_path, &mo), *h = wgml_model_load(T.ctx, g_path, &mh);
    th_unsetenv("WGML_LLAMA_UNFUSED");
    th_check(f && h && !wgml_model_config(f)->kv_f16 && wgml_model_config(h)->kv_f16, "load f32 and f16 caches: %s",
             wgml_last_error(T.ctx));
    int32_t ids[14];
    for (int i = 0; i < 14; i++) ids[i] = (int32_t)floor(th_uniform(0, V));
    float lf[V], lh[V];
    wgml_status st = f && h ? wgml_model_prefill(f, ids, 11, lf, NULL) : WGML_ERR_ARG;
    if (!st) st = wgml_model_prefill(h, ids, 11, lh, NULL);
    for (int p = 11; p <= 14 && th_check(!st, "f16 cache: %s", wgml_last_error(T.ctx)); p++) {
        double d2 = 0, r2 = 0;
        for (int j = 0; j < V; j++) d2 += (lh[j] - lf[j]) * (double)(lh[j] - lf[j]), r2 += (double)lf[j] * lf[j];
        double rel = sqrt(d2 / fmax(r2, 1e-30));
        th_check(rel > 0 && rel <= 0.01, "f16 KV cache (unfused %s) at %d positions: logits' error %.3g of their RMS",
                 unfused, p, rel);
        printf("  f16 KV cache (unfused %s) at %d positions: logits' error %.2e of their RMS\n", unfused, p, rel);
        if (p < 14) st = wgml_model_decode(f, ids[p], lf, NULL);
        if (!st && p < 14) st = wgml_model_decode(h, ids[p], lh, NULL);
    }
    wgml_model_free(f), wgml_model_free(h);
    if (unfused[0] == '0') {
        wgml_model_options bad = {.kv_type = (wgml_kv_type)7};
        th_expect_error("kv_type 7", !wgml_model_load(T.ctx, g_path, &bad), WGML_ERR_ARG, "kv_type 7", NULL);
        th_setenv("WGML_KV", "bf16", 1);
        th_expect_error("$WGML_KV=bf16", !wgml_model_load(T.ctx, g_path, NULL), WGML_ERR_ARG, "WGML_KV", "bf16", NULL);
        th_setenv("WGML_KV", "f16", 1);
        wgml_model *e = wgml_model_load(T.ctx, g_path, NULL);
        th_check(e && wgml_model_config(e)->kv_f16, "$WGML_KV=f16: an f16 cache: %s", wgml_last_error(T.ctx));
        wgml_model_free(e);
        th_unsetenv("WGML_KV");
    }
    remove(g_path);
    synth_free(&s);
}

static void test_kv_f16(void) {
    case_kv_f16("0");
    case_kv_f16("1");
}

void gpu_debug_destroy_device(wgml_ctx *ctx); /* internal test hook (src/gpu/device.c) */

static int lose_device(void *user, int32_t id) {
    (void)id;
    gpu_debug_destroy_device(user); /* while the next group is in flight */
    return 0;
}

/* The device lost during pipelined decoding (own context): a device-lost error, no hang, the
 * groups in flight dropped without leaks, the model and context still freed cleanly. */
static void test_device_lost(void) {
    wgml_ctx *ctx = NULL;
    wgml_ctx_options co = {0};
    if (!th_check(wgml_ctx_create(&co, &ctx) == WGML_OK, "context: %s", wgml_create_error())) return;
    synth s;
    synth_make(&s, 0);
    th_check(synth_write(&s, g_path, "llama", NULL, NULL), "write gguf");
    wgml_model_options mo = {.n_ctx = CTX};
    wgml_model *m = wgml_model_load(ctx, g_path, &mo);
    int32_t ids[NP] = {3, 4, 5, 6, 7}, next = 0;
    wgml_status st = m ? wgml_model_prefill(m, ids, NP, NULL, &next) : WGML_ERR_ARG;
    if (th_check(st == WGML_OK, "device lost: load and prefill: %s", wgml_last_error(ctx))) {
        double t0 = now();
        st = wgml_model_decode_greedy(m, next, 20, 2, lose_device, ctx, NULL);
        th_check(st == WGML_ERR_DEVICE_LOST && now() - t0 < 60, "device lost while decoding: %s (%s)",
                 wgml_status_name(st), wgml_last_error(ctx));
    }
    wgml_model_free(m);
    wgml_ctx_destroy(ctx);
    remove(g_path);
    synth_free(&s);
}

int main(int argc, char **argv) {
    /* before the device: its driver's threads read the environment as they start, and
     * setenv beside them is a race (lavapipe crashed in getenv under ASan) */
    th_unsetenv("WGML_QW_GEMV_MERGE"); /* its A/B switch: the merge in the o projection is on by default */
    th_unsetenv("WGML_QW_GEMV_NORM_BUDGET"); /* likewise the norm prologue's budget */
    th_unsetenv("WGML_QW_GEMV_HANDOFF");     /* and the norms handed over */
    th_unsetenv("WGML_KV");                  /* the KV cache f32 unless a case asks */
    th_init_args("test_generate", argc, argv);
    th_tmp_path(g_path, sizeof g_path, "wgml_test_generate_%d.gguf", (int)getpid());
    double t0 = now();
    test_generate();
    test_fused();
    test_int8_prefill();
    test_xq_decode();
    test_xq_staged();
    test_kv_f16();
    test_device_lost();
    printf("  total %.2f s\n", now() - t0);
    return th_done();
}
