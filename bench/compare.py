"""Joins wgml's and the peers' numbers from one bench/h200.sh run folder into the table of the
performance keys: key first, ratio (wgml / peer, higher is better) last. A key whose wgml side
failed its correctness check, or did not run, says so instead of giving a ratio."""
import math
import os
import re
import sys

out = sys.argv[1]


def read(name):
    p = os.path.join(out, name)
    return open(p).read() if os.path.exists(p) else ""


peer = {}
for name in ("peer_matmul.txt", "peer_copy.txt", "peer_generate.txt", "peer_train.txt", "peer_llamacpp.txt",
             "peer_ort.txt"):
    for line in read(name).splitlines():
        m = re.match(r"peer (\S+) ([\d.]+)", line)
        if m:
            peer[m.group(1)] = float(m.group(2))
copy_peer = next((v for k, v in peer.items() if k.startswith("copy_")), None)

# wgml matmul: "MxNxK OP variant split ms TFLOP/s check"; key MxNxK for NN, else MxNxK:OP
mm = {}
for line in read("wgml_matmul.txt").splitlines():
    m = re.match(r"(\d+x\d+x\d+)\s+([NT]{2})\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s*(\S*)", line)
    if m:
        key = m.group(1) + ("" if m.group(2) == "NN" else ":" + m.group(2))
        mm[key] = (float(m.group(6)) * 1e3, m.group(7) or "-", m.group(3) + " split " + m.group(4))

ops = {}
copy_wgml = None
dispatch_us = None
for line in read("wgml_ops.txt").splitlines():
    m = re.match(r"(\S+) \(.*?\)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+(\S+)", line)
    if m:
        ops[m.group(1)] = (float(m.group(3)), m.group(5))
        if m.group(1) == "copy":
            copy_wgml = float(m.group(3))
    m = re.match(r"dispatch_cpu_us\s+([\d.]+) us.*\s(\S+)$", line)
    if m:
        dispatch_us = (float(m.group(1)), m.group(2))

qw = {}
for line in read("wgml_qw.txt").splitlines():
    m = re.match(r"M=1 (\d+)->(\d+) \(GEMV\)\s+([\d.]+)\s+([\d.]+)\s*(\S*)", line)
    if m:
        qw[f"{m.group(1)}->{m.group(2)}"] = (float(m.group(4)), m.group(5) or "-", float(m.group(3)))

rows = []  # key, what, wgml, peer, check, target, ratio


def add(key, what, wv, unit, pv, punit, check, target):
    ratio = wv / pv if (wv and pv) else None
    rows.append((key, what, f"{wv:,.1f} {unit}" if wv else "not run", f"{pv:,.1f} {punit}" if pv else "not run",
                 check, target, f"{ratio:.2f}" if ratio and check == "ok" else ("-" if ratio is None else f"({ratio:.2f})")))


for key, shape in (("gemm_fp32_4096", "4096x4096x4096"), ("gemm_fp32_8192", "8192x8192x8192")):
    w = mm.get(shape)
    add(key, shape + " fp32", w[0] / 1e3 if w else None, "TF/s", peer.get("matmul_" + shape, 0) / 1e3 or None,
        "TF/s cuBLAS", w[1] if w else "-", ">= 0.85")
    o = peer.get("ort_matmul_" + shape)
    if w and o:
        rows.append(("  vs ONNX Runtime WebGPU EP", shape, f"{w[0] / 1e3:.1f} TF/s", f"{o / 1e3:.1f} TF/s ORT", w[1], "",
                     f"{w[0] / o:.2f}"))

# the training step's GEMMs: every shape with an orientation suffix, or the three plain
# training shapes; time-weighted (total FLOPs / total time on each side)
TRAIN_COUNT = {"4096x576x576:NT": 2, "4096x576x576": 2, "576x576x4096:TN": 2, "4096x192x576:NT": 2, "4096x576x192": 2,
               "192x576x4096:TN": 2, "4096x1536x576:NT": 2, "4096x576x1536": 2, "1536x576x4096:TN": 2,
               "4096x576x1536:NT": 1, "4096x1536x576": 1, "576x1536x4096:TN": 1}
