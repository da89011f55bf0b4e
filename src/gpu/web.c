/* The browser's side of the platform seam (native.h): the same functions as native.c, for a
 * wasm32 build whose webgpu.h calls are answered by web/webgpu.js on navigator.gpu (Dawn in
 * Chromium). Only standard webgpu.h is used here. A wait in C (native_poll with wait, the
 * waits of device.c) becomes wgpuInstanceProcessEvents, which webgpu.js implements as a
 * suspension of the wasm stack (JavaScript Promise Integration) until a GPU promise settles:
 * the C stays synchronous and the page's event loop keeps running. */
#include "gpu/native.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* One instance per process: the browser has one navigator.gpu. */
static WGPUInstance the_instance;

static const char *struct_layout(void);
/* web/webgpu.js: compares the struct layout it was written for with the compiler's (and stops
 * the program with the differences when they differ). */
__attribute__((import_module("env"), import_name("wgmlWebCheckLayout"))) void wgml_web_check_layout(const char *layout);

WGPUInstance native_create_instance(void) {
    if (!the_instance) {
        wgml_web_check_layout(struct_layout());
        the_instance = wgpuCreateInstance(NULL);
    }
    else wgpuInstanceAddRef(the_instance);
    return the_instance;
}

typedef struct adapter_wait {
    bool done;
    WGPUAdapter adapter;
} adapter_wait;

static void on_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView msg, void *u1, void *u2) {
    (void)msg; (void)u2;
    adapter_wait *w = u1;
    w->adapter = status == WGPURequestAdapterStatus_Success ? adapter : NULL;
    w->done = true;
}

/* The browser offers one adapter (navigator.gpu.requestAdapter). */
size_t native_enumerate_adapters(WGPUInstance instance, WGPUAdapter *out, size_t max) {
    if (max == 0) return 0;
    adapter_wait w = {0};
    WGPURequestAdapterOptions opt = WGPU_REQUEST_ADAPTER_OPTIONS_INIT;
    opt.powerPreference = WGPUPowerPreference_HighPerformance;
    WGPURequestAdapterCallbackInfo cb = WGPU_REQUEST_ADAPTER_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = on_adapter;
    cb.userdata1 = &w;
    wgpuInstanceRequestAdapter(instance, &opt, cb);
    while (!w.done) wgpuInstanceProcessEvents(instance);
    if (!w.adapter) return 0;
    out[0] = w.adapter;
    return 1;
}

static void on_work_done(WGPUQueueWorkDoneStatus status, WGPUStringView msg, void *u1, void *u2) {
    (void)status; (void)msg; (void)u2;
    *(volatile bool *)u1 = true;
}

/* One turn of events; with wait, turns until everything submitted so far has finished (or
 * forever if the device is lost first: the callers wait only on a live device). */
void native_poll(WGPUDevice device, bool wait) {
    if (!the_instance) return;
    volatile bool done = !wait;
    if (wait) {
        WGPUQueue q = wgpuDeviceGetQueue(device);
        WGPUQueueWorkDoneCallbackInfo cb = WGPU_QUEUE_WORK_DONE_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_AllowProcessEvents;
        cb.callback = on_work_done;
        cb.userdata1 = (void *)&done;
        wgpuQueueOnSubmittedWorkDone(q, cb);
        wgpuQueueRelease(q);
    }
    do wgpuInstanceProcessEvents(the_instance);
    while (!done);
}

/* The upload flush only submits here: Chromium copies a queue write out of wasm memory at the
 * call, so there is no staging to wait for, and a wait would suspend the wasm stack (JSPI) once
 * per 64 MiB of a model's weights. */
bool native_upload_wait(void) { return false; }

/* Chromium names subgroups by the standard feature; f32 atomics are not in WebGPU (0: no
 * adapter has it). */
WGPUFeatureName native_feature_subgroups(void) { return WGPUFeatureName_Subgroups; }
WGPUFeatureName native_feature_f32_atomics(void) { return (WGPUFeatureName)0; }

/* the browser's navigator.gpu.wgslLanguageFeatures (web/webgpu.js) */
bool native_wgsl_dot4i8(WGPUInstance instance) {
    return wgpuInstanceHasWGSLLanguageFeature(instance, WGPUWGSLLanguageFeatureName_Packed4x8IntegerDotProduct);
}

const char *native_name(void) { return "browser WebGPU (web/webgpu.js)"; }
uint32_t native_version(void) { return 0; }
const char *native_version_error(void) { return NULL; }

/* Browser timestamps are nanoseconds. */
float native_timestamp_period(WGPUQueue queue) {
    (void)queue;
    return 1.0f;
}

/* Browsers always apply their robustness transforms; there is no trusted path. */
WGPUShaderModule native_create_shader_module(WGPUDevice device, const WGPUShaderModuleDescriptor *d, bool checked) {
    (void)checked;
    return wgpuDeviceCreateShaderModule(device, d);
}

/* Tint (Dawn) wants `enable subgroups;` before subgroup builtins; naga rejects it. */
const char *native_wgsl_enables(bool subgroups) { return subgroups ? "enable subgroups;\n" : ""; }

/* ---- the struct layout web/webgpu.js reads and writes ----
 * web/webgpu.js holds the offsets of every field it touches; before the first WebGPU call it
 * compares them with this table (as the compiler laid the structs out) and refuses to run on
 * any difference. Entries: "Struct.field" and its offset, or "Struct" and its size. */
