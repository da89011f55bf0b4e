/* The only place that calls wgpu-native's own extensions (wgpu.h). Another implementation of
 * webgpu.h (Dawn) would replace native.c and nothing else. */
#ifndef WGML_GPU_NATIVE_H
#define WGML_GPU_NATIVE_H
#include <stdbool.h>
#include <stddef.h>
#include <webgpu.h>

WGPUInstance native_create_instance(void);
size_t native_enumerate_adapters(WGPUInstance instance, WGPUAdapter *out, size_t max);
/* Processes callbacks; with wait, blocks until the queue is empty. True when it is empty. */
bool native_poll(WGPUDevice device, bool wait);
WGPUFeatureName native_feature_f32_atomics(void);
/* wgpu-native lists subgroup support under its own feature number. */
WGPUFeatureName native_feature_subgroups(void);
uint32_t native_version(void);
/* A shader module; with checked false, without naga's runtime checks (index clamping and loop
 * bounding), which otherwise stop the driver from unrolling loops and keeping register tiles
 * in registers. */
WGPUShaderModule native_create_shader_module(WGPUDevice device, const WGPUShaderModuleDescriptor *d, bool checked);
/* Nanoseconds per timestamp tick. */
float native_timestamp_period(WGPUQueue queue);
#endif
