// webgpu.h on navigator.gpu: the functions of the standard WebGPU C API that wgml calls, for
// wgml compiled to wasm32 (scripts/build-web.sh). Objects live in a handle table (0 is NULL);
// structs are read from and written to wasm memory at the offsets of LAYOUT, which start-up
// compares with the compiler's (wgml_web_layout in src/gpu/web.c). Callbacks are queued when
// their promise settles and run inside wgpuInstanceProcessEvents, the one import that suspends
// the wasm stack (JavaScript Promise Integration): wgml's waits stay synchronous in C while the
// worker's event loop runs.

// wasm32 offsets of webgpu.h (webgpu-headers as pinned by wgpu-native 29); checked at start-up.
const LAYOUT = {
  "WGPUStringView": 8, "WGPUStringView.data": 0, "WGPUStringView.length": 4,
  "WGPUChainedStruct.next": 0, "WGPUChainedStruct.sType": 4,
  "WGPUBufferDescriptor.label": 4, "WGPUBufferDescriptor.usage": 16, "WGPUBufferDescriptor.size": 24,
  "WGPUBufferDescriptor.mappedAtCreation": 32,
  "WGPUShaderModuleDescriptor.nextInChain": 0, "WGPUShaderModuleDescriptor.label": 4,
  "WGPUShaderSourceWGSL.chain": 0, "WGPUShaderSourceWGSL.code": 8,
  "WGPUBindGroupLayoutEntry": 88, "WGPUBindGroupLayoutEntry.binding": 4, "WGPUBindGroupLayoutEntry.visibility": 8,
  "WGPUBindGroupLayoutEntry.buffer": 24, "WGPUBufferBindingLayout.type": 4,
  "WGPUBufferBindingLayout.hasDynamicOffset": 8, "WGPUBufferBindingLayout.minBindingSize": 16,
  "WGPUBindGroupLayoutDescriptor.label": 4, "WGPUBindGroupLayoutDescriptor.entryCount": 12,
  "WGPUBindGroupLayoutDescriptor.entries": 16,
  "WGPUPipelineLayoutDescriptor.label": 4, "WGPUPipelineLayoutDescriptor.bindGroupLayoutCount": 12,
  "WGPUPipelineLayoutDescriptor.bindGroupLayouts": 16,
  "WGPUComputePipelineDescriptor.label": 4, "WGPUComputePipelineDescriptor.layout": 12,
  "WGPUComputePipelineDescriptor.compute": 16, "WGPUComputeState.module": 4, "WGPUComputeState.entryPoint": 8,
  "WGPUComputeState.constantCount": 16,
  "WGPUBindGroupEntry": 40, "WGPUBindGroupEntry.binding": 4, "WGPUBindGroupEntry.buffer": 8,
  "WGPUBindGroupEntry.offset": 16, "WGPUBindGroupEntry.size": 24,
  "WGPUBindGroupDescriptor.label": 4, "WGPUBindGroupDescriptor.layout": 12, "WGPUBindGroupDescriptor.entryCount": 16,
  "WGPUBindGroupDescriptor.entries": 20,
  "WGPUComputePassDescriptor.label": 4, "WGPUComputePassDescriptor.timestampWrites": 12,
  "WGPUPassTimestampWrites.querySet": 4, "WGPUPassTimestampWrites.beginningOfPassWriteIndex": 8,
  "WGPUPassTimestampWrites.endOfPassWriteIndex": 12,
  "WGPUQuerySetDescriptor.label": 4, "WGPUQuerySetDescriptor.type": 12, "WGPUQuerySetDescriptor.count": 16,
  "WGPUBufferMapCallbackInfo.mode": 4, "WGPUBufferMapCallbackInfo.callback": 8,
  "WGPUBufferMapCallbackInfo.userdata1": 12, "WGPUBufferMapCallbackInfo.userdata2": 16,
  "WGPUUncapturedErrorCallbackInfo.callback": 4, "WGPUUncapturedErrorCallbackInfo.userdata1": 8,
  "WGPUUncapturedErrorCallbackInfo.userdata2": 12,
  "WGPUDeviceDescriptor.label": 4, "WGPUDeviceDescriptor.requiredFeatureCount": 12,
  "WGPUDeviceDescriptor.requiredFeatures": 16, "WGPUDeviceDescriptor.requiredLimits": 20,
  "WGPUDeviceDescriptor.deviceLostCallbackInfo": 36, "WGPUDeviceDescriptor.uncapturedErrorCallbackInfo": 56,
  "WGPURequestAdapterOptions.powerPreference": 8,
  "WGPUAdapterInfo": 60, "WGPUAdapterInfo.vendor": 4, "WGPUAdapterInfo.architecture": 12, "WGPUAdapterInfo.device": 20,
  "WGPUAdapterInfo.description": 28, "WGPUAdapterInfo.backendType": 36, "WGPUAdapterInfo.adapterType": 40,
  "WGPUAdapterInfo.vendorID": 44, "WGPUAdapterInfo.deviceID": 48, "WGPUAdapterInfo.subgroupMinSize": 52,
  "WGPUAdapterInfo.subgroupMaxSize": 56,
  "WGPULimits": 152, "WGPULimits.maxBindGroups": 20, "WGPULimits.maxStorageBuffersPerShaderStage": 48,
  "WGPULimits.maxUniformBuffersPerShaderStage": 56, "WGPULimits.maxUniformBufferBindingSize": 64,
  "WGPULimits.maxStorageBufferBindingSize": 72, "WGPULimits.minUniformBufferOffsetAlignment": 80,
  "WGPULimits.minStorageBufferOffsetAlignment": 84, "WGPULimits.maxBufferSize": 96,
  "WGPULimits.maxComputeWorkgroupStorageSize": 124, "WGPULimits.maxComputeInvocationsPerWorkgroup": 128,
  "WGPULimits.maxComputeWorkgroupSizeX": 132, "WGPULimits.maxComputeWorkgroupSizeY": 136,
  "WGPULimits.maxComputeWorkgroupSizeZ": 140, "WGPULimits.maxComputeWorkgroupsPerDimension": 144,
  "WGPULimits.maxBindingsPerBindGroup": 28, "WGPULimits.maxDynamicStorageBuffersPerPipelineLayout": 36,
  "WGPULimits.maxDynamicUniformBuffersPerPipelineLayout": 32,
};
const L = LAYOUT;

