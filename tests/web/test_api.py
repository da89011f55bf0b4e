#!/usr/bin/env python3
"""wgml's JavaScript API in headless Chromium (Dawn) against the native build (wgpu-native), the
same calls on both sides: the page (tests/web/api.html) drives the worker API as a page would,
the native side is the Python package over NATIVE_BUILD/libwgml.so and the native CLI.

    test_api.py NATIVE_BUILD PART [--limit NAME=VALUE ...]

PART tiny: the tiny test model: greedy tokens (with the KV cache f32 and f16, and a bad kv refused), text shorter than one row and unknown targets (clear
  errors), the losses of LoRA training steps (all seven
  projections), the perplexity before and after, every adapter tensor after the steps, the
  adapter's files (written in the browser, loaded by the native CLI: the same tokens), and
  generation with the adapter attached, removed and loaded back from its files.
PART errors: a file that is not GGUF, a truncated GGUF, an empty prompt: each a clear error with
  its status; a device whose limits are below a tensor's size (refused at load, naming the tensor
  and the limit); the device lost mid-generation: the
  call fails with WGML_ERR_DEVICE_LOST and the worker then loads the model on a new device and
  gives the same tokens; a stopped stream ends early.
PART smollm2: SmolLM2-135M greedy "The capital of France is": the same tokens as native
  ($WGML_API_TOKENS of them, default 2: " Paris."; --limit lowers the device's limits, e.g. to
  Android's)."""
import argparse
import base64
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import run_browser  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    print("%s: %s" % ("ok" if ok else "FAIL", what), flush=True)
    if not ok:
        failures += 1


def failures_count():
    return failures


def close(a, b, rtol, atol=0.0):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= atol + rtol * np.abs(b)))


# Tolerances: the browser's kernels are the same WGSL, compiled by Tint for SwiftShader instead
# of by naga for lavapipe; float32 sums come out in other orders (subgroup sizes, fused
# multiply-adds), so values agree to float32 rounding amplified by the steps, not bit for bit.
LOSS_RTOL, ADAPTER_ATOL = 1e-4, 2e-5
TINY = dict(prompt="the theme", maxTokens=12, rank=4, alpha=8.0, batch=2, seqLen=16, lr=1e-2, steps=4,
            text="the theme of the thesis: the other theme, then the ether. " * 6)


def scratch(part):
    """A fresh folder under the served tree (build-web/api-test/PART) for the files a part makes."""
    d = os.path.join(ROOT, "build-web", "api-test", part)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def page(part, files, params, limits):
    code, results = run_browser.open_page("tests/web/api.html", {
        "part": part, "files": {k: run_browser.url_of(v) for k, v in files.items()}, "params": params,
        "limits": limits}, timeout=300)
    check(code == 0 and len(results) == 1, "the page ran part %s (exit %s)" % (part, code))
    return results[0] if results else None


def native_tiny(path, P, wgml):
    m = wgml.Model.load(path)
    gen0 = m.generate_text(P["prompt"], max_tokens=P["maxTokens"])
    m16 = wgml.Model.load(path, kv="f16")
    gen16 = m16.generate_text(P["prompt"], max_tokens=P["maxTokens"])
    kv16 = m16.config.kv_f16
    m16.close()
    tr = wgml.Trainer(m, rank=P["rank"], alpha=P["alpha"], targets="all", batch=P["batch"], seq_len=P["seqLen"],
                      lr=P["lr"])
    rows = wgml.model.rows_of(m.tokenize(P["text"]), P["seqLen"])
    before = tr.evaluate(P["text"])
    losses = []
    for s in range(P["steps"]):
        losses.append(tr.step(np.stack([rows[(s * P["batch"] + i) % len(rows)] for i in range(P["batch"])])))
    after = tr.evaluate(P["text"])
    adapter = tr.get_adapter()
    return m, dict(gen0=gen0, gen16=gen16, kv16=kv16, losses=losses, before=before, after=after, adapter=adapter)


