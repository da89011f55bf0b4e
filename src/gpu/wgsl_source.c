/* The WGSL a kernel compiles from: the embedded sources, the //!include expander and the
 * //!bindings generator (wgsl_source.h). */
#include "gpu/wgsl_source.h"

#include "gpu/bytebuf.h"
#include "gpu/gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct wgml_shader_source {
    const char *name;
    const char *source;
} wgml_shader_sources[];

const char *gpu_shader_source(const char *name) {
    for (const struct wgml_shader_source *s = wgml_shader_sources; s->name; s++)
        if (strcmp(s->name, name) == 0) return s->source;
    return NULL;
}

/* ------------------------------------------------------------------ //!include */

/* A line "//!include NAME" is replaced by the embedded NAME.wgsl (which may include others, to
 * a depth of 4; each file at most once per kernel). */
#define INCLUDE_MARK "//!include "

typedef struct includes {
    const char *seen[16];
    int n_seen;
} includes;

static wgml_status inc_expand(wgml_ctx *ctx, bytebuf *b, includes *in, const char *kernel, const char *src, int depth) {
    for (const char *line = src; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        if (strncmp(line, INCLUDE_MARK, sizeof INCLUDE_MARK - 1) != 0) {
            bytebuf_put(b, line, len);
            line += len;
            continue;
        }
        const char *arg = line + sizeof INCLUDE_MARK - 1;
        size_t nl = len - (sizeof INCLUDE_MARK - 1);
        while (nl > 0 && (arg[nl - 1] == '\n' || arg[nl - 1] == ' ')) nl--;
        char name[64];
        if (nl == 0 || nl >= sizeof name)
            return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s': a malformed %sline", kernel, INCLUDE_MARK);
        memcpy(name, arg, nl);
        name[nl] = 0;
        const char *inc = gpu_shader_source(name);
        if (!inc)
            return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s' includes '%s', which is not embedded", kernel, name);
        bool seen = false;
        for (int i = 0; i < in->n_seen; i++) seen = seen || in->seen[i] == inc;
        if (!seen) {
            if (depth >= 4 || in->n_seen >= 16)
                return wgml_set_error(ctx, WGML_ERR_LIMIT, "kernel '%s': includes nested too deep at '%s'", kernel,
                                      name);
            in->seen[in->n_seen++] = inc;
            wgml_status s = inc_expand(ctx, b, in, kernel, inc, depth + 1);
            if (s) return s;
            bytebuf_put(b, "\n", 1);
        }
        line += len;
    }
    return b->oom ? wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory") : WGML_OK;
}

/* ------------------------------------------------------------------ //!bindings */

/* A line "//!bindings read(x: array<f32>, ...) write(...) uniform(p: Params)" declares
 * bindings; a kernel may have several such lines (itself, its includes, its prelude). The
 * generator numbers them as the pipeline's one bind group layout has them (pipeline.c): every
 * read, then every write, then the uniform, each in the order wgsl_source.h gives. */
#define BIND_MARK "//!bindings "
enum { SEC_READ, SEC_WRITE, SEC_UNIFORM, N_SEC };
static const char *const sec_name[N_SEC] = {"read", "write", "uniform"};

typedef struct binding {
    char decl[120]; /* "name: type" */
} binding;

typedef struct bindings {
    binding b[N_SEC][16];
    int n[N_SEC];
} bindings;

static bool is_space(char c) { return c == ' ' || c == '\t'; }

static bool has_text(const char *p, const char *end, const char *t) {
    for (size_t n = strlen(t); (size_t)(end - p) >= n; p++)
        if (memcmp(p, t, n) == 0) return true;
    return false;
}

/* One section "word(entry, entry)" at *pp; advances *pp past it. */
static wgml_status parse_section(wgml_ctx *ctx, const char *kernel, const char **pp, const char *end, bindings *bs) {
    const char *p = *pp;
    int sec = -1;
    for (int i = 0; i < N_SEC; i++) {
        size_t k = strlen(sec_name[i]);
        if ((size_t)(end - p) > k && strncmp(p, sec_name[i], k) == 0 && p[k] == '(') sec = i;
    }
    if (sec < 0)
        return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s': %swants read(...), write(...) or uniform(...) at '%.*s'",
                              kernel, BIND_MARK, (int)(end - p), p);
    p += strlen(sec_name[sec]) + 1;
    for (int angle = 0, paren = 0;;) {
        while (p < end && is_space(*p)) p++;
        const char *e0 = p;
        while (p < end && !((*p == ',' || *p == ')') && angle == 0 && paren == 0)) {
            angle += *p == '<' ? 1 : *p == '>' ? -1 : 0;
            paren += *p == '(' ? 1 : *p == ')' ? -1 : 0;
            p++;
        }
        if (p == end)
            return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s': %s%s( is not closed", kernel, BIND_MARK,
                                  sec_name[sec]);
        size_t n = (size_t)(p - e0);
        while (n > 0 && is_space(e0[n - 1])) n--;
        if (n > 0) {
            if (!memchr(e0, ':', n) || n >= sizeof bs->b[0][0].decl || bs->n[sec] >= 16)
                return wgml_set_error(ctx, WGML_ERR_ARG,
                                      "kernel '%s': %sentry '%.*s' is not 'name: type', too long or one too many",
                                      kernel, BIND_MARK, (int)n, e0);
            snprintf(bs->b[sec][bs->n[sec]++].decl, sizeof bs->b[0][0].decl, "%.*s", (int)n, e0);
        }
        if (*p++ == ')') break;
    }
    *pp = p;
    return WGML_OK;
}

