"""The per-test time table of a test run (docs/RELIABILITY.md keeps the one of a cold CI run): reads
CTest's record of the last run of each build directory (Testing/Temporary/LastTest.log) and prints
a markdown table, slowest first, with each pass's total and the count of tests by kind.

    ci_times.py build build-asan [--top N]
"""
import argparse
import collections
import re
from pathlib import Path


def last_run(build):
    """{test name: seconds} of the last ctest run in build."""
    log = Path(build) / "Testing" / "Temporary" / "LastTest.log"
    times, name = {}, None
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"^\d+/\d+ Testing: (\S+)$", line)
        if m:
            name = m.group(1)
        m = re.match(r"^Test time = +([0-9.]+) sec$", line)
        if m and name:
            times[name] = float(m.group(1))
            name = None
    return times


def kind(name):
    if name.startswith("py_et_"):
        return "ExecuTorch (Python)"
    if name.startswith("py_"):
        return "Python references"
    if name.startswith("fuzz_regress_"):
        return "fuzz regressions"
    if name.startswith("check_"):
        return "layering checks"
    if name.endswith("_checked"):
        return "C, checked kernels"
    return "C, trusted kernels"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    rows = []
    for b in a.builds:
        t = last_run(b)
        counts = collections.Counter(kind(n) for n in t)
        print("%s: %d tests, %.0f s of test time (%s)" % (
            b, len(t), sum(t.values()), ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
        rows += [(s, n, b) for n, s in t.items()]
    rows.sort(reverse=True)
    print()
    print("| test | build | seconds |")
    print("|---|---|---:|")
    for s, n, b in rows[:a.top]:
        print("| %s | %s | %.1f |" % (n, Path(b).name, s))


if __name__ == "__main__":
    main()