// The WGPULimits fields wgml reads or requests, with their width.
const LIMITS = [
  ["maxBindGroups", 32], ["maxBindingsPerBindGroup", 32], ["maxDynamicUniformBuffersPerPipelineLayout", 32],
  ["maxDynamicStorageBuffersPerPipelineLayout", 32], ["maxStorageBuffersPerShaderStage", 32],
  ["maxUniformBuffersPerShaderStage", 32], ["maxUniformBufferBindingSize", 64], ["maxStorageBufferBindingSize", 64],
  ["minUniformBufferOffsetAlignment", 32], ["minStorageBufferOffsetAlignment", 32], ["maxBufferSize", 64],
  ["maxComputeWorkgroupStorageSize", 32], ["maxComputeInvocationsPerWorkgroup", 32], ["maxComputeWorkgroupSizeX", 32],
  ["maxComputeWorkgroupSizeY", 32], ["maxComputeWorkgroupSizeZ", 32], ["maxComputeWorkgroupsPerDimension", 32],
];
const U32_UNDEFINED = 0xffffffff, SIZE_MAX = 0xffffffff;
const FEATURES = { 9: "timestamp-query", 11: "shader-f16", 18: "subgroups" };
const ERROR_FILTER = { 1: "validation", 2: "out-of-memory", 3: "internal" };
const ERROR_TYPE = { NoError: 1, Validation: 2, OutOfMemory: 3, Internal: 4, Unknown: 5 };
const BINDING_TYPE = { 2: "uniform", 3: "storage", 4: "read-only-storage" };
const ADAPTER_CPU = 3, ADAPTER_UNKNOWN = 4, BACKEND_WEBGPU = 2;