train_shapes = [s for s in TRAIN_COUNT if s in mm]
fl_w = t_w = t_p = 0.0
checks = set()
for s in train_shapes:
    m_, n_, k_ = (int(v) for v in s.split(":")[0].split("x"))
    f = 2.0 * m_ * n_ * k_ * TRAIN_COUNT[s]
    p = peer.get("matmul_" + s)
    if not p:
        continue
    fl_w += f
    t_w += f / (mm[s][0] * 1e9)
    t_p += f / (p * 1e9)
    checks.add(mm[s][1])
    rows.append(("  gemm_fp32_train " + s, f"x{TRAIN_COUNT[s]} a layer; {mm[s][2]}", f"{mm[s][0] / 1e3:.1f} TF/s", f"{p / 1e3:.1f} TF/s", mm[s][1], "",
                 f"{mm[s][0] / p:.2f}"))
if t_w:
    add("gemm_fp32_train", f"{len(train_shapes)} GEMM shapes of a layer, time-weighted", fl_w / t_w / 1e12, "TF/s",
        fl_w / t_p / 1e12, "TF/s cuBLAS", "ok" if checks == {"ok"} else "FAIL", ">= 0.80")

ref_copy = copy_wgml
# the GEMV's fixed cost: the time of a 256->256 one (40 KB) in the same chain of dispatches;
# each key also net of it (the bytes over the time left), which is what the kernel itself does
fixed = qw.get("256->256")
if fixed:
    rows.append(("gemv_qw_fixed_us", "one 256->256 GEMV in a chain: the per-dispatch cost", f"{fixed[2]:.1f} us", "-",
                 fixed[1], "", "-"))
for kn in ("576->1536", "1536->576", "2048->8192", "4096->11008", "4096->14336", "8192->28672"):
    w = qw.get(kn)
    add("gemv_qw_decode " + kn, "4-bit GEMV, M = 1", w[0] if w else None, "GB/s", ref_copy, "GB/s WGSL copy",
        w[1] if w else "-", ">= 0.80")
    if w and fixed and ref_copy and w[2] > fixed[2]:
        net = w[0] * w[2] / (w[2] - fixed[2])
        rows.append(("  net of the fixed cost", f"{w[2]:.1f} - {fixed[2]:.1f} us", f"{net:,.1f} GB/s",
                     f"{ref_copy:,.1f} GB/s", w[1], "", f"{net / ref_copy:.2f}"))
for op in ("add", "softmax", "rms_norm", "layer_norm", "cross_entropy", "sum"):
    w = ops.get(op)
    add("ops_bandwidth " + op, "rows of 4096, 256 MiB", w[0] if w else None, "GB/s", ref_copy, "GB/s WGSL copy",
        w[1] if w else "-", ">= 0.80")
if copy_wgml and copy_peer:
    rows.append(("  (WGSL copy vs PyTorch copy)", "", f"{copy_wgml:,.1f} GB/s", f"{copy_peer:,.1f} GB/s", "ok", "",
                 f"{copy_wgml / copy_peer:.2f}"))
rows.append(("dispatch_cpu_us", "CPU to record + submit one dispatch", f"{dispatch_us[0]:.2f} us" if dispatch_us else
             "not run", "-", dispatch_us[1] if dispatch_us else "-", "<= 2 us",
             f"{2.0 / dispatch_us[0]:.2f}" if dispatch_us else "-"))

gen = read("wgml_generate.txt")
m = re.search(r"([\d.]+) tokens/s \((?:median|best)\)", read("wgml_train.txt"))
tcheck = re.search(r"train check (\S+)", read("wgml_train.txt"))
# the peer: PEFT under torch.compile, the faster of fp32 and bf16 autocast; eager PEFT beside it
comp = [(peer[k], k) for k in ("train_step_compile", "train_step_compile-bf16") if k in peer]
best = max(comp) if comp else (None, "")
tw = float(m.group(1)) if m else None
add("train_step", "LoRA r=16 all proj, 8 x 512", tw, "tok/s", best[0],
    "tok/s PEFT " + (best[1].replace("train_step_", "") or "compile"), tcheck.group(1) if tcheck else "-", ">= 1.0")