/* Takes the directive lines out of b (each leaves an empty line) into bs. */
static wgml_status take_bindings(wgml_ctx *ctx, const char *kernel, bytebuf *b, bindings *bs) {
    for (char *line = b->p; *line;) {
        char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if (strncmp(line, BIND_MARK, sizeof BIND_MARK - 1) == 0) {
            const char *p = line + sizeof BIND_MARK - 1;
            for (;;) {
                while (p < end && is_space(*p)) p++;
                if (p == end) break;
                wgml_status s = parse_section(ctx, kernel, &p, end, bs);
                if (s) return s;
            }
            memset(line, ' ', (size_t)(end - line));
        } else if (has_text(line, end, "@binding(")) {
            return wgml_set_error(ctx, WGML_ERR_ARG,
                                  "kernel '%s' numbers a binding by hand ('%.*s'): declare it in a %sline", kernel,
                                  (int)(end - line), line, BIND_MARK);
        }
        line = *end ? end + 1 : end;
    }
    return WGML_OK;
}

/* Appends the declarations of bs, numbered; reads are read_write with all_writable. */
static void put_bindings(bytebuf *b, const bindings *bs, bool all_writable) {
    static const char *const var[N_SEC] = {"var<storage, read>", "var<storage, read_write>", "var<uniform>"};
    char head[64];
    int k = 0;
    bytebuf_str(b, "\n");
    for (int sec = 0; sec < N_SEC; sec++)
        for (int i = 0; i < bs->n[sec]; i++) {
            int kind = sec == SEC_READ && all_writable ? SEC_WRITE : sec;
            snprintf(head, sizeof head, "@group(0) @binding(%d) %s ", k++, var[kind]);
            bytebuf_str(b, head);
            bytebuf_str(b, bs->b[sec][i].decl);
            bytebuf_str(b, ";\n");
        }
}

/* ------------------------------------------------------------------ the kernel's code */

char *gpu_kernel_code(wgml_ctx *ctx, const char *shader, const char *prelude, const gpu_layout *layout) {
    const char *raw = gpu_shader_source(shader);
    if (!raw) {
        wgml_set_error(ctx, WGML_ERR_ARG, "no WGSL kernel named '%s' is embedded", shader);
        return NULL;
    }
    bytebuf src = {0}, pre = {0}, code = {0};
    includes in = {0};
    bindings bs = {0};
    bytebuf_put(&src, "", 0);
    bytebuf_put(&pre, "", 0);
    /* the file's bindings are numbered before the prelude's: what an op adds at dispatch follows */
    wgml_status s = inc_expand(ctx, &src, &in, shader, raw, 0);
    if (!s) s = inc_expand(ctx, &pre, &in, shader, prelude ? prelude : "", 0);
    if (!s) s = take_bindings(ctx, shader, &src, &bs);
    if (!s) s = take_bindings(ctx, shader, &pre, &bs);
    int want[N_SEC] = {layout->n_ro, layout->n_rw, layout->has_uniform ? 1 : 0};
    if (!s && (bs.n[0] != want[0] || bs.n[1] != want[1] || bs.n[2] != want[2]))
        s = wgml_set_error(ctx, WGML_ERR_ARG,
                           "kernel '%s' declares %d read, %d write and %d uniform bindings; its op binds %d, %d and %d",
                           shader, bs.n[0], bs.n[1], bs.n[2], want[0], want[1], want[2]);
    if (!s) {
        /* the platform's enable directives first (Tint wants `enable subgroups;`, naga refuses it) */
        bool sg = ctx->caps.subgroups && (strstr(src.p, "subgroup") || strstr(pre.p, "subgroup"));
        bytebuf_str(&code, native_wgsl_enables(sg));
        bytebuf_put(&code, pre.p, pre.n);
        bytebuf_put(&code, "\n", 1);
        bytebuf_put(&code, src.p, src.n);
        put_bindings(&code, &bs, layout->all_writable);
        if (code.oom) s = wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
    }
    free(src.p);
    free(pre.p);
    if (s) {
        free(code.p);
        return NULL;
    }
    return code.p;
}
