"""ExecuTorch's backend conformance suite (executorch/backends/test/suite/operators) as a list of
cases, and the exporter's side of it (needs torch and executorch; tests/et/export_fixture.py and
its --check use this, the runner tests/et/suite.py does not).

Every test function of an operator file is called with a test runner of our own, which records
each (module, inputs) it lowers instead of lowering it. What ExecuTorch's own runner
(backends/test/suite/runner.py) does with a case decides what the case is here:
  - a test the flow's skip patterns or parameter rules exclude, or one the suite skips itself, or
    whose module fails in eager PyTorch: not applicable (ExecuTorch skips it too);
  - a case the exporter refuses: not exported (ExecuTorch: SKIPPED at export, LOWER_FAIL at
    lowering), with the exporter's message;
  - anything else is a program, run on wgml and compared with eager PyTorch. ExecuTorch's
    runner stops short of running two kinds, which wgml runs all the same and the report counts
    apart: programs with nothing delegated (SUCCESS_UNDELEGATED there) and programs that keep
    portable kernels ExecuTorch's portable library lacks (SKIPPED there).
"""
import copy
import hashlib
import importlib
import time
import types
import sys
import unittest

import torch

from programs import module_key

ATOL, RTOL = 1e-1, 4e-2  # executorch/backends/test/suite/runner.py: run_test


# ---- a stand-in for pytest (the operator files import it for parametrize only) ----------------
def install_pytest_shim():
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


def operator_files():
    import executorch.backends.test.suite.operators as ops_pkg
    from pathlib import Path
    return sorted(p.name for p in Path(ops_pkg.__file__).parent.glob("test_*.py"))


def executorch_version():
    from importlib.metadata import version
    return version("executorch")


def _seed_for(name):
    return int.from_bytes(hashlib.md5(name.encode()).digest()[:4], "little")


def collect(file_name, flow):
    """[(case_id, model, inputs, dynamic_shapes, why_not_applicable)] of one operator file."""
    install_pytest_shim()
    mod = importlib.import_module("executorch.backends.test.suite.operators." + file_name[:-3])
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
            skip, why = flow.should_skip_test(name, p)  # as the suite's conftest asks
            if skip:
                out.append((test_id, None, None, None, why))
                continue
            runner = CaseCollector(flow)
            torch.manual_seed(_seed_for(test_id))
            try:
                f(runner, **p)
            except unittest.SkipTest as e:
                out.append((test_id, None, None, None, "skipped by the suite: %s" % e))
                continue
            except Exception as e:
                if type(e).__name__ != "Skipped":
                    raise RuntimeError("%s %s: the suite's test function failed: %s: %s"
                                       % (file_name, test_id, type(e).__name__, e)) from e
                out.append((test_id, None, None, None, "skipped by the suite: %s" % e))
                continue
            for k, (model, inputs, dyn) in enumerate(runner.cases):
                out.append(("%s#%d" % (test_id, k), model, inputs, dyn, None))
    return out


def case_key(flow_name, file_name, case_id, model, inputs):
    import inspect
    try:
        src = inspect.getsource(type(model))
    except (OSError, TypeError):
        src = type(model).__qualname__
    return module_key("suite|%s|%s:%s|%s" % (flow_name, file_name, case_id, src), model, inputs)


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        r = []
        for o in out:
            r += flatten(o)
        return r
    return []


def eager_outputs(model, inputs):
    """(float32 outputs, float64 outputs or None): eager PyTorch as the suite compares with, and
    the same module in float64 (floating inputs widened) where it runs so."""
    with torch.no_grad():
        ref = [t.detach().clone() for t in flatten(model(*inputs))]
        try:
            m64 = copy.deepcopy(model).double()
            in64 = tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
            r64 = [t.detach().clone() for t in flatten(m64(*in64))]
            if len(r64) != len(ref) or any(a.shape != b.shape for a, b in zip(r64, ref)):
                r64 = None
        except Exception:
            r64 = None
    return ref, r64


# ---- exporting ---------------------------------------------------------------------------------
def speed_up_exporter():
    """The Vulkan partitioner rebuilds its fusion patterns' graphs (RoPE, RMSNorm, SDPA, ...:
    each a torch.export of a small module) for every program it lowers: about 60% of a small
    program's export time. The graphs are the same every time and only read (SubgraphMatcher),
    so each pattern's list is built once per process. The programs are byte-for-byte the same
    (export_fixture.py --selftest checks)."""
    from executorch.backends.vulkan.patterns import pattern_registry
    for entry in pattern_registry.fusable_patterns.values():
        fn = entry.get_graphs_fn
        if fn is None or getattr(fn, "_wgml_memo", False):
            continue
        memo = []

        def once(fn=fn, memo=memo):
            if not memo:
                memo.append(fn())
            return memo[0]
        once._wgml_memo = True
        entry.get_graphs_fn = once


def export_suite_case(flow, model, inputs, dynamic_shapes):
    """(pte bytes or None, meta): delegated, undelegated ops, or the exporter's error."""
    from executorch.backends.test.harness.stages import StageType
    meta = {}
    t0 = time.perf_counter()
    stage = "export"
    try:
        tester = flow.tester_factory(model, inputs)
        tester.export(tester._get_default_stage(StageType.EXPORT, dynamic_shapes=dynamic_shapes))
        stage = "lowering"
        tester.to_edge_transform_and_lower()
        gm = tester.stages[tester.cur].artifact.exported_program().graph_module
        meta["delegated"] = any(n.op == "call_function" and n.target == torch._higher_order_ops.executorch_call_delegate
                                for n in gm.graph.nodes)
        meta["undelegated"] = sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"
                                      and n.target != torch._higher_order_ops.executorch_call_delegate
                                      and "getitem" not in str(n.target)})
        stage = "serialisation"
        tester.to_executorch()
        tester.serialize()
        pte = bytes(tester.get_artifact())
    except Exception as e:
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        meta = {"error": "%s failed: %s: %s" % (stage, type(e).__name__, msg)}
        pte = None
    meta["export_s"] = time.perf_counter() - t0
    return pte, meta


def partitioners(name):
    if name == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
        return [VulkanPartitioner()]
    if name == "webgpu":  # as ExecuTorch's webgpu test flow lowers
        from executorch.backends.webgpu.partitioner import WebGPUPartitioner
        from executorch.backends.webgpu.test.tester import WEBGPU_SUPPORTED_OPS
        return [WebGPUPartitioner({"skip_bool_tensors": True}, operator_allowlist=WEBGPU_SUPPORTED_OPS)]
    if name == "webgpu-plain":
        from executorch.backends.webgpu.partitioner.partitioner import WebGPUPartitioner
        return [WebGPUPartitioner()]
    if name is None:
        return []
    raise ValueError("unknown partitioner %r" % name)


def export_spec(spec, model, inputs):
    """The .pte bytes of a named program (tests/et/programs.py)."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
    config = dict(spec.config)
    if "init_buffers" in config:  # mutable buffers whose initial values are saved
        from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
        config["passes"] = [InitializedMutableBufferPass(config.pop("init_buffers"))]
    if spec.kind == "training":
        from torch.export.experimental import _export_forward_backward
        ep = _export_forward_backward(torch.export.export(model, tuple(inputs), strict=True))
    else:
        ep = torch.export.export(model, tuple(inputs))
    edge = to_edge_transform_and_lower(ep, partitioner=partitioners(spec.partitioner),
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return bytes(edge.to_executorch(ExecutorchBackendConfig(**config)).buffer)
