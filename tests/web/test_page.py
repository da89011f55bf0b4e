#!/usr/bin/env python3
"""wgml's web page (web/index.html) in headless Chromium, used as a person uses it: the driver
(tests/web/page_driver.js) types into the page's fields and presses its buttons; this script
checks what the page showed against the native build and keeps a screenshot of each stage.

    test_page.py NATIVE_BUILD PART [--shots DIR]

Parts (a CTest each, a fresh browser each):
  train    the device; a file that is not GGUF and a truncated GGUF (a clear message each, the
           page still usable); the tiny test model from the local server; greedy generation (the
           native build's text); a long generation stopped by hand; empty training text and text
           shorter than one row (clear messages); 20 LoRA steps (the loss falls, the held-out
           perplexity drops); generation with and without the adapter; the adapter downloaded
           and given to the native CLI (`wgml generate --lora`: the page's tokens; `wgml eval
           --lora`: the page's held-out perplexity); a JSONL chat file from the file picker.
  resume   a long run; a second copy of the page (the same model) refused its own run; the run
           paused, the page reloaded, the run resumed from its checkpoint in IndexedDB.
  smollm2  SmolLM2-135M greedy "The capital of France is" (the native build's tokens).
Screenshots: DIR (default build-web/page-test/shots), named by stage."""
import argparse
import base64
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import run_browser  # noqa: E402
from test_api import check, failures_count, scratch  # noqa: E402

SMOL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("native")
    ap.add_argument("part", choices=["train", "resume", "smollm2"])
    ap.add_argument("--shots", default=os.path.join(ROOT, "build-web", "page-test", "shots"))
    a = ap.parse_args()
    native = os.path.abspath(a.native)
    os.environ["WGML_LIBRARY"] = os.path.join(native, "libwgml.so")
    from test_finetune_cli import write_model

    d = scratch("page-" + a.part)
    tiny = os.path.join(d, "tiny.gguf")
    write_model(tiny)
    code, results = run_browser.open_page("web/index.html", {
        "driver": "/tests/web/page_driver.js", "part": a.part, "tiny": run_browser.url_of(tiny), "smol": run_browser.url_of(SMOL),
        "notGguf": run_browser.url_of(os.path.join(ROOT, "README.md")), "truncated": run_browser.url_of(SMOL + ":5000")},
        timeout=600, shots_dir=a.shots)
    lap("the page")
    check(code == 0 and len(results) == 1, "the page went through every stage of part %s (exit %s)" % (a.part, code))
    if not results:
        return finish()
    s = results[0]
    if "failure" in s:
        print("page: %s" % s["failure"])
    print("seconds since the page opened, by stage: %s" % s.get("at"))
    {"train": part_train, "resume": part_resume, "smollm2": part_smollm2}[a.part](s, native, tiny, d)
    shots = sorted(n for n in os.listdir(a.shots) if n in SHOTS[a.part]) if os.path.isdir(a.shots) else []
    check(shots == SHOTS[a.part], "screenshots: %s" % shots)
    return finish()


SHOTS = {"train": ["1-device.png", "2-model-loaded.png", "3-trained.png", "4-with-and-without.png"],
         "resume": ["5-after-reload.png", "6-resumed.png"], "smollm2": ["7-smollm2.png"]}
CORPUS = "the theme of the thesis: the other theme, then the ether. " * 12  # page_driver.js's


