"""Reads what a C test wrote with th_dump, and runs a C test in dump mode.

A case is a dict {name: numpy array}. Used by tests/py/test_torch_*.py, which recompute each
case with PyTorch in float64 and compare with wgml's outputs."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

DTYPES = {"f32": np.float32, "i32": np.int32, "u32": np.uint32, "bool": np.uint8}


def run_dump(build_dir, test_name, extra_env=None):
    """Runs build_dir/tests/<test_name> --dump into a temporary folder; returns {case: {name: array}}."""
    exe = os.path.join(build_dir, "tests", test_name)
    out = tempfile.mkdtemp(prefix="wgml-dump-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)  # on every exit, failures' too
    env = dict(os.environ)
    env.update(extra_env or {})
    proc = subprocess.run([exe, "--dump", out], env=env, capture_output=True, text=True)
    # the seed and every failed check in full (the tail below may not reach them), then the tail
    lines = proc.stdout.splitlines()
    keep = [l for l in lines[:-60] if "seed" in l or "FAIL" in l]
    if keep:
        sys.stdout.write("\n".join(keep) + "\n...\n")
    sys.stdout.write("\n".join(lines[-60:]) + "\n")
    if proc.returncode != 0:
        sys.stdout.write(proc.stderr[-4000:])
        raise SystemExit(f"{test_name} --dump failed with exit code {proc.returncode}")
    return load(out)


def load(folder):
    cases = {}
    with open(os.path.join(folder, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            case, name, dtype, rank = parts[0], parts[1], parts[2], int(parts[3])
            shape = tuple(int(x) for x in parts[4:4 + rank])
            data = np.fromfile(os.path.join(folder, f"{case}.{name}.bin"), dtype=DTYPES[dtype])
            cases.setdefault(case, {})[name] = data.reshape(shape)
    return cases


class Checker:
    """Counts passes and failures; an element fails only when both abs and rel error exceed
    the tolerance; NaN in the result always fails."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def close(self, name, got, ref, atol, rtol):
        got = np.asarray(got, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if got.shape != ref.shape:
            print(f"FAIL: {name}: shape {got.shape}, want {ref.shape}")
            self.failed += 1
            return False
        err = np.abs(got - ref)
        rel = err / np.maximum(np.abs(ref), 1e-30)
        bad = (np.isnan(got) & ~np.isnan(ref)) | ((err > atol) & (rel > rtol))
        if bad.any():
            i = int(np.argmax(bad.reshape(-1)))
            print(f"FAIL: {name}: {int(bad.sum())} of {bad.size} off; first at {i}: "
                  f"got {got.reshape(-1)[i]!r}, want {ref.reshape(-1)[i]!r}")
            self.failed += 1
            return False
        print(f"  ok {name:50s} max abs err {float(np.nanmax(err)) if err.size else 0:.3g}")
        self.passed += 1
        return True

    def check(self, name, ok, detail=""):
        """A yes/no check: counts and prints like close()."""
        if ok:
            print(f"  ok {name}")
            self.passed += 1
        else:
            print(f"FAIL: {name}: {detail}")
            self.failed += 1
        return ok

    def done(self):
        print(f"{self.passed} passed, {self.failed} failed")
        if self.passed == 0:
            print("FAIL: no case was compared")
            return 1
        return 1 if self.failed else 0


def write_gguf_case(out, name, qt, blocks, x, m, d=None, ids=None):
    """One case of `test_qw --gguf-check` in folder out: the GGUF blocks of an [n, k] weight of
    type qt, an input x [max(m, 1), k] and M (0: dequantise on the host only; else also
    uploaded, run forward and dequantised on the GPU), and optionally d_out [m, n] for the
    input gradient and ids (int32 [t]) for the embedding lookup."""
    n = blocks.shape[0]
    k = x.shape[-1]
    blocks.tofile(os.path.join(out, f"{name}.blocks"))
    x.tofile(os.path.join(out, f"{name}.x"))
    if d is not None:
        np.ascontiguousarray(d, dtype=np.float32).tofile(os.path.join(out, f"{name}.d"))
    if ids is not None:
        np.ascontiguousarray(ids, dtype=np.int32).tofile(os.path.join(out, f"{name}.ids"))
    with open(os.path.join(out, f"{name}.meta"), "w") as f:
        f.write(f"{int(qt)} {n} {k} {m}\n")


def run_gguf_check(build_dir, out, cases):
    """Runs build_dir/tests/test_qw --gguf-check on the cases written into out (a list of
    (name, n, k, deq): deq is the reference dequantisation, float32 [n, k]) and compares wgml's
    host dequantisation with it bit for bit, and for the cases run on the GPU (M > 0) the GPU
    dequantisation too. Returns the Checker, for the caller's own checks."""
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(c[0] for c in cases) + "\n")
    exe = os.path.join(build_dir, "tests", "test_qw")
    proc = subprocess.run([exe, "--gguf-check", out], capture_output=True, text=True)
    sys.stdout.write(proc.stdout[-3000:])
    if proc.returncode != 0:
        sys.stdout.write(proc.stderr[-3000:])
        raise SystemExit(f"test_qw --gguf-check failed with exit code {proc.returncode}")
    checker = Checker()
    for name, n, k, deq in cases:
        with open(os.path.join(out, f"{name}.meta")) as f:
            m = int(f.read().split()[3])
        for ext, what in [("deq", "host")] + ([("gdeq", "GPU")] if m else []):
            path = os.path.join(out, f"{name}.{ext}")
            if not os.path.exists(path):
                checker.check(f"{name} {what} dequantize", False, f"{path} was not written")
                continue
            got = np.fromfile(path, dtype=np.float32).reshape(n, k)
            bad = int(np.sum(got.view(np.uint32) != deq.view(np.uint32)))
            checker.check(f"{name} {what} dequantize bit-exact ({n}x{k})", bad == 0, f"{bad} differ")
    return checker


