# venv: pt
"""wgml's LoRA adapters in PEFT's format, both ways, against transformers + PEFT (which we did
not write) on the same GGUF model: transformers loads the GGUF (dequantised, undoing the q/k row
permutation of llama.cpp's converter), PEFT applies the adapter, in float64.

1. wgml -> PEFT. `wgml finetune` on the tiny test model (tests/py/test_finetune_cli.py's: 2
   layers, 4 query and 2 KV heads, Q4_1) with rank 8 on all seven projections writes OUT/peft;
   PeftModel.from_pretrained(OUT/peft) gives wgml's logits with the adapter (`tool_model logits
   --lora OUT`), and wgml reading OUT/peft gives the same logits as reading OUT.
2. PEFT -> wgml. Random adapters made by PEFT (get_peft_model, every lora_A/lora_B drawn at
   random, save_pretrained; the file's tensors stored as float32, float64 or float16): rank 8
   and 16, all seven projections or q and v only, lora_alpha equal to, twice and a quarter of
   the rank, on the tiny model (tests/py/test_peft_smollm2.py: on SmolLM2-135M): wgml's logits
   with `--lora DIR` equal those of PEFT loading DIR.
3. llama.cpp's LoRA GGUF (`wgml export-lora`): the keys and tensor names and shapes llama.cpp
   reads (checked with PyPI gguf), q's and k's rows in the GGUF's order; wgml reading it back gives
   the same logits (wgml's adapter) or PEFT's (PEFT's adapter exported).
4. What does not map is refused with a message naming it: DoRA, rsLoRA, a module wgml does not
   adapt (lm_head), an adapter of another base (shapes that do not fit), a GGUF that is not an
   adapter.
Tolerance: wgml computes in float32 on the same dequantised weights; the logits' error is that
of the model tests (tests/py/test_llama_logits.py): |wgml - ref| <= 1e-3 + 1e-5 |ref| (measured
1.2e-5 to 1.3e-5 on the tiny model, 4.0e-5 on SmolLM2). What fails it: q's and k's lora_B left in
GGUF's row order (no permutation either way) gives 2.5 and 2.7 on the tiny model's trained and
random adapters, 0.35 with q and v only, 6.0 on SmolLM2.
Usage: test_peft_adapter.py BUILD_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from test_finetune_cli import write_model  # noqa: E402
from wgml_dump import run_tool_logits  # noqa: E402

SMOL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ATOL, RTOL = 1e-3, 1e-5
failures = 0


def check(ok, what):
    global failures
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    failures += not ok


def base_model(gguf):
    m = AutoModelForCausalLM.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf), dtype=torch.float32)
    return m.double().eval()


def ref_logits(model, ids, npre):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, npre - 1:].numpy()


def wgml_logits(build, gguf, ids, npre, lora=None):
    tool = os.path.join(build, "tests", "tool_model")
    if lora is None:
        got = run_tool_logits(tool, gguf, [(ids, npre, len(ids) - npre)])
        return None if got is None else got[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.bin")
        r = subprocess.run([tool, "logits", gguf, out, "--lora", lora], input=("%d %s\n" % (npre, " ".join(map(str, ids)))).encode(),
                           capture_output=True)
        if r.returncode != 0:
            print(r.stderr.decode().rstrip())
            return None
        rows = np.fromfile(out, dtype=np.float32).astype(np.float64)
    return rows.reshape(len(ids) - npre + 1, -1)


def close(got, want, what):
    if got is None:
        return check(False, what + ": wgml failed")
    err = np.abs(got - want)
    check(got.shape == want.shape and bool(np.all(err <= ATOL + RTOL * np.abs(want))),
          "%s: max |wgml - PEFT| %.2e (logits up to %.1f)" % (what, err.max(), np.abs(want).max()))


def peft_random(base, r, alpha, modules, out, seed):
    """A PEFT adapter with random A and B (B is zero at PEFT's init: nothing would be tested)."""
    pm = get_peft_model(base, LoraConfig(r=r, lora_alpha=alpha, target_modules=modules, lora_dropout=0.0))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.05)
    pm.save_pretrained(out)
    return pm


