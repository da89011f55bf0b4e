/* Learning-rate schedule, loss.csv and the loss.svg plot (public API in include/wgml-train.h, "run reports"). */
#define _POSIX_C_SOURCE 200809L
#include "wgml-train.h"

#include "io/safetensors.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double wgml_lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_lr) {
    if (warmup > 0 && step < warmup) return lr * (double)(step + 1) / (double)warmup;
    int64_t span = total - warmup - 1;
    if (span <= 0) return lr;
    double p = (double)(step - warmup) / (double)span;
    if (p > 1) p = 1;
    return min_lr + 0.5 * (lr - min_lr) * (1 + cos(3.14159265358979323846 * p));
}

typedef struct out {
    char *p;
    size_t n, cap;
    int bad;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
    if (o->bad) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(o->p ? o->p + o->n : NULL, o->p ? o->cap - o->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            o->bad = 1;
            return;
        }
        if (o->p && o->n + (size_t)k < o->cap) {
            o->n += (size_t)k;
            return;
        }
        size_t cap = (o->cap + (size_t)k + 1) * 2;
        char *q = realloc(o->p, cap);
        if (!q) {
            o->bad = 1;
            return;
        }
        o->p = q, o->cap = cap;
    }
}

static wgml_status flush(out *o, const char *path, char *err, size_t errlen) {
    if (o->bad) {
        free(o->p);
        if (err && errlen) snprintf(err, errlen, "%s: out of memory", path);
        return WGML_ERR_OOM;
    }
    const void *parts[1] = {o->p};
    size_t sizes[1] = {o->n};
    wgml_status s = file_write_atomic(path, parts, sizes, 1, SIZE_MAX, err, errlen);
    free(o->p);
    return s;
}

wgml_status wgml_report_write_csv(const char *path, const wgml_report_row *rows, size_t n, char *err, size_t errlen) {
    out o = {0};
    put(&o, "step,loss,lr,tokens_per_s,eval_ppl\n");
    for (size_t i = 0; i < n; i++) {
        const wgml_report_row *r = &rows[i];
        put(&o, "%lld,", (long long)r->step);
        if (isfinite(r->loss)) put(&o, "%.9g", r->loss); /* round-trips an f32 loss */
        put(&o, ",");
        if (r->lr > 0) put(&o, "%.6g", r->lr);
        put(&o, ",");
        if (r->tokens_per_s > 0) put(&o, "%.1f", r->tokens_per_s);
        put(&o, ",");
        if (r->eval_ppl > 0) put(&o, "%.4f", r->eval_ppl);
        put(&o, "\n");
    }
    return flush(&o, path, err, errlen);
}

static double field(const char **p) {
    const char *s = *p;
    const char *e = strchr(s, ',');
    if (!e) e = s + strlen(s);
    double v = NAN;
    if (e > s) {
        char tmp[64];
        size_t k = (size_t)(e - s) < sizeof tmp - 1 ? (size_t)(e - s) : sizeof tmp - 1;
        memcpy(tmp, s, k);
        tmp[k] = 0;
        char *end;
        v = strtod(tmp, &end);
        if (end == tmp) v = NAN;
    }
    *p = *e ? e + 1 : e;
    return v;
}

wgml_status wgml_report_read_csv(const char *path, int64_t max_step, wgml_report_row **rows, size_t *n, char *err, size_t errlen) {
    *rows = NULL;
    *n = 0;
    uint8_t *buf;
    size_t len;
    wgml_status s = file_read_all(path, &buf, &len, err, errlen);
    if (s) return s;
    size_t cap = 0;
    char *save = NULL;
    int first = 1;
    for (char *line = strtok_r((char *)buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (first) {
            first = 0;
            if (strncmp(line, "step,", 5)) break;
            continue;
        }
        const char *p = line;
        wgml_report_row r;
        double st = field(&p);
        r.loss = field(&p);
        r.lr = field(&p);
        r.tokens_per_s = field(&p);
        r.eval_ppl = field(&p);
        if (!isfinite(st) || st > (double)max_step) continue;
        r.step = (int64_t)st;
        if (!isfinite(r.lr)) r.lr = 0;
        if (!isfinite(r.tokens_per_s)) r.tokens_per_s = 0;
        if (!isfinite(r.eval_ppl)) r.eval_ppl = 0;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            wgml_report_row *q = realloc(*rows, cap * sizeof *q);
            if (!q) {
                free(buf);
                free(*rows);
                *rows = NULL;
                *n = 0;
                return WGML_ERR_OOM;
            }
            *rows = q;
        }
        (*rows)[(*n)++] = r;
    }
    free(buf);
    return WGML_OK;
}

