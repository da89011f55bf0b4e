"""Exports every ExecuTorch program the tests run into the committed fixture
tests/et/fixture/programs.tar.xz (layout: tests/et/fixture.py), with the pinned ExecuTorch of the
PyTorch venv:
  - every case of ExecuTorch's backend suite (operators/) for the webgpu and the vulkan flow,
    with its inputs, eager PyTorch's outputs and float64 outputs;
  - the named programs of tests/et/programs.py (models, training programs, the reader's cases).

    .deps/venv-pt/bin/python tests/et/export_fixture.py [--jobs N] [--out ARCHIVE]
    .deps/venv-pt/bin/python tests/et/export_fixture.py --check DIR   (no export: is the unpacked
        fixture in DIR the one this code and the installed ExecuTorch would make? Every case and
        program present, keys equal, versions equal)
    .deps/venv-pt/bin/python tests/et/export_fixture.py --selftest    (the exporter's speed-up
        leaves programs byte-for-byte the same; the same export twice gives the same bytes)

The work is spread over N processes (default: the machine's cores), by operator file; each
process exports its files' cases one by one. The archive is reproducible: entries sorted, fixed
times and owners, no timings inside (the exporter prints them).
"""
import argparse
import atexit
import io
import json
import multiprocessing
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

FLOWS = ("webgpu", "vulkan")


def _worker_init():
    import torch
    torch.set_num_threads(1)
    import logging
    logging.disable(logging.INFO)
    import suite_cases
    suite_cases.install_pytest_shim()
    suite_cases.speed_up_exporter()


def npz_bytes(arrays):
    """An .npz (np.load reads it) whose bytes depend on the arrays only: numpy's own savez stamps
    each member with the time it was written."""
    import numpy as np
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays.items():
            with z.open(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), "w") as f:
                np.lib.format.write_array(f, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _save_npz(path, inputs, ref, r64):
    """A case's data: inputs in0.., eager outputs out0.. and, for floating outputs where the module
    runs in float64, the float64 outputs as a float32 residual res0.. (float64 = out + res, to
    about 1e-14 relative: the residual of an exact operator is all zeros, which compresses to
    nothing). Written once for both flows (the same module and inputs), atomically."""
    import torch
    arrays = {}
    for i, x in enumerate(inputs):
        arrays["in%d" % i] = x.detach().contiguous().numpy()
    for i, x in enumerate(ref):
        arrays["out%d" % i] = x.detach().contiguous().numpy()
        if r64 is not None and x.is_floating_point():
            arrays["res%d" % i] = (r64[i] - x.double()).to(torch.float32).contiguous().numpy()
    tmp = path.with_suffix(".%d.tmp" % os.getpid())
    tmp.write_bytes(npz_bytes(arrays))
    tmp.replace(path)


def export_file(task):
    """One operator file of one flow: its manifest entries; programs and data written under stage."""
    flow_name, file_name, stage = task
    import suite_cases
    flow = suite_cases.flows()[flow_name]
    t0 = time.perf_counter()
    entries, n_exported = [], 0
    for case_id, model, inputs, dyn, why in suite_cases.collect(file_name, flow):
        e = {"flow": flow_name, "file": file_name, "case": case_id}
        if why:
            e.update(status="not_applicable", reason=why)
            entries.append(e)
            continue
        inputs = tuple(inputs)
        e["key"] = suite_cases.case_key(flow_name, file_name, case_id, model, inputs)
        try:
            ref, r64 = suite_cases.eager_outputs(model, inputs)
        except Exception as ex:
            e.update(status="not_applicable", reason="eager PyTorch fails: %s: %s" % (type(ex).__name__, ex))
            entries.append(e)
            continue
        pte, meta = suite_cases.export_suite_case(flow, model, inputs, dyn)
        n_exported += 1
        if pte is None:
            e.update(status="not_exported", reason=meta["error"])
            entries.append(e)
            continue
        pte_rel = "suite/%s/%s.pte" % (flow_name, e["key"])
        data_rel = "suite/data/%s.npz" % suite_cases.case_key("", file_name, case_id, model, inputs)
        for rel in (pte_rel, data_rel):
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / pte_rel).write_bytes(pte)
        _save_npz(stage / data_rel, suite_cases.flatten(inputs), ref, r64)
        e.update(status="program", pte=pte_rel, data=data_rel, delegated=meta["delegated"],
                 undelegated=meta["undelegated"], float64=r64 is not None)
        entries.append(e)
    return entries, "%s %s: %d cases, %d exported in %.0f s" % (flow_name, file_name, len(entries), n_exported,
                                                                  time.perf_counter() - t0)