def wgml_to_peft(build, d, tiny, ids):
    text = os.path.join(d, "text.txt")
    with open(text, "w") as f:
        f.write("the theme of the thesis: the other theme, then the ether. " * 40)
    out = os.path.join(d, "run")
    r = subprocess.run([os.path.join(build, "wgml"), "finetune", "--model", tiny, "--data", text, "--out", out, "--steps", "4",
                        "--seq-len", "16", "--rank", "8", "--alpha", "16", "--targets", "all", "--lr", "1e-2"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "wgml finetune: %s" % (r.stdout[-300:] + r.stderr[-300:]))
    pd = os.path.join(out, "peft")
    cfg = json.load(open(os.path.join(pd, "adapter_config.json"))) if os.path.exists(os.path.join(pd, "adapter_config.json")) else {}
    check(cfg.get("peft_type") == "LORA" and cfg.get("r") == 8 and cfg.get("lora_alpha") == 16 and
          sorted(cfg.get("target_modules", [])) == sorted(ALL), "PEFT's config: %s" % cfg)
    t = load_file(os.path.join(pd, "adapter_model.safetensors")) if os.path.exists(os.path.join(pd, "adapter_model.safetensors")) else {}
    check(len(t) == 28 and t.get("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight", np.zeros(0)).shape == (32, 8),
          "PEFT's tensors: %d, e.g. %s" % (len(t), sorted(t)[:2]))
    want = ref_logits(PeftModel.from_pretrained(base_model(tiny), pd).eval(), ids, 4)
    got = wgml_logits(build, tiny, ids, 4, lora=out)
    close(got, want, "wgml's adapter (its own files) against PEFT loading OUT/peft")
    got2 = wgml_logits(build, tiny, ids, 4, lora=pd)
    check(got is not None and got2 is not None and np.array_equal(got, got2), "wgml reading OUT/peft gives what it reads from OUT")
    plain = ref_logits(base_model(tiny), ids, 4)
    check(np.abs(want - plain).max() > 1e-2, "the adapter moves the logits (%.3f)" % np.abs(want - plain).max())
    llama_cpp_gguf(build, tiny, out, ids, got)


def llama_cpp_gguf(build, tiny, out, ids, want):
    """wgml export-lora: llama.cpp's LoRA GGUF, read by PyPI gguf and by wgml."""
    from gguf import GGUFReader
    g = os.path.join(out, "adapter.gguf")
    r = subprocess.run([os.path.join(build, "wgml"), "export-lora", "--lora", out, "--model", tiny, "--gguf", g],
                       capture_output=True, text=True)
    check(r.returncode == 0, "wgml export-lora: %s" % (r.stdout + r.stderr).strip()[-300:])
    if r.returncode:
        return
    rd = GGUFReader(g)

    def kv(k):
        f = rd.fields.get(k)
        return None if f is None else (bytes(f.parts[f.data[0]]).decode() if f.types[0].name == "STRING" else float(f.parts[f.data[0]][0]))
    check((kv("general.type"), kv("adapter.type"), kv("adapter.lora.alpha"), kv("general.architecture")) ==
          ("adapter", "lora", 16.0, "llama"), "the GGUF's adapter keys")
    ts = {t.name: t for t in rd.tensors}
    own = load_file(os.path.join(out, "adapter.safetensors"))
    qa, kb = ts.get("blk.0.attn_q.weight.lora_a"), ts.get("blk.1.attn_k.weight.lora_b")
    check(len(ts) == 28 and qa is not None and list(qa.shape) == [64, 8] and kb is not None and list(kb.shape) == [8, 32] and
          all(t.tensor_type.name == "F32" for t in rd.tensors), "28 F32 tensors named and shaped as llama.cpp's (ne [in, r], [r, out])")
    same = kb is not None and np.array_equal(np.asarray(kb.data).reshape(32, 8), own["blk.1.attn_k.lora_b"])
    check(same, "k's lora_b in the GGUF's own row order (as wgml holds it)")
    got = wgml_logits(build, tiny, ids, 4, lora=g)
    check(got is not None and want is not None and np.array_equal(got, want), "wgml reading the GGUF gives what it reads from OUT")
    r = subprocess.run([os.path.join(build, "wgml"), "generate", "--model", tiny, "--lora", tiny, "--prompt-ids", "5 6",
                        "--max-tokens", "1"], capture_output=True, text=True)
    check(r.returncode != 0 and "not a LoRA adapter GGUF" in r.stderr, "a model given as the adapter: %r" % r.stderr.strip()[-200:])


def peft_to_wgml(build, d, gguf, ids, cases, reload=True, npre=4):
    """cases: (rank, alpha, modules, the file's dtype); the reference is PEFT loading the file
    (reload) or the PEFT model that saved it (float32 files: the same values to 1e-8)."""
    for i, (r, alpha, modules, dtype) in enumerate(cases):
        pd = os.path.join(d, "peft-%s-%d" % (os.path.basename(gguf), i))
        pm = peft_random(base_model(gguf), r, alpha, modules, pd, seed=i)
        f = os.path.join(pd, "adapter_model.safetensors")
        save_file({k: v.astype(dtype) for k, v in load_file(f).items()}, f)
        want = ref_logits((PeftModel.from_pretrained(base_model(gguf), pd) if reload else pm).eval(), ids, npre)
        what = "%s: PEFT's rank %d, alpha %g, %s, %s" % (os.path.basename(gguf), r, alpha,
                                                       "all seven" if modules == ALL else modules, np.dtype(dtype).name)
        close(wgml_logits(build, gguf, ids, npre, lora=pd), want, what)
        if i == 0 and reload:  # the same adapter through llama.cpp's GGUF: q's and k's rows back in GGUF order
            g = os.path.join(d, "peft.gguf")
            r = subprocess.run([os.path.join(build, "wgml"), "export-lora", "--lora", pd, "--model", gguf, "--gguf", g],
                               capture_output=True, text=True)
            close(wgml_logits(build, gguf, ids, 4, lora=g) if r.returncode == 0 else None, want, what + ", as llama.cpp's GGUF")


def refused(build, d, tiny):
    pd = os.path.join(d, "ok")
    peft_random(base_model(tiny), 8, 16, ["q_proj", "v_proj"], pd, seed=9)

    def variant(name, cfg_edit=None, tensors_edit=None):
        vd = os.path.join(d, name)
        os.makedirs(vd)
        cfg = json.load(open(os.path.join(pd, "adapter_config.json")))
        t = load_file(os.path.join(pd, "adapter_model.safetensors"))
        cfg.update(cfg_edit or {})
        if tensors_edit:
            t = tensors_edit(t)
        json.dump(cfg, open(os.path.join(vd, "adapter_config.json"), "w"))
        save_file(t, os.path.join(vd, "adapter_model.safetensors"))
        r = subprocess.run([os.path.join(build, "wgml"), "generate", "--model", tiny, "--lora", vd, "--prompt-ids", "5 6 7",
                            "--max-tokens", "2"], capture_output=True, text=True)
        return r.returncode, r.stderr.strip()

    for name, edit, words in [("dora", {"use_dora": True}, "DoRA"), ("rslora", {"use_rslora": True}, "rsLoRA"),
                              ("pattern", {"rank_pattern": {"q_proj": 4}}, "rank_pattern")]:
        rc, err = variant(name, edit)
        check(rc != 0 and words in err, "%s refused: %r" % (name, err[-200:]))

    def add_head(t):
        t = dict(t)
        t["base_model.model.lm_head.lora_A.weight"] = np.zeros((8, 64), np.float32)
        t["base_model.model.lm_head.lora_B.weight"] = np.zeros((320, 8), np.float32)
        return t
    rc, err = variant("head", {"target_modules": ["q_proj", "v_proj", "lm_head"]}, add_head)
    check(rc != 0 and "lm_head" in err and "wgml adapts only" in err, "an adapted lm_head refused: %r" % err[-200:])

    def narrow(t):  # an adapter of a model of width 32
        return {k: (v[:, :32] if ".lora_A." in k else v) for k, v in t.items()}
    rc, err = variant("other-base", None, narrow)
    check(rc != 0 and "another base model" in err, "another base's shapes refused: %r" % err[-200:])


def main():
    build = os.path.abspath(sys.argv[1])
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        tiny = os.path.join(d, "tiny.gguf")
        write_model(tiny)
        ids = [40, 105, 102, 3 + 32, 116, 104, 101, 109, 101, 44, 3 + 10, 116]
        plain = wgml_logits(build, tiny, ids, 4)
        close(plain, ref_logits(base_model(tiny), ids, 4), "tiny model, no adapter: transformers' GGUF reading agrees")
        wgml_to_peft(build, d, tiny, ids)
        peft_to_wgml(build, d, tiny, ids, [(8, 16, ALL, np.float32), (16, 16, ALL, np.float64), (8, 2, ["q_proj", "v_proj"], np.float16)])
        refused(build, d, tiny)
        print("%.1f s" % (time.time() - t0), flush=True)
    return finish()


def finish():
    print("all passed" if not failures else "%d check(s) failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
