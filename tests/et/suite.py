"""ExecuTorch's backend conformance suite (executorch/backends/test/suite/operators) with wgml as
the runtime.

Every test function of the chosen operator files is called with a test runner of our own: each
(module, inputs) case it lowers is exported with the flow's partitioner (WebGPU or Vulkan: the
suite's own tester classes), the .pte runs on wgml (tests/et/etrun.py, in this process), and its
outputs are compared with eager PyTorch on the same inputs with the suite's tolerances (atol
1e-1, rtol 4e-2, as its runner passes). Exporting is the slow part, so programs are cached under
CACHE/<executorch version>/<flow>/<key>.pte, the key a hash of the test, the module (class
source, repr, parameters) and the inputs; a rerun exports only what changed, and every
comparison runs every time.

    suite.py --lib build/libwgml.so --flow webgpu [--files test_add.py,...|--group K/N]
             [--cache DIR] [--json OUT.json] [--budget-s S] [--must-pass test_add,...]

Exit status: 0; 1 when a case of a --must-pass file fails; 77 (CTest: skipped) when --budget-s
ran out before every case was exported (the cache keeps what was done, so the next run goes
further).
"""
import argparse
import hashlib
import importlib
import inspect
import io
import json
import os
import sys
import time
import traceback
import types
import unittest
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import etrun  # noqa: E402

ATOL, RTOL = 1e-1, 4e-2  # executorch/backends/test/suite/runner.py: run_test


# ---- a stand-in for pytest (the operator files import it for parametrize only) ----------------
def _install_pytest_shim():
    if "pytest" in sys.modules:
        return
    m = types.ModuleType("pytest")

    class _Mark:
        def parametrize(self, names, values, ids=None):
            def deco(f):
                f.__dict__.setdefault("_wgml_params", []).append((names, list(values)))
                return f
            return deco

        def __getattr__(self, name):  # other marks: no effect
            return lambda *a, **k: (lambda f: f)

    class Skipped(Exception):
        pass

    def skip(msg=""):
        raise Skipped(msg)

    m.mark = _Mark()
    m.skip = skip
    m.Skipped = Skipped
    m.fixture = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))
    sys.modules["pytest"] = m


class CaseCollector:
    """The test_runner a suite test function gets: records each (model, inputs) it lowers."""

    def __init__(self, flow):
        self._flow = flow
        self.cases = []

    def lower_and_run_model(self, model, inputs, generate_random_test_inputs=True, dynamic_shapes=None):
        self.cases.append((model, inputs, dynamic_shapes))


def flows():
    from executorch.backends.test.suite.flows.vulkan import VULKAN_TEST_FLOW
    from executorch.backends.test.suite.flows.webgpu import WEBGPU_TEST_FLOW
    return {"webgpu": WEBGPU_TEST_FLOW, "vulkan": VULKAN_TEST_FLOW}


def webgpu_support_names():
    """The edge op names of the WebGPU test flow's allow list ("aten.add.Tensor", ...)."""
    from executorch.backends.webgpu.test.tester import WEBGPU_SUPPORTED_OPS
    out = set()
    for op in WEBGPU_SUPPORTED_OPS:
        name = getattr(op, "_op", None)
        s = str(name if name is not None else op)
        out.add(s.replace("::", "."))
    return out


def _seed_for(name):
    return int.from_bytes(hashlib.md5(name.encode()).digest()[:4], "little")


def _tensor_digest(h, t):
    if isinstance(t, torch.Tensor):
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(t, (list, tuple)):
        h.update(b"[")
        for x in t:
            _tensor_digest(h, x)
        h.update(b"]")
    else:
        h.update(repr(t).encode())


def case_key(flow_name, case_id, model, inputs):
    h = hashlib.sha256()
    h.update(flow_name.encode())
    h.update(case_id.encode())
    try:
        h.update(inspect.getsource(type(model)).encode())
    except (OSError, TypeError):
        h.update(type(model).__qualname__.encode())
    h.update(repr(model).encode())
    for k, v in model.state_dict().items():
        h.update(k.encode())
        _tensor_digest(h, v)
    _tensor_digest(h, inputs)
    return h.hexdigest()[:32]