export class WebGPU {
  // gpu: navigator.gpu; limitsOverride: {name: value} lowers what the adapter reports (a test
  // of small devices); popDelayMs: every error scope's answer comes this much later (a test of a
  // GPU process busy for seconds); log(text): where a message for the user goes.
  constructor(gpu, { limitsOverride = {}, popDelayMs = 0, log = (t) => console.log(t) } = {}) {
    this.gpu = gpu;
    this.limitsOverride = limitsOverride;
    this.popDelayMs = popDelayMs;
    this.log = log;
    this.objects = [null];
    this.refs = [0];
    this.freeIds = [];
    this.ready = [];      // callbacks to run at the next wgpuInstanceProcessEvents
    this.pending = new Set(); // promises whose settling queues a callback
    this.mapped = new Map(); // buffer id -> [wasm pointers of mapped ranges]
    this.released = new WeakSet(); // devices whose handle was released
    this.exports = null;
  }

  // After instantiation: the wasm's exports (memory, malloc, free, the function table).
  bind(exports) {
    this.exports = exports;
    this.table = exports.__indirect_function_table;
  }
  // wgmlWebCheckLayout: the C side's offsets (src/gpu/web.c) against LAYOUT.
  checkLayout(p) {
    const text = this.cstr(p);
    const got = Object.fromEntries(text.split(";").filter((x) => x).map((kv) => kv.split("=")).map(([k, v]) => [k, +v]));
    const bad = Object.keys(LAYOUT).filter((k) => got[k] !== LAYOUT[k]).map((k) => `${k}: js ${LAYOUT[k]}, C ${got[k]}`);
    if (bad.length) throw new Error("webgpu.js: the webgpu.h layout differs from the compiled one: " + bad.join(", "));
  }

  // ---- memory
  get dv() { return new DataView(this.exports.memory.buffer); }
  get u8() { return new Uint8Array(this.exports.memory.buffer); }
  u32(p) { return this.dv.getUint32(p, true); }
  u64(p) { return Number(this.dv.getBigUint64(p, true)); }
  setU32(p, v) { this.dv.setUint32(p, v >>> 0, true); }
  setU64(p, v) { this.dv.setBigUint64(p, BigInt(v), true); }
  cstr(p, n) {
    if (!p) return "";
    const u8 = this.u8;
    if (n === undefined) { n = 0; while (u8[p + n]) n++; }
    return new TextDecoder().decode(u8.subarray(p, p + n));
  }
  sv(p) { // a WGPUStringView at p
    const data = this.u32(p + L["WGPUStringView.data"]), len = this.u32(p + L["WGPUStringView.length"]);
    if (!data) return undefined;
    return this.cstr(data, len === SIZE_MAX ? undefined : len);
  }
  // A malloc'd copy of s (NUL-terminated) and its length in bytes.
  alloc(s) {
    const b = new TextEncoder().encode(s || "");
    const p = this.exports.malloc(b.length + 1);
    this.u8.set(b, p);
    this.u8[p + b.length] = 0;
    return [p, b.length];
  }
  // Calls f with a WGPUStringView of s in wasm memory, freed after.
  withSV(s, f) {
    const [p, n] = this.alloc(s);
    const v = this.exports.malloc(8);
    this.setU32(v, p);
    this.setU32(v + 4, n);
    try { return f(v); } finally { this.exports.free(v); this.exports.free(p); }
  }

  // ---- handles
  add(obj) {
    const id = this.freeIds.length ? this.freeIds.pop() : this.objects.length;
    this.objects[id] = obj;
    this.refs[id] = 1;
    return id;
  }
  get(id) { return this.objects[id]; }
  addRef(id) { if (id) this.refs[id]++; }
  release(id) {
    if (!id || --this.refs[id] > 0) return;
    const o = this.objects[id];
    if (o && (o instanceof GPUBuffer || o instanceof GPUQuerySet)) o.destroy();
    if (o instanceof GPUBuffer) this.unmapped(id);
    // a released device calls back no more: its callbacks' user data may be freed memory now
    if (o instanceof GPUDevice) { o.onuncapturederror = null; this.released.add(o); }
    this.objects[id] = null;
    this.freeIds.push(id);
  }

