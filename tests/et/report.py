"""Writes the results section of docs/EXECUTORCH.md (between the markers
<!-- suite results begin --> and <!-- suite results end -->) and tests/et/must_pass.cmake from the
JSON files of tests/et/suite.py runs (one per flow or group), so that the page says what the
last full run measured.

    report.py RESULTS.json... [--doc docs/EXECUTORCH.md] [--must-pass tests/et/must_pass.cmake]
"""
import argparse
import collections
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- suite results begin -->", "<!-- suite results end -->"


def short(reason):
    """A reason without the parts that differ case by case (numbers of errors, temp paths)."""
    r = re.sub(r"max abs error [0-9.e+-]+", "max abs error …", reason)
    r = re.sub(r"\d+ of \d+ elements differ", "elements differ", r)
    r = re.sub(r"value \d+", "value …", r)
    return r.replace("|", "\\|").replace("\n", " ")[:220]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--doc", default=str(HERE.parent.parent / "docs" / "EXECUTORCH.md"))
    ap.add_argument("--must-pass", default=str(HERE / "must_pass.cmake"))
    ap.add_argument("--cache", default=str(HERE.parent.parent / ".deps" / "et-cache"))
    a = ap.parse_args()
    by_flow = collections.defaultdict(list)
    summaries = collections.defaultdict(list)
    for p in a.results:
        d = json.loads(Path(p).read_text())
        by_flow[d["summary"]["flow"]] += d["results"]
        summaries[d["summary"]["flow"]].append(d["summary"])
    lines = []
    must = {}
    for flow in sorted(by_flow):
        res = by_flow[flow]
        per = collections.OrderedDict()
        for r in sorted(res, key=lambda r: r["file"]):
            per.setdefault(r["file"], []).append(r)
        tot = collections.Counter(r["result"] for r in res)
        ss = summaries[flow]
        exported = sum(s.get("exported", 0) for s in ss)
        export_s = sum(s.get("export_s", 0) for s in ss)
        lines.append("### Flow `%s` (executorch %s)" % (flow, ss[0].get("executorch", "?")))
        lines.append("")
        lines.append("%d cases in %d operator files: **%d passed, %d failed, %d skipped**. %d programs were exported "
                     "in this run (%.0f s of export time, %.1f s per program), %d came from the cache."
                     % (len(res), len(per), tot["pass"], tot["fail"], tot["skip"], exported, export_s,
                        export_s / exported if exported else 0, sum(s.get("cached", 0) for s in ss)))
        times = [json.loads(f.read_text()).get("export_s", 0)
                 for f in (Path(a.cache) / ss[0].get("executorch", "?") / flow).glob("*.json")]
        times = sorted(t for t in times if t)
        if times:
            lines.append("")
            lines.append("Export time per program, over the %d programs in the cache (each recorded when it was "
                         "exported, on this shared 2-core machine): median %.1f s, min %.1f s, max %.1f s. A cold "
                         "cache costs about %d cases × the median = %.0f min for this flow."
                         % (len(times), times[len(times) // 2], times[0], times[-1], len(res),
                            len(res) * times[len(times) // 2] / 60))
        delegated = sum(1 for r in res if r["result"] == "pass" and r.get("delegated"))
        lines.append("")
        lines.append("Of the passing cases, %d ran a delegate graph; the other %d were programs the partitioner left "
                     "undelegated (portable kernels only), which wgml runs through the same registry."
                     % (delegated, tot["pass"] - delegated))
        lines.append("")
        lines.append("| operator file | passed (delegated) | failed | skipped | reasons (failures and skips, with counts) |")
        lines.append("|---|---:|---:|---:|---|")
        ok_files = []
        for f, rs in per.items():
            c = collections.Counter(r["result"] for r in rs)
            reasons = collections.Counter(("fail: " if r["result"] == "fail" else "skip: ") + short(r["reason"])
                                          for r in rs if r["result"] != "pass")
            why = "; ".join("%s (%d)" % (k, n) if n > 1 else k for k, n in reasons.most_common())
            dl = sum(1 for r in rs if r["result"] == "pass" and r.get("delegated"))
            lines.append("| %s | %d (%d) | %d | %d | %s |" % (f[:-3], c["pass"], dl, c["fail"], c["skip"], why))
            # must-pass: every case ran and none failed; a case not exported yet may fail once it
            # is (test_conv1d's padding modes under the Vulkan partitioner did)
            unexported = any(r["result"] == "skip" and r["reason"].startswith("not exported yet") for r in rs)
            if c["pass"] and not c["fail"] and not unexported:
                ok_files.append(f[:-3])
        lines.append("")
        must[flow] = ok_files
    doc = Path(a.doc)
    text = doc.read_text() if doc.is_file() else "%s\n%s\n" % (BEGIN, END)
    i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
    doc.write_text(text[:i] + "\n" + "\n".join(lines) + "\n" + text[j:])
    mp = Path(a.must_pass)
    old = mp.read_text() if mp.is_file() else ""
    head = "".join(l for l in old.splitlines(True) if l.startswith("#"))
    body = "".join('set(WGML_ET_MUST_PASS_%s "%s")\n' % (fl, ",".join(must.get(fl, [])))
                   for fl in ("webgpu", "vulkan"))
    mp.write_text(head + body)
    print("wrote %s and %s" % (doc, mp))


if __name__ == "__main__":
    main()
