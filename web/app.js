// The page (web/index.html): what a person does with wgml in a tab, through web/client.js (the
// library runs in a Web Worker, so the page stays responsive). One model at a time; one
// fine-tuning run, checkpointed to IndexedDB every few steps so that a reload resumes it.
import { WgmlClient } from "./client.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
// ?limits={"maxStorageBufferBindingSize":N} lowers the device's limits (tests of small devices)
const limits = params.get("limits") ? JSON.parse(params.get("limits")) : {};
const w = new WgmlClient({ options: { limits } });

const state = {
  model: null,   // loadModel's value
  modelKey: "",  // name and size: which checkpoint belongs to it
  trainer: null,
  data: null,    // dataset's value
  run: null,     // {cfg, total, step, pos, losses: [], ppl0, ppl1, paused, started}
  busy: false,
  adapterOn: false,
  stopped: false, // the Stop button ended the generation
};

function status(id, text, kind = "") {
  const el = $(id);
  el.textContent = text;
  el.className = "status " + kind;
}
function fail(id, e) { status(id, `${e.status ? e.status + ": " : ""}${e.message || e}`, "error"); }
function enable(on) {
  for (const s of document.querySelectorAll("[data-needs=model]")) s.toggleAttribute("data-disabled", !on);
}
const fmtTime = (s) => (s < 90 ? `${s.toFixed(0)} s` : s < 5400 ? `${(s / 60).toFixed(1)} min` : `${(s / 3600).toFixed(1)} h`);
const mib = (b) => `${(b / 1048576).toFixed(0)} MiB`;

// ---- the device
async function showDevice() {
  if (!navigator.gpu) {
    $("device").innerHTML = "<b>This browser has no WebGPU.</b> Use a recent Chrome or Edge (Linux: start it with " +
      "<code>--enable-unsafe-webgpu</code>), or Safari 26 / Firefox 141 and later.";
    $("device").classList.add("error");
    return false;
  }
  try {
    const d = await w.open();
    $("device").textContent = `GPU: ${d.adapter || "(unnamed)"} (${d.backend}, ${d.type}); storage binding up to ` +
      `${mib(d.maxStorageBufferBindingSize)}, buffers up to ${mib(d.maxBufferSize)}; ` +
      `${[d.shaderF16 && "f16", d.subgroups && "subgroups", d.timestamps && "timestamps"].filter(Boolean).join(", ") || "no optional features"}`;
    return true;
  } catch (e) {
    $("device").textContent = `No WebGPU device: ${e.message}`;
    $("device").classList.add("error");
    return false;
  }
}

// ---- the model
async function loadModel(name, source) {
  if (state.busy) return status("load-status", "Busy: wait for the current task or stop it.", "error");
  state.busy = true;
  status("load-status", `Loading ${name}…`);
  try {
    if (state.model) await unloadModel();
    const t0 = performance.now();
    const m = await w.loadModel(`/models/${name.replace(/[^A-Za-z0-9._-]/g, "_")}`, source);
    state.model = m;
    state.modelKey = `${name}:${source.size ?? ""}`;
    $("model-info").hidden = false;
    $("model-info").textContent = m.text;
    status("load-status", `${name}: ${m.n_layer} layers, width ${m.n_embd}, vocabulary ${m.n_vocab}, ` +
      `context ${m.n_ctx}${m.tokenizer ? "" : " (no tokenizer: it cannot take text)"}; loaded in ` +
      `${((performance.now() - t0) / 1000).toFixed(1)} s`, "ok");
    enable(true);
    await offerResume();
  } catch (e) {
    fail("load-status", e);
    enable(false);
  } finally {
    state.busy = false;
  }
}
async function unloadModel() {
  await w.freeModel(state.model.model); // frees its trainer and data too
  Object.assign(state, { model: null, trainer: null, data: null, run: null, adapterOn: false });
  $("model-info").hidden = true;
  enable(false);
}
$("model-file").addEventListener("change", async (ev) => {
  const f = ev.target.files[0];
  if (f) await loadModel(f.name, { bytes: await f.arrayBuffer(), size: f.size });
});
$("load-url").addEventListener("click", async () => {
  const url = $("model-url").value.trim();
  if (!url) return status("load-status", "Give the URL of a GGUF file.", "error");
  await loadModel(url.split("/").pop() || "model.gguf", { url: new URL(url, location.href).href });
});

