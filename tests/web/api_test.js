// The parts of tests/web/test_api.py that run in the page: each drives wgml through the worker
// API exactly as a page would and reports what it saw; the Python side compares it with the
// native build and says pass or fail.
import { WgmlClient } from "../../web/client.js";
import { rowsOf } from "../../web/wgml.js";

const q = new URLSearchParams(location.search);
const json = (k, d) => (q.has(k) ? JSON.parse(q.get(k)) : d);
const files = json("files", {}), params = json("params", {}), report = q.get("report");
const pre = document.getElementById("out");
let queue = Promise.resolve();
const send = (msg) => { if (report) queue = queue.then(() => fetch(report, { method: "POST", body: JSON.stringify(msg) })); return queue; };
const log = (text) => { pre.textContent += text + "\n"; send({ type: "out", fd: 1, text: text + "\n" }); };
const b64 = (bytes) => { let s = ""; for (let i = 0; i < bytes.length; i += 32768) s += String.fromCharCode(...bytes.subarray(i, i + 32768)); return btoa(s); };
const w = new WgmlClient({ options: { limits: json("limits", {}) } });

// What a call threw, as {status, message} (or {status: "OK"} when it did not).
async function outcome(p) {
  try { await p; return { status: "OK" }; } catch (e) { return { status: e.status || "?", message: e.message }; }
}

async function tiny() {
  const P = params;
  const m = await w.loadModel("/tiny.gguf", { url: files.tiny });
  log(`loaded: ${m.n_layer} layers, width ${m.n_embd}, vocab ${m.n_vocab}`);
  const gen0 = await w.generate(m.model, P.prompt, { maxTokens: P.maxTokens });
  // the KV cache's f16 form: the same file loaded again with it, greedy from the same prompt
  const m16 = await w.loadModel("/tiny.gguf", { kv: "f16" });
  const gen16 = await w.generate(m16.model, P.prompt, { maxTokens: P.maxTokens });
  await w.freeModel(m16.model);
  const bad_kv = await outcome(w.loadModel("/tiny.gguf", { kv: "bf16" }));
  const t = await w.trainer(m.model, { rank: P.rank, alpha: P.alpha, targets: "all", batch: P.batch, seqLen: P.seqLen, lr: P.lr });
  const rows = rowsOf(await w.tokenize(m.model, P.text), P.seqLen);
  const before = await w.evaluate(t, P.text);
  const losses = [];
  for (let s = 0; s < P.steps; s++) {
    const batch = [];
    for (let i = 0; i < P.batch; i++) batch.push(rows[(s * P.batch + i) % rows.length]);
    losses.push(await w.step(t, batch));
    log(`step ${s}: loss ${losses[s].toFixed(6)}`);
  }
  const after = await w.evaluate(t, P.text);
  const errors = { short_text: await outcome(w.evaluate(t, "ab")), bad_targets: await outcome(w.trainer(m.model, { targets: "qq" })) };
  log(`held-in perplexity ${before.ppl.toFixed(4)} -> ${after.ppl.toFixed(4)}`);
  const adapter = await w.getAdapter(t);
  const saved = await w.saveAdapter(t);
  await w.attach(t);
  const gen1 = await w.generate(m.model, P.prompt, { maxTokens: P.maxTokens });
  // the saved files, loaded back: the same generation
  await w.setModelAdapter(m.model, null);
  const plain = await w.generate(m.model, P.prompt, { maxTokens: P.maxTokens });
  await w.loadAdapter(m.model, saved);
  const gen2 = await w.generate(m.model, P.prompt, { maxTokens: P.maxTokens });
  return {
    info: m, errors, gen0: Array.from(gen0.ids), losses, before, after,
    kv16: { kv_f16: m16.kv_f16, gen: Array.from(gen16.ids), bad: bad_kv },
    adapter: Object.fromEntries(Object.entries(adapter).map(([k, v]) => [k, Array.from(v)])),
    files: Object.fromEntries(Object.entries(saved).map(([k, v]) => [k, b64(v)])),
    gen1: Array.from(gen1.ids), plain: Array.from(plain.ids), gen2: Array.from(gen2.ids),
  };
}

async function errors() {
  const r = {};
  r.not_gguf = await outcome(w.loadModel("/not.gguf", { url: files.not_gguf }));
  r.truncated = await outcome(w.loadModel("/truncated.gguf", { url: files.truncated }));
  const m = await w.loadModel("/tiny.gguf", { url: files.tiny });
  r.empty_prompt = await outcome(w.generate(m.model, "", { maxTokens: 4 }));
  r.reference = Array.from((await w.generate(m.model, params.prompt, { maxTokens: 24 })).ids);
  // the device is lost mid-generation: the call fails with DEVICE_LOST, nothing hangs
  let pieces = 0;
  r.lost = await outcome(w.generate(m.model, params.prompt, { maxTokens: 200, onText: () => { if (pieces++ === 0) w.loseDevice(); } }));
  r.lost.pieces = pieces;
  r.after_lost_call = await outcome(w.generate(m.model, params.prompt, { maxTokens: 4 }));
  // the worker is still usable: a new device, the model again, the same tokens
  const m2 = await w.loadModel("/tiny.gguf");
  r.again = Array.from((await w.generate(m2.model, params.prompt, { maxTokens: 24 })).ids);
  // a generation stopped from the page ends early
  let n = 0;
  for await (const piece of w.stream(m2.model, params.prompt, { maxTokens: 200 })) if (++n === 2) break;
  r.stopped_after = n;
  r.after_stop = Array.from((await w.generate(m2.model, params.prompt, { maxTokens: 24 })).ids);
  // a device whose limits are below the model's tensors (64 KiB per binding and buffer; the
  // token embedding is 80 KiB): a clear refusal at load, not a failure later
  const small = new WgmlClient({ options: { limits: { maxStorageBufferBindingSize: 65536, maxBufferSize: 65536 } } });
  r.small_device = await outcome(small.loadModel("/tiny.gguf", { url: files.tiny }));
  small.terminate();
  return r;
}

async function smollm2() {
  const m = await w.loadModel("/model.gguf", { url: files.model, nCtx: 64 });
  log(`${((performance.now() - t0) / 1000).toFixed(1)} s: loaded: ${m.n_layer} layers, width ${m.n_embd}, vocab ${m.n_vocab}`);
  const device = await w.open();
  const g = await w.generate(m.model, params.prompt, { maxTokens: params.maxTokens, onText: (s) => log(`${((performance.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(s)}`) });
  return { device, ids: Array.from(g.ids), text: g.text, stats: g.stats };
}

const parts = { tiny, errors, smollm2 };
const t0 = performance.now();
(async () => {
  let code = 0;
  try {
    const value = await parts[q.get("part")]();
    await send({ type: "result", value });
  } catch (e) {
    log(`failed: ${e.status || ""} ${e.message}\n${e.stack || ""}`);
    code = 1;
  }
  await send({ type: "exit", code, ms: performance.now() - t0, name: "api " + q.get("part") });
})();