def check_logits(check, got, want, gpu_next, npre, n_dec, name, atol, rtol):
    """The model parity tests' logit checks, reported through check(ok, what): wgml's logits
    `got` [n_dec + 1, V] against the reference's `want` element-wise within atol + rtol·|want|;
    wgml's greedy next token (gpu_next, the GPU's argmax) equal to the reference's wherever the
    reference's top two logits are more than 1e-2 apart; and the GPU's argmax equal to the argmax
    of the read-back logits. Row r is position npre - 1 + r."""
    err = np.abs(got - want)
    bound = atol + rtol * np.abs(want)
    print("     max |err| %.2e, max |ref| %.1f, worst err/bound %.3f" % (err.max(), np.abs(want).max(),
                                                                        (err / bound).max()))
    check(bool((err <= bound).all()), "logits " + name)
    for row in range(n_dec + 1):
        top2 = np.sort(want[row])[-2:]
        pos = npre - 1 + row
        if top2[1] - top2[0] > 1e-2:
            check(gpu_next[row] == int(np.argmax(want[row])),
                  "greedy next token at position %d: wgml %d, reference %d" % (
                      pos, gpu_next[row], int(np.argmax(want[row]))))
        check(gpu_next[row] == int(np.argmax(got[row])), "GPU argmax equals argmax of read-back logits")


class Tally:
    """The model parity tests' count: tally(ok, what) prints and counts one check; done() prints
    the totals and gives the exit code."""

    def __init__(self):
        self.passes = self.failures = 0

    def __call__(self, ok, what):
        if ok:
            self.passes += 1
        else:
            self.failures += 1
        print(("ok   " if ok else "FAIL ") + what)

    def done(self):
        print("%d passed, %d failed" % (self.passes, self.failures))
        return 1 if self.failures else 0


