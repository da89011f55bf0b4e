/* Host-side sampling from one row of logits: temperature, top-k, top-p (nucleus). */
#include "wgml.h"
#include "wgml-model.h"
#include "tensor/splitmix.h"

#include <math.h>
#include <stdlib.h>

uint64_t wgml_rng_seed(uint64_t seed) {
    uint64_t z = splitmix64(&seed); /* the first splitmix64 output of the seed; never 0 */
    return z ? z : 1;
}

/* xorshift64*: a uniform double in [0, 1). */
static double rng_uniform(uint64_t *s) {
    uint64_t x = *s ? *s : 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct cand {
    float logit;
    int32_t id;
} cand;

/* descending logit, then ascending id (a total order: the result does not depend on qsort) */
static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int32_t argmax(const float *l, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return (int32_t)best;
}

int32_t wgml_sample(const float *logits, int64_t n, const wgml_sampler *s, uint64_t *rng) {
    if (!logits || n <= 0) return -1;
    if (!s || !(s->temperature > 0) || !rng) return argmax(logits, n);
    cand *c = malloc(sizeof *c * (size_t)n);
    double *p = malloc(sizeof *p * (size_t)n);
    if (!c || !p) {
        free(c);
        free(p);
        return argmax(logits, n);
    }
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(logits[i])) c[m++] = (cand){logits[i], (int32_t)i};
    if (m == 0) {
        free(c);
        free(p);
        return 0;
    }
    qsort(c, (size_t)m, sizeof *c, cmp_cand);
    if (s->top_k > 0 && s->top_k < m) m = s->top_k;
    double mx = c[0].logit, sum = 0;
    for (int64_t i = 0; i < m; i++) sum += p[i] = exp(((double)c[i].logit - mx) / (double)s->temperature);
    if (s->top_p > 0 && s->top_p < 1) {
        double acc = 0;
        int64_t keep = m;
        for (int64_t i = 0; i < m; i++) {
            acc += p[i] / sum;
            if (acc >= s->top_p) {
                keep = i + 1;
                break;
            }
        }
        m = keep;
        sum = 0;
        for (int64_t i = 0; i < m; i++) sum += p[i];
    }
    double u = rng_uniform(rng) * sum, acc = 0;
    int32_t id = c[m - 1].id;
    for (int64_t i = 0; i < m; i++) {
        acc += p[i];
        if (u < acc) {
            id = c[i].id;
            break;
        }
    }
    free(c);
    free(p);
    return id;
}