// ---- generation
function sampling() {
  return { maxTokens: +$("max-tokens").value, temperature: +$("temperature").value, topK: +$("top-k").value,
    topP: +$("top-p").value, seed: 1 };
}
async function generateInto(out, prompt, opts) {
  out.textContent = "";
  for await (const piece of w.stream(state.model.model, prompt, opts)) out.textContent += piece;
  return w.lastGeneration;
}
$("generate").addEventListener("click", async () => {
  if (state.busy) return status("generate-status", "Busy: wait for the current task.", "error");
  const prompt = $("prompt").value;
  if (!prompt.trim()) return status("generate-status", "Write a prompt first.", "error");
  state.busy = true;
  state.stopped = false;
  $("stop").disabled = false;
  status("generate-status", "");
  const t0 = performance.now();
  try {
    const g = await generateInto($("output"), prompt, sampling());
    const s = (performance.now() - t0) / 1000;
    $("speed").textContent = `${g.ids.length} tokens in ${s.toFixed(1)} s (${(g.ids.length / s).toFixed(1)} tokens/s)` +
      (state.adapterOn ? ", with the adapter" : "");
    if (state.stopped) status("generate-status", `Stopped after ${g.ids.length} tokens.`, "ok");
  } catch (e) {
    fail("generate-status", e);
  } finally {
    state.busy = false;
    $("stop").disabled = true;
  }
});
$("stop").addEventListener("click", () => { state.stopped = true; w.stop(); });

// ---- fine-tuning
const DB = "wgml-page", STORE = "runs";
function db() {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open(DB, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE);
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}
async function dbDo(mode, f) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const tx = d.transaction(STORE, mode), req = f(tx.objectStore(STORE));
    tx.oncomplete = () => { d.close(); resolve(req && req.result); };
    tx.onerror = () => { d.close(); reject(tx.error); };
  });
}
const saveRun = (run) => dbDo("readwrite", (s) => s.put(run, "current"));
const loadRun = () => dbDo("readonly", (s) => s.get("current"));
const dropRun = () => dbDo("readwrite", (s) => s.delete("current"));

function trainSettings() {
  return { rank: +$("rank").value, alpha: 2 * +$("rank").value, targets: $("targets").value.trim() || "all",
    seqLen: +$("seq-len").value, lr: +$("lr").value, batch: 1 };
}
async function trainingText() {
  const f = $("train-file").files[0];
  if (f) return { bytes: new Uint8Array(await f.arrayBuffer()), name: f.name };
  return { text: $("train-text").value, name: "text.txt" };
}

function plot() {
  const c = $("loss-plot"), g = c.getContext("2d"), L = state.run ? state.run.losses : [];
  g.clearRect(0, 0, c.width, c.height);
  if (!L.length) return;
  const top = Math.max(...L) * 1.05, low = Math.min(0, ...L), n = Math.max(state.run.total, 2);
  const x = (i) => 40 + (i / (n - 1)) * (c.width - 50), y = (v) => c.height - 20 - ((v - low) / (top - low)) * (c.height - 30);
  g.strokeStyle = "#999";
  g.beginPath(); g.moveTo(40, 5); g.lineTo(40, c.height - 20); g.lineTo(c.width - 5, c.height - 20); g.stroke();
  g.fillStyle = "#555";
  g.font = "11px sans-serif";
  g.fillText(top.toFixed(2), 2, 14);
  g.fillText(low.toFixed(1), 2, c.height - 22);
  g.fillText(`step ${n}`, c.width - 50, c.height - 6);
  g.strokeStyle = "#1565c0";
  g.beginPath();
  L.forEach((v, i) => (i ? g.lineTo(x(i), y(v)) : g.moveTo(x(i), y(v))));
  g.stroke();
}