#define F(s, f) {#s "." #f, offsetof(s, f)}
#define Z(s) {#s, sizeof(s)}
static const struct {
    const char *name;
    size_t value;
} layout[] = {
    Z(WGPUStringView), F(WGPUStringView, data), F(WGPUStringView, length), F(WGPUChainedStruct, next),
    F(WGPUChainedStruct, sType), F(WGPUBufferDescriptor, label), F(WGPUBufferDescriptor, usage),
    F(WGPUBufferDescriptor, size), F(WGPUBufferDescriptor, mappedAtCreation),
    F(WGPUShaderModuleDescriptor, nextInChain), F(WGPUShaderModuleDescriptor, label),
    F(WGPUShaderSourceWGSL, chain), F(WGPUShaderSourceWGSL, code), Z(WGPUBindGroupLayoutEntry),
    F(WGPUBindGroupLayoutEntry, binding), F(WGPUBindGroupLayoutEntry, visibility),
    F(WGPUBindGroupLayoutEntry, buffer), F(WGPUBufferBindingLayout, type),
    F(WGPUBufferBindingLayout, hasDynamicOffset), F(WGPUBufferBindingLayout, minBindingSize),
    F(WGPUBindGroupLayoutDescriptor, label), F(WGPUBindGroupLayoutDescriptor, entryCount),
    F(WGPUBindGroupLayoutDescriptor, entries), F(WGPUPipelineLayoutDescriptor, label),
    F(WGPUPipelineLayoutDescriptor, bindGroupLayoutCount), F(WGPUPipelineLayoutDescriptor, bindGroupLayouts),
    F(WGPUComputePipelineDescriptor, label), F(WGPUComputePipelineDescriptor, layout),
    F(WGPUComputePipelineDescriptor, compute), F(WGPUComputeState, module), F(WGPUComputeState, entryPoint),
    F(WGPUComputeState, constantCount), Z(WGPUBindGroupEntry), F(WGPUBindGroupEntry, binding),
    F(WGPUBindGroupEntry, buffer), F(WGPUBindGroupEntry, offset), F(WGPUBindGroupEntry, size),
    F(WGPUBindGroupDescriptor, label), F(WGPUBindGroupDescriptor, layout),
    F(WGPUBindGroupDescriptor, entryCount), F(WGPUBindGroupDescriptor, entries),
    F(WGPUComputePassDescriptor, label), F(WGPUComputePassDescriptor, timestampWrites),
    F(WGPUPassTimestampWrites, querySet), F(WGPUPassTimestampWrites, beginningOfPassWriteIndex),
    F(WGPUPassTimestampWrites, endOfPassWriteIndex), F(WGPUQuerySetDescriptor, label),
    F(WGPUQuerySetDescriptor, type), F(WGPUQuerySetDescriptor, count), F(WGPUBufferMapCallbackInfo, mode),
    F(WGPUBufferMapCallbackInfo, callback), F(WGPUBufferMapCallbackInfo, userdata1),
    F(WGPUBufferMapCallbackInfo, userdata2), F(WGPUUncapturedErrorCallbackInfo, callback),
    F(WGPUUncapturedErrorCallbackInfo, userdata1), F(WGPUUncapturedErrorCallbackInfo, userdata2),
    F(WGPUDeviceDescriptor, label), F(WGPUDeviceDescriptor, requiredFeatureCount),
    F(WGPUDeviceDescriptor, requiredFeatures), F(WGPUDeviceDescriptor, requiredLimits),
    F(WGPUDeviceDescriptor, deviceLostCallbackInfo), F(WGPUDeviceDescriptor, uncapturedErrorCallbackInfo),
    F(WGPURequestAdapterOptions, powerPreference), Z(WGPUAdapterInfo), F(WGPUAdapterInfo, vendor),
    F(WGPUAdapterInfo, architecture), F(WGPUAdapterInfo, device), F(WGPUAdapterInfo, description),
    F(WGPUAdapterInfo, backendType), F(WGPUAdapterInfo, adapterType), F(WGPUAdapterInfo, vendorID),
    F(WGPUAdapterInfo, deviceID), F(WGPUAdapterInfo, subgroupMinSize), F(WGPUAdapterInfo, subgroupMaxSize),
    Z(WGPULimits), F(WGPULimits, maxBindGroups), F(WGPULimits, maxStorageBuffersPerShaderStage),
    F(WGPULimits, maxUniformBuffersPerShaderStage), F(WGPULimits, maxUniformBufferBindingSize),
    F(WGPULimits, maxStorageBufferBindingSize), F(WGPULimits, minUniformBufferOffsetAlignment),
    F(WGPULimits, minStorageBufferOffsetAlignment), F(WGPULimits, maxBufferSize),
    F(WGPULimits, maxComputeWorkgroupStorageSize), F(WGPULimits, maxComputeInvocationsPerWorkgroup),
    F(WGPULimits, maxComputeWorkgroupSizeX), F(WGPULimits, maxComputeWorkgroupSizeY),
    F(WGPULimits, maxComputeWorkgroupSizeZ), F(WGPULimits, maxComputeWorkgroupsPerDimension),
    F(WGPULimits, maxBindingsPerBindGroup), F(WGPULimits, maxDynamicStorageBuffersPerPipelineLayout),
    F(WGPULimits, maxDynamicUniformBuffersPerPipelineLayout),
};
#undef F
#undef Z

/* "name=value;" for every entry of layout */
static const char *struct_layout(void) {
    static char text[4096];
    size_t n = 0;
    for (size_t i = 0; i < sizeof layout / sizeof layout[0] && n < sizeof text; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s=%zu;", layout[i].name, layout[i].value);
    return n < sizeof text ? text : "";
}
