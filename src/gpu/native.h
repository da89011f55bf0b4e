/* The platform seam: what differs between implementations of webgpu.h. native.c is
 * wgpu-native's (the only place that calls its extensions, wgpu.h); web.c is the browser's (the
 * wasm32 build, on web/webgpu.js). Nothing else in wgml knows which one it runs on. */
#ifndef WGML_GPU_NATIVE_H
#define WGML_GPU_NATIVE_H
#include <stdbool.h>
#include <stddef.h>
#include <webgpu.h>

WGPUInstance native_create_instance(void);
size_t native_enumerate_adapters(WGPUInstance instance, WGPUAdapter *out, size_t max);
/* Processes callbacks; with wait, blocks until the work submitted so far has finished. (Not a
 * test of "queue empty": wgpu-native's answer to that came before lavapipe had run the work;
 * gpu_wait_flag waits on the queue's work-done answer.) */
void native_poll(WGPUDevice device, bool wait);
WGPUFeatureName native_feature_f32_atomics(void);
/* Whether gpu_write's upload flush waits for the GPU: wgpu-native frees a queue write's staging
 * only once its submit has run; in the browser the flush only submits (see web.c). */
bool native_upload_wait(void);
/* Whether WGSL's packed_4x8_integer_dot_product (dot4I8Packed) compiles here. */
bool native_wgsl_dot4i8(WGPUInstance instance);
/* wgpu-native lists subgroup support under its own feature number. */
WGPUFeatureName native_feature_subgroups(void);
/* The implementation's name and version (0 where it has none), for wgml_device_print. */
const char *native_name(void);
uint32_t native_version(void);
/* NULL, or why this implementation's version cannot be used. */
const char *native_version_error(void);
/* WGSL enable directives a kernel that uses subgroups needs first ("" where none are). */
const char *native_wgsl_enables(bool subgroups);
/* A shader module; with checked false, without naga's runtime checks (index clamping and loop
 * bounding), which otherwise stop the driver from unrolling loops and keeping register tiles
 * in registers. */
WGPUShaderModule native_create_shader_module(WGPUDevice device, const WGPUShaderModuleDescriptor *d, bool checked);
/* Nanoseconds per timestamp tick. */
float native_timestamp_period(WGPUQueue queue);
#endif
