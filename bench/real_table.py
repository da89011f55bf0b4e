"""Joins the logs of bench/real_shapes.sh and bench/train_shapes.sh from one lease into issue 29's
table of model keys: wgml beside llama.cpp (decode, prefill, GPU memory) and beside PEFT +
torch.compile (the training step), the ratio (wgml / peer, higher is better) and the target.

    python3 bench/real_table.py LOG_OR_DIR ...

Each argument is a log (the scripts' output, or their real_shapes.txt / train_shapes.txt) or a
folder holding those files. wgml's figures are wall clock, as the peers' are; decode is the
GPU-pipelined row. A run with an A/B switch (AB_INT8, AB_ENV, AB_FLUSH) is not the key's row; the
f32 activations' decode and prefill (AB_INT8) get rows of their own. The copy roofline is the
`copy (clone)` line of `wgml bench ops` in the same log."""
import os
import re
import sys

# issue 29's targets (ratio against the peer), by model shape and key
TARGETS = {
    ("llama-3.1-8b", "decode @512"): "1.5x",
    ("llama-3.2-1b", "decode @512"): "2x",
    ("smollm2-135m", "decode @512"): "1.8x",
    ("llama-3.1-8b", "prefill 512"): "1.0x",
    ("llama-3.2-1b", "prefill 512"): "1.0x",
    ("smollm2-135m", "prefill 512"): "1.3x",
    ("llama-3.1-8b", "decode @512 of copy"): "0.6",
    ("smollm2-135m", "train_step"): "1.0x",
    ("llama-3.2-1b", "train_step"): "1.0x",
}


def texts(args):
    for a in args:
        if os.path.isdir(a):
            for name in ("real_shapes.txt", "train_shapes.txt"):
                if os.path.exists(os.path.join(a, name)):
                    yield open(os.path.join(a, name), errors="replace").read()
        else:
            yield open(a, errors="replace").read()


def parse(text, rows, copy):
    """rows[(model, type)][key] = [wgml, peer] (None where absent); copy[0] the copy's GB/s."""
    model = run = None
    bytes_step = {}
    for line in text.splitlines():
        if m := re.match(r"copy \(clone\)\s+[\d.]+\s+([\d.]+)", line):
            copy[0] = float(m.group(1))
        elif m := re.match(r"== (\S+) (\S+) at ", line):
            model, run = (m.group(1), m.group(2)), None
            rows.setdefault(model, {})
        elif model is None:
            continue
        elif m := re.match(r"weights read per decode step: ([\d.]+) GB", line):
            bytes_step[model] = (float(m.group(1)), copy[0])
        elif m := re.match(r"-- \S+ \S+ prompt (\d+)(?: decode (\d+))?(.*)", line):
            run = (int(m.group(1)), "f32" if "WGML_QW_INT8=0" in m.group(3) else "ab" if m.group(3) else "")
        elif run and (m := re.match(r"(prefill|decode)\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)", line)):
            if run[1] == "ab":
                continue
            key = f"prefill {run[0]}" if m.group(1) == "prefill" else f"decode @{run[0]}"
            key += " (f32 activations)" if run[1] == "f32" else ""
            rows[model].setdefault(key, [None, None])[0] = float(m.group(2))
        elif run and run[1] == "" and (m := re.match(r"gpu memory: peak (\d+) MiB", line)):
            cur = rows[model].setdefault("GPU memory (MiB)", [None, None])  # the first pair's run
            cur[0] = cur[0] or float(m.group(1))
        elif m := re.match(r"peer llama.cpp (prefill (\d+)|decode at (\d+)): ([\d.]+) tokens/s", line):
            key = f"prefill {m.group(2)}" if m.group(2) else f"decode @{m.group(3)}"
            rows[model].setdefault(key, [None, None])[1] = float(m.group(4))
        elif m := re.match(r"peer llama.cpp gpu memory: peak (\d+) MiB", line):
            rows[model].setdefault("GPU memory (MiB)", [None, None])[1] = float(m.group(1))
        elif m := re.match(r"train_step: median ([\d.]+) ms", line):
            rows[model].setdefault("train_step (ms)", [None, None])[0] = float(m.group(1))
        elif m := re.match(r"peer train_step_(\S+) [\d.]+ tokens/s \(step ([\d.]+) ms", line):
            key = "train_step (ms)" if m.group(1) == "compile" else f"train_step, peer {m.group(1)} (ms)"
            rows[model].setdefault(key, [None, None])[1] = float(m.group(2))
    return bytes_step


def order(item):
    """decode, then prefill, by length; memory; training; the A/B rows (f32 activations) last"""
    key = item[0]
    n = re.search(r"(\d+)", key)
    kind = ["decode", "prefill", "GPU", "train_step"].index(next(k for k in ["decode", "prefill", "GPU", "train_step"]
                                                               if key.startswith(k)))
    return ("f32" in key or "peer" in key, kind, int(n.group(1)) if n else 0)


def fmt(v):
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 1000 else f"{v:.1f}"


def main():
    rows, copy, bytes_step = {}, [None], {}
    for text in texts(sys.argv[1:]):
        bytes_step.update(parse(text, rows, copy))
    print("| model | key | wgml | peer | ratio | target |")
    print("|---|---|---|---|---|---|")
    for (name, typ), keys in rows.items():
        first = True
        for key, (w, p) in sorted(keys.items(), key=order):
            lower_better = "(ms)" in key or "memory" in key
            ratio = "-" if not w or not p else f"{(p / w if lower_better else w / p):.2f}x"
            if "memory" in key and w and p:
                ratio = f"{w / p:.2f}x (wgml / peer)"
            target = TARGETS.get((name, key.replace(" (ms)", "")), "")
            print(f"| {name + ' ' + typ if first else ''} | {key} | {fmt(w)} | {fmt(p)} | {ratio} | {target} |")
            first = False
            gb, cp = bytes_step.get((name, typ), (None, None))
            if key == "decode @512" and gb and cp:
                share = [f"{v * gb / cp:.2f}" if v else "-" for v in (w, p)]
                target = TARGETS.get((name, "decode @512 of copy"), "")
                print(f"| | decode @512, weight bytes / time of copy ({gb:.3f} GB a step, copy "
                      f"{cp:,.0f} GB/s) | {share[0]} | {share[1]} | | {target} |")


if __name__ == "__main__":
    main()