function showProgress(t0, done0) {
  const r = state.run;
  $("progress").max = r.total;
  $("progress").value = r.step;
  const rate = (r.step - done0) / ((performance.now() - t0) / 1000);
  const last = r.losses.length ? r.losses[r.losses.length - 1].toFixed(4) : "-";
  $("eta").textContent = `step ${r.step}/${r.total}, loss ${last}` +
    (rate > 0 && r.step < r.total ? `, ETA ${fmtTime((r.total - r.step) / rate)}` : "");
  plot();
}
function showPpl() {
  const r = state.run;
  $("ppl").textContent = r && r.ppl0 ? `held-out perplexity: ${r.ppl0.toFixed(3)} before` +
    (r.ppl1 ? `, ${r.ppl1.toFixed(3)} after ${r.step} steps` : "") : "";
}

// A trainer and data for run (new or resumed); its held-out perplexity before when new.
async function prepare(run, source) {
  const d = state.data = await w.dataset(state.model.model, source, { seqLen: run.cfg.seqLen, evalFraction: 0.1 });
  if (d.n_train < 1)
    throw Object.assign(new Error(`the text gives no training row of ${run.cfg.seqLen} + 1 tokens`), { status: "WGML_ERR_ARG" });
  $("data-info").textContent = `${source.name}: ${d.n_train} training rows of ${run.cfg.seqLen} tokens, ${d.n_eval} held out` +
    (d.n_examples ? ` (${d.n_examples} chat examples, ${d.n_truncated} cut at the sequence length)` : "");
  state.trainer = await w.trainer(state.model.model, run.cfg);
}

// One fine-tuning run per model across tabs (they share the checkpoint): the Web Locks API. The
// lock is asked for first, so that a refusal costs nothing; f runs while it is held.
function withRunLock(f) {
  if (!navigator.locks) return f();
  return navigator.locks.request(`wgml-run:${state.modelKey}`, { ifAvailable: true }, (lock) => {
    if (lock) return f();
    status("train-status", "Another tab is fine-tuning this model: pause or finish it there first.", "error");
  });
}

async function trainSteps() {
  const r = state.run, t0 = performance.now(), done0 = r.step;
  state.busy = true;
  $("pause").disabled = false;
  $("train").disabled = true;
  try {
    if (!r.ppl0 && state.data.n_eval) {
      status("train-status", "Measuring the held-out perplexity before training…");
      r.ppl0 = (await w.evalData(state.trainer, state.data.data)).ppl;
      showPpl();
    }
    status("train-status", "Training…");
    while (r.step < r.total && !r.paused) {
      const s = await w.trainOn(state.trainer, state.data.data, { pos: r.pos, step: r.step, total: r.total });
      r.pos = s.pos;
      r.step++;
      r.losses.push(s.loss);
      showProgress(t0, done0);
      if (r.step % 5 === 0 || r.step === r.total) await checkpoint();
    }
    if (r.step === r.total) {
      if (state.data.n_eval) r.ppl1 = (await w.evalData(state.trainer, state.data.data)).ppl;
      showPpl();
      await w.attach(state.trainer);
      state.adapterOn = true;
      await dropRun();
      status("train-status", `Done: ${r.total} steps, loss ${r.losses[0].toFixed(3)} -> ${r.losses[r.total - 1].toFixed(3)}. ` +
        "Generation now uses the adapter.", "ok");
    } else {
      await checkpoint();
      status("train-status", `Paused at step ${r.step} (saved: Resume goes on, also after a reload).`);
    }
  } catch (e) {
    fail("train-status", e);
  } finally {
    state.busy = false;
    $("pause").disabled = true;
    $("train").disabled = false;
    $("train").textContent = r.step < r.total ? "Resume" : "Train";
  }
}

async function checkpoint() {
  const r = state.run;
  const ck = await w.checkpoint(state.trainer);
  await saveRun({ key: state.modelKey, source: r.source, run: { ...r, paused: false }, ck });
}

