/* Strict JSON reader: recursive descent over a bounded buffer; every read checks the end. */
#include "io/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const unsigned char *s;
    size_t n, p;
    char *err;
    size_t errlen;
    int failed;
} parser;

static int fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *ps, const char *fmt, ...) {
    if (ps->failed) return 1;
    ps->failed = 1;
    if (ps->err && ps->errlen) {
        int k = snprintf(ps->err, ps->errlen, "column %zu: ", ps->p + 1);
        if (k > 0 && (size_t)k < ps->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(ps->err + k, ps->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return 1;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->n && (ps->s[ps->p] == ' ' || ps->s[ps->p] == '\t' || ps->s[ps->p] == '\n' || ps->s[ps->p] == '\r'))
        ps->p++;
}

typedef struct sb {
    char *p;
    size_t n, cap;
} sb;

static int sb_add(sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return 1;
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

static int hex4(parser *ps, unsigned *out) {
    if (ps->n - ps->p < 4) return fail(ps, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = ps->s[ps->p + (size_t)i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a') + 10u : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A') + 10u : 99u;
        if (d > 15) return fail(ps, "bad hex digit in \\u escape");
        v = v * 16 + d;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

/* Length of a valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t need;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, cp = c & 0x07;
    else return 0;
    if (n < need) return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((need == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return need;
}

/* The code point of a \u escape, ps just past the "\u": a high surrogate must be followed by
 * a \u low surrogate (the pair gives one code point); a lone low surrogate and \u0000 are
 * refused. Returns 1 on error (reported). */
static int parse_u_escape(parser *ps, unsigned *cp) {
    unsigned u;
    if (hex4(ps, &u)) return 1;
    if (u >= 0xD800 && u <= 0xDBFF) {
        unsigned lo;
        if (ps->n - ps->p < 6 || ps->s[ps->p] != '\\' || ps->s[ps->p + 1] != 'u')
            return fail(ps, "high surrogate without a low surrogate");
        ps->p += 2;
        if (hex4(ps, &lo)) return 1;
        if (lo < 0xDC00 || lo > 0xDFFF) return fail(ps, "high surrogate without a low surrogate");
        *cp = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
    } else if (u >= 0xDC00 && u <= 0xDFFF) {
        return fail(ps, "lone low surrogate");
    } else {
        *cp = u;
    }
    if (*cp == 0) return fail(ps, "\\u0000 in a string is not supported");
    return 0;
}

/* The UTF-8 bytes of code point cp (at most 0x10FFFF) into t; returns their count. */
static size_t utf8_encode(unsigned cp, char t[4]) {
    if (cp < 0x80) {
        t[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6)), t[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12)), t[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), t[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    t[0] = (char)(0xF0 | (cp >> 18)), t[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
    t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), t[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The escape at ps (its backslash), its bytes appended to b. Returns 1 on error (reported). */
static int parse_escape(parser *ps, sb *b) {
    if (ps->p + 1 >= ps->n) return fail(ps, "unterminated escape");
    unsigned char e = ps->s[ps->p + 1];
    const char *rep = NULL;
    switch (e) {
    case '"': rep = "\""; break;
    case '\\': rep = "\\"; break;
    case '/': rep = "/"; break;
    case 'b': rep = "\b"; break;
    case 'f': rep = "\f"; break;
    case 'n': rep = "\n"; break;
    case 'r': rep = "\r"; break;
    case 't': rep = "\t"; break;
    case 'u': break;
    default: return fail(ps, "bad escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
    }
    ps->p += 2;
    if (rep) return sb_add(b, rep, 1) ? fail(ps, "out of memory") : 0;
    unsigned cp = 0; /* set on success; the compiler cannot see that fail() returns 1 */
    if (parse_u_escape(ps, &cp)) return 1;
    char t[4];
    size_t k = utf8_encode(cp, t);
    return sb_add(b, t, k) ? fail(ps, "out of memory") : 0;
}

static int parse_string(parser *ps, char **out, size_t *len) {
    sb b = {0};
    ps->p++; /* opening quote */
    for (;;) {
        if (ps->p >= ps->n) {
            free(b.p);
            return fail(ps, "unterminated string");
        }
        unsigned char c = ps->s[ps->p];
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c < 0x20) {
            free(b.p);
            return fail(ps, "control character 0x%02x in a string", c);
        }
        if (c == '\\') {
            if (parse_escape(ps, &b)) {
                free(b.p);
                return 1;
            }
            continue;
        }
        size_t k = utf8_len(ps->s + ps->p, ps->n - ps->p);
        if (!k) {
            free(b.p);
            return fail(ps, "invalid UTF-8 in a string");
        }
        if (sb_add(&b, (const char *)ps->s + ps->p, k)) goto oom;
        ps->p += k;
    }
    if (!b.p && sb_add(&b, "", 0)) goto oom;
    *out = b.p;
    *len = b.n;
    return 0;
oom:
    free(b.p);
    return fail(ps, "out of memory");
}

static int parse_number(parser *ps, double *out) {
    size_t a = ps->p;
    const unsigned char *s = ps->s;
    size_t p = ps->p;
    if (p < ps->n && s[p] == '-') p++;
    if (p >= ps->n) return fail(ps, "bad number");
    if (s[p] == '0') p++;
    else if (s[p] >= '1' && s[p] <= '9')
        while (p < ps->n && s[p] >= '0' && s[p] <= '9') p++;
    else return fail(ps, "bad number");
    if (p < ps->n && s[p] == '.') {
        p++;
        if (p >= ps->n || s[p] < '0' || s[p] > '9') return fail(ps, "bad number: digits must follow '.'");
        while (p < ps->n && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < ps->n && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < ps->n && (s[p] == '+' || s[p] == '-')) p++;
        if (p >= ps->n || s[p] < '0' || s[p] > '9') return fail(ps, "bad number: digits must follow the exponent");
        while (p < ps->n && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p - a > 63) return fail(ps, "number too long");
    char tmp[64];
    memcpy(tmp, s + a, p - a);
    tmp[p - a] = 0;
    double v = strtod(tmp, NULL);
    if (!isfinite(v)) return fail(ps, "number out of range");
    ps->p = p;
    *out = v;
    return 0;
}

static int parse_value(parser *ps, json_value *v, int depth);

static int push_item(parser *ps, json_value *v, size_t *cap, int object) {
    if (v->n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        json_value *it = realloc(v->items, c * sizeof *it);
        if (!it) return fail(ps, "out of memory");
        v->items = it;
        if (object) {
            char **k = realloc(v->keys, c * sizeof *k);
            if (!k) return fail(ps, "out of memory");
            v->keys = k;
        }
        *cap = c;
    }
    return 0;
}

static int parse_value(parser *ps, json_value *v, int depth) {
    memset(v, 0, sizeof *v);
    skip_ws(ps);
    v->src_off = ps->p;
    if (ps->p >= ps->n) return fail(ps, "unexpected end of input");
    unsigned char c = ps->s[ps->p];
    if (depth > 64) return fail(ps, "nesting deeper than 64 levels");
    if (c == '{' || c == '[') {
        int object = c == '{';
        v->kind = object ? JSON_OBJECT : JSON_ARRAY;
        ps->p++;
        size_t cap = 0;
        skip_ws(ps);
        if (ps->p < ps->n && ps->s[ps->p] == (object ? '}' : ']')) {
            ps->p++;
            return 0;
        }
        for (;;) {
            if (push_item(ps, v, &cap, object)) return 1;
            skip_ws(ps);
            if (object) {
                v->keys[v->n] = NULL;
                if (ps->p >= ps->n || ps->s[ps->p] != '"') return fail(ps, "expected a string key");
                size_t kl;
                if (parse_string(ps, &v->keys[v->n], &kl)) return 1;
                for (size_t i = 0; i < v->n; i++)
                    if (!strcmp(v->keys[i], v->keys[v->n])) {
                        free(v->keys[v->n]);
                        return fail(ps, "repeated key \"%.40s\"", v->keys[i]);
                    }
                skip_ws(ps);
                if (ps->p >= ps->n || ps->s[ps->p] != ':') {
                    free(v->keys[v->n]);
                    return fail(ps, "expected ':'");
                }
                ps->p++;
            }
            int bad = parse_value(ps, &v->items[v->n], depth + 1);
            v->n++; /* counted even on failure, so json_free releases what was built */
            if (bad) return 1;
            skip_ws(ps);
            if (ps->p >= ps->n) return fail(ps, "unexpected end of input in %s", object ? "an object" : "an array");
            if (ps->s[ps->p] == ',') {
                ps->p++;
                continue;
            }
            if (ps->s[ps->p] == (object ? '}' : ']')) {
                ps->p++;
                return 0;
            }
            return fail(ps, "expected ',' or '%c'", object ? '}' : ']');
        }
    }
    if (c == '"') {
        v->kind = JSON_STRING;
        return parse_string(ps, &v->str, &v->len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        v->kind = JSON_NUMBER;
        return parse_number(ps, &v->number);
    }
    static const char *const words[3] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(words[i]);
        if (ps->n - ps->p >= l && !memcmp(ps->s + ps->p, words[i], l)) {
            ps->p += l;
            v->kind = i == 2 ? JSON_NULL : JSON_BOOL;
            v->boolean = i == 0;
            return 0;
        }
    }
    return fail(ps, "unexpected character '%c'", c >= 0x20 && c < 0x7f ? c : '?');
}

int json_parse(const char *text, size_t len, json_value *out, char *err, size_t errlen) {
    parser ps = {(const unsigned char *)text, len, 0, err, errlen, 0};
    if (err && errlen) err[0] = 0;
    memset(out, 0, sizeof *out);
    if (!text) return fail(&ps, "no input");
    if (parse_value(&ps, out, 0)) {
        json_free(out);
        return 1;
    }
    skip_ws(&ps);
    if (ps.p != ps.n) {
        fail(&ps, "unexpected text after the value");
        json_free(out);
        return 1;
    }
    return 0;
}

void json_free(json_value *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        json_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

const json_value *json_get(const json_value *o, const char *key) {
    if (!o || o->kind != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
}

static int put(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *q = realloc(*buf, c);
        if (!q) return 1;
        *buf = q, *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

int json_put_raw(char **buf, size_t *len, size_t *cap, const char *s) { return put(buf, len, cap, s, strlen(s)); }

int json_put_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (put(buf, len, cap, "\"", 1)) return 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char t[8];
        if (c == '"' || c == '\\') t[0] = '\\', t[1] = (char)c, t[2] = 0;
        else if (c == '\n') strcpy(t, "\\n");
        else if (c == '\t') strcpy(t, "\\t");
        else if (c == '\r') strcpy(t, "\\r");
        else if (c < 0x20) snprintf(t, sizeof t, "\\u%04x", c);
        else t[0] = (char)c, t[1] = 0;
        if (put(buf, len, cap, t, strlen(t))) return 1;
    }
    return put(buf, len, cap, "\"", 1);
}
