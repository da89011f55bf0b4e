// Drives web/index.html as a person would (tests/web/test_page.py opens the page with
// ?driver=/tests/web/page_driver.js): types into its fields, presses its buttons, waits for what
// the page shows, reports what it saw to the runner and asks it for a screenshot at each stage.
// The page reloads itself once (a run resumed from its checkpoint): the stage is kept in
// sessionStorage. Parameters (the query): part (train, resume or smollm2: the stages it goes
// through, each a CTest of its own), tiny, smol, notGguf, truncated (URLs of the files).
const q = new URLSearchParams(location.search);
const P = Object.fromEntries(["tiny", "smol", "notGguf", "truncated"].map((k) => [k, q.get(k)]));
const report = (m) => fetch(q.get("report"), { method: "POST", body: JSON.stringify(m) });
const log = (text) => report({ type: "out", fd: 1, text: text + "\n" });
const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const seen = JSON.parse(sessionStorage.getItem("seen") || "{}");
const t0 = performance.now();
seen.at = seen.at || { start: Date.now() };
const mark = (stage) => { seen.at[stage] = (Date.now() - seen.at.start) / 1000; };

async function waitFor(what, f, s = 240) {
  for (let t = 0; t < s * 10; t++) {
    const v = f();
    if (v) return v;
    await sleep(100);
  }
  throw new Error(`timed out after ${s} s waiting for ${what}`);
}
function set(id, v) {
  const el = $(id);
  el.value = v;
  el.dispatchEvent(new Event("input", { bubbles: true }));
}
const click = (id) => $(id).click();
const text = (id) => $(id).textContent;
const cls = (id) => $(id).className;
async function shot(name) { mark(name); await report({ type: "shot", name }); }
// the status line of section id after an action: waits until it says ok or error
async function outcome(id, s = 240) {
  await waitFor(`${id} to settle`, () => /\b(ok|error)\b/.test(cls(id)) && cls(id), s);
  return { ok: cls(id).includes("ok"), text: text(id) };
}
async function loadUrl(url) {
  status0("load-status");
  set("model-url", url);
  click("load-url");
  const r = await outcome("load-status");
  await waitFor("the load's end", () => !window.wgmlPage.state.busy, 120); // a saved run is looked for after it
  return r;
}
function status0(id) { $(id).className = "status"; $(id).textContent = ""; }
async function generate() {
  status0("generate-status");
  $("speed").textContent = "";
  click("generate");
  await waitFor("generation", () => text("speed") && !window.wgmlPage.state.busy || cls("generate-status").includes("error"));
  return { text: text("output"), speed: text("speed"), status: text("generate-status") };
}
async function train(textValue, { steps, seqLen, rank = 4, lr = 0.01, pauseAt = 0 }) {
  status0("train-status");
  set("train-text", textValue);
  set("steps", steps);
  set("seq-len", seqLen);
  set("rank", rank);
  set("lr", lr);
  click("train");
  const st = window.wgmlPage.state;
  if (pauseAt) {
    await waitFor(`step ${pauseAt}`, () => (st.run && st.run.step >= pauseAt) || cls("train-status").includes("error"));
    click("pause");
    await waitFor("the pause", () => !st.busy, 120);
    return { paused: st.run.step, status: text("train-status") };
  }
  const r = await outcome("train-status", 600);
  await waitFor("the run's end", () => !st.busy, 120); // its status comes before its last save
  return { ...r, losses: st.run ? st.run.losses.slice() : [], ppl0: st.run && st.run.ppl0, ppl1: st.run && st.run.ppl1 };
}

const corpus = "the theme of the thesis: the other theme, then the ether. ".repeat(12);

// bad files, the tiny model, generation (and a stop), training text that cannot train, 20 steps,
// the adapter with and without, its files, a JSONL chat file
async function partTrain() {
  seen.device = text("device");
  await shot("1-device");
  seen.notGguf = await loadUrl(P.notGguf);
  seen.truncated = await loadUrl(P.truncated);
  seen.tiny = await loadUrl(P.tiny);
  await shot("2-model-loaded");
  set("prompt", "the theme");
  set("max-tokens", 12);
  seen.gen = await generate(); mark("gen");
  // a long generation stopped by hand: the page says so and goes on
  set("max-tokens", 4000);
  status0("generate-status");
  click("generate");
  await waitFor("the first tokens", () => text("output").length > 0 || cls("generate-status").includes("error"), 120);
  click("stop");
  await waitFor("the stop", () => !window.wgmlPage.state.busy, 120);
  seen.stopped = { text: text("generate-status"), ok: cls("generate-status").includes("ok"), speed: text("speed") };
  set("max-tokens", 12);
  seen.empty = await train("", { steps: 5, seqLen: 16 });
  seen.short = await train("the", { steps: 5, seqLen: 16 });
  seen.train = await train(corpus, { steps: 20, seqLen: 16 });
  await shot("3-trained");
  status0("adapter-status");
  click("compare");
  seen.compare = await outcome("adapter-status");
  seen.with = text("with");
  seen.without = text("without");
  await shot("4-with-and-without");
  status0("adapter-status");
  click("download");
  seen.download = await outcome("adapter-status");
  seen.files = {};
  for (const a of $("download-links").querySelectorAll("a")) {
    const b = new Uint8Array(await (await fetch(a.href)).arrayBuffer());
    let bin = "";
    for (let i = 0; i < b.length; i += 8192) bin += String.fromCharCode(...b.subarray(i, i + 8192));
    seen.files[a.download] = btoa(bin);
  }
  // a chat file (JSONL) through the file picker
  const chat = Array.from({ length: 40 }, (_, i) => JSON.stringify({ prompt: `count ${i}`, response: `there are ${i * 3}` }));
  const dt = new DataTransfer();
  dt.items.add(new File([chat.join("\n")], "chat.jsonl"));
  $("train-file").files = dt.files;
  seen.jsonl = await train("", { steps: 3, seqLen: 128 });
  seen.jsonlInfo = text("data-info");
  await finish();
}

