"""Whole ExecuTorch programs on wgml, against eager PyTorch in float64:
  - an MLP, a transformer block (GQA attention with RoPE, RMSNorm, SwiGLU) and a small CNN (2-D
    convolutions with padding, stride, dilation and groups, average pooling, a 1-D convolution;
    tests/et/models.py),
    each exported with the Vulkan partitioner and with the WebGPU partitioner (whose allow list
    leaves part of the graph to portable kernels: wgml runs that glue too), through the C API
    (ctypes) with fresh random inputs, several runs of one loaded program;
  - a torchvision model of ExecuTorch's suite (models/test_torchvision.py): MobileNetV2 at
    64x64 with both partitioners, against float64 PyTorch;
  - the CLI: `wgml run` with .npy inputs, --out and --check;
  - bad input: wrong input sizes, a wrong-shaped or wrong-dtype .npy, an unknown operator (the
    load error lists it), a truncated file: clear errors, never a crash.
Programs are cached under .deps/et-cache/<executorch version>/programs/ (keyed by the model and
its example input), so only the first run exports.

    test_programs.py BUILD_DIR
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import etrun  # noqa: E402
import models  # noqa: E402

ROOT = HERE.parent.parent
FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def et_version():
    from importlib.metadata import version
    return version("executorch")


def export(model, example, partitioner):
    """The .pte bytes of model lowered with partitioner ("vulkan" or "webgpu"), cached."""
    h = hashlib.sha256()
    h.update(partitioner.encode())
    h.update(repr(model).encode())
    for k, v in model.state_dict().items():
        h.update(k.encode() + v.detach().numpy().tobytes())
    h.update(str([tuple(x.shape) for x in example]).encode())
    path = ROOT / ".deps" / "et-cache" / et_version() / "programs" / (h.hexdigest()[:32] + ".pte")
    if path.is_file():
        return path.read_bytes()
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    if partitioner == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
        part = VulkanPartitioner()
    else:
        from executorch.backends.webgpu.partitioner import WebGPUPartitioner
        from executorch.backends.webgpu.test.tester import WEBGPU_SUPPORTED_OPS
        part = WebGPUPartitioner({"skip_bool_tensors": True}, operator_allowlist=WEBGPU_SUPPORTED_OPS)
    t0 = time.perf_counter()
    ep = torch.export.export(model, tuple(example))
    pte = to_edge_transform_and_lower(ep, partitioner=[part],
                                      compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch().buffer
    print("  exported %s with %s in %.1f s" % (type(model).__name__, partitioner, time.perf_counter() - t0))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_bytes(pte)
    path.with_suffix(".tmp").replace(path)
    return pte


def max_err(got, ref):
    d = (got.double() - ref).abs()
    return d.max().item(), (d / ref.abs().clamp_min(1e-6)).max().item()


def run_models(rt, seed):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(1234)  # the weights (fixed, so the cache key stays)
    cases = [("mlp", models.MLP().eval(), (4, 16)), ("block", models.Block().eval(), (2, 8, 32))]
    torch.manual_seed(1234)
    cases.append(("conv", models.ConvNet().eval(), (2, 3, 12, 12)))
    torch.manual_seed(1234)
    cases.append(("conv_bn", models.ConvBN().eval(), (2, 4, 7, 9)))
    progs = {}
    for name, model, shape in cases:
        for part in ("vulkan", "webgpu"):
            pte = export(model, [torch.randn(shape)], part)
            progs[(name, part)] = pte
            ref_model = model.double()
            for run in range(2):  # fresh inputs each run
                x = torch.randn(shape, generator=g)
                try:
                    out = rt.run(pte, [x], runs=2)
                except etrun.ProgramError as e:
                    check(False, "%s/%s runs: %s" % (name, part, e))
                    break
                with torch.no_grad():
                    ref = ref_model(x.double())
                ea, er = max_err(out[0], ref)
                check(out[0].shape == ref.shape and ea < 1e-4,
                      "%s/%s run %d: max abs error %.2e (rel %.2e) vs float64 PyTorch, %.2f ms" %
                      (name, part, run, ea, er, rt.last_seconds * 1e3))
            model.float()
    return progs


def run_int64(rt):
    """int64 ids in, int64 argmax out: narrowed on upload, widened on readback; an id outside the
    int32 range is an error naming it."""
    torch.manual_seed(1234)
    model = models.EmbedArgmax().eval()
    pte = export(model, [torch.randint(0, 50, (3, 5))], "vulkan")
    ids = torch.randint(0, 50, (3, 5))
    try:
        logits, idx = rt.run(pte, [ids])
    except etrun.ProgramError as e:
        check(False, "int64 program runs: %s" % e)
        return
    with torch.no_grad():
        ref_logits, ref_idx = model.double()(ids)
    check(idx.dtype == torch.int64 and torch.equal(idx, ref_idx),
          "int64 output widened: argmax equals PyTorch's (%s)" % idx.dtype)
    check((logits.double() - ref_logits).abs().max().item() < 1e-5, "int64 ids narrowed: logits match PyTorch's")
    lib = rt.lib
    buf = bytes(pte)
    p = lib.wgml_program_load_bytes(rt.ctx, buf, len(buf), None)
    big = np.array(ids.numpy(), dtype=np.int64)
    big[1, 2] = 1 << 40
    s = lib.wgml_program_set_input(p, 0, big.ctypes.data, big.nbytes)
    check(s != 0 and "element 7 = 1099511627776 is out of the int32 range" in rt.err(),
          "an int64 input outside int32 is refused: %s" % rt.err())
    lib.wgml_program_free(p)


def run_cli(build, pte, tmp):
    x = torch.randn(4, 16)
    torch.manual_seed(1234)
    model = models.MLP().eval()
    ref = model(x).detach()
    np.save(tmp / "x.npy", x.numpy())
    np.save(tmp / "ref.npy", ref.numpy())
    (tmp / "mlp.pte").write_bytes(pte)
    out_dir = tmp / "out"
    out_dir.mkdir()
    r = subprocess.run([str(build / "wgml"), "run", str(tmp / "mlp.pte"), "--input", "0", str(tmp / "x.npy"), "--out",
                        str(out_dir), "--check", str(tmp / "ref.npy"), "--runs", "3"], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, "wgml run: exit 0")
    check("3 runs: best" in r.stdout and "output 0: float32 [4, 8]" in r.stdout, "wgml run: prints timing and shapes")
    got = np.load(out_dir / "output_0.npy")
    check(got.shape == (4, 8) and np.abs(got - ref.numpy()).max() < 1e-5, "wgml run: output_0.npy matches eager PyTorch")
    line = [l for l in r.stdout.splitlines() if l.startswith("check output 0")]
    check(bool(line) and float(line[0].split("max abs error ")[1].split(",")[0]) < 1e-5, "wgml run --check: small error")
    # bad inputs through the CLI
    np.save(tmp / "bad_shape.npy", np.zeros((3, 16), np.float32))
    np.save(tmp / "bad_dtype.npy", np.zeros((4, 16), np.int32))
    for f, want in (("bad_shape.npy", "the program takes 64"), ("bad_dtype.npy", "holds int32, the program takes float32")):
        r = subprocess.run([str(build / "wgml"), "run", str(tmp / "mlp.pte"), "--input", "0", str(tmp / f)],
                           capture_output=True, text=True)
        check(r.returncode == 1 and want in r.stderr, "wgml run rejects %s: %s" % (f, r.stderr.strip()))
    (tmp / "trunc.pte").write_bytes(pte[: len(pte) // 2])
    r = subprocess.run([str(build / "wgml"), "run", str(tmp / "trunc.pte")], capture_output=True, text=True)
    check(r.returncode == 1 and "program:" in r.stderr, "wgml run rejects a truncated program: %s" % r.stderr.strip())


def bad_programs(rt, progs):
    pte = progs[("mlp", "vulkan")]
    # an operator wgml does not know: the load error names it
    i = pte.find(b"aten.relu.default")
    check(i > 0, "the MLP program names aten.relu.default")
    bad = pte[:i] + b"aten.relu.defaulx" + pte[i + len(b"aten.relu.default"):]
    try:
        rt.run(bad, [torch.randn(4, 16)])
        check(False, "an unknown operator is refused")
    except etrun.ProgramError as e:
        check(e.stage == "load" and "unsupported operator" in str(e) and "aten.relu.defaulx" in str(e),
              "an unknown operator is refused at load: %s" % e)
    # wrong input size through the C API
    lib = rt.lib
    buf = bytes(pte)
    p = lib.wgml_program_load_bytes(rt.ctx, buf, len(buf), None)
    check(bool(p), "the MLP program loads")
    x = np.zeros((3, 16), np.float32)
    s = lib.wgml_program_set_input(p, 0, x.ctypes.data, x.nbytes)
    check(s != 0 and "192 bytes given, it takes 256" in rt.err(), "a wrong input size is refused: %s" % rt.err())
    s = lib.wgml_program_set_input(p, 5, x.ctypes.data, x.nbytes)
    check(s != 0 and "input 5 out of range" in rt.err(), "an input index out of range is refused: %s" % rt.err())
    big = np.full((4, 16), 1 << 40, np.int64)
    lib.wgml_program_free(p)
    # every prefix of a program fails cleanly (no crash): a sample of cut points
    n_ok = 0
    for cut in range(0, len(pte), max(1, len(pte) // 40)):
        try:
            rt.run(pte[:cut], [torch.randn(4, 16)])
        except etrun.ProgramError:
            n_ok += 1
    check(n_ok == len(range(0, len(pte), max(1, len(pte) // 40))), "truncated programs are refused (%d cut points)" % n_ok)
    del big


def run_torchvision(rt, seed):
    """A model of ExecuTorch's suite (models/test_torchvision.py): MobileNetV2 (convolutions
    plain, strided and depthwise, batch norm, ReLU6, residual adds, adaptive average pooling,
    linear) at 64x64, exported with the WebGPU and the Vulkan partitioner, against float64
    PyTorch on fresh inputs. The error is relative to the largest reference logit."""
    try:
        import torchvision
    except ImportError:
        print("torchvision is not installed in venv-pt: not run")
        return
    torch.manual_seed(1234)
    model = torchvision.models.mobilenet_v2()
    # Batch-norm statistics from a few random batches (the initial ones, mean 0 and variance 1,
    # let the activations vanish through the net: logits ~1e-9), on one thread and rounded so
    # that the weights, and so the export cache key, are the same on every run.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # a cumulative average
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with torch.no_grad():
        model.train()
        for _ in range(3):
            model(torch.randn(8, 3, 64, 64))
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.round(m.running_mean * 256) / 256)
                m.running_var.copy_(torch.round(m.running_var * 256).clamp_min(1) / 256)
    torch.set_num_threads(threads)
    model.eval()
    g = torch.Generator().manual_seed(seed + 1)
    shape = (1, 3, 64, 64)
    for part in ("webgpu", "vulkan"):
        pte = export(model, [torch.randn(shape)], part)
        x = torch.randn(shape, generator=g)
        try:
            out = rt.run(pte, [x], runs=2)
        except etrun.ProgramError as e:
            check(False, "mobilenet_v2/%s runs: %s" % (part, e))
            continue
        with torch.no_grad():
            ref = model.double()(x.double())
        model.float()
        ea, _ = max_err(out[0], ref)
        scale = ref.abs().max().item()
        check(out[0].shape == ref.shape and ea <= 1e-4 * max(scale, 1.0),
              "mobilenet_v2/%s: max abs error %.2e (largest logit %.2e) vs float64 PyTorch, %.2f ms" %
              (part, ea, scale, rt.last_seconds * 1e3))


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
    seed = int(os.environ.get("WGML_SEED", str(int(time.time()) % 100000)))
    print("seed", seed)
    rt = etrun.Runtime(build / "libwgml.so")
    progs = run_models(rt, seed)
    bad_programs(rt, progs)
    run_int64(rt)
    with tempfile.TemporaryDirectory() as d:
        run_cli(build, progs[("mlp", "vulkan")], Path(d))
    run_torchvision(rt, seed)
    rt.close()
    print("%d failures" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
