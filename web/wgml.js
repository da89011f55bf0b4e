// wgml's JavaScript API, inside a Web Worker (web/worker.js serves it to a page through
// web/client.js): load a GGUF model, generate (text streamed as it is decoded), LoRA training
// steps, evaluation, and adapters in and out — each method one call of web/api.c in
// build-web/wgml-api.wasm, the C library compiled to wasm32. Calls that wait for the GPU suspend
// the wasm stack (JavaScript Promise Integration), so every method returns a promise and the
// worker's event loop keeps running (a stop or a device loss is heard mid-call). Files (models,
// adapters) live in an in-memory store shared with the C side's file calls.
import { WebGPU } from "./webgpu.js";
import { WASI, MemFS } from "./wasi.js";

const STATUS = ["OK", "ARG", "SHAPE", "DTYPE", "LIMIT", "OOM", "GPU", "DEVICE_LOST", "TIMEOUT", "NO_ADAPTER",
  "VERSION", "IO", "FORMAT", "UNSUPPORTED", "STATE"].map((s) => (s === "OK" ? s : "WGML_ERR_" + s));
export const TARGETS = ["q", "k", "v", "o", "gate", "up", "down"];
export const TOK = { BOS: 1, EOS: 2, SPECIAL: 4, SKIP_SPECIAL: 8 };

export class WgmlError extends Error {
  constructor(message, status) {
    super(message);
    this.name = "WgmlError";
    this.status = status; // "WGML_ERR_*"
  }
}

// "q,v" / ["q", "v"] / "all" as WGML_TARGET_* bits
export function targetBits(t) {
  const names = Array.isArray(t) ? t : String(t).split(",").map((s) => s.trim()).filter((s) => s);
  if (names.length === 1 && names[0] === "all") return 127;
  let bits = 0;
  for (const n of names) {
    const i = TARGETS.indexOf(n);
    if (i < 0) throw new WgmlError(`targets: unknown projection "${n}" (one of ${TARGETS.join(", ")}, or all)`, "WGML_ERR_ARG");
    bits |= 1 << i;
  }
  if (!bits) throw new WgmlError("targets: none given", "WGML_ERR_ARG");
  return bits;
}

// Token ids cut into rows of seqLen + 1 (inputs: the first seqLen, labels: shifted by one), as
// `wgml finetune` cuts plain text.
export function rowsOf(ids, seqLen) {
  const n = ids.length > seqLen ? Math.floor((ids.length - 1) / seqLen) : 0;
  if (n < 1) throw new WgmlError(`data: ${ids.length} tokens do not fill one row of ${seqLen} + 1 tokens`, "WGML_ERR_ARG");
  const rows = [];
  for (let r = 0; r < n; r++) rows.push(Int32Array.from(ids.subarray(r * seqLen, r * seqLen + seqLen + 1)));
  return rows;
}

export class Wgml {
  // wasm: URL of wgml-api.wasm; limits: {name: value} lowers the adapter's limits (tests of
  // small devices); log(text): the library's stderr.
  static async create({ wasm = new URL("../build-web/wgml-api.wasm", import.meta.url), fs = new MemFS(), limits = {},
    log = (t) => console.log(t) } = {}) {
    const w = new Wgml();
    w.fs = fs;
    w.gpu = new WebGPU(navigator.gpu, { limitsOverride: limits, log });
    w.wasi = new WASI({ args: ["wgml"], env: {}, fs, write: (fd, t) => log(t) });
    w.onText = null;
    w.stopFlag = false;
    const env = { ...w.gpu.imports(), wgmlw_on_text: (p, n) => w.textOut(p, n) };
    const mod = await WebAssembly.compileStreaming(fetch(wasm));
    const inst = await WebAssembly.instantiate(mod, { env, wasi_snapshot_preview1: w.wasi.imports() });
    w.gpu.bind(inst.exports);
    w.wasi.bind(inst.exports);
    w.raw = inst.exports;
    w.x = {};
    for (const [k, f] of Object.entries(inst.exports)) if (typeof f === "function") w.x[k] = WebAssembly.promising(f);
    w.raw._initialize();
    w.models = new Map();   // pointer -> {path, info}
    w.trainers = new Map(); // pointer -> {model, cfg, steps}
    w.datasets = new Map(); // pointer -> {model, seqLen}
    w.decoder = new TextDecoder();
    return w;
  }

