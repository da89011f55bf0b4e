// wgml from a page: a proxy to the JavaScript API (web/wgml.js) running in a Web Worker
// (web/worker.js), so that the page stays responsive. Every method of Wgml is a promise here;
// generate is also an async stream of text pieces.
//
//   import { WgmlClient } from "./client.js";
//   const w = new WgmlClient();
//   const m = await w.loadModel("/m.gguf", { bytes: await file.arrayBuffer() });
//   for await (const piece of w.stream(m.model, "The capital of France is", { maxTokens: 16 })) out.textContent += piece;
//   const t = await w.trainer(m.model, { rank: 8, targets: "all", seqLen: 64 });
//   const loss = await w.step(t, rows);           // rows: Int32Arrays of seqLen + 1 ids
//   const files = await w.saveAdapter(t);        // adapter_config.json, adapter.safetensors
export class WgmlClient {
  // options: {wasm, limits} for the worker's wgml (the wasm URL, lowered device limits)
  constructor({ worker, options = {} } = {}) {
    this.worker = worker || new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
    this.options = options;
    this.next = 1;
    this.calls = new Map(); // id -> {resolve, reject, onText}
    this.worker.addEventListener("message", (ev) => this.hear(ev.data));
    this.worker.addEventListener("error", (ev) => {
      for (const c of this.calls.values()) c.reject(new Error(`wgml worker: ${ev.message}`));
      this.calls.clear();
    });
    return new Proxy(this, {
      // any other name is a method of the worker's Wgml ("then" is not: a client is no promise)
      get: (self, k) => (k in self || typeof k !== "string" || k === "then" ? self[k] : (...args) => self.call(k, ...args)),
    });
  }
  hear(m) {
    const c = this.calls.get(m.id);
    if (!c) return;
    if (m.type === "text") { if (c.onText) c.onText(m.text); return; }
    if (m.type !== "result") return;
    this.calls.delete(m.id);
    if (m.error !== undefined) {
      const e = new Error(m.error);
      e.name = "WgmlError";
      e.status = m.status;
      c.reject(e);
    } else c.resolve(m.value);
  }
  call(method, ...args) {
    const id = this.next++;
    let onText = null;
    if (method === "generate" && args[2] && args[2].onText) {
      onText = args[2].onText;
      args[2] = { ...args[2] };
      delete args[2].onText;
    }
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject, onText });
      this.worker.postMessage({ cmd: "api", id, method, args, options: this.options });
    });
  }
  // Generation as an async iterator of text pieces; the full result ({text, ids, stats}) is
  // this.lastGeneration after the loop. Leaving the loop early stops generation.
  async *stream(model, prompt, opts = {}) {
    const pieces = [];
    let wake = null, done = false, failure = null;
    const p = this.call("generate", model, prompt, { ...opts, onText: (t) => { pieces.push(t); if (wake) wake(); } });
    p.then((v) => { this.lastGeneration = v; }, (e) => { failure = e; }).finally(() => { done = true; if (wake) wake(); });
    try {
      for (;;) {
        while (pieces.length) yield pieces.shift();
        if (done) break;
        await new Promise((r) => { wake = r; });
        wake = null;
      }
      if (failure) throw failure;
    } finally {
      if (!done) { this.stop(); await p.catch(() => {}); }
    }
  }
  stop() { this.worker.postMessage({ cmd: "stop" }); }
  loseDevice() { this.worker.postMessage({ cmd: "loseDevice" }); }
  terminate() { this.worker.terminate(); }
}