  // Test hook: destroys every device, as a driver reset would (its lost promise then settles).
  loseDevices() {
    for (const o of this.objects) if (o instanceof GPUDevice) o.destroy();
  }

  // ---- callbacks: a callback info struct at p ({next, mode, callback, userdata1, userdata2})
  cbInfo(p) {
    return { fn: this.u32(p + L["WGPUBufferMapCallbackInfo.callback"]), u1: this.u32(p + L["WGPUBufferMapCallbackInfo.userdata1"]),
      u2: this.u32(p + L["WGPUBufferMapCallbackInfo.userdata2"]) };
  }
  // When promise settles, queue run(value, error) for the next wgpuInstanceProcessEvents.
  later(promise, run) {
    const q = promise.then((v) => this.ready.push(() => run(v, null)), (e) => this.ready.push(() => run(null, e)));
    this.pending.add(q);
    q.finally(() => this.pending.delete(q));
  }
  call(fn, ...args) { if (fn) this.table.get(fn)(...args); }
  runReady() {
    while (this.ready.length) this.ready.shift()();
  }
  // wgpuInstanceProcessEvents: runs queued callbacks; with none queued, first waits until a GPU
  // promise settles (or 2 ms pass: the caller may be waiting on something else, such as a flag).
  async processEvents() {
    if (!this.ready.length) {
      const tick = new Promise((r) => setTimeout(r, this.pending.size ? 2 : 0));
      await Promise.race([tick, ...this.pending]);
    }
    this.runReady();
  }

  errorType(e) {
    if (!e) return ERROR_TYPE.NoError;
    if (e instanceof GPUValidationError) return ERROR_TYPE.Validation;
    if (e instanceof GPUOutOfMemoryError) return ERROR_TYPE.OutOfMemory;
    if (e instanceof GPUInternalError) return ERROR_TYPE.Internal;
    return ERROR_TYPE.Unknown;
  }

  writeLimits(p, limits) {
    for (const [name, bits] of LIMITS) {
      let v = limits[name];
      if (v === undefined) continue;
      if (name in this.limitsOverride) v = Math.min(v, this.limitsOverride[name]);
      if (bits === 64) this.setU64(p + L["WGPULimits." + name], v);
      else this.setU32(p + L["WGPULimits." + name], v);
    }
  }
  readLimits(p, adapterLimits) {
    const out = {};
    for (const [name, bits] of LIMITS) {
      const off = p + L["WGPULimits." + name];
      const undef = bits === 64 ? this.dv.getBigUint64(off, true) === 0xffffffffffffffffn : this.u32(off) === U32_UNDEFINED;
      if (!undef && adapterLimits[name] !== undefined) out[name] = bits === 64 ? this.u64(off) : this.u32(off);
    }
    return out;
  }

