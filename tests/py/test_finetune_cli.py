"""`wgml finetune`, `wgml eval` and `wgml generate --lora` end to end on a tiny synthetic
Llama (PyPI gguf's GGUFWriter: 2 layers, width 64, Q4_1 weights, a byte-level vocabulary of
256 + a few tokens, the ChatML template), on the GPU the tests use (lavapipe here).

1. An unbroken run of 8 steps, and the same run stopped after step 4 (as Ctrl-C does) then
   continued with --resume: identical losses and held-out perplexities (bit for bit, as
   printed with 9 significant digits).
2. SIGINT during a long run: exit 0, a message, a loadable checkpoint.
3. --resume with another rank, or from a corrupted checkpoint: a clear error, exit 1.
   --batch 1 --grad-accum 2 trains as --batch 2 (losses and adapter to float32 rounding), and
   resuming it with another --grad-accum is refused.
4. The outputs: adapter.safetensors parsed by the spec (json + struct), adapter_config.json,
   loss.csv, loss.svg (well-formed XML); `wgml eval --lora` reproduces the final held-out
   perplexity; `wgml generate --lora` runs.
5. JSONL chat data trains too.
Usage: test_finetune_cli.py BUILD_DIR"""
import csv
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFWriter
from gguf.quants import quantize

failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
          "You are a test model.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def write_model(path):
    rng = np.random.default_rng(3)
    bmap = bytes_to_unicode()
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [bmap[b] for b in range(256)]
    merges = [bmap[ord("t")] + " " + bmap[ord("h")], bmap[ord("e")] + " " + bmap[ord(" ")]]
    tokens += [m.replace(" ", "") for m in merges]
    types = [3, 3, 3] + [1] * (len(tokens) - 3)
    V, D, FF, NH, NKV, L = 320, 64, 96, 4, 2, 2
    tokens += ["<pad%d>" % i for i in range(V - len(tokens))]
    types += [1] * (V - len(types))
    w = GGUFWriter(path, "llama")
    w.add_context_length(256)
    w.add_embedding_length(D)
    w.add_block_count(L)
    w.add_feed_forward_length(FF)
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.add_chat_template(CHATML)

    def q(name, n, k, s):
        w.add_tensor(name, quantize((rng.standard_normal((n, k)) * s).astype(np.float32), QT.Q4_1), raw_dtype=QT.Q4_1)

    w.add_tensor("token_embd.weight", (rng.standard_normal((V, D)) * 0.5).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(D, np.float32))
    for l in range(L):
        w.add_tensor("blk.%d.attn_norm.weight" % l, np.ones(D, np.float32))
        w.add_tensor("blk.%d.ffn_norm.weight" % l, np.ones(D, np.float32))
        q("blk.%d.attn_q.weight" % l, NH * 16, D, 0.2)
        q("blk.%d.attn_k.weight" % l, NKV * 16, D, 0.2)
        q("blk.%d.attn_v.weight" % l, NKV * 16, D, 0.2)
        q("blk.%d.attn_output.weight" % l, D, NH * 16, 0.1)
        q("blk.%d.ffn_gate.weight" % l, FF, D, 0.1)
        q("blk.%d.ffn_up.weight" % l, FF, D, 0.1)
        q("blk.%d.ffn_down.weight" % l, D, FF, 0.1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def parse_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    buf = data[8 + n:]
    out, at = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = info["data_offsets"]
        assert info["dtype"] == "F32" and b == at and e - b == 4 * int(np.prod(info["shape"]))
        out[name] = np.frombuffer(buf[b:e], "<f4").reshape(info["shape"])
        at = e
    assert at == len(buf)
    return meta, out


def rows(path):
    with open(path) as f:
        return [(r["step"], r["loss"], r["eval_ppl"]) for r in csv.DictReader(f)]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    wgml = os.path.join(build, "wgml")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        write_model(model)
        text = os.path.join(tmp, "text.txt")
        with open(text, "w") as f:
            for i in range(400):
                f.write("the theme of line %d: then there were %d sheep in the meadow.\n" % (i, i * 7 % 13))
        common = ["--model", model, "--data", text, "--seq-len", "32", "--batch", "2", "--lr", "3e-3", "--eval-every", "4",
                  "--eval-tokens", "256", "--seed", "5", "--rank", "4", "--targets", "q,v,down"]

        def run(args, **kw):
            r = subprocess.run([wgml] + args, capture_output=True, text=True, errors="replace", timeout=600, **kw)
            # from the ASan build: no sanitizer report, whatever the exit code
            check("Sanitizer" not in r.stderr and "runtime error" not in r.stderr, "%s: %s" % (args[0], r.stderr[-1500:]))
            return r

        # option errors: exit 2 and a message naming the option
        for args, want in [(["--bogus", "1"], "unknown option '--bogus'"), (["--mode", "full"], "--mode is lora or ste"),
                           (["--targets", "q,x"], "--targets takes"), (["--rank", "0"], "--rank needs an integer"),
                           (["--grad-accum", "0"], "--grad-accum needs an integer"), (["--lr", "abc"], "--lr needs a number"),
                           (["--steps", "3", "--epochs", "1"], "not both")]:
            r = run(["finetune", "--model", model, "--data", text, "--out", os.path.join(tmp, "x")] + args)
            check(r.returncode == 2 and want in r.stderr, "finetune %s: exit 2 with '%s' (got %d: %s)" % (args, want, r.returncode, r.stderr[-200:]))
        r = run(["finetune", "--data", text])
        check(r.returncode == 2 and "are required" in r.stderr, "finetune without --model: " + r.stderr[-200:])
        r = run(["finetune", "--help"])
        check(r.returncode == 0 and "--eval-fraction" in r.stdout and "--resume DIR" in r.stdout, "finetune --help")
        bad = os.path.join(tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"prompt": "a", "response": "b"}\n{"prompt": "a" "response": "b"}\n')
        r = run(["finetune", "--model", model, "--data", bad, "--out", os.path.join(tmp, "x")])
        check(r.returncode == 1 and "bad.jsonl: line 2: column 16: expected" in r.stderr, "a bad JSONL line is named: " + r.stderr[-300:])

        a = os.path.join(tmp, "a")
        r = run(["finetune", "--out", a, "--steps", "8"] + common)
        check(r.returncode == 0, "unbroken run: " + r.stdout[-800:] + r.stderr[-800:])
        check("held-out perplexity before training" in r.stdout and "held-out perplexity at step 8" in r.stdout, "perplexity printed")
        b = os.path.join(tmp, "b")
        r1 = run(["finetune", "--out", b, "--steps", "8", "--stop-after", "4"] + common)
        check(r1.returncode == 0 and "interrupted" in r1.stdout, "first half: " + r1.stdout[-500:] + r1.stderr[-500:])
        r2 = run(["finetune", "--out", b, "--steps", "8", "--resume", b] + common)
        check(r2.returncode == 0 and "resumed from" in r2.stdout, "second half: " + r2.stdout[-500:] + r2.stderr[-500:])
        ra, rb = rows(os.path.join(a, "loss.csv")), rows(os.path.join(b, "loss.csv"))
        check(len(ra) == 9 and ra == rb, "a run split in two gives identical losses and perplexities:\n%s\n%s" % (ra, rb))
        check(float(ra[-1][2]) < float(ra[0][2]), "held-out perplexity falls (%s -> %s)" % (ra[0][2], ra[-1][2]))

        # gradient accumulation: 2 micro-batches of 1 row per step take the same rows as batch 2
        # (each row's labels all count, so the mean of the two means is the batch mean): the same
        # losses and adapter to float32 summation order; a resume must use the same --grad-accum
        ga = os.path.join(tmp, "ga")
        r = run(["finetune", "--out", ga, "--steps", "8"] + common + ["--batch", "1", "--grad-accum", "2"])
        check(r.returncode == 0 and "(2 micro-batches of 1)" in r.stdout, "--grad-accum 2: " + r.stdout[-600:] + r.stderr[-600:])
        if r.returncode == 0:
            rg = rows(os.path.join(ga, "loss.csv"))
            la = np.array([float(x[1]) for x in ra[1:]])
            lg = np.array([float(x[1]) for x in rg[1:]])
            check(len(rg) == len(ra) and np.max(np.abs(la - lg) / la) < 1e-4,
                  "--batch 1 --grad-accum 2 gives batch 2's losses: %s vs %s" % (lg, la))
            _, gd = parse_safetensors(os.path.join(ga, "adapter.safetensors"))
            _, a0 = parse_safetensors(os.path.join(a, "adapter.safetensors"))
            diff = np.sqrt(sum(float(np.sum((gd[k].astype(np.float64) - a0[k]) ** 2)) for k in a0))
            size = np.sqrt(sum(float(np.sum(a0[k].astype(np.float64) ** 2)) for k in a0 if k.endswith("lora_b")))
            check(sorted(gd) == sorted(a0) and diff < 1e-3 * size,
                  "--grad-accum 2: the adapter of batch 2 (difference %.3g, B norm %.3g)" % (diff, size))
            r = run(["finetune", "--out", os.path.join(tmp, "gb"), "--steps", "8", "--resume", ga] + common + ["--batch", "1"])
            check(r.returncode == 1 and "checkpoint mismatch: grad_accum is 2" in r.stderr, "resume with another --grad-accum: " + r.stderr[-300:])

        # outputs
        meta, ad = parse_safetensors(os.path.join(a, "adapter.safetensors"))
        cfg = json.load(open(os.path.join(a, "adapter_config.json")))
        check(cfg["rank"] == 4 and cfg["targets"] == ["q", "v", "down"] and cfg["mode"] == "lora" and cfg["base_model"]["size"] ==
              os.path.getsize(model) and len(cfg["base_model"]["sha256"]) == 64, "adapter_config.json: %r" % cfg)
        check(meta.get("format") == "wgml-lora-1" and len(ad) == cfg["tensors"] and all(np.all(np.isfinite(x)) for x in ad.values()),
              "adapter.safetensors: %d finite F32 tensors" % len(ad))
        check(any(np.any(x != 0) for x in ad.values()), "the adapter was trained (non-zero)")
        _, bd = parse_safetensors(os.path.join(b, "adapter.safetensors"))
        check(sorted(ad) == sorted(bd) and all(np.array_equal(ad[k], bd[k]) for k in ad), "split run: the same adapter bit for bit")
        try:
            root = ET.parse(os.path.join(a, "loss.svg")).getroot()
            check(root.tag.endswith("svg") and len(root.findall(".//{http://www.w3.org/2000/svg}polyline")) == 1, "loss.svg well-formed")
        except ET.ParseError as e:
            check(False, "loss.svg parses as XML: %s" % e)
        r = run(["eval", "--model", model, "--data", text, "--seq-len", "32", "--batch", "2", "--eval-tokens", "256", "--lora", a])
        check(r.returncode == 0 and ("perplexity %.4f" % float(ra[-1][2]))[:-1] in r.stdout,
              "wgml eval --lora reproduces the final held-out perplexity %s: %s %s" % (ra[-1][2], r.stdout, r.stderr[-300:]))
        r = run(["eval", "--model", model, "--data", text, "--seq-len", "32", "--batch", "2", "--eval-tokens", "256"])
        check(r.returncode == 0 and ("perplexity %.4f" % float(ra[0][2]))[:-1] in r.stdout,
              "wgml eval without --lora reproduces the perplexity before training %s: %s" % (ra[0][2], r.stdout))
        r = run(["generate", "--model", model, "--prompt", "the theme", "--max-tokens", "8", "--lora", a])
        check(r.returncode == 0, "generate --lora: " + r.stderr[-400:])

        # mismatches and corruption
        r = run(["finetune", "--out", os.path.join(tmp, "c"), "--steps", "8", "--resume", a] + common[:-4] + ["--rank", "8", "--targets", "q,v,down"])
        check(r.returncode == 1 and "checkpoint mismatch: rank" in r.stderr, "resume with another rank: " + r.stderr[-300:])
        ck = os.path.join(b, "checkpoint", "state.safetensors")
        data = bytearray(open(ck, "rb").read())
        data[len(data) // 2] ^= 1
        open(ck, "wb").write(bytes(data))
        r = run(["finetune", "--out", b, "--steps", "8", "--resume", b] + common)
        check(r.returncode == 1 and "corrupt checkpoint" in r.stderr, "resume from a corrupted checkpoint: " + r.stderr[-300:])

        # SIGINT: finish the step, save, exit 0
        d = os.path.join(tmp, "d")
        p = subprocess.Popen([wgml, "finetune", "--out", d, "--steps", "1000000000"] + common, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, errors="replace")
        t0 = time.time()
        for line in p.stdout:  # training has started once the first perplexity is out
            if line.startswith("held-out perplexity before") or time.time() - t0 > 300:
                break
        time.sleep(2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)
        check("Sanitizer" not in err, "SIGINT run: no sanitizer report: " + err[-1500:])
        check(p.returncode == 0 and "interrupted" in out, "SIGINT: exit 0 with a message: rc %s %s %s" % (p.returncode, out[-300:], err[-300:]))
        check(os.path.exists(os.path.join(d, "checkpoint", "state.safetensors")), "SIGINT: a checkpoint was saved")

        # JSONL chat data
        jl = os.path.join(tmp, "chat.jsonl")
        with open(jl, "w") as f:
            for i in range(40):
                f.write(json.dumps({"prompt": "count %d" % i, "response": "there are %d" % (i * 3)}) + "\n")
        r = run(["finetune", "--model", model, "--data", jl, "--out", os.path.join(tmp, "e"), "--steps", "3", "--seq-len", "128",
                 "--eval-fraction", "0.1"])
        check(r.returncode == 0 and "40 examples, 0 truncated" in r.stdout, "JSONL fine-tuning: " + r.stdout[-400:] + r.stderr[-400:])
        r = run(["finetune", "--model", model, "--data", jl, "--out", os.path.join(tmp, "f"), "--steps", "3", "--seq-len", "16"])
        check(r.returncode == 1 and "raise --seq-len" in r.stderr, "JSONL with every answer cut off: a clear error: " + r.stderr[-300:])
        # straight-through training writes a new GGUF
        s = os.path.join(tmp, "s")
        r = run(["finetune", "--model", model, "--data", text, "--out", s, "--mode", "ste", "--steps", "3", "--seq-len", "32",
                 "--lr", "1e-2", "--targets", "q,v", "--eval-tokens", "128"])
        check(r.returncode == 0 and os.path.exists(os.path.join(s, "model.gguf")), "STE run: " + r.stdout[-400:] + r.stderr[-400:])
        if r.returncode == 0:
            from gguf import GGUFReader
            ga, gb_ = GGUFReader(model), GGUFReader(os.path.join(s, "model.gguf"))
            ta = {t.name: np.asarray(t.data) for t in ga.tensors}
            tb = {t.name: np.asarray(t.data) for t in gb_.tensors}
            changed = sorted(n for n in ta if not np.array_equal(ta[n], tb[n]))
            check(changed and all(".attn_q." in n or ".attn_v." in n for n in changed),
                  "STE: only the trained weights changed: %s" % changed)
            r = run(["generate", "--model", os.path.join(s, "model.gguf"), "--prompt", "the theme", "--max-tokens", "4"])
            check(r.returncode == 0, "STE model.gguf loads and generates: " + r.stderr[-300:])
    print("%d passed, %d failed" % (passes, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