def export_case(flow, model, inputs, dynamic_shapes):
    """(pte bytes or None, meta dict). meta: delegated, undelegated ops, error."""
    from executorch.backends.test.harness.stages import StageType
    meta = {}
    t0 = time.perf_counter()
    try:
        tester = flow.tester_factory(model, inputs)
        tester.export(tester._get_default_stage(StageType.EXPORT, dynamic_shapes=dynamic_shapes))
        tester.to_edge_transform_and_lower()
        gm = tester.stages[tester.cur].artifact.exported_program().graph_module
        meta["delegated"] = any(n.op == "call_function" and n.target == torch._higher_order_ops.executorch_call_delegate
                                for n in gm.graph.nodes)
        meta["undelegated"] = sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"
                                      and n.target != torch._higher_order_ops.executorch_call_delegate
                                      and "getitem" not in str(n.target)})
        tester.to_executorch()
        tester.serialize()
        pte = tester.get_artifact()
    except Exception as e:  # the exporter refused the model: recorded, not retried
        meta["error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else "")
        pte = None
    meta["export_s"] = time.perf_counter() - t0
    return pte, meta


def load_or_export(cache_dir, flow, key, model, inputs, dyn, stats, budget_s):
    pte_path, meta_path = cache_dir / (key + ".pte"), cache_dir / (key + ".json")
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        pte = pte_path.read_bytes() if pte_path.is_file() else None
        stats["cached"] += 1
        return pte, meta
    if budget_s < 0 or (budget_s and stats["export_s"] > budget_s):
        stats["over_budget"] += 1
        return None, {"budget": True}
    pte, meta = export_case(flow, model, inputs, dyn)
    stats["exported"] += 1
    stats["export_s"] += meta["export_s"]
    cache_dir.mkdir(parents=True, exist_ok=True)
    if pte is not None:
        tmp = pte_path.with_suffix(".tmp")
        tmp.write_bytes(pte)
        tmp.replace(pte_path)
    meta_path.write_text(json.dumps(meta))
    return pte, meta


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        r = []
        for o in out:
            r += flatten(o)
        return r
    return []


def compare(got, ref):
    """None when every output matches (torch.allclose with the suite's tolerances), else why not."""
    if len(got) != len(ref):
        return "%d outputs, eager PyTorch gives %d" % (len(got), len(ref))
    for i, (g, r) in enumerate(zip(got, ref)):
        if tuple(g.shape) != tuple(r.shape):
            return "output %d: shape %s, eager %s" % (i, tuple(g.shape), tuple(r.shape))
        if r.dtype == torch.bool or not r.is_floating_point():
            if not torch.equal(g.to(r.dtype), r):
                bad = (g.to(r.dtype) != r).sum().item()
                return "output %d: %d of %d elements differ" % (i, bad, r.numel())
            continue
        gf, rf = g.double(), r.double()
        if not torch.allclose(gf, rf, atol=ATOL, rtol=RTOL, equal_nan=True):
            err = (gf - rf).abs()
            err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
            return "output %d: max abs error %.3g (atol %g, rtol %g)" % (i, err.max().item(), ATOL, RTOL)
    return None


def collect(file_name, flow):
    """[(case_id, op_file, model, inputs, dyn, skip_reason)] of one operator file."""
    mod_name = "executorch.backends.test.suite.operators." + file_name[:-3]
    mod = importlib.import_module(mod_name)
    out = []
    for name in sorted(dir(mod)):
        f = getattr(mod, name)
        if not name.startswith("test_") or not callable(f):
            continue
        params = [{}]
        for names, values in getattr(f, "_wgml_params", []):
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            params = [dict(p, **dict(zip(names, v if len(names) > 1 else (v,)))) for p in params for v in values]
        for p in params:
            test_id = name + ("[" + ",".join(str(v).replace("torch.", "") for v in p.values()) + "]" if p else "")
            skip, why = flow.should_skip_test(name)
            if skip:
                out.append((test_id, file_name, None, None, None, why))
                continue
            runner = CaseCollector(flow)
            torch.manual_seed(_seed_for(test_id))
            try:
                f(runner, **p)
            except unittest.SkipTest as e:
                out.append((test_id, file_name, None, None, None, "skipped by the suite: %s" % e))
                continue
            except Exception as e:
                if type(e).__name__ == "Skipped":
                    out.append((test_id, file_name, None, None, None, "skipped by the suite: %s" % e))
                    continue
                out.append((test_id, file_name, None, None, None, "the test itself failed: %s: %s" % (type(e).__name__, e)))
                continue
            for k, (model, inputs, dyn) in enumerate(runner.cases):
                out.append(("%s#%d" % (test_id, k), file_name, model, inputs, dyn, None))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--flow", default="webgpu", choices=["webgpu", "vulkan"])
    ap.add_argument("--files", default="")
    ap.add_argument("--group", default="", help="K/N: the K-th of N slices of the sorted operator files")
    ap.add_argument("--cache", default=str(HERE.parent.parent / ".deps" / "et-cache"))
    ap.add_argument("--json", default="")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="stop exporting after this many seconds of export time (the cache keeps what was "
                         "exported); the remaining cases are skipped and the exit status is 77; -1: export "
                         "nothing (only what the cache holds runs)")
    ap.add_argument("--must-pass", default="", help="comma-separated operator files that must pass completely")
    a = ap.parse_args()

    _install_pytest_shim()
    import executorch
    import executorch.backends.test.suite.operators as ops_pkg
    version = getattr(executorch, "__version__", None)
    if not version:
        from importlib.metadata import version as _v
        version = _v("executorch")
    flow = flows()[a.flow]
    ops_dir = Path(ops_pkg.__file__).parent
    files = sorted(p.name for p in ops_dir.glob("test_*.py"))
    if a.files:
        files = [f if f.endswith(".py") else f + ".py" for f in a.files.split(",")]
    if a.group:
        k, n = (int(x) for x in a.group.split("/"))
        files = files[k::n]
    cache_dir = Path(a.cache) / version / a.flow
    rt = etrun.Runtime(a.lib)
    stats = {"cached": 0, "exported": 0, "export_s": 0.0, "over_budget": 0}
    results = []
    t_start = time.perf_counter()
    for fname in files:
        try:
            cases = collect(fname, flow)
        except Exception as e:
            results.append({"file": fname, "case": "(import)", "result": "fail",
                            "reason": "the operator file does not load: %s: %s" % (type(e).__name__, e)})
            continue
        for case_id, _, model, inputs, dyn, skip in cases:
            r = {"file": fname, "case": case_id}
            if skip:
                r.update(result="skip", reason=skip)
                results.append(r)
                continue
            try:
                with torch.no_grad():
                    ref = flatten(model(*inputs))
            except Exception as e:
                r.update(result="skip", reason="eager PyTorch fails: %s" % e)
                results.append(r)
                continue
            key = case_key(a.flow, fname + ":" + case_id, model, inputs)
            pte, meta = load_or_export(cache_dir, flow, key, model, inputs, dyn, stats, a.budget_s)
            if meta.get("budget"):
                r.update(result="skip", reason="not exported yet (the run's export time budget is spent)")
                results.append(r)
                continue
            r["delegated"] = meta.get("delegated", False)
            r["undelegated"] = meta.get("undelegated", [])
            if pte is None:
                r.update(result="skip", reason="the exporter fails: " + meta.get("error", "?"))
                results.append(r)
                continue
            try:
                # the program's inputs are the tensor leaves of the inputs, in order (a tuple of
                # index tensors is as many inputs)
                got = rt.run(pte, flatten(inputs))
                why = compare(got, ref)
                r.update(result="fail" if why else "pass", reason=why or "")
            except etrun.ProgramError as e:
                r.update(result="fail", reason="wgml %s: %s" % (e.stage, e))
            results.append(r)
            print("%-5s %s %s %s" % (r["result"], fname, case_id, r.get("reason", "")), flush=True)
    rt.close()
    elapsed = time.perf_counter() - t_start
    summary = {"flow": a.flow, "executorch": version, "files": files, "elapsed_s": elapsed, **stats}
    n = {k: sum(1 for r in results if r["result"] == k) for k in ("pass", "fail", "skip")}
    print("%s: %d passed, %d failed, %d skipped in %.1f s (%d programs from the cache, %d exported in %.1f s)"
          % (a.flow, n["pass"], n["fail"], n["skip"], elapsed, stats["cached"], stats["exported"], stats["export_s"]))
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    must = set(f if f.endswith(".py") else f + ".py" for f in a.must_pass.split(",") if f)
    bad = [r for r in results if r["file"] in must and r["result"] == "fail"]
    for r in bad:
        print("REQUIRED FAIL: %s %s: %s" % (r["file"], r["case"], r["reason"]))
    if bad:
        return 1
    if stats["over_budget"]:
        print("%d cases not exported within the time budget: run again (the cache grows) or run "
              "tests/et/suite.py without --budget-s to export all" % stats["over_budget"])
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
