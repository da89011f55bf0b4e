"""ExecuTorch's backend conformance suite (executorch/backends/test/suite/operators) with wgml as
the runtime, from the committed fixture (tests/et/fixture.py; tests/et/suite_cases.py says what
the cases are and how each was classified when it was exported).

Every program of the chosen slice runs on wgml (tests/et/etrun.py, in this process) on the
case's inputs, and its outputs are compared
  - with eager PyTorch's (float32), at the suite's tolerances (atol 1e-1, rtol 4e-2, as
    ExecuTorch's runner passes them): this decides pass or fail;
  - with the float64 outputs of the same module, where it runs in float64: wgml's own standard
    for float32 arithmetic, reported (max |wgml - f64| <= 1e-4 * max(1, max |f64|), or no worse
    than 4x eager float32's own error against float64).
Integer and bool outputs must equal eager PyTorch's.

    suite.py --lib build/libwgml.so --fixture build/et-fixture --flow webgpu [--group K/N]
             [--json OUT.json] [--expected tests/et/expected_failures.txt]

A case that fails must be listed in the expected-failures file (flow, operator file, case, the
reason); a listed case that passes is an error too (take it off the list). Exit status 0 when
every case is as expected, 1 otherwise (never a skip: the fixture holds every program).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import etrun  # noqa: E402
import fixture  # noqa: E402

ATOL, RTOL = 1e-1, 4e-2  # executorch/backends/test/suite/runner.py: run_test
STD_REL, STD_VS_EAGER = 1e-4, 4.0  # wgml's own float32 standard against float64 (above)


def load_expected(path):
    """{(flow, file, case): reason} from a tab-separated file (# comments)."""
    out = {}
    if not path:
        return out
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 4 or not parts[3].strip():
            raise SystemExit("%s:%d: expected flow<TAB>file<TAB>case<TAB>reason" % (path, n))
        out[tuple(parts[:3])] = parts[3]
    return out


def _maxabs(a, b):
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    d = np.where(np.isnan(d), np.inf, d)
    return float(d.max()) if d.size else 0.0


def compare(got, refs, f64):
    """(why it fails or None, stats) of wgml's outputs against the case's references: eager
    PyTorch's outputs and the float64 ones (None where there are none)."""
    stats = {"err_eager": 0.0}
    if len(got) != len(refs):
        return "%d outputs, eager PyTorch gives %d" % (len(got), len(refs)), stats
    why = None
    std_ok = True
    for i, (g, r) in enumerate(zip(got, refs)):
        if tuple(g.shape) != tuple(r.shape):
            return "output %d: shape %s, eager %s" % (i, tuple(g.shape), tuple(r.shape)), stats
        if r.dtype == np.bool_ or not np.issubdtype(r.dtype, np.floating):
            bad = int((g.astype(r.dtype) != r).sum())
            if bad and why is None:
                why = "output %d: %d of %d elements differ" % (i, bad, r.size)
            continue
        e = _maxabs(g, r)
        stats["err_eager"] = max(stats["err_eager"], e)
        gd, rd = g.astype(np.float64), r.astype(np.float64)
        if not np.allclose(gd, rd, atol=ATOL, rtol=RTOL, equal_nan=True) and why is None:
            why = "output %d: max abs error %.3g (atol %g, rtol %g)" % (i, e, ATOL, RTOL)
        if f64[i] is not None:
            e64, eager64 = _maxabs(g, f64[i]), _maxabs(r, f64[i])
            scale = float(np.nanmax(np.abs(f64[i]))) if f64[i].size else 0.0
            stats["err_f64"] = max(stats.get("err_f64", 0.0), e64)
            stats["eager_err_f64"] = max(stats.get("eager_err_f64", 0.0), eager64)
            std_ok = std_ok and (e64 <= STD_REL * max(1.0, scale) or e64 <= STD_VS_EAGER * eager64)
    if any(x is not None for x in f64):
        stats["fp32_standard"] = std_ok
    return why, stats


def selfcheck(fx, cases):
    """The comparison can fail: the first program's references, moved past the tolerance or made
    NaN, must not pass (a check that cannot fail is no check)."""
    case = next((c for c in cases if c["status"] == "program"), None)
    if case is None:
        return ["no program to check the comparison with"]
    _, _, refs, f64 = fx.case_data(case)
    i = next((k for k, r in enumerate(refs) if np.issubdtype(r.dtype, np.floating) and r.size), None)
    if i is None:
        return []
    bad = []
    for what, change in (("moved by 1 + 2 atol", lambda r: r + np.float32(1 + 2 * ATOL)), ("NaN", lambda r: r * np.nan)):
        got = [r.copy() for r in refs]
        got[i] = change(got[i]).astype(refs[i].dtype)
        if compare(got, refs, f64)[0] is None:
            bad.append("%s: an output %s passes the comparison" % (case["case"], what))
    return bad


def run_case(rt, fx, case):
    pte, inputs, refs, f64 = fx.case_data(case)
    try:
        got = rt.run(pte, inputs)
    except etrun.ProgramError as e:
        return "wgml %s: %s" % (e.stage, e), {}
    return compare(got, refs, f64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fixture", required=True, help="the unpacked fixture (BUILD/et-fixture)")
    ap.add_argument("--flow", default="webgpu", choices=["webgpu", "vulkan"])
    ap.add_argument("--group", default="", help="K/N: the K-th of N slices of the sorted operator files")
    ap.add_argument("--files", default="", help="only these operator files (comma-separated)")
    ap.add_argument("--json", default="")
    ap.add_argument("--expected", default="", help="the expected failures (tab-separated)")
    a = ap.parse_args()

    fx = fixture.Fixture(a.fixture)
    fx.check_pins()
    expected = load_expected(a.expected)
    cases = fx.suite_cases(a.flow)
    files = sorted({c["file"] for c in cases})
    if a.files:
        want = {f if f.endswith(".py") else f + ".py" for f in a.files.split(",")}
        files = [f for f in files if f in want]
    if a.group:
        k, n = (int(x) for x in a.group.split("/"))
        files = files[k::n]
    cases = [c for c in cases if c["file"] in set(files)]
    broken = selfcheck(fx, cases)
    for b in broken:
        print("SELFCHECK FAILED " + b)
    rt = etrun.Runtime(a.lib)
    results = []
    t_start = time.perf_counter()
    for c in cases:
        r = {"file": c["file"], "case": c["case"], "status": c["status"]}
        if c["status"] != "program":
            r.update(result=c["status"], reason=c.get("reason", ""))
            results.append(r)
            continue
        r.update(delegated=c["delegated"], undelegated=c["undelegated"])
        t0 = time.perf_counter()
        why, stats = run_case(rt, fx, c)
        r.update(stats, seconds=time.perf_counter() - t0)
        key = (a.flow, c["file"], c["case"])
        if key in expected:
            r.update(result="xpass" if why is None else "xfail", reason=why or "passes, but is listed as an "
                     "expected failure (%s): take it off %s" % (expected[key], a.expected))
        else:
            r.update(result="fail" if why else "pass", reason=why or "")
        results.append(r)
        print("%-5s %s %s %s" % (r["result"], c["file"], c["case"], r.get("reason", "")), flush=True)
    rt.close()
    listed = {k for k in expected if k[0] == a.flow and k[1] in set(files)}
    ran = {(a.flow, r["file"], r["case"]) for r in results if r["result"] in ("xfail", "xpass")}
    stale = sorted(listed - ran)
    for k in stale:
        print("STALE %s %s %s: listed as an expected failure, but not a program of the fixture" % k)
    elapsed = time.perf_counter() - t_start
    n = {k: sum(1 for r in results if r["result"] == k)
         for k in ("pass", "fail", "xfail", "xpass", "not_exported", "not_applicable")}
    summary = {"flow": a.flow, "executorch": fx.manifest["executorch"], "files": files, "elapsed_s": elapsed, **n}
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    bad = n["fail"] + n["xpass"] + len(stale) + len(broken)
    for r in results:
        if r["result"] in ("fail", "xpass"):
            print("UNEXPECTED %s %s %s: %s" % (r["result"].upper(), r["file"], r["case"], r["reason"]))
    print("%s: %d programs in %.1f s: %d passed, %d failed as expected, %d failed, %d passed unexpectedly; "
          "%d cases the exporter refuses, %d not applicable" % (
              a.flow, n["pass"] + n["fail"] + n["xfail"] + n["xpass"], elapsed, n["pass"], n["xfail"], n["fail"],
              n["xpass"], n["not_exported"], n["not_applicable"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