  // ---- memory helpers
  get u8() { return new Uint8Array(this.raw.memory.buffer); }
  get dv() { return new DataView(this.raw.memory.buffer); }
  cstr(p) { const u8 = this.u8; let n = 0; while (u8[p + n]) n++; return this.decoder.decode(u8.subarray(p, p + n)); }
  alloc(bytes) { const p = this.raw.malloc(Math.max(1, bytes.byteLength)); this.u8.set(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), p); return p; }
  allocStr(s) { const b = new TextEncoder().encode(s); const p = this.raw.malloc(b.length + 1); this.u8.set(b, p); this.u8[p + b.length] = 0; return [p, b.length]; }
  // Runs f with scratch allocations freed after.
  async scratch(f) {
    const ptrs = [];
    const take = (p) => { ptrs.push(p); return p; };
    try { return await f(take); } finally { for (const p of ptrs) this.raw.free(p); }
  }
  check(status, what) {
    if (!status) return;
    const name = STATUS[status] || `status ${status}`;
    const msg = this.cstr(this.raw.wgmlw_error());
    if (name === "WGML_ERR_DEVICE_LOST") this.lost = true;
    throw new WgmlError(msg || `${what}: ${name}`, name);
  }
  json() { return JSON.parse(this.cstr(this.raw.wgmlw_json())); }
  textOut(p, n) {
    if (this.onText) this.onText(this.decoder.decode(this.u8.subarray(p, p + n)));
    return this.stopFlag ? 1 : 0;
  }

  // ---- the device
  // Opens the WebGPU device (again after a loss: every model and trainer of the lost one is freed).
  async open() {
    if (this.lost) await this.close();
    if (this.opened) return this.device;
    this.check(await this.x.wgmlw_open(0), "open");
    this.opened = true;
    this.check(await this.x.wgmlw_device(), "device");
    this.device = this.json();
    return this.device;
  }
  async close() {
    for (const t of [...this.trainers.keys()]) await this.freeTrainer(t);
    for (const m of [...this.models.keys()]) await this.freeModel(m);
    if (this.opened) await this.x.wgmlw_close();
    this.opened = false;
    this.lost = false;
  }
  // Test hook: the device goes away as it does when a driver resets or a tab is backgrounded.
  loseDevice() { this.gpu.loseDevices(); }
  stop() { this.stopFlag = true; }

  // ---- files
  // Fetches url into the file store at path; its size in bytes.
  async fetchFile(path, url) {
    const r = await fetch(url);
    if (!r.ok) throw new WgmlError(`fetching ${url}: HTTP ${r.status}`, "WGML_ERR_IO");
    const bytes = new Uint8Array(await r.arrayBuffer());
    this.fs.put(path, bytes);
    return bytes.length;
  }
  putFile(path, bytes) { this.fs.put(path, bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)); }
  getFile(path) { const b = this.fs.get(path); return b ? b.slice() : null; }
  removeFile(path) { return this.fs.files.delete(this.fs.norm(path)); }

  // ---- models
  // Loads the GGUF at path (bytes or url, when given, are put there first); its facts as
  // loadModel's value: {model, path, n_vocab, n_embd, n_layer, ..., kv_f16, text}. kv: the KV
  // cache's element type, "f32" (the default) or "f16" (half the memory; k and v rounded to f16).
  async loadModel(path, { bytes, url, nCtx = 0, kv = "f32" } = {}) {
    const kvType = { f32: 1, f16: 2 }[kv];
    if (!kvType) throw new WgmlError(`loadModel: kv is ${JSON.stringify(kv)}; it takes "f32" or "f16"`, "WGML_ERR_ARG");
    await this.open();
    if (bytes) this.putFile(path, bytes);
    if (url) await this.fetchFile(path, url);
    const m = await this.scratch(async (take) => this.x.wgmlw_model_load(take(this.allocStr(path)[0]), nCtx, kvType));
    if (!m) this.check(this.raw.wgmlw_status(), "load");
    const info = await this.scratch(async (take) => {
      this.check(await this.x.wgmlw_model_info(m, take(this.allocStr(path)[0])), "info");
      return this.json();
    });
    this.models.set(m, { path, info });
    return { model: m, path, ...info };
  }
  async freeModel(m) {
    for (const [t, rec] of this.trainers) if (rec.model === m) await this.freeTrainer(t);
    for (const [d, rec] of this.datasets) if (rec.model === m) await this.freeDataset(d);
    if (this.models.delete(m)) await this.x.wgmlw_model_free(m);
  }
  async tokenize(m, text, { bos = false, special = false } = {}) {
    return this.scratch(async (take) => {
      const [p, n] = this.allocStr(text);
      take(p);
      const out = take(this.raw.malloc(8));
      this.check(await this.x.wgmlw_tokenize(m, p, n, (bos ? TOK.BOS : 0) | (special ? TOK.SPECIAL : 0), out, out + 4), "tokenize");
      const ids = this.dv.getUint32(out, true), k = this.dv.getUint32(out + 4, true);
      const r = new Int32Array(this.raw.memory.buffer, ids, k).slice();
      this.raw.free(ids);
      return r;
    });
  }
  // Generation from a fresh sequence: prompt is text (tokenized with special tokens, no BOS) or
  // ids; onText(piece) hears whole UTF-8 characters as they are decoded; stop() ends it early.
  // Value: {text, ids, stats}.
  async generate(m, prompt, { maxTokens = 64, temperature = 0, topK = 0, topP = 1, seed = 0, onText } = {}) {
    const ids = typeof prompt === "string" ? await this.tokenize(m, prompt, { special: true }) : Int32Array.from(prompt);
    if (!ids.length) throw new WgmlError("generate: the prompt is empty", "WGML_ERR_ARG");
    let text = "";
    this.onText = (s) => { text += s; if (onText) onText(s); };
    this.stopFlag = false;
    try {
      return await this.scratch(async (take) => {
        const p = take(this.alloc(ids)), out = take(this.raw.malloc(8));
        this.check(await this.x.wgmlw_generate(m, p, ids.length, maxTokens, temperature, topK, topP, seed, out, out + 4), "generate");
        const gp = this.dv.getUint32(out, true), n = this.dv.getUint32(out + 4, true);
        const gen = new Int32Array(this.raw.memory.buffer, gp, n).slice();
        this.raw.free(gp);
        return { text, ids: gen, stats: this.json() };
      });
    } finally {
      this.onText = null;
      this.stopFlag = false;
    }
  }

  // ---- training
  // A LoRA trainer (mode "ste": straight-through on the 4-bit weights) with `wgml finetune`'s
  // defaults for what is not given.
  async trainer(m, { mode = "lora", rank = 8, alpha = 16, targets = "q,v", batch = 1, seqLen = 64, lr = 2e-4,
    weightDecay = 0.01, seed = 0 } = {}) {
    const cfg = { mode, rank, alpha, targets: targetBits(targets), batch, seqLen, lr, weightDecay, seed };
    const t = await this.x.wgmlw_trainer_new(m, mode === "ste" ? 1 : 0, rank, alpha, cfg.targets, batch, seqLen, lr, weightDecay, seed);
    if (!t) this.check(this.raw.wgmlw_status(), "trainer");
    this.trainers.set(t, { model: m, cfg, steps: 0 });
    return t;
  }
  async freeTrainer(t) { if (this.trainers.delete(t)) await this.x.wgmlw_trainer_free(t); }
  rec(t) {
    const r = this.trainers.get(t);
    if (!r) throw new WgmlError("no such trainer (freed, or its device was lost)", "WGML_ERR_STATE");
    return r;
  }
  // Inputs and labels [batch, seqLen] of rows of seqLen + 1 ids (fewer rows than batch: padded,
  // their labels ignored).
  batchOf(cfg, rows) {
    const { batch: B, seqLen: L } = cfg;
    if (rows.length > B) throw new WgmlError(`trainer: ${rows.length} rows for a batch of ${B}`, "WGML_ERR_ARG");
    const tok = new Int32Array(B * L), lab = new Int32Array(B * L).fill(-100);
    rows.forEach((r, i) => {
      if (r.length !== L + 1) throw new WgmlError(`trainer: a row of ${r.length} ids; want seq_len + 1 = ${L + 1}`, "WGML_ERR_ARG");
      tok.set(r.subarray(0, L), i * L);
      lab.set(r.subarray(1), i * L);
    });
    return [tok, lab];
  }
  // One optimizer step on `batch` rows of seqLen + 1 ids; the mean loss before the update.
  async step(t, rows, { lr } = {}) {
    const r = this.rec(t);
    const [tok, lab] = this.batchOf(r.cfg, rows);
    return this.scratch(async (take) => {
      const out = take(this.raw.malloc(4));
      this.check(await this.x.wgmlw_trainer_step(t, take(this.alloc(tok)), take(this.alloc(lab)), lr ?? r.cfg.lr, out), "train step");
      r.steps++;
      return this.dv.getFloat32(out, true);
    });
  }
  // Mean next-token loss and perplexity of text (or ids) in rows of seqLen + 1, with the
  // trainer's current adapter: {loss, ppl, tokens}.
  async evaluate(t, data, { maxRows = Infinity } = {}) {
    const r = this.rec(t);
    const ids = typeof data === "string" ? await this.tokenize(r.model, data) : Int32Array.from(data);
    const rows = rowsOf(ids, r.cfg.seqLen).slice(0, maxRows);
    let sum = 0, n = 0;
    for (let i = 0; i < rows.length; i += r.cfg.batch) {
      const [tok, lab] = this.batchOf(r.cfg, rows.slice(i, i + r.cfg.batch));
      await this.scratch(async (take) => {
        const out = take(this.raw.malloc(16));
        this.check(await this.x.wgmlw_trainer_eval(t, take(this.alloc(tok)), take(this.alloc(lab)), out, out + 8), "eval");
        sum += this.dv.getFloat64(out, true);
        n += Number(this.dv.getBigInt64(out + 8, true));
      });
    }
    const loss = n ? sum / n : NaN;
    return { loss, ppl: Math.exp(loss), tokens: n };
  }

  // ---- training data, cut as `wgml finetune` cuts it (plain text: the last evalFraction of the
  // tokens held out; JSONL chat: one example a row, the model's chat format, only the
  // assistant's turns learned). Value: {data, n_train, n_eval, train_labels, eval_labels, ...}.
  async dataset(m, { text, bytes, name = "train.txt" }, { seqLen = 64, evalFraction = 0.1 } = {}) {
    if (!this.models.has(m)) throw new WgmlError("no such model (freed, or its device was lost)", "WGML_ERR_STATE");
    const path = `/data/${name.replace(/[^A-Za-z0-9._-]/g, "_")}`;
    this.fs.mkdir("/data");
    this.putFile(path, bytes ?? new TextEncoder().encode(text ?? ""));
    try {
      const d = await this.scratch(async (take) => this.x.wgmlw_data_load(m, take(this.allocStr(path)[0]), seqLen, evalFraction));
      if (!d) this.check(this.raw.wgmlw_status(), "data");
      this.datasets.set(d, { model: m, seqLen });
      return { data: d, seqLen, ...this.json() };
    } finally {
      this.removeFile(path);
    }
  }
  async freeDataset(d) { if (this.datasets.delete(d)) this.raw.wgmlw_data_free(d); }
  // One optimizer step on the trainer's batch of training rows from position pos of the data's
  // order (the trainer's seed): {loss, pos} with the next position. lr: this step's (default:
  // the trainer's, or with {step, total} `wgml finetune`'s schedule: warmup over total / 20
  // steps, cosine decay to a tenth).
  async trainOn(t, d, { pos = 0, lr, step, total } = {}) {
    const r = this.rec(t);
    if (!this.datasets.has(d)) throw new WgmlError("no such dataset", "WGML_ERR_STATE");
    if (lr === undefined && total > 0) lr = this.raw.wgmlw_lr(BigInt(step), BigInt(total), r.cfg.lr);
    return this.scratch(async (take) => {
      const out = take(this.raw.malloc(4));
      const next = await this.x.wgmlw_data_step(t, d, r.cfg.seed, BigInt(pos), lr ?? r.cfg.lr, out);
      if (next < 0n) this.check(this.raw.wgmlw_status(), "train step");
      r.steps++;
      return { loss: this.dv.getFloat32(out, true), pos: Number(next) };
    });
  }
  // The held-out rows' mean loss and perplexity with the trainer's current adapter.
  async evalData(t, d) {
    this.rec(t);
    return this.scratch(async (take) => {
      const out = take(this.raw.malloc(16));
      this.check(await this.x.wgmlw_data_eval(t, d, out, out + 8), "eval");
      const sum = this.dv.getFloat64(out, true), n = Number(this.dv.getBigInt64(out + 8, true));
      const loss = n ? sum / n : NaN;
      return { loss, ppl: Math.exp(loss), tokens: n };
    });
  }
  // A checkpoint of the run: the adapter, AdamW's moments and small state, the steps taken
  // (structured-clonable: IndexedDB keeps it as it is); restore() puts it back into a trainer of
  // the same configuration.
  async checkpoint(t) {
    const r = this.rec(t);
    const opt = await this.scratch(async (take) => {
      const buf = take(this.raw.malloc(64)), n = take(this.raw.malloc(4));
      this.dv.setUint32(n, 64, true);
      this.check(await this.x.wgmlw_trainer_opt_read(t, buf, n), "checkpoint");
      return this.u8.slice(buf, buf + this.dv.getUint32(n, true));
    });
    return { steps: r.steps, cfg: r.cfg, param: await this.getAdapter(t), m: await this.getAdapter(t, "m"),
      v: await this.getAdapter(t, "v"), opt };
  }
  async restore(t, ck) {
    const r = this.rec(t);
    for (const what of ["param", "m", "v"]) await this.setAdapter(t, ck[what], what);
    await this.scratch(async (take) => this.check(await this.x.wgmlw_trainer_opt_write(t, take(this.alloc(ck.opt)), ck.opt.length), "restore"));
    r.steps = ck.steps;
  }

  // ---- adapters
  // The trainer's tensors ({name: Float32Array}: blk.N.attn_q.lora_a, ...); what: "param", "m", "v".
  async getAdapter(t, what = "param") {
    this.rec(t);
    const k = ["param", "m", "v"].indexOf(what), out = {};
    for (let i = 0; i < this.raw.wgmlw_trainer_tensor_count(t); i++) {
      const name = this.cstr(this.raw.wgmlw_trainer_tensor_name(t, i)), n = Number(this.raw.wgmlw_trainer_tensor_numel(t, i));
      out[name] = await this.scratch(async (take) => {
        const p = take(this.raw.malloc(4 * n));
        this.check(await this.x.wgmlw_trainer_read(t, i, k, p), "get adapter");
        return new Float32Array(this.raw.memory.buffer, p, n).slice();
      });
    }
    return out;
  }
  async setAdapter(t, tensors, what = "param") {
    this.rec(t);
    const k = ["param", "m", "v"].indexOf(what);
    for (let i = 0; i < this.raw.wgmlw_trainer_tensor_count(t); i++) {
      const name = this.cstr(this.raw.wgmlw_trainer_tensor_name(t, i)), n = Number(this.raw.wgmlw_trainer_tensor_numel(t, i));
      const a = tensors[name];
      if (!a) throw new WgmlError(`set adapter: no tensor ${name}`, "WGML_ERR_ARG");
      if (a.length !== n) throw new WgmlError(`set adapter: ${name} has ${a.length} elements; the trainer's has ${n}`, "WGML_ERR_SHAPE");
      await this.scratch(async (take) => this.check(await this.x.wgmlw_trainer_write(t, i, k, take(this.alloc(Float32Array.from(a)))), "set adapter"));
    }
  }
  // Generation with the trainer's current adapter from now on.
  async attach(t) { this.rec(t); this.check(await this.x.wgmlw_trainer_attach(t), "attach"); }
  // Generation with the given tensors (names as getAdapter's), or none (null).
  async setModelAdapter(m, tensors, { rank = 8, alpha = 16 } = {}) {
    const names = tensors ? Object.keys(tensors) : [];
    await this.scratch(async (take) => {
      const np = take(this.raw.malloc(4 * names.length + 4)), dp = take(this.raw.malloc(4 * names.length + 4));
      names.forEach((k, i) => {
        this.dv.setUint32(np + 4 * i, take(this.allocStr(k)[0]), true);
        this.dv.setUint32(dp + 4 * i, take(this.alloc(Float32Array.from(tensors[k]))), true);
      });
      this.check(await this.x.wgmlw_model_set_lora(m, rank, alpha, names.length, np, dp), "set adapter");
    });
  }
  // The adapter as `wgml finetune` writes it: {"adapter_config.json": bytes, "adapter.safetensors": bytes}.
  async saveAdapter(t, dir = "/adapter") {
    const r = this.rec(t);
    this.fs.mkdir(dir);
    await this.scratch(async (take) => this.check(await this.x.wgmlw_save_adapter(t, take(this.allocStr(dir)[0]),
      take(this.allocStr(this.models.get(r.model).path)[0]), BigInt(r.steps)), "save adapter"));
    const files = {};
    for (const f of ["adapter_config.json", "adapter.safetensors"]) files[f] = this.fs.get(`${dir}/${f}`).slice();
    return files;
  }
  // Generation with an adapter's files (as saveAdapter or `wgml finetune` made them), checked
  // against the model they were trained on.
  async loadAdapter(m, files, dir = "/adapter-in") {
    this.fs.mkdir(dir);
    for (const [f, bytes] of Object.entries(files)) this.fs.put(`${dir}/${f}`, bytes);
    await this.scratch(async (take) => this.check(await this.x.wgmlw_load_adapter(m, take(this.allocStr(dir)[0]),
      take(this.allocStr(this.models.get(m).path)[0])), "load adapter"));
  }
}
