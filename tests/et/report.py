"""Writes the results section of docs/EXECUTORCH.md (between the markers
<!-- suite results begin --> and <!-- suite results end -->) from the JSON files the suite CTests
write (BUILD/et_suite_<flow>_<k>.json, tests/et/suite.py --json), so that the page says what a
CI run measured.

    report.py BUILD/et_suite_*.json [--doc docs/EXECUTORCH.md] [--run "date, commit, machine"]
"""
import argparse
import collections
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- suite results begin -->", "<!-- suite results end -->"
RAN = ("pass", "fail", "xfail", "xpass")


def short(reason):
    """A reason without the parts that differ case by case (error sizes, counts, values)."""
    r = re.sub(r"max abs error [0-9.e+-]+", "max abs error …", reason)
    r = re.sub(r"\d+ of \d+ elements differ", "elements differ", r)
    r = re.sub(r"value \d+", "value …", r)
    r = re.sub(r"\(passes, but.*", "", r)
    return r.replace("|", "\\|").replace("\n", " ")[:200]


def fmt(x):
    return "—" if x is None else ("%.1e" % x if x else "0")


def flow_section(flow, res, summaries):
    tot = collections.Counter(r["result"] for r in res)
    ran = [r for r in res if r["result"] in RAN]
    passed = [r for r in ran if r["result"] == "pass"]
    deleg = sum(1 for r in passed if r.get("delegated"))
    std = [r for r in ran if "fp32_standard" in r]
    std_ok = sum(1 for r in std if r["fp32_standard"])
    secs = sum(s.get("elapsed_s", 0) for s in summaries)
    lines = ["### Flow `%s` (executorch %s)" % (flow, summaries[0].get("executorch", "?")), ""]
    lines.append(
        "%d cases in %d operator files. **%d programs ran on wgml: %d passed (%d with a delegate, %d portable "
        "kernels only), %d failed as listed in `tests/et/expected_failures.txt`, %d failed otherwise.** The exporter "
        "refuses %d cases (no program); %d are not applicable (the flow's skip rules, the suite's own skips, or a "
        "module that fails in eager PyTorch). Against float64, %d of the %d programs with a float64 reference meet "
        "wgml's float32 standard. The CTests ran these programs in %.0f s."
        % (len(res), len({r["file"] for r in res}), len(ran), len(passed), deleg, len(passed) - deleg, tot["xfail"],
           tot["fail"] + tot["xpass"], tot["not_exported"], tot["not_applicable"], std_ok, len(std), secs))
    lines += ["", "| operator file | programs | passed: delegated / portable only | expected failures | exporter "
              "refuses | not applicable | max error vs eager | max error vs float64 (eager's own) | float32 standard "
              "met | reasons (not passed, with counts) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    per = collections.OrderedDict()
    for r in sorted(res, key=lambda r: r["file"]):
        per.setdefault(r["file"], []).append(r)
    for f, rs in per.items():
        c = collections.Counter(r["result"] for r in rs)
        ran_f = [r for r in rs if r["result"] in RAN]
        ok = [r for r in ran_f if r["result"] == "pass"]
        dl = sum(1 for r in ok if r.get("delegated"))
        e_eager = max((r.get("err_eager", 0.0) for r in ran_f), default=None)
        e64 = [r["err_f64"] for r in ran_f if "err_f64" in r]
        eg64 = [r["eager_err_f64"] for r in ran_f if "eager_err_f64" in r]
        stdf = [r for r in ran_f if "fp32_standard" in r]
        reasons = collections.Counter(("%s: " % r["result"].replace("_", " ")) + short(r.get("reason", ""))
                                      for r in rs if r["result"] != "pass")
        why = "; ".join("%s (%d)" % (k, n) if n > 1 else k for k, n in reasons.most_common())
        lines.append("| %s | %d | %d / %d | %d | %d | %d | %s | %s (%s) | %s | %s |" % (
            f[:-3], len(ran_f), dl, len(ok) - dl, c["xfail"], c["not_exported"], c["not_applicable"], fmt(e_eager),
            fmt(max(e64) if e64 else None), fmt(max(eg64) if eg64 else None),
            "%d/%d" % (sum(r["fp32_standard"] for r in stdf), len(stdf)) if stdf else "—", why))
    lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--doc", default=str(HERE.parent.parent / "docs" / "EXECUTORCH.md"))
    ap.add_argument("--run", default="", help="which run this is: date, commit, machine")
    a = ap.parse_args()
    by_flow = collections.defaultdict(list)
    summaries = collections.defaultdict(list)
    for p in a.results:
        d = json.loads(Path(p).read_text())
        by_flow[d["summary"]["flow"]] += d["results"]
        summaries[d["summary"]["flow"]].append(d["summary"])
    lines = []
    if a.run:
        lines += ["From the CI run of %s." % a.run, ""]
    for flow in sorted(by_flow):
        lines += flow_section(flow, by_flow[flow], summaries[flow])
    doc = Path(a.doc)
    text = doc.read_text()
    i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
    doc.write_text(text[:i] + "\n" + "\n".join(lines) + "\n" + text[j:])
    print("wrote %s" % doc)


if __name__ == "__main__":
    main()