def parity_start(build_dir, model):
    """The model parity tests' start: (tool_model's path, a Tally, whether model is there). A
    missing model file is a failed check, not a skip (scripts/setup.sh installs it)."""
    check = Tally()
    there = os.path.exists(model)
    if not there:
        check(False, "model file missing (run scripts/setup.sh): " + model)
    import torch
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    return os.path.join(build_dir, "tests", "tool_model"), check, there


def parity_logits(check, tool, model, prompts, reference, atol, rtol, label=""):
    """The model parity tests' loop: each prompt (text, decode steps[, special tokens]) encoded by
    wgml's tokenizer (`tool_model encode`, with --special when the third item is true), wgml's
    logits for all of them from one `tool_model logits` process
    (a prefill of all but the last `decode steps` tokens, then those steps through the KV cache)
    against reference(ids) [len(ids), V] from the prefill's last position on (check_logits)."""
    seqs = []
    for text, n_dec, *special in prompts:
        args = [tool, "encode", model] + (["--special"] if special and special[0] else [])
        out = subprocess.run(args, input=text.encode(), capture_output=True, check=True).stdout
        ids = [int(x) for x in out.split()]
        seqs.append((text, ids, len(ids) - n_dec, n_dec))
    got_all = run_tool_logits(tool, model, [(ids, npre, n_dec) for _, ids, npre, n_dec in seqs])
    if got_all is None:
        check(False, label + "tool_model logits failed")
        return
    rows, gpu_all = got_all
    at = 0
    for text, ids, npre, n_dec in seqs:
        got, gpu_next = rows[at:at + n_dec + 1], gpu_all[at:at + n_dec + 1]
        at += n_dec + 1
        want = np.asarray(reference(ids))[npre - 1:]
        name = "%s%r (%d tokens: prefill %d + %d decode steps)" % (label, text[:32], len(ids), npre, n_dec)
        check_logits(check, got, want, gpu_next, npre, n_dec, name, atol, rtol)


def run_tool_logits(tool, model, seqs):
    """The model parity tests' wgml side: one `tool_model logits` process for every sequence
    (ids, npre, n_dec), which prefills ids[:npre] and decodes the rest step by step. Returns the
    logits rows [sum of n_dec + 1, V] as float64 and the GPU's greedy tokens, one per row, or
    None after printing the tool's error."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.bin")
        lines = "".join("%d %s\n" % (npre, " ".join(map(str, ids))) for ids, npre, _ in seqs)
        t0 = time.time()
        r = subprocess.run([tool, "logits", model, out], input=lines.encode(), capture_output=True)
        print("wgml (one process: load, graph builds, %d sequences) %.1f s" % (len(seqs), time.time() - t0))
        print(r.stderr.decode().rstrip())
        if r.returncode != 0:
            return None
        rows = np.fromfile(out, dtype=np.float32).astype(np.float64)
        gpu_all = [int(x) for x in r.stdout.split()]
    return rows.reshape(len(gpu_all), rows.size // len(gpu_all)), gpu_all


def gguf_copy(src, dst, convert=None, extra=()):
    """Writes GGUF file dst with src's metadata and tensors (the model parity tests' variants of a
    real file). convert(name, reader_tensor) may give (blocks or array, GGML type) to store
    instead, or None to copy the tensor as it is; extra: (name, float32 array) tensors added
    after src's. Returns the names convert replaced."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    r = GGUFReader(src)
    w = GGUFWriter(dst, r.fields["general.architecture"].contents())
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        sub = f.types[-1] if f.types[0] == GGUFValueType.ARRAY else None
        w.add_key_value(f.name, f.contents(), f.types[0], sub_type=sub)
    replaced = []
    for t in r.tensors:
        new = convert(t.name, t) if convert else None
        if new is None:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
        else:
            w.add_tensor(t.name, new[0], raw_dtype=new[1])
            replaced.append(t.name)
    for name, a in extra:
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return replaced
