#!/usr/bin/env python3
"""What lavapipe's compiled kernels spend their time on: reads a `perf script` sample list of a
run (bench/lavapipe_profile.sh makes it) and the run's core dump, disassembles the JIT code that
the samples fall in, and prints the sampled instructions by kind, most first.

    jit_mix.py SAMPLES CORE BINARY OUT_DIR

SAMPLES has one "COUNT ADDRESS" line per sampled address of the JIT code (perf's
[JIT]/perf-PID.map samples); the hot pages (1% of the samples or more) are dumped from CORE with
gdb (BINARY: the program the core is of) and disassembled with objdump into OUT_DIR/rN.s, with
the sample counts beside each instruction in OUT_DIR/rN.annotated.

The kinds: lavapipe runs a workgroup's invocations as the lanes of SIMD registers, so a
thread's scalar is a vector register and a load whose address may differ by lane is a loop
over the lanes (per lane: a test of its exec-mask bit, a branch, a bounds compare, a scalar
load broadcast and blended into its lane). The instructions are sorted into those loops
("lane loads": inserts, broadcasts and lane blends; their tests and branches are counted
with the loops' own as "tests, compares, branches"), floating-point arithmetic, exec-mask blends (`vblendvps`: a variable written
under divergent control flow), moves to and from the stack (register spills), integer vector
work (unpacking codes, conversion) and the rest (scalar address arithmetic, loop control)."""
import collections
import re
import subprocess
import sys
from pathlib import Path

FP = re.compile(r"^v(add|sub|mul|div|fmadd|fmsub|fnmadd|max|min|sqrt|rcp|rsqrt)[0-9a-z]*(ps|ss)$")
INTV = re.compile(r"^vp(add|sub|mull|srl|sll|sra|and|andn|or|xor|cmp|shuf|perm|min|max|unpck|pack)[a-z0-9]*$|^vcvt")
LANE = {"vpinsrd", "vpextrd", "vpbroadcastd", "vpblendd", "vmovd", "vinsertps", "vextractps", "vpbroadcastq"}
BRANCH = {"jmp", "je", "jne", "jae", "jb", "jbe", "ja", "jl", "jge", "jle", "jg", "js", "jns", "test", "cmp"}


def kind(op, args):
    if op in ("vblendvps", "vpblendvb"):
        return "exec-mask blends"
    if op in ("vmovaps", "vmovups", "vmovdqa", "vmovdqu") and "(%rsp)" in args:
        return "stack moves (spills)"
    if FP.match(op):
        return "floating-point arithmetic"
    if op in LANE:
        return "lane loads"
    if op in BRANCH:
        return "tests, compares, branches"  # mostly the lane loops' mask tests and bounds checks
    if INTV.match(op):
        return "integer vector work"
    if op.startswith("v"):
        return "other vector"
    return "scalar (addresses, control)"


def main():
    samples_path, core, binary, out = sys.argv[1:5]
    out = Path(out)
    cnt = {}
    for line in Path(samples_path).read_text().split("\n"):
        if line.strip():
            n, ip = line.split()
            cnt[int(ip, 16)] = int(n)
    total = sum(cnt.values())
    if not total:
        sys.exit("jit_mix: no JIT samples (was the kernel compiled before the profile? run it once first)")
    pages = collections.Counter()
    for a, n in cnt.items():
        pages[a >> 12] += n
    ranges = []
    for p in sorted(p for p, n in pages.items() if n >= total * 0.01):
        if ranges and p <= ranges[-1][1] + 1:
            ranges[-1][1] = p
        else:
            ranges.append([p, p])
    by_kind, by_op, covered = collections.Counter(), collections.Counter(), 0
    for i, (a, b) in enumerate(ranges):
        lo, hi = a << 12, (b + 1) << 12
        dump = out / ("r%d.bin" % i)
        subprocess.run(["gdb", "-batch", "-ex", "dump binary memory %s %d %d" % (dump, lo, hi), binary, core],
                       capture_output=True, check=True)
        text = subprocess.run(["objdump", "-D", "-b", "binary", "-mi386:x86-64", "--adjust-vma=%d" % lo, str(dump)],
                              capture_output=True, text=True, check=True).stdout
        (out / ("r%d.s" % i)).write_text(text)
        notes = []
        for line in text.split("\n"):
            m = re.match(r"\s*([0-9a-f]+):\t[0-9a-f ]+\t(\S+)\s*(.*)", line)
            if not m:
                continue
            n = cnt.get(int(m.group(1), 16), 0)
            notes.append("%6s %s %s %s" % (n or "", m.group(1), m.group(2), m.group(3)))
            by_kind[kind(m.group(2), m.group(3))] += n
            by_op[m.group(2)] += n
            covered += n
        (out / ("r%d.annotated" % i)).write_text("\n".join(notes) + "\n")
    print("JIT samples: %d, in the hot code (%s): %d" %
          (total, ", ".join("%#x-%#x" % (a << 12, (b + 1) << 12) for a, b in ranges), covered))
    print("| kind | samples | share |\n|---|---:|---:|")
    for k, n in by_kind.most_common():
        print("| %s | %d | %.0f%% |" % (k, n, 100.0 * n / max(covered, 1)))
    print("instructions by samples: " + ", ".join("%s %d" % kv for kv in by_op.most_common(16)))


if __name__ == "__main__":
    main()
