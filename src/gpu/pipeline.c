/* Pipelines: the embedded shader sources, the //!include expander, the read-only to
 * read_write rewrite, the pipeline cache, bind groups. */
#include "gpu/gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ shaders and pipelines */

extern const struct wgml_shader_source {
    const char *name;
    const char *source;
} wgml_shader_sources[];

const char *gpu_shader_source(const char *name) {
    for (const struct wgml_shader_source *s = wgml_shader_sources; s->name; s++)
        if (strcmp(s->name, name) == 0) return s->source;
    return NULL;
}

/* Shared WGSL: a line "//!include NAME" in a kernel is replaced by the embedded NAME.wgsl
 * (which may include others, to a depth of 4; each file at most once per kernel). Returns a
 * malloc'd copy; NULL with the error set when NAME is unknown or memory runs out. */
#define INCLUDE_MARK "//!include "
typedef struct inc_buf {
    char *p;
    size_t n, cap;
    const char *seen[16];
    int n_seen;
} inc_buf;

static bool inc_put(inc_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

static wgml_status inc_expand(wgml_ctx *ctx, inc_buf *b, const char *kernel, const char *src, int depth) {
    for (const char *line = src; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        if (strncmp(line, INCLUDE_MARK, sizeof INCLUDE_MARK - 1) == 0) {
            const char *arg = line + sizeof INCLUDE_MARK - 1;
            size_t nl = len - (sizeof INCLUDE_MARK - 1);
            while (nl > 0 && (arg[nl - 1] == '\n' || arg[nl - 1] == ' ')) nl--;
            char name[64];
            if (nl == 0 || nl >= sizeof name)
                return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s': a malformed %sline", kernel, INCLUDE_MARK);
            memcpy(name, arg, nl);
            name[nl] = 0;
            const char *inc = gpu_shader_source(name);
            if (!inc) return wgml_set_error(ctx, WGML_ERR_ARG, "kernel '%s' includes '%s', which is not embedded", kernel, name);
            bool seen = false;
            for (int i = 0; i < b->n_seen; i++) seen = seen || b->seen[i] == inc;
            if (!seen) {
                if (depth >= 4 || b->n_seen >= 16)
                    return wgml_set_error(ctx, WGML_ERR_LIMIT, "kernel '%s': includes nested too deep at '%s'", kernel, name);
                b->seen[b->n_seen++] = inc;
                wgml_status s = inc_expand(ctx, b, kernel, inc, depth + 1);
                if (s) return s;
                if (!inc_put(b, "\n", 1)) return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
            }
        } else if (!inc_put(b, line, len)) {
            return wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        }
        line += len;
    }
    return WGML_OK;
}

static char *expand_includes(wgml_ctx *ctx, const char *kernel, const char *src) {
    inc_buf b = {0};
    if (!inc_put(&b, "", 0)) {
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    if (inc_expand(ctx, &b, kernel, src, 0)) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* Returns a copy of code with every "var<storage, read>" made "var<storage, read_write>". */
static char *rewrite_read_only(const char *code) {
    static const char from[] = "var<storage, read>", to[] = "var<storage, read_write>";
    size_t count = 0, nf = sizeof from - 1, nt = sizeof to - 1;
    for (const char *p = strstr(code, from); p; p = strstr(p + nf, from)) count++;
    char *out = malloc(strlen(code) + count * (nt - nf) + 1);
    if (!out) return NULL;
    char *o = out;
    const char *p = code;
    for (const char *q = strstr(p, from); q; q = strstr(p, from)) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, nt);
        o += nt;
        p = q + nf;
    }
    strcpy(o, p);
    return out;
}

/* The WGSL that is compiled for kernel `shader` (source raw): the platform's enable directives,
 * prelude, a newline, the source
 * with its includes expanded, and with all_writable every read-only storage binding made
 * read_write. Malloc'd; NULL with the error set. */
static char *kernel_code(wgml_ctx *ctx, const char *shader, const char *raw, const char *prelude, bool all_writable) {
    char *src = expand_includes(ctx, shader, raw);
    /* the platform's enable directives first (Tint wants `enable subgroups;`, naga refuses it) */
    const char *en = native_wgsl_enables(ctx->caps.subgroups && src && (strstr(src, "subgroup") || strstr(prelude, "subgroup")));
    size_t n0 = strlen(en), n1 = strlen(prelude), n2 = src ? strlen(src) : 0;
    char *code = src ? malloc(n0 + n1 + n2 + 2) : NULL;
    if (!code) {
        if (src) wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        free(src);
        return NULL;
    }
    memcpy(code, en, n0);
    memcpy(code + n0, prelude, n1);
    code[n0 + n1] = '\n';
    memcpy(code + n0 + n1 + 1, src, n2 + 1);
    free(src);
    if (all_writable) {
        char *rw = rewrite_read_only(code);
        free(code);
        code = rw;
        if (!code) {
            wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
            return NULL;
        }
    }
    return code;
}

/* Compiles code into a compute pipeline (entry "main") whose one bind group layout has nb
 * bindings: n_ro read-only storage (read-write with all_writable), n_rw read-write storage,
 * then a uniform. The pipeline and *layout_out, or NULL with the error set. */
static WGPUComputePipeline compile_pipeline(wgml_ctx *ctx, const char *shader, const char *code, int n_ro, int n_rw,
                                            int nb, bool all_writable, WGPUBindGroupLayout *layout_out) {
    WGPUBindGroupLayoutEntry entries[16];
    for (int i = 0; i < nb; i++) {
        WGPUBindGroupLayoutEntry e = WGPU_BIND_GROUP_LAYOUT_ENTRY_INIT;
        e.binding = (uint32_t)i;
        e.visibility = WGPUShaderStage_Compute;
        e.buffer.type = i < n_ro && !all_writable ? WGPUBufferBindingType_ReadOnlyStorage
                        : i < n_ro + n_rw ? WGPUBufferBindingType_Storage
                                          : WGPUBufferBindingType_Uniform;
        entries[i] = e;
    }
    gpu_scope_push(ctx);
    WGPUShaderSourceWGSL wgsl = WGPU_SHADER_SOURCE_WGSL_INIT;
    wgsl.code = sv(code);
    WGPUShaderModuleDescriptor md = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
    md.nextInChain = &wgsl.chain;
    md.label = sv(shader);
    WGPUShaderModule mod = native_create_shader_module(ctx->device, &md, ctx->checked_shaders);
    WGPUBindGroupLayoutDescriptor ld = WGPU_BIND_GROUP_LAYOUT_DESCRIPTOR_INIT;
    ld.entryCount = (size_t)nb;
    ld.entries = entries;
    WGPUBindGroupLayout bgl = wgpuDeviceCreateBindGroupLayout(ctx->device, &ld);
    WGPUPipelineLayoutDescriptor pld = WGPU_PIPELINE_LAYOUT_DESCRIPTOR_INIT;
    pld.bindGroupLayoutCount = 1;
    pld.bindGroupLayouts = &bgl;
    WGPUPipelineLayout pl = wgpuDeviceCreatePipelineLayout(ctx->device, &pld);
    WGPUComputePipelineDescriptor cd = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
    cd.label = sv(shader);
    cd.layout = pl;
    cd.compute.module = mod;
    cd.compute.entryPoint = sv("main");
    WGPUComputePipeline pipe = wgpuDeviceCreateComputePipeline(ctx->device, &cd);
    char during[128];
    snprintf(during, sizeof during, "compiling kernel '%s'", shader);
    wgml_status s = gpu_scope_pop(ctx, during);
    wgpuPipelineLayoutRelease(pl);
    wgpuShaderModuleRelease(mod);
    if (s || !pipe) {
        if (pipe) wgpuComputePipelineRelease(pipe);
        wgpuBindGroupLayoutRelease(bgl);
        if (!s) wgml_set_error(ctx, WGML_ERR_GPU, "%s failed", during);
        return NULL;
    }
    *layout_out = bgl;
    return pipe;
}

/* WGML_LOG_PIPELINES=1: one line on stderr per pipeline created (the kernel, the size of its WGSL,
 * the time its creation took), to find what a first run or a cold test spends compiling. A driver
 * may compile later, at the pipeline's first dispatch (lavapipe does): there the time is not in
 * this line. */
static void log_compile(const char *shader, const char *code, uint64_t ns) {
    static int on = -1;
    if (on < 0) on = getenv("WGML_LOG_PIPELINES") && atoi(getenv("WGML_LOG_PIPELINES")) > 0;
    if (on) fprintf(stderr, "wgml: pipeline %s (%zu bytes of WGSL) created in %.1f ms\n", shader, strlen(code), ns / 1e6);
}

gpu_pipeline *gpu_pipeline_get(wgml_ctx *ctx, const char *shader, const char *prelude, int n_ro, int n_rw,
                               bool has_uniform, bool all_writable) {
    if (gpu_check_alive(ctx)) return NULL;
    if (!prelude) prelude = "";
    size_t klen = strlen(shader) + strlen(prelude) + 64;
    char *key = malloc(klen);
    if (!key) {
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    snprintf(key, klen, "%s|%d|%d|%d|%d|%s", shader, n_ro, n_rw, (int)has_uniform, (int)all_writable, prelude);
    for (gpu_pipeline *p = ctx->pipelines; p; p = p->next)
        if (strcmp(p->key, key) == 0) {
            free(key);
            return p;
        }
    const char *raw = gpu_shader_source(shader);
    if (!raw) {
        wgml_set_error(ctx, WGML_ERR_ARG, "no WGSL kernel named '%s' is embedded", shader);
        free(key);
        return NULL;
    }
    int nb = n_ro + n_rw + (has_uniform ? 1 : 0);
    if ((uint32_t)(n_ro + n_rw) > ctx->caps.max_storage_per_stage) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "kernel '%s' needs %d storage buffers; the device allows %u", shader,
                       n_ro + n_rw, ctx->caps.max_storage_per_stage);
        free(key);
        return NULL;
    }
    char *code = kernel_code(ctx, shader, raw, prelude, all_writable);
    if (!code) {
        free(key);
        return NULL;
    }
    WGPUBindGroupLayout bgl = NULL;
    uint64_t t0 = gpu_now_ns();
    WGPUComputePipeline pipe = compile_pipeline(ctx, shader, code, n_ro, n_rw, nb, all_writable, &bgl);
    log_compile(shader, code, gpu_now_ns() - t0);
    free(code);
    if (!pipe) {
        free(key);
        return NULL;
    }
    gpu_pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        wgpuComputePipelineRelease(pipe);
        wgpuBindGroupLayoutRelease(bgl);
        free(key);
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    p->key = key;
    p->pipeline = pipe;
    p->layout = bgl;
    p->n_bindings = nb;
    p->next = ctx->pipelines;
    ctx->pipelines = p;
    return p;
}

