/* wgpu-native specifics: instance options, adapter enumeration, polling. */
#include "gpu/native.h"
#include <wgpu.h>

#include <stdio.h>
#include <stdlib.h>

static void log_to_stderr(WGPULogLevel level, WGPUStringView msg, void *userdata) {
    (void)userdata;
    fprintf(stderr, "wgpu[%d]: %.*s\n", (int)level, (int)(msg.data ? msg.length : 0), msg.data ? msg.data : "");
}

WGPUInstance native_create_instance(void) {
    /* WGML_WGPU_LOG=1..5 (error..trace) forwards wgpu-native's own log, which holds the full
     * text of shader compilation errors */
    const char *log = getenv("WGML_WGPU_LOG");
    if (log && atoi(log) > 0) {
        wgpuSetLogCallback(log_to_stderr, NULL);
        wgpuSetLogLevel((WGPULogLevel)atoi(log));
    }
    WGPUInstanceExtras extras = {0};
    extras.chain.sType = (WGPUSType)WGPUSType_InstanceExtras;
    extras.backends = WGPUInstanceBackend_Primary;
    extras.flags = WGPUInstanceFlag_Default;
    WGPUInstanceDescriptor d = WGPU_INSTANCE_DESCRIPTOR_INIT;
    d.nextInChain = &extras.chain;
    return wgpuCreateInstance(&d);
}

size_t native_enumerate_adapters(WGPUInstance instance, WGPUAdapter *out, size_t max) {
    WGPUInstanceEnumerateAdapterOptions opt = {0};
    opt.backends = WGPUInstanceBackend_Primary;
    size_t n = wgpuInstanceEnumerateAdapters(instance, &opt, NULL);
    if (n == 0) return 0;
    WGPUAdapter all[64];
    if (n > 64) n = 64;
    n = wgpuInstanceEnumerateAdapters(instance, &opt, all);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept < max) out[kept++] = all[i];
        else wgpuAdapterRelease(all[i]);
    }
    return kept;
}

void native_poll(WGPUDevice device, bool wait) { wgpuDevicePoll(device, wait, NULL); }
bool native_upload_wait(void) { return true; }

WGPUFeatureName native_feature_subgroups(void) { return (WGPUFeatureName)WGPUNativeFeature_Subgroup; }

WGPUFeatureName native_feature_f32_atomics(void) { return (WGPUFeatureName)WGPUNativeFeature_ShaderFloat32Atomic; }

/* naga takes dot4I8Packed on every backend (the driver's instruction where Vulkan offers
 * VK_KHR_shader_integer_dot_product, else a polyfill); wgpu-native 29 does not implement
 * wgpuInstanceHasWGSLLanguageFeature (it panics), so the answer is naga's. */
bool native_wgsl_dot4i8(WGPUInstance instance) {
    (void)instance;
    return true;
}

#define EXPECTED_VERSION 0x1D000101u /* wgpu-native 29.0.1.1 from PyPI wgpu==0.32.0 */

const char *native_name(void) { return "wgpu-native"; }
uint32_t native_version(void) { return wgpuGetVersion(); }

const char *native_version_error(void) {
    static char msg[160];
    uint32_t v = wgpuGetVersion();
    if (v == EXPECTED_VERSION) return NULL;
    snprintf(msg, sizeof msg, "wgpu-native version %u.%u.%u.%u found, expected 29.0.1.1 (PyPI wgpu==0.32.0); run scripts/setup.sh",
             v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255);
    return msg;
}

/* naga (wgpu-native 29) rejects `enable subgroups;` ("not yet supported") and takes the subgroup
 * builtins without it, given the device's feature. */
const char *native_wgsl_enables(bool subgroups) {
    (void)subgroups;
    return "";
}

float native_timestamp_period(WGPUQueue queue) { return wgpuQueueGetTimestampPeriod(queue); }

WGPUShaderModule native_create_shader_module(WGPUDevice device, const WGPUShaderModuleDescriptor *d, bool checked) {
    if (checked) return wgpuDeviceCreateShaderModule(device, d);
    return wgpuDeviceCreateShaderModuleTrusted(device, d, WGPUShaderRuntimeChecks_None);
}