// A new run from the page's settings and text: its data and trainer.
async function newRun() {
  const source = await trainingText();
  if (!(source.bytes ? source.bytes.length : source.text.trim().length))
    throw Object.assign(new Error("there is no training text: paste some or choose a file"), { status: "WGML_ERR_ARG" });
  if (state.trainer) await w.freeTrainer(state.trainer);
  if (state.data) await w.freeDataset(state.data.data);
  state.trainer = state.data = null;
  state.run = { cfg: trainSettings(), total: +$("steps").value, step: 0, pos: 0, losses: [], ppl0: 0, ppl1: 0,
    paused: false, source };
  status("train-status", "Preparing the data and the trainer…");
  await prepare(state.run, source);
}

$("train").addEventListener("click", async () => {
  if (state.busy) return status("train-status", "Busy: wait for the current task.", "error");
  state.busy = true;
  try {
    await withRunLock(async () => {
      const resume = state.run && state.run.step < state.run.total && state.trainer;
      try {
        if (!resume) await newRun();
      } catch (e) {
        return fail("train-status", e);
      }
      state.run.paused = false;
      await trainSteps();
    });
  } finally {
    state.busy = false;
  }
});
$("pause").addEventListener("click", () => { if (state.run) state.run.paused = true; });

// A saved run of this model: resume it (the adapter, AdamW's state, the data position).
async function offerResume() {
  let saved = null;
  try { saved = await loadRun(); } catch (e) { return; }
  if (!saved || saved.key !== state.modelKey) return;
  try {
    state.run = { ...saved.run, paused: true };
    await prepare(state.run, saved.source);
    await w.restore(state.trainer, saved.ck);
    showProgress(performance.now(), state.run.step);
    showPpl();
    $("train").textContent = "Resume";
    status("train-status", `A run of this model was saved at step ${state.run.step} of ${state.run.total}: Resume goes on.`);
  } catch (e) {
    fail("train-status", e);
  }
}

// ---- the adapter
$("compare").addEventListener("click", async () => {
  if (state.busy) return status("adapter-status", "Busy: wait for the current task.", "error");
  if (!state.trainer && !state.loaded) return status("adapter-status", "Train or load an adapter first.", "error");
  state.busy = true;
  try {
    const prompt = $("prompt").value, opts = { ...sampling(), temperature: 0 };
    await w.setModelAdapter(state.model.model, null);
    await generateInto($("without"), prompt, opts);
    if (state.loaded) await w.loadAdapter(state.model.model, state.loaded);
    else await w.attach(state.trainer);
    await generateInto($("with"), prompt, opts);
    state.adapterOn = true;
    status("adapter-status", "Greedy, the same prompt; the model keeps the adapter for Generate.", "ok");
  } catch (e) {
    fail("adapter-status", e);
  } finally {
    state.busy = false;
  }
});
$("download").addEventListener("click", async () => {
  if (!state.trainer) return status("adapter-status", "Train an adapter first.", "error");
  try {
    const files = await w.saveAdapter(state.trainer);
    const links = $("download-links");
    links.textContent = "";
    for (const [name, bytes] of Object.entries(files)) {
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([bytes]));
      a.download = name;
      a.textContent = `${name} (${bytes.length} bytes)`;
      links.append(a, " ");
      a.click();
    }
    status("adapter-status", "Saved: `wgml generate --lora DIR` takes these two files.", "ok");
  } catch (e) {
    fail("adapter-status", e);
  }
});
$("adapter-files").addEventListener("change", async (ev) => {
  const files = {};
  for (const f of ev.target.files) files[f.name] = new Uint8Array(await f.arrayBuffer());
  if (!files["adapter_config.json"] || !files["adapter.safetensors"])
    return status("adapter-status", "Choose both adapter_config.json and adapter.safetensors.", "error");
  try {
    await w.loadAdapter(state.model.model, files);
    state.loaded = files;
    state.adapterOn = true;
    status("adapter-status", "Loaded: Generate now uses it.", "ok");
  } catch (e) {
    fail("adapter-status", e);
  }
});

enable(false);
window.wgmlPage = { state, client: w, ready: showDevice() };
// ?driver=PATH (same origin only): a script that drives the page (tests/web/page_driver.js)
const driver = params.get("driver") && new URL(params.get("driver"), location.href);
if (driver && driver.origin === location.origin) import(driver.href).catch((e) => console.error(`the driver ${driver.pathname}: ${e}`));