gpu_bind_group *gpu_bind_group_create(wgml_ctx *ctx, gpu_pipeline *p, const gpu_range *ranges, int n) {
    if (n != p->n_bindings) {
        wgml_set_error(ctx, WGML_ERR_ARG, "bind group has %d entries; the kernel takes %d", n, p->n_bindings);
        return NULL;
    }
    WGPUBindGroupEntry e[16];
    for (int i = 0; i < n; i++) {
        WGPUBindGroupEntry x = WGPU_BIND_GROUP_ENTRY_INIT;
        x.binding = (uint32_t)i;
        x.buffer = ranges[i].buf->buf;
        x.offset = ranges[i].offset;
        x.size = ranges[i].size;
        e[i] = x;
    }
    WGPUBindGroupDescriptor d = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
    d.layout = p->layout;
    d.entryCount = (size_t)n;
    d.entries = e;
    gpu_bind_group *bg = calloc(1, sizeof *bg);
    if (!bg) {
        wgml_set_error(ctx, WGML_ERR_OOM, "out of host memory");
        return NULL;
    }
    gpu_scope_push(ctx);
    bg->bg = wgpuDeviceCreateBindGroup(ctx->device, &d);
    if (gpu_scope_pop(ctx, "creating a bind group") || !bg->bg) {
        if (bg->bg) wgpuBindGroupRelease(bg->bg);
        free(bg);
        return NULL;
    }
    return bg;
}

void gpu_pipelines_release(wgml_ctx *ctx) {
    while (ctx->pipelines) {
        gpu_pipeline *p = ctx->pipelines;
        ctx->pipelines = p->next;
        wgpuComputePipelineRelease(p->pipeline);
        wgpuBindGroupLayoutRelease(p->layout);
        free(p->key);
        free(p);
    }
}

void gpu_bind_group_release(gpu_bind_group *bg) {
    if (!bg) return;
    wgpuBindGroupRelease(bg->bg);
    free(bg);
}
