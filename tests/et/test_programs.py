"""Whole ExecuTorch programs on wgml, against eager PyTorch in float64:
  - an MLP, a transformer block (GQA attention with RoPE, RMSNorm, SwiGLU) and a small CNN (2-D
    convolutions with padding, stride, dilation and groups, average pooling, a 1-D convolution;
    tests/et/models.py),
    each exported with the Vulkan partitioner and with the WebGPU partitioner (whose allow list
    leaves part of the graph to portable kernels: wgml runs that glue too), through the C API
    (ctypes) with fresh random inputs, several runs of one loaded program;
  - a torchvision model of ExecuTorch's suite (models/test_torchvision.py): MobileNetV2 at
    64x64 with both partitioners, against float64 PyTorch;
  - exports that keep portable kernels or fused operators (run_exports): an attention block
    with scaled_dot_product_attention (causal with GQA, and under a boolean mask input),
    ConvNeXt and Swin Transformer V2 of the suite (reduced), tiny transformers Llama, BERT (with
    a padding mask) and Phi-3 (the Vulkan partitioner's fused rotary embedding), against float64
    PyTorch;
  - the CLI: `wgml run` with .npy inputs, --out and --check;
  - bad input: wrong input sizes, a wrong-shaped or wrong-dtype .npy, an unknown operator (the
    load error lists it), a truncated file: clear errors, never a crash.
The programs come from the committed fixture (tests/et/programs.py names them; the module each
test builds must be the one its program was exported from).

    test_programs.py BUILD_DIR
"""
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
import fixture  # noqa: E402
import programs  # noqa: E402

ROOT = HERE.parent.parent
FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def program(fx, name):
    """(the module, its example inputs, the program's bytes) of a named program of the fixture."""
    return programs.build_checked(fx, name)


def max_err(got, ref):
    d = (torch.from_numpy(got).double() - ref).abs()
    return d.max().item(), (d / ref.abs().clamp_min(1e-6)).max().item()


def run_models(rt, fx, seed):
    g = torch.Generator().manual_seed(seed)
    progs = {}
    for name in ("mlp", "block", "conv", "conv_bn"):
        for part in ("vulkan", "webgpu"):
            model, example, pte = program(fx, "%s-%s" % (name, part))
            shape = example[0].shape
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
    return progs


def run_int64(rt, fx):
    """int64 ids in, int64 argmax out: narrowed on upload, widened on readback; an id outside the
    int32 range is an error naming it."""
    model, _, pte = program(fx, "embed_argmax-vulkan")
    ids = torch.randint(0, 50, (3, 5))
    try:
        logits, idx = rt.run(pte, [ids])
    except etrun.ProgramError as e:
        check(False, "int64 program runs: %s" % e)
        return
    with torch.no_grad():
        ref_logits, ref_idx = model.double()(ids)
    check(idx.dtype == np.int64 and np.array_equal(idx, ref_idx.numpy()),
          "int64 output widened: argmax equals PyTorch's (%s)" % idx.dtype)
    check((torch.from_numpy(logits).double() - ref_logits).abs().max().item() < 1e-5,
          "int64 ids narrowed: logits match PyTorch's")
    lib = rt.lib
    buf = bytes(pte)
    p = lib.wgml_program_load_bytes(rt.ctx, buf, len(buf), None)
    big = np.array(ids.numpy(), dtype=np.int64)
    big[1, 2] = 1 << 40
    s = lib.wgml_program_set_input(p, 0, big.ctypes.data, big.nbytes)
    check(s != 0 and "element 7 = 1099511627776 is out of the int32 range" in rt.err(),
          "an int64 input outside int32 is refused: %s" % rt.err())
    lib.wgml_program_free(p)


def run_cli(build, fx, tmp):
    model, _, pte = program(fx, "mlp-vulkan")
    x = torch.randn(4, 16)
    ref = model.float()(x).detach()
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


def run_torchvision(rt, fx, seed):
    """A model of ExecuTorch's suite (models/test_torchvision.py): MobileNetV2 (convolutions
    plain, strided and depthwise, batch norm, ReLU6, residual adds, adaptive average pooling,
    linear) at 64x64, exported with the WebGPU and the Vulkan partitioner, against float64
    PyTorch on fresh inputs. The error is relative to the largest reference logit."""
    g = torch.Generator().manual_seed(seed + 1)
    for part in ("webgpu", "vulkan"):
        model, example, pte = program(fx, "mobilenet_v2-" + part)
        x = torch.randn(example[0].shape, generator=g)
        try:
            out = rt.run(pte, [x], runs=2)
        except etrun.ProgramError as e:
            check(False, "mobilenet_v2/%s runs: %s" % (part, e))
            continue
        with torch.no_grad():
            ref = model.double()(x.double())
        ea, _ = max_err(out[0], ref)
        scale = ref.abs().max().item()
        check(out[0].shape == ref.shape and ea <= 1e-4 * max(scale, 1.0),
              "mobilenet_v2/%s: max abs error %.2e (largest logit %.2e) vs float64 PyTorch, %.2f ms" %
              (part, ea, scale, rt.last_seconds * 1e3))


# The named programs whose exports keep portable kernels or fused operators (tests/et/programs.py):
# the attention block with SDPA (causal with GQA, and under a boolean mask input with a query
# that sees no key) and ConvNeXt and Swin V2 of ExecuTorch's suite, transformers' Llama and BERT
# (with a padding mask), each with both partitioners, and Phi-3 with the Vulkan one (its fused
# rotary embedding).
EXPORTS = [n for n in programs.SPECS if n.split("-")[0] in ("sdpa_causal", "sdpa_mask", "convnext", "swin_v2", "llama",
                                                             "phi3", "bert")]


def run_exports(rt, fx, seed):
    """Each of EXPORTS on fresh inputs (the module's own input distribution: random tokens,
    padding masks, boolean attention masks) against the module in float64, twice. The bound is
    1e-5 of the largest reference value: both sides run a dozen float32 layers at most, whose
    rounding (reductions of <= 128 terms, softmax, norms) came to <= 5e-7 of that scale on every
    program here, so 1e-5 leaves a 20x margin, while an operator computed wrong moves the output
    by the order of its scale."""
    g = torch.Generator().manual_seed(seed + 2)
    for name in EXPORTS:
        model, _, pte = program(fx, name)
        ref_model = model.double()
        for run in range(2):
            inputs = model.example(g)
            try:
                out = rt.run(pte, list(inputs), runs=2)
            except etrun.ProgramError as e:
                check(False, "%s runs: %s" % (name, e))
                break
            with torch.no_grad():
                ref = ref_model(*[x.double() if x.is_floating_point() else x for x in inputs])
            ea, _ = max_err(out[0], ref)
            scale = ref.abs().max().item()
            check(out[0].shape == tuple(ref.shape) and ea <= 1e-5 * max(scale, 1e-3),
                  "%s run %d: max abs error %.2e (largest output %.2e) vs float64 PyTorch, %.2f ms" %
                  (name, run, ea, scale, rt.last_seconds * 1e3))


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
    seed = int(os.environ.get("WGML_SEED", str(int(time.time()) % 100000)))
    print("seed", seed)
    fx = fixture.open_for(build)
    rt = etrun.Runtime(build / "libwgml.so")
    progs = run_models(rt, fx, seed)
    bad_programs(rt, progs)
    run_int64(rt, fx)
    with tempfile.TemporaryDirectory() as d:
        run_cli(build, fx, Path(d))
    run_torchvision(rt, fx, seed)
    run_exports(rt, fx, seed)
    rt.close()
    print("%d failures" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