def part_tiny(native, limits):
    from test_finetune_cli import write_model
    os.environ["WGML_LIBRARY"] = os.path.join(native, "libwgml.so")
    import wgml
    d = scratch("tiny")
    path = os.path.join(d, "tiny.gguf")
    write_model(path)
    got = page("tiny", {"tiny": path}, TINY, limits)
    if not got:
        return
    m, want = native_tiny(path, TINY, wgml)
    check(got["info"]["n_layer"] == 2 and got["info"]["n_vocab"] == 320 and "architecture:  llama" in got["info"]["text"],
          "model facts: %d layers, vocab %d" % (got["info"]["n_layer"], got["info"]["n_vocab"]))
    check(m.detokenize(got["gen0"]) == want["gen0"] and len(got["gen0"]) == TINY["maxTokens"],
          "greedy %r, native %r" % (m.detokenize(got["gen0"]), want["gen0"]))
    k = got["kv16"]
    check(not got["info"]["kv_f16"] and k["kv_f16"] and want["kv16"] and m.detokenize(k["gen"]) == want["gen16"]
          and len(k["gen"]) == TINY["maxTokens"],
          "the f16 KV cache: greedy %r, native %r" % (m.detokenize(k["gen"]), want["gen16"]))
    check(k["bad"]["status"] == "WGML_ERR_ARG" and "bf16" in k["bad"].get("message", ""),
          "kv bf16: %s %r" % (k["bad"]["status"], k["bad"].get("message")))
    check(close(got["losses"], want["losses"], LOSS_RTOL),
          "training losses %s, native %s" % (np.round(got["losses"], 6), np.round(want["losses"], 6)))
    check(got["losses"][-1] < got["losses"][0], "the loss falls: %.4f -> %.4f" % (got["losses"][0], got["losses"][-1]))
    check(close(got["before"]["loss"], want["before"].loss, LOSS_RTOL) and close(got["after"]["loss"], want["after"].loss, LOSS_RTOL),
          "perplexity %.4f -> %.4f, native %.4f -> %.4f" % (got["before"]["ppl"], got["after"]["ppl"], want["before"].perplexity, want["after"].perplexity))
    worst = max(float(np.abs(np.array(got["adapter"][k]) - want["adapter"][k].reshape(-1)).max()) for k in want["adapter"])
    check(sorted(got["adapter"]) == sorted(want["adapter"]) and worst <= ADAPTER_ATOL,
          "%d adapter tensors after %d steps, largest difference %.2g" % (len(got["adapter"]), TINY["steps"], worst))
    check(got["gen2"] == got["gen1"] and got["plain"] == got["gen0"],
          "generation: with the adapter %s, without %s, from its saved files %s" % (got["gen1"], got["plain"], got["gen2"]))
    for case, words in [("short_text", "row"), ("bad_targets", "qq")]:
        r = got["errors"][case]
        check(r["status"] == "WGML_ERR_ARG" and words in r.get("message", ""), "%s: %s %r" % (case, r["status"], r.get("message")))
    # the browser's adapter files, read by the native CLI
    adir = os.path.join(d, "adapter")
    os.makedirs(adir)
    for name, b64 in got["files"].items():
        with open(os.path.join(adir, name), "wb") as f:
            f.write(base64.b64decode(b64))
    ids = " ".join(str(i) for i in m.tokenize(TINY["prompt"], special=True))
    r = subprocess.run([os.path.join(native, "wgml"), "generate", "--model", path, "--lora", adir, "--prompt-ids", ids,
                        "--max-tokens", str(TINY["maxTokens"])], capture_output=True, text=True)
    text = m.detokenize(got["gen1"])
    check(r.returncode == 0 and text in r.stdout,
          "the native CLI with the browser's adapter: %r (want %r; %s)" % (r.stdout.strip()[-200:], text, r.stderr.strip()[-300:]))


def part_errors(native, limits):
    from test_finetune_cli import write_model
    d = scratch("errors")
    path = os.path.join(d, "tiny.gguf")
    write_model(path)
    trunc = os.path.join(d, "truncated.gguf")
    with open(path, "rb") as f, open(trunc, "wb") as g:
        g.write(f.read()[:3000])
    got = page("errors", {"tiny": path, "not_gguf": os.path.join(ROOT, "README.md"), "truncated": trunc},
               {"prompt": "the theme"}, limits)
    if not got:
        return
    for case, status, words in [("not_gguf", "WGML_ERR_FORMAT", "not.gguf"), ("truncated", "WGML_ERR_FORMAT", "truncated.gguf"),
                                ("empty_prompt", "WGML_ERR_ARG", "empty")]:
        r = got[case]
        check(r["status"] == status and words in r.get("message", ""), "%s: %s %r" % (case, r["status"], r.get("message")))
    check(got["lost"]["status"] == "WGML_ERR_DEVICE_LOST" and "lost" in got["lost"].get("message", ""),
          "device lost mid-generation after %d piece(s): %s %r" % (got["lost"]["pieces"], got["lost"]["status"], got["lost"].get("message")))
    check(got["after_lost_call"]["status"] != "OK", "a call on the lost device fails: %s" % got["after_lost_call"])
    check(got["again"] == got["reference"] and len(got["again"]) == 24,
          "after the loss, a new device gives the same tokens (%d)" % len(got["again"]))
    check(got["stopped_after"] == 2 and got["after_stop"] == got["reference"], "a stopped stream ends; the next generation is whole")
    r = got["small_device"]
    check(r["status"] == "WGML_ERR_LIMIT" and "token_embd" in r.get("message", "") and "65536" in r.get("message", ""),
          "a device with 64 KiB limits: %s %r" % (r["status"], r.get("message")))


def part_smollm2(native, limits):
    os.environ["WGML_LIBRARY"] = os.path.join(native, "libwgml.so")
    import wgml
    path = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    P = {"prompt": "The capital of France is", "maxTokens": int(os.environ.get("WGML_API_TOKENS", "2"))}
    got = page("smollm2", {"model": path}, P, limits)
    if not got:
        return
    m = wgml.Model.load(path)
    want = m.generate_text(P["prompt"], max_tokens=P["maxTokens"])
    dev = got["device"]
    print("device: %s (%s); binding limit %d MiB, buffer limit %d MiB" % (
        dev["adapter"], dev["backend"], dev["maxStorageBufferBindingSize"] >> 20, dev["maxBufferSize"] >> 20))
    for k, v in limits.items():
        check(dev[k] <= v, "the device's %s is %d (at most %d asked)" % (k, dev[k], v))
    check(m.detokenize(got["ids"]) == want and got["text"] == want and len(got["ids"]) == P["maxTokens"],
          "greedy %r: %r, native %r" % (P["prompt"], got["text"], want))
    s = got["stats"]
    print("browser: prefill %d tokens %.2f s, decode %d tokens %.2f s (%.2f tokens/s)" % (
        s["prompt_tokens"], s["prefill_wall_s"], s["generated_tokens"], s["decode_wall_s"],
        s["generated_tokens"] / max(s["decode_wall_s"], 1e-9)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("native")
    ap.add_argument("part", choices=["tiny", "errors", "smollm2"])
    ap.add_argument("--limit", action="append", default=[])
    a = ap.parse_args()
    {"tiny": part_tiny, "errors": part_errors, "smollm2": part_smollm2}[a.part](os.path.abspath(a.native),
                                                                             run_browser.limits_of(a.limit))
    print("%s" % ("all passed" if not failures else "%d check(s) failed" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
