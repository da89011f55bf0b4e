"""Joins wgml's and the peer's numbers from a bench/h200.sh run folder into one table."""
import os
import re
import sys

out = sys.argv[1]


def read(name):
    p = os.path.join(out, name)
    return open(p).read() if os.path.exists(p) else ""


wgml = {}
for line in read("wgml_matmul.txt").splitlines():
    m = re.match(r"(\d+)x(\d+)x(\d+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s*(\S*)", line)
    if m:
        wgml[f"matmul_{m.group(1)}x{m.group(2)}x{m.group(3)}"] = (float(m.group(6)), m.group(7))
peer = {}
for line in read("peer_matmul.txt").splitlines():
    m = re.match(r"peer (\S+) ([\d.]+)", line)
    if m:
        peer[m.group(1)] = float(m.group(2))
print(f"{'key':28s} {'wgml GFLOP/s':>13s} {'cuBLAS fp32':>12s} {'check':>6s} {'ratio':>7s}")
for key, (g, check) in wgml.items():
    p = peer.get(key)
    ratio = f"{g / p:.3f}" if p else "-"
    print(f"{key:28s} {g:13.1f} {p if p else float('nan'):12.1f} {check:>6s} {ratio:>7s}")

gen = {}
m = re.search(r"prefill\s+\d+\s+[\d.]+\s+([\d.]+)", read("wgml_generate.txt"))
if m:
    gen["generate_prefill"] = float(m.group(1))
# "decode <n> <GPU s> <GPU tok/s> [<wall tok/s> <submits/tok>]": the peer is timed by wall
# clock, so the wall figure is the one compared when the line has it
m = re.search(r"^decode\s+\d+\s+[\d.]+\s+([\d.]+)(?:\s+([\d.]+))?", read("wgml_generate.txt"), re.M)
if m:
    gen["generate_decode"] = float(m.group(2) or m.group(1))
    if m.group(2):
        gen["generate_decode_gpu_time"] = float(m.group(1))
m = re.search(r"([\d.]+) tokens/s \(best\)", read("wgml_train.txt"))
if m:
    gen["train_step"] = float(m.group(1))
for line in (read("peer_generate.txt") + read("peer_train.txt")).splitlines():
    m = re.match(r"peer (\S+) ([\d.]+)", line)
    if m:
        peer[m.group(1)] = float(m.group(2))
if gen:
    print(f"{'key':28s} {'wgml tok/s':>13s} {'PyTorch tok/s':>14s} {'ratio':>7s}")
    for key, v in gen.items():
        p = peer.get(key)
        print(f"{key:28s} {v:13.1f} {p if p else float('nan'):14.1f} {v / p if p else float('nan'):7.3f}")