def export_program(task):
    _, name, stage = task
    import programs
    import suite_cases
    spec = programs.SPECS[name]
    t0 = time.perf_counter()
    model, inputs = spec.build()
    e = {"name": name, "kind": spec.kind, "partitioner": spec.partitioner, "key": programs.spec_key(spec, model, inputs)}
    try:
        pte = suite_cases.export_spec(spec, model, inputs)
        (stage / "programs").mkdir(parents=True, exist_ok=True)
        (stage / "programs" / (name + ".pte")).write_bytes(pte)
        e["pte"] = "programs/%s.pte" % name
    except Exception as ex:
        e["error"] = "%s: %s" % (type(ex).__name__, str(ex).strip().splitlines()[0][:300] if str(ex).strip() else "")
    return e, "program %s in %.0f s%s" % (name, time.perf_counter() - t0, " (failed: %s)" % e["error"] if "error" in e else "")


def run_task(task):
    try:
        return task[0], (export_program(task) if task[0] == "program" else export_file(task))
    except Exception as ex:
        import traceback
        return task[0], ("error", "%s: %s\n%s" % (task[:2], ex, traceback.format_exc()))


def versions():
    from importlib.metadata import version
    return {"executorch": version("executorch"), "torch": version("torch").split("+")[0]}


def write_archive(stage, out):
    """A reproducible tar.xz of stage: sorted entries, mtime 0, root-owned, 0644."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w:xz", preset=9, format=tarfile.PAX_FORMAT) as tar:
        for p in sorted(q for q in stage.rglob("*") if q.is_file()):
            rel = p.relative_to(stage).as_posix()
            info = tarfile.TarInfo(rel)
            data = p.read_bytes()
            info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)


def _prune(stage, suite, progs):
    """Removes the files no manifest entry names (left from an updated archive)."""
    keep = {"manifest.json"} | {e[k] for e in suite for k in ("pte", "data") if e.get(k)}
    keep |= {e["pte"] for e in progs if e.get("pte")}
    for p in stage.rglob("*"):
        if p.is_file() and p.relative_to(stage).as_posix() not in keep:
            p.unlink()


def export_all(a):
    import programs
    import suite_cases
    suite_cases.install_pytest_shim()
    stage = Path(tempfile.mkdtemp(prefix="et-fixture-"))
    atexit.register(shutil.rmtree, stage, ignore_errors=True)  # the archive is what stays
    out = Path(a.out)
    partial = bool(a.files or a.programs or a.programs_only)
    old = None
    if partial and out.is_file():  # an update: everything not exported now is kept from the archive
        with tarfile.open(out, "r:xz") as tar:
            # (the archive is this script's own; the "data" filter where the Python has it)
            tar.extractall(stage, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        old = json.loads((stage / "manifest.json").read_text())
        if {k: old.get(k) for k in ("executorch", "torch")} != versions():
            print("%s was made with executorch %s, torch %s: export everything (no --files/--programs)" % (
                out, old.get("executorch"), old.get("torch")))
            return 1
    files = suite_cases.operator_files()
    if a.files:
        files = [f for f in files if f[:-3] in a.files.split(",") or f in a.files.split(",")]
    want_progs = a.programs.split(",") if a.programs else list(programs.SPECS) if not a.files or a.programs_only else []
    unknown = [n for n in want_progs if n not in programs.SPECS]
    if unknown:
        print("no such programs in tests/et/programs.py: %s" % ", ".join(unknown))
        return 1
    tasks = [("program", n, stage) for n in want_progs]
    if not a.programs_only and (a.files or not a.programs):
        # the files with the most cases first, so that no process is left with a long one at the end
        flows = suite_cases.flows()
        weight = {(fl, f): sum(c[1] is not None for c in suite_cases.collect(f, flows[fl])) for f in files for fl in FLOWS}
        tasks += [(fl, f, stage) for (fl, f) in sorted(weight, key=lambda k: -weight[k])]
    t0 = time.perf_counter()
    suite, progs, errors = [], [], []
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(a.jobs, initializer=_worker_init, maxtasksperchild=8) as pool:
        for kind, result in pool.imap_unordered(run_task, tasks):
            if result[0] == "error":
                errors.append(result[1])
                print("ERROR " + result[1], flush=True)
                continue
            entries, line = result
            (progs.append(entries) if kind == "program" else suite.extend(entries))
            print("[%5.0f s] %s" % (time.perf_counter() - t0, line), flush=True)
    if errors:
        print("%d tasks failed: no archive written" % len(errors))
        return 1
    if old is not None:
        redone_files = {(e["flow"], e["file"]) for e in suite}
        redone_progs = {e["name"] for e in progs}
        suite += [e for e in old["suite"] if (e["flow"], e["file"]) not in redone_files]
        progs += [e for e in old["programs"] if e["name"] not in redone_progs and e["name"] in programs.SPECS]
        _prune(stage, suite, progs)
    suite.sort(key=lambda e: (e["flow"], e["file"], e["case"]))
    progs.sort(key=lambda e: e["name"])
    manifest = {"format": 1, **versions(), "made_by": "tests/et/export_fixture.py", "flows": list(FLOWS),
                "suite": suite, "programs": progs}
    (stage / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    write_archive(stage, out)
    counts = {}
    for e in suite:
        counts[(e["flow"], e["status"])] = counts.get((e["flow"], e["status"]), 0) + 1
    print("wrote %s (%.1f MB) in %.0f s: %s; %d programs" % (
        out, out.stat().st_size / 1e6, time.perf_counter() - t0,
        ", ".join("%s %s %d" % (f, s, n) for (f, s), n in sorted(counts.items())), len(progs)))
    return 0


def check(a):
    """Is the unpacked fixture in a.check what this code and the installed ExecuTorch make?"""
    import fixture
    import programs
    import suite_cases
    suite_cases.install_pytest_shim()
    import logging
    logging.disable(logging.INFO)
    fx = fixture.Fixture(a.check)
    problems = []
    try:
        fx.check_pins()
    except fixture.FixtureError as e:
        problems.append(str(e))
    v = versions()
    for k in ("executorch", "torch"):
        if fx.manifest.get(k) != v[k]:
            problems.append("the fixture was made with %s %s, the venv has %s" % (k, fx.manifest.get(k), v[k]))
    have = {(c["flow"], c["file"], c["case"]): c for c in fx.manifest["suite"]}
    seen = set()
    n = 0
    for flow_name, flow in suite_cases.flows().items():
        for f in suite_cases.operator_files():
            for case_id, model, inputs, dyn, why in suite_cases.collect(f, flow):
                n += 1
                k = (flow_name, f, case_id)
                seen.add(k)
                c = have.get(k)
                if c is None:
                    problems.append("%s %s %s: not in the fixture" % k)
                elif why and c["status"] != "not_applicable":
                    problems.append("%s %s %s: not applicable now (%s), the fixture has it as %s" % (k + (why, c["status"])))
                elif not why and c.get("key") != suite_cases.case_key(flow_name, f, case_id, model, tuple(inputs)):
                    problems.append("%s %s %s: the module or its inputs changed since the fixture was made" % k)
    for k in sorted(set(have) - seen):
        problems.append("%s %s %s: in the fixture, no longer in the suite" % k)
    for name, spec in programs.SPECS.items():
        model, inputs = spec.build()
        p = fx.programs.get(name)
        if p is None:
            problems.append("program %s: not in the fixture" % name)
        elif p["key"] != programs.spec_key(spec, model, inputs):
            problems.append("program %s: the module changed since the fixture was made" % name)
    for name in sorted(set(fx.programs) - set(programs.SPECS)):
        problems.append("program %s: in the fixture, no longer in tests/et/programs.py" % name)
    for p in problems:
        print("STALE " + p)
    print("%d suite cases and %d programs compared with the fixture: %d differences%s" % (
        n, len(programs.SPECS), len(problems),
        " (regenerate: tests/et/export_fixture.py)" + programs.key_caveat() if problems else ""))
    return 1 if problems else 0


def selftest(a):
    """The pattern memo leaves programs the same bytes, and exports are reproducible."""
    _worker_init()
    import suite_cases
    flow = suite_cases.flows()["vulkan"]
    cases = []
    for f in ("test_linear.py", "test_add.py", "test_conv2d.py"):  # each file's first two cases that run eagerly
        runs = []
        for c in suite_cases.collect(f, flow):
            try:
                if c[1] is not None and len(runs) < 2:
                    suite_cases.eager_outputs(c[1], c[2])
                    runs.append(c)
            except Exception:
                pass
        cases += runs
    from executorch.backends.vulkan.patterns import pattern_registry
    memo = {k: e.get_graphs_fn for k, e in pattern_registry.fusable_patterns.items()}
    bad = 0
    for case_id, model, inputs, dyn, _ in cases:
        a1, _ = suite_cases.export_suite_case(flow, model, inputs, dyn)
        a2, _ = suite_cases.export_suite_case(flow, model, inputs, dyn)
        for k, e in pattern_registry.fusable_patterns.items():  # the exporter as shipped
            if getattr(e.get_graphs_fn, "_wgml_memo", False):
                e.get_graphs_fn = e.get_graphs_fn.__defaults__[0]
        b, _ = suite_cases.export_suite_case(flow, model, inputs, dyn)
        for k, e in pattern_registry.fusable_patterns.items():
            e.get_graphs_fn = memo[k]
        ok = a1 is not None and a1 == a2 == b
        bad += not ok
        print("%s %s: %d bytes, memo %s, repeat %s" % ("ok  " if ok else "FAIL", case_id, len(a1 or b""),
                                                     "same" if a1 == b else "DIFFERENT", "same" if a1 == a2 else "DIFFERENT"))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=str(HERE / "fixture" / "programs.tar.xz"))
    ap.add_argument("--files", default="", help="only these operator files (the rest of an existing archive is kept)")
    ap.add_argument("--programs", default="", help="only these named programs (likewise)")
    ap.add_argument("--programs-only", action="store_true", help="only the named programs (likewise)")
    ap.add_argument("--check", default="", help="an unpacked fixture to compare with what would be exported")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.check:
        return check(a)
    if a.selftest:
        return selftest(a)
    return export_all(a)


if __name__ == "__main__":
    sys.exit(main())
