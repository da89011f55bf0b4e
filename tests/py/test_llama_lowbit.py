"""The low-bit GGUF types in a whole model: SmolLM2-135M-Instruct's file with ffn_down in Q3_K,
Q2_K and IQ4_XS (by layer; its K = 1,536 is whole super-blocks of 256) and attn_q / attn_output
in IQ4_NL (K = 576, blocks of 32) in a third of the layers, the mix a Q2_K, Q3_K_M or IQ4_XS
file of llama.cpp holds. The blocks come from tests/py/lowbit_quant.py (round-to-nearest from
the file's own weights, dequantised by PyPI gguf); every other tensor is copied as it is.

wgml's logits (`tool_model logits`: a prefill, then decode steps through the KV cache) against
tests/py/llama_ref.py, the float64 Llama over the same file dequantised by PyPI gguf, with
test_llama_logits.py's bounds: both sides read the same blocks, so the difference is wgml's
fp32 rounding (the quantiser's error is in both).
Usage: test_llama_lowbit.py BUILD_DIR"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType, GGUFWriter, quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import Llama  # noqa: E402
from lowbit_quant import quantize  # noqa: E402
from wgml_dump import check_logits, run_tool_logits  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
ATOL, RTOL = 1e-3, 1e-5
PROMPTS = [("The capital of France is", 3), ("In the beginning God created the heaven and the earth.", 0)]
DOWN = {0: QT.Q3_K, 1: QT.Q2_K, 2: QT.IQ4_XS}  # layer % 4 -> ffn_down's type (3: as in the file)

failures = passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
    print(("ok   " if ok else "FAIL ") + what)


def new_type(name):
    """The type tensor `name` takes in the low-bit file, or None to copy it."""
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name)
    if not m:
        return None
    layer, what = int(m.group(1)), m.group(2)
    if what == "ffn_down":
        return DOWN.get(layer % 4)
    if what in ("attn_q", "attn_output") and layer % 3 == 0:
        return QT.IQ4_NL
    return None


def write_lowbit(src, dst):
    """Copies src's metadata and tensors into dst, the tensors new_type names requantised.
    Returns the count of each new type."""
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        sub = f.types[-1] if f.types[0] == GGUFValueType.ARRAY else None
        w.add_key_value(f.name, f.contents(), f.types[0], sub_type=sub)
    counts = {}
    for t in r.tensors:
        qt = new_type(t.name)
        if qt is None:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
            continue
        n, k = int(t.shape[1]), int(t.shape[0])
        deq = quants.dequantize(t.data, t.tensor_type).reshape(n, k)
        w.add_tensor(t.name, quantize(deq, qt), raw_dtype=qt)
        counts[qt.name] = counts.get(qt.name, 0) + 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return counts


def main():
    build = sys.argv[1]
    tool = os.path.join(build, "tests", "tool_model")
    if not os.path.exists(MODEL):
        print("FAIL: model file missing (run scripts/setup.sh):", MODEL)
        return 1
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "smollm2-lowbit.gguf")
        t0 = time.time()
        counts = write_lowbit(MODEL, path)
        print("wrote %s in %.1f s: %s" % (path, time.time() - t0, counts))
        check(counts == {"Q3_K": 8, "Q2_K": 8, "IQ4_XS": 7, "IQ4_NL": 20}, "the file holds every low-bit type")
        # the copied tensors are byte for byte the source's
        src = {t.name: t for t in GGUFReader(MODEL).tensors}
        same = all(np.array_equal(np.asarray(t.data), np.asarray(src[t.name].data))
                   for t in GGUFReader(path).tensors if new_type(t.name) is None)
        check(same, "every other tensor copied unchanged")
        ref = Llama(path)
        seqs = []
        for text, n_dec in PROMPTS:
            out = subprocess.run([tool, "encode", path], input=text.encode(), capture_output=True, check=True).stdout
            ids = [int(x) for x in out.split()]
            seqs.append((text, ids, len(ids) - n_dec, n_dec))
        got_all = run_tool_logits(tool, path, [(ids, npre, n_dec) for _, ids, npre, n_dec in seqs])
        if got_all is None:
            check(False, "tool_model logits failed")
        else:
            rows, gpu_all = got_all
            at = 0
            for text, ids, npre, n_dec in seqs:
                got, gpu_next = rows[at:at + n_dec + 1], gpu_all[at:at + n_dec + 1]
                at += n_dec + 1
                want = ref.logits(ids)[npre - 1:].numpy()
                name = "%r (%d tokens: prefill %d + %d decode steps)" % (text[:32], len(ids), npre, n_dec)
                check_logits(check, got, want, gpu_next, npre, n_dec, name, ATOL, RTOL)
    print("%d passed, %d failed" % (passes, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