/* A "nice" tick step for a range: 1, 2 or 5 times a power of ten, about `want` ticks. */
static double nice_step(double range, int want) {
    double raw = range / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void xml_text(out *o, const char *s) {
    for (; *s; s++) {
        if (*s == '<') put(o, "&lt;");
        else if (*s == '>') put(o, "&gt;");
        else if (*s == '&') put(o, "&amp;");
        else put(o, "%c", *s);
    }
}

wgml_status wgml_report_write_svg(const char *path, const char *title, const wgml_report_row *rows, size_t n, char *err, size_t errlen) {
    const double W = 720, H = 420, L = 70, R = 20, T = 40, B = 55;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    size_t n_loss = 0, n_eval = 0;
    for (size_t i = 0; i < n; i++) {
        double ys[2] = {rows[i].loss, rows[i].eval_ppl > 0 ? log(rows[i].eval_ppl) : NAN};
        for (int k = 0; k < 2; k++) {
            if (!isfinite(ys[k])) continue;
            n_loss += k == 0, n_eval += k == 1;
            x0 = fmin(x0, (double)rows[i].step), x1 = fmax(x1, (double)rows[i].step);
            y0 = fmin(y0, ys[k]), y1 = fmax(y1, ys[k]);
        }
    }
    if (!(x1 >= x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (x1 - x0 < 1) x1 = x0 + 1;
    if (y1 - y0 < 1e-3) y0 -= 0.5, y1 += 0.5;
    double ys = nice_step(y1 - y0, 6), xs = nice_step(x1 - x0, 8);
    y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
    x0 = floor(x0 / xs) * xs, x1 = ceil(x1 / xs) * xs;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * (W - L - R))
#define PY(y) (H - B - ((y) - y0) / (y1 - y0) * (H - T - B))
    out o = {0};
    put(&o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    put(&o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
        W, H, W, H);
    put(&o, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">", W / 2);
    xml_text(&o, title ? title : "loss");
    put(&o, "</text>\n");
    /* grid, ticks and tick labels */
    for (double y = y0; y <= y1 + ys * 1e-6; y += ys) {
        put(&o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, PY(y), W - R, PY(y));
        put(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, PY(y) + 4, fabs(y) < ys * 1e-6 ? 0.0 : y);
    }
    for (double x = x0; x <= x1 + xs * 1e-6; x += xs) {
        put(&o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", PX(x), T, PX(x), H - B);
        put(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(x), H - B + 18, x);
    }
    put(&o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    put(&o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T, L, H - B);
    put(&o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2, H - 15);
    put(&o, "<text x=\"18\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.0f)\">loss (nats per token)</text>\n",
        (T + H - B) / 2, (T + H - B) / 2);
    /* the training loss */
    if (n_loss) {
        put(&o, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
        for (size_t i = 0; i < n; i++)
            if (isfinite(rows[i].loss)) put(&o, "%.1f,%.1f ", PX((double)rows[i].step), PY(rows[i].loss));
        put(&o, "\"/>\n");
    }
    /* held-out loss = ln(perplexity) */
    for (size_t i = 0; i < n; i++)
        if (rows[i].eval_ppl > 0)
            put(&o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#d62728\"><title>step %lld: held-out perplexity %.3f</title></circle>\n",
                PX((double)rows[i].step), PY(log(rows[i].eval_ppl)), (long long)rows[i].step, rows[i].eval_ppl);
    /* legend, on a white box over the plot */
    put(&o, "<rect x=\"%.0f\" y=\"%.0f\" width=\"196\" height=\"44\" fill=\"white\" stroke=\"#ccc\"/>\n", W - R - 200, T + 1);
    put(&o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#1f77b4\" stroke-width=\"2\"/>"
            "<text x=\"%.0f\" y=\"%.0f\">training loss</text>\n",
        W - R - 190, T + 12, W - R - 165, T + 12, W - R - 158, T + 16);
    put(&o, "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"4\" fill=\"#d62728\"/><text x=\"%.0f\" y=\"%.0f\">held-out loss (ln ppl)</text>\n",
        W - R - 178, T + 30, W - R - 158, T + 34);
    put(&o, "</svg>\n");
#undef PX
#undef PY
    return flush(&o, path, err, errlen);
}