if peer.get("train_step") and tw:
    rows.append(("  vs PEFT eager fp32", "", f"{tw:,.1f} tok/s", f"{peer['train_step']:,.1f} tok/s", "", "",
                 f"{tw / peer['train_step']:.2f}"))
# "decode <n> <GPU s> <GPU tok/s> [<wall tok/s> <submits/tok>]": the peer is timed by wall clock,
# so the wall figure is the one compared when the line has it
def generate_rows(name, text, llamacpp):
    m = re.search(r"^decode\s+\d+\s+[\d.]+\s+([\d.]+)(?:\s+([\d.]+))?", text, re.M)
    gcheck = re.search(r"generate check (\S+)", text)
    ck = gcheck.group(1) if gcheck else "-"
    dw = float(m.group(2) or m.group(1)) if m else None
    m = re.search(r"^prefill\s+(\d+)\s+[\d.]+\s+[\d.]+\s+([\d.]+)", text, re.M)
    pw = float(m.group(2)) if m else None
    add("decode " + name, "batch 1, 256 tokens, wall", dw, "tok/s", peer.get(llamacpp + "_decode"),
        "tok/s llama.cpp Vulkan", ck, ">= 2.0")
    add("prefill " + name, "512-token prompt, wall", pw, "tok/s", peer.get(llamacpp + "_prefill"),
        "tok/s llama.cpp Vulkan", ck, ">= 1.2")
    return dw, pw, ck


dw, pw, ck = generate_rows("SmolLM2-135M", gen, "llamacpp_smollm2")
if dw and peer.get("generate_decode"):
    rows.append(("  decode vs HF eager", "", f"{dw:,.1f} tok/s", f"{peer['generate_decode']:,.1f} tok/s", ck, "",
                 f"{dw / peer['generate_decode']:.2f}"))
if read("wgml_generate_gemma.txt"):
    generate_rows("Gemma-3-270M", read("wgml_generate_gemma.txt"), "llamacpp_gemma")

lm = {}
for line in read("wgml_lmhead.txt").splitlines():
    m = re.match(r"(LM-head GEMM alone|fused forward \+ backward|fused forward|unfused fwd \+ bwd|unfused GEMM \+ cross_entropy)"
                 r"\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+) MiB\s+(\S+)", line)
    if m:
        lm[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(4)), m.group(5))
if "fused forward" in lm and "LM-head GEMM alone" in lm:
    f, gm = lm["fused forward"], lm["LM-head GEMM alone"]
    ok = "ok" if f[3] == "ok" and gm[3] == "ok" else "FAIL"
    rows.append(("lmhead_ce", "fused fwd / LM-head GEMM alone", f"{f[0]:.3f} ms", f"{gm[0]:.3f} ms GEMM", ok, "<= 1.1",
                 f"{f[0] / gm[0]:.2f}"))
    for name in ("fused forward + backward", "unfused GEMM + cross_entropy", "unfused fwd + bwd"):
        if name in lm:
            rows.append(("  " + name, f"peak intermediates {lm[name][2]:.0f} MiB", f"{lm[name][0]:.3f} ms", "", lm[name][3],
                         "", f"{lm[name][1]:.2f}"))
else:
    rows.append(("lmhead_ce", "fused fwd / LM-head GEMM alone", "not run", "-", "-", "<= 1.1", "-"))

hdr = ("key", "what", "wgml", "peer", "check", "target", "ratio")
widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
for r in [hdr] + rows:
    print("  ".join(str(c).ljust(widths[i]) if i < len(hdr) - 1 else str(c).rjust(widths[i]) for i, c in enumerate(r)))
print("ratio = wgml / peer (higher is better; dispatch_cpu_us: 2 us / measured; lmhead_ce: fused time / GEMM time, "
      "lower is better); in parentheses: the check failed, the number is not valid")
