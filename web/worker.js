// A Web Worker that runs wgml with webgpu.js and wasi.js, so that the page stays responsive
// while wgml works: the JavaScript API (web/wgml.js, which web/client.js calls from the page) and
// wasm programs (a test, the CLI). Messages in:
//   {cmd: "api", id, method, args, options}  a method of Wgml (one at a time, in order);
//                                          options: {wasm, limits} of the first call
//   {cmd: "stop"}                          ends the generation under way
//   {cmd: "loseDevice"}                    test hook: the GPU device is lost
//   {cmd: "put", files: {path: url}}       fetch files into the in-memory store
//   {cmd: "run", wasm: url, args, env, limits}  run a program's main (args[0] is its name)
//   {cmd: "get", path}                     a file's bytes back
// Messages out: {type: "result", id, value} or {type: "result", id, error, status}, {type: "text",
// id, text} (generation), {type: "out", fd, text}, {type: "exit", code, ms}, {type: "file", path,
// bytes}, {type: "error", message}.
import { WebGPU } from "./webgpu.js";
import { WASI, MemFS, ProcExit } from "./wasi.js";
import { Wgml } from "./wgml.js";

const fs = new MemFS();
const modules = new Map();
const out = (fd, text) => postMessage({ type: "out", fd, text });

async function put(files) {
  for (const [path, url] of Object.entries(files)) {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`fetching ${url}: HTTP ${r.status}`);
    fs.put(path, new Uint8Array(await r.arrayBuffer()));
  }
}

// Runs a WASI command; its exit status (a trap or a JS error is 134, reported on stderr).
export async function runCommand({ wasm, args = [], env = {}, limits = {} }) {
  if (!modules.has(wasm)) modules.set(wasm, await WebAssembly.compileStreaming(fetch(wasm)));
  // $WGML_WEB_POP_DELAY_MS: webgpu.js's test hook of late error-scope answers (tests/test_scope.c)
  const gpu = new WebGPU(navigator.gpu, { limitsOverride: limits, popDelayMs: +(env.WGML_WEB_POP_DELAY_MS || 0),
    log: (t) => out(2, t + "\n") });
  const wasi = new WASI({ args, env, fs, write: out });
  const inst = await WebAssembly.instantiate(modules.get(wasm), { env: gpu.imports(), wasi_snapshot_preview1: wasi.imports() });
  gpu.bind(inst.exports);
  wasi.bind(inst.exports);
  try {
    await WebAssembly.promising(inst.exports._start)();
    return 0;
  } catch (e) {
    if (e instanceof ProcExit) return e.code;
    out(2, `\nwasm: ${e && e.stack ? e.stack : e}\n`);
    return 134;
  }
}

let api = null;       // the Wgml instance, made by the first API call
let apiQueue = Promise.resolve();

async function apiCall({ id, method, args = [], options = {} }) {
  try {
    if (!api) api = await Wgml.create({ fs, limits: options.limits || {}, ...(options.wasm ? { wasm: options.wasm } : {}), log: (t) => out(2, t) });
    if (typeof api[method] !== "function" || method.startsWith("_")) throw new Error(`wgml: no method ${method}`);
    if (method === "generate") args[2] = { ...(args[2] || {}), onText: (text) => postMessage({ type: "text", id, text }) };
    postMessage({ type: "result", id, value: await api[method](...args) });
  } catch (e) {
    postMessage({ type: "result", id, error: String(e && e.message ? e.message : e), status: e && e.status, stack: e && e.stack });
  }
}

onmessage = async (ev) => {
  const m = ev.data;
  try {
    if (m.cmd === "api") {
      apiQueue = apiQueue.then(() => apiCall(m));
      return;
    }
    if (m.cmd === "stop") { if (api) api.stop(); return; }
    if (m.cmd === "loseDevice") { if (api) api.loseDevice(); return; }
    if (m.cmd === "put") {
      await put(m.files);
      postMessage({ type: "put" });
    } else if (m.cmd === "run") {
      const t0 = performance.now();
      const code = await runCommand(m);
      postMessage({ type: "exit", code, ms: performance.now() - t0 });
    } else if (m.cmd === "get") {
      postMessage({ type: "file", path: m.path, bytes: fs.get(m.path) || null });
    }
  } catch (e) {
    postMessage({ type: "error", message: String(e && e.stack ? e.stack : e) });
  }
};