def part_train(s, native, tiny, d):
    import wgml
    print("device: %s" % s.get("device"))
    check("GPU:" in s.get("device", ""), "the device is shown")
    for k, words in [("notGguf", "not a GGUF"), ("truncated", "offset")]:
        r = s.get(k, {})
        check(not r.get("ok") and words in r.get("text", ""), "%s: %r" % (k, r.get("text")))
    check(s.get("tiny", {}).get("ok") and "2 layers" in s["tiny"]["text"], "tiny model loaded: %r" % s.get("tiny", {}).get("text"))
    m = wgml.Model.load(tiny)
    want = m.generate_text("the theme", max_tokens=12)
    check(s.get("gen", {}).get("text") == want, "greedy %r, native %r" % (s.get("gen", {}).get("text"), want))
    sp = s.get("stopped", {})
    n = int(sp["text"].split()[2]) if sp.get("text", "").startswith("Stopped after ") else -1
    check(sp.get("ok") and 0 < n < 4000, "a generation of 4000 tokens stopped by hand: %r" % sp.get("text"))
    for k, words in [("empty", "no training text"), ("short", "row")]:
        r = s.get(k, {})
        check(not r.get("ok") and words in r.get("text", ""), "%s training text: %r" % (k, r.get("text")))
    t = s.get("train", {})
    L = t.get("losses", [])
    check(t.get("ok") and len(L) == 20 and L[-1] < L[0], "20 steps, loss %.4f -> %.4f" % (L[0] if L else 0, L[-1] if L else 0))
    check(t.get("ppl1") and t.get("ppl0") and t["ppl1"] < t["ppl0"], "held-out perplexity %s -> %s" % (t.get("ppl0"), t.get("ppl1")))
    check(s.get("compare", {}).get("ok") and s.get("without") == want and s.get("with") != want,
          "without the adapter %r (native %r), with %r" % (s.get("without"), want, s.get("with")))

    # the downloaded files in the native CLI: the same tokens, and the same held-out perplexity
    # (the logits' loss over the held-out rows) as the page measured with them
    adir = os.path.join(d, "adapter")
    os.makedirs(adir)
    for name, b64 in s.get("files", {}).items():
        with open(os.path.join(adir, name), "wb") as f:
            f.write(base64.b64decode(b64))
    check(sorted(s.get("files", {})) == ["adapter.safetensors", "adapter_config.json"], "downloaded %s" % sorted(s.get("files", {})))
    ids = " ".join(str(i) for i in m.tokenize("the theme", special=True))
    r = subprocess.run([os.path.join(native, "wgml"), "generate", "--model", tiny, "--lora", adir, "--prompt-ids", ids,
                        "--max-tokens", "12"], capture_output=True, text=True)
    check(r.returncode == 0 and s.get("with") and s["with"] in r.stdout,
          "the native CLI with the page's adapter: %r (the page: %r; %s)" % (r.stdout.strip()[-200:], s.get("with"), r.stderr.strip()[-200:]))
    text = os.path.join(d, "text.txt")
    with open(text, "w") as f:
        f.write(CORPUS)
    r = subprocess.run([os.path.join(native, "wgml"), "eval", "--model", tiny, "--lora", adir, "--data", text, "--seq-len", "16",
                        "--eval-fraction", "0.1"], capture_output=True, text=True)
    ppl = float(r.stdout.split("perplexity ")[1].split()[0]) if r.returncode == 0 and "perplexity " in r.stdout else 0.0
    check(t.get("ppl1") and abs(ppl - t["ppl1"]) <= 1e-3 * t["ppl1"],
          "held-out perplexity with the adapter: the page %s, the native CLI %s (%s)" % (t.get("ppl1"), ppl, r.stderr.strip()[-200:]))
    j = s.get("jsonl", {})
    check(j.get("ok") and len(j.get("losses", [])) == 3, "a JSONL chat file, 3 steps: %r" % j.get("text"))
    check("36 training rows of 128 tokens, 4 held out (40 chat examples, 0 cut" in s.get("jsonlInfo", ""),
          "the chat file's rows: %r" % s.get("jsonlInfo"))


def part_resume(s, native, tiny, d):
    st = s.get("secondTab", {})
    check(not st.get("ok") and "Another tab" in st.get("text", ""), "a second page training the same model: %r" % st.get("text"))
    paused = s.get("paused", 0)
    check(2 <= paused < 500 and "Paused at step %d" % paused in s.get("pauseStatus", ""), "paused: %r" % s.get("pauseStatus"))
    check(s.get("resumedFrom") == paused and "step %d of 500" % paused in s.get("offer", ""),
          "after the reload the run resumes from its checkpoint: %r" % s.get("offer"))
    rs = s.get("resumed", {})
    check(rs.get("step", 0) >= paused + 3 and rs.get("losses") == rs.get("step"),
          "the resumed run went on: step %s, %s losses kept" % (rs.get("step"), rs.get("losses")))


def part_smollm2(s, native, tiny, d):
    import wgml
    want = wgml.Model.load(SMOL).generate_text("The capital of France is", max_tokens=2)
    check(s.get("smolGen", {}).get("text") == want, "SmolLM2 greedy %r, native %r" % (s.get("smolGen", {}).get("text"), want))


T0 = time.time()


def lap(what):
    print("%.1f s: %s" % (time.time() - T0, what), flush=True)


def finish():
    n = failures_count()
    print("all passed" if not n else "%d check(s) failed" % n)
    sys.exit(1 if n else 0)


if __name__ == "__main__":
    main()
