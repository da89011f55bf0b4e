/* Pipelines: the pipeline cache and bind groups. The code a kernel compiles from:
 * wgsl_source.c. */
#include "gpu/gpu_internal.h"
#include "gpu/wgsl_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ pipelines */

WGPUComputePipeline gpu_make_pipeline(WGPUDevice device, const char *label, const char *code, int n_ro, int n_rw,
                                      int nb, bool all_writable, bool checked, WGPUBindGroupLayout *layout_out) {
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
    WGPUShaderSourceWGSL wgsl = WGPU_SHADER_SOURCE_WGSL_INIT;
    wgsl.code = sv(code);
    WGPUShaderModuleDescriptor md = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
    md.nextInChain = &wgsl.chain;
    md.label = sv(label);
    WGPUShaderModule mod = native_create_shader_module(device, &md, checked);
    WGPUBindGroupLayoutDescriptor ld = WGPU_BIND_GROUP_LAYOUT_DESCRIPTOR_INIT;
    ld.entryCount = (size_t)nb;
    ld.entries = entries;
    WGPUBindGroupLayout bgl = wgpuDeviceCreateBindGroupLayout(device, &ld);
    WGPUPipelineLayoutDescriptor pld = WGPU_PIPELINE_LAYOUT_DESCRIPTOR_INIT;
    pld.bindGroupLayoutCount = 1;
    pld.bindGroupLayouts = &bgl;
    WGPUPipelineLayout pl = wgpuDeviceCreatePipelineLayout(device, &pld);
    WGPUComputePipelineDescriptor cd = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
    cd.label = sv(label);
    cd.layout = pl;
    cd.compute.module = mod;
    cd.compute.entryPoint = sv("main");
    WGPUComputePipeline pipe = wgpuDeviceCreateComputePipeline(device, &cd);
    wgpuPipelineLayoutRelease(pl);
    wgpuShaderModuleRelease(mod);
    *layout_out = bgl;
    return pipe;
}

/* gpu_make_pipeline on the context's device, inside an error scope: the pipeline and
 * *layout_out, or NULL with the error set. */
static WGPUComputePipeline compile_pipeline(wgml_ctx *ctx, const char *shader, const char *code, int n_ro, int n_rw,
                                            int nb, bool all_writable, WGPUBindGroupLayout *layout_out) {
    gpu_scope_push(ctx);
    WGPUBindGroupLayout bgl = NULL;
    WGPUComputePipeline pipe =
        gpu_make_pipeline(ctx->device, shader, code, n_ro, n_rw, nb, all_writable, ctx->checked_shaders, &bgl);
    char during[128];
    snprintf(during, sizeof during, "compiling kernel '%s'", shader);
    wgml_status s = gpu_scope_pop(ctx, during);
    if (s || !pipe) {
        if (pipe) wgpuComputePipelineRelease(pipe);
        if (bgl) wgpuBindGroupLayoutRelease(bgl);
        if (!s) wgml_set_error(ctx, WGML_ERR_GPU, "%s failed", during);
        return NULL;
    }
    *layout_out = bgl;
    return pipe;
}

int gpu_log_pipelines(void) {
    static int level = -1;
    if (level < 0) level = getenv("WGML_LOG_PIPELINES") ? atoi(getenv("WGML_LOG_PIPELINES")) : 0;
    return level;
}

/* WGML_LOG_PIPELINES=1: one line on stderr per pipeline created (the kernel, the size of its WGSL,
 * the time its creation took), to find what a first run or a cold test spends compiling. A driver
 * may compile later, at the pipeline's first dispatch (lavapipe does): =2 times that too
 * (submit.c); =3 also prints each pipeline's prelude (the constants that make it a variant). */
static void log_compile(const char *shader, const char *prelude, size_t wgsl_bytes, uint64_t ns) {
    if (gpu_log_pipelines() > 0)
        fprintf(stderr, "wgml: pipeline %s (%zu bytes of WGSL) created in %.1f ms\n", shader, wgsl_bytes, ns / 1e6);
    if (gpu_log_pipelines() > 2) fprintf(stderr, "%s%s", prelude, *prelude ? "\n" : "");
}

gpu_pipeline *gpu_pipeline_get(wgml_ctx *ctx, const char *shader, const char *prelude, int n_ro, int n_rw,
                               bool has_uniform, bool all_writable, bool ahead) {
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
            if (ahead) gpu_ahead_touch(ctx, p);
            return p;
        }
    int nb = n_ro + n_rw + (has_uniform ? 1 : 0);
    if ((uint32_t)(n_ro + n_rw) > ctx->caps.max_storage_per_stage) {
        wgml_set_error(ctx, WGML_ERR_LIMIT, "kernel '%s' needs %d storage buffers; the device allows %u", shader,
                       n_ro + n_rw, ctx->caps.max_storage_per_stage);
        free(key);
        return NULL;
    }
    char *code = gpu_kernel_code(ctx, shader, prelude, &(gpu_layout){n_ro, n_rw, has_uniform, all_writable});
    if (!code) {
        free(key);
        return NULL;
    }
    WGPUBindGroupLayout bgl = NULL;
    uint64_t t0 = gpu_now_ns();
    WGPUComputePipeline pipe = compile_pipeline(ctx, shader, code, n_ro, n_rw, nb, all_writable, &bgl);
    size_t wgsl_bytes = strlen(code);
    log_compile(shader, prelude, wgsl_bytes, gpu_now_ns() - t0);
    gpu_pipeline *p = pipe ? calloc(1, sizeof *p) : NULL;
    if (!pipe) {
        free(code);
        free(key);
        return NULL;
    }
    if (!p) {
        free(code);
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
    p->wgsl_bytes = wgsl_bytes;
    p->next = ctx->pipelines;
    ctx->pipelines = p;
    if (ahead) gpu_ahead_push(ctx, p, shader, code, n_ro, n_rw, has_uniform, all_writable);
    free(code);
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