// A long run; meanwhile a second copy of the page (an iframe: its own worker) with the same model
// is refused the model's training; the run paused, the page reloaded, the run resumed.
async function partResume() {
  seen.tiny = await loadUrl(P.tiny);
  mark("loaded");
  const st = window.wgmlPage.state;
  status0("train-status");
  set("train-text", corpus);
  set("seq-len", 16);
  set("rank", 4);
  set("lr", 0.01);
  set("steps", 500);
  click("train");
  // the run holds the model's lock from the click (before its data and trainer)
  await waitFor("the run's start", () => /^(Preparing|Measuring|Training)/.test(text("train-status")) || cls("train-status").includes("error"), 120);
  mark("run started");
  seen.secondTab = await secondTab();
  await waitFor("step 2", () => st.run.step >= 2 || cls("train-status").includes("error"), 120);
  click("pause");
  await waitFor("the pause", () => !st.busy, 120);
  seen.paused = st.run.step; mark("paused");
  seen.pauseStatus = text("train-status");
  sessionStorage.setItem("seen", JSON.stringify(seen));
  sessionStorage.setItem("stage", "reloaded");
  location.reload();
}

async function secondTab() {
  const f = document.createElement("iframe");
  f.src = "/web/index.html";
  f.style.width = "100%";
  document.body.append(f);
  await waitFor("the second page", () => f.contentWindow.wgmlPage, 60);
  await f.contentWindow.wgmlPage.ready;
  mark("second page ready");
  const d = f.contentDocument, g = (id) => d.getElementById(id);
  g("model-url").value = P.tiny;
  g("load-url").click();
  await waitFor("the model in the second page", () => /ok|error/.test(g("load-status").className), 240);
  await waitFor("the second page idle", () => !f.contentWindow.wgmlPage.state.busy, 240);
  mark("second page loaded");
  g("train-text").value = corpus;
  g("train-status").className = "status";
  g("train").click();
  await waitFor("the second page's answer", () => /ok|error/.test(g("train-status").className), 240);
  const r = { load: g("load-status").textContent, text: g("train-status").textContent, ok: g("train-status").className.includes("ok") };
  await f.contentWindow.wgmlPage.client.terminate();
  f.remove();
  mark("second page");
  return r;
}

async function afterReload() {
  seen.reloadTiny = await loadUrl(P.tiny);
  seen.offer = await waitFor("the resume offer", () => text("train-status"), 60);
  const st = window.wgmlPage.state;
  seen.resumedFrom = st.run && st.run.step;
  await shot("5-after-reload");
  click("train");
  await waitFor("three more steps", () => st.run.step >= seen.resumedFrom + 3 || cls("train-status").includes("error"), 240);
  click("pause");
  await waitFor("the pause", () => !st.busy, 120);
  seen.resumed = { step: st.run.step, losses: st.run.losses.length, status: text("train-status") };
  await shot("6-resumed");
  await finish();
}

// SmolLM2-135M from the local server: greedy "The capital of France is"
async function partSmollm2() {
  seen.smol = await loadUrl(P.smol);
  set("prompt", "The capital of France is");
  set("max-tokens", 2);
  seen.smolGen = await generate();
  await shot("7-smollm2");
  await finish();
}

async function finish() {
  sessionStorage.clear();
  await report({ type: "result", value: seen });
  await report({ type: "exit", code: 0, ms: performance.now() - t0, name: "the page" });
}

const PARTS = { train: partTrain, resume: partResume, smollm2: partSmollm2 };
(async () => {
  await window.wgmlPage.ready;
  if (sessionStorage.getItem("stage") === "reloaded") return afterReload();
  if (!PARTS[q.get("part")]) throw new Error(`no part ${q.get("part")} (${Object.keys(PARTS)})`);
  return PARTS[q.get("part")]();
})().catch(async (e) => {
  sessionStorage.clear();
  await report({ type: "result", value: { ...seen, failure: String(e && e.stack ? e.stack : e) } });
  await report({ type: "error", message: String(e) });
});