  // The import object for module "env".
  imports() {
    const S = (f) => new WebAssembly.Suspending(f);
    const w = this;
    const h = (id) => w.get(id);
    return {
      wgmlWebCheckLayout: (p) => w.checkLayout(p),
      wgpuCreateInstance: () => w.add({ instance: true }),
      wgpuInstanceAddRef: (i) => w.addRef(i),
      wgpuInstanceRelease: (i) => w.release(i),
      wgpuInstanceProcessEvents: S(() => w.processEvents()),
      wgpuInstanceRequestAdapter: (inst, opt, cbp) => {
        const cb = w.cbInfo(cbp);
        const pref = opt && w.u32(opt + L["WGPURequestAdapterOptions.powerPreference"]) === 1 ? "low-power" : "high-performance";
        w.later(w.gpu ? w.gpu.requestAdapter({ powerPreference: pref }) : Promise.resolve(null), (a, e) => {
          const id = a ? w.add(a) : 0;
          w.withSV(a ? "" : (e ? String(e) : "no WebGPU adapter (navigator.gpu is missing or returned none)"),
            (sv) => w.call(cb.fn, a ? 1 : 3, id, sv, cb.u1, cb.u2));
        });
        return 0n;
      },
      wgpuAdapterAddRef: (a) => w.addRef(a),
      wgpuAdapterRelease: (a) => w.release(a),
      // WGPUWGSLLanguageFeatureName_Packed4x8IntegerDotProduct (2) is the one wgml asks about
      wgpuInstanceHasWGSLLanguageFeature: (i, f) =>
        (f === 2 && w.gpu && w.gpu.wgslLanguageFeatures && w.gpu.wgslLanguageFeatures.has("packed_4x8_integer_dot_product") ? 1 : 0),
      wgpuAdapterHasFeature: (a, f) => (FEATURES[f] && h(a).features.has(FEATURES[f]) ? 1 : 0),
      wgpuAdapterGetLimits: (a, p) => { w.writeLimits(p, h(a).limits); return 1; },
      wgpuAdapterGetInfo: (a, p) => {
        const info = h(a).info || {};
        // browsers may leave device empty (privacy): name the adapter by what they do give
        const named = { vendor: info.vendor, architecture: info.architecture, description: info.description,
          device: info.device || info.description || [info.vendor, info.architecture].filter((x) => x).join(" ") || "WebGPU adapter" };
        for (const f of ["vendor", "architecture", "device", "description"]) {
          const [sp, n] = w.alloc(named[f] || "");
          w.setU32(p + L["WGPUAdapterInfo." + f], sp);
          w.setU32(p + L["WGPUAdapterInfo." + f] + 4, n);
        }
        const cpu = info.isFallbackAdapter || /swiftshader|llvmpipe|lavapipe/i.test(`${info.device} ${info.description}`);
        w.setU32(p + L["WGPUAdapterInfo.backendType"], BACKEND_WEBGPU);
        w.setU32(p + L["WGPUAdapterInfo.adapterType"], cpu ? ADAPTER_CPU : ADAPTER_UNKNOWN);
        w.setU32(p + L["WGPUAdapterInfo.vendorID"], 0);
        w.setU32(p + L["WGPUAdapterInfo.deviceID"], 0);
        w.setU32(p + L["WGPUAdapterInfo.subgroupMinSize"], info.subgroupMinSize || 0);
        w.setU32(p + L["WGPUAdapterInfo.subgroupMaxSize"], info.subgroupMaxSize || 0);
        return 1;
      },
      wgpuAdapterInfoFreeMembers: (p) => {
        for (const f of ["vendor", "architecture", "device", "description"]) w.exports.free(w.u32(p + L["WGPUAdapterInfo." + f]));
      },
      wgpuAdapterRequestDevice: (a, d, cbp) => {
        const adapter = h(a), cb = w.cbInfo(cbp);
        const feats = [], nf = w.u32(d + L["WGPUDeviceDescriptor.requiredFeatureCount"]);
        const fp = w.u32(d + L["WGPUDeviceDescriptor.requiredFeatures"]);
        for (let i = 0; i < nf; i++) if (FEATURES[w.u32(fp + 4 * i)]) feats.push(FEATURES[w.u32(fp + 4 * i)]);
        const lp = w.u32(d + L["WGPUDeviceDescriptor.requiredLimits"]);
        const requiredLimits = lp ? w.readLimits(lp, adapter.limits) : {};
        const lost = w.cbInfo(d + L["WGPUDeviceDescriptor.deviceLostCallbackInfo"]);
        const uc = d + L["WGPUDeviceDescriptor.uncapturedErrorCallbackInfo"];
        const unc = { fn: w.u32(uc + L["WGPUUncapturedErrorCallbackInfo.callback"]),
          u1: w.u32(uc + L["WGPUUncapturedErrorCallbackInfo.userdata1"]), u2: w.u32(uc + L["WGPUUncapturedErrorCallbackInfo.userdata2"]) };
        w.later(adapter.requestDevice({ requiredFeatures: feats, requiredLimits, label: w.sv(d + L["WGPUDeviceDescriptor.label"]) }), (dev, e) => {
          if (!dev) {
            w.withSV(String(e), (sv) => w.call(cb.fn, 3, 0, sv, cb.u1, cb.u2));
            return;
          }
          const id = w.add(dev);
          const idp = w.exports.malloc(4); // the WGPUDevice const * of the device callbacks
          w.setU32(idp, id);
          dev.onuncapturederror = (ev) => w.ready.push(() =>
            w.withSV(ev.error.message, (sv) => w.call(unc.fn, idp, w.errorType(ev.error), sv, unc.u1, unc.u2)));
          w.later(dev.lost, (info) => w.released.has(dev) || w.withSV(info.message || info.reason || "device lost",
            (sv) => w.call(lost.fn, idp, info.reason === "destroyed" ? 2 : 1, sv, lost.u1, lost.u2)));
          w.withSV("", (sv) => w.call(cb.fn, 1, id, sv, cb.u1, cb.u2));
        });
        return 0n;
      },
      wgpuDeviceAddRef: (d) => w.addRef(d),
      wgpuDeviceRelease: (d) => w.release(d),
      wgpuDeviceDestroy: (d) => h(d).destroy(),
      wgpuDeviceGetQueue: (d) => w.add(h(d).queue),
      wgpuDeviceGetLimits: (d, p) => { w.writeLimits(p, h(d).limits); return 1; },
      wgpuDeviceHasFeature: (d, f) => (FEATURES[f] && h(d).features.has(FEATURES[f]) ? 1 : 0),
      wgpuDevicePushErrorScope: (d, f) => h(d).pushErrorScope(ERROR_FILTER[f] || "validation"),
      wgpuDevicePopErrorScope: (d, cbp) => {
        const cb = w.cbInfo(cbp);
        let answer = h(d).popErrorScope();
        if (w.popDelayMs) answer = answer.then((v) => new Promise((r) => setTimeout(() => r(v), w.popDelayMs)));
        w.later(answer, (err, e) => w.withSV(err ? err.message : e ? String(e) : "",
          (sv) => w.call(cb.fn, e ? 3 : 1, w.errorType(err), sv, cb.u1, cb.u2)));
        return 0n;
      },
      wgpuDeviceCreateBuffer: (d, p) => {
        try {
          return w.add(h(d).createBuffer({ label: w.sv(p + L["WGPUBufferDescriptor.label"]), usage: w.u64(p + L["WGPUBufferDescriptor.usage"]),
            size: w.u64(p + L["WGPUBufferDescriptor.size"]), mappedAtCreation: !!w.u32(p + L["WGPUBufferDescriptor.mappedAtCreation"]) }));
        } catch (e) {
          w.log(`webgpu.js: createBuffer: ${e}`);
          return 0;
        }
      },
      wgpuDeviceCreateShaderModule: (d, p) => {
        const chain = w.u32(p + L["WGPUShaderModuleDescriptor.nextInChain"]);
        const code = chain && w.u32(chain + L["WGPUChainedStruct.sType"]) === 2 ? w.sv(chain + L["WGPUShaderSourceWGSL.code"]) : "";
        return w.add(h(d).createShaderModule({ label: w.sv(p + L["WGPUShaderModuleDescriptor.label"]), code }));
      },
      wgpuShaderModuleRelease: (m) => w.release(m),
      wgpuDeviceCreateBindGroupLayout: (d, p) => {
        const n = w.u32(p + L["WGPUBindGroupLayoutDescriptor.entryCount"]), ep = w.u32(p + L["WGPUBindGroupLayoutDescriptor.entries"]);
        const entries = [];
        for (let i = 0; i < n; i++) {
          const e = ep + i * L["WGPUBindGroupLayoutEntry"], b = e + L["WGPUBindGroupLayoutEntry.buffer"];
          entries.push({ binding: w.u32(e + L["WGPUBindGroupLayoutEntry.binding"]), visibility: w.u64(e + L["WGPUBindGroupLayoutEntry.visibility"]),
            buffer: { type: BINDING_TYPE[w.u32(b + L["WGPUBufferBindingLayout.type"])], hasDynamicOffset: !!w.u32(b + L["WGPUBufferBindingLayout.hasDynamicOffset"]),
              minBindingSize: w.u64(b + L["WGPUBufferBindingLayout.minBindingSize"]) } });
        }
        return w.add(h(d).createBindGroupLayout({ label: w.sv(p + L["WGPUBindGroupLayoutDescriptor.label"]), entries }));
      },
      wgpuBindGroupLayoutRelease: (x) => w.release(x),
      wgpuDeviceCreatePipelineLayout: (d, p) => {
        const n = w.u32(p + L["WGPUPipelineLayoutDescriptor.bindGroupLayoutCount"]), lp = w.u32(p + L["WGPUPipelineLayoutDescriptor.bindGroupLayouts"]);
        const bindGroupLayouts = [];
        for (let i = 0; i < n; i++) bindGroupLayouts.push(h(w.u32(lp + 4 * i)));
        return w.add(h(d).createPipelineLayout({ label: w.sv(p + L["WGPUPipelineLayoutDescriptor.label"]), bindGroupLayouts }));
      },
      wgpuPipelineLayoutRelease: (x) => w.release(x),
      wgpuDeviceCreateComputePipeline: (d, p) => {
        const c = p + L["WGPUComputePipelineDescriptor.compute"];
        const layout = w.u32(p + L["WGPUComputePipelineDescriptor.layout"]);
        return w.add(h(d).createComputePipeline({ label: w.sv(p + L["WGPUComputePipelineDescriptor.label"]), layout: layout ? h(layout) : "auto",
          compute: { module: h(w.u32(c + L["WGPUComputeState.module"])), entryPoint: w.sv(c + L["WGPUComputeState.entryPoint"]) } }));
      },
      wgpuComputePipelineRelease: (x) => w.release(x),
      wgpuDeviceCreateBindGroup: (d, p) => {
        const n = w.u32(p + L["WGPUBindGroupDescriptor.entryCount"]), ep = w.u32(p + L["WGPUBindGroupDescriptor.entries"]);
        const entries = [];
        for (let i = 0; i < n; i++) {
          const e = ep + i * L["WGPUBindGroupEntry"];
          const size = w.dv.getBigUint64(e + L["WGPUBindGroupEntry.size"], true);
          entries.push({ binding: w.u32(e + L["WGPUBindGroupEntry.binding"]), resource: { buffer: h(w.u32(e + L["WGPUBindGroupEntry.buffer"])),
            offset: w.u64(e + L["WGPUBindGroupEntry.offset"]), size: size === 0xffffffffffffffffn ? undefined : Number(size) } });
        }
        return w.add(h(d).createBindGroup({ label: w.sv(p + L["WGPUBindGroupDescriptor.label"]), layout: h(w.u32(p + L["WGPUBindGroupDescriptor.layout"])), entries }));
      },
      wgpuBindGroupRelease: (x) => w.release(x),
      wgpuDeviceCreateQuerySet: (d, p) => {
        try {
          return w.add(h(d).createQuerySet({ label: w.sv(p + L["WGPUQuerySetDescriptor.label"]),
            type: w.u32(p + L["WGPUQuerySetDescriptor.type"]) === 2 ? "timestamp" : "occlusion", count: w.u32(p + L["WGPUQuerySetDescriptor.count"]) }));
        } catch (e) {
          w.log(`webgpu.js: createQuerySet: ${e}`);
          return 0;
        }
      },
      wgpuQuerySetRelease: (x) => w.release(x),
      wgpuDeviceCreateCommandEncoder: (d) => w.add(h(d).createCommandEncoder()),
      wgpuCommandEncoderRelease: (x) => w.release(x),
      wgpuCommandEncoderBeginComputePass: (enc, p) => {
        const desc = {};
        const tp = p ? w.u32(p + L["WGPUComputePassDescriptor.timestampWrites"]) : 0;
        if (tp) {
          const b = w.u32(tp + L["WGPUPassTimestampWrites.beginningOfPassWriteIndex"]), e = w.u32(tp + L["WGPUPassTimestampWrites.endOfPassWriteIndex"]);
          desc.timestampWrites = { querySet: h(w.u32(tp + L["WGPUPassTimestampWrites.querySet"])) };
          if (b !== U32_UNDEFINED) desc.timestampWrites.beginningOfPassWriteIndex = b;
          if (e !== U32_UNDEFINED) desc.timestampWrites.endOfPassWriteIndex = e;
        }
        return w.add(h(enc).beginComputePass(desc));
      },
      wgpuComputePassEncoderSetPipeline: (pass, pipe) => h(pass).setPipeline(h(pipe)),
      wgpuComputePassEncoderSetBindGroup: (pass, i, bg, n, offs) =>
        h(pass).setBindGroup(i, bg ? h(bg) : null, n ? Array.from(new Uint32Array(w.exports.memory.buffer, offs, n)) : []),
      wgpuComputePassEncoderDispatchWorkgroups: (pass, x, y, z) => h(pass).dispatchWorkgroups(x, y, z),
      wgpuComputePassEncoderEnd: (pass) => h(pass).end(),
      wgpuComputePassEncoderRelease: (x) => w.release(x),
      wgpuCommandEncoderCopyBufferToBuffer: (enc, src, so, dst, dso, size) =>
        h(enc).copyBufferToBuffer(h(src), Number(so), h(dst), Number(dso), Number(size)),
      wgpuCommandEncoderResolveQuerySet: (enc, qs, first, count, dst, off) => h(enc).resolveQuerySet(h(qs), first, count, h(dst), Number(off)),
      wgpuCommandEncoderFinish: (enc) => w.add(h(enc).finish()),
      wgpuCommandBufferRelease: (x) => w.release(x),
      wgpuQueueAddRef: (q) => w.addRef(q),
      wgpuQueueRelease: (q) => w.release(q),
      wgpuQueueSubmit: (q, n, p) => {
        const cmds = [];
        for (let i = 0; i < n; i++) cmds.push(h(w.u32(p + 4 * i)));
        h(q).submit(cmds);
      },
      wgpuQueueWriteBuffer: (q, b, off, data, size) => h(q).writeBuffer(h(b), Number(off), w.exports.memory.buffer, data, size),
      wgpuQueueOnSubmittedWorkDone: (q, cbp) => {
        const cb = w.cbInfo(cbp);
        w.later(h(q).onSubmittedWorkDone(), (v, e) => w.withSV(e ? String(e) : "", (sv) => w.call(cb.fn, e ? 2 : 1, sv, cb.u1, cb.u2)));
        return 0n;
      },
      wgpuBufferAddRef: (b) => w.addRef(b),
      wgpuBufferRelease: (b) => w.release(b),
      wgpuBufferMapAsync: (b, mode, off, size, cbp) => {
        const cb = w.cbInfo(cbp);
        const m = (mode & 1n ? GPUMapMode.READ : 0) | (mode & 2n ? GPUMapMode.WRITE : 0);
        let p;
        try { p = h(b).mapAsync(m, off, size); } catch (e) { p = Promise.reject(e); }
        // status: Success 1, CallbackCancelled 2, Error 3, Aborted 4
        w.later(p, (v, e) => w.withSV(e ? String(e) : "", (sv) =>
          w.call(cb.fn, !e ? 1 : e.name === "AbortError" ? 4 : 3, sv, cb.u1, cb.u2)));
        return 0n;
      },
      // The mapped bytes are copied into wasm memory (malloc'd, freed at unmap or release).
      wgpuBufferGetConstMappedRange: (b, off, size) => {
        let bytes;
        try { bytes = new Uint8Array(h(b).getMappedRange(off, size === SIZE_MAX ? undefined : size)); } catch (e) { return 0; }
        const p = w.exports.malloc(bytes.length || 1);
        if (!p) return 0;
        w.u8.set(bytes, p);
        if (!w.mapped.has(b)) w.mapped.set(b, []);
        w.mapped.get(b).push(p);
        return p;
      },
      wgpuBufferUnmap: (b) => { h(b).unmap(); w.unmapped(b); },
    };
  }

  unmapped(id) {
    for (const p of this.mapped.get(id) || []) this.exports.free(p);
    this.mapped.delete(id);
  }
}
